"""`sluiceway lint FILES...`: the policy advisor, offline.

Reads TaskDefinition, Workflow, Semaphore, Quota and Schedule manifests from
files and directories (`*.yaml`, `*.yml`, multi-document), with no cluster
and no server, so it runs in CI before a GitOps merge. Other objects in the
same files (a Deployment, a WorkflowRun) are skipped. Each finding names the
file, the object, the field and the rule of the reference documents it breaks
(`controls/advice.py`; every rule is in docs/lint.md).

Exit codes: 0 clean (or only warnings, without `--strict`), 1 warnings with
`--strict`, 2 errors: a file that cannot be read or parsed, or an object the
operator would refuse."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.text import Text

from sluiceway.cli import output
from sluiceway.cli.client import ExitCode

if TYPE_CHECKING:
    from sluiceway.controls import advice

# The advisor and the workflow graph are imported by the command that uses them: they
# bring the CEL compiler, a quarter of a second that every other command would pay.

MANIFEST_SUFFIXES = (".yaml", ".yml")
_SEVERITY_STYLES = {"error": "red", "warning": "yellow"}


class LintFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


@dataclass
class Reading:
    """What the files held: the objects that parsed, and the findings of those that did not."""

    objects: list[advice.Declared] = field(default_factory=list)
    errors: list[advice.Finding] = field(default_factory=list)
    files: int = 0


def manifests(paths: list[Path]) -> Iterator[Path]:
    """The files named, and the manifests under the directories named, in a stable order."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        else:
            yield path


def _file_error(source: str, message: str) -> advice.Finding:
    from sluiceway.controls import advice

    return advice.Finding("", "", "", "unreadable-file", message, advice.Severity.ERROR, source)


def _documents(loaded: Any) -> Iterator[Mapping[str, Any]]:
    """The objects of one YAML document; a `kind: List` holds its `items`."""
    if not isinstance(loaded, Mapping):
        return
    if loaded.get("kind") == "List" and isinstance(loaded.get("items"), list):
        for item in loaded["items"]:
            if isinstance(item, Mapping):
                yield item
    else:
        yield loaded


def read(paths: list[Path]) -> Reading:
    from sluiceway.controls import advice

    reading = Reading()
    for path in manifests(paths):
        source = str(path)
        reading.files += 1
        try:
            loaded = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as error:
            reading.errors.append(_file_error(source, f"cannot read {source}: {error}"))
            continue
        except yaml.YAMLError as error:
            reading.errors.append(_file_error(source, f"not YAML: {error}".replace("\n", " ")))
            continue
        for document in (d for item in loaded for d in _documents(item)):
            if not advice.is_ours(document):
                continue
            parsed = advice.declared(document, source)
            if isinstance(parsed, list):
                reading.errors.extend(parsed)
            else:
                reading.errors.extend(_graph_errors(parsed))
                reading.objects.append(parsed)
    return reading


def _graph_errors(declared: advice.Declared) -> list[advice.Finding]:
    """What the operator refuses in a Workflow's graph beyond its schema (an
    unknown reference, a JOIN on nothing), as errors."""
    from sluiceway.controls import advice
    from sluiceway.engine.graph import problems
    from sluiceway.model.workflow import WorkflowSpec

    if not isinstance(declared.spec, WorkflowSpec):
        return []
    return [
        advice.Finding(
            declared.kind.value,
            declared.name,
            "spec." + problem.split(": ")[0],
            advice.INVALID.id,
            problem,
            advice.Severity.ERROR,
            declared.source,
        )
        for problem in problems(declared.spec)
    ]


def exit_code(findings: list[advice.Finding], strict: bool) -> ExitCode:
    if any(f.severity == "error" for f in findings):
        return ExitCode.USAGE
    if strict and findings:
        return ExitCode.UNSUCCESSFUL
    return ExitCode.OK


def _render(findings: list[advice.Finding]) -> Any:
    return output.table(
        [f.to_wire() for f in findings],
        [
            ("FILE", lambda r: r["source"]),
            ("OBJECT", lambda r: f"{r['kind']}/{r['name']}" if r["kind"] else ""),
            ("FIELD", lambda r: r["field"]),
            ("SEVERITY", lambda r: Text(r["severity"], style=_SEVERITY_STYLES[r["severity"]])),
            ("RULE", lambda r: r["rule"]),
            ("MESSAGE", lambda r: r["message"]),
        ],
    )


def lint(
    paths: Annotated[
        list[Path], typer.Argument(help="Manifest files, or directories to read *.yaml and *.yml from", min=1)
    ],
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when there are warnings")] = False,
    fmt: Annotated[
        LintFormat, typer.Option("--output", "-o", help="table or json", case_sensitive=False)
    ] = LintFormat.TABLE,
) -> None:
    """Warn, offline, about definitions the reference documents say are never
    right: a worker task without scheduleToStartTimeout, retries that outlive
    the workflow timeout, an SLA at the timeout, an undeclared semaphore, a
    gate that never admits, an indefinite retry without a budget, a rate limit
    below a schedule's fire rate. Needs no cluster and no server.

    Exit codes: 0 clean (warnings allowed without --strict), 1 warnings with
    --strict, 2 an error (a file or an object that does not parse)."""
    from sluiceway.controls import advice

    missing = [p for p in paths if not p.exists()]
    reading = read([p for p in paths if p.exists()])
    errors = [_file_error(str(p), f"no such file or directory: {p}") for p in missing] + reading.errors
    findings = errors + advice.advise(reading.objects)
    if fmt is LintFormat.JSON:
        output.console().out(json.dumps([f.to_wire() for f in findings], indent=2, ensure_ascii=False))
    elif findings:
        output.print_lines(_render(findings))
    errors_found = sum(f.severity is advice.Severity.ERROR for f in findings)
    output.note(
        f"{_count(errors_found, 'error')}, {_count(len(findings) - errors_found, 'warning')} in "
        f"{_count(len(reading.objects), 'object')} from {_count(reading.files, 'file')}"
    )
    raise typer.Exit(int(exit_code(findings, strict)))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def register(app: typer.Typer) -> None:
    app.command("lint")(lint)
