"""Bad config stops `__main__.py` before any resource is registered, with one line naming the key and the fix.

Each case runs the real program under mocks with Pulumi.aws.yaml plus one bad change. The program logs
the line with pulumi.log.error and exits with code 32, which pulumi-language-python reads as "the
user has been told" and adds nothing (no traceback, no "program exited with non-zero exit code"
line; pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go and pulumi-language-python-exec).
"""

from __future__ import annotations

import pulumi
import pytest

from tests.aws.stack_runs import (
    API_ACCESS,
    DEPLOYER_ROLE_ARN,
    GET_CALLER_IDENTITY,
    GET_SUBNET,
    as_cli_config,
    config_with,
    provider_calls,
    run_main,
    run_main_expecting_error,
    stack_file_config,
)
from tests.stack_runs import assert_one_config_error_line
from trainstack.infra.aws.config import GPU_INSTANCE_FAMILIES, parse_aws_config
from trainstack.infra.config import ConfigError
from trainstack.infra.config.job import RENAMED_KEYS
from trainstack.infra.core import versions

GPU = "trainstack:gpuNodes"
JOB = "trainstack:job"
ADMIN = "arn:aws:iam::123456789012:role/Admin"
NO_AUTOSCALER = {"trainstack:clusterAutoscaler": False}

