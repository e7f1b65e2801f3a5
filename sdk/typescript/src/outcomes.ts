/**
 * A handler's outcome as a result body the server accepts: classification
 * (TerminalError, RetryAfter, Snooze, classifiers, any other error), clamped
 * delays, truncated reasons, outputs that cannot travel as JSON replaced by a
 * failure saying so. Pure: no IO, no clock.
 */

import { boundedDelay, truncated, type LogLine } from "./bounds.js";
import { composeRetryClassifiers, type Classifier, type RetryOverride } from "./classifiers.js";
import { isRecord, RetryAfter, Snooze, TerminalError } from "./errors.js";
import type { components } from "./generated/api.js";

export type ResultBody = components["schemas"]["TaskResult"];
export type ResultStatus = components["schemas"]["ResultStatus"];

/** What a result is about: a lease, and what rides with it. */
export interface Lease {
  taskId: string;
  epoch: number;
  /** Lines not shipped yet (the result drains them). */
  logs?: LogLine[];
  searchAttributes?: Record<string, unknown>;
}

type Fields = Omit<ResultBody, "taskId" | "epoch" | "status" | "logs" | "searchAttributes">;

/** A result inside the API's bounds. */
export function result(lease: Lease, status: ResultStatus, fields: Fields = {}): ResultBody {
  const body: ResultBody = { taskId: lease.taskId, epoch: lease.epoch, status, ...fields };
  if (lease.logs?.length) body.logs = lease.logs;
  if (lease.searchAttributes && Object.keys(lease.searchAttributes).length) {
    body.searchAttributes = { ...lease.searchAttributes };
  }
  for (const key of ["retryAfterSeconds", "callbackAfterSeconds"] as const) {
    const value = body[key];
    if (value !== undefined && value !== null) body[key] = boundedDelay(Number(value));
  }
  if (body.reason !== undefined) body.reason = truncated(String(body.reason));
  const problem = notJson(body);
  if (problem !== undefined) {
    return { ...bare(body), status: "FAILED", reason: truncated(`the output is not JSON: ${problem}`) };
  }
  return body;
}

/** The lease and its log lines: all a bare FAILED keeps. */
export function bare(body: ResultBody): ResultBody {
  const kept: ResultBody = { taskId: body.taskId, epoch: body.epoch, status: body.status };
  if (body.logs?.length) kept.logs = body.logs;
  return kept;
}

/** The FAILED sent once in place of a result the server refused as invalid (422). */
export function refusedResult(body: ResultBody, serverMessage: string): ResultBody {
  return { ...bare(body), status: "FAILED", reason: truncated(`the server refused the worker's result: ${serverMessage}`) };
}

/** "Name: message", what nonRetryableErrors substrings are matched against (as the Python SDK's "Type: message"). */
export function reasonOf(error: unknown): string {
  if (error instanceof Error) return truncated(`${error.name}: ${error.message}`);
  return truncated(`Error: ${typeof error === "string" ? error : safeString(error)}`);
}

/** A handler's return value as a COMPLETED result: nothing is `{}`, a non-object is `{result: value}`. */
export function completed(lease: Lease, output: unknown): ResultBody {
  const object = output === undefined || output === null ? {} : isRecord(output) ? output : { result: output };
  return result(lease, "COMPLETED", { output: object });
}

/** A handler's error as a result: the SDK's errors first, then the classifiers, then FAILED. */
export function failed(lease: Lease, error: unknown, attempt: number, classifiers: Array<Classifier | undefined> = []): ResultBody {
  const reason = reasonOf(error);
  if (error instanceof TerminalError) return result(lease, "FAILED_WITH_TERMINAL_ERROR", { reason });
  if (error instanceof Snooze) return result(lease, "IN_PROGRESS", { callbackAfterSeconds: error.seconds });
  if (error instanceof RetryAfter) {
    if (!error.consumeBudget) return result(lease, "IN_PROGRESS", { callbackAfterSeconds: error.seconds });
    // The handler's own direction: only the task's deadline gates it, not the operator's ceiling.
    return result(lease, "FAILED", { reason, retryAfterSeconds: error.seconds, retryAfterSource: "signal" });
  }
  const verdict: RetryOverride | undefined = classifiers.some((c) => c !== undefined)
    ? composeRetryClassifiers(...classifiers)(error, attempt)
    : undefined;
  if (verdict?.kind === "nonRetryable") return result(lease, "FAILED_WITH_TERMINAL_ERROR", { reason });
  const fields: Fields = { reason };
  if (verdict?.kind === "indefinite") fields.retryKind = "indefinite";
  if (verdict?.delaySeconds !== undefined) fields.retryAfterSeconds = verdict.delaySeconds;
  return result(lease, "FAILED", fields);
}

/** Why a body cannot travel as JSON (a BigInt, a cycle, a function's toJSON throwing), or undefined. */
function notJson(body: ResultBody): string | undefined {
  try {
    JSON.stringify(body);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : safeString(error);
  }
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return "an unprintable value";
  }
}
