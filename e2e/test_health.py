"""GitOps tools read health: every kind's status, as the real operator writes
it on the real API server, is what kstatus (Flux, cli-utils, the library
behind `kubectl`-style waiters) computes correctly, and what the Argo CD health
checks the chart ships (charts/sluiceway/argocd-health.yaml) say. Both run in
hack/kstatus, a small Go program: kstatus itself, and the Lua in gopher-lua,
the interpreter Argo CD embeds (docs/gitops.md)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.api import call
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]
ARGOCD_HEALTH = ROOT / "charts" / "sluiceway" / "argocd-health.yaml"
API = "sluiceway.dev/v1beta1"

Health = Callable[[list[dict[str, Any]]], dict[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def health() -> Health:
    """Objects -> {"Kind/name": {"kstatus": {...}, "argocd": {...}}}."""
    built = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-kstatus.sh")], capture_output=True, text=True, check=False, timeout=900
    )
    assert built.returncode == 0, built.stderr
    binary = built.stdout.strip()

    def verdicts(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        result = subprocess.run(
            [binary, "-argocd", str(ARGOCD_HEALTH)],
            input=json.dumps(objects),
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        return {f"{v['kind']}/{v['name']}": v for v in lines}

    return verdicts


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def inline(ref: str, expression: str, **inputs: Any) -> dict[str, Any]:
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "INLINE",
        "inputParameters": {"evaluatorType": "cel", "expression": expression, **inputs},
    }


def crd_kinds() -> set[str]:
    return {yaml.safe_load(p.read_text())["spec"]["names"]["kind"] for p in (ROOT / "crds").glob("*.yaml")}


def settled(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    """The object once the operator has acted on its generation and said something about it."""
    obj = kube.get(kind, name, namespace)
    status = (obj or {}).get("status", {})
    if obj and status.get("conditions") and status.get("observedGeneration") == obj["metadata"]["generation"]:
        return obj
    return None


def ended(kube: Kube, name: str, namespace: str) -> dict[str, Any] | None:
    obj = kube.get("workflowrun", name, namespace)
    phase = (obj or {}).get("status", {}).get("phase")
    if obj and phase not in (None, "Pending", "Running", "Paused") and obj["status"].get("conditions"):
        return obj
    return None


def running(kube: Kube, name: str, namespace: str) -> dict[str, Any] | None:
    obj = kube.get("workflowrun", name, namespace)
    status = (obj or {}).get("status", {})
    if obj and status.get("phase") == "Running" and status.get("conditions"):
        return obj
    return None


def test_every_kind_reads_current_and_healthy_once_ready(kube: Kube, namespace: str, health: Health) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hooks", "labels": {"sluiceway.dev/secret": "true"}},
        "stringData": {"secret": "s3cret"},
    }
    kube.apply(secret, namespace)
    objects = [
        manifest("Semaphore", "erp", {"name": "erp", "permits": 2}),
        manifest("TaskDefinition", "charge", {"name": "charge", "retryCount": 1}),
        manifest("Workflow", "greet", {"name": "greet", "tasks": [inline("hello", "'hello ' + input.who", who="x")]}),
        manifest("Quota", "quota", {"maxConcurrentExecutions": 50}),
        manifest("Schedule", "hourly", {"workflow": "greet", "every": "1h", "suspend": True}),
        manifest("Trigger", "on-ping", {"event": "ping", "workflow": "greet"}),
        manifest(
            "Webhook", "hooks", {"hmac": {"scheme": "Sluiceway", "secretRef": {"name": "hooks", "key": "secret"}}}
        ),
        manifest("WorkflowRun", "greet-once", {"workflow": "greet"}),
    ]
    for obj in objects:
        kube.apply(obj, namespace)
    read: list[dict[str, Any]] = []
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind == "WorkflowRun":
            found = eventually(lambda name=name: ended(kube, name, namespace), what=f"{name} to end")
        else:
            found = eventually(lambda kind=kind, name=name: settled(kube, kind, name, namespace), what=f"{kind}/{name}")
        read.append(found)
    assert {o["kind"] for o in read} == crd_kinds(), "every kind in crds/ is covered"
    verdicts = health(read)
    for obj in read:
        key = f"{obj['kind']}/{obj['metadata']['name']}"
        assert verdicts[key]["kstatus"]["status"] == "Current", (verdicts[key], obj["status"])
        assert verdicts[key]["argocd"]["status"] == "Healthy", (verdicts[key], obj["status"])


def test_an_invalid_spec_and_a_failed_run_read_failed_and_degraded(kube: Kube, namespace: str, health: Health) -> None:
    kube.apply(manifest("Workflow", "broken", {"tasks": [inline("a", "input.v", v="${nowhere.output.v}")]}), namespace)
    kube.apply(
        manifest("Workflow", "crash", {"name": "crash", "tasks": [inline("a", "int(input.v)", v="x")]}), namespace
    )
    kube.apply(manifest("WorkflowRun", "crash-once", {"workflow": "crash"}), namespace)
    kube.apply(
        manifest("WorkflowRun", "bad-override", {"workflow": "crash", "taskOverrides": {"nope": {"retryCount": 1}}}),
        namespace,
    )
    broken = eventually(lambda: settled(kube, "workflow", "broken", namespace), what="broken to be refused")
    crashed = eventually(lambda: ended(kube, "crash-once", namespace), what="crash-once to fail")
    unknown = eventually(lambda: ended(kube, "bad-override", namespace), what="bad-override to be refused")
    assert crashed["status"]["phase"] == "Failed", crashed["status"]
    verdicts = health([broken, crashed, unknown])
    refused = verdicts["Workflow/broken"]
    assert refused["kstatus"]["status"] == "Failed" and "nowhere" in refused["kstatus"]["message"], refused
    assert refused["argocd"]["status"] == "Degraded" and refused["argocd"]["message"].startswith("InvalidSpec: ")
    for key in ("WorkflowRun/crash-once", "WorkflowRun/bad-override"):
        assert verdicts[key]["kstatus"]["status"] == "Failed", (verdicts[key], crashed["status"])
        assert verdicts[key]["argocd"]["status"] == "Degraded", verdicts[key]


@pytest.fixture
def watched(kube: Kube, tmp_path: Path) -> Iterator[Callable[[str, str, str], Callable[[], list[dict[str, Any]]]]]:
    """Watch one object with kubectl: every version the API server serves,
    so the one between a spec change and the operator's answer is seen, not raced."""
    children: list[subprocess.Popen[str]] = []

    def watch(kind: str, name: str, namespace: str) -> Callable[[], list[dict[str, Any]]]:
        out = tmp_path / f"{kind}-{name}.json"
        args = [kube.kubectl_path, f"--kubeconfig={kube.kubeconfig}", "get", kind, name, "-n", namespace]
        with out.open("w") as sink:
            children.append(subprocess.Popen([*args, "-o", "json", "--watch"], stdout=sink, text=True))

        def versions() -> list[dict[str, Any]]:
            text, decoder, found, at = out.read_text(), json.JSONDecoder(), [], 0
            while (at := text.find("{", at)) >= 0:
                obj, at = decoder.raw_decode(text, at)
                found.append(obj)
            return found

        return versions

    yield watch
    for child in children:
        child.terminate()
        child.wait(timeout=10)


