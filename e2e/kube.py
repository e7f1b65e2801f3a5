"""A small kubectl driver for the end-to-end tests: they act as a user would,
through kubectl, against a real API server."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


@dataclass
class Kube:
    kubectl_path: str
    kubeconfig: Path

    def run(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            text=True,
            capture_output=True,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def apply(
        self, manifest: dict[str, Any] | str, namespace: str, *, check: bool = True, server_side: bool = False
    ) -> subprocess.CompletedProcess[str]:
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        extra = ["--server-side", "--field-manager=e2e"] if server_side else []
        return self.run("apply", "-n", namespace, *extra, "-f", "-", input=text, check=check)

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        result = self.run("get", kind, name, "-n", namespace, "-o", "json", check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr:
                return None
            raise AssertionError(result.stderr)
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    def delete(self, kind: str, name: str, namespace: str, *, wait: bool = True) -> None:
        self.run(
            "delete", kind, name, "-n", namespace, "--ignore-not-found", f"--wait={str(wait).lower()}", "--timeout=60s"
        )


def eventually(
    probe: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.2, what: str = "the condition"
) -> T:
    """Poll until `probe` returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def condition(obj: dict[str, Any] | None, type_: str = "Ready") -> dict[str, Any] | None:
    if not obj:
        return None
    for item in obj.get("status", {}).get("conditions", []):
        if item.get("type") == type_:
            found: dict[str, Any] = item
            return found
    return None
