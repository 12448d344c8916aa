"""The documentation site builds in strict mode, and the Python examples of its pages run."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def test_docs_build_strict(tmp_path):
    # Needs the `docs` extra (`make docs` installs it). Any warning fails: a broken link or anchor,
    # an unresolvable cross-reference in a docstring, a public name without an API entry.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                    "--site-dir", str(tmp_path / "site")], cwd=ROOT, env=env, check=True)


@pytest.mark.parametrize("page", [p for p in PAGES if "```python" in p.read_text()],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_page_examples_run(page):
    namespace = {}
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)):
        exec(compile(block, f"{page.name} block {i}", "exec"), namespace)  # later blocks reuse names