# (case id, config overrides, keys removed, the key the message must name, a fragment of the message)
BAD_CONFIGS = [
    ("unknown top-level key", {"trainstack:gpuNode": {"max": 2}}, (), "trainstack:gpuNode",
     "did you mean trainstack:gpuNodes?"),
    ("unknown nested key", {GPU: {"maxSize": 3}}, (), f"{GPU}.maxSize", "unknown key"),
    ("unknown train key (from the chart's values)", {JOB: {"train": {"maxStep": 10}}}, (), f"{JOB}.train.maxStep",
     f"did you mean {JOB}.train.maxSteps?"),
    ("integer given as text", {GPU: {"max": "two"}}, (), f"{GPU}.max", "expected a whole number, got 'two'"),
    ("boolean given as text", {"trainstack:deleteBucketOnDestroy": "yes"}, (), "trainstack:deleteBucketOnDestroy",
     "expected true or false, got 'yes'"),
    ("list given as a string", {GPU: {"instanceTypes": "g4dn.xlarge"}}, (), f"{GPU}.instanceTypes",
     "expected a list of strings"),
    ("object given as a list", {JOB: {"train": ["maxSteps"]}}, (), f"{JOB}.train", "expected an object"),
    ("negative size", {GPU: {"min": -1}}, (), f"{GPU}.min", "must be at least 0, got -1"),
    ("GPU min greater than max", {GPU: {"min": 3, "max": 2}}, (), f"{GPU}.min", "min (3) is greater than max (2)"),
    ("system min greater than max", {"trainstack:systemNodes": {"min": 3, "max": 2, "desired": 2}}, (),
     "trainstack:systemNodes.min", "min (3) is greater than max (2)"),
    ("desired outside min..max", {GPU: {"desired": 5}}, (), f"{GPU}.desired", "desired (5) must lie between"),
    ("job podsMin greater than podsMax", {JOB: {"podsMin": 3, "podsMax": 2}}, (), f"{JOB}.podsMin",
     "podsMin (3) is greater than podsMax (2)"),
    ("job key under its old and its new name", {JOB: {"nodesMax": 2}}, (), f"{JOB}.nodesMax",
     "both nodesMax and podsMax are set (podsMax replaces nodesMax)"),
    # An error on a key written under its old name names that key and says to rename it: the plain hint
    # would set the new key beside the old one, which the next run refuses as both set.
    ("job old keys, nodesMin greater than nodesMax", {JOB: {"nodesMin": 3, "nodesMax": 2}}, (JOB,), f"{JOB}.nodesMin",
     "nodesMin (3) is greater than nodesMax (2). Fix: rename nodesMin to podsMin: pulumi config rm --path "
     f"'{JOB}.nodesMin' && pulumi config set --path '{JOB}.podsMin' 2"),
    ("job old key, more GPUs per pod than the instance has", {JOB: {"gpusPerNode": 2}}, (JOB,), f"{JOB}.gpusPerNode",
     "2 GPUs per pod, but the GPU instance type has 1. Fix: rename gpusPerNode to gpusPerPod"),
    ("job larger than the GPU group", {JOB: {"podsMax": 3}}, (), f"{JOB}.podsMax",
     "3 pods need 3 GPU nodes (1 per g4dn.xlarge), but trainstack:gpuNodes.max is 2"),
    ("job old key larger than the GPU group", {JOB: {"nodesMax": 3}}, (JOB,), f"{JOB}.nodesMax",
     "3 pods need 3 GPU nodes (1 per g4dn.xlarge), but trainstack:gpuNodes.max is 2. Fix: rename nodesMax to "
     f"podsMax: pulumi config rm --path '{JOB}.nodesMax' && raise trainstack:gpuNodes.max to 3"),
    ("instance type without a GPU", {GPU: {"instanceTypes": ["m5.large"]}}, (), f"{GPU}.instanceTypes",
     "m5.large has no NVIDIA GPU"),
    ("ARM GPU type the NVIDIA x86 AMI cannot boot", {GPU: {"instanceTypes": ["g5g.xlarge"]}}, (),
     f"{GPU}.instanceTypes", "g5g.xlarge has no NVIDIA GPU (or runs on ARM)"),
    ("size a GPU family does not have", {GPU: {"instanceTypes": ["g5.3xlarge"]}}, (), f"{GPU}.instanceTypes",
     "g5.3xlarge is not a size of the g5 family"),
    ("instance types with different GPU counts", {GPU: {"instanceTypes": ["g5.xlarge", "g5.12xlarge"]}}, (),
     f"{GPU}.instanceTypes", "different GPU counts"),
    ("more GPUs per pod than the instance has", {JOB: {"gpusPerPod": 2, "procsPerPod": 2}}, (),
     f"{JOB}.gpusPerPod", "2 GPUs per pod, but the GPU instance type has 1"),
    ("processes per node not one per GPU", {JOB: {"procsPerPod": 2}}, (), f"{JOB}.procsPerPod",
     "2 processes for 1 GPUs"),
    ("bad capacity type", {GPU: {"capacityType": "RESERVED"}}, (), f"{GPU}.capacityType",
     "expected SPOT or ON_DEMAND"),
    ("SSH key that is not a public key", {GPU: {"sshPublicKey": "-----BEGIN OPENSSH PRIVATE KEY-----"}}, (),
     f"{GPU}.sshPublicKey", "expected an OpenSSH public key"),
    ("no availability zones", {"trainstack:availabilityZones": []}, (), "trainstack:availabilityZones",
     "no availability zones for region us-west-2"),
    ("region without default zones", {"aws:region": "eu-central-1"}, ("trainstack:availabilityZones",),
     "trainstack:availabilityZones", "no availability zones for region eu-central-1"),
    ("zone of another region", {"trainstack:availabilityZones": ["us-west-2a", "us-east-1b"]}, (),
     "trainstack:availabilityZones", "'us-east-1b' is not a zone of region us-west-2"),
    ("unsupported Kubernetes version", {"trainstack:kubernetesVersion": "1.29"}, (), "trainstack:kubernetesVersion",
     "Kubernetes 1.29 is not one trainstack supports"),
    ("no region", {}, ("aws:region",), "aws:region", "not set"),
    ("AWS provider key trainstack would ignore", {"aws:skipCredentialsValidation": "true"}, (),
     "aws:skipCredentialsValidation", "takes only aws:region and aws:profile"),
    ("VPC CIDR that is not a CIDR", {"trainstack:vpcCidr": "10.0.0.0/33"}, (), "trainstack:vpcCidr",
     "is not an IPv4 CIDR block"),
    ("public VPC CIDR", {"trainstack:vpcCidr": "8.8.0.0/16"}, (), "trainstack:vpcCidr", "must be a private block"),
    ("bad cluster admin ARN", {"trainstack:clusterAdmins": ["alice"]}, (), "trainstack:clusterAdmins",
     "'alice' is not an IAM role or user ARN"),
    ("existing VPC without private subnets", {"trainstack:existingNetwork": {"vpcId": "vpc-0abc"}}, (),
     "trainstack:existingNetwork.privateSubnetIds", "no private subnets given"),
    ("existing network with a bad VPC ID", {"trainstack:existingNetwork": {"vpcId": "0abc"}}, (),
     "trainstack:existingNetwork.vpcId", "expected a VPC ID"),
    ("job with fewer GPU nodes than it needs to start (no autoscaler)",
     {**NO_AUTOSCALER, JOB: {"enabled": True}, GPU: {"desired": 0}}, (),
     f"{GPU}.desired", "the job needs 1 GPU nodes to start, desired is 0"),
    ("V100 family the image's CUDA build is dropping", {GPU: {"instanceTypes": ["p3.2xlarge"]}}, (),
     f"{GPU}.instanceTypes", "p3.2xlarge has NVIDIA V100 GPUs (compute capability 7.0)"),
    ("V100 family, p3dn", {GPU: {"instanceTypes": ["g5.xlarge", "p3dn.24xlarge"]}}, (), f"{GPU}.instanceTypes",
     "p3dn.24xlarge has NVIDIA V100 GPUs"),
    # re-check nits: the slip named, not a consequence of it
    ("instance type in capitals", {GPU: {"instanceTypes": ["G5.XLARGE"]}}, (), f"{GPU}.instanceTypes",
     "'G5.XLARGE': EC2 instance types are lower case, without spaces. Fix: use g5.xlarge"),
    ("zone in capitals", {"trainstack:availabilityZones": ["US-WEST-2A", "us-west-2b"]}, (),
     "trainstack:availabilityZones", "'US-WEST-2A': zone names are lower case, without spaces. Fix: use us-west-2a"),
    ("VPC block with host bits", {"trainstack:vpcCidr": "10.0.0.1/16"}, (), "trainstack:vpcCidr",
     "10.0.0.1/16 has bits set past its /16 prefix. Fix: write the block's first address: 10.0.0.0/16"),
    ("API allow-list block with host bits", {"trainstack:apiPublicAccessCidrs": ["203.0.113.7/24"]}, (),
     "trainstack:apiPublicAccessCidrs", "203.0.113.7/24 has bits set past its /24 prefix"),
    ("AMD GPU family", {GPU: {"instanceTypes": ["g4ad.xlarge"]}}, (), f"{GPU}.instanceTypes",
     "g4ad.xlarge has no NVIDIA GPU"),
    ("instance type listed twice", {GPU: {"instanceTypes": ["g5.xlarge", "g5.xlarge"]}}, (), f"{GPU}.instanceTypes",
     "lists a value twice"),
    ("autoscaler with a size pulumi up would reset", {GPU: {"ignoreScalingChanges": False}}, (),
     f"{GPU}.ignoreScalingChanges", "false while the cluster autoscaler owns the GPU group"),
    ("no API allow-list", {}, ("trainstack:apiPublicAccessCidrs",), "trainstack:apiPublicAccessCidrs",
     "not set: the public Kubernetes API endpoint would accept any address"),
    ("private block on the public endpoint", {"trainstack:apiPublicAccessCidrs": ["10.0.0.0/16"]}, (),
     "trainstack:apiPublicAccessCidrs", "10.0.0.0/16 is a private block"),
    ("API allow-list with a private endpoint", {"trainstack:apiEndpoint": "private"}, (),
     "trainstack:apiPublicAccessCidrs", "set, but trainstack:apiEndpoint is private"),
    ("unknown API endpoint kind", {"trainstack:apiEndpoint": "internal"}, (), "trainstack:apiEndpoint",
     "expected one of public, private"),
    ("unknown control-plane log type", {"trainstack:controlPlaneLogs": ["audit", "kubelet"]}, (),
     "trainstack:controlPlaneLogs", "'kubelet' is not an EKS control-plane log type"),
    ("cluster admin listed twice", {"trainstack:clusterAdmins": [ADMIN, ADMIN]}, (), "trainstack:clusterAdmins",
     "lists a value twice"),
    ("preview role that is also a cluster admin", {"trainstack:clusterAdmins": [ADMIN],
                                                   "trainstack:previewRoleArn": ADMIN}, (),
     "trainstack:previewRoleArn", f"{ADMIN} is listed twice"),
    ("preview role that is not a role ARN", {"trainstack:previewRoleArn": "github-preview"}, (),
     "trainstack:previewRoleArn", "'github-preview' is not an IAM role or user ARN"),
    ("job name the chart cannot use", {JOB: {"name": "Train_1"}}, (), f"{JOB}.name", "is not a valid name"),
    # Helm-safe names otherwise: the line names the length rule broken, not the character rules kept.
    ("job name over the chart's length", {JOB: {"name": "t" * 60}}, (), f"{JOB}.name",
     "60 characters; the chart names the Job, its Service and its pods' hostnames after it, so it holds at most 50"),
    # The stack creates the job's namespace and deletes it on destroy: never one the cluster or the stack has.
    ("job namespace kube-system", {JOB: {"namespace": "kube-system", "enabled": True}}, (), f"{JOB}.namespace",
     "'kube-system' is a Kubernetes system namespace (the kube- prefix is reserved); the stack creates the job's "
     "namespace and deletes it on destroy. Fix: pulumi config set --path 'trainstack:job.namespace' training"),
    ("job namespace kube-public", {JOB: {"namespace": "kube-public"}}, (), f"{JOB}.namespace",
     "'kube-public' is a Kubernetes system namespace"),
    ("job namespace kube-node-lease", {JOB: {"namespace": "kube-node-lease"}}, (), f"{JOB}.namespace",
     "'kube-node-lease' is a Kubernetes system namespace"),
    ("job namespace of Kueue", {JOB: {"namespace": "kueue-system"}}, (), f"{JOB}.namespace",
     "'kueue-system' is the namespace the stack installs Kueue into"),
    ("job namespace of the device plugin", {JOB: {"namespace": "nvidia-device-plugin"}}, (), f"{JOB}.namespace",
     "'nvidia-device-plugin' is the namespace the stack installs the NVIDIA device plugin into"),
    ("job namespace of the autoscaler", {JOB: {"namespace": "cluster-autoscaler"}}, (), f"{JOB}.namespace",
     "'cluster-autoscaler' is the namespace the stack installs the cluster autoscaler into"),
    ("data prefix that is a URI", {JOB: {"dataPrefix": "s3://other-bucket/data"}}, (), f"{JOB}.dataPrefix",
     "expected a prefix inside the snapshot bucket"),
    ("data prefix that climbs out", {JOB: {"enabled": True, "dataPrefix": "../other"}}, (), f"{JOB}.dataPrefix",
     "'../other' has an empty, . or .. part, which S3 and GCS keep as part of the object names (a bucket has no "
     "parent or current directory). Fix: pulumi config set --path 'trainstack:job.dataPrefix' other"),
    ("queue name over 63 characters", {JOB: {"enabled": True, "queueName": "q" * 64}}, (), f"{JOB}.queueName",
     "64 characters; a Kubernetes LocalQueue name holds at most 63"),
    ("namespace over 63 characters", {JOB: {"namespace": "n" * 64}}, (), f"{JOB}.namespace",
     "64 characters; a Kubernetes namespace name holds at most 63"),
    ("data prefix with a space", {JOB: {"enabled": True, "dataPrefix": "my data"}}, (), f"{JOB}.dataPrefix",
     "'my data' has characters outside ASCII letters, digits and '_@%+=:,./-' (object keys allow them, but every "
     "command that names the prefix would need quoting). Fix: pulumi config set --path 'trainstack:job.dataPrefix' "
     "my-data"),
    ("data prefix with a shell character", {JOB: {"dataPrefix": "sets/$(id)"}}, (), f"{JOB}.dataPrefix",
     "has characters outside ASCII letters"),
    ("VPC block in loopback space", {"trainstack:vpcCidr": "127.0.0.0/16"}, (), "trainstack:vpcCidr",
     "127.0.0.0/16 is in the loopback (127.0.0.0/8) block, which no VPC can use"),
    ("VPC block in link-local space", {"trainstack:vpcCidr": "169.254.0.0/16"}, (), "trainstack:vpcCidr",
     "is in the link-local (169.254.0.0/16) block"),
    ("VPC block in reserved space", {"trainstack:vpcCidr": "240.0.0.0/16"}, (), "trainstack:vpcCidr",
     "is in the reserved (240.0.0.0/4) block"),
    ("VPC block in public space", {"trainstack:vpcCidr": "8.8.0.0/16"}, (), "trainstack:vpcCidr",
     "8.8.0.0/16 must be a private block"),
    ("data prefix with an empty part", {JOB: {"dataPrefix": "sets//v1"}}, (), f"{JOB}.dataPrefix",
     "'sets//v1' has an empty, . or .. part"),
    ("unknown cloud", {"trainstack:cloud": "azure"}, (), "trainstack:cloud",
     "'azure' is not a cloud trainstack can build (it can: aws, gcp)"),
    ("hourly budget that is not a number", {"trainstack:maxHourlyUsd": "cheap"}, (), "trainstack:maxHourlyUsd",
     "expected a number, got 'cheap'"),
    ("hourly budget of zero", {"trainstack:maxHourlyUsd": 0}, (), "trainstack:maxHourlyUsd", "must be at least 0.01"),
    # 2 x g4dn.xlarge on demand at max (160 GB disks): $0.19 platform + 2 x $0.54 = $1.28/h.
    ("stack over the hourly budget", {GPU: {"capacityType": "ON_DEMAND", "instanceTypes": ["g4dn.xlarge"]},
                                      "trainstack:maxHourlyUsd": 1}, (),
     "trainstack:maxHourlyUsd", "the stack can cost $0.19 platform + 2 x g4dn.xlarge ON_DEMAND $0.54 = $1.28/h "
     "with the GPU pool at its max, over the $1.00/h limit. Fix: pulumi config set trainstack:maxHourlyUsd 1.29"),
    # 5,000,000 steps x 16,384 tokens / 44,074 tokens/s (2 T4s, derived) = 516.31 h x $0.60/h.
    ("job over the run budget", {JOB: {"enabled": True, "train": {"maxSteps": 5000000}},
                                  GPU: {"instanceTypes": ["g4dn.xlarge"]}, "trainstack:maxRunUsd": 100},
     (), "trainstack:maxRunUsd", "5000000 steps x 16384 tokens / 44,074 tokens/s (derived) = 516.31 h x $0.19 "
     "platform + 2 x g4dn.xlarge SPOT $0.20 = $0.60/h, over the $100.00 limit"),
    ("run budget for an instance type without a price", {GPU: {"instanceTypes": ["g6e.xlarge"]},
                                                          JOB: {"enabled": True}, "trainstack:maxRunUsd": 100},
     ("trainstack:maxHourlyUsd",), "trainstack:maxRunUsd", "cannot check the budget: no price for g6e.xlarge in trainstack/infra/cost/prices.yaml"),
    # job.train: every trainer flag, checked by the trainer's own parser before anything is registered.
    ("train value that is not a number", {JOB: {"train": {"lr": "fast"}}}, (), f"{JOB}.train.lr",
     "expected a number, got 'fast'"),
    ("train value the trainer refuses", {JOB: {"train": {"lr": 5}}}, (), f"{JOB}.train",
     "the trainer refuses it: argument --lr: must be a finite number <= 1, got 5.0"),
    ("NaN learning rate", {JOB: {"train": {"lr": "nan"}}}, (), f"{JOB}.train.lr", "expected a number, got"),
    ("flags that contradict each other", {JOB: {"train": {"lr": 1e-4, "minLr": 1e-3}}}, (), f"{JOB}.train",
     "--min-lr 0.001 is above --lr 0.0001"),
    ("unknown train flag key", {JOB: {"train": {"warmupStep": 10}}}, (), f"{JOB}.train.warmupStep",
     f"did you mean {JOB}.train.warmupSteps?"),
    ("unknown flag in extraArgs", {JOB: {"train": {"extraArgs": ["--lrr", "1e-4"]}}}, (), f"{JOB}.train",
     "unrecognized arguments: --lrr 1e-4"),
    ("extraArgs that move the run off the shared volume", {JOB: {"train": {"extraArgs": ["--out=/tmp/run"]}}}, (),
     f"{JOB}.train.extraArgs", "--out would move the run off the shared volume"),
    ("run directory off the shared volume", {JOB: {"train": {"out": "/tmp/run"}}}, (), f"{JOB}.train.out",
     "'/tmp/run' is off the shared volume (/mnt/shared)"),
    ("a flag set twice", {JOB: {"train": {"lr": 1e-4, "extraArgs": ["--lr", "3e-4"]}}}, (), f"{JOB}.train.extraArgs",
     "--lr is also set as a key"),
    ("unknown preset", {JOB: {"train": {"preset": "gpt3"}}}, (), f"{JOB}.train",
     "argument --preset: invalid choice: 'gpt3'"),
    # W&B online needs the key in the pods, from a Secret the user created; the key never enters Pulumi.
    ("W&B online without the key", {JOB: {"train": {"wandbProject": "gpt2"}}}, (), f"{JOB}.secretEnv",
     "job.train.wandbProject 'gpt2' logs to W&B online, but no secretEnv gives the pods WANDB_API_KEY"),
    ("W&B online from extraArgs without the key", {JOB: {"train": {"extraArgs": ["--wandb-project=gpt2"]}}}, (),
     f"{JOB}.secretEnv", "kubectl create secret generic wandb"),
    ("secretEnv over torchrun's WORLD_SIZE", {JOB: {"secretEnv": [{"name": "WORLD_SIZE", "secretName": "w",
                                                                  "key": "k"}]}}, (), f"{JOB}.secretEnv[0].name",
     "WORLD_SIZE is set for each pod by torchrun, the chart or the cloud identity (or names a file); a Secret must not replace it"),
    ("secretEnv over torchelastic's", {JOB: {"secretEnv": [{"name": "TORCHELASTIC_RESTART_COUNT", "secretName": "w",
                                                           "key": "k"}]}}, (), f"{JOB}.secretEnv[0].name",
     "is set for each pod by torchrun"),
    ("secretEnv over the chart's rendezvous switch", {JOB: {"secretEnv": [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
                                                                        "secretName": "w", "key": "k"}]}}, (),
     f"{JOB}.secretEnv[0].name", "is set for each pod by torchrun"),
    ("secretEnv over torchrun's flag variables", {JOB: {"secretEnv": [{"name": "PET_NNODES", "secretName": "w",
                                                                      "key": "k"}]}}, (), f"{JOB}.secretEnv[0].name",
     "is set for each pod by torchrun"),
    ("secretEnv key with a space", {JOB: {"secretEnv": [{"name": "MY_TOKEN", "secretName": "w", "key": "api key"}]}},
     (), f"{JOB}.secretEnv[0].key", "(letters, digits, '-', '_' and '.', at most 253), got 'api key'"),
    ("secretEnv key that climbs", {JOB: {"secretEnv": [{"name": "MY_TOKEN", "secretName": "w", "key": "../k"}]}},
     (), f"{JOB}.secretEnv[0].key", "got '../k'"),
    ("secretEnv over the device plugin's GPUs", {JOB: {"secretEnv": [{"name": "CUDA_VISIBLE_DEVICES",
                                                                     "secretName": "w", "key": "k"}]}}, (),
     f"{JOB}.secretEnv[0].name", "is set for each pod by torchrun"),
    ("secretEnv key starting with ..", {JOB: {"secretEnv": [{"name": "MY_TOKEN", "secretName": "w", "key": "..foo"}]}},
     (), f"{JOB}.secretEnv[0].key", "got '..foo'"),
    ("secretEnv Secret name with an empty label", {JOB: {"secretEnv": [{"name": "MY_TOKEN", "secretName": "a..b",
                                                                       "key": "k"}]}}, (),
     f"{JOB}.secretEnv[0].secretName", "'a..b' is not a Secret name"),
    ("secretEnv over a key file's path", {JOB: {"secretEnv": [{"name": "GOOGLE_APPLICATION_CREDENTIALS",
                                                              "secretName": "w", "key": "k"}]}}, (),
     f"{JOB}.secretEnv[0].name", "is set for each pod by torchrun"),
    ("data prefix over the object-name limit", {JOB: {"dataPrefix": "d" * 1100}}, (), f"{JOB}.dataPrefix",
     "1100 bytes; object names are at most 1024"),
    ("secretEnv as one object", {JOB: {"secretEnv": {"name": "WANDB_API_KEY"}}}, (), f"{JOB}.secretEnv",
     "expected a list of {name, secretName, key}"),
    ("secretEnv with a value", {JOB: {"secretEnv": [{"name": "WANDB_API_KEY", "value": "k"}]}}, (),
     f"{JOB}.secretEnv[0].value", "unknown key"),
    ("secretEnv without its key", {JOB: {"secretEnv": [{"name": "WANDB_API_KEY", "secretName": "wandb"}]}}, (),
     f"{JOB}.secretEnv[0]", "expected {name, secretName, key}"),
    ("secretEnv bad variable name", {JOB: {"secretEnv": [{"name": "WANDB-KEY", "secretName": "w", "key": "k"}]}},
     (), f"{JOB}.secretEnv[0].name", "'WANDB-KEY' is not an environment variable name"),
    ("secretEnv bad Secret name", {JOB: {"secretEnv": [{"name": "K", "secretName": "W&B", "key": "k"}]}}, (),
     f"{JOB}.secretEnv[0].secretName", "'W&B' is not a Secret name"),
    ("secretEnv twice", {JOB: {"secretEnv": [{"name": "K", "secretName": "a", "key": "k"},
                                             {"name": "K", "secretName": "b", "key": "k"}]}}, (),
     f"{JOB}.secretEnv", "a variable is set twice: ['K']"),
    ("one zone", {"trainstack:availabilityZones": ["us-west-2a"]}, (), "trainstack:availabilityZones",
     "EKS needs subnets in at least two zones"),
    ("instance type typo", {"trainstack:systemNodes": {"instanceType": "t3-medium"}}, (),
     "trainstack:systemNodes.instanceType", "is not an EC2 instance type"),
    ("Arm system instance type", {"trainstack:systemNodes": {"instanceType": "t4g.medium"}}, (),
     "trainstack:systemNodes.instanceType", "is an Arm (Graviton) type"),
    ("tag in a reserved namespace", {"trainstack:tags": {"aws:team": "ml"}}, (), "trainstack:tags.aws:team",
     "is in a reserved namespace"),
    ("tag trainstack sets itself", {"trainstack:tags": {"pulumi-stack": "prod"}}, (), "trainstack:tags.pulumi-stack",
     "is set by trainstack on every resource"),
    # IAM and EFS take tag keys and values of letters, digits, spaces and _ . : / = + - @ only.
    ("tag value with a NUL", {"trainstack:tags": {"team": "ml\u0000x"}}, (), "trainstack:tags.team",
     "the tag value 'ml\\x00x' has '\\x00': AWS tags (IAM, EFS) take only letters, digits, spaces and "
     "_ . : / = + - @. Fix: pulumi config set --path 'trainstack:tags.team' ml-x"),
    ("tag value with #", {"trainstack:tags": {"cost-center": "ml#42"}}, (), "trainstack:tags.cost-center",
     "the tag value 'ml#42' has '#'"),
    ("tag key with !", {"trainstack:tags": {"team!": "ml"}}, (), "trainstack:tags",
     "the tag key 'team!' has '!': AWS tags (IAM, EFS) take only letters, digits, spaces and _ . : / = + - @. "
     "Fix: rename the tag in trainstack:tags without '!', e.g. 'team-'"),
    ("tag with an empty key", {"trainstack:tags": {"": "ml"}}, (), "trainstack:tags",
     "a tag with an empty key (value 'ml'). Fix: give that tag a key in trainstack:tags"),
    ("tag key with a newline", {"trainstack:tags": {"aws:\nteam": "ml"}}, (), "trainstack:tags",
     "the tag key 'aws:\\nteam' has '\\n'"),
]


