"""The closing note of issue 16, kept true: every metric Sluiceway exports has
a row in docs/observability.md naming the tests that assert its value, and
those tests exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [ROOT / "operator/sluiceway/observability/metrics.py", ROOT / "operator/sluiceway/runtime/loops.py"]


def exported() -> set[str]:
    """Every metric name declared in the source (prometheus_client adds `_total` to counters)."""
    declaration = re.compile(r'(Counter|CounterMetricFamily|Gauge|GaugeMetricFamily|Histogram)\(\s*"(sluiceway_\w+)"')
    names = set()
    for source in SOURCES:
        for kind, name in declaration.findall(source.read_text()):
            counter = kind.startswith("Counter") and not name.endswith("_total")
            names.add(f"{name}_total" if counter else name)
    return names


def documented() -> dict[str, str]:
    """metric -> the tests its row names ('same' rows inherit the row above's)."""
    rows: dict[str, str] = {}
    tests = ""
    for line in (ROOT / "docs/observability.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        found = re.fullmatch(r"`(sluiceway_\w+)`", cells[0]) if len(cells) >= 4 else None
        if found:
            tests = tests if cells[-1].startswith("same") else cells[-1]
            rows[found.group(1)] = tests
    return rows


def test_every_exported_metric_names_the_tests_that_assert_its_value() -> None:
    names, rows = exported(), documented()
    assert len(names) >= 40, sorted(names)
    assert names <= set(rows), f"not in docs/observability.md: {sorted(names - set(rows))}"
    every_test = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    for name in sorted(names):
        files = re.findall(r"tests/[\w/]+\.py", rows[name])
        functions = re.findall(r"\b(test_\w+)\b(?!\.py)", rows[name])
        assert files or functions, f"{name}: its row names no test"
        for file in files:
            assert (ROOT / file).is_file(), f"{name}: no {file}"
        for function in functions:
            assert re.search(rf"def {function}\(", every_test), f"{name}: no test {function}"
