"""Least privilege: no long-lived GCP keys, no wildcard IAM grants, no project-wide Owner/Editor."""

from __future__ import annotations

from .common import Resource, Stack, as_list, get, json_document

AWS_POLICY_TYPES = ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy", "aws:iam/userPolicy:UserPolicy")
GCP_PROJECT_IAM = ("gcp:projects/iAMMember:IAMMember", "gcp:projects/iAMBinding:IAMBinding")
BASIC_ROLES = frozenset({"roles/owner", "roles/editor"})


def no_service_account_keys(resource: Resource, stack: Stack) -> list[str]:
    if resource.type == "gcp:serviceaccount/key:Key":
        return ["service-account keys are long-lived secrets; use Workload Identity (a KSA bound to the GSA)"]
    return []


def _wildcards(statement) -> list[str]:
    actions = [str(a) for a in as_list(get(statement, "Action"))]
    resources = [str(r) for r in as_list(get(statement, "Resource"))]
    if "*" in actions:
        return ["Action *"]
    service_wide = [a for a in actions if a.endswith(":*")]
    return [f"{a} on Resource *" for a in service_wide] if "*" in resources else []


def iam_least_privilege(resource: Resource, stack: Stack) -> list[str]:
    if resource.type in AWS_POLICY_TYPES:
        document = json_document(get(resource.props, "policy"))
        return [f"IAM policy allows {found}; name the actions and resources the workload needs"
                for statement in as_list(get(document, "Statement")) if get(statement, "Effect") == "Allow"
                for found in _wildcards(statement)]
    if resource.type in GCP_PROJECT_IAM and get(resource.props, "role") in BASIC_ROLES:
        return [f"{get(resource.props, 'role')} on the project is far more than a workload needs; grant a "
                "predefined role on the resource instead"]
    return []
