// Remote only, over https:// (run with DENO_CERT=<ca.pem>): the everyday calls through
// TLS with ALPN h2 — set/get, getMany, list, atomic with checks, sum, delete and watch.
import { assert, assertEquals, collect, IS_REMOTE, KV_URL, main, ns, openKv, readFrame, step } from "./_lib.ts";

await main("tls_roundtrip", async () => {
  assert(IS_REMOTE && KV_URL.startsWith("https://"), `tls_roundtrip.ts needs an https:// KV_URL, got ${KV_URL}`);
  step("open over https");
  const kv = await openKv();
  const p = ns("tls");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];

  step("set / get / getMany");
  const r1 = await kv.set(k("a"), { over: "tls" });
  assert(r1.ok, "set");
  assertEquals(await kv.get(k("a")), { key: k("a"), value: { over: "tls" }, versionstamp: r1.versionstamp }, "get");
  const many = await kv.getMany([k("a"), k("missing")]);
  assertEquals(many.map((e) => e.value), [{ over: "tls" }, null], "getMany");

  step("list");
  const a = kv.atomic();
  for (let i = 0; i < 25; i++) a.set(k("list", i), i);
  assert((await a.commit()).ok, "atomic with 25 sets");
  const listed = await collect(kv.list<number>({ prefix: k("list") }, { batchSize: 10 }));
  assertEquals(listed.map((e) => e.value), Array.from({ length: 25 }, (_, i) => i), "list in batches of 10");
  const reversed = await collect(kv.list<number>({ prefix: k("list") }, { reverse: true, limit: 3 }));
  assertEquals(reversed.map((e) => e.value), [24, 23, 22], "reverse list with limit");

  step("atomic: check, conflict, sum");
  const cur = await kv.get(k("a"));
  const ok = await kv.atomic().check(cur).set(k("a"), "second").sum(k("n"), 5n).commit();
  assert(ok.ok, "atomic with a fresh check");
  const stale = await kv.atomic().check(cur).set(k("a"), "third").commit();
  assert(!stale.ok, "atomic with a stale check must fail");
  assertEquals((await kv.get(k("n"))).value, new Deno.KvU64(5n), "sum");

  step("watch");
  const reader = kv.watch([k("w")]).getReader();
  const first = await readFrame<Deno.KvEntryMaybe<unknown>[]>(reader, 5000, "first watch frame");
  assertEquals(first.map((e) => e.value), [null], "first watch frame");
  const rw = await kv.set(k("w"), "changed");
  let frame = await readFrame<Deno.KvEntryMaybe<unknown>[]>(reader, 5000, "frame after set");
  if (frame[0].versionstamp !== rw.versionstamp) {
    frame = await readFrame<Deno.KvEntryMaybe<unknown>[]>(reader, 5000, "second frame after set");
  }
  assertEquals(frame.map((e) => e.value), ["changed"], "watch frame after set");
  await reader.cancel();

  step("delete");
  await kv.delete(k("a"));
  assertEquals((await kv.get(k("a"))).value, null, "get after delete");
  kv.close();
  return { url: KV_URL };
});
