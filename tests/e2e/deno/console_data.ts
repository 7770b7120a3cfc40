// Data for the web console test (console.test.mjs), written and read by the real Deno client.
//   KV_MODE=seed  writes the entries the browser then browses, under ["console", ...]
//   KV_MODE=read  reads the keys of KV_KEYS (a JSON array of keys of strings and numbers) and
//                 reports each value (null when absent) and versionstamp in the summary
//   KV_MODE=check-edits  checks that the values the browser typed in Deno literal syntax under
//                 ["console", "edit", ...] read back equal to EDITED below
// The seed holds at least 500 entries, 25 of every value type under ["console", "types", T],
// a large array, and an entry that expires (["console", "expiring"], in 10 minutes).
import { assert, deepEqual, fmt, main, openKv, step } from "./_lib.ts";

// What console.test.mjs types into the editor, as Deno values.
const EDITED: [string, unknown][] = [
  ["date", new Date("2024-05-06T07:08:09.010Z")],
  ["map", new Map<unknown, unknown>([["a", 1], [2n, new Set([true, null])], [3, new Date(0)]])],
  ["set", new Set<unknown>(["x", 3, 4n, new Uint8Array([7, 8])])],
  ["bigint", -123456789012345678901234567890n],
  ["nested", { when: new Date(86_400_000), tags: new Set(["a"]), n: 10n, bytes: new Uint8Array([255]) }],
];

// One value of each type for index i.
function typed(i: number): [string, unknown][] {
  return [
    ["string", `text ${i}`],
    ["number", i * 1.5],
    ["bigint", BigInt(i) * 10n ** 20n],
    ["boolean", i % 2 === 0],
    ["null", null],
    ["undefined", undefined],
    ["object", { i, name: `n${i}`, nested: { deep: [i] } }],
    ["array", [i, "x", true, null]],
    ["Map", new Map<unknown, unknown>([["i", i], [i, "i"]])],
    ["Set", new Set<unknown>([i, `s${i}`])],
    ["Date", new Date(1_700_000_000_000 + i * 1000)],
    ["RegExp", new RegExp(`ab+c${i}`, "gi")],
    ["Uint8Array", new Uint8Array([i, 1, 2])],
    ["KvU64", new Deno.KvU64(BigInt(i))],
    ["Error", new Error(`error ${i}`)],
    ["Int32Array", new Int32Array([i, -i])],
  ];
}

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
      for (let i = 0; i < 25; i++) {
        for (const [type, value] of typed(i)) writes.push([["console", "types", type, i], value]);
      }
      writes.push([["console", "big"], Array.from({ length: 180 }, (_, i) => ({ i, label: `row ${i}` }))]);
      for (const [name] of EDITED) writes.push([["console", "edit", name], `before ${name}`]);
      for (let i = 0; i < writes.length; i += 100) {
        const op = kv.atomic();
        for (const [key, value] of writes.slice(i, i + 100)) op.set(key, value);
        assert((await op.commit()).ok, "seed commit");
      }
      const expiring = await kv.set(["console", "expiring"], "gone in ten minutes", { expireIn: 600_000 });
      assert(expiring.ok, "expiring set");
      return { written: writes.length + 1 };
    }
    if (mode === "check-edits") {
      step("check-edits");
      const got = await kv.getMany(EDITED.map(([name]) => ["console", "edit", name]));
      EDITED.forEach(([name, want], i) => {
        assert(deepEqual(got[i].value, want), `["console", "edit", "${name}"]: got ${fmt(got[i].value)}, want ${fmt(want)}`);
      });
      return { checked: EDITED.length };
    }
    assert(mode === "read", `KV_MODE must be seed, read or check-edits, got ${mode}`);
    step("read");
    const keys = JSON.parse(Deno.env.get("KV_KEYS") ?? "[]") as Deno.KvKey[];
    const entries = await kv.getMany(keys);
    return { entries: entries.map((e) => ({ key: e.key, value: e.value, versionstamp: e.versionstamp })) };
  } finally {
    kv.close();
  }
});
