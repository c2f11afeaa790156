"""`trainstack:job.train`: every flag of `python -m training train`, checked by the trainer's own parser.

The keys are the trainer's flags in camelCase (`--warmup-steps` is `warmupSteps`), taken from
`trainstack.contract.cli.train_flags()`, so a flag the trainer gains is a key here without touching this file.
The chart has first-class values for a few of them (its `train:` block); the rest travel in its
`extraArgs`. The whole command line is then parsed by `trainstack.contract.cli.check_train_args()`, exactly as
the trainer parses it at start, so a value that would fail 20 minutes into `pulumi up` (a NaN
learning rate, a typo in a flag) fails before any resource is registered.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trainstack.contract.cli import Flag, check_train_args, train_flags
from trainstack.contract.errors import UserError
from trainstack.infra.config.errors import ConfigError, set_hint
from trainstack.infra.config.loader import camel_case
from trainstack.infra.config.reader import as_bool, as_int, as_number, as_object, as_str, reject_unknown
from trainstack.infra.kubernetes.training_job import chart_default_values

# Set by the platform and the chart, never by a flag: the run must stay on the shared volume (where
# every node and TensorBoard see it) and read the data set the cache step copied.
PLACED_BY_THE_PLATFORM = ("--data", "--out")


def train_keys() -> dict[str, Flag]:
    return {camel_case(flag.dest): flag for flag in train_flags()}


def _read(flag: Flag, value: Any, key: str) -> Any:
    if flag.kind == "bool":
        return as_bool(value, key)
    if flag.kind == "int":
        return as_int(value, key)
    if flag.kind == "float":
        return as_number(value, key)
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else as_str(value, key)


def _extra_args(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                              for v in value):
        raise ConfigError(key, f"expected a list of command-line words, got {value!r}",
                          set_hint(f"{key}[0]", "--lr"))
    return [str(v) for v in value]


def parse_train(value: Any, key: str) -> dict[str, Any]:
    """The chart's `train` values for `trainstack:job.train`, every flag checked by the trainer's parser."""
    given = as_object(value, key)
    chart = chart_default_values()
    chart_keys = tuple(chart["train"])
    flags = train_keys()
    reject_unknown(f"{key}.", given.keys(), tuple(dict.fromkeys((*chart_keys, *flags))))

    values: dict[str, Any] = {}
    extra: list[str] = []
    for name, raw in given.items():
        if name == "extraArgs":
            continue
        flag = flags.get(name)
        typed = _read(flag, raw, f"{key}.{name}") if flag is not None else raw
        if name in chart_keys:
            values[name] = typed
        elif flag.kind == "bool":
            extra += [flag.flag] if typed else []
        else:
            extra += [flag.flag, str(typed)]

    user_extra = _extra_args(given.get("extraArgs", []), f"{key}.extraArgs")
    given_flags = {flags[name].flag for name in given if name in flags}
    for word in user_extra:
        name = word.split("=", 1)[0]
        if name in PLACED_BY_THE_PLATFORM:
            raise ConfigError(f"{key}.extraArgs", f"{name} would move the run off the shared volume (or away from "
                              "the data the job copies in); the platform sets it", f"remove {name} from {key}.extraArgs "
                              f"(the run directory is {key}.out, under {chart['storage']['mountPath']})")
        if name in given_flags:
            raise ConfigError(f"{key}.extraArgs", f"{name} is also set as a key of {key}",
                              f"set it in one place: remove it from {key}.extraArgs")

    mount = chart["storage"]["mountPath"].rstrip("/")
    out = _run_dir(values, chart)
    if not out.startswith(mount + "/") or ".." in out.split("/"):
        raise ConfigError(f"{key}.out", f"{out!r} is off the shared volume ({mount}): the run would live only in "
                          "one pod and be lost when it ends", set_hint(f"{key}.out", f"{mount}/runs/<name>"))

    merged = {**values, "extraArgs": extra + user_extra}
    try:
        parsed = trainer_args(merged)
    except UserError as error:
        raise ConfigError(key, f"the trainer refuses it: {error}",
                          f"fix {key} (python -m training train --help lists every flag)") from None
    # argparse takes any unambiguous prefix of a flag (--ou, --dat=...), so compare what the trainer
    # parsed, not the words: the run and the data must be where the platform put them.
    placed = {"--data": str({**chart["train"], **values}.get("data") or ""), "--out": out}
    dests = {flag.flag: flag.dest for flag in flags.values()}
    for name, where in placed.items():
        got = getattr(parsed, dests[name], None)
        if got is not None and Path(str(got)) != Path(where):
            raise ConfigError(f"{key}.extraArgs", f"{name} (or an abbreviation of it) would move the run off the "
                              "shared volume (or away from the data the job copies in); the platform sets it",
                              f"remove it from {key}.extraArgs (the run directory is {key}.out, under "
                              f"{chart['storage']['mountPath']})")
    return {**values, **({"extraArgs": merged["extraArgs"]} if merged["extraArgs"] else {})}


def trainer_args(train: dict[str, Any]) -> argparse.Namespace:
    """What the trainer parses from the chart's `train` values (parse_train's result)."""
    flags = train_keys()
    chart = chart_default_values()
    merged = {**chart["train"], **train}
    merged["out"] = _run_dir(merged, chart)
    # The chart's first-class values as the flags it renders them to (unset ones it leaves out).
    argv = [word for name, value in merged.items() if name != "extraArgs" and value not in (None, "")
            for word in (flags[name].flag, str(value))]
    return check_train_args([*argv, *merged.get("extraArgs", [])])



def _run_dir(train: dict[str, Any], chart: dict[str, Any]) -> str:
    """The trainer's --out: the `out` value, or the chart's default run directory on the shared volume."""
    return train.get("out") or f"{chart['storage']['mountPath'].rstrip('/')}/runs/job"
