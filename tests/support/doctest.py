"""The examples in `docs/` run as written, so the docs cannot drift.

A page opts in with a comment saying what its examples need:

    <!-- doctest: workers=examples/workers.py -->

Each ```console block holds commands (`$ ...`, continued with a trailing `\\`)
followed by what they print on stdout. In the expected text, `...` matches
anything within a line and a line of only `...` matches any number of lines
(doctest's ELLIPSIS). A command expected to fail says so at its end:
`$ sluiceway runs get 0000...  # exits 3`. The commands of one page run in
order in one bash session, as a user at a terminal would run them, so a
variable set by one (`RUN=$(...)`) is there for the next."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

_BLOCK = re.compile(r"^```console\n(.*?)^```", re.M | re.S)
_DIRECTIVE = re.compile(r"<!--\s*doctest:(.*?)-->", re.S)
_EXITS = re.compile(r"\s+#\s*exits\s+(\d+)\s*$")
_MARK = "@@doctest@@"


@dataclass
class Example:
    command: str
    expected: list[str]
    exit_code: int = 0
    line: int = 0


@dataclass
class Page:
    path: Path
    directives: dict[str, str] = field(default_factory=dict)
    examples: list[Example] = field(default_factory=list)


def read(path: Path) -> Page | None:
    """The page's examples, or None when it has no doctest directive."""
    text = path.read_text()
    directive = _DIRECTIVE.search(text)
    if directive is None:
        return None
    page = Page(path, dict(part.split("=", 1) for part in directive.group(1).split() if "=" in part))
    for block in _BLOCK.finditer(text):
        first_line = text[: block.start()].count("\n") + 2
        current: Example | None = None
        continued = False
        for offset, line in enumerate(block.group(1).splitlines()):
            if continued and current is not None:
                current.command += "\n" + line
                continued = line.endswith("\\")
            elif line.startswith("$ "):
                current = Example(line[2:], [], line=first_line + offset)
                page.examples.append(current)
                continued = line.endswith("\\")
            elif current is not None:
                current.expected.append(line)
        for example in page.examples:
            exits = _EXITS.search(example.command)
            if exits:
                example.exit_code = int(exits.group(1))
                example.command = example.command[: exits.start()]
    return page


def _pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.rstrip().split("...")) + r"\n")
    return re.compile("".join(parts), re.S)


def matches(expected: list[str], got: str) -> bool:
    text = "".join(line.rstrip() + "\n" for line in got.splitlines())
    return _pattern(expected).fullmatch(text) is not None


@dataclass
class Outcome:
    example: Example
    stdout: str
    exit_code: int


def run(page: Page, env: dict[str, str], cwd: Path, workdir: Path, timeout: float = 300) -> list[Outcome]:
    """Run the page's commands in one bash session; each one's stdout and exit code."""
    lines = []
    for index, example in enumerate(page.examples):
        lines.append(f"{{ {example.command}\n}} 2>{workdir}/stderr.{index}")
        lines.append(f'echo "{_MARK}$?"')
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "\n".join(lines)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    outputs = result.stdout.split(_MARK)
    outcomes = []
    for index, example in enumerate(page.examples):
        if index + 1 >= len(outputs):
            outcomes.append(Outcome(example, outputs[index] if index < len(outputs) else "", -1))
            continue
        code_text, _, _ = outputs[index + 1].partition("\n")
        stdout = outputs[index]
        if index > 0:
            stdout = stdout.split("\n", 1)[1] if "\n" in stdout else ""
        outcomes.append(Outcome(example, stdout, int(code_text or -1)))
    return outcomes


def stderr_of(workdir: Path, index: int) -> str:
    try:
        return (workdir / f"stderr.{index}").read_text()
    except OSError:
        return ""