@pytest.mark.parametrize(("overrides", "remove", "key", "fragment"),
                         [case[1:] for case in BAD_CONFIGS], ids=[case[0] for case in BAD_CONFIGS])
def test_bad_config_stops_before_any_resource_with_one_line(overrides, remove, key, fragment):
    assert_one_config_error_line(*run_main_expecting_error(config_with(overrides, remove)), key, fragment)


def test_cloud_is_taken_from_the_stack_name_when_unset():
    stop, logged, result = run_main_expecting_error(config_with(remove=("trainstack:cloud",)), stack="dev")

    assert isinstance(stop, SystemExit)
    assert logged == ["trainstack:cloud: not set, and the stack name 'dev' names no cloud. "
                      "Fix: pulumi stack select aws (or gcp), or pulumi config set trainstack:cloud aws"]
    assert result.registrations == []


def test_config_error_is_a_run_error_for_other_programs_too():
    # A program that builds AwsStack itself and does not catch it still gets Pulumi's one-line RunError
    # report (with the language host's generic exit-code line after it).
    with pytest.raises(ConfigError) as raised:
        parse_aws_config({"aws:region": "us-west-2", "trainstack:gpuNodes": '{"min": 3, "max": 2}'}, stack="aws")

    assert isinstance(raised.value, pulumi.RunError)
    assert raised.value.key == "trainstack:gpuNodes.min"


