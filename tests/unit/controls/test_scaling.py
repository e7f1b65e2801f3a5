"""Worker autoscaling: queue depth asks, the gates cap, scale-down waits."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from sluiceway.controls.policy import Gates
from sluiceway.controls.scaling import desired_replicas, gate_ceiling, window_for


@dataclass(frozen=True)
class Case:
    id: str
    expected: int
    ready: int = 0
    in_flight: int = 0
    delayed: int = 0
    gates: Gates = Gates()
    min_replicas: int = 0
    max_replicas: int = 10
    target: int = 1
    concurrency: int = 1
    current: int = 0
    history: tuple[int, ...] = ()
    window: int = 1
    permits: dict[str, int] = field(default_factory=dict)


CASES = [
    Case("an empty queue scales to minReplicas 0", 0),
    Case("an empty queue keeps minReplicas", 2, min_replicas=2),
    Case("demand is ready plus in flight", 5, ready=3, in_flight=2),
    Case("demand is capped by maxReplicas", 10, ready=50),
    Case("targetTasksPerReplica divides, rounding up", 3, ready=9, in_flight=1, target=4),
    Case("delayed tasks are not demand", 0, delayed=30),
    Case("delayed tasks add nothing to ready ones", 2, ready=2, delayed=30),
    Case(
        "20 workers requested by depth but concurrentExecLimit 2 -> 2 (concurrency 1)",
        2,
        ready=20,
        gates=Gates(concurrent_exec_limit=2),
    ),
    Case(
        "the cap is divided by concurrency, rounding up",
        3,
        ready=20,
        gates=Gates(concurrent_exec_limit=5),
        concurrency=2,
    ),
    Case("a cap above demand does not add replicas", 3, ready=3, gates=Gates(concurrent_exec_limit=50)),
    Case(
        "the smallest configured semaphore caps",
        2,
        ready=20,
        gates=Gates(semaphores=("erp", "db")),
        permits={"erp": 4, "db": 2},
    ),
    Case(
        "semaphore permits are divided by concurrency",
        2,
        ready=20,
        gates=Gates(semaphores=("erp",)),
        concurrency=3,
        permits={"erp": 4},
    ),
    Case("an unconfigured semaphore gates nothing", 7, ready=7, gates=Gates(semaphores=("erp",))),
    Case(
        "a semaphore the task does not use is ignored",
        7,
        ready=7,
        gates=Gates(semaphores=("erp",)),
        permits={"other": 1},
    ),
    Case(
        "the tighter of cap and semaphore wins",
        1,
        ready=20,
        gates=Gates(concurrent_exec_limit=3, semaphores=("erp",)),
        permits={"erp": 1},
    ),
    Case(
        "a semaphore with 0 permits admits nothing: no pods",
        0,
        ready=5,
        gates=Gates(semaphores=("erp",)),
        permits={"erp": 0},
    ),
    Case(
        "...but minReplicas is still honoured",
        1,
        ready=5,
        min_replicas=1,
        gates=Gates(semaphores=("erp",)),
        permits={"erp": 0},
    ),
    Case(
        "minReplicas wins over a gate ceiling below it",
        4,
        ready=20,
        min_replicas=4,
        gates=Gates(concurrent_exec_limit=2),
    ),
    Case(
        "rate limits give no ceiling",
        10,
        ready=10,
        gates=Gates(rate_limit_per_frequency=1, rate_limit_frequency_seconds=60),
    ),
    Case("work keeps at least one pod", 1, in_flight=1, target=100),
    Case("scale-up is immediate", 8, ready=8, history=(1, 1, 1), window=5, current=1),
    Case("scale-down waits for the largest recent recommendation", 6, ready=1, history=(6, 2, 2), window=5, current=6),
    Case(
        "a recommendation older than the window is forgotten", 2, ready=1, history=(9, 2, 2, 2, 2), window=5, current=9
    ),
    Case("after a restart the running count stands for the history", 6, ready=1, window=5, current=6),
    Case("window 1 means no stabilization", 1, ready=1, history=(9,), window=1, current=9),
    Case("a lowered maxReplicas applies at once", 3, ready=20, max_replicas=3, history=(10, 10), window=5, current=10),
    Case(
        "a lowered cap applies at once",
        2,
        ready=20,
        gates=Gates(concurrent_exec_limit=2),
        history=(10, 10),
        window=5,
        current=10,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_desired_replicas(case: Case) -> None:
    scale = desired_replicas(
        ready=case.ready,
        in_flight=case.in_flight,
        delayed=case.delayed,
        gates=case.gates,
        min_replicas=case.min_replicas,
        max_replicas=case.max_replicas,
        target_tasks_per_replica=case.target,
        concurrency=case.concurrency,
        current_replicas=case.current,
        history=case.history,
        window=case.window,
        semaphore_permits=case.permits,
    )
    assert scale.replicas == case.expected


def test_a_drained_queue_scales_down_after_the_window() -> None:
    history: tuple[int, ...] = ()
    current = 0
    seen = []
    for ready in [20, 20, 0, 0, 0, 0, 0, 0]:
        scale = desired_replicas(
            ready=ready,
            in_flight=0,
            delayed=0,
            gates=Gates(),
            min_replicas=0,
            max_replicas=10,
            target_tasks_per_replica=2,
            concurrency=2,
            current_replicas=current,
            history=history,
            window=4,
        )
        history, current = scale.history, scale.replicas
        seen.append(current)
    assert seen == [10, 10, 10, 10, 10, 0, 0, 0]
    assert len(history) == 4


def test_the_history_is_bounded_by_the_window() -> None:
    scale = desired_replicas(
        ready=3,
        in_flight=0,
        delayed=0,
        gates=Gates(),
        min_replicas=0,
        max_replicas=10,
        target_tasks_per_replica=1,
        concurrency=1,
        current_replicas=2,
        history=(1, 2, 3, 4, 5),
        window=3,
    )
    assert scale.history == (4, 5, 3)
    assert (scale.recommendation, scale.demand, scale.ceiling) == (3, 3, None)


@pytest.mark.parametrize(
    ("gates", "concurrency", "permits", "expected"),
    [
        (Gates(), 1, {}, None),
        (Gates(concurrent_exec_limit=2), 1, {}, 2),
        (Gates(concurrent_exec_limit=2), 4, {}, 1),
        (Gates(concurrent_exec_limit=9), 4, {}, 3),
        (Gates(semaphores=("a", "b")), 2, {"a": 8, "b": 3}, 2),
        (Gates(rate_limit_per_frequency=5), 1, {}, None),
    ],
)
def test_gate_ceiling(gates: Gates, concurrency: int, permits: dict[str, int], expected: int | None) -> None:
    assert gate_ceiling(gates, concurrency, permits) == expected


def test_the_window_is_five_minutes_of_evaluations() -> None:
    assert window_for(5.0) == 60
    assert window_for(7.0) == 43
    assert window_for(600.0) == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"target_tasks_per_replica": 0},
        {"window": 0},
        {"min_replicas": 5, "max_replicas": 4},
        {"concurrency": 0},
    ],
)
def test_nonsense_is_refused(bad: dict[str, int]) -> None:
    args: dict[str, int] = {
        "target_tasks_per_replica": 1,
        "window": 1,
        "min_replicas": 0,
        "max_replicas": 1,
        "concurrency": 1,
        **bad,
    }
    with pytest.raises(ValueError):
        desired_replicas(
            ready=1,
            in_flight=0,
            delayed=0,
            gates=Gates(concurrent_exec_limit=1),
            current_replicas=0,
            history=(),
            target_tasks_per_replica=args["target_tasks_per_replica"],
            window=args["window"],
            min_replicas=args["min_replicas"],
            max_replicas=args["max_replicas"],
            concurrency=args["concurrency"],
        )
