// Data for the web console test (console.test.mjs), written and read by the real Deno client.
//   KV_MODE=seed  writes the entries the browser then browses, under ["console", ...]
//   KV_MODE=read  reads the keys of KV_KEYS (a JSON array of keys of strings and numbers) and
//                 reports each value (null when absent) and versionstamp in the summary
import { assert, main, openKv, step } from "./_lib.ts";

const mode = Deno.env.get("KV_MODE");

await main("console_data", async () => {
  const kv = await openKv();
  try {
    if (mode === "seed") {
      step("seed");
      const writes: [Deno.KvKey, unknown][] = [
        [["console", "users", "ada"], { name: "Ada", langs: ["en", "fr"], born: 1815 }],
        [["console", "users", "grace"], { name: "Grace", born: 1906 }],
        [["console", "users", "linus"], { name: "Linus", born: 1969 }],
        [["console", "settings"], new Map([["theme", "dark"]])],
        [["console", "counter"], new Deno.KvU64(7n)],
        [["console", "blob"], new Uint8Array([1, 2, 3])],
        [["console", "when"], new Date(0)],
        [["console", "conflict"], { n: 1 }],
        [["console", "doomed"], "delete me"],
        [["console", 42n, true], "a key of a bigint and a boolean"],
      ];
      for (let i = 0; i < 120; i++) writes.push([["console", "many", i], `item ${i}`]);
      for (let i = 0; i < writes.length; i += 100) {
        const op = kv.atomic();
        for (const [key, value] of writes.slice(i, i + 100)) op.set(key, value);
        assert((await op.commit()).ok, "seed commit");
      }
      return { written: writes.length };
    }
    assert(mode === "read", `KV_MODE must be seed or read, got ${mode}`);
    step("read");
    const keys = JSON.parse(Deno.env.get("KV_KEYS") ?? "[]") as Deno.KvKey[];
    const entries = await kv.getMany(keys);
    return { entries: entries.map((e) => ({ key: e.key, value: e.value, versionstamp: e.versionstamp })) };
  } finally {
    kv.close();
  }
});
