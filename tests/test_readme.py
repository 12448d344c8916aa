"""The README's Python examples run as written."""
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index):
    namespace = {}
    for block in BLOCKS[: index + 1]:  # later blocks may use names from earlier ones
        exec(compile(block, f"README.md block {index}", "exec"), namespace)
