"""The benchmarks' tests use the training tests' small prepared corpus."""

from tests.training.conftest import corpus_dir, data_dir  # noqa: F401 - fixtures
