"""Migrations newer than the last release only expand the schema, so that
the last release's operator keeps working against it while a rolling upgrade
runs both (docs/upgrades.md). Contracting (dropping or renaming what the old
code reads, adding a rule the old code's writes may break) waits until the
release after next. A statement that is safe anyway says why in a comment on
the line before it: `-- expand-safe: <why>`."""

from __future__ import annotations

import re

import pytest

from sluiceway.store.migrating import available

# The schema of release 0.1.0 (CHANGELOG.md): migrations up to this one may contract.
LAST_RELEASED_MIGRATION = 35

CONTRACTING = [
    (r"\bDROP\s+(TABLE|COLUMN|FUNCTION|TYPE|VIEW|SEQUENCE)\b", "drops something the previous release may use"),
    (r"\bRENAME\b", "renames something the previous release uses by its old name"),
    (r"\bALTER\s+COLUMN\s+\w+\s+(SET\s+DATA\s+)?TYPE\b", "changes a column's type under the previous release"),
    (r"\bSET\s+NOT\s+NULL\b", "makes a column required that the previous release may not write"),
    (r"\bADD\s+CONSTRAINT\b", "adds a rule that the previous release's writes may break"),
    (r"\bADD\s+COLUMN\b(?![^,;]*\bDEFAULT\b)[^,;]*\bNOT\s+NULL\b", "adds a required column without a default"),
]


def offences(sql: str) -> list[str]:
    """What in `sql` would break the previous release, statement by statement."""
    found = []
    excused = False
    for statement in re.split(r";\s*\n", sql):
        lines = [line for line in statement.splitlines() if line.strip()]
        code = " ".join(line for line in lines if not line.strip().startswith("--"))
        excused = any(line.strip().startswith("-- expand-safe:") for line in lines)
        for pattern, why in CONTRACTING:
            if not excused and re.search(pattern, code, re.IGNORECASE):
                found.append(f"{code.strip()[:80]}...: {why}")
    return found


def test_migrations_since_the_last_release_only_expand() -> None:
    newer = [(name, sql) for version, name, sql in available() if version > LAST_RELEASED_MIGRATION]
    problems = [f"{name}: {offence}" for name, sql in newer for offence in offences(sql)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE tasks DROP COLUMN worker_id;\n",
        "ALTER TABLE tasks RENAME COLUMN worker_id TO leased_by;\n",
        "ALTER TABLE tasks ALTER COLUMN epoch TYPE bigint;\n",
        "ALTER TABLE tasks ALTER COLUMN worker_id SET NOT NULL;\n",
        "ALTER TABLE tasks ADD COLUMN weight integer NOT NULL;\n",
        "ALTER TABLE runs ADD CONSTRAINT positive CHECK (priority > 0);\n",
        "DROP TABLE events;\n",
    ],
)
def test_the_rule_catches_what_breaks_the_previous_release(sql: str) -> None:
    assert offences(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE tasks ADD COLUMN weight integer NOT NULL DEFAULT 1;\n",
        "ALTER TABLE tasks ADD COLUMN note text;\n",
        "CREATE TABLE archived_runs (id uuid PRIMARY KEY, file text NOT NULL);\n",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_by_worker ON tasks (worker_id);\n",
        "-- expand-safe: nothing reads this table since 0.1.0\nDROP TABLE legacy_thing;\n",
    ],
)
def test_the_rule_lets_expansions_through(sql: str) -> None:
    assert not offences(sql)
