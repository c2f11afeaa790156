"""The stack's bucket URI (`jobSubmission.bucketUri`) checked against the clouds' bucket naming rules.

The URI is installed into every job (`--snapshot-uri`) and printed back by `results` as a command to
paste, so a bucket name no cloud would accept (a space, a `;`, uppercase) is refused where it is read.
Rules: S3, docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html (general purpose
buckets); GCS, cloud.google.com/storage/docs/buckets#naming.
"""

from __future__ import annotations

import re

_IP_ADDRESS = re.compile(r"\d+\.\d+\.\d+\.\d+")
_S3 = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_S3_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_S3_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_GCS_COMPONENT = re.compile(r"[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?")
_GCS = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")


def _s3_problem(name: str) -> str | None:
    if not _S3.fullmatch(name) or ".." in name:
        return "an S3 bucket name: 3-63 lowercase letters, digits, . and -, a letter or digit at each end"
    if _IP_ADDRESS.fullmatch(name) or name.startswith(_S3_PREFIXES) or name.endswith(_S3_SUFFIXES):
        return "an S3 bucket name (not an IP address, no reserved prefix or suffix)"
    return None


def _gcs_problem(name: str) -> str | None:
    parts = name.split(".")
    if not _GCS.fullmatch(name) or (len(name) > 63 and len(parts) == 1) or not all(
            _GCS_COMPONENT.fullmatch(part) for part in parts):
        return ("a GCS bucket name: lowercase letters, digits, -, _ and ., 3-63 characters (222 with dots), "
                "a letter or digit at each end")
    if _IP_ADDRESS.fullmatch(name) or name.startswith("goog") or "google" in name:
        return "a GCS bucket name (not an IP address, no goog prefix, no google)"
    return None


def check_bucket_uri(uri: str) -> str | None:
    """What `uri` should have been (s3://<bucket> or gs://<bucket>, a valid name), or None when it is one."""
    scheme, sep, rest = uri.partition("://")
    name = rest.rstrip("/")
    if not sep or scheme not in ("s3", "gs") or "/" in name:
        return "s3://<bucket> or gs://<bucket>"
    return _s3_problem(name) if scheme == "s3" else _gcs_problem(name)
