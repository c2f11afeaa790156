"""Run by tests/library/test_install.py with an installed trainstack first on sys.path (argv[1]), outside the checkout.

Prints where the chart was found, the `chart` a Helm release records for it in this working directory (the
Pulumi project) and the package's version, then builds AwsStack under mocks: without the checkout's images/ it must stop
with one message naming the build context before it registers anything.
"""

import sys

sys.path.insert(0, sys.argv[1])

import pulumi  # noqa: E402

registered: list[str] = []


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        registered.append(args.typ)
        return f"{args.name}-id", args.inputs

    def call(self, args):
        return {}


pulumi.runtime.set_mocks(Mocks(), project="consumer", stack="dev", preview=False)

import trainstack.infra.core.paths  # noqa: E402
from trainstack.components import AwsStack, AwsStackArgs, Job  # noqa: E402
from trainstack.infra.core.release_chart import release_chart_path  # noqa: E402
from trainstack.package_metadata import VERSION  # noqa: E402

print("chart", trainstack.infra.core.paths.TRAINING_JOB_CHART_DIR)
print("release-chart", release_chart_path())
print("version", VERSION)
try:
    AwsStack("training", AwsStackArgs(region="us-west-2", api_public_access_cidrs=["203.0.113.7/32"],
                                      job=Job(enabled=False)))
except Exception as error:  # noqa: BLE001 - reported to the test
    print("stopped", str(error).splitlines()[0])
print("registered", len(registered))
