"""The pure core reads no clock and draws no randomness of its own: `now` and
the random source are parameters (the decider, backoff with jitter, timeouts,
the breaker). import-linter keeps IO libraries out; this scan keeps out what
the standard library offers without any IO import: clock reads (`datetime.now`,
`time.time`, `time.monotonic`, ...) and randomness (the `random` module's
functions and generators, `secrets`, `os.urandom`, `uuid.uuid1`/`uuid4`).

Taking a `random.Random` as a parameter is the sanctioned way in, so naming
the class in an annotation is allowed; constructing one is not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sluiceway

PURE = ("controls", "engine", "model")
ROOT = Path(sluiceway.__file__).parent

# module -> the names in it that read a clock or draw randomness
_FORBIDDEN_MODULES = {"time", "secrets"}
_FORBIDDEN_ATTRIBUTES = {
    "datetime": {"now", "utcnow", "today"},
    "date": {"today"},
    "os": {"urandom", "getrandom"},
    "uuid": {"uuid1", "uuid4"},
}
_RANDOM_ALLOWED = {"Random"}  # as a type of a parameter, never called


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def violations(source: str) -> list[str]:
    """Every clock read or draw of randomness in `source`, as 'line: what'."""
    found: list[str] = []
    random_names: set[str] = set()  # local names bound to the random module or its Random class
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in _FORBIDDEN_MODULES:
                    found.append(f"{node.lineno}: import {alias.name}")
                if root == "random":
                    random_names.add(alias.asname or "random")
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".")[0]
            for alias in node.names:
                if module in _FORBIDDEN_MODULES:
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                elif module == "random":
                    if alias.name not in _RANDOM_ALLOWED:
                        found.append(f"{node.lineno}: from random import {alias.name}")
                    random_names.add(alias.asname or alias.name)
                elif alias.name in _FORBIDDEN_ATTRIBUTES.get(module, set()):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute):
            owner = _dotted(node.value).split(".")[-1]
            if node.attr in _FORBIDDEN_ATTRIBUTES.get(owner, set()):
                found.append(f"{node.lineno}: {_dotted(node)}")
            if owner in random_names or _dotted(node.value) == "random":
                found.append(f"{node.lineno}: {_dotted(node)}")
        elif isinstance(node, ast.Call) and _dotted(node.func) in random_names:
            found.append(f"{node.lineno}: {_dotted(node.func)}(...)")
    return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def _modules() -> list[Path]:
    return sorted(path for package in PURE for path in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pure_core_reads_no_clock_and_draws_no_randomness(path: Path) -> None:
    assert violations(path.read_text()) == []


def test_the_scan_covers_every_pure_package() -> None:
    assert {p.relative_to(ROOT).parts[0] for p in _modules()} == set(PURE)


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("import datetime\nnow = datetime.datetime.now(datetime.UTC)", "datetime.datetime.now"),
        ("from datetime import datetime\nx = datetime.utcnow()", "datetime.utcnow"),
        ("from datetime import date\nx = date.today()", "date.today"),
        ("import time\nx = time.monotonic()", "import time"),
        ("from time import perf_counter", "from time import perf_counter"),
        ("import random\nx = random.random()", "random.random"),
        ("from random import choice", "from random import choice"),
        ("from random import Random\nrng = Random(7)", "Random(...)"),
        ("import random as r\nx = r.randrange(3)", "r.randrange"),
        ("import uuid\nx = uuid.uuid4()", "uuid.uuid4"),
        ("import os\nx = os.urandom(8)", "os.urandom"),
        ("import secrets", "import secrets"),
    ],
)
def test_the_scan_catches_each_kind(source: str, caught: str) -> None:
    assert any(caught in v for v in violations(source)), violations(source)


def test_a_random_source_passed_in_and_time_passed_in_are_fine() -> None:
    source = (
        "import datetime\nfrom random import Random\n"
        "def delay(rng: Random, now: datetime.datetime) -> float:\n"
        "    return rng.uniform(0, 1) + now.timestamp()\n"
    )
    assert violations(source) == []
