// expireIn. Deno's local backend may keep expired keys visible for up to ~60 s, so
// the "gone promptly" assertions only run with KV_EXPECT_PROMPT_EXPIRY=1 (remote run).
import { assert, assertEquals, collect, EXPECT_PROMPT_EXPIRY, main, ns, openKv, sleep, step } from "./_lib.ts";

await main("expiry", async () => {
  const kv = await openKv();
  const p = ns("expiry");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];

  step("write keys with and without expiry");
  await kv.set(k("long"), "long-lived", { expireIn: 60_000 });
  await kv.set(k("none"), "forever");
  await kv.set(k("reset"), "will lose its expiry", { expireIn: 500 });
  await kv.set(k("reset"), "no expiry any more");
  const tSum = Date.now();
  await kv.set(k("sum"), new Deno.KvU64(1n), { expireIn: 500 });
  await kv.atomic().sum(k("sum"), 1n).commit(); // sum rewrites the row without expiry
  // The sum found the row (rather than nothing, as on a machine too slow for 500 ms) for sure
  // when it was answered before the row's earliest expiry.
  const sumBeforeExpiry = Date.now() < tSum + 500;
  const t0 = Date.now();
  await kv.set(k("short"), "short-lived", { expireIn: 500 });
  const vsr = await kv.atomic().set(k("vslog", kv.commitVersionstamp()), "vs-expiring", { expireIn: 500 }).commit();
  assert(vsr.ok, "versionstamped set with expireIn");
  await kv.atomic().set(k("atomic-short"), "atomic", { expireIn: 500 }).commit();
  // Each expiring key expires 500 ms after the server took its write, so by tWritten + 500.
  const tWritten = Date.now();

  step("everything is visible right after writing");
  const now = await kv.getMany([k("short"), k("long"), k("none"), k("atomic-short")]);
  const listedNow = await collect(kv.list({ prefix: k("vslog") }));
  const checkedVisibleMs = Date.now() - t0;
  if (checkedVisibleMs < 400) { // otherwise the keys may legitimately have expired already
    assertEquals(now.map((e) => e.value), ["short-lived", "long-lived", "forever", "atomic"], "values before expiry");
    assertEquals(listedNow.length, 1, "versionstamped expiring key listed");
  }

  step("wait 1.5 s (and until every expiring key's time has passed)");
  await sleep(Math.max(t0 + 1500, tWritten + 600) - Date.now());

  step("keys without (or with cleared / distant) expiry survive");
  const after = await kv.getMany([k("long"), k("none"), k("reset"), k("sum")]);
  assertEquals(after.slice(0, 3).map((e) => e.value), ["long-lived", "forever", "no expiry any more"],
    "values that must survive");
  if (sumBeforeExpiry) assertEquals(after[3].value, new Deno.KvU64(2n), "the sum kept the value and lost the expiry");
  else assert(after[3].value !== null, "the sum's row has no expiry");

  let shortGone: boolean;
  {
    const [short, atomicShort] = await kv.getMany([k("short"), k("atomic-short")]);
    shortGone = short.versionstamp === null && atomicShort.versionstamp === null;
  }
  if (EXPECT_PROMPT_EXPIRY) {
    step("expired keys are gone (prompt expiry)");
    assertEquals(await kv.get(k("short")), { key: k("short"), value: null, versionstamp: null }, "get of an expired key");
    assertEquals((await kv.getMany([k("atomic-short"), k("none")])).map((e) => e.value), [null, "forever"], "getMany hides expired keys");
    const listed = await collect(kv.list({ prefix: p }));
    const names = listed.map((e) => e.key[p.length]);
    assert(!names.includes("short") && !names.includes("atomic-short") && !names.includes("vslog"),
      `list must not return expired keys, got ${JSON.stringify(names)}`);
    step("an expired key counts as absent for check(null)");
    const c = await kv.atomic().check({ key: k("short"), versionstamp: null }).set(k("short"), "recreated").commit();
    assert(c.ok, "check(null) on an expired key must succeed (a read already reported it missing)");
    assertEquals((await kv.get(k("short"))).value, "recreated", "recreated after expiry");
  }

  kv.close();
  return { shortGoneAfter1500ms: shortGone, checkedVisibleMs };
});