def _calls_answering(token: str, answer: dict):
    def calls(called: str, args: dict) -> dict:
        return {"id": args.get("id", "x"), **answer} if called == token else provider_calls(called, args)
    return calls


@pytest.mark.parametrize(("overrides", "token", "answer", "fragment"), [
    ({"trainstack:clusterAdmins": [DEPLOYER_ROLE_ARN]}, None, None,
     f"trainstack:clusterAdmins: {DEPLOYER_ROLE_ARN} is the identity running Pulumi"),
    # The same role under a path: the session ARN carries no path, the name still matches.
    ({"trainstack:clusterAdmins": ["arn:aws:iam::123456789012:role/sso/AWSReservedSSO_Deployer"]}, None, None,
     "is the identity running Pulumi"),
    # An IAM user running Pulumi, listed as an admin.
    ({"trainstack:clusterAdmins": ["arn:aws:iam::123456789012:user/ci"]}, GET_CALLER_IDENTITY,
     {"accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/ci", "userId": "AIDAEXAMPLE"},
     "trainstack:clusterAdmins: arn:aws:iam::123456789012:user/ci is the identity running Pulumi"),
    ({"trainstack:existingNetwork": {"vpcId": "vpc-0abc", "privateSubnetIds": ["subnet-a", "subnet-elsewhere"]}},
     None, None, "trainstack:existingNetwork.privateSubnetIds: subnet-elsewhere is in vpc-0other, not in vpc-0abc"),
])
def test_what_only_the_account_knows_fails_the_preview_with_one_line(overrides, token, answer, fragment):
    calls = _calls_answering(token, answer) if token else provider_calls
    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with(overrides), preview=True, calls=calls)
    assert fragment in str(raised.value)
    assert "\n" not in str(raised.value)
    assert ". Fix: " in str(raised.value)


