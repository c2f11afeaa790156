"""The exact commands to reach the cluster and follow the training job, exported as stack outputs.

The seed's "Monitoring jobs" section, with the names filled in: `pulumi stack output logsCommand`.
"""

from __future__ import annotations

import shlex

import pulumi

TRAINER_SELECTOR = "app.kubernetes.io/instance={job},app.kubernetes.io/component=trainer"
TENSORBOARD_PORT = 6006  # the chart's tensorboard.port
# Where the README's AWS section has `python -m training prepare --out` write the data set.
LOCAL_DATA_DIR = "data/prepared"


def job_commands(*, region: str, cluster_name: str, aws_profile: str | None, namespace: str, job_name: str,
                 nodes_max: int, tensorboard: bool, bucket_name: pulumi.Input[str],
                 data_prefix: str) -> dict[str, pulumi.Input[str]]:
    profile = f" --profile {shlex.quote(aws_profile)}" if aws_profile else ""
    selector = TRAINER_SELECTOR.format(job=job_name)
    commands: dict[str, pulumi.Input[str]] = {
        "kubeconfigCommand": f"aws eks update-kubeconfig --region {region} --name {cluster_name}{profile}",
        # The shards, tokenizer and meta.json only: not prepare's datasets cache (several times the
        # shards' size), and --delete drops superseded generations so pods never download them.
        "uploadDataCommand": pulumi.Output.concat(
            f"aws s3 sync --delete --exclude '.cache/*' --exclude '.meta.json.tmp' {LOCAL_DATA_DIR} s3://",
            bucket_name, f"/{data_prefix}/{profile}"),
        "statusCommand": f"kubectl get job/{job_name} -n {namespace} -o wide && "
                         f"kubectl get pods -n {namespace} -l {selector} -o wide",
        "eventsCommand": f"kubectl describe job/{job_name} -n {namespace} && "
                         f"kubectl get events -n {namespace} --sort-by=.lastTimestamp",
        # One stream per pod, each line prefixed with its pod: more pods than kubectl's default 5.
        "logsCommand": f"kubectl logs -f -n {namespace} -l {selector} -c trainer --prefix "
                       f"--max-log-requests={max(nodes_max, 5)}",
    }
    if tensorboard:
        # No LoadBalancer: nothing outside Pulumi's knowledge may block `pulumi destroy`.
        commands["tensorboardCommand"] = (f"kubectl port-forward -n {namespace} svc/{job_name}-tensorboard "
                                          f"{TENSORBOARD_PORT}:{TENSORBOARD_PORT}  # then open "
                                          f"http://localhost:{TENSORBOARD_PORT}")
    return commands
