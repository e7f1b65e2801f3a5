"""What Kubernetes costs per run and per task (issue 15, goal 7), counted by
the API server itself.

A real control plane (kube-apiserver and etcd, as the e2e tests start it:
`SLUICEWAY_BIN_DIR=$(bash hack/build-control-plane.sh)`), the CRDs, one
operator process watching one namespace, and SDK worker processes. Two
Workflows: `one` (one task) and `ten` (ten tasks in sequence). For each, N
WorkflowRuns are created with one `kubectl create` of a List, the script waits
until every one reports phase Completed, and then a few status intervals more
(a late write would be counted). The API server's `apiserver_request_total`
is read before and after each phase (`kubectl get --raw /metrics`), and the
difference is broken down by verb and resource.

Writes (POST, PUT, PATCH, DELETE) are what costs the API server and etcd. The
script subtracts what it did itself (one POST per WorkflowRun) and prints the
operator's writes per run for runs of 1 task and of 10 tasks: writes grow with
runs and their status changes, never with tasks, when the two are about equal.
Reads the script makes to wait (LIST of workflowruns) are shown, not counted.

No test fails on these figures: they are measurements (bench/README.md)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import throughput  # noqa: E402
from figures import record  # noqa: E402

from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane  # noqa: E402
from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.devenv.processes import Child, free_port, wait_until  # noqa: E402

API = "sluiceway.dev/v1beta1"
NS = "bench-kube"
WRITES = {"POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE", "APPLY"}
STATUS_INTERVAL = 5.0  # the operator's default SLUICEWAY_STATUS_INTERVAL


class Kubectl:
    def __init__(self, plane: ControlPlane) -> None:
        self.argv = [str(plane.bin / "kubectl"), f"--kubeconfig={plane.kubeconfig}"]

    def __call__(self, *args: str, input: str | None = None) -> str:
        result = subprocess.run([*self.argv, *args], input=input, text=True, capture_output=True, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result.stdout


def requests_by(kubectl: Kubectl) -> collections.Counter[tuple[str, str]]:
    """apiserver_request_total summed by (verb, resource[/subresource])."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in kubectl("get", "--raw", "/metrics").splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
        labels = dict(part.split("=", 1) for part in labels_text.split('",') if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        resource = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
        counts[(labels.get("verb", ""), resource)] += int(float(value))
    return counts


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def workflow(name: str, tasks: int) -> dict[str, Any]:
    steps = [{"name": "noop", "taskReferenceName": f"step{n}"} for n in range(tasks)]
    return manifest("Workflow", name, {"name": name, "tasks": steps})


def phases(kubectl: Kubectl, prefix: str) -> collections.Counter[str]:
    listed = json.loads(kubectl("get", "workflowruns", "-n", NS, "-o", "json"))
    return collections.Counter(
        item.get("status", {}).get("phase", "none")
        for item in listed["items"]
        if item["metadata"]["name"].startswith(prefix)
    )


def run_phase(kubectl: Kubectl, name: str, runs: int, timeout: float) -> tuple[float, collections.Counter[str]]:
    """Create `runs` WorkflowRuns of workflow `name` at once; wait until all are Completed."""
    items = [manifest("WorkflowRun", f"{name}-{n}", {"workflow": name}) for n in range(runs)]
    started = time.monotonic()
    kubectl("create", "-n", NS, "-f", "-", input=yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    deadline = started + timeout
    while True:
        seen = phases(kubectl, f"{name}-")
        if seen.get("Completed", 0) == runs:
            return time.monotonic() - started, seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: {dict(seen)} after {timeout} s")
        time.sleep(2)


def writes_of(diff: collections.Counter[tuple[str, str]]) -> dict[tuple[str, str], int]:
    return {key: n for key, n in diff.items() if key[0] in WRITES and n > 0}


def show(label: str, diff: collections.Counter[tuple[str, str]], runs: int, tasks: int) -> tuple[int, int]:
    writes = writes_of(diff)
    mine = runs  # one POST per WorkflowRun by `kubectl create`
    total = sum(writes.values())
    operator = total - mine
    print(f"  {label}: {runs} runs, {tasks} tasks")
    for (verb, resource), n in sorted(writes.items(), key=lambda kv: -kv[1]):
        print(f"    {verb:7} {resource:32} {n:7}  ({n / runs:.2f} per run)")
    reads = sum(n for (verb, _), n in diff.items() if verb not in WRITES)
    print(f"    writes by the operator (all less the {mine} creates): {operator} = {operator / runs:.2f} per run,")
    print(f"    {operator / tasks:.3f} per task; reads (this script's LISTs included): {reads}")
    return operator, total


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000, help="WorkflowRuns per phase: runs x (1 + 10) tasks")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--settle", type=float, default=3 * STATUS_INTERVAL, help="seconds waited after each phase")
    parser.add_argument("--quick", action="store_true", help="100 runs per phase: 1,100 tasks (for make bench)")
    args = parser.parse_args()
    if args.quick:
        args.runs = 100
    logs = Path(tempfile.mkdtemp(prefix="bench-kube-"))
    with ControlPlane() as plane, LocalPostgres(durable=True) as server:
        kubectl = Kubectl(plane)
        kubectl("apply", "-f", str(REPO_ROOT / "crds"))
        kubectl("wait", "--for=condition=Established", "-f", str(REPO_ROOT / "crds"), "--timeout=60s")
        wait_until(lambda: bool(_lists(kubectl)), timeout=60, what="the CRDs to serve lists")
        kubectl("create", "namespace", NS)
        dsn = await throughput.create_database(server.dsn, "kube")
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "SLUICEWAY_DATABASE_URL": dsn,
            "KUBECONFIG": str(plane.kubeconfig),
            "SLUICEWAY_NAMESPACES": NS,
            "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
            "SLUICEWAY_LOG_LEVEL": "WARNING",
            "SLUICEWAY_STATUS_INTERVAL": str(STATUS_INTERVAL),
            "BENCH_BATCH": "100",
        }
        operator = Child("operator", [sys.executable, "-m", "sluiceway", "operator"], logs, env=env)
        children = [operator]
        try:
            wait_until(
                lambda: urllib.request.urlopen(f"{api}/readyz", timeout=2).status == 200,
                timeout=120,
                what="the operator",
                child=operator,
            )
            kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump_all([workflow("one", 1), workflow("ten", 10)]))
            for name in ("one", "ten"):
                wait_until(functools.partial(_has_version, kubectl, name), timeout=60, what=f"Workflow {name}")
            worker = [sys.executable, "-m", "sluiceway", "worker", str(HERE / "noop_worker.py"), "--url", api]
            worker += ["--namespace", NS, "--log-level", "WARNING"]
            children += [Child(f"worker-{n}", worker, logs, env=env) for n in range(args.workers)]
            print(
                f"kube-apiserver + etcd (local control plane), one operator (status interval {STATUS_INTERVAL:g} s), "
                f"{args.workers} SDK workers; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
            )
            time.sleep(args.settle)
            idle_before = requests_by(kubectl)
            time.sleep(args.settle)
            idle = requests_by(kubectl) - idle_before
            idle_writes = sum(writes_of(idle).values())
            print(f"  idle, {args.settle:.0f} s: {idle_writes} writes (" + _listing(writes_of(idle)) + ")")
            per_run: dict[int, float] = {}
            for name, tasks in (("one", 1), ("ten", 10)):
                before = requests_by(kubectl)
                seconds, _ = run_phase(kubectl, name, args.runs, timeout=1800)
                time.sleep(args.settle)
                diff = requests_by(kubectl) - before
                background = idle_writes * (seconds + args.settle) / args.settle
                operator_writes, _ = show(
                    f"runs of {tasks} task{'s' if tasks > 1 else ''} ({seconds:.0f} s to Completed)",
                    diff,
                    args.runs,
                    args.runs * tasks,
                )
                per_run[tasks] = (operator_writes - background) / args.runs
                print(
                    f"    less the idle background (~{background:.0f} writes in that time): "
                    f"{per_run[tasks]:.2f} writes per run"
                )
            ratio = per_run[10] / per_run[1] if per_run[1] else float("nan")
            print(
                f"  writes per run, 10-task runs / 1-task runs: {ratio:.2f}x "
                f"(1.0x: writes do not grow with tasks; 10x would be per task)"
            )
            lower = {"higher_is_better": False}
            record("7 kube cost", "operator writes per run, 1-task runs", per_run[1], "writes", **lower)
            record("7 kube cost", "operator writes per run, 10-task runs", per_run[10], "writes", **lower)
            record("7 kube cost", "writes per run, 10 tasks / 1 task", ratio, "x", **lower)
        finally:
            for child in reversed(children):
                child.stop()


def _has_version(kubectl: Kubectl, name: str) -> bool:
    found = json.loads(kubectl("get", "workflow", name, "-n", NS, "-o", "json"))
    return bool(found.get("status", {}).get("version"))


def _lists(kubectl: Kubectl) -> bool:
    try:
        kubectl("get", "workflowruns,workflows", "-A", "-o", "name")
    except RuntimeError:
        return False
    return True


def _listing(writes: dict[tuple[str, str], int]) -> str:
    return ", ".join(f"{verb} {resource} {n}" for (verb, resource), n in sorted(writes.items())) or "none"


if __name__ == "__main__":
    asyncio.run(main())
