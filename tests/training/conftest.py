"""The training tests' fixtures (tests/support/fixtures.py)."""

from tests.support.fixtures import corpus_dir, data_dir, finished_run  # noqa: F401 - fixtures
