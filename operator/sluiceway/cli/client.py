"""The IO behind the `sluiceway` user commands: calls to the Sluiceway API
(aiohttp) and reads from the Kubernetes API (through `sluiceway.kubeapi`).
Every failure becomes a `CommandError` with one line that names what went
wrong and the exit code scripts can rely on (see `ExitCode`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from sluiceway.kubeapi.client import KubeClient

DEFAULT_URL = "http://127.0.0.1:8080"


class ExitCode(IntEnum):
    """What a `sluiceway` command's exit status means, for every command."""

    OK = 0
    UNSUCCESSFUL = 1  # the run ended FAILED, TIMED_OUT or TERMINATED; `why` found a blocking reason
    USAGE = 2  # a bad flag or argument, or input the API refused as invalid (422)
    NOT_FOUND = 3  # no such run, task, workflow or WorkflowRun
    REFUSED = 4  # the API refused the request: a conflict (409), a limit (429), no permission (401, 403)
    UNAVAILABLE = 5  # the API or the Kubernetes API cannot be reached, or failed (5xx)


def exit_code_of(status: int) -> ExitCode:
    if status == 404:
        return ExitCode.NOT_FOUND
    if status in (400, 422):
        return ExitCode.USAGE
    if status in (401, 403, 409, 429):
        return ExitCode.REFUSED
    return ExitCode.UNAVAILABLE


class CommandError(Exception):
    """A failure to report on stderr, in one line, exiting with `code`."""

    def __init__(self, message: str, code: ExitCode = ExitCode.UNAVAILABLE, body: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = body


@dataclass(frozen=True)
class Credentials:
    token: str | None = None
    token_file: str | None = None
    api_key: str | None = None

    def headers(self) -> dict[str, str]:
        """The same precedence as the worker SDK: token file, token, API key."""
        if self.token_file:
            try:
                return {"Authorization": f"Bearer {Path(self.token_file).read_text().strip()}"}
            except OSError as error:
                raise CommandError(
                    f"cannot read the token file {self.token_file}: {error.strerror}", ExitCode.USAGE
                ) from error
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.api_key:
            return {"X-API-Key": self.api_key}
        return {}


Params = Mapping[str, str | int | Sequence[str]]


@dataclass(frozen=True)
class Api:
    url: str
    credentials: Credentials = Credentials()
    timeout: float = 10.0

    def address(self, *segments: str) -> str:
        return self.url.rstrip("/") + "/" + "/".join(quote(s, safe="") for s in segments)

    async def get(self, *segments: str, params: Params | None = None) -> dict[str, Any]:
        """GET one JSON object; HTTP errors and unreachable servers raise CommandError."""
        return await self.call("GET", *segments, params=params)

    async def post(self, *segments: str, body: Any = None, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.call("POST", *segments, body=body, headers=headers)

    async def call(
        self,
        method: str,
        *segments: str,
        params: Params | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request whose answer is a JSON object."""
        decoded = await self.request(method, *segments, params=params, body=body, headers=headers)
        if not isinstance(decoded, dict):
            raise CommandError(f"{method} {self.address(*segments)} did not answer with a JSON object")
        return decoded

    async def request(
        self,
        method: str,
        *segments: str,
        params: Params | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One request; its decoded JSON answer."""
        import aiohttp  # here, not at the top: a command that calls nothing starts faster

        address = self.address(*segments)
        sent = {"Accept": "application/json", **self.credentials.headers(), **(headers or {})}
        query = [(k, str(v)) for k, values in (params or {}).items() for v in _listed(values)]
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
                async with session.request(method, address, params=query or None, json=body, headers=sent) as response:
                    status, text = response.status, await response.text()
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            detail = str(error) or type(error).__name__
            raise CommandError(f"cannot reach the Sluiceway API at {self.url}: {detail}") from error
        decoded = _decode(text)
        if status >= 400:
            raise CommandError(
                f"{_message(decoded, text)} (HTTP {status} from {method} {address})", exit_code_of(status), decoded
            )
        return decoded


def _listed(values: str | int | Sequence[str]) -> Sequence[str | int]:
    return [values] if isinstance(values, str | int) else list(values)


def _decode(text: str) -> object:
    try:
        decoded: object = json.loads(text)
    except ValueError:
        return None
    return decoded


def _message(body: object, text: str) -> str:
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail") or body.get("error")
        if message:
            return message if isinstance(message, str) else json.dumps(message)
    return text.strip().splitlines()[0][:200] if text.strip() else "no body"


async def get_resource(plural: str, namespace: str, name: str, kubeconfig: str | None) -> dict[str, Any] | None:
    """One custom object from the Kubernetes API (None when not found)."""
    from sluiceway.kubeapi.client import KubeError

    kube = _kube_client(kubeconfig)
    try:
        return await kube.get(plural, namespace, name)
    except KubeError as error:
        raise CommandError(
            f"cannot read {plural}/{name} in namespace {namespace}: {error.message} "
            f"(HTTP {error.status} from the Kubernetes API)",
            exit_code_of(error.status) if error.status else ExitCode.UNAVAILABLE,
        ) from error
    finally:
        kube.close()


def _kube_client(kubeconfig: str | None) -> KubeClient:
    from sluiceway.kubeapi.client import KubeClient, KubeConfigError

    try:
        return KubeClient.from_kubeconfig(kubeconfig)
    except KubeConfigError as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise CommandError(f"cannot load the kubeconfig ({where}): {error}", ExitCode.USAGE) from error
