"""Buckets and disks: private, encrypted at rest, and kept by `pulumi destroy` when they hold results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .common import Resource, Stack, as_list, get, json_document, truthy

S3_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
S3_ACLS = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
S3_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
GCS_BUCKET = "gcp:storage/bucket:Bucket"
PUBLIC_ACLS = frozenset({"public-read", "public-read-write", "authenticated-read"})
PUBLIC_GRANTEES = ("http://acs.amazonaws.com/groups/global/AllUsers",
                   "http://acs.amazonaws.com/groups/global/AuthenticatedUsers")
PUBLIC_MEMBERS = frozenset({"allUsers", "allAuthenticatedUsers"})
BLOCK_SETTINGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def _public_statements(document) -> list[str]:
    """Allow statements of a bucket policy that name everyone as principal without a condition."""
    found = []
    for statement in as_list(get(document, "Statement")):
        principal = get(statement, "Principal")
        everyone = principal == "*" or (isinstance(principal, Mapping) and "*" in as_list(get(principal, "AWS")))
        if get(statement, "Effect") == "Allow" and everyone and not get(statement, "Condition"):
            found.append(str(get(statement, "Sid", "(no Sid)")))
    return found


def bucket_not_public(resource: Resource, stack: Stack) -> list[str]:
    props, kind = resource.props, resource.type
    if kind in S3_BUCKETS or kind in S3_ACLS:
        problems = []
        if get(props, "acl") in PUBLIC_ACLS:
            problems.append(f"acl {get(props, 'acl')!r} makes objects readable by anyone; drop the ACL")
        for grant in as_list(get(props, "accessControlPolicy.grants")):
            if get(grant, "grantee.uri") in PUBLIC_GRANTEES:
                problems.append(f"grants {get(grant, 'permission')} to {get(grant, 'grantee.uri')}")
        if kind in S3_BUCKETS:
            problems += [f"inline policy statement {sid} allows everyone"
                         for sid in _public_statements(json_document(get(props, "policy")))]
        return problems
    if kind == S3_PUBLIC_ACCESS_BLOCK:
        off = [name for name in BLOCK_SETTINGS if not truthy(get(props, name))]
        return [f"public access block leaves {', '.join(off)} off; set all four to true"] if off else []
    if kind == "aws:s3/bucketPolicy:BucketPolicy":
        return [f"bucket policy statement {sid} allows everyone (Principal *, no Condition)"
                for sid in _public_statements(json_document(get(props, "policy")))]
    if kind == GCS_BUCKET:
        problems = []
        if get(props, "publicAccessPrevention") != "enforced":
            problems.append("publicAccessPrevention must be 'enforced'")
        if not truthy(get(props, "uniformBucketLevelAccess")):
            problems.append("uniformBucketLevelAccess must be true (IAM only, no object ACLs)")
        return problems
    if kind.startswith("gcp:storage/bucketIAM"):
        members = as_list(get(props, "member")) + as_list(get(props, "members"))
        for binding in as_list(get(json_document(get(props, "policyData")), "bindings")):
            members += as_list(get(binding, "members"))
        return [f"grants {get(props, 'role', 'a role')} to {m}" for m in members if m in PUBLIC_MEMBERS]
    if kind.startswith("gcp:storage/") and kind.endswith("AccessControl"):
        entity = get(props, "entity")
        return [f"ACL entity {entity} makes objects public"] if entity in PUBLIC_MEMBERS else []
    return []


def buckets_have_public_access_block(resources: Sequence[Resource], stack: Stack) -> list[tuple[Resource, str]]:
    """Stack rule: every S3 bucket has a BucketPublicAccessBlock (its settings are checked per resource)."""
    blocked = {key for r in resources if r.type == S3_PUBLIC_ACCESS_BLOCK for key in r.dependencies}
    return [(bucket, "no BucketPublicAccessBlock for this bucket; add one with all four settings true")
            for bucket in resources if bucket.type in S3_BUCKETS and bucket.key not in blocked]


def bucket_retained(resource: Resource, stack: Stack) -> list[str]:
    """Buckets hold snapshots and exports: `pulumi destroy` keeps them unless the stack asks otherwise."""
    if resource.type not in (*S3_BUCKETS, GCS_BUCKET) or stack.flag("trainstack:deleteBucketOnDestroy"):
        return []
    problems = []
    if truthy(get(resource.props, "forceDestroy")):
        problems.append("forceDestroy deletes every snapshot with the bucket; set it false "
                        "(or trainstack:deleteBucketOnDestroy true to mean it)")
    # The policy engine does not pass retainOnDelete; the golden graph records it.
    if "retainOnDelete" in resource.options and not truthy(resource.options["retainOnDelete"]):
        problems.append("retainOnDelete must be true: destroy keeps the bucket")
    return problems


def encryption_at_rest(resource: Resource, stack: Stack) -> list[str]:
    props, kind = resource.props, resource.type
    if kind in ("aws:efs/fileSystem:FileSystem", "aws:ebs/volume:Volume"):
        return [] if truthy(get(props, "encrypted")) else ["encrypted must be true"]
    if kind == "aws:ec2/launchTemplate:LaunchTemplate":
        return [f"block device {get(mapping, 'deviceName', '?')}: ebs.encrypted must be true"
                for mapping in as_list(get(props, "blockDeviceMappings"))
                if get(mapping, "ebs") is not None and not truthy(get(mapping, "ebs.encrypted"))]
    if kind == "aws:ec2/instance:Instance":
        return [] if truthy(get(props, "rootBlockDevice.encrypted")) else ["rootBlockDevice.encrypted must be true"]
    if kind == "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration":
        algorithms = [get(rule, "applyServerSideEncryptionByDefault.sseAlgorithm") for rule in as_list(get(props, "rules"))]
        return [] if algorithms and all(algorithms) else ["every rule needs applyServerSideEncryptionByDefault.sseAlgorithm"]
    # Google encrypts every disk, bucket and Filestore instance at rest; there is no way to turn it off.
    return []
