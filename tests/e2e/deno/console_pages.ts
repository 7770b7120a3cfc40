// Deno's side of console_pages.test.mjs (the Tokens, Queue and Import/Export pages).
//   KV_MODE=use   opens the database with DENO_KV_ACCESS_TOKEN (a token the Tokens page made),
//                 writes a key and reads it back
//   KV_MODE=bulk  lists every entry under [KV_PREFIX] and checks there are KV_COUNT of them, the
//                 i-th holding bulkValue(i) below (the values the test's NDJSON file carries)
import { assert, assertEquals, main, openKv, step } from "./_lib.ts";

const mode = Deno.env.get("KV_MODE");

// The same values as bulkLine() in console_pages.test.mjs writes as KvValueJSON.
function bulkValue(i: number): unknown {
  switch (i % 4) {
    case 0:
      return `item ${i}`;
    case 1:
      return i + 0.5;
    case 2:
      return BigInt(i) * 1_000_000_000_000n;
    default:
      return { i, tags: ["a", "b"], when: new Date(i * 1000) };
  }
}

await main("console_pages", async () => {
  const kv = await openKv();
  try {
    if (mode === "use") {
      step("write with the new token");
      const res = await kv.set(["console-pages", "token-check"], "written by Deno");
      assert(res.ok, "set");
      step("read back");
      const got = await kv.get(["console-pages", "token-check"]);
      assertEquals(got.value, "written by Deno", "value read back");
      return { versionstamp: got.versionstamp };
    }
    assert(mode === "bulk", `KV_MODE must be use or bulk, got ${mode}`);
    const prefix = Deno.env.get("KV_PREFIX") ?? "bulk";
    const expected = Number(Deno.env.get("KV_COUNT"));
    step("list");
    const seen = new Set<number>();
    for await (const e of kv.list({ prefix: [prefix] })) {
      assertEquals(e.key.length, 2, `key ${String(e.key)}`);
      const i = e.key[1] as number;
      assert(typeof i === "number", `key part 2 is a number: ${String(e.key)}`);
      assertEquals(e.value, bulkValue(i), `value of [${prefix}, ${i}]`);
      seen.add(i);
    }
    assertEquals(seen.size, expected, `entries under [${prefix}]`);
    for (let i = 0; i < expected; i++) assert(seen.has(i), `[${prefix}, ${i}] is there`);
    return { count: seen.size };
  } finally {
    kv.close();
  }
});