def test_in_progress_until_the_operator_has_acted_on_an_object(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    health: Health,
    watched: Callable[[str, str, str], Callable[[], list[dict[str, Any]]]],
) -> None:
    # A namespace the operator does not watch: what every new object looks like before it acts.
    unwatched = f"health-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", unwatched)
    try:
        kube.apply(manifest("Semaphore", "erp", {"name": "erp", "permits": 2}), unwatched)
        fresh = kube.get("semaphore", "erp", unwatched)
    finally:
        kube.run("delete", "namespace", unwatched, "--wait=false", check=False)
    assert fresh is not None and fresh["status"] == {"observedGeneration": 0}, fresh
    verdict = health([fresh])["Semaphore/erp"]
    assert (verdict["kstatus"]["status"], verdict["argocd"]["status"]) == ("InProgress", "Progressing"), verdict

    kube.apply(manifest("Semaphore", "erp", {"name": "erp", "permits": 2}), namespace)
    eventually(lambda: settled(kube, "semaphore", "erp", namespace), what="erp to be ready")
    versions = watched("semaphore", "erp", namespace)
    eventually(lambda: versions(), what="the watch to start")
    kube.apply(manifest("Semaphore", "erp", {"name": "erp", "permits": 3}), namespace)
    eventually(lambda: (o := settled(kube, "semaphore", "erp", namespace)) and o["metadata"]["generation"] == 2)
    time.sleep(1)  # the watch's last event reaches its file
    seen = versions()
    changed = [o for o in seen if o["metadata"]["generation"] == 2]
    assert changed and changed[0]["status"]["observedGeneration"] == 1, "the change, before the operator acted"
    assert changed[-1]["status"]["observedGeneration"] == 2, "the operator's answer"
    first, last = health([changed[0]])["Semaphore/erp"], health([changed[-1]])["Semaphore/erp"]
    assert (first["kstatus"]["status"], first["argocd"]["status"]) == ("InProgress", "Progressing"), first
    assert (last["kstatus"]["status"], last["argocd"]["status"]) == ("Current", "Healthy"), last


def test_a_running_run_is_in_progress_paused_suspended_and_terminated_failed(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    health: Health,
) -> None:
    # A SIMPLE task no worker polls: the run stays Running until it is terminated.
    task = {"name": "unpolled", "taskReferenceName": "wait", "type": "SIMPLE"}
    kube.apply(manifest("Workflow", "waits", {"name": "waits", "tasks": [task]}), namespace)
    run = manifest("WorkflowRun", "waits-once", {"workflow": "waits"})
    kube.apply(run, namespace)
    going = eventually(lambda: running(kube, "waits-once", namespace), what="waits-once to run")
    verdict = health([going])["WorkflowRun/waits-once"]
    assert (verdict["kstatus"]["status"], verdict["argocd"]["status"]) == ("InProgress", "Progressing"), verdict

    kube.apply({**run, "spec": {**run["spec"], "paused": True}}, namespace)

    def paused() -> dict[str, Any] | None:
        obj = kube.get("workflowrun", "waits-once", namespace)
        status = (obj or {}).get("status", {})
        generation = (obj or {}).get("metadata", {}).get("generation")
        return obj if status.get("phase") == "Paused" and status.get("observedGeneration") == generation else None

    held = eventually(paused, what="waits-once to be paused, at its new generation")
    verdict = health([held])["WorkflowRun/waits-once"]
    assert (verdict["kstatus"]["status"], verdict["argocd"]["status"]) == ("InProgress", "Suspended"), verdict

    run_id = held["status"]["executionId"]
    api = f"{operator.api_url}/v1/ns/{namespace}"
    assert call("POST", f"{api}/executions/{run_id}/terminate", {"reason": "enough"})[0] == 202
    stopped = eventually(lambda: ended(kube, "waits-once", namespace), what="waits-once to be terminated")
    verdict = health([stopped])["WorkflowRun/waits-once"]
    assert (verdict["kstatus"]["status"], verdict["argocd"]["status"]) == ("Failed", "Degraded"), verdict
