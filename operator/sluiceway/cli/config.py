"""Where a command sends its requests, as whom, and in which namespace: from
flags, else the environment, else the kubeconfig context, like kubectl.

- the API: `--server`, else SLUICEWAY_URL, else the context's
  `sluiceway.dev/server` extension, else http://127.0.0.1:8080;
- the namespace: `-n`, else SLUICEWAY_NAMESPACE, else the context's, else default;
- the identity: `--token`, `--token-file` or `--api-key`, else SLUICEWAY_TOKEN,
  SLUICEWAY_TOKEN_FILE or SLUICEWAY_API_KEY, else the context user's token,
  which is sent only to the server that same context names.

`sluiceway up` writes the extension into its kubeconfig, so after
`export KUBECONFIG=.run/kubeconfig` every command finds the local API. On a
cluster, add it once: `sluiceway config set-server https://sluiceway.example.com`.

The kubeconfig is read as YAML (several files in $KUBECONFIG merge, the first
naming a key wins), without running exec credential plugins.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sluiceway.cli.client import DEFAULT_URL, Api, CommandError, Credentials, ExitCode

EXTENSION = "sluiceway.dev/server"


@dataclass(frozen=True)
class Flags:
    server: str | None = None
    namespace: str | None = None
    token: str | None = None
    token_file: str | None = None
    api_key: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    timeout: float = 10.0


@dataclass(frozen=True)
class KubeContext:
    namespace: str | None = None
    server: str | None = None  # the Sluiceway API the context names
    token: str | None = None
    token_file: str | None = None


@dataclass(frozen=True)
class Connection:
    api: Api
    namespace: str
    kubeconfig: str | None


def _files(kubeconfig: str | None, env: Mapping[str, str]) -> list[Path]:
    if kubeconfig:
        return [Path(kubeconfig)]
    if env.get("KUBECONFIG"):
        return [Path(p) for p in env["KUBECONFIG"].split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def _named(documents: list[dict[str, Any]], section: str, name: str) -> dict[str, Any]:
    for document in documents:
        for entry in document.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                found = entry.get(section[:-1]) or {}
                return found if isinstance(found, dict) else {}
    return {}


def read_context(kubeconfig: str | None, context: str | None, env: Mapping[str, str]) -> KubeContext:
    """The parts of a kubeconfig context a command uses; empty when there is
    none (a missing kubeconfig is not an error: flags may say everything)."""
    documents: list[dict[str, Any]] = []
    for path in _files(kubeconfig, env):
        try:
            loaded = yaml.safe_load(path.read_text())
        except OSError:
            if kubeconfig or context:
                raise CommandError(f"cannot read the kubeconfig {path}", ExitCode.USAGE) from None
            continue
        except yaml.YAMLError as error:
            raise CommandError(f"the kubeconfig {path} is not YAML: {error}", ExitCode.USAGE) from None
        if isinstance(loaded, dict):
            documents.append(loaded)
    name = context or next((d.get("current-context") for d in documents if d.get("current-context")), None)
    if not name:
        return KubeContext()
    found = _named(documents, "contexts", str(name))
    if context and not found:
        raise CommandError(f"no context {context} in the kubeconfig", ExitCode.USAGE)
    server = None
    for extension in found.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == EXTENSION:
            value = extension.get("extension") or {}
            server = value.get("server") if isinstance(value, dict) else None
    user = _named(documents, "users", str(found.get("user", "")))
    return KubeContext(
        namespace=found.get("namespace") or None,
        server=str(server) if server else None,
        token=user.get("token") or None,
        token_file=user.get("tokenFile") or None,
    )


def resolve(flags: Flags, env: Mapping[str, str] | None = None) -> Connection:
    """The API, namespace and identity for a command."""
    env = os.environ if env is None else env
    context = KubeContext()
    if not (flags.server or env.get("SLUICEWAY_URL")) or not (flags.namespace or env.get("SLUICEWAY_NAMESPACE")):
        context = read_context(flags.kubeconfig, flags.context, env)
    elif flags.context:
        context = read_context(flags.kubeconfig, flags.context, env)
    url = flags.server or env.get("SLUICEWAY_URL") or context.server or DEFAULT_URL
    namespace = flags.namespace or env.get("SLUICEWAY_NAMESPACE") or context.namespace or "default"
    # Flags win over the environment as a whole: `--token` is not overridden by
    # a SLUICEWAY_TOKEN_FILE left in the shell. A kubeconfig's token is only
    # sent to the server that kubeconfig names.
    if flags.token or flags.token_file or flags.api_key:
        credentials = Credentials(flags.token, flags.token_file, flags.api_key)
    elif env.get("SLUICEWAY_TOKEN") or env.get("SLUICEWAY_TOKEN_FILE") or env.get("SLUICEWAY_API_KEY"):
        credentials = Credentials(
            env.get("SLUICEWAY_TOKEN"), env.get("SLUICEWAY_TOKEN_FILE"), env.get("SLUICEWAY_API_KEY")
        )
    elif context.server is not None and url == context.server:
        credentials = Credentials(context.token, context.token_file)
    else:
        credentials = Credentials()
    return Connection(Api(url, credentials, flags.timeout), namespace, flags.kubeconfig)


def write_server(path: Path, url: str, context: str | None = None) -> str:
    """Name the Sluiceway API in a kubeconfig context (the current one unless
    given); return the context's name. Other contents are kept as they are."""
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except OSError as error:
        raise CommandError(f"cannot read the kubeconfig {path}: {error.strerror}", ExitCode.USAGE) from None
    name = context or document.get("current-context")
    entry = next((c for c in document.get("contexts") or [] if isinstance(c, dict) and c.get("name") == name), None)
    if not name or entry is None:
        raise CommandError(f"no context {name or '(current)'} in {path}", ExitCode.USAGE)
    body = entry.setdefault("context", {})
    extensions = [e for e in body.get("extensions") or [] if not (isinstance(e, dict) and e.get("name") == EXTENSION)]
    body["extensions"] = [*extensions, {"name": EXTENSION, "extension": {"server": url}}]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return str(name)
