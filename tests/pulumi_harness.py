"""Run a Pulumi program in-process under mocks and record every resource registration.

Follows /work/shared/notes/pulumi-testing.md:
- a fresh asyncio event loop per run, leftover tasks cancelled and the loop closed afterwards;
- mocks set before the program creates anything, `reset_options()` and config cleared afterwards
  (both are process-global);
- the mock monitor reports no support for resource references, which removes the
  "attached to a different loop" flake seen with resource-typed inputs;
- the program runs inside one `@pulumi.runtime.test` function and is drained before `run_program`
  returns, so callers assert synchronously on what was recorded (no assertions inside `apply`).

The Pulumi CLI and the provider plugins never run here: what is tested is our wiring (inputs,
parents, providers, dependency edges, secretness), not what a provider would do with it.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.proto import resource_pb2


class _Unknown:
    """A value the engine does not know yet (preview); compare with `is UNKNOWN`."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()

OutputsFn = Callable[[str, str, dict], dict]
CallsFn = Callable[[str, dict], dict]


@dataclass
class Registration:
    """One RegisterResource (or ReadResource) request as the engine would have received it."""

    type: str
    name: str
    urn: str
    parent: str | None  # the stack's URN for top-level resources
    dependencies: list[str]  # URNs, sorted
    provider: str | None  # URN of the explicit provider (custom resources only)
    inputs: dict  # secrets unwrapped (see secret_paths), unknowns as UNKNOWN, whole floats as int
    remote: bool  # multi-language component (pulumi_eks.*, helm.v4.Chart): its children never appear
    custom: bool
    # Beyond the contract: more of the request, for precise assertions.
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)  # components: package -> provider URN
    secret_paths: frozenset[str] = frozenset()  # e.g. {"registries[0].password"}
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    additional_secret_outputs: list[str] = field(default_factory=list)
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    delete_timeout: str = ""  # customTimeouts.delete ("": the provider's default)
    read: bool = False  # registered through `Resource.get` (ReadResource)
    # Alias specs as sent (pulumi/runtime/resource.py prepare_aliases): "urn=<URN>" or "parent=<URN>|root",
    # with ",name=..", ",type=.." when given; the engine derives each child's aliases from its parent's.
    aliases: list[str] = field(default_factory=list)

    def is_secret(self, path: str) -> bool:
        """Whether the input at `path` (dotted, `[i]` for list items) or one of its ancestors is secret."""
        return any(path == p or path.startswith((p + ".", p + "[")) for p in self.secret_paths)


@dataclass
class ProgramResult:
    registrations: list[Registration]  # sorted by URN: deterministic whatever the thread timing
    exports: dict  # stack outputs, resolved; UNKNOWN where preview does not know them
    secret_exports: frozenset[str] = frozenset()
    invokes: list[tuple[str, dict]] = field(default_factory=list)
    invoke_providers: list[tuple[str, str | None]] = field(default_factory=list)  # (token, provider URN)
    value: Any = None  # what the program returned
    registered_outputs: dict[str, dict] = field(default_factory=dict)  # URN -> register_outputs(...)

    def by_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Registration:
        found = [r for r in self.by_type(type_) if name is None or r.name == name]
        if len(found) != 1:
            names = [r.name for r in self.by_type(type_)]
            raise AssertionError(f"expected one {type_} named {name!r}, found {len(found)} among {names}")
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        for r in self.registrations:
            if r.urn == urn:
                return r
        raise AssertionError(f"no registration with URN {urn}")

    def children_of(self, urn: str) -> list[Registration]:
        return [r for r in self.registrations if r.parent == urn]

    def descendants_of(self, urn: str) -> list[Registration]:
        found: list[Registration] = []
        frontier = [urn]
        while frontier:
            children = self.children_of(frontier.pop())
            found.extend(children)
            frontier.extend(c.urn for c in children)
        return sorted(found, key=lambda r: r.urn)


def unknown_output() -> pulumi.Output:
    """An Output whose value is not known: what a preview sees for e.g. a not-yet-created cluster's kubeconfig.

    Call it inside the program (it needs the program's event loop).
    """
    loop = asyncio.get_event_loop()
    value, known, secret = loop.create_future(), loop.create_future(), loop.create_future()
    value.set_result(None)
    known.set_result(False)
    secret.set_result(False)
    return pulumi.Output(set(), value, known, secret)


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else value


