"""trainstack/components keeps infra's layering, and its annotations stay readable by Pulumi's analyzer."""

import ast
from pathlib import Path

import pytest

from tests.infra.test_layering import CLOUD_MODULES, imported_modules

COMPONENTS = Path(__file__).resolve().parents[2] / "trainstack" / "components"
# The modules each cloud's façades live in; every other module is cloud-neutral.
CLOUD_FACADES = {"aws.py": "aws", "eks_cluster.py": "aws", "efs_storage.py": "aws", "gcp.py": "gcp",
                 "gpu_direct.py": "gcp", "gke_cluster.py": "gcp", "gke_node_pool.py": "gcp", "gke_pool_preflight.py": "gcp",
                 "filestore_share.py": "gcp", "gcs_snapshot_bucket.py": "gcp", "s3_snapshot_bucket.py": "aws",
                 "aws_provider.py": "aws", "gcp_provider.py": "gcp", "gcp_part_config.py": "gcp"}


@pytest.mark.parametrize("path", sorted(COMPONENTS.glob("*.py")), ids=lambda p: p.name)
def test_only_a_clouds_facade_imports_that_cloud(path):
    allowed = CLOUD_FACADES.get(path.name)
    imported = imported_modules(path)
    wrong = sorted(m for cloud, prefixes in CLOUD_MODULES.items() if cloud != allowed
                   for m in imported if m.split(".")[0] in prefixes or m.startswith(prefixes))
    assert not wrong, f"{path.name} imports another cloud's package: {wrong}"


@pytest.mark.parametrize("path", sorted(COMPONENTS.glob("*.py")), ids=lambda p: p.name)
def test_annotations_are_not_postponed(path):
    # The analyzer reads annotations with inspect.get_annotations, unevaluated: strings would break it.
    tree = ast.parse(path.read_text())
    future = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    assert not future, f"{path.name}: no `from __future__ import annotations` in hosted components"