def test_the_subnet_lookup_is_the_one_the_mocks_answer():
    # Guards the test above: the program asks for each existing private subnet by ID.
    result = run_main(config_with({"trainstack:existingNetwork": {"vpcId": "vpc-0abc",
                                                                   "privateSubnetIds": ["subnet-a", "subnet-b"]}}))
    assert [args for token, args in result.invokes if token == GET_SUBNET] == [{"id": "subnet-a"}, {"id": "subnet-b"}]


def test_stack_file_parses_to_the_seed_defaults():
    config = parse_aws_config(as_cli_config({**stack_file_config(), **API_ACCESS}), stack="aws")

    assert config.region == "us-west-2"
    assert config.network.availability_zones == ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d")
    assert config.gpu_nodes.instance_types == ("g4dn.xlarge", "g5.xlarge", "g6.xlarge")  # several spot pools
    assert config.gpu_nodes.gpus_per_node == 1
    assert config.gpu_nodes.capacity_type == "SPOT"
    assert (config.gpu_nodes.min_size, config.gpu_nodes.max_size) == (0, 2)
    # Shipped with the job off (data first): no job, no GPU node running.
    assert config.job.enabled is False
    assert config.gpu_nodes.desired_size == 0
    assert (config.job.pods_min, config.job.pods_max, config.job.gpus_per_pod) == (1, 2, 1)
    assert config.kubernetes_version == versions.EKS_KUBERNETES_VERSION
    assert config.cluster_name == "trainstack-aws"
    assert config.delete_bucket_on_destroy is False
    # Hardened defaults: the autoscaler owns the GPU group, audit logs on, a public endpoint only for
    # the addresses the user listed.
    assert config.cluster_autoscaler is True and config.gpu_nodes.ignore_scaling_changes is True
    assert config.control_plane_logs == ("audit", "authenticator")
    assert (config.api_endpoint.private, config.api_endpoint.public_access_cidrs) == (False, ("203.0.113.7/32",))