def _decode(value: Any, path: str, secrets: set[str]) -> Any:
    """Protobuf value -> plain Python, recording where secrets sat instead of pushing them up a level."""
    if isinstance(value, struct_pb2.Struct):
        if rpc._special_sig_key in value:
            if value[rpc._special_sig_key] == rpc._special_secret_sig:
                secrets.add(path)
                return _decode(value["value"], path, secrets)
            return rpc.deserialize_properties(value)  # assets, archives: keep the SDK's objects
        return {k: _decode(v, f"{path}.{k}" if path else k, secrets) for k, v in value.items()}
    if isinstance(value, struct_pb2.ListValue):
        return [_decode(v, f"{path}[{i}]", secrets) for i, v in enumerate(value)]
    if value == rpc.UNKNOWN:
        return UNKNOWN
    if isinstance(value, float):
        return _number(value)
    return value


def _provider_urn(ref: str) -> str | None:
    # A provider reference is "<urn>::<id>"; the id is unknown in preview, the URN never is.
    return ref.rsplit("::", 1)[0] if ref else None


class _Mocks(pulumi_mocks.Mocks):
    def __init__(self, outputs: OutputsFn | None, calls: CallsFn | None, preview: bool) -> None:
        self._outputs = outputs
        self._calls = calls
        self._preview = preview
        self.invokes: list[tuple[str, dict]] = []
        self.invoke_providers: list[tuple[str, str | None]] = []

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict]:
        extra = self._outputs(args.typ, args.name, _plain(args.inputs)) if self._outputs else {}
        state = {**args.inputs, **(extra or {})}
        if args.typ.startswith("kubernetes:") and isinstance(state.get("metadata"), dict):
            # The API server gives every object a uid (an ownerReference names its owner by it).
            state["metadata"] = {"uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{args.typ}::{args.name}")),
                                 **state["metadata"]}
        # An empty ID is an unknown ID: what a preview of a fresh stack sees.
        resource_id = (
            "" if self._preview and not args.resource_id else (args.resource_id or f"{args.name}-id")
        )
        return resource_id, state

    def call(self, args: pulumi_mocks.MockCallArgs) -> dict:
        self.invokes.append((args.token, _plain(args.args)))
        self.invoke_providers.append((args.token, _provider_urn(args.provider)))
        if self._calls is None:
            raise NotImplementedError(f"unmocked invoke {args.token}: pass calls=... to run_program")
        return self._calls(args.token, _plain(args.args))


def _plain(value: Any) -> Any:
    """Unwrap the SDK's secret markers in already-deserialized values (what Mocks receive)."""
    if rpc.is_rpc_secret(value):
        return _plain(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _alias_text(alias: Any) -> str:
    if alias.WhichOneof("alias") == "urn":
        return f"urn={alias.urn}"
    spec = alias.spec
    parts = ["parent=root" if spec.noParent else f"parent={spec.parentUrn}" if spec.parentUrn else "parent=same"]
    parts += [f"{key}={getattr(spec, key)}" for key in ("name", "type", "stack", "project") if getattr(spec, key)]
    return ",".join(parts)


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.recorded: list[Registration] = []
        self.registered_outputs: dict[str, dict] = {}
        self._lock = threading.Lock()

    def _record(self, request: Any, urn: str, *, read: bool) -> None:
        secrets: set[str] = set()
        inputs = _decode(request.properties if read else request.object, "", secrets)
        registration = Registration(
            type=request.type,
            name=request.name,
            urn=urn,
            parent=request.parent or None,
            dependencies=[] if read else sorted(request.dependencies),
            provider=_provider_urn(request.provider),
            inputs=inputs,
            remote=False if read else request.remote,
            custom=True if read else request.custom,
            property_dependencies={}
            if read
            else {k: sorted(v.urns) for k, v in request.propertyDependencies.items()},
            providers={} if read else {k: _provider_urn(v) for k, v in request.providers.items()},
            secret_paths=frozenset(secrets),
            ignore_changes=[] if read else list(request.ignoreChanges),
            replace_on_changes=[] if read else list(request.replaceOnChanges),
            additional_secret_outputs=[] if read else list(request.additionalSecretOutputs),
            protect=False if read else bool(request.protect),
            retain_on_delete=False if read else bool(request.retainOnDelete),
            delete_before_replace=False if read else request.deleteBeforeReplace,
            delete_timeout="" if read else request.customTimeouts.delete,
            read=read,
            aliases=[] if read else [_alias_text(alias) for alias in request.aliases],
        )
        with self._lock:
            self.recorded.append(registration)

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self._record(request, response.urn, read=False)
        return response

    def RegisterResourceOutputs(self, request):  # noqa: N802
        outputs = _decode(request.outputs, "", set())
        with self._lock:
            self.registered_outputs[request.urn] = outputs
        return super().RegisterResourceOutputs(request)

    def ReadResource(self, request):  # noqa: N802
        response = super().ReadResource(request)
        self._record(request, response.urn, read=True)
        return response

    # Resource references off: with them on, re-hydrating a reference on the monitor's worker
    # thread intermittently fails with "Task ... attached to a different loop".
    def SupportsFeature(self, request):  # noqa: N802
        if request.id == "resourceReferences":
            return type("SupportsFeatureResponse", (object,), {"hasSupport": False})
        return super().SupportsFeature(request)

    def GetDeploymentInfo(self, request):  # noqa: N802
        info = super().GetDeploymentInfo(request)
        features = [
            f
            for f in info.supportedFeatures
            if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        ]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)


