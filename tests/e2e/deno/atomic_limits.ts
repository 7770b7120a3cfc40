// atomic() at the limits kvconnect promises, beyond the reference denokv server:
// a 1000-mutation write, a 100-check write (the reference allows only 10; Deno's
// client allows 100), and all-or-nothing when a later mutation fails (the
// reference and Deno's local backend keep the earlier mutations; checked remote only).
import {
  assert, assertEquals, assertRejects, collect, IS_REMOTE, main, ns, openKv, step,
} from "./_lib.ts";

await main("atomic_limits", async () => {
  const kv = await openKv();
  const p = ns("atomic_limits");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];

  step("1000-mutation atomic write");
  {
    const a = kv.atomic();
    for (let i = 0; i < 1000; i++) a.set(k("thousand", i), { i, pad: "x".repeat(100) });
    const r = await a.commit();
    assert(r.ok, "1000-mutation commit");
    const all = await collect(kv.list<{ i: number }>({ prefix: k("thousand") }, { batchSize: 500 }));
    assertEquals(all.length, 1000, "1000 keys written");
    assert(all.every((e, i) => e.value.i === i && e.versionstamp === r.versionstamp), "1000 values share the commit versionstamp");
    const d = kv.atomic();
    for (let i = 0; i < 1000; i++) d.delete(k("thousand", i));
    assert((await d.commit()).ok, "1000-delete commit");
    assertEquals((await collect(kv.list({ prefix: k("thousand") }))).length, 0, "1000 keys deleted");
    const over = kv.atomic();
    for (let i = 0; i < 1001; i++) over.set(k("over", i), i);
    await assertRejects(() => over.commit(), [/too many/i], "1001 mutations must be refused");
  }

  step("100-check atomic write");
  {
    const init = kv.atomic();
    for (let i = 0; i < 50; i++) init.set(k("chk", i), i);
    const ir = await init.commit();
    assert(ir.ok, "check fixtures");
    const build = (stale: number | null) => {
      const a = kv.atomic();
      for (let i = 0; i < 50; i++) a.check({ key: k("chk", i), versionstamp: i === stale ? "00000000000000010000" : ir.versionstamp! });
      for (let i = 50; i < 100; i++) a.check({ key: k("chk", i), versionstamp: null });
      return a.set(k("chk", "result"), stale === null ? "ok" : "should-not-exist");
    };
    const bad = await build(37).commit();
    assertEquals(bad, { ok: false }, "100 checks with one stale");
    assertEquals((await kv.get(k("chk", "result"))).versionstamp, null, "nothing written by failed 100-check write");
    const good = await build(null).commit();
    assert(good.ok, "100 passing checks commit (server must accept at least 100 checks)");
    assertEquals((await kv.get(k("chk", "result"))).value, "ok", "100-check write applied");
  }

  step("failing mutation leaves nothing behind");
  {
    await kv.set(k("aon", "n"), 5n);
    const err = await assertRejects(
      () => kv.atomic().set(k("aon", "side"), "effect").mutate({ type: "sum", key: k("aon", "n"), value: 1 }).commit(),
      ["Cannot sum BigInt with Number"],
      "sum of a number onto a bigint",
    );
    if (IS_REMOTE) {
      // Deno's local backend (like the reference denokv) commits the earlier mutations;
      // kvconnect promises all-or-nothing.
      assertEquals((await kv.get(k("aon", "side"))).versionstamp, null, "earlier mutation of a failed write must not be applied");
      assert(/400/.test(err.message), `remote error should carry the HTTP status: ${err.message}`);
    }
    assertEquals((await kv.get(k("aon", "n"))).value, 5n, "value unchanged after failed sum");
  }

  kv.close();
  return {};
});
