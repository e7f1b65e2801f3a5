/**
 * The example workers of examples/workers.py, in TypeScript, with the same
 * outputs: the README's example workflows run on either.
 *
 *   SLUICEWAY_URL=http://127.0.0.1:8080 SLUICEWAY_NAMESPACE=default node dist/examples/worker.js
 *
 * It runs until SIGTERM (or Ctrl-C), then finishes what it holds (30 s) and
 * hands back the rest.
 */

import { setTimeout as sleep } from "node:timers/promises";

import {
  composeRetryClassifiers,
  failureTaxonomyClassifier,
  rateLimitAwareClassifier,
  TerminalError,
  Worker,
  type Task,
} from "../src/index.js";

/** A value in a log line, as Python's %s shows it. */
function shown(value: unknown): string {
  return value === undefined || value === null ? "None" : String(value);
}

export function exampleWorker(): Worker {
  const worker = new Worker({
    token: process.env.SLUICEWAY_TOKEN || undefined,
    classifier: composeRetryClassifiers(rateLimitAwareClassifier, failureTaxonomyClassifier()),
  });

  worker.register(
    "charge",
    async (task: Task) => {
      const amount = Number(task.input.amount ?? 0);
      if (!(amount > 0)) throw new TerminalError("INVALID_ARGUMENT: amount must be positive");
      // A real worker passes task.idempotencyKey to the provider: the same for every attempt.
      return { charged: task.input.amount, idempotencyKey: task.idempotencyKey };
    },
    { concurrency: 4 },
  );

  // Thumbnails (05-fan-out.yaml): what each resize logs is kept with its run.
  worker.register(
    "resize_image",
    async (task) => {
      const { url, width } = task.input;
      task.log(`resizing ${shown(url)} to ${shown(width)} px wide`);
      await sleep(500, undefined, { signal: task.signal }); // pretend to work
      task.log(`thumbnail of ${shown(url)} ready`);
      return { url: url ?? null, width: width ?? null };
    },
    { concurrency: 8 },
  );

  worker.register(
    "sync_tenant",
    async (task) => {
      await sleep(2000, undefined, { signal: task.signal });
      return { tenant: task.input.tenantId ?? null, synced: true };
    },
    { concurrency: 4 },
  );

  worker.register("export_report", () => ({ report: "ok" }));
  worker.register("sync_inventory", () => ({ inventory: "ok" }));
  worker.register("partner_api", async () => ({ partner: "ok" }), { concurrency: 4 });

  // Orders (15-orders.yaml): what they log is kept with the run (`sluiceway logs RUN`).
  worker.register(
    "reserve_items",
    async (task) => {
      const items = Array.isArray(task.input.items) ? task.input.items : [];
      task.log(`reserving ${items.length} items`);
      return { reserved: items.length };
    },
    { concurrency: 4 },
  );

  worker.register(
    "take_payment",
    async (task) => {
      const amount = task.input.amount;
      const card = typeof task.input.card === "string" && task.input.card ? task.input.card : "visa";
      task.log(`charging ${shown(amount)} to ${card}`);
      if (card === "declined") throw new TerminalError("DECLINED: the bank refused the card");
      task.upsertSearchAttributes({ stage: "paid" });
      return { receipt: `r-${task.executionId.slice(0, 8)}`, idempotencyKey: task.idempotencyKey };
    },
    { concurrency: 4 },
  );

  worker.register(
    "ship_order",
    async (task) => {
      await sleep(Number(task.input.seconds || 0) * 1000, undefined, { signal: task.signal });
      task.log(`parcel with ${shown(task.input.reserved)} items handed to the carrier`);
      task.upsertSearchAttributes({ stage: "shipped" });
      return { parcel: "p-1" };
    },
    { concurrency: 4 },
  );

  worker.register("sync_page", async (task) => {
    const cursor = Math.trunc(Number(task.input.cursor || 0));
    return { synced: cursor, nextCursor: String(cursor + 100) }; // examples/09-chain.yaml continues from here
  });

  return worker;
}

await exampleWorker().runUntilSignal();
process.stdout.write("", () => setTimeout(() => process.exit(), 200).unref());
