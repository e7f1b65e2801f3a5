/**
 * The Sluiceway SDK for TypeScript: a `Worker` that leases tasks over the
 * worker protocol, and a `Client` that starts runs and waits for them.
 *
 *     import { Worker, TerminalError } from "@sluiceway/sdk";
 *
 *     const worker = new Worker();   // SLUICEWAY_URL, SLUICEWAY_NAMESPACE
 *     worker.register("charge", async (task) => {
 *       if (Number(task.input.amount) <= 0) throw new TerminalError("amount must be positive");
 *       return { receipt: await bank.charge(task.input.amount, { idempotencyKey: task.idempotencyKey }) };
 *     }, { concurrency: 4 });
 *     await worker.runUntilSignal();
 */

export {
  composeRetryClassifiers,
  failureTaxonomyClassifier,
  makeRateLimitAwareClassifier,
  parseRetryAfter,
  rateLimitAwareClassifier,
  retryAfterHint,
  statusOf,
  type Classifier,
  type RetryKind,
  type RetryOverride,
} from "./classifiers.js";
export { Client, isTerminal, type ClientOptions, type ExecuteOptions, type Run, type RunStatus, type StartOptions, type Started } from "./client.js";
export { ApiError, LeaseGone, RetryAfter, RunError, RunFailed, ShutDown, Snooze, StillRunning, TerminalError } from "./errors.js";
export type { components, paths } from "./generated/api.js";
export { Task, type JsonObject, type LogLevel } from "./task.js";
export { stderrLogger, Worker, type Handler, type Logger, type TaskOptions, type WorkerOptions } from "./worker.js";
