// Export/import with the real Deno client on both ends.
// env KV_MODE:
//   write    writes every storable value type, under keys of every key-part type, to KV_URL
//   compare  lists KV_URL and KV_URL_COPY (a database imported from a dump of KV_URL in one
//            batch) and requires the same keys and deep-equal values, with the copy's
//            versionstamps those of its import, not the originals'
import { assert, assertEquals, collect, fmt, main, step } from "./_lib.ts";

function cases(): [Deno.KvKey, unknown][] {
  const circular: Record<string, unknown> = { name: "loop" };
  circular.self = circular;
  const shared = { s: 1 };
  // deno-lint-ignore no-sparse-arrays
  const sparse = [1, , 3];
  return [
    [["v", "string"], "hello"],
    [["v", "unicode"], "€ 日本語 🌍 caf\u00e9"],
    [["v", "lone surrogate"], "x\ud800y"],
    [["v", "int"], 42],
    [["v", "negative zero"], -0],
    [["v", "float"], 3.141592653589793],
    [["v", "NaN"], NaN],
    [["v", "-Infinity"], -Infinity],
    [["v", "bigint"], -(2n ** 100n)],
    [["v", "true"], true],
    [["v", "null"], null],
    [["v", "undefined"], undefined],
    [["v", "object"], { a: 1, b: "two", c: [3], 7: "numeric key" }],
    [["v", "array"], [1, "two", 3n, null, undefined, false]],
    [["v", "sparse array"], sparse],
    [["v", "array with props"], Object.assign([1, 2], { extra: "prop" })],
    [["v", "Date"], new Date("2024-02-29T12:34:56.789Z")],
    [["v", "RegExp"], /ab+c/gimsuy],
    [["v", "Map"], new Map<unknown, unknown>([["a", 1], [2, "b"], [{ o: 1 }, [1]]])],
    [["v", "Set"], new Set<unknown>([1, "two", 3n, { four: 4 }])],
    [["v", "Uint8Array"], new Uint8Array(256).map((_, i) => i)],
    [["v", "empty Uint8Array"], new Uint8Array(0)],
    [["v", "Int32Array"], new Int32Array([-1, 2, 2 ** 31 - 1])],
    [["v", "Float64Array"], new Float64Array([1.5, -0, NaN])],
    [["v", "BigUint64Array"], new BigUint64Array([1n, 2n ** 64n - 1n])],
    [["v", "ArrayBuffer"], new Uint8Array([9, 8, 7]).buffer],
    [["v", "KvU64 max"], new Deno.KvU64(2n ** 64n - 1n)],
    [["v", "KvU64 zero"], new Deno.KvU64(0n)],
    [["v", "boxed"], [new Number(1), new String("s"), new Boolean(false)]],
    [["v", "Error"], new RangeError("out of range")],
    [["v", "circular"], circular],
    [["v", "shared refs"], [shared, shared]],
    [["v", "large"], "x".repeat(60_000)],
    [["keys", "bytes", new Uint8Array([0, 1, 255])], 1],
    [["keys", "number", -0.5], 2],
    [["keys", "bigint", 12345678901234567890n], 3],
    [["keys", "bool", false], 4],
    [["keys", "bool", true], 5],
    [["keys", "string", ""], 6],
  ];
}

await main("export_import", async () => {
  const mode = Deno.env.get("KV_MODE");
  const kv = await Deno.openKv(Deno.env.get("KV_URL")!);
  if (mode === "write") {
    step("write every value type");
    const all = cases();
    for (const [key, value] of all) {
      const r = await kv.set(key, value);
      assert(r.ok, `set ${fmt(key)}`);
    }
    kv.close();
    return { written: all.length };
  }
  step("compare with the copy");
  const copy = await Deno.openKv(Deno.env.get("KV_URL_COPY")!);
  const a = await collect(kv.list({ prefix: [] }));
  const b = await collect(copy.list({ prefix: [] }));
  assertEquals(b.map((e) => e.key), a.map((e) => e.key), "keys of the copy");
  for (let i = 0; i < a.length; i++) {
    assertEquals(b[i].value, a[i].value, `value of ${fmt(a[i].key)}`);
  }
  // Versionstamps are not carried over: the originals were written one by one (all distinct),
  // the copy in one import batch (all the same, that commit's).
  assertEquals(new Set(a.map((e) => e.versionstamp)).size, a.length, "distinct original versionstamps");
  assertEquals(new Set(b.map((e) => e.versionstamp)).size, 1, "one versionstamp for the imported batch");
  // Identity is kept where the JSON view keeps it: a cycle stays a cycle.
  const circ = (await copy.get<Record<string, unknown>>(["v", "circular"])).value!;
  assert(circ.self === circ, "circular reference preserved in the copy");
  const u64 = (await copy.get<Deno.KvU64>(["v", "KvU64 max"])).value!;
  assert(u64 instanceof Deno.KvU64 && u64.value === 2n ** 64n - 1n, "KvU64 stays a KvU64");
  // A KvU64 in the copy still works with sum.
  const s = await copy.atomic().sum(["v", "KvU64 zero"], 5n).commit();
  assert(s.ok, "sum on an imported KvU64");
  assertEquals((await copy.get(["v", "KvU64 zero"])).value, new Deno.KvU64(5n), "sum result");
  kv.close();
  copy.close();
  return { compared: a.length };
});
