"""Workers for the examples: `python -m sluiceway worker examples/workers.py
--url http://127.0.0.1:8080 --namespace default`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sluiceway.worker import (
    Task,
    TerminalError,
    Worker,
    compose_retry_classifiers,
    failure_taxonomy_classifier,
    rate_limit_aware_classifier,
)

worker = Worker(classifier=compose_retry_classifiers(rate_limit_aware_classifier, failure_taxonomy_classifier()))


@worker.task("charge", concurrency=4)
async def charge(task: Task) -> dict[str, Any]:
    amount = task.input.get("amount", 0)
    if amount <= 0:
        raise TerminalError("INVALID_ARGUMENT: amount must be positive")
    # A real worker passes task.idempotency_key to the provider: the same for every attempt.
    return {"charged": amount, "idempotencyKey": task.idempotency_key}


# -- thumbnails (05-fan-out.yaml): what each resize logs is kept with its run,
# so `sluiceway logs workflowrun/album-2026-11` shows which image each task
# took and how it went, after the worker pod is gone.

thumbnails = logging.getLogger("thumbnails")


@worker.task("resize_image", concurrency=8)
async def resize_image(task: Task) -> dict[str, Any]:
    url, width = task.input.get("url"), task.input.get("width")
    thumbnails.info("resizing %s to %s px wide", url, width)
    await asyncio.sleep(0.5)  # pretend to work
    thumbnails.info("thumbnail of %s ready", url)
    return {"url": url, "width": width}


@worker.task("sync_tenant", concurrency=4)
async def sync_tenant(task: Task) -> dict[str, Any]:
    await asyncio.sleep(2)
    return {"tenant": task.input.get("tenantId"), "synced": True}


@worker.task("export_report")
def export_report(task: Task) -> dict[str, Any]:
    return {"report": "ok"}


@worker.task("sync_inventory")
def sync_inventory(task: Task) -> dict[str, Any]:
    return {"inventory": "ok"}


@worker.task("partner_api", concurrency=4)
async def partner_api(task: Task) -> dict[str, Any]:
    return {"partner": "ok"}


# -- orders (15-orders.yaml): what they log is kept with the run (`sluiceway logs RUN`)

log = logging.getLogger("shop")


@worker.task("reserve_items", concurrency=4)
async def reserve_items(task: Task) -> dict[str, Any]:
    items = task.input.get("items") or []
    log.info("reserving %d items", len(items))
    return {"reserved": len(items)}


@worker.task("take_payment", concurrency=4)
async def take_payment(task: Task) -> dict[str, Any]:
    amount, card = task.input.get("amount"), task.input.get("card") or "visa"
    log.info("charging %s to %s", amount, card)
    if card == "declined":
        raise TerminalError("DECLINED: the bank refused the card")
    task.upsert_search_attributes(stage="paid")
    return {"receipt": f"r-{task.execution_id[:8]}", "idempotencyKey": task.idempotency_key}


@worker.task("ship_order", concurrency=4)
async def ship_order(task: Task) -> dict[str, Any]:
    await asyncio.sleep(float(task.input.get("seconds") or 0))
    task.log(f"parcel with {task.input.get('reserved')} items handed to the carrier")
    task.upsert_search_attributes(stage="shipped")
    return {"parcel": "p-1"}


@worker.task("sync_page")
async def sync_page(task: Task) -> dict[str, Any]:
    cursor = int(task.input.get("cursor") or 0)
    return {"synced": cursor, "nextCursor": str(cursor + 100)}  # examples/09-chain.yaml continues from here
