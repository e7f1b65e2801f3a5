"""`sluiceway operator`: one process with every part of the operator.

- the reconcilers (kopf) and the WorkflowRun status mirror,
- the decider, the sweeper and the scheduler (schedule fires),
- the HTTP API (worker protocol, runs, metrics).

Every part runs on every replica against the same PostgreSQL; transactions
and SKIP LOCKED keep them from doing anything twice. A part that ends while
nothing asked it to stop takes the process down with status 1, its traceback
in the log, so that Kubernetes restarts the replica rather than leaving it
half alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import kopf
import uvicorn

from sluiceway.api.app import create_app
from sluiceway.api.authenticator import Authenticator
from sluiceway.api.services import Services
from sluiceway.controls.breaker import Breakers
from sluiceway.controls.egress import EgressPolicy, denied_ranges
from sluiceway.k8s.events import EventRecorder
from sluiceway.k8s.handlers import register
from sluiceway.k8s.leadership import LeaderElector
from sluiceway.k8s.mirror import run_mirror
from sluiceway.k8s.reconciling import Context
from sluiceway.k8s.schedules import post_events
from sluiceway.k8s.worker_pods import DEFAULT_API_URL, WorkerPods
from sluiceway.kubeapi.client import Events, KubeClient, Leases
from sluiceway.kubeapi.pods import Pods
from sluiceway.kubeapi.secrets import KubeSecrets
from sluiceway.model.trigger import MAX_DEDUP_WINDOW_SECONDS
from sluiceway.observability import logs, metrics, tracing
from sluiceway.plane import Plane
from sluiceway.plane.audit import Announcer
from sluiceway.runtime import loops
from sluiceway.runtime.settings import Settings
from sluiceway.store.archives import Archive, ArchiveError
from sluiceway.store.database import Pool, open_pool
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.errors import StoreUnavailable
from sluiceway.store.matching import Offers
from sluiceway.store.notifications import Notifications
from sluiceway.store.policies import Policies
from sluiceway.store.schedules import PassReport
from sluiceway.store.tenancy import Tenants
from sluiceway.systemtasks.containers import ContainerTasks
from sluiceway.systemtasks.egress import Egress
from sluiceway.systemtasks.grpc import GrpcTasks
from sluiceway.systemtasks.http import HttpTasks
from sluiceway.systemtasks.runner import SystemTaskRunner
from sluiceway.systemtasks.webhook import WebhookTasks
from sluiceway.ui.web import install as install_ui
from sluiceway.worker import eventloop

log = logging.getLogger(__name__)

FINALIZER = "sluiceway.dev/finalizer"


def kopf_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.finalizer = FINALIZER
    # Keep kopf's bookkeeping in our own annotations, never in `status`, which
    # belongs to the schema and to the operator's reports.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="sluiceway.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="sluiceway.dev", key="last-handled-configuration"
    )
    # Events are for notable transitions only; kopf's per-handler chatter is not one.
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    return settings


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the supervisor owns signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def serve_until(self, stop: asyncio.Event) -> None:
        async def exit_on_stop() -> None:
            await stop.wait()
            self.should_exit = True

        watcher = asyncio.create_task(exit_on_stop())
        try:
            await self.serve()
        except SystemExit as error:
            # uvicorn exits the interpreter when it cannot listen; the supervisor
            # should see a dead part and stop the others in order instead.
            raise RuntimeError(f"the API server could not start (uvicorn exit status {error.code})") from error
        finally:
            watcher.cancel()


Part = tuple[str, Coroutine[Any, Any, None]]
_SHUTDOWN_SECONDS = 15


class PartDied(Exception):
    """A part of the operator ended while nothing asked it to stop."""


async def supervise(parts: list[Part], stop: asyncio.Event) -> None:
    """Run every part until `stop` is set, then stop them all. A part that ends
    first, by an exception or by returning, is logged with its traceback and
    ends the others: PartDied names it."""
    tasks: dict[asyncio.Task[Any], str] = {asyncio.create_task(c, name=name): name for name, c in parts}
    stopping: asyncio.Task[Any] = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait([*tasks, stopping], return_when=asyncio.FIRST_COMPLETED)
        died = [task for task in done if task in tasks]
        if died and not stop.is_set():
            for task in died:
                error = None if task.cancelled() else task.exception()
                if error is not None:
                    log.critical("the %s part of the operator died", tasks[task], exc_info=error)
                elif task.cancelled():
                    log.critical("the %s part of the operator was cancelled from within", tasks[task])
                else:
                    log.critical("the %s part of the operator ended on its own", tasks[task])
            raise PartDied(f"the {', '.join(tasks[t] for t in died)} part of the operator ended")
    finally:
        stop.set()
        stopping.cancel()
        await asyncio.wait(tasks, timeout=_SHUTDOWN_SECONDS)
        for task, name in tasks.items():
            if not task.done():
                log.warning("the %s part did not stop within %d s; cancelling it", name, _SHUTDOWN_SECONDS)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


async def _first_of(*events: asyncio.Event, then: asyncio.Event) -> None:
    waits = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        then.set()


def _own_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT stop the whole operator. kopf installs handlers of its
    own (in the main thread) that would stop only the reconcilers and keep the
    process, its API and its Lease alive until the kubelet's SIGKILL: every start
    of kopf is followed by this, so a terminating leader releases its Lease at once."""
    if threading.current_thread() is not threading.main_thread():
        return  # neither we nor kopf can handle signals there
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def _own_signals_when(ready: asyncio.Event, stop: asyncio.Event) -> None:
    await ready.wait()
    _own_signals(stop)


