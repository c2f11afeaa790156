"""Outputs whose value a part knew when it made them, so that the next part may take them where it needs values.

EksCluster's and GkeGpuNodePool's GPU outputs (gpusPerNode, the node selector, the tolerations) are decided by
their inputs, not by the cloud: the value is known while the program runs. TrainingPlatform sizes its queue
and its job from them, which it must do while the program runs too (resources are never created inside an
apply). A part makes such an output with `known_output(value)`; `known` gives the value back for
exactly those outputs (by identity, so nothing is read from the Output's internals). Any other Output in a
place that needs a value is refused with the property's name (trainstack/infra/config/loader.py).
"""

import weakref
from typing import Any

import pulumi

_KNOWN: "weakref.WeakKeyDictionary[pulumi.Output[Any], Any]" = weakref.WeakKeyDictionary()


def known_output(value: Any) -> pulumi.Output[Any]:
    """An Output of `value` that a later part may unwrap (is_known, known)."""
    output = pulumi.Output.from_input(value)
    _KNOWN[output] = value
    return output


def is_known(value: Any) -> bool:
    """Whether `value` is an output made by known_output."""
    return isinstance(value, pulumi.Output) and value in _KNOWN


def known(value: pulumi.Output[Any]) -> Any:
    """The value of an output made by known_output."""
    return _KNOWN[value]
