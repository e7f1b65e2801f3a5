"""API fuzzing with schemathesis over the served OpenAPI document.

Run as a subprocess (`st run`), against a live server: the suites that use it
give it a real API on a real PostgreSQL (tests/integration) or the operator
with a real API server (e2e). This module is also the schemathesis hooks
module (SCHEMATHESIS_HOOKS=tests.support.fuzzing): just before each call, the hooks
below steer some generated requests to data that exists (the seeded
namespace, workflow and task type), so the fuzzer reaches the paths behind
"not found" and the stateful phase has runs and leases to follow links from.
The steering is a pure function of the generated case, so a seed replays."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import schemathesis

REPO_ROOT = Path(__file__).resolve().parents[2]
# Every check that the server answers as documented: no 5xx, only documented
# status codes, content types and headers, and bodies that match their schema.
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)
DEFAULT_SEED = 8
# A fuzzed poll must not hold the connection for the default 30 s.
POLL_TIMEOUT_CAP = 0.2
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def seed() -> int:
    """The run's seed: $SLUICEWAY_FUZZ_SEED to replay or explore, else the fixed CI seed."""
    return int(os.environ.get("SLUICEWAY_FUZZ_SEED", DEFAULT_SEED))


@dataclass(frozen=True)
class Outcome:
    code: int
    output: str


async def run(url: str, *args: str, steer: dict[str, str] | None = None) -> Outcome:
    """`st run` against the OpenAPI document served at `url`, seeded; the
    output is returned whole (it names the seed and every failure)."""
    command = [
        str(Path(sys.executable).parent / "st"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        CHECKS,
        "--seed",
        str(seed()),
        "--workers",
        "1",
        "--no-color",
        "--request-timeout",
        "20",
        "--generation-database",
        "none",
        "--suppress-health-check",
        "all",
        *args,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        "SCHEMATHESIS_HOOKS": "tests.support.fuzzing",
        **{f"SLUICEWAY_FUZZ_{key.upper()}": value for key, value in (steer or {}).items()},
    }
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env, cwd=REPO_ROOT
    )
    output, _ = await process.communicate()
    assert process.returncode is not None
    return Outcome(process.returncode, output.decode(errors="replace"))


def _steer(value: Any, pattern: re.Pattern[str], key: str) -> Any:
    """Replace about half the well-formed names with the seeded one."""
    target = os.environ.get(f"SLUICEWAY_FUZZ_{key}")
    if target and isinstance(value, str) and pattern.match(value) and len(value) % 2 == 0:
        return target
    return value


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]) -> None:
    params = case.path_parameters
    if params and "namespace" in params:
        params["namespace"] = _steer(params["namespace"], _NAMESPACE, "NAMESPACE")
    body = case.body
    if not isinstance(body, dict):
        return
    path = case.operation.path
    if path.endswith("/tasks/poll"):
        timeout = body.get("pollTimeoutSeconds")
        if timeout is None or (isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0):
            body["pollTimeoutSeconds"] = POLL_TIMEOUT_CAP
        types = body.get("taskTypes")
        if isinstance(types, list) and types:
            types[0] = _steer(types[0], _NAME, "TASK_TYPE")
    elif path.endswith("/executions") and case.method.upper() == "POST":
        body["name"] = _steer(body.get("name"), _NAME, "WORKFLOW")
    elif path.endswith("/result") and params and isinstance(body.get("taskId"), str):
        params["task_id"] = body["taskId"]  # one task in path and body, so the store is reached
