// kv.watch(): the first frame has every key (missing ones as null), changes produce
// new frames (set, delete, sum, atomic), several watchers see the same change, a
// watch can be cancelled through its reader without breaking the handle, and (with
// KV_EXPECT_PROMPT_EXPIRY=1) an expiring key is seen disappearing.
import {
  assert, assertEquals, EXPECT_PROMPT_EXPIRY, main, maybeReadFrame, ns, openKv, readFrame, sleep, step,
} from "./_lib.ts";

type Frame = Deno.KvEntryMaybe<unknown>[];
const FRAME_MS = 5000;

await main("watch", async () => {
  const kv = await openKv();
  const p = ns("watch");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];

  step("first frame has every key");
  const ra = await kv.set(k("a"), 1);
  const reader = kv.watch([k("a"), k("b"), k("c")]).getReader();
  let f = await readFrame<Frame>(reader, FRAME_MS, "first frame");
  assertEquals(f, [
    { key: k("a"), value: 1, versionstamp: ra.versionstamp },
    { key: k("b"), value: null, versionstamp: null },
    { key: k("c"), value: null, versionstamp: null },
  ], "first frame");

  step("a set produces a new frame");
  const rb = await kv.set(k("b"), "bee");
  f = await readFrame<Frame>(reader, FRAME_MS, "frame after set(b)");
  assertEquals(f.map((e) => [e.value, e.versionstamp]), [[1, ra.versionstamp], ["bee", rb.versionstamp], [null, null]], "frame after set(b)");

  step("a delete produces a new frame");
  await kv.delete(k("a"));
  f = await readFrame<Frame>(reader, FRAME_MS, "frame after delete(a)");
  assertEquals(f.map((e) => e.value), [null, "bee", null], "frame after delete(a)");
  assertEquals(f[0].versionstamp, null, "deleted key has a null versionstamp");

  step("an atomic touching two watched keys");
  const rc = await kv.atomic().set(k("a"), "A").sum(k("c"), 7n).commit();
  assert(rc.ok, "atomic commit");
  f = await readFrame<Frame>(reader, FRAME_MS, "frame after atomic");
  // changes may be coalesced into one frame, but the frame must be consistent
  if (f[0].versionstamp !== rc.versionstamp || f[2].versionstamp !== rc.versionstamp) {
    f = await readFrame<Frame>(reader, FRAME_MS, "second frame after atomic");
  }
  assertEquals(f.map((e) => e.value), ["A", "bee", new Deno.KvU64(7n)], "frame after atomic");
  assertEquals([f[0].versionstamp, f[2].versionstamp], [rc.versionstamp, rc.versionstamp], "versionstamps after atomic");

  step("an unrelated write produces no frame");
  const pending = reader.read();
  await kv.set(k("unrelated"), 1);
  await kv.set([...k("a"), "child"], 1); // a longer key with the watched key as prefix
  const none = await maybeReadFrame(pending, 600);
  assert(none === "timeout", `no frame expected for unrelated keys, got ${Deno.inspect(none)}`);

  step("rapid updates end in the final value");
  for (let i = 0; i < 20; i++) await kv.set(k("b"), i);
  {
    const deadline = Date.now() + FRAME_MS;
    let last: Frame | undefined;
    const first = await pending; // the read issued above
    assert(!first.done, "stream still open");
    last = first.value as Frame;
    while (last[1].value !== 19) {
      assert(Date.now() < deadline, `final value 19 not seen, last frame ${Deno.inspect(last)}`);
      last = await readFrame<Frame>(reader, FRAME_MS, "frames during rapid updates");
    }
  }

  step("cancel the watch");
  await reader.cancel();
  const rAfter = await kv.set(k("a"), "after-cancel");
  assert(rAfter.ok, "writes keep working after cancelling a watch");
  assertEquals((await kv.get(k("a"))).value, "after-cancel", "reads keep working after cancelling a watch");

  step("several watchers on the same key");
  const readers = Array.from({ length: 4 }, () => kv.watch([k("shared")]).getReader());
  for (const [i, r] of readers.entries()) {
    assertEquals((await readFrame<Frame>(r, FRAME_MS, `watcher ${i} first frame`))[0].value, null, `watcher ${i} initial`);
  }
  const rs = await kv.set(k("shared"), "hello");
  for (const [i, r] of readers.entries()) {
    const fr = await readFrame<Frame>(r, FRAME_MS, `watcher ${i} update`);
    assertEquals([fr[0].value, fr[0].versionstamp], ["hello", rs.versionstamp], `watcher ${i} sees the update`);
  }
  // cancel half of them, the rest must still be notified
  await readers[0].cancel();
  await readers[1].cancel();
  await kv.set(k("shared"), "again");
  for (const r of readers.slice(2)) {
    assertEquals((await readFrame<Frame>(r, FRAME_MS, "surviving watcher"))[0].value, "again", "surviving watcher");
    await r.cancel();
  }

  step("watch from a second handle sees writes from the first");
  {
    const kv2 = await openKv();
    const r2 = kv2.watch([k("x1"), k("x2"), k("x3"), k("x4"), k("x5"), k("x6"), k("x7"), k("x8"), k("x9"), k("x10")]).getReader();
    const first = await readFrame<Frame>(r2, FRAME_MS, "10-key first frame");
    assertEquals(first.length, 10, "10 keys watched");
    assert(first.every((e) => e.versionstamp === null), "all 10 keys missing initially");
    await kv.set(k("x7"), 7);
    const upd = await readFrame<Frame>(r2, FRAME_MS, "10-key update");
    assertEquals(upd.map((e) => e.value), [null, null, null, null, null, null, 7, null, null, null], "x7 updated");
    await r2.cancel();
    kv2.close();
  }

  step("for-await with break");
  {
    let n = 0;
    for await (const fr of kv.watch([k("loop")])) {
      n++;
      if (n === 1) {
        assertEquals(fr[0].value, null, "for-await first frame");
        await kv.set(k("loop"), "one");
        continue;
      }
      assertEquals(fr[0].value, "one", "for-await second frame");
      break;
    }
    assert(n === 2, `expected 2 frames (initial + update), saw ${n}`);
  }

  step("more than 10 keys are refused");
  {
    let refused = false;
    try {
      const r = kv.watch(Array.from({ length: 11 }, (_, i) => k("many", i))).getReader();
      await readFrame<Frame>(r, FRAME_MS, "11-key watch");
      await r.cancel();
    } catch (_e) {
      refused = true;
    }
    assert(refused, "a watch on 11 keys must fail");
  }

  step("watch on a value written before the watch existed (no stale frame)");
  {
    const rw = await kv.set(k("pre"), { big: "x".repeat(50_000) });
    const r = kv.watch([k("pre")]).getReader();
    const fr = await readFrame<Frame>(r, FRAME_MS, "first frame with a 50 kB value");
    assertEquals(fr[0].versionstamp, rw.versionstamp, "large value in watch frame");
    assertEquals((fr[0].value as { big: string }).big.length, 50_000, "large value intact");
    await r.cancel();
  }

  let expirySeen: boolean | undefined;
  if (EXPECT_PROMPT_EXPIRY) {
    step("watch sees an expiring key disappear");
    await kv.set(k("exp"), "soon gone", { expireIn: 500 });
    const r = kv.watch([k("exp")]).getReader();
    let fr = await readFrame<Frame>(r, FRAME_MS, "expiring key first frame");
    const deadline = Date.now() + 4000;
    while (fr[0].value !== null) {
      assert(Date.now() < deadline, "watcher not notified of expiry within 4 s");
      fr = await readFrame<Frame>(r, Math.max(100, deadline - Date.now()), "expiry notification");
    }
    expirySeen = true;
    await r.cancel();
  }

  step("handle still usable at the end");
  assertEquals((await kv.get(k("b"))).value, 19, "final read");
  kv.close();
  return { expirySeen };
});
