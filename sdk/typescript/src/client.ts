/**
 * Starting runs and waiting for their outcome, over the public API (the same
 * calls as `POST .../executions?wait=`), as the Python SDK's `Client`:
 *
 *     const client = new Client({ url: "http://sluiceway:8080", namespace: "shop" });
 *     const receipt = await client.execute("checkout", { cart: 42 }, { timeoutSeconds: 120 });
 *
 * The wait happens on the server, which answers when the run ends (its end
 * wakes the request; nothing polls), in steps of at most a minute.
 */

import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

import { backoffSeconds, waitParameter } from "./bounds.js";
import { ApiError, isRecord, RunFailed, StillRunning } from "./errors.js";
import { connect, deadline, type Api, type Credentials, type Schemas } from "./http.js";

export type Run = Schemas["ExecutionView"];
export type Started = Schemas["StartResponse"];
export type RunStatus = Schemas["RunStatus"];

const STEP_SECONDS = 60; // one server-side wait: the API's bound; a longer timeout waits again
const TERMINAL: ReadonlySet<string> = new Set(["COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"]);

export interface ClientOptions extends Credentials {
  /** The API's base URL; SLUICEWAY_URL when unset. */
  url?: string;
  /** SLUICEWAY_NAMESPACE when unset. */
  namespace?: string;
  fetch?: typeof fetch;
}

export interface StartOptions {
  version?: number;
  /** The idempotency key: a start sent again with it finds the run the first one created.
   * Sent as the body's requestId and the Idempotency-Key header. */
  requestId?: string;
  correlationId?: string;
  priority?: number;
  searchAttributes?: Record<string, unknown>;
  signal?: AbortSignal;
}

export interface ExecuteOptions extends StartOptions {
  /** Seconds to wait for the run to end (300). */
  timeoutSeconds?: number;
}

export function isTerminal(status: string): boolean {
  return TERMINAL.has(status);
}

export class Client {
  readonly namespace: string;
  private readonly api: Api;

  constructor(options: ClientOptions = {}) {
    const url = options.url ?? process.env.SLUICEWAY_URL ?? "";
    this.namespace = options.namespace ?? process.env.SLUICEWAY_NAMESPACE ?? "";
    if (!url || !this.namespace) {
      throw new Error("a Client needs the API url and a namespace (SLUICEWAY_URL, SLUICEWAY_NAMESPACE)");
    }
    this.api = connect({ ...options, url });
  }

  /** Start a run without waiting: the server's answer (`id`, `status`, `created`). */
  async start(workflow: string, input: Record<string, unknown> = {}, options: StartOptions = {}): Promise<Started> {
    const { started } = await this.post(workflow, input, options, undefined, options.signal);
    return started;
  }

  /** A run, with its tasks unless `includeTasks` is false. */
  async get(runId: string, options: { includeTasks?: boolean; signal?: AbortSignal } = {}): Promise<Run> {
    return this.getRun(runId, options.includeTasks ?? true, undefined, options.signal);
  }

  /** The run once it ended (without its tasks); StillRunning after `timeoutSeconds`. */
  async wait(runId: string, timeoutSeconds: number, options: { signal?: AbortSignal } = {}): Promise<Run> {
    const until = performance.now() + timeoutSeconds * 1000;
    let run = await this.waitStep(runId, until, options.signal);
    while (!isTerminal(run.status)) {
      if (performance.now() >= until) throw new StillRunning(runId, run.status, timeoutSeconds);
      run = await this.waitStep(runId, until, options.signal);
    }
    return run;
  }

  /**
   * Start a run and wait for it: its output once it completes; RunFailed if
   * it ends otherwise, StillRunning when `timeoutSeconds` pass first. The
   * start carries a request id (one of its own unless given), so a start sent
   * again after a lost answer finds the same run.
   */
  async execute(workflow: string, input: Record<string, unknown> = {}, options: ExecuteOptions = {}): Promise<Record<string, unknown>> {
    const run = await this.startAndWait(workflow, input, options);
    if (!isTerminal(run.status)) throw new StillRunning(run.id, run.status, options.timeoutSeconds ?? 300);
    if (run.status !== "COMPLETED") {
      throw new RunFailed(run.id, run.status, run.reasonForIncompletion ?? "", run.output ?? {});
    }
    return run.output ?? {};
  }

  /** Start a run and wait up to `timeoutSeconds` for it to end: the run as it
   * is then, ended or not (no error for a run that failed or still runs). */
  async startAndWait(
    workflow: string,
    input: Record<string, unknown> = {},
    options: ExecuteOptions = {},
  ): Promise<Run | (Started & { output?: Record<string, unknown>; reasonForIncompletion?: string })> {
    const timeoutSeconds = options.timeoutSeconds ?? 300;
    const until = performance.now() + timeoutSeconds * 1000;
    const asked = { ...options, requestId: options.requestId ?? randomUUID() };
    const { started, run } = await this.post(workflow, input, asked, until, options.signal);
    if (run && isTerminal(run.status)) return run;
    if (performance.now() >= until) return started;
    try {
      return await this.wait(started.id, (until - performance.now()) / 1000, { ...(options.signal ? { signal: options.signal } : {}) });
    } catch (error) {
      if (error instanceof StillRunning) return { ...started, status: error.status as RunStatus };
      throw error;
    }
  }

