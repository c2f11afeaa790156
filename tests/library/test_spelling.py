"""trainstack's camel_case is the schema inference's own rule, without importing it at run time."""

import subprocess
import sys

import pytest
from pulumi.provider.experimental.util import camel_case as pulumis

from trainstack.components.spelling import camel_case


@pytest.mark.parametrize("name", ["gpus_per_node", "region", "a__b", "_x", "x_", "pods_min_2", "kubeconfig_role_arn", ""])
def test_the_same_spelling_as_the_schema_inference(name):
    assert camel_case(name) == pulumis(name)


def test_importing_the_stacks_leaves_google_rpc_status_to_google_api_core():
    # The stack program (through the components) must not register Pulumi's google.rpc.Status, or a process
    # that also uses gcsfs (the tests, a notebook) fails to import google-api-core.
    code = ("import sys, trainstack.components, trainstack.components.aws, trainstack.components.gcp; "
            "sys.exit('pulumi.runtime.proto.status_pb2' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
