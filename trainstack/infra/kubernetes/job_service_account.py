"""The one Kubernetes ServiceAccount every training job runs as, and the cloud identity trusts.

IRSA's trust policy (trainstack/infra/aws/irsa.py) and GKE's Workload Identity binding (trainstack/infra/gcp/identity.py) name a
single `<namespace>/<ServiceAccount>`. Pulumi owns that ServiceAccount (trainstack/infra/kubernetes/platform.py), whether or not
the stack runs a job of its own: a job's Helm release never creates or deletes it (serviceAccount.create
false), so removing or replacing one release cannot take the identity away from the jobs still running.
"""

from __future__ import annotations

# Fixed, not derived from a job's name: the stack job and every `trainstack submit` job share it.
JOB_SERVICE_ACCOUNT = "trainstack-jobs"
