"""Stack config shared by every cloud: the error type, the typed readers and the `job` section."""

from trainstack.infra.config.errors import NAMESPACE, ConfigError, set_hint
from trainstack.infra.config.job import JobConfig, gpu_nodes_for_job, parse_job
from trainstack.infra.config.reader import raw_config

__all__ = ["NAMESPACE", "ConfigError", "JobConfig", "gpu_nodes_for_job", "parse_job", "raw_config", "set_hint"]
