"""The GCP stack: typed components for the GKE GPU training platform (see stack.py for the whole)."""

from trainstack.infra.gcp.config import GcpStackConfig, parse_gcp_config
from trainstack.infra.gcp.stack import GcpStack, GcpStackArgs

__all__ = ["GcpStack", "GcpStackArgs", "GcpStackConfig", "parse_gcp_config"]
