// Driven by ../queue_clients.test.mjs: runs one scenario of ../queue_scenarios.mjs with the
// Deno client library (clients/deno) against KV_URL; keysIfUndelivered entries are read back
// through Deno.openKv. env: QUEUE_SCENARIO (a name), QUEUE_ARGS (JSON, optional).
import { KV_URL, main, step } from "./_lib.ts";
import { openQueue } from "../../../clients/deno/mod.ts";
import { scenarios } from "../queue_scenarios.mjs";

await main("queue_scenario", async () => {
  const name = Deno.env.get("QUEUE_SCENARIO") ?? "";
  const run = (scenarios as Record<string, (ctx: unknown) => Promise<unknown>>)[name];
  if (!run) throw new Error(`no scenario ${JSON.stringify(name)}`);
  step(`scenario ${name}`);
  const kv = await Deno.openKv(KV_URL);
  try {
    const result = await run({
      openQueue,
      url: KV_URL,
      token: Deno.env.get("DENO_KV_ACCESS_TOKEN"),
      kvGet: (key: Deno.KvKey) => kv.get(key),
      args: JSON.parse(Deno.env.get("QUEUE_ARGS") ?? "{}"),
    });
    return { scenario: name, result };
  } finally {
    kv.close();
  }
});