  // -- requests --------------------------------------------------------------------

  /** The start; with `until`, waiting on the server up to then. Transport errors
   * and 5xx are sent again (the request id makes that safe) within the deadline;
   * a TOO_MANY_WAITERS refusal is asked again after its Retry-After. */
  private async post(
    workflow: string,
    input: Record<string, unknown>,
    options: StartOptions,
    until: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ started: Started; run?: Run }> {
    const body: Schemas["StartRequest"] = { name: workflow, input };
    if (options.version !== undefined) body.version = options.version;
    if (options.requestId !== undefined) body.requestId = options.requestId;
    if (options.correlationId !== undefined) body.correlationId = options.correlationId;
    if (options.priority !== undefined) body.priority = options.priority;
    if (options.searchAttributes !== undefined) body.searchAttributes = options.searchAttributes;
    const header = options.requestId !== undefined ? { "Idempotency-Key": options.requestId } : undefined;
    for (let failures = 0; ; failures++) {
      const seconds = until === undefined ? 0 : step(until);
      try {
        const outcome = await this.api.POST("/v1/ns/{namespace}/executions", {
          params: {
            path: { namespace: this.namespace },
            ...(seconds > 0 ? { query: { wait: waitParameter(seconds) } } : {}),
            ...(header ? { header } : {}),
          },
          body,
          signal: deadline(seconds + 30, signal),
        });
        const answer = answeredOrWaiters(outcome);
        if (answer === "TOO_MANY_WAITERS") {
          await this.backOff(outcome.error, until, "");
          continue;
        }
        return "workflowName" in answer ? { started: { id: answer.id, status: answer.status }, run: answer } : { started: answer };
      } catch (error) {
        if (!retriable(error, options.requestId, until)) throw error;
        await sleep(backoffSeconds(failures) * 1000, undefined, signal ? { signal } : {});
      }
    }
  }

  private async waitStep(runId: string, until: number, signal: AbortSignal | undefined): Promise<Run> {
    return this.getRun(runId, false, until, signal);
  }

  private async getRun(runId: string, includeTasks: boolean, until: number | undefined, signal: AbortSignal | undefined): Promise<Run> {
    for (;;) {
      const seconds = until === undefined ? 0 : step(until);
      const query: { include_tasks: boolean; wait?: string } = { include_tasks: includeTasks };
      if (seconds > 0) query.wait = waitParameter(seconds);
      const outcome = await this.api.GET("/v1/ns/{namespace}/executions/{execution_id}", {
        params: { path: { namespace: this.namespace, execution_id: runId }, query },
        signal: deadline(seconds + 30, signal),
      });
      const answer = answeredOrWaiters(outcome);
      if (answer !== "TOO_MANY_WAITERS") return answer;
      await this.backOff(outcome.error, until, runId);
    }
  }

  /** This replica holds all the waiters it may: ask again after the delay it asks, within the deadline. */
  private async backOff(refusal: unknown, until: number | undefined, runId: string): Promise<void> {
    const delay = isRecord(refusal) && typeof refusal.retryAfterSeconds === "number" ? refusal.retryAfterSeconds : 1;
    if (until !== undefined && performance.now() + delay * 1000 < until) {
      await sleep(delay * 1000);
    } else if (runId) {
      throw new StillRunning(runId, "RUNNING", delay);
    } else {
      throw new ApiError(429, refusal); // refused before the start: there is no run
    }
  }
}

/** Seconds of the next server-side wait: what is left, at most the server's bound. */
function step(until: number): number {
  return Math.max(0, Math.min(STEP_SECONDS, (until - performance.now()) / 1000));
}

function answeredOrWaiters<T>(outcome: { data?: T; error?: unknown; response: Response }): T | "TOO_MANY_WAITERS" {
  if (outcome.response.status === 429 && isRecord(outcome.error) && outcome.error.error === "TOO_MANY_WAITERS") {
    return "TOO_MANY_WAITERS";
  }
  if (!outcome.response.ok || outcome.data === undefined) throw new ApiError(outcome.response.status, outcome.error ?? null);
  return outcome.data;
}

/** A start is sent again only with a request id (so it cannot start twice), before the deadline,
 * after a transport error or a 5xx. */
function retriable(error: unknown, requestId: string | undefined, until: number | undefined): boolean {
  if (requestId === undefined || until === undefined || performance.now() >= until) return false;
  if (error instanceof ApiError) return error.status >= 500;
  return error instanceof TypeError; // fetch's "fetch failed": the connection, not the server's answer
}
