/**
 * The API's bounds (sdk/openapi.json, docs/workers.md "Bounds"), and the pure
 * helpers that keep what the SDK sends inside them. No IO, no clock: `now`
 * and the random source are parameters, so the unit tests pin them.
 */

import type { components } from "./generated/api.js";

export type LogLine = components["schemas"]["LogLine"];

export const MAX_DELAY_SECONDS = 31_536_000; // a year: retryAfterSeconds, callbackAfterSeconds
export const MAX_REASON = 8192; // characters of a result's reason
export const MAX_BATCH = 1000; // items of a results or heartbeats request
export const MAX_LOG_LINE = 8192; // characters of one log line
export const MAX_LOG_LINES = 1000; // lines one result or heartbeat carries
export const MAX_LEVEL = 16; // characters of a log line's level
export const MAX_BUFFERED_CHARS = 1024 * 1024; // per task between two shipments: past it lines are counted, not kept

export const TRUNCATED = " [truncated]";
const LINE_TRUNCATED = " [line truncated]";

export const RETRY_BASE_SECONDS = 0.2;
export const RETRY_CAP_SECONDS = 30;

/** A reason the server accepts: cut to 8192 characters, saying so. */
export function truncated(text: string, limit = MAX_REASON): string {
  return text.length <= limit ? text : text.slice(0, limit - TRUNCATED.length) + TRUNCATED;
}

/** A delay the server accepts: from 0 to a year; NaN is 0. */
export function boundedDelay(seconds: number): number {
  if (Number.isNaN(seconds)) return 0;
  return Math.min(Math.max(seconds, 0), MAX_DELAY_SECONDS);
}

/** Exponential (0.2 s doubling to 30 s), with equal jitter, so retries of many
 * workers spread out. `random` returns a number in [0, 1). */
export function backoffSeconds(failures: number, random: () => number = Math.random): number {
  const ceiling = Math.min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** Math.min(Math.max(failures, 0), 32));
  return ceiling / 2 + random() * (ceiling / 2);
}

/** A third of the tightest deadline a beat renews (at least 0.2 s); 60 s with none. */
export function beatIntervalSeconds(heartbeatTimeout: number, responseTimeout: number): number {
  const bounds = [heartbeatTimeout, responseTimeout].filter((b) => b > 0);
  return bounds.length ? Math.max(0.2, Math.min(...bounds) / 3) : 60;
}

/** How long after its last heartbeat a lease surely ends: the tightest of its timeouts (an hour with none). */
export function leaseSeconds(heartbeatTimeout: number, responseTimeout: number): number {
  const bounds = [heartbeatTimeout, responseTimeout].filter((b) => b > 0);
  return bounds.length ? Math.min(...bounds) : 3600;
}

/** The `?wait=` the API accepts (its pattern allows 0 to 59.999... seconds, or 60). */
export function waitParameter(seconds: number): string {
  if (seconds >= 60) return "60s";
  return `${Math.max(0, Math.floor(seconds * 1000) / 1000).toFixed(3)}s`;
}

/**
 * What a task logged, not shipped yet. Lines leave with the next heartbeat or
 * the result, at most MAX_LOG_LINES at a time, each at most MAX_LOG_LINE long.
 */
export class LogBuffer {
  private lines: LogLine[] = [];
  private size = 0;
  private dropped = 0;
  private oldest: number | undefined;

  /** `now`: a monotonic clock reading (ms), for when the oldest line waits too long. */
  add(message: string, level: string, at: Date, now: number): void {
    const text =
      message.length <= MAX_LOG_LINE ? message : message.slice(0, MAX_LOG_LINE - LINE_TRUNCATED.length) + LINE_TRUNCATED;
    if (this.size + text.length > MAX_BUFFERED_CHARS) {
      this.dropped += 1;
      return;
    }
    this.lines.push({ at: at.toISOString(), level: level.toUpperCase().slice(0, MAX_LEVEL), message: text });
    this.size += text.length;
    this.oldest ??= now;
  }

  /** Up to MAX_LOG_LINES lines, oldest first; a line counts what was dropped.
   * `all`: a result's last shipment, which cuts what does not fit instead of keeping it. */
  drain(all = false): LogLine[] {
    const room = this.dropped ? MAX_LOG_LINES - 1 : MAX_LOG_LINES;
    let taken: LogLine[];
    if (this.lines.length <= room) {
      taken = this.lines;
      this.lines = [];
    } else if (all) {
      this.dropped += this.lines.length - (room - 1);
      taken = this.lines.slice(0, room - 1);
      this.lines = [];
    } else {
      taken = this.lines.slice(0, room);
      this.lines = this.lines.slice(room);
    }
    this.size = this.lines.reduce((sum, line) => sum + (line.message ?? "").length, 0);
    if (this.dropped) {
      taken.push({ level: "WARNING", message: `[${this.dropped} log lines dropped by the worker: too many at once]` });
      this.dropped = 0;
    }
    if (!this.lines.length) this.oldest = undefined;
    return taken;
  }

  /** Lines a failed shipment did not deliver: first in line for the next one. */
  putBack(lines: LogLine[], now: number): void {
    if (!lines.length) return;
    this.lines = [...lines, ...this.lines];
    this.size += lines.reduce((sum, line) => sum + (line.message ?? "").length, 0);
    this.oldest = Math.min(this.oldest ?? now, now);
  }

  /** When the oldest waiting line was logged, if any waits. */
  waitingSince(): number | undefined {
    return this.lines.length || this.dropped ? this.oldest : undefined;
  }
}
