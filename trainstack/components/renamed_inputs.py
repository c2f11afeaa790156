"""Component inputs renamed when "pod" and "node" got one meaning each, still taken under their old names.

Pulumi's schema inference (pulumi 3.272, pulumi/provider/experimental/schema.py Property) has no
deprecationMessage, so the old names stay plain properties whose description says "Deprecated"; this
module moves their values to the new names with one warning each, as the stack file's parser does for
trainstack:job (trainstack/infra/config/job.py _renamed). Old and new both set is an error.
"""

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

import pulumi

from trainstack.components.spelling import camel_case
from trainstack.components.stack_config import InputError

T = TypeVar("T")


def with_new_names(args: T, renamed: Mapping[str, str], component: str) -> T:
    """`args` (a dataclass) with each old field's value under its new field; `renamed` maps old -> new."""
    moved = {}
    for old, new in renamed.items():
        value = getattr(args, old)
        if value is None:
            continue
        if getattr(args, new) is not None:
            raise InputError(f"{component}: both {camel_case(old)} and {camel_case(new)} are set ({camel_case(new)} "
                             f"replaces {camel_case(old)}). Fix: remove the input {camel_case(old)}")
        pulumi.log.warn(f"{component}: the input {camel_case(old)} is deprecated: rename it to {camel_case(new)} "
                        "(same meaning: per pod of the job)")
        moved.update({new: value, old: None})
    return dataclasses.replace(args, **moved) if moved else args
