"""What a task type says about itself: who runs it, and the facts the store
selects by. The store writes none of this down again."""

from __future__ import annotations

import pytest

from sluiceway.model.workflow import Executor, TaskType
from sluiceway.store.sql import types_where

EXECUTORS = {
    TaskType.SIMPLE: Executor.WORKER,
    TaskType.HTTP: Executor.SYSTEM,
    TaskType.HTTP_POLL: Executor.SYSTEM,
    TaskType.FORK_JOIN: Executor.ENGINE,
    TaskType.FORK_JOIN_DYNAMIC: Executor.ENGINE,
    TaskType.JOIN: Executor.ENGINE,
    TaskType.SWITCH: Executor.ENGINE,
    TaskType.WAIT: Executor.ENGINE,
    TaskType.INLINE: Executor.ENGINE,
    TaskType.TERMINATE: Executor.ENGINE,
    TaskType.SUB_WORKFLOW: Executor.ENGINE,
    TaskType.DO_WHILE: Executor.ENGINE,
    TaskType.WAIT_FOR_WEBHOOK: Executor.ENGINE,
    TaskType.HUMAN: Executor.ENGINE,
    TaskType.PULL_WORKFLOW_MESSAGES: Executor.ENGINE,
    TaskType.GRPC: Executor.SYSTEM,
    TaskType.WEBHOOK: Executor.SYSTEM,
    TaskType.CONTINUE_AS_NEW: Executor.ENGINE,
    TaskType.CONTAINER: Executor.SYSTEM,
}


@pytest.mark.parametrize(("task_type", "executor"), EXECUTORS.items())
def test_each_type_knows_its_executor(task_type: TaskType, executor: Executor) -> None:
    assert task_type.executor() is executor
    assert task_type.executor().leases() is (executor is not Executor.ENGINE)


def test_every_type_is_covered() -> None:
    assert set(EXECUTORS) == set(TaskType)


def test_the_facts_the_store_selects_by() -> None:
    """The lists the SQL of results and the retry budget used to spell out by hand."""
    assert types_where(TaskType.waits_for_signal) == "('WAIT')"
    assert types_where(TaskType.polls) == "('HTTP_POLL')"
    assert types_where(TaskType.counts_in_retry_budget) == (
        "('SIMPLE', 'SUB_WORKFLOW', 'HTTP', 'HTTP_POLL', 'GRPC', 'WEBHOOK', 'CONTAINER')"
    )


def test_waiting_types_get_only_the_total_budget() -> None:
    """Seed 000: WAIT, WAIT_FOR_WEBHOOK, HUMAN and PULL_WORKFLOW_MESSAGES are never dispatched."""
    assert types_where(TaskType.waits) == "('WAIT', 'WAIT_FOR_WEBHOOK', 'HUMAN', 'PULL_WORKFLOW_MESSAGES')"
    assert all(t.executor() is Executor.ENGINE for t in TaskType if t.waits())
