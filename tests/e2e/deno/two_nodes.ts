// Two kvconnect nodes on one PostgreSQL, one Deno process talking to both: KV_URL is node A,
// KV_URL_B node B (same access token). Operations alternate between the nodes and every
// answer must be what one server would give: reads after writes, checks, sum/min/max,
// list paging, versionstamp order, expiry, and the client-side enqueue refusal.
// The summary counts the assertions that held ("checks").
import {
  assert, assertEquals, assertRejects, collect, errMessage, main, ns, openKv, sleep, step,
} from "./_lib.ts";

let checks = 0;
function ok(cond: unknown, msg: string): asserts cond {
  assert(cond, msg);
  checks++;
}
function eq(actual: unknown, expected: unknown, msg: string) {
  assertEquals(actual, expected, msg);
  checks++;
}

await main("two_nodes", async () => {
  const urlB = Deno.env.get("KV_URL_B");
  assert(urlB, "env KV_URL_B (node B) is not set");
  const a = await openKv();
  const b = await Deno.openKv(urlB);
  const p = ns("two_nodes");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];
  const U = (n: bigint) => new Deno.KvU64(n);
  const val = async (kv: Deno.Kv, key: Deno.KvKey) => (await kv.get(key)).value;

  step("set via A, get via B (and back)");
  const s1 = await a.set(k("x"), { from: "A", n: 1 });
  eq(await b.get(k("x")), { key: k("x"), value: { from: "A", n: 1 }, versionstamp: s1.versionstamp }, "B reads A's write");
  const s2 = await b.set(k("x"), { from: "B", n: 2 });
  ok(s2.versionstamp > s1.versionstamp, `B's overwrite ${s2.versionstamp} > A's ${s1.versionstamp}`);
  eq(await a.get(k("x")), { key: k("x"), value: { from: "B", n: 2 }, versionstamp: s2.versionstamp }, "A reads B's write");
  eq(await a.get(k("x"), { consistency: "eventual" }), await b.get(k("x")), "eventual read on A = strong read on B");

  step("getMany mixing both nodes' writes");
  const sa = await a.set(k("gm", 1), "one@A");
  const sb = await b.set(k("gm", 2), "two@B");
  const gmA = await a.getMany([k("gm", 1), k("gm", 2), k("gm", 3)]);
  const gmB = await b.getMany([k("gm", 1), k("gm", 2), k("gm", 3)]);
  eq(gmA, gmB, "getMany answers the same on both nodes");
  eq(gmB.map((e) => [e.value, e.versionstamp]), [["one@A", sa.versionstamp], ["two@B", sb.versionstamp], [null, null]],
    "getMany values and versionstamps");

  step("delete via B, gone on A");
  await b.delete(k("gm", 1));
  eq(await a.get(k("gm", 1)), { key: k("gm", 1), value: null, versionstamp: null }, "A sees B's delete");

  step("atomic checks across nodes");
  {
    const seenByB = await b.get(k("acct"));
    eq(seenByB.versionstamp, null, "fresh key");
    const c1 = await b.atomic().check(seenByB).set(k("acct"), 100).commit();
    ok(c1.ok, "check(null) via B on a missing key");
    const readB = await b.get(k("acct"));
    const wA = await a.set(k("acct"), 150); // A's write makes B's read stale
    ok(wA.versionstamp > (c1 as Deno.KvCommitResult).versionstamp, "A's write is newer");
    eq(await b.atomic().check(readB).set(k("acct"), 999).commit(), { ok: false }, "B's check with a stale versionstamp fails after A's write");
    eq(await b.atomic().check({ key: k("acct"), versionstamp: null }).set(k("acct"), 0).commit(), { ok: false },
      "check(null) via B on a key A wrote fails");
    eq(await a.get(k("acct")), { key: k("acct"), value: 150, versionstamp: wA.versionstamp }, "nothing applied");
    const fresh = await b.get(k("acct"));
    const c2 = await b.atomic().check(fresh).set(k("acct"), 151).commit();
    ok(c2.ok, "check with the current versionstamp via B");
    eq(await a.atomic().check(fresh).set(k("acct"), 0).commit(), { ok: false }, "A's check with B's now-stale read fails");
    eq(await val(a, k("acct")), 151, "value after the cross-node checks");
  }

  step("check(null) races between the nodes: exactly one wins");
  for (let round = 0; round < 5; round++) {
    const key = k("race", round);
    const results = await Promise.all([a, b, a, b].map((kv, i) =>
      kv.atomic().check({ key, versionstamp: null }).set(key, i).commit()
    ));
    const winners = results.map((r, i) => (r.ok ? i : -1)).filter((i) => i >= 0);
    eq(winners.length, 1, `round ${round}: one of 4 check(null) writers wins (winners ${winners})`);
    const final = await (round % 2 ? a : b).get(key);
    eq([final.value, final.versionstamp], [winners[0], (results[winners[0]] as Deno.KvCommitResult).versionstamp],
      `round ${round}: the winner's value and versionstamp`);
  }

  step("KvU64 sum / min / max via both nodes");
  ok((await a.atomic().sum(k("u"), 5n).commit()).ok, "sum via A on a missing key");
  ok((await b.atomic().sum(k("u"), 10n).commit()).ok, "sum via B");
  eq(await val(a, k("u")), U(15n), "5 (A) + 10 (B) read via A");
  eq(await val(b, k("u")), U(15n), "5 (A) + 10 (B) read via B");
  await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).atomic().sum(k("u"), 1n).commit()));
  eq(await val(b, k("u")), U(55n), "40 concurrent sums split over both nodes");
  await a.set(k("wrap"), U(2n ** 64n - 1n));
  await b.atomic().sum(k("wrap"), 2n).commit();
  eq(await val(a, k("wrap")), U(1n), "(2^64-1) via A + 2 via B wraps to 1");
  await b.atomic().min(k("u"), 7n).commit();
  eq(await val(a, k("u")), U(7n), "min via B read via A");
  await a.atomic().max(k("u"), 9n).commit();
  eq(await val(b, k("u")), U(9n), "max via A read via B");
  await b.atomic().max(k("u"), 2n ** 64n - 1n).commit();
  eq(await val(a, k("u")), U(2n ** 64n - 1n), "max is unsigned across nodes");
  await a.atomic().min(k("mn"), 4n).commit();
  await b.atomic().max(k("mx"), 6n).commit();
  eq([await val(b, k("mn")), await val(a, k("mx"))], [U(4n), U(6n)], "min/max on missing keys store the operand");
  await a.set(k("str"), "text");
  await assertRejects(() => b.atomic().sum(k("str"), 1n).commit(), ["non-U64", "400"], "sum via B onto A's string");
  checks++;

  step("V8 sums via both nodes");
  await a.atomic().mutate({ type: "sum", key: k("big"), value: 5n }).commit();
  await b.atomic().mutate({ type: "sum", key: k("big"), value: 2n ** 100n }).commit();
  eq(await val(a, k("big")), 2n ** 100n + 5n, "bigint sums via A then B");
  await b.atomic().mutate({ type: "sum", key: k("num"), value: 1.5 }).commit();
  await a.atomic().mutate({ type: "sum", key: k("num"), value: 2.25 }).commit();
  eq(await val(b, k("num")), 3.75, "number sums via B then A");
  await assertRejects(
    () => a.atomic().mutate({ type: "sum", key: k("big"), value: 1 }).commit(),
    ["Cannot sum BigInt with Number", "400"],
    "number onto B's bigint via A",
  );
  checks++;

  step("list with prefix / reverse / limit / cursor across nodes");
  const items = k("items");
  const N = 30;
  for (let i = 0; i < N; i += 5) { // six atomics, alternating nodes
    const at = (i / 5) % 2 ? b.atomic() : a.atomic();
    for (let j = i; j < i + 5; j++) at.set([...items, j], { j });
    ok((await at.commit()).ok, `populate ${i}..${i + 4}`);
  }
  await b.set(k("itemsX"), "sibling");
  const keysOf = (es: Deno.KvEntry<unknown>[]) => es.map((e) => e.key[e.key.length - 1]);
  const range = (x: number, y: number) => Array.from({ length: y - x }, (_, i) => x + i);
  const listA = await collect(a.list({ prefix: items }));
  const listB = await collect(b.list({ prefix: items }));
  eq(keysOf(listA), range(0, N), "prefix list via A");
  eq(listB, listA, "prefix list via B equals A's (values and versionstamps)");
  eq(keysOf(await collect(b.list({ prefix: items }, { reverse: true }))), range(0, N).reverse(), "reverse via B");
  eq(keysOf(await collect(a.list({ prefix: items }, { limit: 4, reverse: true }))), [29, 28, 27, 26], "limit+reverse via A");
  {
    const it = a.list({ prefix: items }, { limit: 7 });
    eq(keysOf(await collect(it)), range(0, 7), "first page via A");
    const it2 = b.list({ prefix: items }, { limit: 7, cursor: it.cursor });
    eq(keysOf(await collect(it2)), range(7, 14), "next page via B with A's cursor");
    eq(keysOf(await collect(a.list({ prefix: items }, { cursor: it2.cursor }))), range(14, N), "rest via A with B's cursor");
    const r1 = b.list({ prefix: items }, { limit: 10, reverse: true });
    eq(keysOf(await collect(r1)), range(20, N).reverse(), "reverse first page via B");
    eq(keysOf(await collect(a.list({ prefix: items }, { limit: 10, reverse: true, cursor: r1.cursor }))),
      range(10, 20).reverse(), "reverse next page via A with B's cursor");
  }
  eq(keysOf(await collect(b.list({ start: [...items, 3], end: [...items, 8] }))), range(3, 8), "start/end via B");
  {
    // a write through one node between pages shows up in the next page read through the other
    const it = b.list({ prefix: items }, { limit: 5 });
    await collect(it);
    await a.set([...items, 7], "changed between pages");
    const next = await collect(b.list({ prefix: items }, { limit: 3, cursor: it.cursor }));
    eq(next.map((e) => e.value), [{ j: 5 }, { j: 6 }, "changed between pages"], "A's write seen on B's next page");
  }

  step("versionstamps strictly increase across alternating nodes");
  let prev = "";
  const stamps: string[] = [];
  for (let i = 0; i < 40; i++) {
    const kv = i % 2 ? b : a;
    const r = i % 3 === 2
      ? await kv.atomic().set(k("seq", i), i).sum(k("seqsum"), 1n).commit() as Deno.KvCommitResult
      : await kv.set(k("seq", i % 4), i);
    assert(r.versionstamp > prev, `write #${i} via ${i % 2 ? "B" : "A"}: ${r.versionstamp} not > ${prev}`);
    prev = r.versionstamp;
    stamps.push(r.versionstamp);
  }
  ok(new Set(stamps).size === 40, "40 distinct, strictly increasing versionstamps across the nodes");
  {
    const [ra, rb] = await Promise.all([a.set(k("par", "a"), 1), b.set(k("par", "b"), 1)]);
    ok(ra.versionstamp !== rb.versionstamp && ra.versionstamp > prev && rb.versionstamp > prev,
      "concurrent writes on the two nodes get distinct, newer versionstamps");
  }
  {
    const r = await a.set([...k("vlog"), a.commitVersionstamp()], "vs-key via A");
    const r2 = await b.set([...k("vlog"), b.commitVersionstamp()], "vs-key via B");
    const logged = await collect(b.list({ prefix: k("vlog") }));
    eq(logged.map((e) => [e.key[e.key.length - 1], e.value]), [[r.versionstamp, "vs-key via A"], [r2.versionstamp, "vs-key via B"]],
      "versionstamped keys from both nodes in commit order");
  }

  step("expireIn: visible on both, then invisible on both");
  const t0 = Date.now();
  let early: boolean;
  await a.set(k("exp", "short"), "short-lived", { expireIn: 800 });
  await b.atomic().set(k("exp", "atomic"), "short via B", { expireIn: 800 }).commit();
  const tWritten = Date.now(); // both expire 800 ms after the server took them: by tWritten + 800
  await a.set(k("exp", "long"), "long-lived", { expireIn: 60_000 });
  {
    const viaB = await b.getMany([k("exp", "short"), k("exp", "atomic")]);
    const viaA = await a.getMany([k("exp", "short"), k("exp", "atomic")]);
    // Both reads were answered before the keys' earliest expiry (t0 + 800): they must see them.
    early = Date.now() < t0 + 800;
    if (early) {
      eq(viaB.map((e) => e.value), ["short-lived", "short via B"], "visible via B before expiry");
      eq(viaA.map((e) => e.value), ["short-lived", "short via B"], "visible via A before expiry");
    }
  }
  await sleep(Math.max(t0 + 1500, tWritten + 900) - Date.now());
  for (const [name, kv] of [["A", a], ["B", b]] as const) {
    eq((await kv.getMany([k("exp", "short"), k("exp", "atomic"), k("exp", "long")])).map((e) => e.value),
      [null, null, "long-lived"], `expired keys are gone via ${name}`);
    eq(keysOf(await collect(kv.list({ prefix: k("exp") }))), ["long"], `list via ${name} hides expired keys`);
  }
  ok((await b.atomic().check({ key: k("exp", "short"), versionstamp: null }).set(k("exp", "short"), "again").commit()).ok,
    "check(null) via B on a key expired from A");

  step("enqueue is refused client-side by Deno's remote backend");
  {
    let refused = "";
    try {
      await a.atomic().enqueue({ job: 1 }).commit();
    } catch (e) {
      refused = errMessage(e);
    }
    ok(/not supported/i.test(refused), `Deno refuses enqueue over KV Connect: ${refused || "(it committed)"}`);
  }

  a.close();
  b.close();
  return { checks, lastVersionstamp: prev, expiryCheckedEarly: early };
});
