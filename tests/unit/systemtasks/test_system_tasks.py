"""The system-task runner hands each lease to the kind of system task its
type names; a type no kind here runs fails terminally, naming it, instead of
being run as something else."""

from __future__ import annotations

from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.model.workflow import TaskType
from sluiceway.plane import Plane
from sluiceway.store.leasing import Lease
from sluiceway.systemtasks.runner import SystemTaskRunner


class Recording:
    types = frozenset({TaskType.HTTP_POLL})

    def __init__(self) -> None:
        self.called: list[str] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def call(self, lease: Lease) -> TaskResult:
        self.called.append(lease.task_id)
        return TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=ResultStatus.COMPLETED)


def lease(kind: str) -> Lease:
    return Lease("7b8e2a4c-3f51-4c8e-9a37-2d1f0e6b5a90", 3, "poll_it", "r", "ref", 1, {}, 60, 0, 0, kind, "ns")


async def test_each_lease_goes_to_the_kind_of_its_type() -> None:
    kind = Recording()
    runner = SystemTaskRunner(Plane(pool=None), kinds=[kind])  # type: ignore[arg-type]  # call() touches no database
    result = await runner.call(lease("HTTP_POLL"))
    assert result.status is ResultStatus.COMPLETED and kind.called == [lease("HTTP_POLL").task_id]


async def test_a_type_nothing_here_runs_fails_terminally_naming_it() -> None:
    runner = SystemTaskRunner(Plane(pool=None), kinds=[Recording()])  # type: ignore[arg-type]
    for unknown in ("HTTP", "GRPC"):
        result = await runner.call(lease(unknown))
        assert result.status is ResultStatus.FAILED_WITH_TERMINAL_ERROR
        assert result.reason == f"no system task of type {unknown} runs in this operator"
        assert (result.task_id, result.epoch) == (lease(unknown).task_id, 3)
