/** One leased task, as a handler sees it. */

import { performance } from "node:perf_hooks";

import { beatIntervalSeconds, LogBuffer } from "./bounds.js";
import type { components } from "./generated/api.js";

export type LeasedTask = components["schemas"]["LeasedTask"];
export type JsonObject = Record<string, unknown>;

export type LogLevel = "DEBUG" | "INFO" | "WARNING" | "ERROR";

export class Task {
  readonly taskId: string;
  readonly epoch: number;
  readonly taskType: string;
  readonly executionId: string;
  readonly referenceName: string;
  readonly attempt: number;
  readonly input: JsonObject;
  readonly heartbeatTimeoutSeconds: number;
  readonly responseTimeoutSeconds: number;
  readonly startToCloseTimeoutSeconds: number;
  /** The attempt's W3C trace context as the server sent it ("" when it exports no traces):
   * pass it to your tracer to continue the run's trace. */
  readonly traceparent: string;
  /** Aborted when the lease is gone (timed out, canceled, re-leased), the handler outlives
   * startToCloseTimeout, or a shutdown's grace period ends: stop working then. */
  readonly signal: AbortSignal;

  /** @internal */ readonly logs = new LogBuffer();
  /** @internal */ readonly searchAttributes: JsonObject = {};
  /** @internal monotonic ms of the last heartbeat the server accepted (or the lease). */
  lastBeat: number;
  /** @internal */ readonly controller: AbortController;

  constructor(wire: LeasedTask, controller: AbortController = new AbortController(), now = performance.now()) {
    this.taskId = wire.taskId;
    this.epoch = wire.epoch;
    this.taskType = wire.taskType;
    this.executionId = wire.executionId;
    this.referenceName = wire.referenceName;
    this.attempt = wire.attempt;
    this.input = wire.input ?? {};
    this.heartbeatTimeoutSeconds = wire.heartbeatTimeoutSeconds ?? 0;
    this.responseTimeoutSeconds = wire.responseTimeoutSeconds ?? 3600;
    this.startToCloseTimeoutSeconds = wire.startToCloseTimeoutSeconds ?? 0;
    this.traceparent = wire.traceparent ?? "";
    this.controller = controller;
    this.signal = controller.signal;
    this.lastBeat = now;
  }

  /** The same for every attempt and delivery of this task in this run: give it
   * to side effects. Not the task id, which names one attempt. */
  get idempotencyKey(): string {
    return `${this.executionId}/${this.referenceName}`;
  }

  /** Keep a line in this task's log, shipped with its heartbeats and result
   * (`sluiceway logs RUN` reads it after the worker is gone). */
  log(message: string, level: LogLevel | string = "INFO"): void {
    this.logs.add(String(message), level, new Date(), performance.now());
  }

  /** Set attributes the run's workflow declares, written with this task's result. */
  upsertSearchAttributes(values: JsonObject): void {
    Object.assign(this.searchAttributes, values);
  }

  /** @internal */
  beatIntervalMs(): number {
    return beatIntervalSeconds(this.heartbeatTimeoutSeconds, this.responseTimeoutSeconds) * 1000;
  }

  /** How the SDK's own logs name a task: its ids, never its input or output. */
  toString(): string {
    return `run ${this.executionId} task ${this.taskId} epoch ${this.epoch}`;
  }
}
