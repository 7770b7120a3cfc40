// Every storable value type round-trips through set/get/getMany/list, values near
// the 64 KiB limit work, and a value over 65,536 bytes is refused.
import { assert, assertEquals, assertRejects, collect, main, ns, openKv, step } from "./_lib.ts";

await main("values", async () => {
  const kv = await openKv();
  const p = ns("values");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];

  const circular: Record<string, unknown> = { name: "loop" };
  circular.self = circular;
  const shared = { s: 1 };
  const bytes = new Uint8Array(256).map((_, i) => i);
  // deno-lint-ignore no-sparse-arrays
  const sparse = [1, , 3];
  const withProps = Object.assign([1, 2], { extra: "prop" });
  const cases: [string, unknown][] = [
    ["string", "hello"],
    ["empty string", ""],
    ["latin1 string", "caf\u00e9 \u00ff"],
    ["two-byte string", "€ 日本語 🌍"],
    ["string with nul", "a\u0000b"],
    ["lone surrogate", "x\ud800y"],
    ["int", 42],
    ["negative int", -7],
    ["zero", 0],
    ["negative zero", -0],
    ["float", 3.141592653589793],
    ["large number", 2 ** 53 + 2],
    ["tiny number", Number.MIN_VALUE],
    ["NaN", NaN],
    ["Infinity", Infinity],
    ["-Infinity", -Infinity],
    ["bigint 0", 0n],
    ["bigint", 12345678901234567890n],
    ["negative bigint", -(2n ** 100n)],
    ["huge bigint", 2n ** 1000n + 1n],
    ["true", true],
    ["false", false],
    ["null", null],
    ["undefined", undefined],
    ["object", { a: 1, b: "two", c: [3], "key with spaces": true, 7: "numeric key" }],
    ["empty object", {}],
    ["array", [1, "two", 3n, null, undefined, false]],
    ["empty array", []],
    ["sparse array", sparse],
    ["array with props", withProps],
    ["Date", new Date("2024-02-29T12:34:56.789Z")],
    ["Date epoch", new Date(0)],
    ["RegExp", /ab+c/gimsuy],
    ["RegExp plain", /x/],
    ["Map", new Map<unknown, unknown>([["a", 1], [2, "b"], [{ o: 1 }, [1]]])],
    ["Set", new Set<unknown>([1, "two", 3n, { four: 4 }])],
    ["Uint8Array (top level)", bytes],
    ["empty Uint8Array", new Uint8Array(0)],
    ["Int32Array", new Int32Array([-1, 2, 2 ** 31 - 1])],
    ["Float64Array", new Float64Array([1.5, -0, NaN])],
    ["BigUint64Array", new BigUint64Array([1n, 2n ** 64n - 1n])],
    ["ArrayBuffer", new Uint8Array([9, 8, 7]).buffer],
    ["KvU64", new Deno.KvU64(2n ** 64n - 1n)],
    ["KvU64 zero", new Deno.KvU64(0n)],
    ["boxed", [new Number(1), new String("s"), new Boolean(false)]],
    ["Error", new RangeError("out of range")],
    ["shared refs", [shared, shared]],
    ["nested", {
      level1: {
        arr: [new Map([["m", new Set([new Date(5), /r/g])]]), { deep: { deeper: { deepest: [1n, "x", null] } } }],
        bytes: new Uint8Array([0, 1, 2]),
        when: new Date(1),
      },
      list: Array.from({ length: 50 }, (_, i) => ({ i, s: String(i) })),
    }],
  ];

  step("set/get every type");
  const stamps = new Map<string, string>();
  for (const [name, value] of cases) {
    const r = await kv.set(k("v", name), value);
    assert(r.ok, `set ${name}`);
    stamps.set(name, r.versionstamp);
    const got = await kv.get(k("v", name));
    assertEquals(got.value, value, `round-trip of ${name}`);
    assertEquals(got.versionstamp, r.versionstamp, `versionstamp of ${name}`);
  }

  step("undefined is a stored value, not a missing key");
  const u = await kv.get(k("v", "undefined"));
  assert(u.value === undefined && u.versionstamp !== null, "undefined value has a versionstamp");

  step("identity-preserving values");
  const circ = (await kv.get<Record<string, unknown>>(k("circ"))).value;
  assert(circ === null, "no circ yet");
  await kv.set(k("circ"), circular);
  const c = (await kv.get<Record<string, unknown>>(k("circ"))).value!;
  assert(c.self === c && c.name === "loop", "circular reference preserved");
  const sh = (await kv.get<unknown[]>(k("v", "shared refs"))).value!;
  assert(sh[0] === sh[1], "shared references preserved");

  step("list returns every type");
  const listed = await collect(kv.list({ prefix: k("v") }));
  assertEquals(listed.length, cases.length, "number of listed values");
  const byName = new Map(listed.map((e) => [e.key[e.key.length - 1] as string, e]));
  for (const [name, value] of cases) {
    const e = byName.get(name);
    assert(e, `listed ${name}`);
    assertEquals(e.value, value, `listed value of ${name}`);
    assertEquals(e.versionstamp, stamps.get(name), `listed versionstamp of ${name}`);
  }

  step("getMany returns every type");
  for (let i = 0; i < cases.length; i += 10) {
    const chunk = cases.slice(i, i + 10);
    const got = await kv.getMany(chunk.map(([name]) => k("v", name)));
    chunk.forEach(([name, value], j) => assertEquals(got[j].value, value, `getMany value of ${name}`));
  }

  step("values near 64 KiB");
  const blob = new Uint8Array(65_000).map((_, i) => (i * 31 + 7) & 0xff);
  await kv.set(k("big", "bytes65000"), blob);
  assertEquals((await kv.get(k("big", "bytes65000"))).value, blob, "65,000-byte Uint8Array");
  const maxBlob = new Uint8Array(65_536).fill(0xab);
  maxBlob[0] = 1;
  maxBlob[65_535] = 2;
  await kv.set(k("big", "bytes65536"), maxBlob);
  assertEquals((await kv.get(k("big", "bytes65536"))).value, maxBlob, "exactly 65,536-byte Uint8Array");
  const str60k = Array.from({ length: 61_000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join("");
  await kv.set(k("big", "str60k"), str60k);
  assertEquals((await kv.get(k("big", "str60k"))).value, str60k, "~60 KiB one-byte string");
  const wide = "€".repeat(30_000); // two-byte string: 60,000 bytes of UTF-16
  await kv.set(k("big", "wide"), wide);
  assertEquals((await kv.get(k("big", "wide"))).value, wide, "~60 KB two-byte string");
  const obj = { a: "x".repeat(30_000), b: new Uint8Array(30_000).fill(1) };
  await kv.set(k("big", "obj"), obj);
  assertEquals((await kv.get(k("big", "obj"))).value, obj, "~60 KB object");
  const bigList = await collect(kv.list({ prefix: k("big") }));
  assertEquals(bigList.map((e) => e.key[e.key.length - 1]), ["bytes65000", "bytes65536", "obj", "str60k", "wide"], "list of large values");
  const bigMany = await kv.getMany(bigList.map((e) => e.key));
  assertEquals(bigMany.map((e) => e.value), bigList.map((e) => e.value), "getMany of large values");

  step("values over 65,536 bytes are refused");
  await assertRejects(() => kv.set(k("big", "too-big"), new Uint8Array(65_537)), [/too large/i], "65,537-byte Uint8Array");
  await assertRejects(() => kv.set(k("big", "too-big"), "y".repeat(66_000)), [/too large/i], "66,000-char string");
  assertEquals((await kv.get(k("big", "too-big"))).versionstamp, null, "refused value not stored");

  step("an atomic write of ~780 KB (12 x 65,000 bytes)");
  {
    const a = kv.atomic();
    for (let i = 0; i < 12; i++) a.set(k("bulk", i), new Uint8Array(65_000).fill(i));
    const r = await a.commit();
    assert(r.ok, "780 KB atomic");
    const all = await collect(kv.list<Uint8Array>({ prefix: k("bulk") }));
    assertEquals(all.length, 12, "12 large values listed (~780 KB response)");
    all.forEach((e, i) => {
      assert(e.value.length === 65_000 && e.value.every((b) => b === i), `bulk value ${i}`);
      assert(e.versionstamp === r.versionstamp, `bulk versionstamp ${i}`);
    });
    const over = kv.atomic();
    for (let i = 0; i < 13; i++) over.set(k("bulk2", i), new Uint8Array(65_000));
    await assertRejects(() => over.commit(), [/too large/i], "845 KB atomic must be refused");
  }

  kv.close();
  return { types: cases.length };
});