async def _resolve_exports(outputs: dict[str, Any]) -> tuple[dict, frozenset[str]]:
    resolved: dict[str, Any] = {}
    secret: set[str] = set()
    for name, value in outputs.items():
        output = pulumi.Output.from_input(value)
        if await output.is_secret():
            secret.add(name)
        resolved[name] = await output.future() if await output.is_known() else UNKNOWN
    return resolved, frozenset(secret)


def recording_monitors(monkeypatch) -> list:
    """Every monitor the next runs create, to read what they registered (a run that stops on an error
    returns no result to read it from)."""
    monitors: list = []

    class Recording(_RecordingMonitor):
        def __init__(self, mocks):
            super().__init__(mocks)
            monitors.append(self)

    monkeypatch.setattr(sys.modules[__name__], "_RecordingMonitor", Recording)
    return monitors


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    leftovers = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in leftovers:
        task.cancel()
    if leftovers:
        loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()
    asyncio.set_event_loop(None)


# The Pulumi CLI version the mocked engine reports to RequirePulumiVersion (tests of an older CLI set it).
CLI_VERSION = "3.200.0"


class _CliVersionError(grpc.RpcError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return self._message


class _Engine(pulumi_mocks.MockEngine):
    """MockEngine plus RequirePulumiVersion, as the CLI answers it: the range (">=3.174.0" and the like,
    blank-separated comparisons all of which must hold) is checked against the CLI's own version, and a
    CLI outside it refuses the program (pulumi/pulumi pkg/resource/deploy/source_eval.go, RequirePulumiVersion)."""

    def RequirePulumiVersion(self, request) -> None:  # noqa: N802 - the gRPC method's name
        version = tuple(int(n) for n in CLI_VERSION.split("."))
        for clause in request.pulumi_version_range.split():
            op, wanted = re.fullmatch(r"(>=|<=|>|<|=|)(\d+\.\d+\.\d+)", clause).groups()
            bound = tuple(int(n) for n in wanted.split("."))
            holds = {">=": version >= bound, "<=": version <= bound, ">": version > bound, "<": version < bound,
                     "=": version == bound, "": version == bound}[op]
            if not holds:
                raise _CliVersionError(f"Pulumi CLI version {CLI_VERSION} does not satisfy the version range "
                                       f"{request.pulumi_version_range!r}")


def run_program(
    program: Callable[[], Any],
    *,
    config: dict[str, str] | None = None,
    preview: bool = False,
    project: str = "trainstack",
    stack: str = "test",
    outputs: OutputsFn | None = None,
    secret_config_keys: Sequence[str] = (),
    calls: CallsFn | None = None,
) -> ProgramResult:
    """Run `program` under mocks and return what it registered.

    config: stack config as in Pulumi.<stack>.yaml, keys "namespace:key" ("aws:region").
    preview: run as `pulumi preview`: IDs and outputs nobody supplied are unknown.
    outputs: provider-computed outputs (camelCase) to add per (type, name, inputs), e.g.
        {"kubeconfigJson": "..."} for an eks cluster; merged over the echoed inputs.
    secret_config_keys: config keys that are secret (`pulumi config set --secret`).
    calls: answers provider invokes per (token, args); an invoke without it fails loudly.
    Exceptions raised by the program (or inside its applies) propagate.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = _Mocks(outputs, calls, preview)
    monitor = _RecordingMonitor(mocks)
    pulumi.runtime.reset_options()
    pulumi.runtime.set_all_config(dict(config or {}), list(secret_config_keys))
    try:
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
        pulumi.runtime.settings.SETTINGS.engine = _Engine(None)
        box: dict[str, Any] = {}

        @pulumi.runtime.test
        def _run() -> None:
            box["value"] = program()

        _run()
        root = pulumi.runtime.get_root_resource()
        exports, secret_exports = loop.run_until_complete(_resolve_exports(dict(root.outputs)))
    finally:
        pulumi.runtime.reset_options()
        pulumi.runtime.set_all_config({}, [])
        _close_loop(loop)
    return ProgramResult(
        registrations=sorted(monitor.recorded, key=lambda r: r.urn),
        exports=exports,
        secret_exports=secret_exports,
        invokes=list(mocks.invokes),
        invoke_providers=list(mocks.invoke_providers),
        value=box.get("value"),
        registered_outputs=dict(monitor.registered_outputs),
    )