def _schedule_events(kube: KubeClient | None) -> Callable[[PassReport], None] | None:
    """Every replica fires schedules, so every replica posts their Events."""
    if kube is None:
        return None
    recorder = EventRecorder(Events(kube))
    return lambda report: post_events(recorder, report)


class _Memo(kopf.Memo):
    context: Context
    worker_pods: WorkerPods


# PostgreSQL not there yet (a database pod starting beside the operator's, a
# failover): worth waiting for. Anything else (a wrong password, say) is not.
_UNREACHABLE = (StoreUnavailable, TimeoutError)


async def _open_pool_when_reachable(settings: Settings, stop: asyncio.Event) -> Pool | None:
    """The pool, once PostgreSQL answers; None if stopped first. Waiting (not
    ready, not serving) beats crash-looping while a database comes up."""
    delay = 0.5
    while True:
        try:
            return await open_pool(settings.database_url, min_size=2, max_size=settings.pool_size)
        except _UNREACHABLE as error:
            log.warning("waiting for PostgreSQL: %s: %s", type(error).__name__, error)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
            return None
        delay = min(delay * 2, 5.0)


async def _addresses(host: str) -> list[str]:
    """The addresses `host` resolves to now; none when it does not resolve."""
    if not host:
        return []
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as error:
        log.warning("egress policy: cannot resolve %s (%s); its addresses are not denied by name", host, error)
        return []
    return sorted({str(info[4][0]).partition("%")[0] for info in infos})


