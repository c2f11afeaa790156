"""The training job's settings as a hosted component takes them: the one typed model of `trainstack:job`
(trainstack/infra/config/job_settings.py), under the names the components have always exported."""

from trainstack.infra.config.job_settings import Job, SecretEnv

__all__ = ["Job", "SecretEnv"]
