"""Priority: which ready task of a queue is leased first.

A run has a priority from 1 (most urgent) to 5 (least), 3 unless its start,
its Workflow or its Schedule says otherwise; a task has its run's, unless
its place in the workflow sets one. Among the ready tasks of one queue (one
namespace and task type) the lease takes the task with the earliest
*ready order*: the moment it became ready, moved by `AGING_SECONDS` for each
level away from the default (earlier for urgent work, later for bulk).

That is the aging rule, and why nothing starves: a task of priority p is
overtaken only by tasks of priority q < p that became ready less than
(p - q) x AGING_SECONDS after it, so once it has waited that long it is
ahead of every task that arrives later, whatever their priority. A
priority-1 run started behind a backlog of priority-5 tasks that became
ready in the last 4 x AGING_SECONDS (4 minutes) is leased before all of
them. The order is a value of the row (an index keeps it), not a scan of
ages, so priorities cost the lease nothing.

Gates are checked first and always win: a priority decides which task a
free slot, permit or window goes to, never whether there is one.

The same rule is the SQL function `sluiceway_ready_order` (migration 0034);
tests check that the two agree."""

from __future__ import annotations

import datetime

HIGHEST = 1
LOWEST = 5
DEFAULT = 3
AGING_SECONDS = 60


def effective(*asked: int | None) -> int:
    """The first priority set among `asked` (the task's, the start's, the
    Workflow's, in that order of precedence), or the default."""
    return next((p for p in asked if p is not None), DEFAULT)


def ready_order(ready_at: datetime.datetime, priority: int) -> datetime.datetime:
    """Where a task ready since `ready_at` stands in its queue: the earliest is leased first."""
    return ready_at + datetime.timedelta(seconds=(priority - DEFAULT) * AGING_SECONDS)


def longest_overtaken(priority: int) -> datetime.timedelta:
    """How long after a task became ready tasks of higher priority may still
    be leased before it: beyond this only older ready orders come first."""
    return datetime.timedelta(seconds=(priority - HIGHEST) * AGING_SECONDS)
