"""Priority's aging rule: urgent work jumps the line by a bounded amount, and
nothing starves under a steady stream of more urgent work."""

from __future__ import annotations

import datetime
import heapq
import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sluiceway.controls import priority

T0 = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.UTC)


def seconds(n: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=n)


def test_the_first_priority_set_wins_and_three_is_the_default() -> None:
    assert priority.effective(None, None) == priority.DEFAULT == 3
    assert priority.effective(None, 5) == 5  # the workflow's
    assert priority.effective(1, 5) == 1  # the start's over the workflow's
    assert priority.effective(2, 1, 5) == 2  # a task's own over its run's


def test_urgent_work_overtakes_bulk_that_became_ready_less_than_a_minute_a_level_before() -> None:
    urgent = priority.ready_order(T0, 1)
    assert priority.ready_order(T0 - seconds(239), 5) > urgent  # 4 levels: 240 s of aging to win back
    assert priority.ready_order(T0 - seconds(241), 5) < urgent
    assert priority.ready_order(T0 - seconds(1), 3) > priority.ready_order(T0, 2)
    assert priority.ready_order(T0, 3) == T0  # the default moves nothing: FIFO when nobody sets a priority
    assert priority.longest_overtaken(5) == seconds(4 * priority.AGING_SECONDS)
    assert priority.longest_overtaken(1) == seconds(0)


# A queue leasing `capacity` tasks a second; every second a steady stream of
# priority-1 work arrives that alone fills it, plus whatever else the example draws.
arrivals = st.lists(
    st.tuples(st.integers(0, 600), st.integers(priority.HIGHEST, priority.LOWEST)), min_size=1, max_size=200
)


@settings(max_examples=200, deadline=None)
@given(others=arrivals, capacity=st.integers(1, 4))
def test_every_ready_task_is_leased_under_a_steady_stream_of_more_urgent_work(
    others: list[tuple[int, int]], capacity: int
) -> None:
    stream_until = 900  # more than the longest aging (240 s) after the last drawn arrival
    tasks = [(at, p) for at, p in others] + [(at, 1) for at in range(stream_until) for _ in range(capacity)]
    order = {n: priority.ready_order(T0 + seconds(at), p) for n, (at, p) in enumerate(tasks)}
    arriving = sorted(range(len(tasks)), key=lambda n: tasks[n][0])
    ready: list[tuple[datetime.datetime, int]] = []
    leased_at: dict[int, int] = {}
    worst_overtakers = 0
    position = 0
    for second in itertools.count():
        while position < len(arriving) and tasks[arriving[position]][0] <= second:
            n = arriving[position]
            heapq.heappush(ready, (order[n], n))
            position += 1
        for _ in range(capacity):
            if ready:
                leased_at[heapq.heappop(ready)[1]] = second
        if position == len(arriving) and not ready:
            break
        assert second < 10 * stream_until, "the queue never drained"

    assert len(leased_at) == len(tasks), "every task was leased"
    for n, (at, p) in enumerate(others):
        # Only tasks ordered before it go first, and those that arrived after it
        # did so within its aging window: a bounded number, whatever the stream.
        overtakers = [m for m, (then, _) in enumerate(tasks) if then > at and order[m] < order[n]]
        assert all(tasks[m][0] < at + priority.longest_overtaken(p).total_seconds() for m in overtakers)
        worst_overtakers = max(worst_overtakers, len(overtakers))
        ahead = sum(1 for m in range(len(tasks)) if order[m] < order[n] or (order[m] == order[n] and m < n))
        assert leased_at[n] <= at + math.ceil((ahead + 1) / capacity) + 1
    assert worst_overtakers <= capacity * (priority.LOWEST - priority.HIGHEST) * priority.AGING_SECONDS + len(others)
