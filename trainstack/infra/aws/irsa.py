"""IAM roles for Kubernetes service accounts (IRSA): one role that exactly one service account may assume."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from trainstack.infra.core.ordering import available_after


@dataclass(frozen=True, kw_only=True)
class IrsaRoleArgs:
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]  # without https://, the form the trust condition keys use
    namespace: str
    service_account: str  # may hold `*` (see trust_policy)
    # Further service accounts of the same namespace the role trusts (exact names).
    also_trusted: Sequence[str] = ()
    managed_policy_arns: Sequence[str] = ()
    inline_policy: pulumi.Input[str] | None = None  # a policy document, JSON
    tags: Mapping[str, str] = field(default_factory=dict)


def trust_policy(oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str,
                 also_trusted: Sequence[str] = ()) -> str:
    """Only tokens issued by the cluster, for this service account, meant for STS, may assume the role.
    A `*` in `service_account` matches several accounts of the namespace (StringLike), e.g. `efs-csi-*`
    for both the EFS CSI controller and its node plugin. `also_trusted` adds exact names: the condition
    then lists every subject (a list in StringEquals matches any of them).
    """
    names = [service_account, *(name for name in also_trusted if name != service_account)]
    subjects = [f"system:serviceaccount:{namespace}:{name}" for name in names]
    subject = {f"{oidc_issuer}:sub": subjects[0] if len(subjects) == 1 else subjects}
    audience = {f"{oidc_issuer}:aud": "sts.amazonaws.com"}
    condition = ({"StringLike": subject, "StringEquals": audience} if "*" in service_account
                 else {"StringEquals": {**subject, **audience}})
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": condition,
        }],
    }, sort_keys=True)


class IrsaRole(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]
    role_name: pulumi.Output[str]

    def __init__(self, name: str, args: IrsaRoleArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:IrsaRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
                lambda values: trust_policy(values[0], values[1], args.namespace, args.service_account,
                                            args.also_trusted)),
            description=f"IRSA: system:serviceaccount:{args.namespace}:{args.service_account}",
            tags=dict(args.tags),
            opts=child,
        )
        grants: list[pulumi.CustomResource] = [
            aws.iam.RolePolicyAttachment(f"{name}-managed-{index}", role=role.name, policy_arn=policy_arn,
                                         opts=child)
            for index, policy_arn in enumerate(args.managed_policy_arns)
        ]
        if args.inline_policy is not None:
            grants.append(aws.iam.RolePolicy(f"{name}-inline", role=role.name, policy=args.inline_policy, opts=child))
        # The ARN is handed out only once the role's permissions are attached: a pod that starts with the
        # role then never sees AccessDenied, and destroy removes the pod before the permissions.
        self.role_arn = available_after(role.arn, *grants)
        self.role_name = role.name
        self.register_outputs({"roleArn": self.role_arn, "roleName": self.role_name})
