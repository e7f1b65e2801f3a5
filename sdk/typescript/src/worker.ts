/**
 * The worker: polls, runs handlers with bounded concurrency, beats, reports
 * in batches, and shuts down gracefully; the behaviour of the Python SDK's
 * runner (operator/sluiceway/worker/runner.py), over the same public API.
 *
 * - One long poll per task type asks for as many tasks as it has free slots.
 * - Heartbeats for every in-flight task go out in one request; a task the
 *   server reports gone is aborted through its AbortSignal.
 * - Results leave in batches; a finished handler's slot is leased again by the
 *   same request (`next`). Nothing is dropped while its lease may live: what is
 *   sent is clamped to the API's bounds; a result refused as invalid (422) is
 *   reported again, once, as FAILED with the server's reason; transport errors,
 *   5xx and 429 are retried with backoff and jitter; 404/409 mean the lease is
 *   gone; 413 means the server failed the task (output over the payload limit).
 * - stop() (or SIGTERM with runUntilSignal): stop polling, give in-flight work
 *   the grace period, then hand back what is left INTERRUPTED; a task leased
 *   during shutdown and never started goes back as a zero snooze.
 */

import { hostname } from "node:os";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

import { backoffSeconds, leaseSeconds, MAX_BATCH } from "./bounds.js";
import type { Classifier } from "./classifiers.js";
import { ApiError, LeaseGone, ShutDown } from "./errors.js";
import { connect, WorkerApi, type Credentials, type Schemas } from "./http.js";
import { completed, failed, refusedResult, result, type ResultBody, type ResultStatus } from "./outcomes.js";
import { Task, type JsonObject } from "./task.js";

export type Handler = (task: Task) => Promise<unknown> | unknown;

/** Where the SDK's own lines go: ids and codes, never an input, output or credential. */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export const stderrLogger: Logger = {
  debug: () => {},
  info: (message) => console.error(`${new Date().toISOString()} INFO sluiceway.worker: ${message}`),
  warn: (message) => console.error(`${new Date().toISOString()} WARNING sluiceway.worker: ${message}`),
  error: (message) => console.error(`${new Date().toISOString()} ERROR sluiceway.worker: ${message}`),
};

export interface WorkerOptions extends Credentials {
  /** The API's base URL; SLUICEWAY_URL when unset. */
  url?: string;
  /** The namespace to work in; SLUICEWAY_NAMESPACE when unset. */
  namespace?: string;
  /** SLUICEWAY_WORKER_ID, else host-pid. */
  workerId?: string;
  pollTimeoutSeconds?: number;
  /** Seconds in-flight tasks get to finish at shutdown before they are handed back (30). */
  shutdownGraceSeconds?: number;
  /** Classifies errors of every handler (after the handler's own classifier). */
  classifier?: Classifier;
  /** Results per request (1 to 1000, default 100). */
  resultBatch?: number;
  /** Results requests on their way at once (4). */
  reportsInFlight?: number;
  /** Lease a freed slot's next task with the result that freed it (`next`; default true). */
  leaseWithResults?: boolean;
  /** A task's lines wait at most this long for a heartbeat to ship them (1 s). */
  logFlushSeconds?: number;
  logger?: Logger;
  fetch?: typeof fetch;
}

export interface TaskOptions {
  /** Tasks of this type that run at once (1). */
  concurrency?: number;
  classifier?: Classifier;
}

interface Registration {
  taskType: string;
  handler: Handler;
  concurrency: number;
  classifier: Classifier | undefined;
  inFlight: number;
  /** Slots of finished handlers whose results are on their way: their request leases the next tasks. */
  reserved: number;
  freed: Notifier;
}

interface Report {
  task: Task;
  body: ResultBody;
  /** Already the bare FAILED that replaces a refused result. */
  fallback: boolean;
  /** The slot it holds until its request leased the slot's next task. */
  slot: Registration | undefined;
}

const RESULT_LINGER_MS = 2; // a result waits this long for others of its poll batch, finishing together

/** Resolves every waiter on notify(). */
class Notifier {
  private waiters: Array<() => void> = [];
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}

/** Reports waiting to be sent, closed at the end of a shutdown. */
class ReportQueue {
  private items: Report[] = [];
  private closed = false;
  private arrived = new Notifier();

