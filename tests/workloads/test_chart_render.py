"""The chart renders valid Kubernetes objects for every value set, and `helm lint` is clean."""

from __future__ import annotations

import helm_python as helm
import kubernetes_validate
import pytest

from .chart import CHART_DIR, KUBERNETES_VERSION, NAMESPACE, VALUE_SETS, load_values

# The oldest version the chart supports (Chart.yaml kubeVersion) and the newest the validator
# ships: a field missing from the first, or removed by the second, fails here, not on a cluster.
VALIDATION_VERSIONS = (KUBERNETES_VERSION, kubernetes_validate.latest_version())


def test_every_value_set_is_covered(rendered):
    assert {"cpu-single-node", "gpu-4x8-queue-pvc", "tensorboard", "etcd"} <= set(rendered)


@pytest.mark.parametrize("version", VALIDATION_VERSIONS)
@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_objects_match_the_official_schemas_strictly(rendered, value_set, version):
    for obj in rendered[value_set]:
        where = f"{value_set}: {obj['kind']}/{obj['metadata']['name']} (Kubernetes {version})"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = "/".join(str(part) for part in error.absolute_path)
            pytest.fail(f"{where}: {error.message} at {path}")


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_object_lives_in_the_release_namespace(rendered, value_set):
    assert {obj["metadata"].get("namespace") for obj in rendered[value_set]} == {NAMESPACE}


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_helm_lint_strict_is_clean(value_set):
    report = helm.lint(CHART_DIR, load_values(value_set), strict=True, namespace=NAMESPACE,
                       kube_version=f"v{KUBERNETES_VERSION}.0")
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # 2 = warning, 3 = error
    assert not problems and not report["errors"], problems or report["errors"]


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_no_rbac_objects_at_all(rendered, value_set):
    # Workers find each other through the headless Service's DNS: no Kubernetes API access, so no
    # Role, and certainly no cluster-wide role (seed 001 bound `view` cluster-wide).
    rbac = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert not [obj["kind"] for obj in rendered[value_set] if obj["kind"] in rbac]
