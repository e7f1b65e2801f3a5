"""Starting runs from Python, and waiting for their outcome, over the public
HTTP API (the same calls as `POST .../executions?wait=`):

    async with Client("http://sluiceway:8080", "shop") as client:
        receipt = await client.execute("checkout", {"cart": 42}, timeout=120)

The wait happens on the server, which answers when the run ends (its end
wakes the request; nothing polls), in steps of at most a minute, so a run
longer than one step is waited for again."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aiohttp
import orjson

from sluiceway.worker.client import WorkerApiError, credentials

# One server-side wait: the API's bound. A longer `timeout` waits again.
_STEP_SECONDS = 60.0
_TERMINAL = frozenset({"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"})


class RunError(Exception):
    """A run did not give its output: every error `Client.execute` raises."""

    def __init__(self, message: str, run_id: str, status: str) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.status = status


class RunFailed(RunError):
    """The run ended without completing: FAILED, TIMED_OUT or TERMINATED,
    with the reason the server gave."""

    def __init__(self, run_id: str, status: str, reason: str, output: dict[str, Any]) -> None:
        super().__init__(f"run {run_id} {status}: {reason or 'no reason given'}", run_id, status)
        self.reason = reason
        self.output = output


class StillRunning(RunError, TimeoutError):
    """The caller's `timeout` passed before the run ended. The run goes on:
    `run_id` names it, to wait again (`Client.wait`) or to act on it."""

    def __init__(self, run_id: str, status: str, timeout: float) -> None:
        super().__init__(f"run {run_id} still {status} after {timeout:g} s", run_id, status)


class Client:
    """Runs of one namespace: `start`, `wait`, and `execute` (both)."""

    def __init__(
        self,
        url: str,
        namespace: str,
        *,
        token: str | None = None,
        token_file: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.base = f"{url.rstrip('/')}/v1/ns/{namespace}/executions"
        self.headers = credentials(token, token_file, api_key)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def start(
        self,
        workflow: str,
        input: dict[str, Any] | None = None,
        *,
        version: int | None = None,
        request_id: str | None = None,
        correlation_id: str | None = None,
        priority: int | None = None,
    ) -> dict[str, Any]:
        """Start a run: the server's answer (`id`, `status`, `created`)."""
        body = _start_body(workflow, input, version, request_id, correlation_id, priority)
        _, answer = await self._call("POST", self.base, body=body)
        return answer

    async def wait(self, run_id: str, timeout: float) -> dict[str, Any]:
        """The run once it ended (without its tasks), or StillRunning after `timeout` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        run = await self._wait_step(run_id, deadline)
        while run["status"] not in _TERMINAL:
            if asyncio.get_running_loop().time() >= deadline:
                raise StillRunning(run_id, run["status"], timeout)
            run = await self._wait_step(run_id, deadline)
        return run

    async def execute(
        self,
        workflow: str,
        input: dict[str, Any] | None = None,
        *,
        timeout: float = 300.0,
        version: int | None = None,
        request_id: str | None = None,
        correlation_id: str | None = None,
        priority: int | None = None,
    ) -> dict[str, Any]:
        """Start a run and wait for it: its output once it completes; RunFailed
        if it ends otherwise, StillRunning when `timeout` seconds pass first.
        The start carries a request id (one of its own unless given), so a
        start sent again after a refused wait finds the same run."""
        deadline = asyncio.get_running_loop().time() + timeout
        body = _start_body(workflow, input, version, request_id or str(uuid.uuid4()), correlation_id, priority)
        while True:
            seconds = self._step(deadline)
            status, answer = await self._call("POST", self.base, body=body, wait=seconds)
            if status != 429:
                break
            await self._retry_after(answer, deadline, "")
        run = answer if status == 200 and answer.get("status") in _TERMINAL else None
        if run is None:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise StillRunning(answer["id"], answer["status"], timeout)
            try:
                run = await self.wait(answer["id"], remaining)
            except StillRunning as still:
                raise StillRunning(still.run_id, still.status, timeout) from None
        if run["status"] != "COMPLETED":
            raise RunFailed(run["id"], run["status"], run.get("reasonForIncompletion", ""), run.get("output", {}))
        output: dict[str, Any] = run.get("output", {})
        return output

    async def _wait_step(self, run_id: str, deadline: float) -> dict[str, Any]:
        while True:
            status, run = await self._call(
                "GET", f"{self.base}/{run_id}", params={"include_tasks": "false"}, wait=self._step(deadline)
            )
            if status != 429:
                return run
            await self._retry_after(run, deadline, run_id)

    def _step(self, deadline: float) -> float:
        """The next server-side wait: what is left, at most the server's bound."""
        return max(0.0, min(_STEP_SECONDS, deadline - asyncio.get_running_loop().time()))

    async def _retry_after(self, refusal: dict[str, Any], deadline: float, run_id: str) -> None:
        """This replica holds all the waiters it may: try again after the delay it asks, within the deadline."""
        delay = float(refusal.get("retryAfterSeconds", 1))
        if asyncio.get_running_loop().time() + delay < deadline:
            await asyncio.sleep(delay)
        elif run_id:
            raise StillRunning(run_id, "RUNNING", delay)
        else:  # refused before the start: there is no run
            raise WorkerApiError(429, orjson.dumps(refusal).decode())

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    async def _call(
        self,
        method: str,
        address: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        wait: float | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """One request: its status and JSON answer. A TOO_MANY_WAITERS refusal
        (429) is answered, not raised: the caller waits and asks again."""
        query = dict(params or {})
        if wait is not None and wait > 0:
            query["wait"] = f"{wait:.3f}s"
        async with self._http().request(
            method,
            address,
            params=query or None,
            data=orjson.dumps(body) if body is not None else None,
            headers={"Content-Type": "application/json", **self.headers()},
            timeout=aiohttp.ClientTimeout(total=(wait or 0) + 30),
        ) as response:
            data = await response.read()
        answer = orjson.loads(data) if data else {}
        if response.status == 429 and isinstance(answer, dict) and answer.get("error") == "TOO_MANY_WAITERS":
            return response.status, answer
        if response.status >= 400:
            raise WorkerApiError(response.status, data.decode(errors="replace"))
        return response.status, answer


def _start_body(
    workflow: str,
    input: dict[str, Any] | None,
    version: int | None,
    request_id: str | None,
    correlation_id: str | None,
    priority: int | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": workflow, "input": input or {}}
    asked = (("version", version), ("requestId", request_id), ("correlationId", correlation_id), ("priority", priority))
    body.update({key: value for key, value in asked if value is not None})
    return body
