"""Operator settings, read once from the environment (SLUICEWAY_*). A bad
value is refused at start with a message naming the variable."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sluiceway.controls.breaker import BreakerConfig
from sluiceway.controls.durations import parse_duration
from sluiceway.controls.payloads import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_REQUEST_BYTES
from sluiceway.controls.policy import DEFAULT_MAX_RETRY_BACKOFF_SECONDS, OperatorDefaults
from sluiceway.controls.ratelimits import RateLimits
from sluiceway.model.common import DNS_LABEL_PATTERN, Spec
from sluiceway.model.quota import MAX_PAYLOAD_LIMIT, egress_problem
from sluiceway.model.taskdefinition import RetryLogic
from sluiceway.model.workflow import MAX_CHAIN_TIMEOUT_SECONDS
from sluiceway.worker import eventloop
from sluiceway.worker.eventloop import EventLoop


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


class DefaultRetryPolicy(Spec):
    """SLUICEWAY_DEFAULT_RETRY_POLICY: the fleet-wide floor for task types that set none."""

    retry_count: int | None = Field(None, ge=0, le=100)
    retry_logic: RetryLogic | None = None
    retry_delay_seconds: float | None = Field(None, ge=0)
    backoff_scale_factor: float | None = Field(None, ge=1)
    max_retry_delay_seconds: float | None = Field(None, ge=0)
    jitter: float | None = Field(None, ge=0, le=1)
    retry_budget: float | None = Field(None, ge=0, le=1)


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    database_url: str = Field(min_length=1)
    namespaces: tuple[str, ...] = ()
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"  # SLUICEWAY_LOG_FORMAT; text for reading in a terminal
    api_host: str = "0.0.0.0"
    api_port: int = Field(8080, ge=0, le=65535)
    kubernetes: bool = True
    auth: Literal["kubernetes", "none"] = "none"
    api_keys_namespace: str | None = Field(None, pattern=DNS_LABEL_PATTERN)
    api_keys_allow_writes: bool = False
    leader_election: bool = True
    api_url: str | None = None  # what worker pods are told to call
    worker_image: str | None = None  # the image of spec.workers that names none
    leader_election_namespace: str = "default"
    identity: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    deciders: int = Field(2, ge=1, le=32)
    # Starts and results decide the runs they queue in their own transaction
    # (those whose decision is theirs alone). Off by default: it lowers idle
    # latency and raises peak throughput, but fragments moderate load into many
    # small transactions (docs/performance.md, "Deciding inline").
    decide_inline: bool = False
    # The operator's event loop: uvloop (where installed), or asyncio's own (sluiceway.worker.eventloop).
    event_loop: EventLoop = "uvloop"
    pool_size: int = Field(20, ge=2, le=500)
    default_retry_policy: DefaultRetryPolicy = Field(default_factory=DefaultRetryPolicy)
    default_start_to_close_timeout: int | None = Field(None, ge=0)
    max_retry_backoff: float = Field(DEFAULT_MAX_RETRY_BACKOFF_SECONDS, gt=0)
    # Caps every Workflow's chainTimeoutSeconds and is the chain deadline of those that set none.
    max_chain_timeout: int | None = Field(None, ge=1, le=MAX_CHAIN_TIMEOUT_SECONDS)
    circuit_breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    http_allowed_hosts: tuple[str, ...] = ()
    http_concurrency: int = Field(32, ge=1, le=1024)
    # Seconds between two status reports of an object, and between two checks
    # (status, autoscaling) of a worker Deployment. Short in tests.
    status_interval: float = Field(5.0, gt=0, le=3600)
    autoscaling_interval: float = Field(5.0, gt=0, le=3600)
    # CONTAINER tasks (docs/tasks/container.md): finished pods kept per
    # namespace for debugging (0 deletes each when its attempt ends), and how
    # often pods nobody here watches are looked for (to fence or adopt).
    container_keep_pods: int = Field(0, ge=0, le=1000)
    container_sweep_interval: float = Field(15.0, gt=0, le=3600)
    # Finished runs are deleted this long after they end, unless their workflow
    # or WorkflowRun says otherwise; 0 keeps them. Durations: 30d, 12h, 3600.
    retention: int = Field(30 * 86_400, ge=0, le=10 * 31_536_000)
    idempotency_window: int = Field(86_400, ge=1, le=31_536_000)
    # Published events (docs/triggers.md) are kept this long, matched or not, then deleted.
    event_retention: int = Field(7 * 86_400, ge=60, le=31_536_000)
    task_log_bytes: int = Field(256 * 1024, ge=1024, le=64 * 1024 * 1024)
    # A result's freed slot of a capped or semaphore-gated type goes to the
    # type's next task without the gate's locks (off: under them, as before).
    gate_handover: bool = True
    # A waiting poll of an ungated queue is leased its tasks by the decider
    # pass that schedules them (off: it wakes and leases them itself).
    match_polls: bool = True
    purge_batch: int = Field(500, ge=1, le=100_000)
    purge_interval: float = Field(10.0, gt=0, le=3600)
    purge_share: float = Field(0.25, gt=0, le=1)  # of the time, at most, while a backlog drains
    # Set: the purger archives each run's history to this directory before it
    # deletes it, and reads back archived runs by id (store.archives).
    archive_dir: str | None = None
    # Tenancy: one JSON value a tenant sends (input, output, message, webhook
    # body; a Quota may lower it) and one request body.
    max_payload_bytes: int = Field(DEFAULT_MAX_PAYLOAD_BYTES, ge=1024, le=MAX_PAYLOAD_LIMIT)
    max_request_bytes: int = Field(DEFAULT_MAX_REQUEST_BYTES, ge=4096, le=1024 * 1024 * 1024)
    # Callers waiting at once, in this process, for runs to end (a start or a
    # read with `wait`); beyond it a wait is refused with 429 and Retry-After.
    max_run_waiters: int = Field(10_000, ge=1, le=1_000_000)
    # The egress policy of system tasks: the cluster's ranges they may not
    # reach, the operator's own pod address, and entries allowed to every namespace.
    service_cidrs: tuple[str, ...] = ()
    pod_cidrs: tuple[str, ...] = ()
    pod_ip: str | None = None
    egress_allowed: tuple[str, ...] = ()
    # Unset: the defaults with authentication on, none without (no identity to key on).
    api_rate_limits: RateLimits | None = None

    @field_validator("retention", "idempotency_window", "event_retention", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return int(parse_duration(value)) if isinstance(value, str) else value

    @field_validator("service_cidrs", "pod_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            ipaddress.ip_network(entry, strict=False)  # ValueError names the entry
        return value

    @field_validator("egress_allowed")
    @classmethod
    def _destinations(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            problem = egress_problem(entry)
            if problem:
                raise ValueError(f"{entry!r}: {problem}")
        return value

    @model_validator(mode="after")
    def _request_holds_a_payload(self) -> Settings:
        if self.max_request_bytes < self.max_payload_bytes:
            raise ValueError(
                "SLUICEWAY_MAX_REQUEST_BYTES must be at least SLUICEWAY_MAX_PAYLOAD_BYTES: "
                "a request must be able to carry one payload"
            )
        return self

    @model_validator(mode="after")
    def _auth_needs_kubernetes(self) -> Settings:
        if self.auth == "kubernetes" and not self.kubernetes:
            raise ValueError(
                "SLUICEWAY_AUTH=kubernetes checks identities with the Kubernetes API: "
                "it cannot be combined with SLUICEWAY_KUBERNETES=false"
            )
        return self

    def rate_limits(self) -> RateLimits:
        if self.api_rate_limits is not None:
            return self.api_rate_limits
        return RateLimits() if self.auth == "kubernetes" else RateLimits.off()

    def operator_defaults(self) -> OperatorDefaults:
        policy = self.default_retry_policy
        return OperatorDefaults(
            retry_count=policy.retry_count,
            retry_logic=policy.retry_logic,
            retry_delay_seconds=policy.retry_delay_seconds,
            backoff_scale_factor=policy.backoff_scale_factor,
            max_retry_delay_seconds=policy.max_retry_delay_seconds,
            jitter=policy.jitter,
            retry_budget=policy.retry_budget,
            start_to_close_timeout=self.default_start_to_close_timeout,
            max_retry_backoff_seconds=self.max_retry_backoff,
            max_chain_timeout_seconds=self.max_chain_timeout,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        if "SLUICEWAY_DATABASE_URL" not in env:
            raise SettingsError("SLUICEWAY_DATABASE_URL is required: a PostgreSQL 14+ DSN")
        raw: dict[str, Any] = {"database_url": env["SLUICEWAY_DATABASE_URL"]}
        if env.get("SLUICEWAY_NAMESPACES"):
            raw["namespaces"] = tuple(n.strip() for n in env["SLUICEWAY_NAMESPACES"].split(",") if n.strip())
        if env.get("SLUICEWAY_LOG_LEVEL"):
            raw["log_level"] = env["SLUICEWAY_LOG_LEVEL"].upper()
        if env.get("SLUICEWAY_LOG_FORMAT"):
            raw["log_format"] = env["SLUICEWAY_LOG_FORMAT"].lower()
        if env.get("SLUICEWAY_API_ADDRESS"):
            host, _, port = env["SLUICEWAY_API_ADDRESS"].rpartition(":")
            raw["api_host"], raw["api_port"] = host or "0.0.0.0", port
        for variable, key in (
            ("SLUICEWAY_API_URL", "api_url"),
            ("SLUICEWAY_WORKER_IMAGE", "worker_image"),
            ("SLUICEWAY_ARCHIVE_DIR", "archive_dir"),
        ):
            if env.get(variable):
                raw[key] = env[variable]
        if env.get("SLUICEWAY_LEADER_ELECTION"):
            raw["leader_election"] = env["SLUICEWAY_LEADER_ELECTION"].lower() not in ("0", "false", "no", "off")
        if env.get("SLUICEWAY_LEADER_ELECTION_NAMESPACE"):
            raw["leader_election_namespace"] = env["SLUICEWAY_LEADER_ELECTION_NAMESPACE"]
        if env.get("SLUICEWAY_POD_NAME"):
            raw["identity"] = env["SLUICEWAY_POD_NAME"]
        if env.get("SLUICEWAY_AUTH"):
            raw["auth"] = env["SLUICEWAY_AUTH"].lower()
        if env.get("SLUICEWAY_API_KEYS_NAMESPACE"):
            raw["api_keys_namespace"] = env["SLUICEWAY_API_KEYS_NAMESPACE"].strip()
        if env.get("SLUICEWAY_API_KEYS_ALLOW_WRITES"):
            raw["api_keys_allow_writes"] = env["SLUICEWAY_API_KEYS_ALLOW_WRITES"].lower() not in (
                "0",
                "false",
                "no",
                "off",
            )
        if env.get("SLUICEWAY_GATE_HANDOVER"):
            raw["gate_handover"] = env["SLUICEWAY_GATE_HANDOVER"].lower() not in ("0", "false", "no", "off")
        if env.get("SLUICEWAY_MATCH_POLLS"):
            raw["match_polls"] = env["SLUICEWAY_MATCH_POLLS"].lower() not in ("0", "false", "no", "off")
        if env.get("SLUICEWAY_DECIDE_INLINE"):
            raw["decide_inline"] = env["SLUICEWAY_DECIDE_INLINE"].lower() not in ("0", "false", "no", "off")
        if env.get("SLUICEWAY_EVENT_LOOP"):
            try:
                raw["event_loop"] = eventloop.chosen(env)  # the worker's parser: one spelling, one message
            except ValueError as error:
                raise SettingsError(str(error)) from error
        if env.get("SLUICEWAY_KUBERNETES"):
            raw["kubernetes"] = env["SLUICEWAY_KUBERNETES"].lower() not in ("0", "false", "no", "off")
        for variable, key in (
            ("SLUICEWAY_DECIDERS", "deciders"),
            ("SLUICEWAY_DB_POOL_SIZE", "pool_size"),
            ("SLUICEWAY_DEFAULT_START_TO_CLOSE_TIMEOUT", "default_start_to_close_timeout"),
            ("SLUICEWAY_MAX_RETRY_BACKOFF", "max_retry_backoff"),
            ("SLUICEWAY_STATUS_INTERVAL", "status_interval"),
            ("SLUICEWAY_AUTOSCALING_INTERVAL", "autoscaling_interval"),
            ("SLUICEWAY_CONTAINER_KEEP_PODS", "container_keep_pods"),
            ("SLUICEWAY_CONTAINER_SWEEP_INTERVAL", "container_sweep_interval"),
            ("SLUICEWAY_RETENTION", "retention"),
            ("SLUICEWAY_IDEMPOTENCY_WINDOW", "idempotency_window"),
            ("SLUICEWAY_EVENT_RETENTION", "event_retention"),
            ("SLUICEWAY_TASK_LOG_BYTES", "task_log_bytes"),
            ("SLUICEWAY_PURGE_BATCH", "purge_batch"),
            ("SLUICEWAY_PURGE_INTERVAL", "purge_interval"),
            ("SLUICEWAY_PURGE_SHARE", "purge_share"),
            ("SLUICEWAY_MAX_PAYLOAD_BYTES", "max_payload_bytes"),
            ("SLUICEWAY_MAX_REQUEST_BYTES", "max_request_bytes"),
            ("SLUICEWAY_MAX_RUN_WAITERS", "max_run_waiters"),
        ):
            if env.get(variable):
                raw[key] = env[variable]
        if env.get("SLUICEWAY_MAX_CHAIN_TIMEOUT"):
            try:
                raw["max_chain_timeout"] = int(parse_duration(env["SLUICEWAY_MAX_CHAIN_TIMEOUT"]))
            except ValueError as error:
                raise SettingsError(
                    f"SLUICEWAY_MAX_CHAIN_TIMEOUT: {error} (seconds, or a duration such as 30d)"
                ) from error
        if env.get("SLUICEWAY_CIRCUIT_BREAKER"):
            try:
                raw["circuit_breaker"] = BreakerConfig.parse(env["SLUICEWAY_CIRCUIT_BREAKER"])
            except ValueError as error:
                raise SettingsError(str(error)) from error
        if env.get("SLUICEWAY_API_RATE_LIMITS"):
            try:
                raw["api_rate_limits"] = RateLimits.parse(env["SLUICEWAY_API_RATE_LIMITS"])
            except ValueError as error:
                raise SettingsError(str(error)) from error
        if env.get("SLUICEWAY_HTTP_ALLOWED_HOSTS"):
            raw["http_allowed_hosts"] = tuple(
                h.strip() for h in env["SLUICEWAY_HTTP_ALLOWED_HOSTS"].split(",") if h.strip()
            )
        for variable, key in (
            ("SLUICEWAY_SERVICE_CIDRS", "service_cidrs"),
            ("SLUICEWAY_POD_CIDRS", "pod_cidrs"),
            ("SLUICEWAY_EGRESS_ALLOWED", "egress_allowed"),
        ):
            if env.get(variable):
                raw[key] = tuple(e.strip() for e in env[variable].split(",") if e.strip())
        if env.get("SLUICEWAY_POD_IP"):
            raw["pod_ip"] = env["SLUICEWAY_POD_IP"].strip()
        if env.get("SLUICEWAY_HTTP_CONCURRENCY"):
            raw["http_concurrency"] = env["SLUICEWAY_HTTP_CONCURRENCY"]
        if env.get("SLUICEWAY_DEFAULT_RETRY_POLICY"):
            try:
                raw["default_retry_policy"] = DefaultRetryPolicy.model_validate(
                    json.loads(env["SLUICEWAY_DEFAULT_RETRY_POLICY"])
                )
            except (ValueError, ValidationError) as error:
                raise SettingsError(f"SLUICEWAY_DEFAULT_RETRY_POLICY: {error}") from error
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            if not first["loc"]:
                raise SettingsError(str(first["msg"]).removeprefix("Value error, ")) from error
            field = str(first["loc"][0])
            names = {"api_host": "API_ADDRESS", "api_port": "API_ADDRESS", "pool_size": "DB_POOL_SIZE"}
            raise SettingsError(f"SLUICEWAY_{names.get(field, field.upper())}: {first['msg']}") from error
