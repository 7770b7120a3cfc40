// Many concurrent operations from several Deno.openKv handles in one process:
// 200 concurrent sums on a shared counter, concurrent unique writes, readers
// running alongside writers, and contended optimistic-concurrency increments.
import { assert, assertEquals, collect, IS_REMOTE, main, ns, openKv, step } from "./_lib.ts";

await main("concurrency", async () => {
  const HANDLES = 4;
  // Several handles = several HTTP/2 connections to the server. Deno's local backend
  // cannot take concurrent writes from several handles on one file ("database is
  // locked"), so the local self-check shares one handle.
  const kvs = IS_REMOTE
    ? await Promise.all(Array.from({ length: HANDLES }, () => openKv()))
    : Array(HANDLES).fill(await openKv());
  const p = ns("concurrency");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];
  const kv = kvs[0];

  step("200 concurrent ops across handles");
  const OPS = 200;
  const results = await Promise.all(Array.from({ length: OPS }, async (_, i) => {
    const h = kvs[i % HANDLES];
    const r = await h.atomic()
      .sum(k("counter"), 1n)
      .mutate({ type: "sum", key: k("v8counter"), value: 2n })
      .set(k("item", i), { i, by: i % HANDLES })
      .commit();
    assert(r.ok, `op ${i} committed`);
    // a read issued in the middle of the storm must see at least this op's effects
    const seen = await h.get<Deno.KvU64>(k("counter"));
    assert(seen.value!.value >= 1n, "counter visible");
    return r.versionstamp;
  }));
  assertEquals(new Set(results).size, OPS, "every commit has a distinct versionstamp");
  const [counter, v8counter] = await kv.getMany([k("counter"), k("v8counter")]);
  assertEquals(counter.value, new Deno.KvU64(BigInt(OPS)), "KvU64 counter total");
  assertEquals(v8counter.value, BigInt(2 * OPS), "V8 bigint counter total");
  const maxStamp = results.reduce((a, b) => (a > b ? a : b));
  assertEquals(counter.versionstamp, maxStamp, "counter carries the last commit's versionstamp");
  const items = await collect(kvs[1].list<{ i: number }>({ prefix: k("item") }));
  assertEquals(items.length, OPS, "all unique keys written");
  assertEquals(items.map((e) => e.value.i).sort((a, b) => a - b), Array.from({ length: OPS }, (_, i) => i), "unique values");

  step("readers alongside writers see monotonic snapshots");
  {
    let stop = false;
    let reads = 0;
    const readers = kvs.map(async (h) => {
      let last = -1n;
      while (!stop) {
        const [c, c2] = await h.getMany<[Deno.KvU64, Deno.KvU64]>([k("pair", "a"), k("pair", "b")]);
        const a = c.value?.value ?? 0n;
        const b = c2.value?.value ?? 0n;
        assertEquals(a, b, "both keys of one atomic are always seen together");
        assert(a >= last, `counter went backwards: ${a} < ${last}`);
        last = a;
        reads++;
      }
    });
    await Promise.all(Array.from({ length: 100 }, (_, i) =>
      kvs[i % HANDLES].atomic().sum(k("pair", "a"), 1n).sum(k("pair", "b"), 1n).commit()));
    stop = true;
    await Promise.all(readers);
    assert(reads > 0, "readers ran");
    assertEquals((await kv.get(k("pair", "a"))).value, new Deno.KvU64(100n), "pair total");
  }

  step("contended optimistic-concurrency increments");
  {
    const key = k("occ");
    await kv.set(key, 0);
    let conflicts = 0;
    const PER = 10;
    await Promise.all(kvs.flatMap((h) => Array.from({ length: 3 }, async () => {
      for (let n = 0; n < PER; n++) {
        for (let attempt = 0;; attempt++) {
          assert(attempt < 500, "OCC increment starved");
          const cur = await h.get<number>(key);
          const r = await h.atomic().check(cur).set(key, cur.value! + 1).commit();
          if (r.ok) break;
          conflicts++;
        }
      }
    })));
    assertEquals((await kv.get(key)).value, HANDLES * 3 * PER, "OCC counter total");
    for (const h of new Set(kvs)) h.close();
    return { ops: OPS, handles: new Set(kvs).size, conflicts };
  }
});