  put(report: Report): void {
    this.items.push(report);
    this.arrived.notify();
  }
  close(): void {
    this.closed = true;
    this.arrived.notify();
  }
  /** The next report, or undefined once closed and empty. */
  async get(): Promise<Report | undefined> {
    while (!this.items.length) {
      if (this.closed) return undefined;
      await this.arrived.wait();
    }
    return this.items.shift();
  }
  take(most: number): Report[] {
    return this.items.splice(0, Math.max(0, most));
  }
}

/** At most `permits` holders at once. */
class Permits {
  private waiters: Array<() => void> = [];
  constructor(private free: number) {}
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free -= 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.free += 1;
  }
}

/** The handler outlived the task's startToCloseTimeout. */
class StartToCloseExceeded extends Error {
  override readonly name = "TimeoutError";
}

export class Worker {
  readonly url: string;
  readonly namespace: string;
  readonly workerId: string;
  /** Results the server accepted (for tests and benchmarks). */
  completed = 0;

  private readonly options: WorkerOptions;
  private readonly log: Logger;
  private readonly registrations = new Map<string, Registration>();
  private readonly inFlight = new Map<string, { task: Task; done: Promise<void> }>();
  private queue = new ReportQueue();
  private stopping = false;
  private readonly stopped = new Notifier();
  private stopRequested: Promise<void> = this.stopped.wait();
  private giveUpAt: number | undefined;
  private running = false;

  constructor(options: WorkerOptions = {}) {
    this.options = options;
    this.url = options.url ?? process.env.SLUICEWAY_URL ?? "";
    this.namespace = options.namespace ?? process.env.SLUICEWAY_NAMESPACE ?? "";
    this.workerId = options.workerId ?? process.env.SLUICEWAY_WORKER_ID ?? `${hostname()}-${process.pid}`;
    this.log = options.logger ?? stderrLogger;
  }

  /** Run `handler` for tasks of `taskType`. */
  register(taskType: string, handler: Handler, options: TaskOptions = {}): this {
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError("concurrency must be an integer of at least 1");
    if (this.registrations.has(taskType)) throw new Error(`task type ${taskType} already has a handler`);
    this.registrations.set(taskType, {
      taskType,
      handler,
      concurrency,
      classifier: options.classifier,
      inFlight: 0,
      reserved: 0,
      freed: new Notifier(),
    });
    return this;
  }

