"""Lookups that answered nothing: a provider whose settings are other resources' outputs (a region or an
assume-role ARN not known yet) gets every invoke answered with an empty map at preview (pulumi/pulumi
sdk/go/common/resource/plugin/provider_plugin.go, Invoke: `if !pcfg.known { return ... PropertyMap{} }`),
so each field of the answer reads None. A value derived from such a field is unknown, as the engine shows
any value that `up` decides, never None written into a resource's inputs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pulumi


def not_known_yet() -> pulumi.Output[Any]:
    """An Output that is unknown (shown as such in a preview); call it while the program runs (in an apply)."""
    loop = asyncio.get_running_loop()
    value, known = loop.create_future(), loop.create_future()
    value.set_result(None)
    known.set_result(False)
    return pulumi.Output(set(), value, known)
