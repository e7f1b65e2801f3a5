"""API fuzzing with schemathesis over the served OpenAPI document.

Run as a subprocess (`st run`), against a live server: the suites that use it
give it a real API on a real PostgreSQL (tests/integration) or the operator
with a real API server (e2e). This module is also the schemathesis hooks
module (SCHEMATHESIS_HOOKS=tests.support.fuzzing): just before each call, the hooks
below steer some generated requests to data that exists (the seeded
namespace, workflow and task type), so the fuzzer reaches the paths behind
"not found" and the stateful phase has runs and leases to follow links from.
The steering is a pure function of the generated case, so a seed replays.

For the tenancy pass (e2e/test_fuzz_tenancy.py) the steering takes lists:
namespaces, and the ids and names of another tenant's objects, put in path
parameters, queries and bodies; and every call is recorded (request and
answer, one JSON line each) for the test to judge."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import schemathesis

from sluiceway.controls.calendar import CalendarError
from sluiceway.controls.durations import parse_duration
from sluiceway.controls.schedules import calendar_of
from sluiceway.model.quota import egress_problem
from sluiceway.model.schedule import ScheduleSpec

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
# A fuzzed poll must not hold the connection for the default 30 s, nor a
# fuzzed `wait` (a start or read that waits for the run's end) for up to 60 s.
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


async def run(
    url: str,
    *args: str,
    steer: dict[str, str] | None = None,
    record: Path | None = None,
    checks: str = CHECKS,
    positive: bool = False,
) -> Outcome:
    """`st run` against the OpenAPI document served at `url`, seeded; the
    output is returned whole (it names the seed and every failure). With
    `record`, every call is appended to that file (see `recorded`); with
    `positive`, generated data keeps to the rules the document states only in
    words (see `_keep_to_described_rules`)."""
    command = [
        str(Path(sys.executable).parent / "st"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        checks,
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
        **({"SLUICEWAY_FUZZ_RECORD": str(record)} if record else {}),
        **({"SLUICEWAY_FUZZ_POSITIVE": "1"} if positive else {}),
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


def _targets(key: str) -> list[str]:
    return [t for t in os.environ.get(f"SLUICEWAY_FUZZ_{key}", "").split(",") if t]


def _pick(value: Any, key: str, case: str) -> Any:
    """Replace most strings with one of the listed targets, or keep them:
    which is a pure function of the value and of the whole case as generated
    (the same few values recur across cases), so a seed replays."""
    targets = _targets(key)
    if not targets or not isinstance(value, str):
        return value
    index = zlib.crc32(f"{case}\0{value}".encode()) % (len(targets) + 1)
    return targets[index] if index < len(targets) else value


# Where the other tenant's objects go: path parameters, query parameters and body fields, by name.
_PATH_TARGETS = {"namespace": "NAMESPACES", "execution_id": "RUN_IDS", "task_id": "TASK_IDS", "name": "NAMES"}
_FIELD_TARGETS = {
    "executionId": "RUN_IDS",
    "parent": "RUN_IDS",
    "workflowRun": "RUN_IDS",
    "restartedFrom": "RUN_IDS",
    "taskId": "TASK_IDS",
}


def _steer_fields(value: Any, case: str) -> None:
    """Put the listed ids into every field of `value` (a body, at any depth) named in _FIELD_TARGETS."""
    if isinstance(value, dict):
        for field, item in value.items():
            if field in _FIELD_TARGETS:
                value[field] = _pick(item, _FIELD_TARGETS[field], case)
            else:
                _steer_fields(item, case)
    elif isinstance(value, list):
        for item in value:
            _steer_fields(item, case)


def _steer_tenants(case: schemathesis.Case) -> None:
    generated = repr((case.operation.label, case.path_parameters, case.query, case.body))
    for params, targets in ((case.path_parameters, _PATH_TARGETS), (case.query, _FIELD_TARGETS)):
        for field, key in targets.items():
            if params and field in params:
                params[field] = _pick(params[field], key, generated)
    _steer_fields(case.body, generated)


# --- Positive mode: the server must accept what the document allows ---------
#
# With $SLUICEWAY_FUZZ_POSITIVE (`run(..., positive=True)`), the calls below
# keep generated data to the rules the document states only in words, because
# JSON Schema cannot: a rule between two places (a header and the body, the
# path and the body, two fields), one over every nested value, one on data the
# server holds (what the seeded workflow declares), or a parser's grammar (cron,
# time zones, CIDRs). Each is named in the field's description; every other
# constraint is in the document, and a refusal of it fails the pass.

_INT64 = 2**63 - 1


def _storable(value: Any) -> Any:
    """`value` without what no payload may hold, at any depth: NUL characters
    and lone surrogates (PostgreSQL and UTF-8 refuse them), integers past 64 bits."""
    if isinstance(value, str):
        return (
            value.replace("\x00", "").encode("utf-8", "ignore").decode("utf-8")
            if not value.isascii() or "\x00" in value
            else value
        )
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(-_INT64 - 1, min(_INT64, value))
    if isinstance(value, dict):
        return {_storable(key): _storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_storable(item) for item in value]
    return value


def _keep_to_described_rules(case: schemathesis.Case) -> None:
    if isinstance(case.body, dict | list | str):
        case.body = _storable(case.body)
    body, path, method = case.body, case.operation.path, case.method.upper()
    headers = case.headers
    key = body.get("requestId") if isinstance(body, dict) else None
    if headers and isinstance(headers.get("Idempotency-Key"), str) and isinstance(key, str) and key.isascii():
        headers["Idempotency-Key"] = key  # start, restart: one key, if sent twice
    if case.query:
        case.query.pop("cursor", None)  # only a `nextCursor` the list returned is read
        case.query.pop("searchAttribute", None)  # the filter grammar, on attributes the workflow declares
    if not isinstance(body, dict):
        return
    if path.endswith("/metadata/task-definitions"):
        _worker_pods_as_taken(body)
    elif path.endswith("/executions") and method == "POST":
        body.pop("taskOverrides", None)  # references the workflow must have
        body.pop("searchAttributes", None)  # attributes it must declare
    elif path.endswith("/result"):
        body.pop("searchAttributes", None)  # attributes the task's workflow must declare
    elif path.endswith("/rerun") and os.environ.get("SLUICEWAY_FUZZ_REFERENCE"):
        body["taskReferenceName"] = os.environ["SLUICEWAY_FUZZ_REFERENCE"]  # a task the run ran
    elif path.endswith("/backfill"):
        _past_range(body)
    elif path.endswith("/quotas") and isinstance(body.get("allowedEgress"), list):
        body["allowedEgress"] = [e for e in body["allowedEgress"] if not isinstance(e, str) or not egress_problem(e)]
    elif "/schedules/" in path and method == "PUT":
        _readable_calendar(body)


def _worker_pods_as_taken(body: dict[str, Any]) -> None:
    """Worker pods as the model takes them: env unique by name, maxReplicas at least minReplicas."""
    workers = body.get("workers")
    env = workers.get("env") if isinstance(workers, dict) else None
    if isinstance(env, list):
        names = [e.get("name") if isinstance(e, dict) else None for e in env]
        workers["env"] = [e for i, e in enumerate(env) if names[i] is None or names[i] not in names[:i]]
    scaling = workers.get("autoscaling") if isinstance(workers, dict) else None
    if not isinstance(scaling, dict):
        return
    low, high = scaling.get("minReplicas"), scaling.get("maxReplicas")
    if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool) and high < low:
        scaling["maxReplicas"] = low


def _past_range(body: dict[str, Any]) -> None:
    """A backfill's range as the handler takes it: endTime not before startTime, nor after now."""
    start, end = body.get("startTime"), body.get("endTime")
    if not (isinstance(start, str) and isinstance(end, str)):
        return
    try:
        first, last = sorted(datetime.datetime.fromisoformat(t.upper()) for t in (start, end))
    except (ValueError, TypeError):
        return  # not an instant the schema allows: left for the server to refuse
    if first.tzinfo is None or last.tzinfo is None:
        return  # likewise: the schema's pattern asks for a time zone
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    last = min(last, past)
    body["startTime"], body["endTime"] = min(first, last).isoformat(), last.isoformat()


