"""No measurements in the sources of ``rules`` and ``geometric``: code says why, not how fast.

A timing, a speed ratio, a percentage or a description of the machine it was taken on lives
once, in ``benchmarks/RESULTS.md`` (history in CHANGELOG.md); a comment or docstring gives the
reason (fewer operations, one call instead of one per matrix, a layout a kernel takes). This
scans every line of the two packages, comments and docstrings included.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

PATTERNS = {
    "a time": r"\d\s*(µs|us|ms|ns)\b|\bseconds\b|\bmicroseconds?\b|\bmilliseconds?\b",
    "a ratio range": r"\b\d\.\d{1,3}\s*[–-]\s*\d\.\d{1,3}\b",
    "a percentage": r"\d\s*%",
    "a speed comparison": r"\b(faster|slower|speed-?ups?|of the time|times as long)\b"
                          r"|\d(\.\d+)?\s*×\s*(faster|slower|as long|the time)",
    "a measurement": r"\bmeasur(ed|ing)\b|\bbenchmark(ed)?\b|\btimed\b|\btimings?\b",
    "a machine": r"\bhosts?\b|\bAVX\w*|\bEPYC\b|\b(one|two|\d+)[- ]cores?\b",
}


def _findings(directory):
    found = []
    for path in sorted(directory.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for what, pattern in PATTERNS.items():
                if re.search(pattern, line, flags=re.IGNORECASE):
                    found.append(f"{path.relative_to(directory.parent)}:{number}: {what}: "
                                 f"{line.strip()}")
    return found


@pytest.mark.parametrize("package", ["rules", "geometric"])
def test_no_measurements_in_the_sources(package):
    found = _findings(ROOT / package)
    assert not found, "\n".join(found)


def test_the_scan_finds_a_benchmark_log(tmp_path):
    (tmp_path / "m.py").write_text("# On a 2-core host: 0.86–0.93 of the time (12 µs).\n")
    found = {line.split(": ")[1] for line in _findings(tmp_path)}
    assert found == {"a time", "a ratio range", "a speed comparison", "a machine"}