def test_code_defaults_match_the_shipped_stack_file():
    # A key left out of Pulumi.aws.yaml must not change what the stack file says it does.
    shipped = stack_file_config()
    bare = parse_aws_config(as_cli_config({"aws:region": "us-west-2", **API_ACCESS}), stack="aws")
    assert bare.job.enabled is shipped["trainstack:job"]["enabled"] is False
    assert bare.gpu_nodes.instance_types == tuple(shipped["trainstack:gpuNodes"]["instanceTypes"])
    assert bare.gpu_nodes.min_size == shipped["trainstack:gpuNodes"]["min"] == 0


@pytest.mark.parametrize(("autoscaler", "desired"), [(False, 2), (True, 0)])
def test_gpu_nodes_follow_the_job_unless_the_autoscaler_does(autoscaler, desired):
    enabled = as_cli_config({**stack_file_config(), **API_ACCESS, "trainstack:clusterAutoscaler": autoscaler,
                             "trainstack:job": {"enabled": True, "podsMax": 2},
                             "trainstack:gpuNodes": {"instanceTypes": ["g5.12xlarge"]}})
    config = parse_aws_config(enabled, stack="aws")

    # gpusPerPod defaults to all 4 GPUs of a g5.12xlarge: one pod per node, so two nodes at most.
    assert config.job.gpus_per_pod == 4
    assert config.gpu_nodes.max_size == 2
    # Without the autoscaler `pulumi up` starts them; with it the job's pending pods do.
    assert config.gpu_nodes.desired_size == desired
    assert config.gpu_nodes.ignore_scaling_changes is autoscaler


