"""Typed readers of stack config: each value checked where it is read, each error naming the full key.

The Pulumi CLI hands a program its config as strings (objects and lists as JSON text). These readers
turn them into typed values or raise ConfigError with the key, the problem and the command that fixes
it; `reject_unknown` also refuses keys nobody reads, with a "did you mean" for typos.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pulumi

from trainstack.infra.config.errors import NAMESPACE, ConfigError, set_hint


def raw_config() -> dict[str, str]:
    """Every stack config key as the Pulumi CLI hands it to the program (values are strings; objects JSON).

    The CLI passes config in the PULUMI_CONFIG environment variable; tests set it with set_all_config.
    """
    merged = dict(pulumi.runtime.get_config_env())
    merged.update(pulumi.runtime.config.CONFIG.get())
    return merged


def as_int(value: Any, key: str, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key, f"expected a whole number, got {value!r}", set_hint(key, "<number>"))
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"must be at least {minimum}, got {value}", set_hint(key, str(minimum)))
    if maximum is not None and value > maximum:
        raise ConfigError(key, f"must be at most {maximum}, got {value}", set_hint(key, str(maximum)))
    return value


def as_number(value: Any, key: str, minimum: float | None = None) -> float:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
            float("inf"), float("-inf")):
        raise ConfigError(key, f"expected a number, got {value!r}", set_hint(key, "<number>"))
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"must be at least {minimum}, got {value}", set_hint(key, str(minimum)))
    return float(value)


def as_bool(value: Any, key: str) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise ConfigError(key, f"expected true or false, got {value!r}", set_hint(key, "true"))
    return value


def as_str(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"expected a non-empty string, got {value!r}", set_hint(key, "<text>"))
    return value.strip()


def as_choice(value: Any, key: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, compared case-insensitively, returned as the choice is spelt."""
    text = as_str(value, key)
    for choice in choices:
        if text.lower() == choice.lower():
            return choice
    raise ConfigError(key, f"expected one of {', '.join(choices)}, got {text!r}", set_hint(key, choices[0]))


