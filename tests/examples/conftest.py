"""Shared fixtures of the example tests (``pythonpath`` in pyproject.toml makes ``examples`` importable)."""
import pytest


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """One data cache for the session: the rigid-body data are generated once."""
    return tmp_path_factory.mktemp("cache")
