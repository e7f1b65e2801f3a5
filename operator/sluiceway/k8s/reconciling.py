"""What every reconciler shares: the context kopf hands them (as the memo),
the Ready condition, parsing a spec with the models the CRD was generated
from, database outages as retries, and registration from a table.

Handlers stay thin: everything they decide is in the store or the models. They
never write `spec`; the only metadata they touch is kopf's own bookkeeping and
the finalizer, so a GitOps tool re-applying the same manifest sees no change.
Each handler is a module-level function taking kopf's keyword arguments, so a
test calls it directly with a body and a `kopf.Patch`."""

from __future__ import annotations

import asyncio
import datetime
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf
from pydantic import ValidationError

from sluiceway.controls import advice
from sluiceway.k8s.conditions import not_ready, not_stalled, ready, stalled, with_condition
from sluiceway.k8s.events import EventRecorder
from sluiceway.k8s.validation import describe
from sluiceway.kubeapi.client import KubeClient
from sluiceway.model import GROUP, VERSION
from sluiceway.model.common import Condition, ConditionStatus, Spec, kube_time
from sluiceway.model.resources import ResourceKind
from sluiceway.observability import metrics
from sluiceway.plane import Plane
from sluiceway.store import definitions
from sluiceway.store.database import Pool
from sluiceway.store.errors import StoreUnavailable

S = TypeVar("S", bound=Spec)
T = TypeVar("T")

STATUS_INTERVAL = 5.0  # seconds between two status reports of an object (SLUICEWAY_STATUS_INTERVAL)

# A kopf handler: called with kopf's keyword arguments (body, spec, meta,
# status, name, namespace, uid, patch, memo, logger, ...).
Handler = Callable[..., Awaitable[None]]


class SharedReads:
    """One read per (what, namespace) per status interval, shared by the
    timers of every object in the namespace: a status report that sums a
    table for all of them (every Trigger's events) runs its query once, not
    once per object. A failed read is not kept: the next timer reads again."""

    def __init__(self) -> None:
        self._reads: dict[tuple[str, str], tuple[float, asyncio.Future[Any]]] = {}

    async def read(self, what: str, namespace: str, max_age: float, fetch: Callable[[], Awaitable[T]]) -> T:
        now = asyncio.get_running_loop().time()
        key = (what, namespace)
        kept = self._reads.get(key)
        if kept is None or now - kept[0] >= max_age or _failed(kept[1]):
            kept = (now, asyncio.ensure_future(fetch()))
            self._reads[key] = kept
        # Shielded: a timer cancelled while it waits does not cancel the read the others wait for.
        value: T = await asyncio.shield(kept[1])
        return value


def _failed(read: asyncio.Future[Any]) -> bool:
    return read.done() and (read.cancelled() or read.exception() is not None)


@dataclass
class Context:
    """What the handlers need, passed to kopf as the operator's memo (`memo.context`)."""

    plane: Plane  # what WorkflowRuns do to runs goes through its commands
    clock: Callable[[], datetime.datetime]
    events: EventRecorder | None = None
    kube: KubeClient | None = None  # the operator's own client: deletes WorkflowRuns past their TTL
    status_interval: float = STATUS_INTERVAL
    shared: SharedReads = field(default_factory=SharedReads)

    @property
    def pool(self) -> Pool:
        """The plane's pool, for the definitions the handlers store."""
        return self.plane.pool

    def now(self) -> str:
        return kube_time(self.clock()) or ""


def context_of(memo: kopf.Memo) -> Context:
    context: Context = memo.context
    return context


def set_ready(patch: kopf.Patch, body: kopf.Body, context: Context, ok: bool, reason: str, message: str) -> None:
    """Write the Ready and Stalled conditions and `observedGeneration`; post an
    Event when the condition changes (or a refusal changes its reason). Every
    refusal here waits for a change to this object or another (an invalid spec,
    a name conflict, a quota), so it is Stalled: kstatus's Failed."""
    meta, status = body["metadata"], body.get("status", {})
    generation = int(meta.get("generation", 0))
    condition = (ready if ok else not_ready)(reason, message, generation)
    before = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    if context.events is not None and (
        before is None or before.get("status") != condition.status.value or (not ok and before.get("reason") != reason)
    ):
        context.events.record(
            body["kind"],
            meta["namespace"],
            meta["name"],
            meta.get("uid", ""),
            not ok,
            "Ready" if ok else reason,
            message,
        )
    patch.status["observedGeneration"] = generation
    conditions = with_condition(status.get("conditions"), condition, context.now())
    stall = (not_stalled if ok else stalled)(reason, message, generation)
    patch.status["conditions"] = with_condition(conditions, stall, context.now())


def report_claim(
    patch: kopf.Patch, body: kopf.Body, context: Context, claim: definitions.Claim, what: str, ready_message: str
) -> None:
    """Ready when this object owns its engine name; NameConflict naming the owner when another does."""
    if claim.is_ours(body["metadata"]["name"]):
        set_ready(patch, body, context, True, "Stored", f"{what} {ready_message}")
    else:
        set_ready(
            patch, body, context, False, "NameConflict", f"{what} is already defined by {body['kind']} {claim.owner}"
        )