def as_str_list(value: Any, key: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    value = decoded(value)
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(key, f"expected a list of strings, got {value!r}", set_hint(key + "[0]", "<text>"))
    if not value and not allow_empty:
        raise ConfigError(key, "must not be empty", set_hint(key + "[0]", "<text>"))
    stripped = [v.strip() for v in value]  # " g5.xlarge" and "g5.xlarge" are one value to every cloud API
    if len(set(stripped)) != len(stripped):
        raise ConfigError(key, f"lists a value twice: {value!r}", f"remove the repeat from {key}")
    return tuple(stripped)


def as_str_map(value: Any, key: str) -> dict[str, str]:
    value = decoded(value)
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(key, f"expected a map of strings, got {value!r}", set_hint(key + ".<name>", "<text>"))
    return dict(value)


def as_object(value: Any, key: str) -> dict[str, Any]:
    value = decoded(value)
    if not isinstance(value, dict):
        raise ConfigError(key, f"expected an object, got {value!r}", f"write {key} as a YAML mapping")
    return value


def decoded(value: Any) -> Any:
    """Top-level lists and objects arrive as JSON text; anything else is taken as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def ipv4_block(value: str, key: str, fix: str) -> ipaddress.IPv4Network:
    """An IPv4 CIDR block; one whose address has bits set past the prefix (10.0.0.1/16) is named as such,
    with the block it lies in, since that is the one slip the clouds' APIs and ipaddress both refuse."""
    try:
        return ipaddress.IPv4Network(value)
    except ValueError:
        pass
    try:
        block = ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        raise ConfigError(key, f"{value!r} is not an IPv4 CIDR block", fix) from None
    raise ConfigError(key, f"{value} has bits set past its /{block.prefixlen} prefix", f"write the block's first "
                      f"address: {block}")


def as_cidr_list(value: Any, key: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    """A list of IPv4 CIDR blocks (allow-lists)."""
    cidrs = as_str_list(value, key, allow_empty=allow_empty)
    for cidr in cidrs:
        ipv4_block(cidr, key, "use blocks like 203.0.113.7/32 (your address: curl -s https://checkip.amazonaws.com)")
    return cidrs


# Config namespaces of each cloud's providers; a stack on one cloud warns about the other's keys (they
# would be ignored without a word, e.g. gcp:project on the aws stack).
CLOUD_NAMESPACES = {"aws": ("aws", "eks"), "gcp": ("gcp", "google-native", "google-beta")}


# Blocks no client address is ever in (RFC 6890 special-purpose registry, RFC 6598 for 100.64.0.0/10):
# an allow-list entry inside one lets nobody in, and the cloud APIs refuse some of them outright.
UNROUTABLE_BLOCKS: Mapping[str, ipaddress.IPv4Network] = {
    "\"this network\" (0.0.0.0/8)": ipaddress.IPv4Network("0.0.0.0/8"),
    "loopback (127.0.0.0/8)": ipaddress.IPv4Network("127.0.0.0/8"),
    "link-local (169.254.0.0/16)": ipaddress.IPv4Network("169.254.0.0/16"),
    "shared carrier-grade NAT space (100.64.0.0/10)": ipaddress.IPv4Network("100.64.0.0/10"),
    "multicast (224.0.0.0/4)": ipaddress.IPv4Network("224.0.0.0/4"),
    "reserved (240.0.0.0/4)": ipaddress.IPv4Network("240.0.0.0/4"),
}


# Where a cluster's own networks may lie: RFC 1918's private blocks and RFC 6598's shared space, which both
# clouds accept for VPCs and subnets (AWS VPC user guide, vpc-cidr-blocks.html; Google Cloud VPC docs,
# subnets "Valid IPv4 ranges"). Python's is_private also admits 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16 and
# 240.0.0.0/4, which Google lists as prohibited subnet ranges and AWS refuses for a VPC.
RFC1918_BLOCKS = tuple(ipaddress.IPv4Network(b) for b in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
PRIVATE_BLOCKS = (*RFC1918_BLOCKS, ipaddress.IPv4Network("100.64.0.0/10"))
PRIVATE_BLOCKS_TEXT = "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10"


def is_private_block(network: ipaddress.IPv4Network) -> bool:
    return any(network.subnet_of(block) for block in PRIVATE_BLOCKS)


def unroutable_reason(cidr: str, *, allow_shared: bool = False) -> str | None:
    """Which special-purpose block `cidr` lies in, or None; 0.0.0.0/0 (any address) is routable."""
    network = ipaddress.IPv4Network(cidr)
    for name, block in UNROUTABLE_BLOCKS.items():
        if allow_shared and block.prefixlen == 10:
            continue
        if network.prefixlen >= block.prefixlen and network.subnet_of(block):
            return name
    return None


def check_stack_keys(raw: Mapping[str, str], allowed: tuple[str, ...], provider: str, provider_keys: tuple[str, ...],
                     provider_fix: str = "") -> None:
    """Every `trainstack:*` key is one the stack reads, every `<provider>:*` one its explicit provider takes,
    and a key of another cloud's providers is named in a warning."""
    for key in sorted(raw):
        namespace = key.split(":", 1)[0]
        for cloud, namespaces in CLOUD_NAMESPACES.items():
            if cloud != provider and namespace in namespaces:
                # A warning, not a refusal: a shared Pulumi ESC environment may set both clouds' keys for
                # every stack that imports it; the user still learns the key does nothing here.
                pulumi.log.warn(f"{key}: belongs to {cloud.upper()}, and this stack builds on {provider.upper()}: "
                                f"ignored (pulumi config rm {key} if it was meant for the {cloud} stack)")
    ours = {key.split(":", 1)[1] for key in raw if key.startswith(NAMESPACE + ":")}
    reject_unknown(NAMESPACE + ":", ours, allowed)
    for key in sorted(raw):
        if key.startswith(provider + ":") and key.split(":", 1)[1] not in provider_keys:
            taken = " and ".join(f"{provider}:{name}" for name in provider_keys)
            raise ConfigError(key, f"trainstack's {provider} provider takes only {taken}",
                              f"pulumi config rm {key}{provider_fix}")


def reject_unknown(prefix: str, keys: Iterable[str], allowed: tuple[str, ...]) -> None:
    for name in sorted(keys):
        if name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=1)
            hint = f"did you mean {prefix}{close[0]}?" if close else f"known keys: {', '.join(allowed)}"
            raise ConfigError(f"{prefix}{name}", "unknown key", f"remove it or rename it ({hint})")


def check_scaling(key: str, min_size: int, max_size: int, desired: int | None = None) -> None:
    """`key.min` <= `key.desired` <= `key.max`, and room for at least one node."""
    if min_size > max_size:
        raise ConfigError(f"{key}.min", f"min ({min_size}) is greater than max ({max_size})",
                          set_hint(f"{key}.min", str(max_size)))
    if desired is not None and not min_size <= desired <= max_size:
        raise ConfigError(f"{key}.desired", f"desired ({desired}) must lie between min ({min_size}) and max "
                          f"({max_size})", set_hint(f"{key}.desired", str(max(min_size, min(desired, max_size)))))
    if max_size < 1:
        raise ConfigError(f"{key}.max", "must be at least 1", set_hint(f"{key}.max", "1"))