def test_private_endpoint_needs_no_allow_list():
    config = parse_aws_config(as_cli_config({**stack_file_config(), "trainstack:apiEndpoint": "private"}),
                              stack="aws")
    assert (config.api_endpoint.private, config.api_endpoint.public_access_cidrs) == (True, ())


def test_every_gpu_family_lists_only_whole_gpu_counts():
    # A typo such as 0 GPUs would make the capacity arithmetic divide by zero on a user's machine.
    assert all(count >= 1 for sizes in GPU_INSTANCE_FAMILIES.values() for count in sizes.values())


def test_config_values_arrive_as_strings_like_the_cli_sends_them():
    # `pulumi config set trainstack:deleteBucketOnDestroy true` arrives as the string "true".
    config = parse_aws_config({**as_cli_config({**stack_file_config(), **API_ACCESS}),
                               "trainstack:deleteBucketOnDestroy": "true"}, stack="aws")

    assert config.delete_bucket_on_destroy is True


def test_job_train_takes_every_trainer_flag_and_passes_the_rest_as_extra_args():
    from trainstack.contract.cli import train_flags
    from trainstack.infra.config.train_args import train_keys

    # Generated from the trainer's parser: every flag is a key, camelCase.
    assert len(train_keys()) == len(train_flags()) >= 30
    job = {"enabled": True, "train": {"lr": 3e-4, "warmupSteps": 50, "noExport": True, "maxSteps": 2000,
                                      "extraArgs": ["--seed", "7"]}}
    config = parse_aws_config({**as_cli_config(stack_file_config()), **API_ACCESS, JOB: job}, stack="aws")
    # The chart's own keys stay keys; the others become flags ahead of the user's extraArgs.
    assert config.job.train == {"maxSteps": 2000,
                                "extraArgs": ["--lr", "0.0003", "--warmup-steps", "50", "--no-export", "--seed", "7"]}


