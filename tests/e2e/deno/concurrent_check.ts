// Verifies the result of several concurrent_worker.ts processes.
// env: WORKER_NS, EXPECT_WORKERS, WORKER_OPS
import { assertEquals, collect, main, openKv, step } from "./_lib.ts";

await main("concurrent_check", async () => {
  const workers = Number(Deno.env.get("EXPECT_WORKERS"));
  const ops = Number(Deno.env.get("WORKER_OPS") ?? "50");
  const p = ["e2e", "multiproc", Deno.env.get("WORKER_NS") ?? "default"];
  const kv = await openKv();
  step("totals");
  assertEquals((await kv.get([...p, "counter"])).value, new Deno.KvU64(BigInt(workers * ops)), "shared KvU64 counter");
  assertEquals((await kv.get([...p, "occ"])).value, workers * 10, "shared OCC counter");
  const items = await collect(kv.list<{ id: number; i: number }>({ prefix: [...p, "item"] }, { batchSize: 500 }));
  assertEquals(items.length, workers * ops, "unique items");
  for (let w = 0; w < workers; w++) {
    assertEquals(items.filter((e) => e.value.id === w).length, ops, `items of worker ${w}`);
  }
  kv.close();
  return { total: workers * ops };
});
