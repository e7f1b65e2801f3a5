"""SQL text built once for the statements that share it: from what the model
says (so that the model stays the one place a fact about task types is
written), and the claim of rows no other transaction holds."""

from __future__ import annotations

from collections.abc import Callable

from sluiceway.model.workflow import TaskType


def types_where(predicate: Callable[[TaskType], bool]) -> str:
    """The task types for which `predicate` holds, as an SQL list: `('SIMPLE', 'WAIT')`.

    For the few facts the executor alone does not say (which types take a
    result, snooze, count in the retry budget). A constant of the code, never
    input: safe to format into a statement."""
    return "(" + ", ".join(f"'{t.value}'" for t in TaskType if predicate(t)) + ")"


# "The task is still leased", for statements that find a batch of tasks by id.
# Written plainly (status = 'IN_PROGRESS'), it lets the planner prove the
# predicate of the partial index tasks_leased and scan that index for the
# whole namespace, then hash-join the batch: cheap by the statistics, which
# see few leased tasks, but every entry of a task leased and finished since
# the last vacuum is still in that index, and while any transaction is open
# (there always is one under load) none can be skipped. The scan then grows
# with everything leased lately. Compared through a subquery, the status is a
# value the planner cannot see, so each task is looked up by its primary key:
# a batch costs the same however many tasks came before it.
STILL_LEASED = "(SELECT 'IN_PROGRESS')"


def claim(columns: str, rows: str, where: str, *, order_by: str = "", limit: str = "", of: str = "") -> str:
    """`SELECT columns FROM rows WHERE where [ORDER BY] [LIMIT] FOR UPDATE [OF of] SKIP LOCKED`.

    How every replica's loops share work: each takes the rows it can lock,
    passing over those another transaction holds (another replica's pass, an
    operation on a run), so no row is handled twice and no pass waits for
    another. A row passed over stays due: whoever needs it handled soon must
    look again once it is let go (the decider does: store.deciding).
    `of` names the table to lock when `rows` joins several."""
    clauses = [f"SELECT {columns}", f"  FROM {rows}", f" WHERE {where}"]
    if order_by:
        clauses.append(f" ORDER BY {order_by}")
    if limit:
        clauses.append(f" LIMIT {limit}")
    clauses.append(f"   FOR UPDATE OF {of} SKIP LOCKED" if of else "   FOR UPDATE SKIP LOCKED")
    return "\n".join(clauses)
