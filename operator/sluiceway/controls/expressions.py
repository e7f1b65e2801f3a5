"""Parameter references and expressions.

References use the reference's syntax: `${workflow.input.x}`,
`${workflow.workflowId}`, `${taskRef.output.y}`, `${taskRef.input.z}`, with
`.key` and `[index]` steps. A value that is exactly one reference keeps its
type; references embedded in a longer string are interpolated as text.

Expressions (SWITCH, INLINE) are CEL, the Kubernetes convention: side-effect
free, terminating, and never Python `eval`.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import cel

from sluiceway.model.common import wire_time

_WHOLE = re.compile(r"^\$\{([^{}]+)\}$")
_EMBEDDED = re.compile(r"\$\{([^{}]+)\}")
_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


class ExpressionError(ValueError):
    """An expression that does not parse or does not evaluate; the message says why."""


Step = str | int  # a key, or a list index


def parse_reference(path: str) -> list[Step]:
    """The steps of a reference such as `fetch.output.items[0].id`; raises
    ExpressionError naming the position it could not read. Workflows are
    checked with this when they are applied, so a reference that passes here
    never fails to evaluate."""
    steps: list[Step] = []
    position = 0
    path = path.strip()
    if not path:
        raise ExpressionError("empty reference ${}")
    while position < len(path):
        match = _STEP.match(path, position)
        if match is None or (position == 0 and match.group(2) is not None):
            raise ExpressionError(f"cannot parse reference ${{{path}}} at position {position}")
        key, index = match.groups()
        steps.append(int(index) if index is not None else key)
        position = match.end()
    return steps


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path such as `fetch.output.items[0].id`, or None."""
    node: Any = context
    for step in parse_reference(path):
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and step < len(node) else None
        elif isinstance(node, Mapping):
            node = node.get(step)
        else:
            return None
        if node is None:
            return None
    return node


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def resolve(template: Any, context: Mapping[str, Any], where: str = "") -> Any:
    """`template` with every reference replaced from `context`. A reference
    that does not parse raises ExpressionError prefixed with `where`, the
    field path of the template (extended into nested keys and indexes)."""
    if isinstance(template, str):
        try:
            whole = _WHOLE.match(template)
            if whole:
                return lookup(context, whole.group(1))
            if "${" not in template:
                return template
            return _EMBEDDED.sub(lambda m: _text(lookup(context, m.group(1))), template)
        except ExpressionError as error:
            raise ExpressionError(f"{where}: {error}" if where else str(error)) from error
    if isinstance(template, Mapping):
        return {k: resolve(v, context, _field(where, k)) for k, v in template.items()}
    if isinstance(template, list):
        return [resolve(v, context, f"{where}[{i}]") for i, v in enumerate(template)]
    return template


def reference_problems(template: Any, where: str) -> list[str]:
    """Every reference in `template` that does not parse, each naming its field."""
    if isinstance(template, str):
        found = []
        for path in _EMBEDDED.findall(template):
            try:
                parse_reference(path)
            except ExpressionError as error:
                found.append(f"{where}: {error}")
        return found
    if isinstance(template, Mapping):
        return [p for k, v in template.items() for p in reference_problems(v, _field(where, k))]
    if isinstance(template, list):
        return [p for i, v in enumerate(template) for p in reference_problems(v, f"{where}[{i}]")]
    return []


def _field(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


def references(template: Any) -> set[str]:
    """The first step of every reference in `template` (`workflow` or a task
    ref); a reference that does not parse is left to `reference_problems`."""
    found: set[str] = set()
    if isinstance(template, str):
        for path in _EMBEDDED.findall(template):
            with contextlib.suppress(ExpressionError):
                found.add(str(parse_reference(path)[0]))
    elif isinstance(template, Mapping):
        for value in template.values():
            found |= references(value)
    elif isinstance(template, list):
        for value in template:
            found |= references(value)
    return found


@functools.lru_cache(maxsize=1024)
def _compiled(expression: str) -> Any:
    try:
        return cel.compile(expression)
    except (ValueError, RuntimeError) as error:
        raise ExpressionError(f"invalid CEL expression {expression!r}: {error}") from error


def check_cel(expression: str) -> None:
    """Raise ExpressionError if `expression` does not parse."""
    _compiled(expression)


def evaluate_cel(expression: str, variables: Mapping[str, Any]) -> Any:
    """The expression's value as JSON can hold it (task outputs are JSON)."""
    program = _compiled(expression)
    try:
        value = program.execute(dict(variables))
    except Exception as error:  # noqa: BLE001 - the library raises many types; all mean "did not evaluate"
        raise ExpressionError(f"CEL expression {expression!r} failed: {type(error).__name__}: {error}") from error
    return _json_value(value, expression)


def _json_value(value: Any, expression: str) -> Any:
    """CEL has timestamps, durations, bytes and non-string map keys; JSON has
    not, and PostgreSQL's jsonb holds no NUL character."""
    if isinstance(value, str) and "\x00" in value:
        raise ExpressionError(f"CEL expression {expression!r} gave a string with a NUL character")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime.datetime):
        return wire_time(value)
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, (list, tuple)):
        return [_json_value(v, expression) for v in value]
    if isinstance(value, Mapping):
        return {_json_value(str(k), expression): _json_value(v, expression) for k, v in value.items()}
    raise ExpressionError(f"CEL expression {expression!r} gave a {type(value).__name__}, which JSON cannot hold")


def admission_key(expression: str, workflow_input: Mapping[str, Any]) -> str:
    """The per-key admission bucket of a run. A key that resolves to nothing
    (or does not parse, in a version stored before keys were checked) shares
    a bucket named by the expression itself, rather than escaping the limit."""
    try:
        value = resolve(expression, {"workflow": {"input": dict(workflow_input)}})
    except ExpressionError:
        return expression
    text = _text(value)
    return text if text else expression
