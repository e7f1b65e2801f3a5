"""Search attributes: their values checked against the declared types, the
set a run starts with, what a task may upsert, and the filters runs are listed
by. Pure: every error names the attribute (`searchAttributes.tenant: ...`)
so the edge answers with a 4xx that says what to fix."""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sluiceway.controls.expressions import ExpressionError, resolve
from sluiceway.model.attributes import ATTRIBUTE_NAME_PATTERN, MAX_KEYWORD, MAX_PER_RUN, AttributeType, SearchAttribute
from sluiceway.model.common import INT64_MAX, INT64_MIN, wire_time

Declared = Sequence[SearchAttribute]  # a workflow version's searchAttributes

Value = str | int | float | bool | datetime.datetime
FIELD = "searchAttributes"
_NAME = re.compile(ATTRIBUTE_NAME_PATTERN)


@dataclass(frozen=True)
class Attribute:
    name: str
    type: AttributeType
    value: Value

    def wire(self) -> Any:
        """The JSON form: datetimes as ISO 8601 in UTC, the rest as they are."""
        if isinstance(self.value, datetime.datetime):
            return wire_time(self.value)
        return self.value


@dataclass(frozen=True)
class Problem:
    field: str  # dotted: searchAttributes.tenant
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class BadValue(ValueError):
    """A value that does not fit its attribute's type."""


def typed(kind: AttributeType, raw: Any, *, text: bool = False) -> Value:
    """`raw` as a value of `kind`, or BadValue saying why not. With
    `text`, `raw` is how a person or a label writes it (`"42"`, `"true"`)."""
    if kind is AttributeType.KEYWORD:
        if not isinstance(raw, str):
            raise BadValue(f"a keyword is a string, not {_kind(raw)}")
        if len(raw) > MAX_KEYWORD:
            raise BadValue(f"a keyword holds at most {MAX_KEYWORD} characters, not {len(raw)}")
        if "\x00" in raw:
            raise BadValue("a keyword cannot contain a NUL character")
        return raw
    if text:
        raw = _from_text(kind, raw)
    if kind is AttributeType.BOOL:
        if not isinstance(raw, bool):
            raise BadValue(f"a bool is true or false, not {_kind(raw)}")
        return raw
    if kind is AttributeType.INT:
        if isinstance(raw, bool) or not isinstance(raw, int):
            if isinstance(raw, float) and raw.is_integer() and not isinstance(raw, bool):
                raw = int(raw)
            else:
                raise BadValue(f"an int is a whole number, not {_kind(raw)}")
        whole = int(raw)
        if not INT64_MIN <= whole <= INT64_MAX:
            raise BadValue("an int must fit in 64 bits")
        return whole
    if kind is AttributeType.DOUBLE:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise BadValue(f"a double is a number, not {_kind(raw)}")
        if not math.isfinite(raw):
            raise BadValue("a double must be finite")
        return float(raw)
    return _instant(raw)


