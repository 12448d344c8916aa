"""The wheel users install: both import packages with their type markers, the licence, nothing else."""
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out),
                    str(ROOT)], check=True, cwd=out)
    (path,) = out.glob("pullbacks-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_holds_both_packages_and_nothing_else(wheel):
    names = wheel.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"rules", "geometric", next(t for t in tops if t.endswith(".dist-info"))}
    assert {"rules/py.typed", "geometric/py.typed"} <= set(names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_wheel_metadata(wheel):
    (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    msg = Parser().parsestr(wheel.read(meta).decode())
    assert msg["License-Expression"] == "Apache-2.0"
    runtime = sorted(r.split(">")[0].split("=")[0].strip() for r in msg.get_all("Requires-Dist")
                     if "extra ==" not in r)
    assert runtime == ["jax", "jaxlib", "optax"]
