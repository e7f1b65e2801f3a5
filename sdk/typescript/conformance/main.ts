/**
 * The TypeScript SDK's conformance program (sdk/conformance/README.md):
 *
 *   conformance worker                                  run every conformance handler until SIGTERM
 *   conformance start <workflow> <input-json> <wait-s>  start a run with start-and-wait, print one JSON line
 *
 * Configured only by SLUICEWAY_URL, SLUICEWAY_NAMESPACE, SLUICEWAY_TOKEN,
 * SLUICEWAY_WORKER_ID and SLUICEWAY_SHUTDOWN_GRACE.
 */

import { setTimeout as sleep } from "node:timers/promises";

import { ApiError, Client, isTerminal, RetryAfter, Snooze, TerminalError, Worker, type Task } from "../src/index.js";

const CONCURRENCY = 4;

function env(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value === "" ? undefined : value;
}

/** Sleep `seconds`, or until the task's signal aborts (then throw its reason). */
async function nap(task: Task, seconds: number): Promise<void> {
  await sleep(seconds * 1000, undefined, { signal: task.signal });
}

export function conformanceWorker(): Worker {
  const worker = new Worker({
    token: env("SLUICEWAY_TOKEN"),
    shutdownGraceSeconds: Number(env("SLUICEWAY_SHUTDOWN_GRACE") ?? 30),
  });
  const snoozed = new Set<string>();
  const handlers: Record<string, (task: Task) => Promise<unknown>> = {
    conformance_echo: async (task) => ({ echo: task.input, attempt: task.attempt }),
    conformance_flaky: async (task) => {
      if (task.attempt < Number(task.input.succeedOnAttempt ?? 1)) throw new Error(`flaky attempt ${task.attempt}`);
      return { attempt: task.attempt };
    },
    conformance_terminal: async (task) => {
      throw new TerminalError(`INVALID_ARGUMENT: ${String(task.input.why ?? "")}`);
    },
    conformance_retry_after: async (task) => {
      if (task.attempt === 1) throw new RetryAfter(Number(task.input.seconds ?? 1));
      return { attempt: task.attempt };
    },
    conformance_snooze: async (task) => {
      if (!snoozed.has(task.taskId)) {
        snoozed.add(task.taskId);
        throw new Snooze(Number(task.input.seconds ?? 1));
      }
      return { snoozed: true };
    },
    conformance_heartbeat: async (task) => {
      const seconds = Number(task.input.seconds ?? 1);
      await nap(task, seconds);
      return { slept: task.input.seconds ?? seconds };
    },
    conformance_log: async (task) => {
      task.log("first line");
      task.log(`second line ${String(task.input.tag ?? "")}`);
      return {};
    },
    conformance_slow: async (task) => {
      await nap(task, Number(task.input.seconds ?? 1));
      return { attempt: task.attempt };
    },
    conformance_big: async (task) => ({ blob: "x".repeat(Number(task.input.bytes ?? 0)) }),
    conformance_trace: async (task) => ({ traceparent: task.traceparent }),
    conformance_attributes: async (task) => {
      task.upsertSearchAttributes({ stage: task.input.stage });
      return {};
    },
  };
  for (const [taskType, handler] of Object.entries(handlers)) worker.register(taskType, handler, { concurrency: CONCURRENCY });
  return worker;
}

async function start(workflow: string, inputJson: string, waitSeconds: string): Promise<number> {
  const client = new Client({ token: env("SLUICEWAY_TOKEN") });
  try {
    const run = await client.startAndWait(workflow, JSON.parse(inputJson) as Record<string, unknown>, {
      timeoutSeconds: Number(waitSeconds),
    });
    const line = isTerminal(run.status)
      ? { id: run.id, status: run.status, output: run.output ?? {} }
      : { id: run.id, status: "RUNNING" };
    console.log(JSON.stringify(line));
    return 0;
  } catch (error) {
    if (error instanceof ApiError) {
      console.log(JSON.stringify({ error: String(error.status), message: error.serverMessage }));
      return 1;
    }
    // No answer at all (refused connection, timeout): not a status, but still one JSON line.
    const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
    console.log(JSON.stringify({ error: "connection", message: `${String(error)}${cause}` }));
    return 1;
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === "worker" && args.length === 0) {
    await conformanceWorker().runUntilSignal();
    return 0;
  }
  if (command === "start" && args.length === 3) {
    const [workflow, inputJson, waitSeconds] = args as [string, string, string];
    return start(workflow, inputJson, waitSeconds);
  }
  console.error("usage: conformance worker | conformance start <workflow> <input-json> <wait-seconds>");
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
// Idle keep-alive sockets may hold the event loop a while: leave once stdout has drained.
process.stdout.write("", () => setTimeout(() => process.exit(), 200).unref());