def parse(model: type[S], body: kopf.Body, patch: kopf.Patch, context: Context) -> S | None:
    """The parsed spec, or None after reporting why it is invalid."""
    try:
        return model.model_validate(dict(body.get("spec", {})))
    except ValidationError as error:
        set_ready(patch, body, context, False, "InvalidSpec", describe(error))
        return None


POLICY_WARNINGS = "PolicyWarnings"


def report_advice(
    patch: kopf.Patch, body: kopf.Body, context: Context, kind: advice.Kind, spec: advice.AdvisedSpec
) -> None:
    """The policy advisor's findings on this object alone (`sluiceway lint`
    relates it to others offline) as the `PolicyWarnings` condition, True with
    the findings or False with NoFindings; one Warning Event when they change,
    not on every resync. Call after `set_ready`, which rewrites the conditions."""
    meta = body["metadata"]
    target = advice.Declared(kind, meta["name"], meta.get("namespace"), spec)
    findings = advice.advise([target], semaphores_known=False)
    message = "; ".join(f"{f.field}: {f.message}" for f in findings)
    condition = Condition(
        type=POLICY_WARNINGS,
        status=ConditionStatus.TRUE if findings else ConditionStatus.FALSE,
        reason="Findings" if findings else "NoFindings",
        message=message or "the policy advisor found nothing to warn about",
        observed_generation=int(meta.get("generation", 0)),
    )
    previous = patch.status.get("conditions") or body.get("status", {}).get("conditions")
    before = next((c for c in previous or [] if c.get("type") == POLICY_WARNINGS), None)
    if findings and context.events is not None and (before is None or before.get("message") != condition.message):
        context.events.record(
            body["kind"], meta["namespace"], meta["name"], meta.get("uid", ""), True, "PolicyWarning", message
        )
    patch.status["conditions"] = with_condition(previous, condition, context.now())


async def retrying_outages(action: Awaitable[None]) -> None:
    """Turn a database outage into a retry instead of a failed handler."""
    try:
        await action
    except (OSError, StoreUnavailable) as error:
        raise kopf.TemporaryError(f"PostgreSQL unavailable: {error}", delay=5) from error


def changed(patch: kopf.Patch, status: Mapping[str, Any], values: dict[str, Any]) -> None:
    """Write only what changed: a re-applied manifest must not cause status churn."""
    for key, value in values.items():
        if status.get(key) != value:
            patch.status[key] = value


# -- registration ----------------------------------------------------------------


@dataclass(frozen=True)
class Lifecycle:
    """The handlers of one kind: `apply` on resume and create (and on spec
    changes unless the spec is immutable), `delete` when it goes."""

    kind: ResourceKind
    apply: Handler
    delete: Handler
    spec_changes: bool = True  # False: the CRD refuses spec changes (a WorkflowRun starts one run, once)


def counted(kind: ResourceKind, fn: Handler) -> Handler:
    """`fn`, counting each exception that leaves it in sluiceway_reconcile_errors_total
    (kopf retries it). The name is kept: kopf identifies handlers by it."""

    @functools.wraps(fn)
    async def handler(**kwargs: Any) -> Any:
        try:
            return await fn(**kwargs)
        except Exception:
            metrics.RECONCILE_ERRORS.labels(kind.kind).inc()
            raise

    return handler


def register_lifecycles(registry: kopf.OperatorRegistry, lifecycles: Iterable[Lifecycle]) -> None:
    for lifecycle in lifecycles:
        reconciles(registry, lifecycle.kind, lifecycle.apply, spec_changes=lifecycle.spec_changes)
        on_delete = kopf.on.delete(GROUP, VERSION, lifecycle.kind.plural, registry=registry)
        on_delete(counted(lifecycle.kind, lifecycle.delete))


def reconciles(registry: kopf.OperatorRegistry, kind: ResourceKind, fn: Handler, *, spec_changes: bool = True) -> None:
    """Register `fn` for resume and create of `kind`, and for its spec changes."""
    fn = counted(kind, fn)
    for on in (kopf.on.resume, kopf.on.create):
        on(GROUP, VERSION, kind.plural, registry=registry)(fn)
    if spec_changes:
        kopf.on.update(GROUP, VERSION, kind.plural, field="spec", registry=registry)(fn)


def every(
    registry: kopf.OperatorRegistry,
    kind: ResourceKind,
    fn: Handler,
    *,
    interval: float,
    initial_delay: float,
    field: str | None = None,
    when: Callable[..., bool] | None = None,
) -> None:
    """Register `fn` as a timer on every object of `kind` (with `field` set, or for which `when` holds, if given)."""
    fn = counted(kind, fn)
    kopf.timer(
        GROUP,
        VERSION,
        kind.plural,
        interval=interval,
        initial_delay=initial_delay,
        field=field,
        when=when,
        registry=registry,
    )(fn)
