"""Many jobs on one cluster: submit, list, logs, cancel and results, without `pulumi up`.

Torch-free: it reads the stack's outputs, checks a submission with the stack's own job checks
(trainstack/infra/config/job.py) and drives `helm` and `kubectl` with the stack's kubeconfig.
"""
