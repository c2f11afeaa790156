"""The helm the job CLI supports: v3.13 or later, and v4.

Flags the CLI passes, and where each Helm release has them (helm/helm source):
- `install --labels` (release labels, `cancel` selects by them): since v3.13.0 (cmd/helm/install.go:192 at
  v3.13.0; absent at v3.12.0), and in v4 (pkg/cmd/install.go:209 at v4.2.4);
- `list --all --max --selector --output json`: v3 cmd/helm/list.go, v4 pkg/cmd/list.go:133,136;
- `uninstall --wait --cascade foreground --timeout`: v3 a boolean --wait (cmd/helm/uninstall.go:79-81 at
  v3.21.4); v4 a strategy whose bare form means `watcher` (pkg/cmd/flags.go AddWaitFlag, NoOptDefVal),
  --timeout still "300*time.Second" (pkg/cmd/uninstall.go:83 at v4.2.4);
- `version --short`: "v3.21.4+g5ccc2d2" (v4 pkg/cmd/version.go formatVersion; v3 the same).
"""

from __future__ import annotations

import re
import sys

from trainstack.jobs.cluster import Cluster
from trainstack.jobs.errors import UsageError

OLDEST = (3, 13)  # --labels
NEWEST_MAJOR = 4
_VERSION = re.compile(r"v?(\d{1,6})\.(\d{1,6})\.(\d{1,6})")


def check_helm(cluster: Cluster, command: str) -> None:
    """UsageError (one line) for a helm older than v3.13; one warning for a major release after v4."""
    answer = cluster.run("helm", ["version", "--short"]).strip()
    found = _VERSION.match(answer)
    if found is None:
        raise UsageError(f"helm version --short printed {answer[:80]!r}, not a helm version",
                         "install helm v3.13 or later, or v4 (https://helm.sh/docs/intro/install/)")
    major, minor = int(found[1]), int(found[2])
    if (major, minor) < OLDEST:
        raise UsageError(f"helm {found[0]} is older than v3.13, which added install --labels (how trainstack "
                         "marks its jobs)", "install helm v3.13 or later, or v4 (https://helm.sh/docs/intro/install/)")
    if major > NEWEST_MAJOR:
        print(f"trainstack {command}: warning: helm {found[0]} is newer than the v3.13+/v4 trainstack is tested "
              "with", file=sys.stderr)
