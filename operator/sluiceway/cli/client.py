"""The IO behind the `sluiceway` user commands: GETs against the Sluiceway
API (standard library + aiohttp) and reads from the Kubernetes API (through
`sluiceway.kubeapi`). Every failure becomes a `CommandError` with one line
that names what went wrong."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp

if TYPE_CHECKING:
    from sluiceway.kubeapi.client import KubeClient

DEFAULT_URL = "http://127.0.0.1:8080"


class CommandError(Exception):
    """A failure to report on stderr, exiting 2."""


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
                raise CommandError(f"cannot read the token file {self.token_file}: {error.strerror}") from error
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.api_key:
            return {"X-API-Key": self.api_key}
        return {}


@dataclass(frozen=True)
class Api:
    url: str
    credentials: Credentials = Credentials()
    timeout: float = 10.0

    def address(self, *segments: str) -> str:
        return self.url.rstrip("/") + "/" + "/".join(quote(s, safe="") for s in segments)

    async def get(self, *segments: str) -> dict[str, Any]:
        """GET one JSON object; HTTP errors and unreachable servers raise CommandError."""
        address = self.address(*segments)
        headers = {"Accept": "application/json", **self.credentials.headers()}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
                async with session.get(address, headers=headers) as response:
                    status, text = response.status, await response.text()
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            detail = str(error) or type(error).__name__
            raise CommandError(f"cannot reach the Sluiceway API at {self.url}: {detail}") from error
        body = _decode(text)
        if status >= 400:
            raise CommandError(f"{_message(body, text)} (HTTP {status} from GET {address})")
        if not isinstance(body, dict):
            raise CommandError(f"GET {address} did not answer with a JSON object")
        return body


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


def kubeconfig_namespace(kubeconfig: str | None) -> str | None:
    """The namespace of the kubeconfig's current context, if any: best effort."""
    from sluiceway.kubeapi.client import kubeconfig_namespace as read

    return read(kubeconfig)


async def get_resource(plural: str, namespace: str, name: str, kubeconfig: str | None) -> dict[str, Any] | None:
    """One custom object from the Kubernetes API (None when not found)."""
    from sluiceway.kubeapi.client import KubeError

    kube = _kube_client(kubeconfig)
    try:
        return await kube.get(plural, namespace, name)
    except KubeError as error:
        raise CommandError(
            f"cannot read {plural}/{name} in namespace {namespace}: {error.message} "
            f"(HTTP {error.status} from the Kubernetes API)"
        ) from error
    finally:
        kube.close()


def _kube_client(kubeconfig: str | None) -> KubeClient:
    from sluiceway.kubeapi.client import KubeClient, KubeConfigError

    try:
        return KubeClient.from_kubeconfig(kubeconfig)
    except KubeConfigError as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise CommandError(f"cannot load the kubeconfig ({where}): {error}") from error
