"""The run directory: claiming it, the lock that keeps two runs out, and the run's fixed configuration."""
