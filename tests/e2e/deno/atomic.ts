// atomic(): checks (null = must not exist, stale versionstamps => {ok:false}),
// mutation ordering, shared commit versionstamp, empty writes, concurrent
// conflicting writers. (Size limits and all-or-nothing: atomic_limits.ts.)
import { assert, assertEquals, assertVersionstamp, main, ns, openKv, step } from "./_lib.ts";

await main("atomic", async () => {
  const kv = await openKv();
  const p = ns("atomic");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];

  step("check null on a missing key succeeds");
  const c1 = await kv.atomic().check({ key: k("x"), versionstamp: null }).set(k("x"), 1).set(k("y"), 2).commit();
  assert(c1.ok === true, "commit with check(null) on a missing key must succeed");
  assertVersionstamp(c1.versionstamp, "commit result");
  const [x1, y1] = await kv.getMany([k("x"), k("y")]);
  assertEquals([x1.value, y1.value], [1, 2], "values written by the atomic");
  assertEquals([x1.versionstamp, y1.versionstamp], [c1.versionstamp, c1.versionstamp], "all keys of one commit share its versionstamp");

  step("check null on an existing key fails and applies nothing");
  const c2 = await kv.atomic().check({ key: k("x"), versionstamp: null }).set(k("x"), 100).set(k("z"), 3).delete(k("y")).commit();
  assertEquals(c2, { ok: false }, "check(null) on an existing key");
  assertEquals((await kv.getMany([k("x"), k("y"), k("z")])).map((e) => e.value), [1, 2, null], "nothing applied after a failed check");

  step("check with the current versionstamp succeeds, stale one fails");
  const c3 = await kv.atomic().check(x1).set(k("x"), 10).commit();
  assert(c3.ok, "check with the current versionstamp");
  assert(c3.versionstamp > c1.versionstamp, "new commit versionstamp is larger");
  const c4 = await kv.atomic().check(x1).set(k("x"), 20).commit(); // x1 is stale now
  assertEquals(c4, { ok: false }, "check with a stale versionstamp");
  assertEquals((await kv.get(k("x"))).value, 10, "value unchanged after stale check");
  const c4b = await kv.atomic().check({ key: k("never"), versionstamp: c3.versionstamp }).set(k("never"), 1).commit();
  assertEquals(c4b, { ok: false }, "check with a versionstamp on a missing key");
  assertEquals((await kv.get(k("never"))).versionstamp, null, "missing key stays missing");

  step("check on a deleted key");
  const xNow = await kv.get(k("x"));
  await kv.delete(k("x"));
  assertEquals(await kv.atomic().check(xNow).set(k("x"), 1).commit(), { ok: false }, "check with the versionstamp of a deleted key");
  assert((await kv.atomic().check({ key: k("x"), versionstamp: null }).set(k("x"), 11).commit()).ok, "check(null) after delete");

  step("one failing check among several");
  {
    const [a, b] = await Promise.all([kv.set(k("m", "a"), 1), kv.set(k("m", "b"), 1)]);
    const fail = await kv.atomic()
      .check({ key: k("m", "a"), versionstamp: a.versionstamp })
      .check({ key: k("m", "b"), versionstamp: b.versionstamp })
      .check({ key: k("m", "c"), versionstamp: a.versionstamp }) // missing key
      .set(k("m", "a"), 2).commit();
    assertEquals(fail, { ok: false }, "one failing check fails the whole write");
    assertEquals((await kv.get(k("m", "a"))).value, 1, "nothing applied");
    const ok = await kv.atomic()
      .check({ key: k("m", "a"), versionstamp: a.versionstamp })
      .check({ key: k("m", "b"), versionstamp: b.versionstamp })
      .check({ key: k("m", "c"), versionstamp: null })
      .set(k("m", "a"), 2).commit();
    assert(ok.ok, "all checks pass");
  }

  step("mutations apply in order");
  {
    const r = await kv.atomic()
      .set(k("o", 1), new Deno.KvU64(1n)).sum(k("o", 1), 2n)
      .set(k("o", 2), "gone").delete(k("o", 2))
      .delete(k("o", 3)).set(k("o", 3), "there")
      .set(k("o", 4), "first").set(k("o", 4), "second")
      .commit();
    assert(r.ok, "ordered commit");
    const got = await kv.getMany([k("o", 1), k("o", 2), k("o", 3), k("o", 4)]);
    assertEquals(got.map((e) => e.value), [new Deno.KvU64(3n), null, "there", "second"], "results of ordered mutations");
    assertEquals(got[0].versionstamp, r.versionstamp, "sum result carries the commit versionstamp");
  }

  step("empty atomic");
  {
    const before = await kv.set(k("e"), 0);
    const r = await kv.atomic().commit();
    assert(r.ok, "empty atomic commits");
    assertVersionstamp(r.versionstamp, "empty atomic versionstamp");
    assert(r.versionstamp > before.versionstamp, "empty atomic gets a fresh versionstamp");
    const chk = await kv.atomic().check(await kv.get(k("e"))).commit();
    assert(chk.ok && chk.versionstamp > r.versionstamp, "checks-only atomic commits with a fresh versionstamp");
  }

  step("concurrent conflicting read-modify-write");
  {
    const key = k("race");
    const base = await kv.set(key, 0);
    const attempts = await Promise.all(
      Array.from({ length: 8 }, (_, i) => kv.atomic().check({ key, versionstamp: base.versionstamp }).set(key, i + 1).commit()),
    );
    const winners = attempts.filter((r) => r.ok);
    assertEquals(winners.length, 1, "exactly one of 8 writers checking the same versionstamp wins");
    const final = await kv.get(key);
    assertEquals(final.versionstamp, (winners[0] as Deno.KvCommitResult).versionstamp, "final versionstamp is the winner's");
  }

  step("optimistic-concurrency counter");
  {
    const key = k("occ");
    await kv.set(key, 0);
    let retries = 0;
    const inc = async () => {
      for (;;) {
        const cur = await kv.get<number>(key);
        const r = await kv.atomic().check(cur).set(key, cur.value! + 1).commit();
        if (r.ok) return;
        retries++;
      }
    };
    await Promise.all(Array.from({ length: 25 }, inc));
    assertEquals((await kv.get(key)).value, 25, "25 OCC increments");
  }

  kv.close();
  return {};
});
