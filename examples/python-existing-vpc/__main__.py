"""The EKS training stack in an existing VPC: the library's AwsStack with `existing_network`, nothing else.

The network is only looked up (its CIDR block, its subnets' zones); the cluster, GPU nodes, EFS, bucket,
registry, image and the training platform are created in it.
"""

import pulumi

from trainstack.components import AwsExistingNetwork, AwsStack, AwsStackArgs, EksGpuNodes, Job

config = pulumi.Config()
stack = AwsStack("training", AwsStackArgs(
    region="us-west-2",
    existing_network=AwsExistingNetwork(
        vpc_id=config.require("vpcId"),
        private_subnet_ids=config.require_object("privateSubnetIds"),
    ),
    api_public_access_cidrs=[config.require("apiAccessCidr")],
    gpu_nodes=EksGpuNodes(instance_types=["g5.xlarge"], min=0, max=2),
    # The platform first; upload the data set, then set enabled=True and run `pulumi up` again.
    job=Job(enabled=False, pods_max=2, train={"preset": "gpt2", "maxSteps": 1000}),
))

pulumi.export("clusterName", stack.cluster_name)
pulumi.export("kubeconfig", stack.kubeconfig)
pulumi.export("imageRef", stack.image_ref)
pulumi.export("bucketName", stack.bucket_name)
