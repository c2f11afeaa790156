"""Checkov over every rendered value set and the Dockerfile: no findings but the listed skips."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from .chart import REPO_ROOT, VALUE_SETS, pod_specs

CHECKOV = REPO_ROOT / ".venv-checkov" / "bin" / "checkov"  # its own venv: its deps clash with pulumi's
DOCKERFILE = REPO_ROOT / "images" / "Dockerfile"
SKIPS = yaml.safe_load((Path(__file__).parent / "checkov_skips.yaml").read_text())
TAG_PINNED_IMAGE_CHECKS = {"CKV_K8S_15", "CKV_K8S_43"}


# Value sets with the documented exception containers also go through checkov without them, under
# this suffix: a skip scoped to `containers` must then stop firing (the finding is theirs alone).
WITHOUT_EXCEPTIONS = "--without-exceptions"
EXCEPTION_CONTAINERS = {name for skip in SKIPS.values() for name in skip.get("containers", [])}


def without_exception_containers(objects):
    stripped = copy.deepcopy(objects)
    for pod in pod_specs(stripped):
        for key in ("initContainers", "containers"):
            if key in pod:
                pod[key] = [c for c in pod[key] if c["name"] not in EXCEPTION_CONTAINERS]
    return stripped


def has_exception_containers(objects):
    return any(c["name"] in EXCEPTION_CONTAINERS
               for pod in pod_specs(objects) for c in pod.get("initContainers", []) + pod["containers"])


@pytest.fixture(scope="module")
def scan(rendered, tmp_path_factory):
    """One checkov run (it takes seconds) over all value sets: (findings, reports, manifest dir)."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: `make setup` creates it")
    manifests = tmp_path_factory.mktemp("manifests")
    for name in VALUE_SETS:
        (manifests / f"{name}.yaml").write_text(yaml.safe_dump_all(rendered[name], sort_keys=False))
        if has_exception_containers(rendered[name]):
            (manifests / f"{name}{WITHOUT_EXCEPTIONS}.yaml").write_text(
                yaml.safe_dump_all(without_exception_containers(rendered[name]), sort_keys=False))
    files = sorted(str(path) for path in manifests.glob("*.yaml")) + [str(DOCKERFILE)]
    result = subprocess.run(
        [str(CHECKOV), "--file", *files, "--framework", "kubernetes", "dockerfile", "--output", "json",
         "--compact", "--skip-download"],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert result.returncode in (0, 1), result.stderr[-2000:]  # 1 = findings, anything else = crash
    reports = json.loads(result.stdout)
    reports = {report["check_type"]: report for report in (reports if isinstance(reports, list) else [reports])}

    findings = []
    for check_type, report in reports.items():
        for failed in report["results"]["failed_checks"]:
            kind = "Dockerfile" if check_type == "dockerfile" else failed["resource"].split(".")[0]
            findings.append({"id": failed["check_id"], "kind": kind, "resource": failed["resource"],
                             "value_set": Path(failed["file_path"]).stem, "name": failed["check_name"]})
    return findings, reports


def test_both_frameworks_ran_over_everything(scan, rendered):
    _, reports = scan
    assert set(reports) == {"kubernetes", "dockerfile"}
    assert reports["dockerfile"]["summary"]["passed"] > 0
    checked = {(Path(c["file_path"]).stem, c["resource"])
               for c in reports["kubernetes"]["results"]["passed_checks"]}
    for name in VALUE_SETS:
        for obj in rendered[name]:
            if obj["kind"] in {"Job", "Deployment"}:
                meta = obj["metadata"]
                assert (name, f"{obj['kind']}.{meta['namespace']}.{meta['name']}") in checked


def test_no_finding_outside_the_skip_list(scan):
    findings, _ = scan
    unexpected = [f for f in findings if f["kind"] not in SKIPS.get(f["id"], {}).get("kinds", [])]
    assert not unexpected, "\n".join(
        f"{f['id']} {f['name']}: {f['resource']} ({f['value_set']})" for f in unexpected)


def test_container_scoped_skips_fire_only_because_of_those_containers(scan, rendered):
    findings, _ = scan
    assert [name for name in VALUE_SETS if has_exception_containers(rendered[name])]  # the check is live
    scoped = {check_id: set(skip["containers"]) for check_id, skip in SKIPS.items() if "containers" in skip}

    def has_any(value_set, names):
        objects = rendered.get(value_set)  # None for the stripped variants
        return objects is not None and any(
            c["name"] in names for pod in pod_specs(objects) for c in pod.get("initContainers", []) + pod["containers"])

    leaked = [f for f in findings if f["id"] in scoped and not has_any(f["value_set"], scoped[f["id"]])]
    assert not leaked, "\n".join(
        f"{f['id']} {f['name']}: {f['resource']} ({f['value_set']}) fires without the exception containers"
        for f in leaked)


def test_every_skip_is_still_needed_and_explained(scan):
    findings, _ = scan
    raised = {f["id"] for f in findings}
    for check_id, skip in SKIPS.items():
        assert check_id in raised, f"{check_id} no longer fires: remove it from checkov_skips.yaml"
        assert skip["reason"].strip() and "\n" not in skip["reason"].strip(), check_id


def test_image_pinning_findings_only_concern_tag_pinned_images(scan, rendered):
    findings, _ = scan
    for finding in (f for f in findings if f["id"] in TAG_PINNED_IMAGE_CHECKS):
        kind, _, name = finding["resource"].split(".", 2)
        value_set = finding["value_set"].removesuffix(WITHOUT_EXCEPTIONS)
        objects = rendered[value_set]
        if value_set != finding["value_set"]:
            objects = without_exception_containers(objects)
        [obj] = [o for o in objects if (o["kind"], o["metadata"]["name"]) == (kind, name)]
        images = [c["image"] for pod in pod_specs([obj])
                  for c in pod.get("initContainers", []) + pod["containers"]]
        assert any("@sha256:" not in image for image in images), finding
