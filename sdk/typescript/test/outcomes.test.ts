/** Classification of a handler's outcome into the result body the server gets. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { MAX_DELAY_SECONDS, MAX_REASON, TRUNCATED } from "../src/bounds.js";
import { failureTaxonomyClassifier, rateLimitAwareClassifier } from "../src/classifiers.js";
import { RetryAfter, Snooze, TerminalError } from "../src/errors.js";
import { completed, failed, reasonOf, refusedResult, result } from "../src/outcomes.js";

const lease = { taskId: "6f1c0000-0000-0000-0000-000000000001", epoch: 3 };

describe("a handler's error becomes", () => {
  const cases: Array<[string, unknown, Record<string, unknown>]> = [
    ["TerminalError: FAILED_WITH_TERMINAL_ERROR", new TerminalError("INVALID_ARGUMENT: no"), { status: "FAILED_WITH_TERMINAL_ERROR", reason: "TerminalError: INVALID_ARGUMENT: no" }],
    ["RetryAfter: FAILED with the delay as a signal", new RetryAfter(7), { status: "FAILED", reason: "RetryAfter: retry after 7 s", retryAfterSeconds: 7, retryAfterSource: "signal" }],
    ["RetryAfter without budget: a snooze", new RetryAfter(7, { consumeBudget: false }), { status: "IN_PROGRESS", callbackAfterSeconds: 7 }],
    ["Snooze: IN_PROGRESS with callbackAfterSeconds", new Snooze(12), { status: "IN_PROGRESS", callbackAfterSeconds: 12 }],
    ["any other error: FAILED with Name: message", new RangeError("too big"), { status: "FAILED", reason: "RangeError: too big" }],
    ["a thrown string: FAILED with it", "boom", { status: "FAILED", reason: "Error: boom" }],
  ];
  for (const [name, error, expected] of cases) {
    it(name, () => {
      assert.deepEqual(failed(lease, error, 1), { ...lease, ...expected });
    });
  }
});

describe("classifiers", () => {
  it("a 429 with Retry-After is indefinite, honouring the delay as a hint", () => {
    const error = Object.assign(new Error("slow down"), { status: 429, headers: { "Retry-After": "0.5" } });
    assert.deepEqual(failed(lease, error, 1, [rateLimitAwareClassifier]), {
      ...lease, status: "FAILED", reason: "Error: slow down", retryKind: "indefinite", retryAfterSeconds: 0.5,
    });
  });
  it("a 404 is terminal by the taxonomy, a 503 an ordinary failure", () => {
    const taxonomy = failureTaxonomyClassifier();
    assert.equal(failed(lease, Object.assign(new Error("gone"), { status: 404 }), 1, [taxonomy]).status, "FAILED_WITH_TERMINAL_ERROR");
    assert.deepEqual(failed(lease, Object.assign(new Error("down"), { status: 503 }), 1, [taxonomy]), {
      ...lease, status: "FAILED", reason: "Error: down",
    });
  });
  it("the handler's own classifier wins over the worker's; a throwing one is skipped", () => {
    const broken = (): never => { throw new Error("broken"); };
    const mine = () => ({ kind: "nonRetryable" as const });
    const error = Object.assign(new Error("x"), { status: 503 });
    assert.equal(failed(lease, error, 1, [broken, mine, failureTaxonomyClassifier()]).status, "FAILED_WITH_TERMINAL_ERROR");
  });
});

describe("what is sent stays inside the API's bounds", () => {
  it("a reason past 8192 characters is cut, saying so", () => {
    const body = failed(lease, new Error("x".repeat(20_000)), 1);
    assert.equal(body.reason?.length, MAX_REASON);
    assert.ok(body.reason?.endsWith(TRUNCATED));
  });
  it("delays are clamped to a year, NaN and negatives to 0", () => {
    assert.equal(failed(lease, new Snooze(1e12), 1).callbackAfterSeconds, MAX_DELAY_SECONDS);
    assert.equal(result(lease, "IN_PROGRESS", { callbackAfterSeconds: Number.NaN }).callbackAfterSeconds, 0);
    assert.equal(result(lease, "FAILED", { retryAfterSeconds: -5 }).retryAfterSeconds, 0);
  });
  it("an output that is not JSON is reported FAILED saying so, keeping the logs", () => {
    const logs = [{ level: "INFO", message: "hi" }];
    const body = completed({ ...lease, logs }, { big: 10n });
    assert.equal(body.status, "FAILED");
    assert.match(body.reason ?? "", /^the output is not JSON: /);
    assert.deepEqual(body.logs, logs);
    assert.equal(body.output, undefined);
  });
  it("outputs: nothing is {}, a non-object is {result}", () => {
    assert.deepEqual(completed(lease, undefined).output, {});
    assert.deepEqual(completed(lease, 42).output, { result: 42 });
    assert.deepEqual(completed(lease, [1]).output, { result: [1] });
  });
  it("logs and search attributes ride with the result", () => {
    const body = completed({ ...lease, logs: [{ level: "INFO", message: "a" }], searchAttributes: { stage: "paid" } }, {});
    assert.deepEqual(body.searchAttributes, { stage: "paid" });
    assert.equal(body.logs?.length, 1);
  });
  it("a refused result is replaced by a bare FAILED with the server's reason", () => {
    const sent = completed({ ...lease, searchAttributes: { stage: "x" } }, { bad: "\u0000" });
    assert.deepEqual(refusedResult(sent, "output: NUL"), {
      ...lease, status: "FAILED", reason: "the server refused the worker's result: output: NUL",
    });
  });
  it("reasons name the error class", () => {
    assert.equal(reasonOf(new TerminalError("x")), "TerminalError: x");
  });
});