def test_old_job_keys_build_the_same_stack_with_one_warning_each(monkeypatch):
    # Before "pod" and "node" had one meaning each, trainstack:job said nodesMin for the job's pods.
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    job = {**stack_file_config()[JOB], "enabled": True}
    new_names = {new: old for old, new in RENAMED_KEYS.items()}
    old_job = {new_names.get(key, key): value for key, value in job.items()}
    assert set(RENAMED_KEYS) <= set(old_job)
    new = run_main(config_with({JOB: job}))
    assert not [w for w in warnings if "deprecated" in w]
    warnings.clear()
    old = run_main(config_with({JOB: old_job}, remove=(JOB,)))
    assert [(r.urn, r.inputs) for r in old.registrations] == [(r.urn, r.inputs) for r in new.registrations]
    assert sorted(w for w in warnings if "deprecated" in w) == sorted(f"{JOB}.{o} is deprecated: rename it to {JOB}.{n} (same meaning: per pod of the "
                                      "job)" for o, n in RENAMED_KEYS.items())


@pytest.mark.parametrize("prefix", ["runs/date=2026-11-25", "ds:2024-01-01T00:00", "gpt2+fineweb", "team@x/data"])
def test_a_data_prefix_no_shell_needs_to_quote_is_accepted(prefix):
    """Re-check 5 s43 and the session review: what shlex.quote leaves as it is needs no quoting."""
    config = parse_aws_config(as_cli_config({**stack_file_config(), **API_ACCESS,
                                             "trainstack:job": {"dataPrefix": prefix}}), stack="aws")
    assert config.job.data_prefix == prefix


def test_a_vpc_in_another_private_range_is_still_accepted():
    """An existing stack on 198.18.0.0/16 (accepted before) must not be told to renumber its VPC."""
    config = parse_aws_config(as_cli_config({**stack_file_config(), **API_ACCESS,
                                             "trainstack:vpcCidr": "198.18.0.0/16"}), stack="aws")
    assert config.network.vpc_cidr == "198.18.0.0/16"
