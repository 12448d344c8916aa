"""The README's Python examples run as written."""
import functools
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@functools.cache
def namespace_after(index: int) -> dict:
    """The names defined by blocks 0…index run in order, as a reader runs them (later blocks may
    use names from earlier ones); each block runs once per session."""
    namespace = dict(namespace_after(index - 1)) if index else {}
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index):
    namespace_after(index)
