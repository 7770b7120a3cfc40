// One of several processes hammering the same database (run by e2e tests).
// env: WORKER_ID, WORKER_OPS, WORKER_NS (shared namespace name)
import { assert, main, openKv, retryLocalBusy, step } from "./_lib.ts";

await main("concurrent_worker", async () => {
  const id = Number(Deno.env.get("WORKER_ID") ?? "0");
  const ops = Number(Deno.env.get("WORKER_OPS") ?? "50");
  const space = Deno.env.get("WORKER_NS") ?? "default";
  const p = ["e2e", "multiproc", space];
  const kv = await openKv();
  step("concurrent sums and unique writes");
  const stamps = await Promise.all(Array.from({ length: ops }, async (_, i) => {
    const r = await retryLocalBusy(() =>
      kv.atomic()
        .sum([...p, "counter"], 1n)
        .set([...p, "item", id, i], { id, i })
        .commit()
    );
    assert(r.ok, `worker ${id} op ${i}`);
    return r.versionstamp;
  }));
  step("OCC increments");
  let conflicts = 0;
  for (let n = 0; n < 10; n++) {
    for (;;) {
      const cur = await retryLocalBusy(() => kv.get<number>([...p, "occ"]));
      const r = await retryLocalBusy(() => kv.atomic().check(cur).set([...p, "occ"], (cur.value ?? 0) + 1).commit());
      if (r.ok) break;
      conflicts++;
    }
  }
  kv.close();
  return { id, ops, conflicts, maxVersionstamp: stamps.reduce((a, b) => (a > b ? a : b)) };
});
