/** Backoff, heartbeat cadence, waits and log buffers: the pure arithmetic of the worker. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  backoffSeconds,
  beatIntervalSeconds,
  leaseSeconds,
  LogBuffer,
  MAX_LOG_LINE,
  MAX_LOG_LINES,
  RETRY_CAP_SECONDS,
  truncated,
  waitParameter,
} from "../src/bounds.js";
import { parseRetryAfter } from "../src/classifiers.js";

describe("backoff", () => {
  it("doubles from 0.2 s with equal jitter, capped at 30 s", () => {
    assert.equal(backoffSeconds(0, () => 0), 0.1);
    assert.equal(backoffSeconds(0, () => 0.999999), 0.2 * 0.5 + 0.999999 * 0.1);
    assert.equal(backoffSeconds(3, () => 0), 0.8);
    assert.equal(backoffSeconds(100, () => 0), RETRY_CAP_SECONDS / 2);
    for (let failures = 0; failures < 40; failures++) {
      const delay = backoffSeconds(failures);
      assert.ok(delay > 0 && delay <= RETRY_CAP_SECONDS, `${failures}: ${delay}`);
    }
  });
});

describe("leases", () => {
  it("beat a third of the tightest timeout, at least every 0.2 s, else every minute", () => {
    assert.equal(beatIntervalSeconds(30, 3600), 10);
    assert.equal(beatIntervalSeconds(0, 0.3), 0.2);
    assert.equal(beatIntervalSeconds(0, 0), 60);
    assert.equal(leaseSeconds(30, 3600), 30);
    assert.equal(leaseSeconds(0, 0), 3600);
  });
});

describe("waits", () => {
  it("fit the API's ?wait= pattern", () => {
    const pattern = /^(([0-5]?[0-9](\.[0-9]+)?|60) ?(s|sec|secs|second|seconds)?|1 ?(m|min|mins|minute|minutes))$/;
    for (const seconds of [0, 0.0004, 1.5, 59.9999, 60, 61, 1e9]) {
      assert.match(waitParameter(seconds), pattern, String(seconds));
    }
    assert.equal(waitParameter(75), "60s");
    assert.equal(waitParameter(2.5), "2.500s");
  });
});

describe("Retry-After", () => {
  const now = new Date("2026-01-01T00:00:00Z");
  it("reads decimal seconds and HTTP dates; refuses the rest", () => {
    assert.equal(parseRetryAfter("120", now), 120);
    assert.equal(parseRetryAfter(" 0.5 ", now), 0.5);
    assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:01:00 GMT", now), 60);
    for (const garbage of ["0", "-1", "1e3", "1,5", "+5", "1_000", "soon", "", "Wed, 31 Dec 2025 00:00:00 GMT"]) {
      assert.equal(parseRetryAfter(garbage, now), undefined, garbage);
    }
  });
});

describe("task logs", () => {
  const at = new Date("2026-01-01T00:00:00Z");
  it("cut a long line, saying so, and normalize the level", () => {
    const buffer = new LogBuffer();
    buffer.add("x".repeat(MAX_LOG_LINE + 100), "warning-and-then-some", at, 0);
    const [line] = buffer.drain();
    assert.equal(line?.message?.length, MAX_LOG_LINE);
    assert.ok(line?.message?.endsWith(" [line truncated]"));
    assert.equal(line?.level, "WARNING-AND-THEN");
    assert.equal(line?.at, "2026-01-01T00:00:00.000Z");
  });
  it("ship at most 1000 lines a heartbeat, keeping the rest for the next", () => {
    const buffer = new LogBuffer();
    for (let i = 0; i < 1500; i++) buffer.add(`line ${i}`, "INFO", at, i);
    assert.equal(buffer.drain().length, MAX_LOG_LINES);
    const rest = buffer.drain();
    assert.equal(rest.length, 500);
    assert.equal(rest[0]?.message, "line 1000");
    assert.equal(buffer.waitingSince(), undefined);
  });
  it("cut a result's lines to 1000, counting what was dropped", () => {
    const buffer = new LogBuffer();
    for (let i = 0; i < 1500; i++) buffer.add(`line ${i}`, "INFO", at, i);
    const lines = buffer.drain(true);
    assert.equal(lines.length, MAX_LOG_LINES);
    assert.match(lines.at(-1)?.message ?? "", /^\[501 log lines dropped by the worker/);
    assert.deepEqual(buffer.drain(), []);
  });
  it("put back what a failed heartbeat did not deliver, first in line", () => {
    const buffer = new LogBuffer();
    buffer.add("first", "INFO", at, 5);
    const shipped = buffer.drain();
    buffer.add("second", "INFO", at, 7);
    buffer.putBack(shipped, 9);
    assert.deepEqual(buffer.drain().map((l) => l.message), ["first", "second"]);
  });
  it("reasons keep their length when short", () => {
    assert.equal(truncated("short"), "short");
  });
});
