"""The GCP side of the orphan audit against gcp-storage-emulator on 127.0.0.1: labelled buckets the
state does not hold are listed; compute (disks, Filestore, GKE) is named as not checked."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from trainstack.infra.audit.__main__ import main

from .servers import gcs_emulator

PROJECT = "trainstack-test"
OURS = {"app": "trainstack", "pulumi-stack": "gcp"}


def call(url: str, method: str, body: dict) -> None:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def create_bucket(url: str, name: str, labels: dict[str, str] | None) -> None:
    call(f"{url}/storage/v1/b?project={PROJECT}", "POST", {"name": name})
    if labels:  # the emulator keeps labels given by PATCH (its insert drops them)
        call(f"{url}/storage/v1/b/{name}", "PATCH", {"labels": labels})


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    with gcs_emulator() as url:
        saved = os.environ.get("STORAGE_EMULATOR_HOST")
        os.environ["STORAGE_EMULATOR_HOST"] = url
        try:
            create_bucket(url, "trainstack-gcp-snapshots", OURS)  # in the state
            create_bucket(url, "trainstack-gcp-snapshots-old", OURS)  # left by an earlier stack
            create_bucket(url, "trainstack-gcp-a3-snapshots", {**OURS, "pulumi-stack": "gcp-a3"})  # another stack
            create_bucket(url, "unrelated", None)
            state = tmp_path_factory.mktemp("gcp") / "state.json"
            state.write_text(json.dumps({"deployment": {"resources": [
                {"type": "gcp:storage/bucket:Bucket", "id": "trainstack-gcp-snapshots",
                 "outputs": {"name": "trainstack-gcp-snapshots"}}]}}))
            yield state
        finally:
            if saved is None:
                os.environ.pop("STORAGE_EMULATOR_HOST", None)
            else:
                os.environ["STORAGE_EMULATOR_HOST"] = saved


def test_lists_labelled_buckets_the_state_lost(emulator, capsys):
    assert main(["--stack", "gcp", "--state", str(emulator), "--project", PROJECT]) == 1
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if line.startswith("- ")]
    assert len(listed) == 1 and listed[0].startswith("- Cloud Storage bucket trainstack-gcp-snapshots-old")
    assert "gcloud storage rm --recursive gs://trainstack-gcp-snapshots-old" in out


def test_names_what_it_does_not_check(emulator, capsys):
    main(["--stack", "gcp", "--state", str(emulator), "--project", PROJECT])
    out = capsys.readouterr().out
    for kind in ("detached disks", "Filestore instances", "GKE clusters"):
        assert f"Not checked: {kind}" in out
    assert "labels.pulumi-stack=gcp" in out


def test_project_is_required(emulator, capsys):
    assert main(["--stack", "gcp", "--state", str(emulator)]) == 2
    assert "--project" in capsys.readouterr().err
