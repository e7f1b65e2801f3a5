"""Parameter references and expressions.

References use the reference's syntax: `${workflow.input.x}`,
`${workflow.workflowId}`, `${taskRef.output.y}`, `${taskRef.input.z}`, with
`.key` and `[index]` steps. A value that is exactly one reference keeps its
type; references embedded in a longer string are interpolated as text.

Expressions (SWITCH, INLINE) are CEL, the Kubernetes convention: side-effect
free, terminating, and never Python `eval`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import cel

_WHOLE = re.compile(r"^\$\{([^{}]+)\}$")
_EMBEDDED = re.compile(r"\$\{([^{}]+)\}")
_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


class ExpressionError(ValueError):
    """An expression that does not parse or does not evaluate; the message says why."""


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path such as `fetch.output.items[0].id`, or None."""
    node: Any = context
    position = 0
    path = path.strip()
    while position < len(path):
        match = _STEP.match(path, position)
        if match is None:
            raise ExpressionError(f"cannot parse reference ${{{path}}} at position {position}")
        key, index = match.groups()
        position = match.end()
        if index is not None:
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
        elif isinstance(node, Mapping):
            node = node.get(key)
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


def resolve(template: Any, context: Mapping[str, Any]) -> Any:
    """`template` with every reference replaced from `context`."""
    if isinstance(template, str):
        whole = _WHOLE.match(template)
        if whole:
            return lookup(context, whole.group(1))
        if "${" not in template:
            return template
        return _EMBEDDED.sub(lambda m: _text(lookup(context, m.group(1))), template)
    if isinstance(template, Mapping):
        return {k: resolve(v, context) for k, v in template.items()}
    if isinstance(template, list):
        return [resolve(v, context) for v in template]
    return template


def references(template: Any) -> set[str]:
    """The first step of every reference in `template` (`workflow` or a task ref)."""
    found: set[str] = set()
    if isinstance(template, str):
        for path in _EMBEDDED.findall(template):
            found.add(re.split(r"[.\[]", path.strip(), maxsplit=1)[0])
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
    program = _compiled(expression)
    try:
        return program.execute(dict(variables))
    except Exception as error:  # noqa: BLE001 - the library raises many types; all mean "did not evaluate"
        raise ExpressionError(f"CEL expression {expression!r} failed: {type(error).__name__}: {error}") from error


def admission_key(expression: str, workflow_input: Mapping[str, Any]) -> str:
    """The per-key admission bucket of a run. A key that resolves to nothing
    shares a bucket named by the expression itself, rather than escaping the
    limit."""
    value = resolve(expression, {"workflow": {"input": dict(workflow_input)}})
    text = _text(value)
    return text if text else expression