def _from_text(kind: AttributeType, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if kind is AttributeType.BOOL:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise BadValue(f"a bool is true or false, not {raw[:64]!r}")
    if kind is AttributeType.INT:
        try:
            return int(text)
        except ValueError:
            raise BadValue(f"an int is a whole number, not {raw[:64]!r}") from None
    if kind is AttributeType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise BadValue(f"a double is a number, not {raw[:64]!r}") from None
    return text


def _instant(raw: Any) -> datetime.datetime:
    if not isinstance(raw, str):
        raise BadValue(f"a datetime is an ISO 8601 string, not {_kind(raw)}")
    try:
        instant = datetime.datetime.fromisoformat(raw.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadValue(f"cannot read datetime {raw[:64]!r}: use ISO 8601, e.g. 2026-12-24T18:00:00Z") from None
    if instant.tzinfo is None:
        raise BadValue(f"datetime {raw[:64]!r} has no time zone: add Z or an offset")
    return instant


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {value[:64]!r}"
    if isinstance(value, bool):
        return f"the bool {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    return f"a {'list' if isinstance(value, list) else 'object' if isinstance(value, dict) else type(value).__name__}"


# -- what a run starts with ------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    attributes: dict[str, Attribute]
    problems: list[Problem]


def _find(declared: Declared, name: str) -> SearchAttribute | None:
    return next((a for a in declared if a.name == name), None)


def at_start(
    declared: Declared,
    given: Mapping[str, Any],
    *,
    run_input: Mapping[str, Any],
    correlation_id: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Checked:
    """The attributes a run starts with, or the problems that refuse the start.

    Precedence: set at start, then a WorkflowRun's labels (text, typed by the
    declaration when one exists, else keywords), then each declaration's
    source. Only declared attributes may be set at start; a source that
    resolves to nothing leaves its attribute unset."""
    found: dict[str, Attribute] = {}
    problems: list[Problem] = []
    for name, raw in given.items():
        field = f"{FIELD}.{name}"
        attribute = _find(declared, name)
        if attribute is None:
            problems.append(Problem(field, f"not declared by the workflow ({_listed(declared)})"))
            continue
        try:
            found[name] = Attribute(name, attribute.type, typed(attribute.type, raw))
        except BadValue as error:
            problems.append(Problem(field, f"{attribute.type.value}: {error}"))
    for name, raw in (labels or {}).items():
        if name in found or not _NAME.fullmatch(name):
            continue
        attribute = _find(declared, name)
        kind = attribute.type if attribute is not None else AttributeType.KEYWORD
        try:
            found[name] = Attribute(name, kind, typed(kind, raw, text=True))
        except BadValue as error:
            problems.append(Problem(f"metadata.labels.{name}", f"{kind.value}: {error}"))
    context = {"workflow": {"input": dict(run_input), "correlationId": correlation_id}}
    for attribute in declared:
        if attribute.name in found or attribute.source is None:
            continue
        field = f"{FIELD}.{attribute.name}"
        try:
            raw = resolve(attribute.source, context, f"searchAttributes[{attribute.name}].source")
        except ExpressionError as error:
            problems.append(Problem(field, str(error)))
            continue
        if raw is None:
            continue
        try:
            found[attribute.name] = Attribute(attribute.name, attribute.type, typed(attribute.type, raw))
        except BadValue as error:
            problems.append(Problem(field, f"{attribute.type.value} from {attribute.source}: {error}"))
    if len(found) > MAX_PER_RUN:
        problems.append(Problem(FIELD, f"a run carries at most {MAX_PER_RUN} attributes, not {len(found)}"))
    return Checked(found, problems)


def upserted(declared: Declared, given: Mapping[str, Any]) -> Checked:
    """What a task result may set: declared attributes, each of its type."""
    found: dict[str, Attribute] = {}
    problems: list[Problem] = []
    for name, raw in given.items():
        field = f"{FIELD}.{name}"
        attribute = _find(declared, name)
        if attribute is None:
            problems.append(Problem(field, f"not declared by the workflow ({_listed(declared)})"))
            continue
        try:
            found[name] = Attribute(name, attribute.type, typed(attribute.type, raw))
        except BadValue as error:
            problems.append(Problem(field, f"{attribute.type.value}: {error}"))
    return Checked(found, problems)


def _listed(declared: Declared) -> str:
    names = [a.name for a in declared]
    return f"it declares {', '.join(names)}" if names else "it declares none"


# -- filters ---------------------------------------------------------------------


class Op(StrEnum):
    EQ = "="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"


_RANGE = re.compile(r"^\s*(?P<name>[^\s=<>!]+)\s*(?P<op>>=|<=|==|=|<|>)\s*(?P<value>.*?)\s*$", re.S)
_IN = re.compile(r"^\s*(?P<name>[^\s=<>!]+)\s+in\s*\((?P<values>.*)\)\s*$", re.S | re.I)
MAX_IN = 100


@dataclass(frozen=True)
class Filter:
    """One condition as written: `tenant=acme`, `amount>=100`, `tenant in (acme, globex)`."""

    name: str
    op: Op
    values: tuple[str, ...]


@dataclass(frozen=True)
class TypedFilter:
    name: str
    type: AttributeType
    op: Op
    values: tuple[Value, ...]


class FilterError(ValueError):
    """A filter that cannot be read or does not fit its attribute; the message says which."""


def parse_filter(text: str) -> Filter:
    matched = _IN.match(text)
    if matched:
        values = tuple(_unquoted(v) for v in _split(matched["values"]))
        if not values:
            raise FilterError(f"{text!r}: `in` needs at least one value: name in (a, b)")
        if len(values) > MAX_IN:
            raise FilterError(f"{text!r}: `in` takes at most {MAX_IN} values")
        return Filter(_checked_name(matched["name"], text), Op.IN, values)
    matched = _RANGE.match(text)
    if not matched:
        raise FilterError(f"cannot read {text!r}: use name=value, name>=value (also >, <, <=) or name in (a, b)")
    op = Op.EQ if matched["op"] == "==" else Op(matched["op"])
    return Filter(_checked_name(matched["name"], text), op, (_unquoted(matched["value"]),))


def _checked_name(name: str, text: str) -> str:
    if not _NAME.fullmatch(name):
        raise FilterError(f"{text!r}: {name!r} is not an attribute name")
    return name


def _split(values: str) -> list[str]:
    return [v for v in (part.strip() for part in values.split(",")) if v]


def _unquoted(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def typed_filter(condition: Filter, kind: AttributeType) -> TypedFilter:
    """The filter with its values of the attribute's type."""
    if kind is AttributeType.BOOL and condition.op not in (Op.EQ, Op.IN):
        raise FilterError(f"{condition.name}: a bool attribute compares with = and in only")
    values = []
    for raw in condition.values:
        try:
            values.append(typed(kind, raw, text=True))
        except BadValue as error:
            raise FilterError(f"{condition.name} ({kind.value}): {error}") from None
    return TypedFilter(condition.name, kind, condition.op, tuple(values))


def declared_types(workflows: Iterable[Declared]) -> dict[str, set[AttributeType]]:
    """Each attribute name, with every type the given workflows declare it as."""
    types: dict[str, set[AttributeType]] = {}
    for declared in workflows:
        for attribute in declared:
            types.setdefault(attribute.name, set()).add(attribute.type)
    return types


def filter_type(name: str, declared: Mapping[str, set[AttributeType]]) -> AttributeType:
    """The type a filter on `name` compares as: its declared type, or keyword
    for an attribute no workflow declares (a WorkflowRun's labels)."""
    kinds = declared.get(name)
    if not kinds:
        return AttributeType.KEYWORD
    if len(kinds) > 1:
        listed = ", ".join(sorted(k.value for k in kinds))
        raise FilterError(f"{name}: workflows declare it as {listed}; filter on one workflow (workflow=...)")
    return next(iter(kinds))
