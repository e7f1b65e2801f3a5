"""The SDKs of sdk/conformance/sdks.yaml, as the conformance and example
tests use them: building each once a session, their programs' argv, and
definitions stored in a namespace of the test's own as the operator's
reconcilers store them (the definitions API writes Kubernetes objects, and an
integration plane has no Kubernetes: the operator's parse, check and store are
what turns those objects into what the API serves)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway.engine.graph import problems
from sluiceway.model.quota import QuotaSpec
from sluiceway.model.semaphore import SemaphoreSpec
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.model.workflow import WorkflowSpec
from sluiceway.store import definitions, workflows
from sluiceway.store.database import Pool

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "sdk" / "conformance"
# A build fetches modules and compiles: bounded, but generously on a busy machine.
BUILD_TIMEOUT = 1800


@dataclass(frozen=True)
class Sdk:
    name: str
    build: list[str] | None
    conformance: list[str]
    example_worker: list[str]

    def argv(self, template: list[str], url: str, namespace: str) -> list[str]:
        return [part.format(python=sys.executable, url=url, namespace=namespace) for part in template]


def load_sdks() -> list[Sdk]:
    listed = yaml.safe_load((CONFORMANCE / "sdks.yaml").read_text())["sdks"]
    return [Sdk(s["name"], s.get("build"), s["conformance"], s["exampleWorker"]) for s in listed]


def load_scenarios() -> list[dict[str, Any]]:
    scenarios: list[dict[str, Any]] = yaml.safe_load((CONFORMANCE / "scenarios.yaml").read_text())["scenarios"]
    return scenarios


@dataclass
class Builds:
    """Each SDK built at most once a session; a failed build fails every test of that SDK, naming it."""

    outcomes: dict[str, str | None] = field(default_factory=dict)  # SDK -> None (built) or why not

    def require(self, sdk: Sdk) -> None:
        if sdk.name not in self.outcomes:
            self.outcomes[sdk.name] = _build(sdk)
        problem = self.outcomes[sdk.name]
        if problem is not None:
            pytest.fail(f"the {sdk.name} SDK cannot take part: {problem}", pytrace=False)


def _build(sdk: Sdk) -> str | None:
    if not sdk.build:
        return None
    try:
        done = subprocess.run(
            sdk.build, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"its build {' '.join(sdk.build)} did not run: {error}"
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        return f"its build {' '.join(sdk.build)} exited {done.returncode}:\n{tail}"
    return None


async def define(pool: Pool, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    """Store one definition as the operator's reconciler does: `name` is the
    Kubernetes object's; the spec is parsed and checked first (a bad one
    fails the test here, naming its problem, as it would be refused)."""
    async with pool.acquire() as conn:
        if kind == "TaskDefinition":
            task = TaskDefinitionSpec.model_validate(spec)
            await definitions.upsert_task_definition(conn, namespace, task.name or name, name, 1, task.to_wire())
        elif kind == "Workflow":
            workflow = WorkflowSpec.model_validate(spec)
            found = problems(workflow)
            assert not found, f"workflow {name}: {found}"
            await workflows.upsert_workflow(conn, namespace, workflow.name or name, name, 1, workflow.to_wire())
        elif kind == "Semaphore":
            semaphore = SemaphoreSpec.model_validate(spec)
            await definitions.upsert_semaphore(conn, namespace, semaphore.name or name, name, 1, semaphore.permits)
        elif kind == "Quota":
            quota = QuotaSpec.model_validate(spec)
            await definitions.upsert_quota(
                conn,
                namespace,
                name,
                1,
                quota.max_concurrent_executions,
                quota.max_executions_per_minute,
                quota.max_workflow_definitions,
                quota.max_schedules,
                quota.max_payload_bytes,
                tuple(quota.allowed_egress),
                quota.dispatch_weight,
            )
        else:
            raise AssertionError(f"no way to store a {kind} in a plane without Kubernetes")


def object_name(engine_name: str) -> str:
    """The Kubernetes object name an engine name (task type, workflow) gets."""
    return engine_name.replace("_", "-")
