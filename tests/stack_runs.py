"""Run the real `__main__.py` under Pulumi mocks with the values of a `Pulumi.<stack>.yaml`, for any cloud.

The Pulumi CLI and its provider plugins cannot run here, so what these runs check is our wiring:
the inputs each resource gets, its parent, its provider, its dependency edges. Each cloud's tests
(tests/<cloud>/stack_runs.py) supply the outputs its providers would compute, camelCase.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import runpy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.pulumi_harness import ProgramResult, run_program

REPO = Path(__file__).resolve().parents[1]
MAIN = REPO / "__main__.py"

OutputsFn = Callable[[str, str, dict], dict]
CallsFn = Callable[[str, dict], dict]


def stack_file_config(stack_file: Path) -> dict[str, Any]:
    """A Pulumi.<stack>.yaml's `config:` block, values as YAML typed them."""
    return yaml.safe_load(stack_file.read_text())["config"]


def as_cli_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Config as the Pulumi CLI hands it to a program: strings, objects and lists as JSON."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}


def _merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base.get(key), value) if key in base else value
        return merged
    return override


def config_with(stack_file: Path, overrides: Mapping[str, Any] | None = None, remove: tuple[str, ...] = ()
                ) -> dict[str, str]:
    """The stack file with `overrides` merged in key by key (like `pulumi config set --path`)."""
    config = copy.deepcopy(stack_file_config(stack_file))
    for key in remove:
        config.pop(key, None)
    return as_cli_config(_merge(config, dict(overrides or {})))


# Read by the program or the provider SDKs when set: a developer's shell must not change the graph.
_AMBIENT_ENV = ("PULUMI_CONFIG", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "KUBECONFIG",
                "GOOGLE_PROJECT", "GOOGLE_REGION", "GOOGLE_ZONE", "CLOUDSDK_CORE_PROJECT")


def run_main(config: Mapping[str, str], *, stack: str, outputs: OutputsFn | None, calls: CallsFn,
             preview: bool = False) -> ProgramResult:
    """`pulumi up` (or `preview`) of the real __main__.py.

    Runs in the repository root, as `pulumi up` does (paths such as the chart's are relative to it).
    """
    cwd = os.getcwd()
    saved_env = {k: os.environ.pop(k) for k in list(os.environ) if k in _AMBIENT_ENV or k.startswith("PULUMI_K8S_")}
    os.chdir(REPO)
    try:
        return run_program(
            lambda: runpy.run_path(str(MAIN), run_name="__main__"),
            config=config,
            preview=preview,
            stack=stack,
            project="trainstack",
            outputs=outputs,
            calls=calls,
        )
    finally:
        os.chdir(cwd)
        os.environ.update(saved_env)


def run_main_expecting_error(config: Mapping[str, str], *, stack: str, outputs: OutputsFn, calls: CallsFn
                             ) -> tuple[BaseException, list[str], ProgramResult]:
    """Run __main__.py where it must stop: (what stopped it, the error lines it logged, what it registered)."""
    caught: list[BaseException] = []
    errors = _ErrorLines()
    logging.getLogger().addHandler(errors)  # where the mocked engine sends pulumi.log output

    def program() -> None:
        try:
            runpy.run_path(str(MAIN), run_name="__main__")
        except BaseException as error:  # noqa: BLE001 - SystemExit included: the test inspects it
            caught.append(error)

    try:
        result = run_program(program, config=config, stack=stack, outputs=outputs, calls=calls)
    finally:
        logging.getLogger().removeHandler(errors)
    assert caught, "the program ran to the end; expected it to stop on the bad config"
    return caught[0], errors.lines, result


class _ErrorLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        # asyncio's "Future exception was never retrieved" is the garbage collector finding a future of an
        # earlier program run (whichever test ran before): not a line this run printed.
        if record.name != "asyncio":
            self.lines.append(record.getMessage())


def short(urn: str | None) -> str | None:
    """`<type>::<name>` of a URN: readable in assertions and in the golden file."""
    if urn is None:
        return None
    qualified_type, name = urn.split("::")[-2:]
    return f"{qualified_type.rsplit('$', 1)[-1]}::{name}"


def assert_one_config_error_line(stop: BaseException, logged: list[str], result: ProgramResult, key: str,
                                 fragment: str) -> None:
    """The program stopped on bad config the documented way: exit 32, one line `<key>: ... Fix: ...`,
    and nothing registered."""
    assert isinstance(stop, SystemExit) and stop.code == 32
    (message,) = logged  # exactly one error line
    assert "\n" not in message
    assert message.startswith(f"{key}: "), message
    assert fragment in message, message
    assert ". Fix: " in message  # and says what to do about it
    assert result.registrations == []


IMAGE = "docker-build:index:Image"
RELEASE = "kubernetes:helm.sh/v3:Release"


def assert_tensorboard_runs_its_own_image(up: ProgramResult, digest: str) -> None:
    """Both clouds: TensorBoard's small image is built from images/tensorboard, pushed next to the training
    image under its own tag, and deployed by digest in the job's release."""
    image = up.one(IMAGE, "trainstack-tensorboard-image")
    assert image.inputs["dockerfile"] == {"location": "images/tensorboard/Dockerfile"}
    assert image.inputs["context"] == {"location": "images/tensorboard"}  # not the repository
    assert image.inputs["tags"] == [f"{up.exports['registryUrl']}:tensorboard"]
    assert image.inputs["registries"] == up.one(IMAGE, "trainstack-image").inputs["registries"]
    release = up.one(RELEASE, "train")
    assert release.inputs["values"]["tensorboard"] == {
        "enabled": True, "image": {"repository": up.exports["registryUrl"], "digest": digest, "tag": ""}}
    assert image.urn in release.dependencies
