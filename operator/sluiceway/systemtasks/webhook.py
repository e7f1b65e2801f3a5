"""WEBHOOK tasks: an outgoing callback, signed, run by the operator.

Input:

    signing: {secretRef: {name, key}}       # on the workflow task
    inputParameters:
      url: ${workflow.input.callbackUrl}    # http(s)
      body: {...}                           # JSON, sent as is
      headers: {}                           # extra headers
      method: POST                          # POST (default), PUT or PATCH

Each call carries `X-Sluiceway-Timestamp` (Unix seconds) and
`X-Sluiceway-Signature: sha256=<hex HMAC-SHA256 of "timestamp.body">` made
with the Secret's key (a receiver checks both, and refuses an old timestamp),
and `X-Sluiceway-Delivery`, the same for every attempt of the task in its run,
to deduplicate retries. It is classified like HTTP (other 4xx terminal; 408,
429, 5xx, timeouts and connection errors retryable, Retry-After honoured) and
goes through the same per-host circuit breaker as HTTP and HTTP_POLL: a host
known to be down is known to all three.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from sluiceway.controls.breaker import Breakers
from sluiceway.controls.webhooks import signed_headers
from sluiceway.kubeapi.secrets import SecretSource, SecretUnavailable
from sluiceway.model.common import SecretKeyRef
from sluiceway.model.workflow import TaskType
from sluiceway.plane.dispatch import Lease
from sluiceway.systemtasks.egress import Egress
from sluiceway.systemtasks.http import HttpRequest, HttpTasks

DELIVERY_HEADER = "X-Sluiceway-Delivery"
_METHODS = ("POST", "PUT", "PATCH")


class WebhookTasks(HttpTasks):
    types = frozenset({TaskType.WEBHOOK})
    holds_slot = True

    def __init__(
        self,
        breakers: Breakers,
        secrets: SecretSource | None,
        allowed_hosts: tuple[str, ...] = (),
        clock: Callable[[], float] = time.time,
        egress: Egress | None = None,
    ) -> None:
        super().__init__(breakers, allowed_hosts, egress)
        self.secrets = secrets
        self.clock = clock

    async def request_of(self, lease: Lease) -> HttpRequest:
        inputs = lease.input
        signing = inputs.get("signing")
        if not isinstance(signing, dict) or not isinstance(signing.get("secretRef"), dict):
            raise ValueError("signing.secretRef is required")
        ref = SecretKeyRef.model_validate(signing["secretRef"])
        method = str(inputs.get("method", "POST")).upper()
        if method not in _METHODS:
            raise ValueError(f"inputParameters.method must be POST, PUT or PATCH, not {method[:16]!r}")
        headers = inputs.get("headers") or {}
        if not isinstance(headers, dict):
            raise ValueError("inputParameters.headers must be an object")
        body = orjson.dumps(inputs.get("body"))
        if self.secrets is None:
            raise ValueError("this operator reads no Secrets (no Kubernetes API): cannot sign")
        try:
            secret = await self.secrets.value(lease.namespace, ref)
        except SecretUnavailable as error:
            raise ValueError(f"signing.secretRef: {error}") from error
        signed: dict[str, Any] = {
            **{str(k): str(v) for k, v in headers.items()},
            "Content-Type": "application/json",
            DELIVERY_HEADER: f"{lease.execution_id}/{lease.ref}",
            **signed_headers(secret, int(self.clock()), body),
        }
        return HttpRequest.from_input(
            {
                "http_request": {
                    "uri": inputs.get("url"),
                    "method": method,
                    "headers": signed,
                    "body": body.decode(),
                    "connectionTimeOut": inputs.get("connectionTimeOut", 10_000),
                    "readTimeOut": inputs.get("readTimeOut", 30_000),
                }
            }
        )
