"""Stack config shared by every cloud: the error type, the typed readers and the `job` section."""

from infra.config.errors import NAMESPACE, ConfigError, set_hint
from infra.config.job import JobConfig, nodes_for_job, parse_job
from infra.config.reader import raw_config

__all__ = ["NAMESPACE", "ConfigError", "JobConfig", "nodes_for_job", "parse_job", "raw_config", "set_hint"]