async def egress_of(settings: Settings, kube: KubeClient | None, pool: Pool, tenants: Tenants) -> Egress:
    """The egress policy of system tasks: the configured cluster ranges, this
    operator's addresses and the API server's, denied; the operator's allowed
    entries, and each namespace's Quotas', allowed."""
    own = [*(await _addresses(socket.gethostname())), *([settings.pod_ip] if settings.pod_ip else [])]
    api_hosts = {kube.server_host if kube is not None else "", os.environ.get("KUBERNETES_SERVICE_HOST", "")}
    api = [address for host in sorted(api_hosts) for address in await _addresses(host)]
    denied = denied_ranges(settings.service_cidrs, settings.pod_cidrs, own, api)
    return Egress(EgressPolicy(denied, tuple(sorted(settings.egress_allowed))), pool, tenants)


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    # Before anything else: a bad archive directory stops the operator with its reason (main).
    archive = Archive.open(settings.archive_dir, settings.identity) if settings.archive_dir else None
    pool = await _open_pool_when_reachable(settings, stop)
    if pool is None:
        return  # stopped while waiting
    metrics.POOL.usage = pool.usage
    notifications = Notifications(settings.database_url)
    await notifications.start()
    kube: KubeClient | None = KubeClient.from_environment() if settings.kubernetes else None
    authenticator = (
        Authenticator(
            kube,
            keys_namespace=settings.api_keys_namespace,
            allow_writes=settings.api_keys_allow_writes,
        )
        if kube is not None and settings.auth == "kubernetes"
        else None
    )
    # One policy object for the process: every part reads task types' policies through it.
    policies = Policies(settings.operator_defaults())
    notifications.caches.append(policies)
    secrets = KubeSecrets(kube) if kube is not None else None  # webhook, GRPC and WEBHOOK secrets
    offers = Offers() if settings.match_polls else None
    # One decider config for the loops and the inline decisions of starts and results: the same hooks.
    config = DeciderConfig(
        offers=offers,
        policies=policies,
        retention_seconds=settings.retention,
        on_ready=notifications.wake_queues,
        on_decision=loops.observe_decision,
        on_quarantine=loops.count_quarantined,
    )
    plane = Plane(
        pool,
        notifications,
        policies=policies,
        announcer=Announcer(Events(kube) if kube is not None else None),
        idempotency_window=settings.idempotency_window,
        log_cap_bytes=settings.task_log_bytes,
        gate_handover=settings.gate_handover,
        offers=offers,
        max_payload_bytes=settings.max_payload_bytes,
        max_run_waiters=settings.max_run_waiters,
        decider=config if settings.decide_inline else None,
        archive=archive,
    )
    services = Services(
        plane,
        kube=kube,
        authenticate=settings.auth == "kubernetes",
        authenticator=authenticator,
        secrets=secrets,
        max_request_bytes=settings.max_request_bytes,
        rate_limits=settings.rate_limits(),
    )
    app = create_app(services)
    install_ui(app)  # the web UI at /ui: the same process, authentication and rules
    server = _Server(
        uvicorn.Config(
            app,
            host=settings.api_host,
            port=settings.api_port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=3,
            # http="auto": httptools' C parser (a dependency) rather than h11's pure Python one.
        )
    )
    egress = await egress_of(settings, kube, pool, plane.tenants)
    # HTTP, HTTP_POLL and WEBHOOK share the breakers by host; gRPC's are by service name.
    by_host = Breakers(settings.circuit_breaker)
    system_tasks = SystemTaskRunner(
        plane,
        # Every kind of system task this operator runs: a new system task type adds its own.
        [
            HttpTasks(by_host, settings.http_allowed_hosts, egress),
            WebhookTasks(by_host, secrets, settings.http_allowed_hosts, egress=egress),
            GrpcTasks(Breakers(settings.circuit_breaker), secrets, settings.http_allowed_hosts, egress),
            # Without a Kubernetes API there are no pods to run: the runner fails CONTAINER tasks, naming the type.
            *(
                [
                    ContainerTasks(
                        plane,
                        Pods(kube),
                        keep_pods=settings.container_keep_pods,
                        sweep_interval=settings.container_sweep_interval,
                        namespaces=settings.namespaces,
                    )
                ]
                if kube is not None
                else []
            ),
        ],
        concurrency=settings.http_concurrency,
        worker_id=f"{socket.gethostname()}/http",
    )
    parts: list[Part] = [
        ("system task", system_tasks.run(stop)),
        *((f"decider {i + 1}", loops.run_decider(pool, notifications, config, stop)) for i in range(settings.deciders)),
        ("sweeper", loops.run_sweeper(pool, stop)),
        ("scheduler", loops.run_scheduler(plane, stop, on_report=_schedule_events(kube))),
        (
            "purger",
            loops.run_purger(
                pool,
                stop,
                batch=settings.purge_batch,
                interval=settings.purge_interval,
                # Keys are kept for the longest window that may read them: a Trigger's dedup window too.
                idempotency_window=max(settings.idempotency_window, MAX_DEDUP_WINDOW_SECONDS),
                share=settings.purge_share,
                retention_seconds=settings.retention,
                event_retention_seconds=settings.event_retention,
                archive=archive,
            ),
        ),
        ("API server", server.serve_until(stop)),
    ]
    if kube is not None:
        worker_pods = WorkerPods(
            api_url=settings.api_url or DEFAULT_API_URL,
            default_image=settings.worker_image,
            interval=settings.autoscaling_interval,
        )
        registry = kopf.OperatorRegistry()
        register(registry, worker_pods=worker_pods, status_interval=settings.status_interval)
        recorder = EventRecorder(Events(kube))
        memo = _Memo()
        memo.context = Context(
            plane=plane, clock=utc_now, events=recorder, kube=kube, status_interval=settings.status_interval
        )
        memo.worker_pods = worker_pods

        async def reconcile(stepped_down: asyncio.Event) -> None:
            """The one-replica-at-a-time parts: kopf's reconcilers, the status mirror and
            the metrics read from the database (exported once, not once per replica)."""
            leader_stop = asyncio.Event()
            relay = asyncio.create_task(_first_of(stop, stepped_down, then=leader_stop))

            async def reconcilers() -> None:
                kopf_ready = asyncio.Event()
                reclaim = asyncio.create_task(_own_signals_when(kopf_ready, stop))
                try:
                    await kopf.operator(
                        registry=registry,
                        settings=kopf_settings(),
                        clusterwide=not settings.namespaces,
                        namespaces=settings.namespaces,
                        standalone=True,
                        memo=memo,
                        stop_flag=leader_stop,
                        ready_flag=kopf_ready,
                    )
                finally:
                    reclaim.cancel()
                    _own_signals(stop)  # kopf leaves its handlers behind, bound to its finished run
                if not leader_stop.is_set():
                    # kopf returns on its own only for a SIGTERM or SIGINT it caught before
                    # its handlers were replaced: the signal was meant for the whole operator.
                    log.info("the reconcilers caught a termination signal: stopping")
                    stop.set()

            try:
                await asyncio.gather(
                    reconcilers(), run_mirror(pool, kube, leader_stop, recorder), loops.run_gauges(pool, leader_stop)
                )
            finally:
                relay.cancel()

        if settings.leader_election:
            elector = LeaderElector(
                Leases(kube), settings.leader_election_namespace, "sluiceway-operator", settings.identity
            )
            parts.append(("reconciler", elector.run(reconcile, stop)))
        else:
            parts.append(("reconciler", reconcile(asyncio.Event())))
    else:  # no Kubernetes, no election: this process is the only replica
        parts.append(("gauges", loops.run_gauges(pool, stop)))
    if authenticator is not None:
        parts.append(("API keys", authenticator.run(stop)))  # keeps the API keys in memory
    try:
        await supervise(parts, stop)
    finally:
        await notifications.stop()
        await pool.close()
        if kube is not None:
            kube.close()


def main(settings: Settings) -> int:
    logs.configure(settings.log_level, settings.log_format)
    if tracing.configure():
        log.info("exporting traces (OTEL_* variables)")
    try:
        return exit_status(lambda stop: run(settings, stop), settings.event_loop)
    except ArchiveError as error:
        print(f"sluiceway operator: {error}", file=sys.stderr)
        return 2
    finally:
        tracing.uninstall()  # exports the spans still batched


def exit_status(body: Callable[[asyncio.Event], Awaitable[None]], loop: eventloop.EventLoop = "uvloop") -> int:
    """Run `body` on `loop` until SIGTERM or SIGINT sets its stop event: 0 after a clean
    stop, 1 when a part died (a failure at start-up raises, which exits 1 too)."""

    async def with_signals() -> None:
        stop = asyncio.Event()
        _own_signals(stop)
        await body(stop)

    try:
        eventloop.run(with_signals(), loop)
    except PartDied as died:
        log.critical("%s; exiting with status 1 so that Kubernetes restarts this replica", died)
        return 1
    return 0
