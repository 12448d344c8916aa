"""mypy passes on both packages (configuration in pyproject.toml: strict on geometric; rules'
private rule functions are exempt from annotation, its public API is checked by test_api.py)."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_mypy():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