def _readable_calendar(body: dict[str, Any]) -> None:
    """A cron, interval or time zone the calendar cannot read becomes an hourly interval."""
    try:
        calendar_of(ScheduleSpec.model_validate(body))
    except CalendarError:
        body.pop("cron", None)
        body.pop("offset", None)
        body["every"] = "1h"
    except ValueError:
        pass  # refused by the model itself: the document states that, so the pass must fail on it


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]) -> None:
    _steer_tenants(case)  # only when the lists are given
    if os.environ.get("SLUICEWAY_FUZZ_POSITIVE"):
        _keep_to_described_rules(case)
    query = case.query
    if query and isinstance(query.get("wait"), str) and _waits(query["wait"]):
        query["wait"] = f"{POLL_TIMEOUT_CAP}s"  # still a wait; one that cannot be read stays, for its 422
    params = case.path_parameters
    if params and "namespace" in params and not _targets("NAMESPACES"):
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


def _waits(raw: str) -> bool:
    """A `wait` the API takes, longer than a fuzzed call should hold its connection."""
    try:
        seconds = parse_duration(raw)
    except ValueError:
        return False
    return POLL_TIMEOUT_CAP < seconds <= 60


@dataclass(frozen=True)
class Call:
    """One recorded call: what was sent, and the answer."""

    operation: str
    method: str
    url: str
    request: str
    status: int
    answer: str


@schemathesis.hook
def after_call(context: schemathesis.HookContext, case: schemathesis.Case, response: Any) -> None:
    path = os.environ.get("SLUICEWAY_FUZZ_RECORD")
    if not path:
        return
    sent = response.request.body
    request = sent.decode(errors="replace") if isinstance(sent, bytes) else str(sent or "")
    call = {
        "operation": f"{case.method.upper()} {case.operation.path}",
        "method": case.method.upper(),
        "url": str(response.request.url),
        "request": request,
        "status": response.status_code,
        "answer": response.content.decode(errors="replace"),
    }
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(call) + "\n")


def recorded(path: Path) -> list[Call]:
    """The calls a pass recorded with `run(..., record=path)`."""
    if not path.exists():
        return []
    return [Call(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]
