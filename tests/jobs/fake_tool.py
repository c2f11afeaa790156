"""A fake `helm` / `kubectl` for the job CLI's tests: records each call, answers like the real tool.

Installed on PATH under both names (tests/jobs/conftest.py). The state it answers from is a JSON file
(FAKE_CLUSTER_STATE): {"releases": [...helm list items], "jobs": [...batch/v1 Jobs], "workloads":
[...Kueue Workloads], "logs": "..."}; each call is appended to FAKE_CLUSTER_CALLS as {tool, argv, stdin}.

Answers follow the tools' documented output:
- `helm list --output json`: [{name, namespace, revision, updated, status, chart, app_version}]
  (helm.sh/docs/helm/helm_list; cmd/helm/list.go releaseElement in helm v3).
- `helm install` of a name in use: "Error: INSTALLATION FAILED: cannot re-use a name that is still in use"
  (pkg/action/install.go errMissingName / availableName in helm v3), exit 1.
- `helm uninstall` of an unknown release: "Error: uninstall: Release not loaded: NAME: release: not found".
- `kubectl get <kind> --output json`: {"apiVersion": "v1", "kind": "List", "items": [...]}.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    tool = Path(sys.argv[0]).name
    argv = sys.argv[1:]
    stdin = sys.stdin.read() if "-" in argv else None
    with open(os.environ["FAKE_CLUSTER_CALLS"], "a") as calls:
        calls.write(json.dumps({"tool": tool, "argv": argv, "stdin": stdin}) + "\n")
    state_path = Path(os.environ["FAKE_CLUSTER_STATE"])
    state = json.loads(state_path.read_text())
    namespace = argv[argv.index("--namespace") + 1]
    if tool == "helm":
        verb = argv[0]
        releases = state.setdefault("releases", [])
        if verb == "list":
            print(json.dumps(releases))
            return 0
        name = argv[1]
        known = any(r["name"] == name for r in releases)
        if verb == "install":
            if state.get("install_error"):  # e.g. the API server refusing the release's objects
                print(state["install_error"], file=sys.stderr)
                return 1
            if known:
                print("Error: INSTALLATION FAILED: cannot re-use a name that is still in use", file=sys.stderr)
                return 1
            releases.append({"name": name, "namespace": namespace, "revision": "1",
                             "updated": "2026-11-25 12:00:00.000000 +0000 UTC", "status": "deployed",
                             "chart": "training-job-0.1.0", "app_version": "0.1.0"})
            state_path.write_text(json.dumps(state))
            print(f"NAME: {name}\nSTATUS: deployed")
            return 0
        if verb == "uninstall":
            if not known:
                print(f"Error: uninstall: Release not loaded: {name}: release: not found", file=sys.stderr)
                return 1
            state["releases"] = [r for r in releases if r["name"] != name]
            state_path.write_text(json.dumps(state))
            print(f'release "{name}" uninstalled')
            return 0
    if tool == "kubectl":
        if argv[:2] == ["get", "jobs"]:
            print(json.dumps({"apiVersion": "v1", "kind": "List", "items": state.get("jobs", [])}))
            return 0
        if argv[:2] == ["get", "workloads.kueue.x-k8s.io"]:
            print(json.dumps({"apiVersion": "v1", "kind": "List", "items": state.get("workloads", [])}))
            return 0
        if argv[0] == "logs":
            print(state.get("logs", ""), end="")
            return 0
    print(f"fake {tool}: unexpected call {argv}", file=sys.stderr)
    return 64


if __name__ == "__main__":
    raise SystemExit(main())
