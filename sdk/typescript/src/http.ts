/**
 * The API over HTTP, typed from sdk/openapi.json by openapi-typescript and
 * called through openapi-fetch. Nothing else: the SDK knows the server only
 * through the public API, like a worker in any language.
 */

import { readFileSync } from "node:fs";

import createClient, { type Client as FetchClient } from "openapi-fetch";

import { ApiError } from "./errors.js";
import type { components, paths } from "./generated/api.js";

export type Schemas = components["schemas"];
export type Api = FetchClient<paths>;

/** Who the caller is: a bearer token (or a file holding one, re-read on every
 * request as projected ServiceAccount tokens rotate), or an API key. */
export interface Credentials {
  token?: string | undefined;
  tokenFile?: string | undefined;
  apiKey?: string | undefined;
}

export interface Connection extends Credentials {
  /** The API's base URL, e.g. http://sluiceway:8080 */
  url: string;
  /** A fetch implementation (the global one by default). */
  fetch?: typeof fetch | undefined;
}

export function authHeaders(credentials: Credentials): Record<string, string> {
  if (credentials.tokenFile) {
    return { Authorization: `Bearer ${readFileSync(credentials.tokenFile, "utf8").trim()}` };
  }
  if (credentials.token) return { Authorization: `Bearer ${credentials.token}` };
  if (credentials.apiKey) return { "X-API-Key": credentials.apiKey };
  return {};
}

/** The credentials given, else those of the environment (a worker pod's
 * SLUICEWAY_TOKEN_FILE, or SLUICEWAY_TOKEN, SLUICEWAY_API_KEY), as the Python SDK reads them. */
export function credentialsOr(given: Credentials, env: NodeJS.ProcessEnv = process.env): Credentials {
  if (given.token || given.tokenFile || given.apiKey) return given;
  return { token: env.SLUICEWAY_TOKEN || undefined, tokenFile: env.SLUICEWAY_TOKEN_FILE || undefined, apiKey: env.SLUICEWAY_API_KEY || undefined };
}

/** A typed client whose every request carries the caller's credentials. */
export function connect(connection: Connection): Api {
  const credentials = credentialsOr(connection);
  const api = createClient<paths>({
    baseUrl: connection.url.replace(/\/+$/, ""),
    ...(connection.fetch ? { fetch: connection.fetch } : {}),
  });
  api.use({
    onRequest({ request }) {
      for (const [name, value] of Object.entries(authHeaders(credentials))) request.headers.set(name, value);
      return request;
    },
  });
  return api;
}

/** The answer's body, or an ApiError carrying the server's refusal. */
export function answered<T>(outcome: { data?: T; error?: unknown; response: Response }): T {
  if (!outcome.response.ok || outcome.data === undefined) {
    throw new ApiError(outcome.response.status, outcome.error ?? null);
  }
  return outcome.data;
}

/** A signal for one request: the caller's, and a deadline of `seconds`. */
export function deadline(seconds: number, signal?: AbortSignal): AbortSignal {
  const timeout = AbortSignal.timeout(Math.ceil(seconds * 1000));
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

/** The worker protocol of one namespace. */
export class WorkerApi {
  constructor(
    private readonly api: Api,
    private readonly namespace: string,
  ) {}

  private get path(): { path: { namespace: string } } {
    return { path: { namespace: this.namespace } };
  }

  async poll(taskTypes: string[], workerId: string, count: number, pollTimeoutSeconds: number): Promise<Schemas["LeasedTask"][]> {
    const body = answered(
      await this.api.POST("/v1/ns/{namespace}/tasks/poll", {
        params: this.path,
        body: { taskTypes, workerId, count, pollTimeoutSeconds },
        signal: deadline(pollTimeoutSeconds + 30),
      }),
    );
    return body.tasks;
  }

  /** One outcome per result, in order (200 applied, 404 unknown, 409 stale, 413 over the payload
   * limit, 422 invalid), and what `next` leased. */
  async results(
    results: Schemas["TaskResult"][],
    next?: { workerId: string; counts: Record<string, number> },
  ): Promise<{ outcomes: Schemas["ItemOutcome"][]; leased: Schemas["LeasedTask"][] }> {
    const body = answered(
      await this.api.POST("/v1/ns/{namespace}/tasks/results", {
        params: this.path,
        body: next ? { results, next } : { results },
        signal: deadline(60),
      }),
    );
    return { outcomes: body.results, leased: body.tasks ?? [] };
  }

  async heartbeats(beats: Schemas["Heartbeat"][]): Promise<Schemas["HeartbeatBatchResponse"]> {
    return answered(
      await this.api.POST("/v1/ns/{namespace}/tasks/heartbeats", {
        params: this.path,
        body: { heartbeats: beats },
        signal: deadline(30),
      }),
    );
  }
}
