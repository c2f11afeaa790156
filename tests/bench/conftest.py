"""The benchmarks' tests use the training tests' small prepared corpus (tests/support/fixtures.py)."""

from tests.support.fixtures import corpus_dir, data_dir  # noqa: F401 - fixtures
