"""The web UI in a real browser (Debian's chromium-headless-shell, driven by
Playwright) against the operator as `make up` runs it: a new user finds a
failed run, sees why, and retries it; watches the graph change colour as a
worker completes tasks; completes a HUMAN task; keeps keyboard focus and
ticked runs while the pages refresh; sees a semaphore's holder appear. Each
page passes axe-core with no serious or critical violation, in light and dark
mode, and leaves a screenshot (SLUICEWAY_UI_SCREENSHOTS=docs/ui writes the
ones the docs show)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.support.api import call
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"
CHROMIUM = os.environ.get("SLUICEWAY_CHROMIUM", "/usr/bin/chromium-headless-shell")
AXE = Path(__file__).parent / "ui_support" / "axe.min.js"
WAIT_MS = 30_000


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def simple(ref: str, **inputs: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "inputParameters": inputs}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run hack/install-browser.sh (make test does)"
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM)
        yield found
        found.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    found = context.new_page()
    yield found
    context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("SLUICEWAY_UI_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def accessible(page: Page, what: str) -> None:
    """No serious or critical axe-core violation on the page as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    serious = [
        {"id": v["id"], "impact": v["impact"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"][:5]]}
        for v in found
        if v["impact"] in ("serious", "critical")
    ]
    assert not serious, f"{what}: " + json.dumps(serious, indent=1)


def check_page(page: Page, shots: Path, name: str) -> None:
    """Accessible in light and dark mode; a screenshot of each."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        accessible(page, f"{name} ({scheme})")
        page.screenshot(path=str(shots / (f"{name}.png" if scheme == "light" else f"{name}-dark.png")), full_page=True)
    page.emulate_media(color_scheme="light")


class Worker:
    """A worker speaking the task protocol, one task at a time, so the test
    decides when each task completes."""

    def __init__(self, operator: OperatorProcess, namespace: str, worker_id: str = "ui-e2e-worker") -> None:
        self.base = f"{operator.api_url}/v1/ns/{namespace}/tasks"
        self.worker_id = worker_id

    def lease(self, task_type: str) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            body = {"taskTypes": [task_type], "workerId": self.worker_id, "pollTimeoutSeconds": 2}
            status, answer = call("POST", f"{self.base}/poll", body)
            assert status == 200, answer
            return answer["tasks"][0] if answer["tasks"] else None

        return eventually(probe, timeout=30, what=f"a {task_type} task to lease")

    def report(self, task: dict[str, Any], status: str = "COMPLETED", reason: str = "", **output: Any) -> None:
        result = {"taskId": task["taskId"], "epoch": task["epoch"], "status": status, "output": output}
        if reason:
            result["reason"] = reason
        code, answer = call("POST", f"{self.base}/results", {"results": [result]})
        assert code == 200, answer


def ready(kube: Kube, namespace: str, name: str) -> None:
    eventually(
        lambda: (o := kube.get("workflow", name, namespace)) and o.get("status", {}).get("version"),
        what=f"workflow {name} to be stored",
    )


def start(operator: OperatorProcess, namespace: str, name: str, **body: Any) -> str:
    status, answer = call("POST", f"{operator.api_url}/v1/ns/{namespace}/executions", {"name": name, **body})
    assert status == 201, answer
    return str(answer["id"])


def node(page: Page, ref: str) -> Any:
    return page.locator(f'svg.graph a.node[data-ref="{ref}"]')


def test_a_new_user_finds_a_failed_run_sees_why_and_retries_it(
    kube: Kube, namespace: str, operator: OperatorProcess, page: Page, shots: Path
) -> None:
    kube.apply(manifest("TaskDefinition", "charge", {"name": "charge", "retryCount": 0}), namespace)
    tasks = [simple("fetch"), simple("charge", amount="${fetch.output.total}"), simple("notify")]
    kube.apply(manifest("Workflow", "checkout", {"tasks": tasks}), namespace)
    ready(kube, namespace, "checkout")
    run_id = start(operator, namespace, "checkout", input={"cart": 7})
    other = start(operator, namespace, "checkout")
    worker = Worker(operator, namespace)

    page.goto(f"{operator.api_url}/ui/ns/{namespace}/runs")
    expect(page.locator("table.runs")).to_contain_text(run_id[:8])
    check_page(page, shots, "runs")

    # Open the run and watch its graph change colour as the worker completes tasks.
    page.locator(f'a[href$="/runs/{run_id}"]').click()
    expect(page.locator("h1")).to_contain_text("checkout")
    expect(node(page, "fetch")).to_have_attribute("data-status", "SCHEDULED")
    expect(node(page, "notify")).to_have_attribute("data-status", "NOT_STARTED")
    fetched = [worker.lease("fetch"), worker.lease("fetch")]
    mine = next(t for t in fetched if t["executionId"] == run_id)
    worker.report(mine, total=42)
    expect(node(page, "fetch")).to_have_attribute("data-status", "COMPLETED")
    expect(node(page, "fetch")).to_contain_text("✓")
    charge = worker.lease("charge")  # the other run's fetch is still leased: only this run has a charge
    assert charge["executionId"] == run_id
    expect(node(page, "charge")).to_have_attribute("data-status", "IN_PROGRESS")
    worker.report(charge, "FAILED", reason="card declined by the bank")
    expect(node(page, "charge")).to_have_attribute("data-status", "FAILED")
    expect(page.locator("#run-title")).to_contain_text("failed")
    expect(page.locator("section.header")).to_contain_text("card declined by the bank")

    # Filter the list to the failed runs: the run is there, the other one is not.
    page.goto(f"{operator.api_url}/ui/ns/{namespace}/runs")
    page.locator('input[name="status"][value="FAILED"]').check()
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page).to_have_url(re.compile(r"status=FAILED"))
    expect(page.locator("table.runs")).to_contain_text(run_id[:8])
    expect(page.locator("table.runs")).not_to_contain_text(other[:8])
    page.locator(f'a[href$="/runs/{run_id}"]').click()

    # The task panel says why, with its attempts; then retry from the failure.
    node(page, "charge").click()
    expect(page.locator("#task-panel")).to_contain_text("card declined by the bank")
    expect(page).to_have_url(re.compile(r"task=charge"))
    check_page(page, shots, "run-failed")
    page.get_by_role("link", name="Retry from failed").click()
    expect(page.locator("#confirm-count")).to_contain_text(run_id)
    check_page(page, shots, "confirm-retry")
    page.get_by_role("button", name="Retry from the failed tasks").click()
    expect(page.locator(".notice.ok")).to_contain_text("retry")
    expect(node(page, "charge")).to_have_attribute("data-status", "SCHEDULED")
    worker.report(worker.lease("charge"))
    worker.report(worker.lease("notify"))
    expect(node(page, "notify")).to_have_attribute("data-status", "COMPLETED")
    expect(page.locator("#run-title")).to_contain_text("completed")
    node(page, "charge").click()
    expect(page.locator("table.attempts tbody tr")).to_have_count(2)
    check_page(page, shots, "run-completed")


def test_a_human_task_is_completed_from_the_ui(
    kube: Kube, namespace: str, operator: OperatorProcess, page: Page, shots: Path
) -> None:
    approve = {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN", "inputParameters": {"amount": 120}}
    kube.apply(
        manifest("Workflow", "refund", {"tasks": [approve, simple("pay", ok="${approve.output.ok}")]}), namespace
    )
    ready(kube, namespace, "refund")
    run_id = start(operator, namespace, "refund")
    page.goto(f"{operator.api_url}/ui/ns/{namespace}/runs/{run_id}")
    expect(node(page, "approve")).to_have_attribute("data-status", "IN_PROGRESS")
    # By keyboard: the first Tab reaches the skip link, and a graph box opens with Enter.
    page.keyboard.press("Tab")
    expect(page.locator("a.skip")).to_be_focused()
    node(page, "approve").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#task-panel")).to_contain_text("Task approve")
    page.get_by_role("link", name="Complete or reject").click()
    expect(page.locator("pre").first).to_contain_text('"amount": 120')
    check_page(page, shots, "human-task")
    # An output over the namespace's payload limit is refused as the API refuses it, and the task waits on.
    kube.apply(manifest("Quota", "small-payloads", {"maxPayloadBytes": 1024}), namespace)
    page.get_by_label("Output").fill(json.dumps({"note": "x" * 2000}))
    page.get_by_role("button", name="Complete").click()
    expect(page.locator("body")).to_contain_text("over the limit of 1024 bytes (Quota small-payloads maxPayloadBytes)")
    assert trail(operator, namespace, run_id) == ["start"], "a refused decision is not recorded"
    page.get_by_label("Output").fill('{"ok": true}')
    page.get_by_role("button", name="Complete").click()
    expect(page.locator(".notice.ok")).to_contain_text("approve: completed by")
    expect(node(page, "approve")).to_have_attribute("data-status", "COMPLETED")
    pay = Worker(operator, namespace).lease("pay")
    assert pay["input"] == {"ok": True}
    assert trail(operator, namespace, run_id) == ["start", "complete"], "the person's decision is in the audit trail"


def trail(operator: OperatorProcess, namespace: str, run_id: str) -> list[str]:
    """The operations of the run's audit trail, oldest first."""
    status, body = call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}/audit")
    assert status == 200, body
    return [entry["operation"] for entry in body["entries"]]


def test_the_live_refresh_keeps_keyboard_focus_and_what_is_ticked(
    kube: Kube, namespace: str, operator: OperatorProcess, page: Page
) -> None:
    kube.apply(manifest("Workflow", "slow", {"tasks": [simple("crawl")]}), namespace)
    ready(kube, namespace, "slow")
    run_id = start(operator, namespace, "slow")
    page.goto(f"{operator.api_url}/ui/ns/{namespace}/runs/{run_id}")
    expect(node(page, "crawl")).to_have_attribute("data-status", "SCHEDULED")
    page.evaluate(
        """() => { window.refreshed = 0; document.addEventListener('htmx:afterSwap', (e) => {
             if (e.detail.elt && e.detail.elt.id === 'run-live') window.refreshed++; }); }"""
    )
    # A keyboard user reaches "Pause" and takes their time: refreshes go on
    # (the box changes colour) and leave the focus where it was.
    pause = page.get_by_role("link", name="Pause")
    pause.focus()
    expect(pause).to_be_focused()
    Worker(operator, namespace).lease("crawl")
    expect(node(page, "crawl")).to_have_attribute("data-status", "IN_PROGRESS")
    page.wait_for_function("() => window.refreshed >= 2")
    expect(pause).to_be_focused()
    # Unticked, the refresh stops; on the runs list, so does a ticked run.
    page.get_by_label("Live refresh").uncheck()
    page.evaluate(
        """() => { window.held = 0; document.addEventListener('htmx:beforeRequest', (e) => {
             if (e.defaultPrevented && e.detail.elt && e.detail.elt.hasAttribute('data-live')) window.held++; }); }"""
    )
    page.wait_for_function("() => window.held >= 2")
    expect(page.get_by_label("Live refresh")).not_to_be_checked()
    page.goto(f"{operator.api_url}/ui/ns/{namespace}/runs")
    ticked = page.locator(f'input[name="id"][value="{run_id}"]')
    ticked.check()
    page.evaluate(
        """() => { window.held = 0; document.addEventListener('htmx:beforeRequest', (e) => {
             if (e.defaultPrevented && e.detail.elt && e.detail.elt.hasAttribute('data-live')) window.held++; }); }"""
    )
    page.wait_for_function("() => window.held >= 2")
    expect(ticked).to_be_checked()
    status, _ = call("POST", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}/terminate", {})
    assert status in (200, 202), status


def test_a_semaphore_holder_appears_on_the_gates_page(
    kube: Kube, namespace: str, operator: OperatorProcess, page: Page, shots: Path
) -> None:
    kube.apply(manifest("Semaphore", "erp", {"name": "legacy_erp", "permits": 1}), namespace)
    kube.apply(manifest("TaskDefinition", "export", {"name": "export", "semaphores": ["legacy_erp"]}), namespace)
    kube.apply(manifest("Workflow", "exports", {"tasks": [simple("export")]}), namespace)
    ready(kube, namespace, "exports")
    eventually(
        lambda: (s := kube.get("semaphore", "erp", namespace)) and s.get("status", {}).get("conditions"),
        what="the semaphore to be stored",
    )
    first = start(operator, namespace, "exports")
    second = start(operator, namespace, "exports")
    page.goto(f"{operator.api_url}/ui/ns/{namespace}/gates")
    semaphore = page.locator("#semaphore-legacy_erp")
    expect(semaphore).to_contain_text("0/1 permits held")
    leased = Worker(operator, namespace, "erp-worker").lease("export")
    expect(semaphore).to_contain_text("1/1 permits held")
    expect(semaphore).to_contain_text(f"run {leased['executionId'][:8]}")
    check_page(page, shots, "gates")
    waiting = second if leased["executionId"] == first else first
    page.goto(f"{operator.api_url}/ui/ns/{namespace}/runs/{waiting}?task=export")
    expect(page.locator("#task-panel")).to_contain_text("semaphore legacy_erp: 1/1 held by export")

    for name, path in (("definitions", "definitions"), ("schedules", "schedules")):
        page.goto(f"{operator.api_url}/ui/ns/{namespace}/{path}")
        check_page(page, shots, name)
    phone = page.context.browser.new_context(viewport={"width": 390, "height": 844})  # type: ignore[union-attr]
    small = phone.new_page()
    small.goto(f"{operator.api_url}/ui/ns/{namespace}/runs")
    accessible(small, "runs on a phone")
    small.screenshot(path=str(shots / "runs-phone.png"), full_page=True)
    phone.close()
    # End both runs, so deleting the TaskDefinition (activeRunsPolicy Finish)
    # does not wait on them when the namespace is cleared.
    for run in (first, second):
        status, _ = call("POST", f"{operator.api_url}/v1/ns/{namespace}/executions/{run}/terminate", {})
        assert status in (200, 202), status
