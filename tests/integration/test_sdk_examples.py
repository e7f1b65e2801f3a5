"""The README's example workflows that use worker tasks, on every SDK's example
worker (sdk/conformance/sdks.yaml): each run completes with the output the
Python example worker (examples/workers.py) gives.

The examples' TaskDefinitions, Semaphores and Workflows are read from
examples/ and stored as the operator's reconcilers store them; 01, 02 and 03
define task types only, so each gets a one-step workflow here. The inputs of
05 and 15 are those of their WorkflowRuns, 06 and 16."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway.devenv.processes import Child
from sluiceway.store.database import Pool
from tests.support.plane import Plane, execution_plane, get, post
from tests.support.sdks import ROOT, Builds, Sdk, define, load_sdks
from tests.support.waiting import eventually_async

SDKS = load_sdks()
EXAMPLES = ROOT / "examples"
WAIT = 90.0


def manifests(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((EXAMPLES / name).read_text()) if doc]


def run_input(name: str) -> dict[str, Any]:
    [run] = manifests(name)
    assert run["kind"] == "WorkflowRun"
    return dict(run["spec"]["input"])


def step(ref: str, task_type: str, **inputs: Any) -> dict[str, Any]:
    return {"name": task_type, "taskReferenceName": ref, "inputParameters": inputs}


# Workflows for the examples that define only task types: one run of each.
WRAPPERS: dict[str, dict[str, Any]] = {
    "example_payment": {"tasks": [step("charge", "charge", amount="${workflow.input.amount}")]},
    "example_partner": {"tasks": [step("call", "partner_api")]},
    "example_erp": {
        "tasks": [step("export", "export_report"), step("inventory", "sync_inventory")],
        "outputParameters": {"report": "${export.output.report}", "inventory": "${inventory.output.inventory}"},
    },
}

# (example files, workflow, input, the output examples/workers.py gives; {run} is the run's id)
CASES: list[tuple[list[str], str, dict[str, Any], dict[str, Any]]] = [
    (["01-payment.yaml"], "example_payment", {"amount": 12}, {"charged": 12, "idempotencyKey": "{run}/charge"}),
    (["02-partner-api.yaml"], "example_partner", {}, {"partner": "ok"}),
    (["03-legacy-erp.yaml"], "example_erp", {}, {"report": "ok", "inventory": "ok"}),
    (["05-fan-out.yaml"], "thumbnails", run_input("06-run.yaml"), {"resized": 5}),
    (["07-tenant-sync.yaml"], "tenant_sync", {"tenantId": "acme"}, {"tenant": "acme", "synced": True}),
    (["15-orders.yaml"], "orders", run_input("16-order-run.yaml"), {"receipt": "r-{run8}", "parcel": "p-1"}),
]


@pytest.fixture(scope="session")
def builds() -> Builds:
    return Builds()


def expected(output: Any, run_id: str) -> Any:
    if isinstance(output, str):
        return output.replace("{run}", run_id).replace("{run8}", run_id[:8])
    if isinstance(output, dict):
        return {key: expected(value, run_id) for key, value in output.items()}
    return output


async def store_examples(pool: Pool, namespace: str) -> None:
    for files, _, _, _ in CASES:
        for file in files:
            for doc in manifests(file):
                await define(pool, namespace, doc["kind"], doc["metadata"]["name"], doc["spec"])
    for name, spec in WRAPPERS.items():
        await define(pool, namespace, "Workflow", name.replace("_", "-"), {"name": name, **spec})


async def finished(plane: Plane, namespace: str, run_id: str, sdk: str, worker: Child) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        _, body = await get(plane, f"/v1/ns/{namespace}/executions/{run_id}")
        return body if body["status"] != "RUNNING" else None

    return await eventually_async(
        probe, timeout=WAIT, what=f"the {sdk} example worker to finish run {run_id}", child=worker
    )


@pytest.mark.parametrize("sdk", SDKS, ids=[s.name for s in SDKS])
async def test_the_readme_examples_complete_on_each_sdk_example_worker(
    sdk: Sdk, builds: Builds, pool: Pool, database_url: str, tmp_path: Path
) -> None:
    builds.require(sdk)
    namespace = f"examples-{sdk.name}"
    async with execution_plane(pool, database_url) as plane:
        await store_examples(pool, namespace)
        env = {**os.environ, "SLUICEWAY_URL": plane.url, "SLUICEWAY_NAMESPACE": namespace}
        argv = sdk.argv(sdk.example_worker, plane.url, namespace)
        worker = Child(
            f"{sdk.name}-example-worker", argv, tmp_path, env={**env, "SLUICEWAY_WORKER_ID": sdk.name}, cwd=ROOT
        )
        try:
            started = []
            for _, workflow, input, _ in CASES:
                status, body = await post(plane, f"/v1/ns/{namespace}/executions", {"name": workflow, "input": input})
                assert status == 201, f"{workflow}: {status} {body}"
                started.append(body["id"])
            runs = await asyncio.gather(*(finished(plane, namespace, r, sdk.name, worker) for r in started))
        finally:
            await asyncio.to_thread(worker.stop, 30)
    for (_, workflow, _, output), run in zip(CASES, runs, strict=True):
        assert run["status"] == "COMPLETED", (
            f"{workflow} on the {sdk.name} example worker ended {run['status']}: {run.get('reasonForIncompletion')}"
        )
        assert run["output"] == expected(output, run["id"]), f"{workflow} on the {sdk.name} example worker"
    orders = runs[-1]
    assert orders["searchAttributes"]["stage"] == "shipped", f"orders on the {sdk.name} example worker: {orders}"