  /** Begin a graceful shutdown: `run()` resolves once it is over. */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.stopped.notify();
  }

  /** Run until SIGTERM or SIGINT (or stop()), then shut down gracefully. */
  async runUntilSignal(): Promise<void> {
    const onSignal = (): void => this.stop();
    process.once("SIGTERM", onSignal);
    process.once("SIGINT", onSignal);
    try {
      await this.run();
    } finally {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    }
  }

  /** Poll and run tasks until stop() or `signal` aborts, then shut down gracefully. */
  async run(options: { signal?: AbortSignal } = {}): Promise<void> {
    if (!this.url || !this.namespace) {
      throw new Error("a Worker needs the API url and a namespace (SLUICEWAY_URL, SLUICEWAY_NAMESPACE)");
    }
    if (!this.registrations.size) throw new Error("no task handlers registered: call worker.register(taskType, handler)");
    if (this.running) throw new Error("this Worker is already running");
    this.running = true;
    if (options.signal?.aborted) this.stop();
    options.signal?.addEventListener("abort", () => this.stop(), { once: true });

    const api = new WorkerApi(connect({ ...this.options, url: this.url }), this.namespace);
    const beating = new AbortController();
    const flusher = this.flushResults(api);
    const beater = this.heartbeats(api, beating.signal);
    const pollers = [...this.registrations.values()].map((reg) => this.poll(api, reg));
    this.log.info(`worker ${this.workerId} polling ${[...this.registrations.keys()].sort().join(", ")} in namespace ${this.namespace}`);
    await this.stopRequested;
    this.log.info(`worker ${this.workerId} stopping: finishing ${this.inFlight.size} in-flight tasks`);
    // The grace period starts now. A poll on its way is answered, not aborted (it may
    // have leased tasks already): what it brings is handed straight back.
    await Promise.all([Promise.all(pollers), this.drain()]);
    this.giveUpAt = performance.now() + this.graceMs();
    this.queue.close(); // the flusher sends what is queued, then ends
    await flusher;
    beating.abort();
    await beater;
  }

  private graceMs(): number {
    return (this.options.shutdownGraceSeconds ?? 30) * 1000;
  }

  // -- polling and running -----------------------------------------------------

  private async poll(api: WorkerApi, reg: Registration): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const free = reg.concurrency - reg.inFlight - reg.reserved;
      if (free <= 0) {
        await Promise.race([reg.freed.wait(), this.stopRequested]);
        continue;
      }
      let leased: Schemas["LeasedTask"][];
      try {
        leased = await api.poll([reg.taskType], this.workerId, Math.min(free, MAX_BATCH), this.options.pollTimeoutSeconds ?? 10);
        failures = 0;
      } catch (error) {
        const delay = backoffSeconds(failures++ + 2); // from about 0.8 s
        this.log.warn(`poll for ${reg.taskType} failed: ${describe(error)}; retrying in ${delay.toFixed(1)} s`);
        await Promise.race([sleep(delay * 1000), this.stopRequested]);
        continue;
      }
      this.start(leased);
    }
  }

  private start(leased: Schemas["LeasedTask"][]): void {
    for (const wire of leased) {
      const task = new Task(wire);
      const reg = this.registrations.get(task.taskType);
      if (this.stopping || reg === undefined) {
        // Leased during shutdown and never started: back at once, spending nothing.
        this.enqueue(task, result(lease(task), "IN_PROGRESS", { callbackAfterSeconds: 0 }));
        continue;
      }
      reg.inFlight += 1;
      const done = this.execute(reg, task);
      this.inFlight.set(task.taskId, { task, done });
    }
  }

  private async execute(reg: Registration, task: Task): Promise<void> {
    let body: ResultBody | undefined;
    try {
      body = await this.outcome(reg, task);
    } finally {
      reg.inFlight -= 1;
      this.inFlight.delete(task.taskId);
    }
    const reason: unknown = task.signal.reason;
    if (reason instanceof ShutDown || reason instanceof LeaseGone) {
      body = undefined; // finished as it was handed back, or after its lease ended: that result stands
    }
    const slot = body !== undefined && (this.options.leaseWithResults ?? true) ? reg : undefined;
    if (slot) slot.reserved += 1; // the result's request leases this slot's next task
    else reg.freed.notify();
    if (body !== undefined) this.enqueue(task, body, slot);
  }

  /** The result of one handler call, or undefined when the task was abandoned
   * (its lease is gone, or the shutdown handed it back). */
  private async outcome(reg: Registration, task: Task): Promise<ResultBody | undefined> {
    const timer =
      task.startToCloseTimeoutSeconds > 0
        ? setTimeout(
            () => task.controller.abort(new StartToCloseExceeded(`the handler outlived startToCloseTimeout (${task.startToCloseTimeoutSeconds} s)`)),
            task.startToCloseTimeoutSeconds * 1000,
          )
        : undefined;
    let onAbort: (() => void) | undefined;
    const abandoned = new Promise<never>((_, reject) => {
      onAbort = () => reject(task.signal.reason);
      task.signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      const output = await Promise.race([Promise.resolve().then(() => reg.handler(task)), abandoned]);
      return completed(lease(task), output);
    } catch (error) {
      if (task.signal.aborted) {
        const why = task.signal.reason as unknown;
        return why instanceof StartToCloseExceeded ? failed(lease(task), why, task.attempt) : undefined;
      }
      return failed(lease(task), error, task.attempt, [reg.classifier, this.options.classifier]);
    } finally {
      clearTimeout(timer);
      if (onAbort) task.signal.removeEventListener("abort", onAbort);
    }
  }

  /** Shutdown: wait for in-flight work, then hand back what is left. */
  private async drain(): Promise<void> {
    if (this.inFlight.size) {
      const all = Promise.allSettled([...this.inFlight.values()].map((entry) => entry.done));
      const grace = new AbortController();
      await Promise.race([all, sleep(this.graceMs(), undefined, { signal: grace.signal }).catch(() => undefined)]);
      grace.abort();
    }
    const leftovers = [...this.inFlight.values()];
    for (const { task } of leftovers) {
      this.enqueue(task, result(lease(task), "INTERRUPTED"));
      task.controller.abort(new ShutDown("the worker shut down; the task was handed back"));
    }
    if (leftovers.length) this.log.info(`handed back ${leftovers.length} unfinished tasks`);
  }

  // -- results -------------------------------------------------------------------

  private enqueue(task: Task, body: ResultBody, slot?: Registration): void {
    this.queue.put({ task, body, fallback: false, slot });
  }

  /** Send results in batches until the queue closes, a few requests at once. */
  private async flushResults(api: WorkerApi): Promise<void> {
    const batchSize = Math.max(1, Math.min(this.options.resultBatch ?? 100, MAX_BATCH));
    const room = new Permits(Math.max(1, this.options.reportsInFlight ?? 4));
    const sending = new Set<Promise<void>>();
    for (;;) {
      const first = await this.queue.get();
      if (first === undefined) break;
      // Linger briefly for results finishing together, but not when the first holds a slot
      // waiting for its next task: that slot would idle for nothing.
      if (batchSize > 1) await sleep(first.slot ? 0 : RESULT_LINGER_MS);
      const batch = [first, ...this.queue.take(batchSize - 1)];
      await room.acquire();
      const sender = this.sendBatch(api, batch).finally(() => {
        room.release();
        sending.delete(sender);
      });
      sending.add(sender);
    }
    await Promise.all(sending);
  }

  private async sendBatch(api: WorkerApi, batch: Report[]): Promise<void> {
    try {
      await this.send(api, batch, this.nextCounts(batch));
    } catch (error) {
      this.log.error(`reporting results failed unexpectedly: ${describe(error)}`);
    } finally {
      this.unreserve(batch);
    }
  }

  /** Per task type, the slots this batch's results free: leased again with them. */
  private nextCounts(batch: Report[]): Record<string, number> | undefined {
    if (this.stopping) return undefined;
    const counts: Record<string, number> = {};
    for (const report of batch) {
      if (report.slot) counts[report.slot.taskType] = (counts[report.slot.taskType] ?? 0) + 1;
    }
    return Object.keys(counts).length ? counts : undefined;
  }

  /** The slots the batch held go back to the polls (those `next` refilled are in flight again). */
  private unreserve(batch: Report[]): void {
    for (const report of batch) {
      if (report.slot) {
        report.slot.reserved -= 1;
        report.slot.freed.notify();
        report.slot = undefined;
      }
    }
  }

  /** Deliver every result of the batch, or learn that its lease is gone. The
   * first request also leases `counts` (the slots the results free). */
  private async send(api: WorkerApi, batch: Report[], counts?: Record<string, number>): Promise<void> {
    let pending = batch;
    let failures = 0;
    let asking = counts;
    while ((pending = this.stillLeased(pending)).length) {
      let outcomes: Schemas["ItemOutcome"][];
      try {
        if (asking && !this.stopping) {
          const next = { workerId: this.workerId, counts: asking };
          asking = undefined; // asked once: a retry only delivers
          let answer: Awaited<ReturnType<WorkerApi["results"]>>;
          try {
            answer = await api.results(pending.map((r) => r.body), next);
          } finally {
            this.unreserve(batch); // before start(): the slots `next` filled are in flight again
          }
          outcomes = answer.outcomes;
          this.start(answer.leased);
        } else {
          outcomes = (await api.results(pending.map((r) => r.body))).outcomes;
        }
      } catch (error) {
        if (error instanceof ApiError && !error.retryable()) {
          pending = await this.sendOneByOne(api, pending, error);
        } else {
          failures = await this.pause(failures, pending, error);
        }
        continue;
      }
      const again = this.settle(pending, outcomes);
      if (again.some((report) => pending.includes(report))) {
        failures = await this.pause(failures, again, new Error("some results were not applied"));
      }
      pending = again;
    }
  }

  /** Find the item a whole-request refusal was about: alone, its refusal is its own. */
  private async sendOneByOne(api: WorkerApi, pending: Report[], refusal: ApiError): Promise<Report[]> {
    if (pending.length > 1) {
      this.log.warn(`${pending.length} results refused together (${refusal.message}); sending them one by one`);
      for (const report of pending) await this.send(api, [report]);
      return [];
    }
    return this.settle(pending, [{ taskId: pending[0]?.task.taskId ?? null, code: 422, error: refusal.serverMessage }]);
  }

  /** What is left to send after the server's per-item answers. */
  private settle(sent: Report[], outcomes: Schemas["ItemOutcome"][]): Report[] {
    const again: Report[] = [];
    sent.slice(0, outcomes.length).forEach((report, index) => {
      const outcome = outcomes[index];
      const code = outcome?.code;
      const said = outcome?.error ?? "";
      if (code === 200) {
        this.completed += 1;
      } else if (code === 404 || code === 409) {
        this.log.info(`${report.task}: result not applied, the lease is gone: ${said}`);
      } else if (code === 413) {
        // The server failed the task: its output is over the payload limit. Nothing is sent again.
        this.log.error(`${report.task}: ${said}`);
      } else if (code === 422 && report.fallback) {
        this.log.error(`${report.task}: even a bare FAILED was refused: ${said}; dropped`);
      } else if (code === 422) {
        this.log.warn(`${report.task}: ${report.body.status} result refused as invalid (${said}); reporting it FAILED with the reason`);
        again.push({ task: report.task, body: refusedResult(report.body, said), fallback: true, slot: undefined });
      } else {
        again.push(report); // anything else is the server's trouble: send it again
      }
    });
    return [...again, ...sent.slice(outcomes.length)];
  }

  private stillLeased(pending: Report[]): Report[] {
    const now = performance.now();
    return pending.filter((report) => {
      const task = report.task;
      const leaseEnds = task.lastBeat + leaseSeconds(task.heartbeatTimeoutSeconds, task.responseTimeoutSeconds) * 1000;
      if (now < leaseEnds && (this.giveUpAt === undefined || now < this.giveUpAt)) return true;
      this.log.error(
        `${task}: result could not be delivered before the lease ran out or shutdown ended; the server will hand the task out again`,
      );
      return false;
    });
  }

  private async pause(failures: number, pending: Report[], error: unknown): Promise<number> {
    const delay = backoffSeconds(failures);
    this.log.warn(`reporting results failed (${describe(error)}); retrying in ${delay.toFixed(1)} s: ${listed(pending)}`);
    await sleep(delay * 1000);
    return failures + 1;
  }

  // -- heartbeats ----------------------------------------------------------------

  private async heartbeats(api: WorkerApi, signal: AbortSignal): Promise<void> {
    const flushMs = (this.options.logFlushSeconds ?? 1) * 1000;
    while (!signal.aborted) {
      try {
        await sleep(200, undefined, { signal });
      } catch {
        return;
      }
      const now = performance.now();
      const due = [...this.inFlight.values()].map((entry) => entry.task).filter((task) => beatDue(task, now, flushMs));
      for (let start = 0; start < due.length; start += MAX_BATCH) {
        await this.beat(api, due.slice(start, start + MAX_BATCH), now);
      }
    }
  }

  private async beat(api: WorkerApi, due: Task[], now: number): Promise<void> {
    const shipped = new Map(due.map((task) => [task.taskId, task.logs.drain()]));
    let answer: Schemas["HeartbeatBatchResponse"];
    try {
      answer = await api.heartbeats(
        due.map((task) => {
          const logs = shipped.get(task.taskId) ?? [];
          return logs.length ? { taskId: task.taskId, epoch: task.epoch, logs } : { taskId: task.taskId, epoch: task.epoch };
        }),
      );
    } catch (error) {
      this.log.warn(`heartbeat failed (${describe(error)}); retrying: ${due.slice(0, 10).join(", ")}`);
      for (const task of due) task.logs.putBack(shipped.get(task.taskId) ?? [], now);
      return;
    }
    const alive = new Set(answer.alive);
    for (const task of due) if (alive.has(task.taskId)) task.lastBeat = now;
    for (const refused of answer.errors ?? []) {
      const entry = refused.taskId ? this.inFlight.get(refused.taskId) : undefined;
      this.log.error(`${entry ? entry.task : `task ${refused.taskId}`}: heartbeat refused as invalid: ${refused.error}`);
    }
    for (const taskId of answer.gone) {
      const entry = this.inFlight.get(taskId);
      if (entry) {
        this.log.warn(`${entry.task}: no longer ours (timed out, canceled or re-leased); aborting it`);
        entry.task.controller.abort(new LeaseGone(`task ${taskId} is no longer leased to this worker`));
      }
    }
  }
}

/** A beat is due to renew the lease, or to ship lines waiting too long. */
function beatDue(task: Task, now: number, flushMs: number): boolean {
  const waiting = task.logs.waitingSince();
  return now - task.lastBeat >= task.beatIntervalMs() || (waiting !== undefined && now - waiting >= flushMs);
}

/** What a result is about: the lease, the lines logged since the last beat, the attributes to upsert. */
function lease(task: Task): { taskId: string; epoch: number; logs: Schemas["LogLine"][]; searchAttributes: JsonObject } {
  return { taskId: task.taskId, epoch: task.epoch, logs: task.logs.drain(true), searchAttributes: task.searchAttributes };
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message}: ${cause.message}` : error.message;
  }
  return String(error);
}

function listed(reports: Report[]): string {
  const shown = reports.slice(0, 10).map((r) => String(r.task)).join(", ");
  return reports.length <= 10 ? shown : `${shown} and ${reports.length - 10} more`;
}

export type { ResultStatus };
