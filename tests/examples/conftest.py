"""Shared fixtures of the example tests, and the repository root on ``sys.path``.

``examples`` is not part of the installed distribution; ``python -m pytest`` (``make test``) finds it
from the working directory, a bare ``pytest`` through the path entry below.
"""
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """One data cache for the session: the rigid-body data are generated once."""
    return tmp_path_factory.mktemp("cache")
