/**
 * Retry classifiers: per-error verdicts, as the Python SDK's
 * `sluiceway.worker.classifiers`. A classifier returns a RetryOverride, or
 * undefined for "no opinion: the TaskDefinition's policy decides".
 *
 * - `nonRetryable`: reported FAILED_WITH_TERMINAL_ERROR, never retried.
 * - `transient`: reported FAILED (an attempt is spent), `delaySeconds` as an exact Retry-After.
 * - `indefinite`: reported FAILED with retryKind `indefinite`: the server retries with
 *   no attempt ceiling until the task's deadline.
 *
 * Classify by status, not by class: 429 and 408 are 4xx and the statuses most worth retrying.
 */

export type RetryKind = "transient" | "indefinite" | "nonRetryable";

export interface RetryOverride {
  kind?: RetryKind;
  /** Seconds, honoured exactly (never jittered). */
  delaySeconds?: number;
}

export type Classifier = (error: unknown, attempt: number) => RetryOverride | undefined;

const SECONDS = /^[0-9]+(\.[0-9]+)?$/;
const MAX_SECONDS = 1e15; // representability, not a policy: the server's ceiling clamps

/**
 * Seconds to wait from a Retry-After value, or undefined for anything that is
 * not a positive delay. The grammar is closed on purpose: decimal seconds or
 * an HTTP date; a sign, an exponent, a comma decimal or `0` fall back to the policy.
 */
export function parseRetryAfter(value: string | null | undefined, now: Date = new Date()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (SECONDS.test(text)) {
    const seconds = Math.min(Number(text), MAX_SECONDS);
    return seconds > 0 ? seconds : undefined;
  }
  // An HTTP date (IMF-fixdate and its obsolete forms) always names a weekday and GMT.
  if (!/^[A-Za-z]{3},? .*GMT$/.test(text) && !/^[A-Za-z]+, .*GMT$/.test(text)) return undefined;
  const when = Date.parse(text);
  if (Number.isNaN(when)) return undefined;
  const seconds = (when - now.getTime()) / 1000;
  return seconds > 0 ? seconds : undefined;
}

function field(value: unknown, name: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}

function headerOf(headers: unknown, name: string): string | undefined {
  if (headers === null || headers === undefined) return undefined;
  if (typeof (headers as Headers).get === "function") {
    const found = (headers as Headers).get(name);
    return found === null ? undefined : found;
  }
  if (typeof headers === "object") {
    for (const [key, value] of Object.entries(headers as Record<string, unknown>)) {
      if (key.toLowerCase() === name) return String(value);
    }
  }
  return undefined;
}

/** The server's delay hint on an error (`error.response.headers` or `error.headers`):
 * Retry-After wins over X-Retry-After. */
export function retryAfterHint(error: unknown, now: Date = new Date()): number | undefined {
  for (const headers of [field(field(error, "response"), "headers"), field(error, "headers")]) {
    if (headers === undefined || headers === null) continue;
    for (const name of ["retry-after", "x-retry-after"]) {
      const value = headerOf(headers, name);
      if (value !== undefined) return parseRetryAfter(value, now);
    }
    return undefined;
  }
  return undefined;
}

/** An HTTP status from the common client error shapes, duck-typed. */
export function statusOf(error: unknown): number | undefined {
  const response = field(error, "response");
  for (const candidate of [
    field(response, "status"),
    field(response, "statusCode"),
    field(error, "status"),
    field(error, "statusCode"),
  ]) {
    if (typeof candidate === "number" && Number.isInteger(candidate)) return candidate;
  }
  return undefined;
}

function nameOf(error: unknown): string {
  const name = field(error, "name");
  return typeof name === "string" ? name : "";
}

/** Claims HTTP 429 (and errors named RateLimitError) with the server's hint as the delay. */
export function makeRateLimitAwareClassifier(claimKind: "indefinite" | "transient" = "indefinite"): Classifier {
  return (error) => {
    if (statusOf(error) !== 429 && nameOf(error) !== "RateLimitError") return undefined;
    const delaySeconds = retryAfterHint(error);
    return delaySeconds === undefined ? { kind: claimKind } : { kind: claimKind, delaySeconds };
  };
}

export const rateLimitAwareClassifier: Classifier = makeRateLimitAwareClassifier("indefinite");

const TRANSIENT_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EAI_AGAIN",
  "ENOTFOUND",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_SOCKET",
]);

export interface TaxonomyOptions {
  transientStatus?: Iterable<number>;
  nonRetryableStatus?: Iterable<number>;
  /** Error names (or Node error codes) that are transient. */
  includeNames?: Iterable<string>;
}

/** Connection errors, timeouts and 5xx/408/425 are transient; other 4xx are
 * non-retryable; anything else: no opinion. Never `indefinite`. */
export function failureTaxonomyClassifier(options: TaxonomyOptions = {}): Classifier {
  const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);
  const transient = new Set(options.transientStatus ?? [408, 425, ...range(500, 600)]);
  const terminal = new Set(
    options.nonRetryableStatus ?? range(400, 500).filter((s) => ![408, 425, 429].includes(s)),
  );
  const names = new Set(options.includeNames ?? ["TimeoutError", "ConnectTimeoutError", ...TRANSIENT_CODES]);
  return (error) => {
    const code = field(error, "code") ?? field(field(error, "cause"), "code");
    const status = statusOf(error);
    if (
      names.has(nameOf(error)) ||
      (typeof code === "string" && names.has(code)) ||
      (status !== undefined && transient.has(status))
    ) {
      return { kind: "transient" };
    }
    if (status !== undefined && terminal.has(status)) return { kind: "nonRetryable" };
    return undefined;
  };
}

/** The first override wins; a classifier that throws or returns something
 * else is skipped (and reported through `onBroken`), never fatal. */
export function composeRetryClassifiers(
  ...classifiers: Array<Classifier | undefined>
): Classifier {
  return (error, attempt) => {
    for (const classifier of classifiers) {
      if (classifier === undefined) continue;
      let verdict: unknown;
      try {
        verdict = classifier(error, attempt);
      } catch (broken) {
        process.emitWarning(`retry classifier threw ${String(broken)}; skipping it`);
        continue;
      }
      if (verdict === undefined || verdict === null) continue;
      if (typeof verdict !== "object") {
        process.emitWarning(`retry classifier returned ${String(verdict)}, not a RetryOverride; skipping it`);
        continue;
      }
      return verdict as RetryOverride;
    }
    return undefined;
  };
}
