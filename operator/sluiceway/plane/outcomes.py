"""What the plane's commands answer, in one vocabulary for every edge: what
was done, and each way of refusing (the store and the controls define them;
the edges map them to status codes, pages and conditions)."""

from __future__ import annotations

from sluiceway.controls.payloads import Oversized
from sluiceway.store.admission import LimitExceeded, QuotaExceeded
from sluiceway.store.executions import InvalidOverrides, InvalidStart, RequestReused, Started, WorkflowNotFound
from sluiceway.store.messages import QueueFull
from sluiceway.store.operations import Done, Refusal, Refused
from sluiceway.store.results import Outcome as ResultOutcome
from sluiceway.store.results import Verdict

__all__ = [
    "Done",
    "InvalidOverrides",
    "InvalidStart",
    "LimitExceeded",
    "Oversized",
    "QueueFull",
    "QuotaExceeded",
    "Refusal",
    "Refused",
    "Refusing",
    "RequestReused",
    "ResultOutcome",
    "Started",
    "Verdict",
    "WorkflowNotFound",
]

# Every refusal a command may answer with.
Refusing = (
    Refused
    | QuotaExceeded
    | LimitExceeded
    | WorkflowNotFound
    | InvalidOverrides
    | InvalidStart
    | RequestReused
    | QueueFull
    | Oversized
)
