// Types of the API from sdk/openapi.json, by openapi-typescript, into
// src/generated/api.ts (committed). `--check`: regenerate into memory and fail,
// with a diff, when the committed file has drifted (make lint).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import openapiTS, { astToString } from "openapi-typescript";

const here = new URL("..", import.meta.url);
const target = new URL("src/generated/api.ts", here);
const header =
  "// Generated from sdk/openapi.json by openapi-typescript (npm run generate): do not edit.\n" +
  "// `make lint` fails when it drifts from the document.\n\n";
// Fields with a default stay optional in request bodies: the server fills them in.
const ast = await openapiTS(new URL("../openapi.json", here), { defaultNonNullable: false });
const generated = header + astToString(ast);

if (process.argv.includes("--check")) {
  const committed = readFileSync(target, "utf8");
  if (committed !== generated) {
    const dir = mkdtempSync(join(tmpdir(), "sluiceway-api-"));
    const fresh = join(dir, "api.ts");
    writeFileSync(fresh, generated);
    try {
      execFileSync("diff", ["-u", target.pathname, fresh], { stdio: "inherit" });
    } catch {
      // diff exits 1 on a difference; its output is the point
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    console.error("sdk/typescript/src/generated/api.ts is stale: run `npm run generate` in sdk/typescript");
    process.exit(1);
  }
} else {
  writeFileSync(target, generated);
}
