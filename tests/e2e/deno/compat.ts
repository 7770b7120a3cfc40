// File compatibility between Deno's local SQLite backend and kvconnect.
//   COMPAT_MODE=write   write a fixed data set under ["compat"], print its listing
//   COMPAT_MODE=verify  check the data set (values, types, keys) and, if
//                       COMPAT_EXPECT_FILE names the JSON summary of an earlier run,
//                       that every key still has exactly the same versionstamp
//   COMPAT_ADD=<name>   (with verify) also write ["compat","added",<name>] and check
//                       its versionstamp is newer than everything in the file
// The summary's "listing" is [[key as Deno.inspect string, versionstamp], ...].
import { assert, assertEquals, collect, fmt, main, openKv, step } from "./_lib.ts";

const P = ["compat"];
const MANY = 300;

function dataset(): [Deno.KvKey, unknown][] {
  return [
    [[...P, "str"], "hello from compat"],
    [[...P, "num", 1], 3.5],
    [[...P, "big"], 2n ** 80n],
    [[...P, "u64"], new Deno.KvU64(123456789012345678n)],
    [[...P, "bytes"], new Uint8Array([0, 1, 2, 3, 254, 255])],
    [[...P, "obj"], { a: [1, 2], d: new Date(1700000000000), m: new Map([["k", new Set([1])]]), r: /x+/i }],
    [[...P, new Uint8Array([0, 1]), true, 5n, -2.5], "mixed key"],
    [[...P, "unicode", "ключ 🔑"], "значение"],
    [[...P, "far-expiry"], "expires in an hour"],
  ];
}

await main("compat", async () => {
  const mode = Deno.env.get("COMPAT_MODE") ?? "verify";
  const kv = await openKv();

  if (mode === "write") {
    step("write data set");
    for (const [key, value] of dataset()) {
      await kv.set(key, value, fmt(key).includes("far-expiry") ? { expireIn: 3_600_000 } : undefined);
    }
    await kv.set([...P, "log", kv.commitVersionstamp()], "versionstamped");
    await kv.atomic().mutate({ type: "sum", key: [...P, "v8sum"], value: 5n }).commit();
    await kv.atomic().mutate({ type: "sum", key: [...P, "v8sum"], value: 7n }).sum([...P, "u64sum"], 3n).commit();
    await kv.set([...P, "deleted"], "to be deleted");
    await kv.delete([...P, "deleted"]);
    for (let i = 0; i < MANY; i += 100) {
      const a = kv.atomic();
      for (let j = i; j < i + 100; j++) a.set([...P, "many", j], { j });
      assert((await a.commit()).ok, "bulk write");
    }
  }

  step("verify data set");
  for (const [key, value] of dataset()) {
    const e = await kv.get(key);
    assertEquals(e.value, value, `value of ${fmt(key)}`);
  }
  const log = await collect(kv.list({ prefix: [...P, "log"] }));
  assertEquals(log.length, 1, "one versionstamped key");
  assertEquals(log[0].key[2], log[0].versionstamp, "versionstamped key suffix equals its versionstamp");
  assertEquals(log[0].value, "versionstamped", "versionstamped value");
  assertEquals((await kv.get([...P, "v8sum"])).value, 12n, "V8 sum result");
  assertEquals((await kv.get([...P, "u64sum"])).value, new Deno.KvU64(3n), "KvU64 sum result");
  assertEquals((await kv.get([...P, "deleted"])).versionstamp, null, "deleted key stays deleted");
  const many = await collect(kv.list<{ j: number }>({ prefix: [...P, "many"] }));
  assertEquals(many.map((e) => e.value.j), Array.from({ length: MANY }, (_, i) => i), "bulk keys");

  step("listing");
  const everything = await collect(kv.list({ prefix: P }, { batchSize: 500 }));
  const listing = everything.map((e) => [fmt(e.key), e.versionstamp] as [string, string]);
  const maxVersionstamp = everything.map((e) => e.versionstamp).reduce((a, b) => (a > b ? a : b));

  const expectFile = Deno.env.get("COMPAT_EXPECT_FILE");
  if (expectFile) {
    step("same keys and versionstamps as the earlier run");
    const expected = JSON.parse(await Deno.readTextFile(expectFile)) as { listing: [string, string][] };
    // entries added by later COMPAT_ADD runs are allowed on top of the original listing
    const now = new Map(listing);
    for (const [key, vs] of expected.listing) {
      assert(now.has(key), `key ${key} missing`);
      assertEquals(now.get(key), vs, `versionstamp of ${key}`);
    }
    const extra = listing.filter(([key]) => !expected.listing.some(([k]) => k === key));
    assert(extra.every(([key]) => key.includes('"added"')), `unexpected extra keys: ${fmt(extra)}`);
  }

  const add = Deno.env.get("COMPAT_ADD");
  let added: string | undefined;
  if (add) {
    step("write one more key");
    const r = await kv.set([...P, "added", add], `added by ${add}`);
    assert(r.versionstamp > maxVersionstamp, `new versionstamp ${r.versionstamp} must exceed every stored one (${maxVersionstamp})`);
    added = r.versionstamp;
    listing.push([fmt([...P, "added", add]), r.versionstamp]);
  }
  const addedKeys = Deno.env.get("COMPAT_EXPECT_ADDED");
  if (addedKeys) {
    for (const name of addedKeys.split(",")) {
      assertEquals((await kv.get([...P, "added", name])).value, `added by ${name}`, `key added by ${name}`);
    }
  }

  kv.close();
  return { mode, entries: listing.length, maxVersionstamp, added, listing };
});
