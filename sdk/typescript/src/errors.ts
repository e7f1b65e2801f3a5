/**
 * What a handler throws to steer what happens next, and what the SDK throws
 * at its callers. Retry semantics travel on the error class, as in the Python
 * SDK (`sluiceway.worker.errors`) and Temporal's `ApplicationError`.
 */

/** This input will never succeed: reported FAILED_WITH_TERMINAL_ERROR, never retried. */
export class TerminalError extends Error {
  override readonly name: string = "TerminalError";
}

/**
 * Retry after exactly `seconds` (a server's Retry-After, say), spending an
 * attempt: reported FAILED with `retryAfterSeconds` as the handler's own
 * `signal` (only the task's deadline gates it). `consumeBudget: false` is a
 * snooze instead: no attempt is spent.
 */
export class RetryAfter extends Error {
  override readonly name: string = "RetryAfter";
  readonly seconds: number;
  readonly consumeBudget: boolean;

  constructor(seconds: number, options: { consumeBudget?: boolean; reason?: string } = {}) {
    if (!(seconds >= 0)) throw new RangeError(`RetryAfter needs a non-negative delay, got ${seconds}`);
    super(options.reason || `retry after ${seconds} s`);
    this.seconds = seconds;
    this.consumeBudget = options.consumeBudget ?? true;
  }
}

/**
 * Hand the task back and lease it again after `seconds`, spending no attempt
 * (IN_PROGRESS with callbackAfterSeconds). scheduleToCloseTimeout still bounds it.
 */
export class Snooze extends Error {
  override readonly name: string = "Snooze";
  readonly seconds: number;

  constructor(seconds: number, reason = "") {
    if (!(seconds >= 0)) throw new RangeError(`Snooze needs a non-negative delay, got ${seconds}`);
    super(reason || `snooze ${seconds} s`);
    this.seconds = seconds;
  }
}

/** Why a task's AbortSignal fired: the server no longer leases it to us. */
export class LeaseGone extends Error {
  override readonly name: string = "LeaseGone";
}

/** Why a task's AbortSignal fired: the worker shut down and handed it back. */
export class ShutDown extends Error {
  override readonly name: string = "ShutDown";
}

/**
 * The server refused a whole request. `code` is its stable error code
 * (`INVALID_REQUEST`, `NOT_FOUND`, ...) and the message names the field,
 * never a payload.
 */
export class ApiError extends Error {
  override readonly name: string = "ApiError";
  readonly status: number;
  readonly code: string;
  readonly body: unknown;

  constructor(status: number, body: unknown) {
    super(`HTTP ${status}: ${summary(body)}`);
    this.status = status;
    this.body = body;
    this.code = isRecord(body) && typeof body.error === "string" ? body.error : "";
  }

  /** Worth sending again later: the server or the path to it failed, it asked
   * us to slow down, or a rotating credential was momentarily refused. */
  retryable(): boolean {
    return this.status >= 500 || [401, 403, 408, 429].includes(this.status);
  }

  /** The server's own message, without the status prefix. */
  get serverMessage(): string {
    return isRecord(this.body) && typeof this.body.message === "string" ? this.body.message : summary(this.body);
  }
}

/** A run did not give its output: every error `Client.execute` throws about a run. */
export class RunError extends Error {
  override readonly name: string = "RunError";
  readonly runId: string;
  readonly status: string;

  constructor(message: string, runId: string, status: string) {
    super(message);
    this.runId = runId;
    this.status = status;
  }
}

/** The run ended without completing: FAILED, TIMED_OUT or TERMINATED. */
export class RunFailed extends RunError {
  override readonly name: string = "RunFailed";
  readonly reason: string;
  readonly output: Record<string, unknown>;

  constructor(runId: string, status: string, reason: string, output: Record<string, unknown>) {
    super(`run ${runId} ${status}: ${reason || "no reason given"}`, runId, status);
    this.reason = reason;
    this.output = output;
  }
}

/** The caller's timeout passed before the run ended. The run goes on: `runId`
 * names it, to wait again (`Client.wait`) or act on it. */
export class StillRunning extends RunError {
  override readonly name: string = "StillRunning";

  constructor(runId: string, status: string, timeoutSeconds: number) {
    super(`run ${runId} still ${status} after ${timeoutSeconds} s`, runId, status);
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function summary(body: unknown): string {
  if (isRecord(body) && "message" in body) {
    return `${String(body.error ?? "")}: ${String(body.message).slice(0, 500)}`;
  }
  const text = typeof body === "string" ? body : JSON.stringify(body) ?? "";
  return text.slice(0, 200);
}
