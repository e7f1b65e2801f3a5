"""The UI served as the operator serves it (the API app with /ui installed) on
a free port over a real PostgreSQL, and a browser-like client: it keeps
cookies and sends the CSRF token the pages carry."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import aiohttp
import asyncpg
import uvicorn

from sluiceway.api.app import create_app
from sluiceway.api.services import Services
from sluiceway.plane import Plane
from sluiceway.ui.web import install

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def serve_ui(services: Services) -> AsyncIterator[str]:
    app = create_app(services)
    install(app)
    port = free_port()
    server = _QuietServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait([task], timeout=10)


@dataclass
class Page:
    status: int
    url: str
    text: str

    def csrf(self) -> str:
        found = _CSRF.search(self.text)
        assert found, "the page carries no CSRF token"
        return found.group(1)


class Browser:
    """Follows redirects, keeps cookies (the UI's are scoped to /ui)."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        self.base = base
        self.session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), headers=headers)

    async def get(self, path: str, **headers: str) -> Page:
        async with self.session.get(self.base + path, headers=headers) as response:
            return Page(response.status, str(response.url), await response.text())

    async def post(self, path: str, form: list[tuple[str, str]] | dict[str, str]) -> Page:
        async with self.session.post(self.base + path, data=form) as response:
            return Page(response.status, str(response.url), await response.text())

    async def close(self) -> None:
        await self.session.close()


async def ui_services(pool: asyncpg.Pool) -> Services:
    return Services(Plane(pool))
