"""The claim of rows no other transaction holds, built once for every loop."""

from __future__ import annotations

from sluiceway.store import sql


def test_a_claim_locks_what_it_selects_and_skips_what_others_hold() -> None:
    statement = sql.claim("id", "tasks", "due", order_by="due_at", limit="$1")
    assert (
        " ".join(statement.split()) == "SELECT id FROM tasks WHERE due ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED"
    )


def test_a_claim_over_a_join_locks_only_the_table_it_names() -> None:
    statement = sql.claim("e.id", "executions e JOIN v ON true", "due", of="e")
    assert (
        " ".join(statement.split())
        == "SELECT e.id FROM executions e JOIN v ON true WHERE due FOR UPDATE OF e SKIP LOCKED"
    )
