"""Webhook: an endpoint third parties call, `POST /v1/ns/{namespace}/webhooks/{name}`,
verified by its own signature (not a Kubernetes token), whose calls complete
the WAIT_FOR_WEBHOOK tasks they match."""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field, model_validator

from sluiceway.model.common import EngineName, SecretKeyRef, Spec, Status

# The largest body the intake reads; a bigger one is refused (413) unread.
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
_HEADER = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"


class HmacScheme(StrEnum):
    """Where the signature travels and what it signs."""

    # X-Sluiceway-Timestamp: <unix seconds>, X-Sluiceway-Signature: sha256=<hex HMAC of "timestamp.body">,
    # what Sluiceway's own WEBHOOK task sends
    SLUICEWAY = "Sluiceway"
    GITHUB = "GitHub"  # X-Hub-Signature-256: sha256=<hex HMAC of the body>
    STRIPE = "Stripe"  # Stripe-Signature: t=<unix seconds>,v1=<hex HMAC of "t.body">[,v1=...]


class HmacVerification(Spec):
    """An HMAC-SHA256 signature over the body, with a shared secret."""

    secret_ref: SecretKeyRef = Field(description="The shared secret, in a Secret labelled sluiceway.dev/secret=true.")
    scheme: HmacScheme = Field(HmacScheme.SLUICEWAY, description="Sluiceway (default), GitHub or Stripe.")
    tolerance_seconds: int = Field(
        300,
        ge=1,
        le=86_400,
        description="Timestamped schemes (Sluiceway, Stripe): how far the signed timestamp may be from now, "
        "against replays. Default 300.",
    )


class TokenVerification(Spec):
    """A static token in a header, compared in constant time."""

    secret_ref: SecretKeyRef = Field(description="The token, in a Secret labelled sluiceway.dev/secret=true.")
    header: str = Field("X-Webhook-Token", pattern=_HEADER, description="The header carrying it.")


class WebhookSpec(Spec):
    """An endpoint third parties call to complete WAIT_FOR_WEBHOOK tasks, verified by its own signature."""

    name: EngineName | None = Field(
        None, description="The endpoint's name in its URL and in WAIT_FOR_WEBHOOK tasks. Defaults to metadata.name."
    )
    hmac: HmacVerification | None = Field(None, description="Verify an HMAC signature of the body.")
    token: TokenVerification | None = Field(None, description="Verify a static token in a header.")
    event: EngineName | None = Field(
        None,
        description="Publish every verified call as this event too, starting the runs of its Triggers "
        "(besides completing the WAIT_FOR_WEBHOOK tasks it matches).",
    )
    max_payload_bytes: int = Field(
        1024 * 1024, ge=1, le=MAX_PAYLOAD_BYTES, description="Largest body accepted (413 above). Default 1 MiB."
    )

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "has(self.hmac) != has(self.token)", "message": "set exactly one of hmac and token"}
            ]
        },
    )

    @model_validator(mode="after")
    def _one_verification(self) -> WebhookSpec:
        if (self.hmac is None) == (self.token is None):
            raise ValueError("set exactly one of hmac and token")
        return self


class WebhookStatus(Status):
    webhook_name: str | None = None
    path: str | None = Field(None, description="Where to send calls: POST <the operator's API>/<path>.")
