"""The training tests' fixtures (tests/support/fixtures.py)."""

from tests.support.fixtures import corpus_dir, data_dir  # noqa: F401 - fixtures
