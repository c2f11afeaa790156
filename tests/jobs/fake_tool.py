"""A fake `helm` / `kubectl` for the job CLI's tests: records each call, answers like the real tool.

Installed on PATH under both names (tests/jobs/conftest.py). The state it answers from is a JSON file
(FAKE_CLUSTER_STATE): {"releases": [...helm list items], "jobs": [...batch/v1 Jobs], "workloads":
[...Kueue Workloads], "logs": "..."}; each call is appended to FAKE_CLUSTER_CALLS as {tool, argv, stdin}.

Answers follow the tools' source (helm/helm at v3.21.4, kubernetes/kubectl at v0.34.0):
- `helm list --output json`: [{name, namespace, revision, updated, status, chart, app_version}]
  (cmd/helm/list.go releaseElement; the release's labels are not printed). Sorted by name, then cut to
  `--max` (default 256; 0 means all): cmd/helm/list.go:126, pkg/action/list.go:198-214. `-l/--selector
  k=v` keeps the releases whose labels match (cmd/helm/list.go:129, pkg/action/list.go:279-289).
- `helm install --labels k=v,...` stores the labels on the release (cmd/helm/install.go:201).
- `helm install` of a name in use: "Error: INSTALLATION FAILED: cannot re-use a name that is still in use"
  (pkg/action/install.go:554 availableName), exit 1; a name taken between that check and the release's
  creation (a race, state "install_race"): "release: already exists" (pkg/storage/driver/driver.go:31,
  returned by secrets.go:165 from pkg/action/install.go:404).
- `helm template` renders offline; a refusal is helm's "Error: ..." on stderr, exit 1.
- `helm uninstall` takes `--wait` and `--cascade background|orphan|foreground` (default background,
  cmd/helm/uninstall.go:79-89); of an unknown release: "Error: uninstall: Release not loaded: NAME:
  release: not found".
- `kubectl get <kind> --output json`: {"apiVersion": "v1", "kind": "List", "items": [...]}; `kubectl get
  configmap NAME --ignore-not-found`: nothing for a missing one (kubectl v0.34.0 pkg/cmd/get/get.go:732-734).
- `helm version --short`: "v3.21.4+g5ccc2d2" (state "helm_version" another; helm v4 pkg/cmd/version.go
  formatVersion prints the same form).
- `helm uninstall --wait` past `--timeout` (state "uninstall_timeout": names): the release is purged, then
  "Error: uninstallation completed with 1 error(s): timed out waiting for the condition", exit 1
  (helm v3.21.4 pkg/action/uninstall.go: the wait's error is returned after the release is deleted).
- `kubectl get pods|limitranges --output json`: state "pods" / "limitranges", selected by `--selector`.
- State "answer": {"<tool> <verb>": text} printed instead of the real answer (a truncated or wrong one);
  "hang": ["<tool> <verb>"] sleeps until killed (a cluster that never answers); "stderr": {"<tool> <verb>":
  text} fails with that text and exit 1 (an exec credential plugin's lines before the tool's own).
- `kubectl logs --selector`: the last 10 lines of each pod unless `--tail` is given (-1: all), and with
  `--follow` one failing pod stream ends every stream unless `--ignore-errors` (pkg/cmd/logs/logs.go:112,
  240-241, 396-404). State "logs" is every line; "log_stream_error" a pod stream that fails.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HELM_LIST_DEFAULT_MAX = 256  # cmd/helm/list.go:126
KUBECTL_SELECTOR_TAIL = 10  # pkg/cmd/logs/logs.go:112


def _option(argv: list[str], *names: str) -> str | None:
    """The value of `--name value` or `--name=value` (the last one given), as cobra reads it."""
    found = None
    for i, word in enumerate(argv):
        for name in names:
            if word == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif word.startswith(name + "="):
                found = word[len(name) + 1:]
    return found


def _pairs(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split(",") if pair)


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        else:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
    return True


def main() -> int:
    tool = Path(sys.argv[0]).name
    argv = sys.argv[1:]
    stdin = sys.stdin.read() if "-" in argv else None
    with open(os.environ["FAKE_CLUSTER_CALLS"], "a") as calls:
        calls.write(json.dumps({"tool": tool, "argv": argv, "stdin": stdin}) + "\n")
    state_path = Path(os.environ["FAKE_CLUSTER_STATE"])
    state = json.loads(state_path.read_text())
    namespace = _option(argv, "--namespace", "-n")  # as helm and kubectl both spell it
    key = f"{tool} {argv[0]}"
    if key in state.get("hang", []):
        time.sleep(3600)
    if key in state.get("stderr", {}):
        print(state["stderr"][key], file=sys.stderr)
        return 1
    if key in state.get("answer", {}):
        print(state["answer"][key])
        return 0
    if tool == "helm":
        verb = argv[0]
        releases = state.setdefault("releases", [])
        if verb == "list":
            selector = _option(argv, "--selector", "-l")
            listed = sorted((r for r in releases if selector is None or _matches(r.get("labels", {}), selector)),
                            key=lambda r: r["name"])
            limit = int(_option(argv, "--max", "-m") or HELM_LIST_DEFAULT_MAX)
            if limit > 0:
                listed = listed[:limit]
            print(json.dumps([{k: v for k, v in r.items() if k != "labels"} for r in listed]))
            return 0
        if verb == "version":
            print(state.get("helm_version", "v3.21.4+g5ccc2d2"))
            return 0
        name = argv[1]
        known = any(r["name"] == name for r in releases)
        if verb == "template":  # offline: renders the chart, reaches no cluster (state "template_error": refuse)
            if state.get("template_error"):
                print(state["template_error"], file=sys.stderr)
                return 1
            print("---")
            return 0
        if verb == "install":
            if state.get("install_error"):  # e.g. the API server refusing the release's objects
                print(state["install_error"], file=sys.stderr)
                return 1
            if known:
                print("Error: INSTALLATION FAILED: cannot re-use a name that is still in use", file=sys.stderr)
                return 1
            if state.get("install_race") == name:
                print("Error: INSTALLATION FAILED: release: already exists", file=sys.stderr)
                return 1
            releases.append({"name": name, "namespace": namespace, "revision": "1",
                             "updated": state.get("now_updated", "2026-11-25 12:00:00.000000 +0000 UTC"),
                             "status": "deployed", "chart": "training-job-0.1.0", "app_version": "0.1.0",
                             "labels": _pairs(_option(argv, "--labels", "-l") or "")})
            state_path.write_text(json.dumps(state))
            print(f"NAME: {name}\nSTATUS: deployed")
            return 0
        if verb == "uninstall":
            if (_option(argv, "--cascade") or "background") not in ("background", "orphan", "foreground"):
                print("Error: invalid cascade value", file=sys.stderr)
                return 1
            if not known:
                print(f"Error: uninstall: Release not loaded: {name}: release: not found", file=sys.stderr)
                return 1
            state["releases"] = [r for r in releases if r["name"] != name]
            state_path.write_text(json.dumps(state))
            if name in state.get("uninstall_timeout", []) and "--wait" in argv:
                print("Error: uninstallation completed with 1 error(s): timed out waiting for the condition",
                      file=sys.stderr)
                return 1
            print(f'release "{name}" uninstalled')
            return 0
    if tool == "kubectl":
        if argv[:2] == ["get", "jobs"]:
            print(json.dumps({"apiVersion": "v1", "kind": "List", "items": state.get("jobs", [])}))
            return 0
        if argv[:2] == ["get", "configmap"]:  # by name; --ignore-not-found prints nothing for a missing one
            uid = state.get("configmaps", {}).get(argv[2])
            if uid is None:
                if "--ignore-not-found" in argv:
                    return 0
                print(f'Error from server (NotFound): configmaps "{argv[2]}" not found', file=sys.stderr)
                return 1
            print(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": argv[2], "namespace": namespace, "uid": uid}}))
            return 0
        if argv[:2] in (["get", "pods"], ["get", "limitranges"]):
            selector = _option(argv, "--selector", "-l")
            items = [i for i in state.get(argv[1], [])
                     if selector is None or _matches(i["metadata"].get("labels") or {}, selector)]
            print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            return 0
        if argv[:2] == ["get", "workloads.kueue.x-k8s.io"]:
            print(json.dumps({"apiVersion": "v1", "kind": "List", "items": state.get("workloads", [])}))
            return 0
        if argv[0] == "logs":
            lines = state.get("logs", "").splitlines(keepends=True)
            tail = _option(argv, "--tail")
            tail = int(tail) if tail is not None else (KUBECTL_SELECTOR_TAIL if _option(argv, "--selector", "-l")
                                                       else -1)
            print("".join(lines if tail < 0 else lines[len(lines) - tail:] if tail else []), end="")
            if state.get("log_stream_error") and "--follow" in argv and "--ignore-errors" not in argv:
                print(f"error: {state['log_stream_error']}", file=sys.stderr)
                return 1
            return 0
    print(f"fake {tool}: unexpected call {argv}", file=sys.stderr)
    return 64


if __name__ == "__main__":
    raise SystemExit(main())
