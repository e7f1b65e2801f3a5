"""Handlers for the end-to-end order workflow, run by `sluiceway worker`."""

from __future__ import annotations

from typing import Any

from sluiceway.worker import Task, Worker

worker = Worker()


@worker.task("reserve_stock", concurrency=2)
async def reserve_stock(task: Task) -> dict[str, Any]:
    return {"reserved": [f"{sku}:ok" for sku in task.input["skus"]]}


@worker.task("charge_card")
def charge_card(task: Task) -> dict[str, Any]:
    # The payment provider receives the idempotency key: a task may be delivered twice.
    return {"charged": task.input["amount"], "idempotencyKey": task.idempotency_key}


@worker.task("send_email")
async def send_email(task: Task) -> dict[str, Any]:
    return {"sent": f"to {task.input['to']}"}


@worker.task("ship_express")
async def ship_express(task: Task) -> dict[str, Any]:
    return {"carrier": "express", "days": 1}


@worker.task("ship_standard")
async def ship_standard(task: Task) -> dict[str, Any]:
    return {"carrier": "standard", "days": 5}


@worker.task("flaky_call")
async def flaky_call(task: Task) -> dict[str, Any]:
    if task.attempt < 3:
        raise ConnectionError(f"partner unavailable on attempt {task.attempt}")
    return {"attempt": task.attempt}
