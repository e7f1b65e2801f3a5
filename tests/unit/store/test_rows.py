"""Rows written in bulk are dataclasses, one field per column: the statement's
unnest is written from the fields, the parameters are taken from them in the
same order, and the columns a statement writes are the fields it reads. A
column added to one and not the other fails here, not in a transaction."""

from __future__ import annotations

import dataclasses
import datetime
import re
import uuid

import pytest

from sluiceway.store import applying, endings, quarantining, sql

NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)


def _insert_columns(statement: str) -> list[str]:
    found = re.search(r"INSERT INTO tasks \(([^)]*)\)", statement)
    assert found is not None
    return [column.strip() for column in found.group(1).split(",")]


def _select_reads(statement: str, alias: str) -> set[str]:
    return set(re.findall(rf"\b{alias}\.(\w+)", statement))


def test_a_new_task_writes_every_column_it_has_and_only_those() -> None:
    fields = [f.name for f in dataclasses.fields(applying.NewTask)]
    columns = _insert_columns(applying._INSERT_TASKS)
    # budget bounds the deadlines as the row is inserted; it is no column.
    assert columns == [name for name in fields if name != "budget"]
    assert _select_reads(applying._INSERT_TASKS, "u") == set(fields)


@pytest.mark.parametrize(
    ("row", "statement", "alias", "first"),
    [
        (applying.NewTask, applying._INSERT_TASKS, "u", 2),
        (applying._Marked, applying._MARK_DECIDED, "t", 1),
        (endings._Ended, endings._FINISH, "f", 1),
        (quarantining.SetAside, quarantining._QUARANTINE, "q", 1),
    ],
)
def test_each_bulk_statement_reads_its_rows_in_field_order(row: type, statement: str, alias: str, first: int) -> None:
    fields = sql.fields_of(row)
    expected = ", ".join(f"${first + i}::{sql_type}[]" for i, (_, sql_type) in enumerate(fields))
    names = ", ".join(name for name, _ in fields)
    assert f"unnest({expected}) AS {alias}({names})" in statement
    assert _select_reads(statement, alias) <= {name for name, _ in fields}


@pytest.mark.parametrize(
    ("row", "statement"), [(applying._TaskChange, applying._UPDATE_TASK), (applying._Prune, applying._PRUNE)]
)
def test_each_row_of_an_executemany_fills_its_statements_parameters(row: type, statement: str) -> None:
    placeholders = {int(n) for n in re.findall(r"\$(\d+)", statement)}
    assert placeholders == set(range(1, len(dataclasses.fields(row)) + 1))


def test_arrays_are_one_per_field_in_field_order() -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    rows = [applying._Marked(first, NOW, None), applying._Marked(second, None, NOW)]
    assert sql.arrays(rows, applying._Marked) == [[first, second], [NOW, None], [None, NOW]]
    assert sql.arrays([], applying._Marked) == [[], [], []]
    assert sql.parameters(applying._Prune(first, "loop", 3)) == (first, "loop", 3)


def test_a_field_without_an_sql_type_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Untyped:
        id: uuid.UUID

    with pytest.raises(TypeError, match="says no SQL type"):
        sql.unnest(Untyped, "x")
