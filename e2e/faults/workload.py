"""The workload, in one place: the definitions the suite applies, the gates
its invariants check, and what the workers do (how long each task type takes,
how often the flaky one fails). The worker processes import it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WORKFLOW = "fault_order"


@dataclass(frozen=True)
class Gates:
    semaphore: str
    permits: int
    capped: str
    cap: int
    rated: str
    rate: int
    window_seconds: int


GATES = Gates(semaphore="legacy_erp", permits=2, capped="charge", cap=3, rated="notify", rate=5, window_seconds=1)
# Short leases so a lost worker's tasks come back within the test: a missed
# heartbeat for 3 s ends the attempt. Retries are many and quick, and the
# retry budget is off: this suite is about faults, not about budgets.
COMMON = {
    "retryCount": 12,
    "retryLogic": "FIXED",
    "retryDelaySeconds": 0.2,
    "jitter": 0,
    "retryBudget": 1,
    "heartbeatTimeout": 3,
    "responseTimeoutSeconds": 6,
    "pollTimeoutSeconds": 5,
}
TASK_DEFINITIONS: dict[str, dict[str, Any]] = {
    "prepare": {},
    "erp_export": {"semaphores": [GATES.semaphore]},
    "erp_import": {"semaphores": [GATES.semaphore]},
    "charge": {"concurrentExecLimit": GATES.cap},
    "flaky": {},
    "notify": {"rateLimitPerFrequency": GATES.rate, "rateLimitFrequencySeconds": GATES.window_seconds},
}
WORKFLOW_SPEC = {
    "name": WORKFLOW,
    "tasks": [
        {"name": "prepare", "taskReferenceName": "prepare"},
        {
            "name": "split",
            "taskReferenceName": "split",
            "type": "FORK_JOIN",
            "forkTasks": [
                [{"name": "erp_export", "taskReferenceName": "export"}],
                [
                    {"name": "erp_import", "taskReferenceName": "import"},
                    {"name": "charge", "taskReferenceName": "charge"},
                ],
            ],
        },
        {"name": "merge", "taskReferenceName": "merge", "type": "JOIN", "joinOn": ["export", "charge"]},
        {"name": "flaky", "taskReferenceName": "flaky"},
        {"name": "notify", "taskReferenceName": "notify"},
    ],
}

# Seconds a task of each type takes: (shortest, longest).
DURATIONS = {
    "prepare": (0.02, 0.1),
    "erp_export": (0.1, 0.4),
    "erp_import": (0.1, 0.4),
    "charge": (0.1, 0.5),
    "flaky": (0.02, 0.2),
    "notify": (0.01, 0.05),
}
FLAKY_FAILURE = 0.3
FLAKY_REASON = "partner unavailable"  # how the suite tells this worker's failures from the operator's

# Runs that other paths start, each exactly once whatever fails: a Trigger's
# (one run per event id) and a Schedule's (one run per fire time). A one-task
# INLINE workflow, so they add starts under faults without adding worker load.
PING_WORKFLOW = "fault_ping"
PING_WORKFLOW_SPEC = {
    "name": PING_WORKFLOW,
    "tasks": [
        {
            "name": "echo",
            "taskReferenceName": "echo",
            "type": "INLINE",
            "inputParameters": {"evaluatorType": "cel", "expression": "'pong'"},
        }
    ],
}
EVENT = "fault-ping"
TRIGGER = "fault-ping"
TRIGGER_SPEC = {"event": EVENT, "workflow": PING_WORKFLOW, "input": "{'n': event.payload.n}"}
SCHEDULE = "fault-tick"
# Every second, every fire its own run (AllowAll): each fire is a start to make exactly once.
SCHEDULE_SPEC = {"workflow": PING_WORKFLOW, "input": {"n": 0}, "every": "1s", "overlapPolicy": "AllowAll"}
