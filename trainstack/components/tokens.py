"""The type token of each hosted component: the schema module it is in, and the token it had before modules.

Until 0.1.0 every component was `trainstack:index:<Class>`. A resource's URN holds its type token (and every
child's URN its parent's), so a component registered under a new token would be a new resource, and all it
built would be replaced. Each component therefore registers an alias to its index token (`moved_from_index`):
the engine then takes over the old resource, and each child through its parent's alias (pulumi/pulumi
pkg/resource/deploy/step_generator.go, generateAliases: inheritedChildAlias of the parent's matched alias).
The provider still constructs a component asked for by its index token, and the schema keeps that token as a
deprecated resource (trainstack/provider.py, in_modules), so programs and SDKs written against the old schema
keep working.
"""

import pulumi

PACKAGE = "trainstack"
INDEX = "index"

# Each hosted component (its Python class's name) -> its type token. The whole stacks are `TrainingStack` in
# their cloud's module, not `AwsStack`/`GcpStack`: `trainstack:aws:AwsStack` and `trainstack:gcp:GcpStack` are
# the tokens of the infra stacks that 0.1.0's own program (__main__.py) built at the stack's root as
# `trainstack`. A component with that token and name would take that state over by URN (the engine looks the
# URN up before any alias), and the infra stack inside it could then not take over its own old state (an alias
# to a URN already registered is an error): step_generator.go, getOldResource.
TOKENS: dict[str, str] = {
    "TrainingPlatform": "trainstack:kubernetes:TrainingPlatform",
    "NvidiaDevicePlugin": "trainstack:kubernetes:NvidiaDevicePlugin",
    "Kueue": "trainstack:kubernetes:Kueue",
    "TrainingJob": "trainstack:kubernetes:TrainingJob",
    "GpuDirectNetworks": "trainstack:gcp:GpuDirectNetworks",
    "GpuDirect": "trainstack:gcp:GpuDirect",
    "GcpStack": "trainstack:gcp:TrainingStack",
    "GkeCluster": "trainstack:gcp:GkeCluster",
    "GkeGpuNodePool": "trainstack:gcp:GkeGpuNodePool",
    "FilestoreShare": "trainstack:gcp:FilestoreShare",
    "GcsSnapshotBucket": "trainstack:gcp:GcsSnapshotBucket",
    "AwsStack": "trainstack:aws:TrainingStack",
    "EksCluster": "trainstack:aws:EksCluster",
    "EfsStorage": "trainstack:aws:EfsStorage",
    "S3SnapshotBucket": "trainstack:aws:S3SnapshotBucket",
}


def token(component: str) -> str:
    """The component's type token (`trainstack:<module>:<name>`)."""
    return TOKENS[component]


def index_token(component: str) -> str:
    """The token the component had before the schema had modules."""
    return f"{PACKAGE}:{INDEX}:{component}"


_COMPONENT_OF = {**{index_token(c): c for c in TOKENS}, **{t: c for c, t in TOKENS.items()}}


def component_of(type_token: str) -> str | None:
    """The component (its class's name) a type token names, by its token or its index token; None if neither."""
    return _COMPONENT_OF.get(type_token)


def moved_from_index(component: str, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """`opts` with the component's aliases from its index token: one for where it is, and one beside each alias the
    caller gives that keeps the type (the caller's alias names the old parent or name, and the old URN there has
    the old type too; the engine does not combine two aliases)."""
    old_type = index_token(component)
    given = list(opts.aliases or []) if opts is not None else []
    retyped = [_with_type(alias, old_type) for alias in given if isinstance(alias, pulumi.Alias)
               and alias.type_ in (None, ...)]
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=old_type),
                                                                              *retyped]))


def _with_type(alias: pulumi.Alias, type_: str) -> pulumi.Alias:
    return pulumi.Alias(name=alias.name, type_=type_, parent=alias.parent, stack=alias.stack, project=alias.project)
