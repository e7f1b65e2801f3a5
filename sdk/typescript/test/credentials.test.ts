/** Whose requests these are: the credentials given, else the environment's, a token file re-read each time. */

import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";

import { authHeaders, credentialsOr } from "../src/http.js";

describe("credentials", () => {
  it("given ones win over the environment's", () => {
    const env = { SLUICEWAY_TOKEN: "from-env" };
    assert.deepEqual(authHeaders(credentialsOr({ apiKey: "k" }, env)), { "X-API-Key": "k" });
    assert.deepEqual(authHeaders(credentialsOr({}, env)), { Authorization: "Bearer from-env" });
    assert.deepEqual(authHeaders(credentialsOr({}, {})), {});
  });
  it("a token file (a worker pod's SLUICEWAY_TOKEN_FILE) is read on every request, as it rotates", () => {
    const file = join(mkdtempSync(join(tmpdir(), "sluiceway-token-")), "token");
    writeFileSync(file, "first\n");
    const credentials = credentialsOr({}, { SLUICEWAY_TOKEN_FILE: file, SLUICEWAY_TOKEN: "ignored" });
    assert.deepEqual(authHeaders(credentials), { Authorization: "Bearer first" });
    writeFileSync(file, "second");
    assert.deepEqual(authHeaders(credentials), { Authorization: "Bearer second" });
  });
});
