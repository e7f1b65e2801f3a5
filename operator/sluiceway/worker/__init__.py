"""The Python worker SDK and the `sluiceway worker` runner.

    from sluiceway.worker import Worker, Task, TerminalError

    worker = Worker()

    @worker.task("charge", concurrency=4)
    async def charge(task: Task) -> dict:
        return {"receipt": await bank.charge(task.input["amount"], idempotency_key=task.idempotency_key)}

It speaks only the public HTTP API, so it is also the reference for workers in
other languages. Retry *policy* lives on the server (the TaskDefinition); the
SDK only classifies failures: terminal or not, and an exact delay when the
server it called said so.

`Client` starts runs and waits for their outcome (`execute`), for the code
that asks for the work rather than does it.
"""

from sluiceway.worker.classifiers import (
    RetryOverride,
    compose_retry_classifiers,
    failure_taxonomy_classifier,
    make_rate_limit_aware_classifier,
    parse_retry_after,
    rate_limit_aware_classifier,
)
from sluiceway.worker.errors import RetryAfter, Snooze, TerminalError
from sluiceway.worker.runner import Task, Worker
from sluiceway.worker.runs import Client, RunError, RunFailed, StillRunning

__all__ = [
    "Client",
    "RetryAfter",
    "RetryOverride",
    "RunError",
    "RunFailed",
    "Snooze",
    "StillRunning",
    "Task",
    "TerminalError",
    "Worker",
    "compose_retry_classifiers",
    "failure_taxonomy_classifier",
    "make_rate_limit_aware_classifier",
    "parse_retry_after",
    "rate_limit_aware_classifier",
]
