"""The dependency rule of trainstack/infra/__init__.py: no cloud package is imported outside its own folder.

`trainstack/infra/<cloud>/` may import the neutral layer; the neutral layer (and every other cloud) must not
import `trainstack.infra.<cloud>` or that cloud's provider SDKs, so a second cloud composes the neutral layer
instead of copying from the first. `__main__.py`, which picks the cloud, is the one exception.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "trainstack" / "infra"
# What counts as "a cloud package": our cloud folders and the provider SDKs only they may use.
CLOUD_MODULES = {
    "aws": ("trainstack.infra.aws", "pulumi_aws", "pulumi_eks"),
    "gcp": ("trainstack.infra.gcp", "pulumi_gcp"),
}


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def owning_cloud(path: Path) -> str | None:
    relative = path.relative_to(INFRA).parts
    return relative[0] if len(relative) > 1 and relative[0] in CLOUD_MODULES else None


def violations(path: Path) -> list[str]:
    home = owning_cloud(path)
    found = []
    for module in sorted(imported_modules(path)):
        for cloud, prefixes in CLOUD_MODULES.items():
            if cloud != home and any(module == p or module.startswith(p + ".") for p in prefixes):
                found.append(f"{path.relative_to(REPO)} imports {module} (a {cloud} package)")
    return found


def test_no_file_outside_a_cloud_folder_imports_a_cloud_package():
    files = sorted(INFRA.rglob("*.py"))
    assert len(files) > 10
    problems = [problem for path in files for problem in violations(path)]
    assert problems == []


def test_the_rule_catches_a_neutral_file_that_imports_a_cloud(tmp_path, monkeypatch):
    fake_infra = tmp_path / "trainstack" / "infra"
    (fake_infra / "aws").mkdir(parents=True)
    (fake_infra / "kubernetes").mkdir()
    neutral = fake_infra / "kubernetes" / "platform.py"
    neutral.write_text("from trainstack.infra.aws.cluster import GPU_NODE_LABELS\nimport pulumi_gcp as gcp\n")
    own = fake_infra / "aws" / "cluster.py"
    own.write_text("import pulumi_aws as aws\nfrom trainstack.infra.core.contracts import GpuPlacement\n")
    monkeypatch.setattr(f"{__name__}.INFRA", fake_infra)
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)

    assert violations(neutral) == [
        "trainstack/infra/kubernetes/platform.py imports pulumi_gcp (a gcp package)",
        "trainstack/infra/kubernetes/platform.py imports trainstack.infra.aws.cluster (a aws package)",
        "trainstack/infra/kubernetes/platform.py imports trainstack.infra.aws.cluster.GPU_NODE_LABELS (a aws package)",
    ]
    assert violations(own) == []


@pytest.mark.parametrize("cloud", sorted(CLOUD_MODULES))
def test_main_imports_a_cloud_only_when_its_stack_is_selected(cloud):
    # Top-level imports of __main__.py are neutral: a `gcp` stack never loads the AWS SDKs.
    tree = ast.parse((REPO / "__main__.py").read_text())
    top_level = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            top_level.add(node.module)
        elif isinstance(node, ast.Import):
            top_level.update(alias.name for alias in node.names)
    assert not any(m.startswith(p) for m in top_level for p in CLOUD_MODULES[cloud])
