"""The worker protocol over HTTP. Nothing else: the SDK knows the server only
through the public API, like a worker in any other language."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson


class WorkerApiError(Exception):
    """The server refused a whole request. The text carries the status and the
    server's error code and message (which name fields, never payloads)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {_summary(body)}")
        self.status = status
        self.body = body

    def retryable(self) -> bool:
        """Worth sending again later: the server or the path to it failed, it
        asked us to slow down, or a rotating credential was momentarily refused."""
        return self.status >= 500 or self.status in (401, 403, 408, 429)


def _summary(body: str) -> str:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200]
    if isinstance(parsed, dict) and "message" in parsed:
        return f"{parsed.get('error', '')}: {str(parsed['message'])[:500]}"
    return body[:200]


@dataclass(frozen=True)
class HeartbeatAnswer:
    alive: set[str]
    gone: set[str]
    errors: list[dict[str, Any]]  # heartbeats the server refused as invalid, each with its code and error


def credentials(
    token: str | None = None, token_file: str | Path | None = None, api_key: str | None = None
) -> Callable[[], dict[str, str]]:
    """Request headers for the worker's identity. A token file is re-read on
    every request: projected ServiceAccount tokens rotate under our feet."""

    def headers() -> dict[str, str]:
        if token_file:
            return {"Authorization": f"Bearer {Path(token_file).read_text().strip()}"}
        if token:
            return {"Authorization": f"Bearer {token}"}
        if api_key:
            return {"X-API-Key": api_key}
        return {}

    return headers


class WorkerClient:
    def __init__(self, url: str, namespace: str, headers: Callable[[], dict[str, str]] | None = None) -> None:
        self.base = f"{url.rstrip('/')}/v1/ns/{namespace}/tasks"
        self.headers = headers or (lambda: {})
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> WorkerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64, keepalive_timeout=60),
                json_serialize=lambda value: orjson.dumps(value).decode(),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _post(self, path: str, body: dict[str, Any], timeout: float) -> tuple[int, Any]:
        async with self._http().post(
            f"{self.base}/{path}",
            data=orjson.dumps(body),
            headers={"Content-Type": "application/json", **self.headers()},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            data = await response.read()
            if response.status >= 400:
                raise WorkerApiError(response.status, data.decode(errors="replace"))
            return response.status, orjson.loads(data) if data else {}

    async def poll(
        self, task_types: list[str], worker_id: str, count: int, poll_timeout: float
    ) -> list[dict[str, Any]]:
        _, body = await self._post(
            "poll",
            {"taskTypes": task_types, "workerId": worker_id, "count": count, "pollTimeoutSeconds": poll_timeout},
            timeout=poll_timeout + 30,
        )
        tasks: list[dict[str, Any]] = body.get("tasks", [])
        return tasks

    async def results(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One outcome per result, in order: code 200 applied, 404 unknown, 409
        stale or no longer leased, 422 the item is invalid (nothing changed)."""
        _, body = await self._post("results", {"results": results}, timeout=60)
        outcomes: list[dict[str, Any]] = body.get("results", [])
        return outcomes

    async def results_and_lease(
        self, results: list[dict[str, Any]], worker_id: str, counts: dict[str, int]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Results, then up to `counts` new leases per task type, in one round trip
        (a server that does not know `next` leases nothing)."""
        _, body = await self._post(
            "results", {"results": results, "next": {"workerId": worker_id, "counts": counts}}, timeout=60
        )
        return body.get("results", []), body.get("tasks") or []

    async def heartbeats(
        self, beats: list[tuple[str, int]], logs: dict[str, list[dict[str, Any]]] | None = None
    ) -> HeartbeatAnswer:
        """Renew leases; `logs` ships lines the tasks logged, by task id."""
        shipped = logs or {}
        items = [{"taskId": t, "epoch": e, **({"logs": shipped[t]} if shipped.get(t) else {})} for t, e in beats]
        _, body = await self._post("heartbeats", {"heartbeats": items}, timeout=30)
        return HeartbeatAnswer(set(body.get("alive", [])), set(body.get("gone", [])), body.get("errors", []))
