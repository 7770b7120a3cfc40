// The values of cross_runtime.test.mjs, shared by its Node side and by deno/cross_runtime.ts:
// one of every kind a KV value can hold in both runtimes, and an equality that means "reads as
// the same value" in either (views compare by type and the bytes they show, errors by type,
// message and cause, dates by time including NaN). Float16Array is left out: Node 20 has none.

/** [name, make(KvU64)] in table order; `KvU64` is Deno.KvU64 or @deno/kv's class. */
export const crossValues = [
  ["string", () => "hello, wörld €"],
  ["empty string", () => ""],
  ["number", () => 42],
  ["number 1.5", () => 1.5],
  ["number -0", () => -0],
  ["number NaN", () => NaN],
  ["number -Infinity", () => -Infinity],
  ["bigint", () => -(2n ** 70n)],
  ["boolean", () => true],
  ["null", () => null],
  ["undefined", () => undefined],
  ["Date", () => new Date(1700000000123)],
  ["Date (invalid)", () => new Date(NaN)],
  ["RegExp", () => /a+b\/c/giu],
  ["Map", () => new Map([["a", 1], [2, { b: true }]])],
  ["Set", () => new Set([1, "two", 3n])],
  ["object", () => ({ a: 1, b: "x", nested: { c: [1, 2] } })],
  ["object (cycle, shared)", () => {
    const shared = { s: 1 };
    const o = { x: shared, y: shared };
    o.self = o;
    return o;
  }],
  ["array", () => [1, "two", null, undefined, [3]]],
  ["array (sparse)", () => {
    const a = [];
    a[3] = "x";
    a.length = 6;
    return a;
  }],
  ["Int8Array", () => Int8Array.of(-128, 0, 127)],
  ["Uint8Array (top level)", () => Uint8Array.of(0, 1, 255)],
  ["Uint8Array (in an object)", () => ({ bytes: Uint8Array.of(0, 1, 255) })],
  ["Uint8ClampedArray", () => Uint8ClampedArray.of(0, 128, 255)],
  ["Int16Array", () => Int16Array.of(-32768, 32767)],
  ["Uint16Array", () => Uint16Array.of(0, 65535)],
  ["Int32Array", () => Int32Array.of(-(2 ** 31), 2 ** 31 - 1)],
  ["Uint32Array", () => Uint32Array.of(0, 2 ** 32 - 1)],
  ["Float32Array", () => Float32Array.of(1.5, -0, Infinity)],
  ["Float64Array", () => Float64Array.of(Math.PI, NaN)],
  ["BigInt64Array", () => BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n)],
  ["BigUint64Array", () => BigUint64Array.of(0n, 2n ** 64n - 1n)],
  ["DataView", () => new DataView(Uint8Array.of(9, 8, 7, 6).buffer, 1, 2)],
  ["typed arrays (shared buffer)", () => {
    const u8 = Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8);
    return { u8, f64: new Float64Array(u8.buffer), list: [u8, u8] };
  }],
  ["ArrayBuffer", () => Uint8Array.of(1, 2, 3).buffer],
  ["Error", () => new Error("boom")],
  ["Error (cause)", () => new Error("outer", { cause: { code: 7 } })],
  ["EvalError", () => new EvalError("e")],
  ["RangeError", () => new RangeError("r")],
  ["ReferenceError", () => new ReferenceError("f")],
  ["SyntaxError", () => new SyntaxError("s")],
  ["TypeError", () => new TypeError("t")],
  ["URIError", () => new URIError("u")],
  ["KvU64", (KvU64) => new KvU64(2n ** 64n - 1n)],
];

function viewBytes(v) {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

function sameBytes(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

const typeName = (v) => Object.prototype.toString.call(v).slice(8, -1);

/** True if `got` reads as the same value as `want` (see the file comment). */
export function sameValue(got, want, seen = new Map()) {
  if (Object.is(got, want)) return true;
  if (typeof got !== "object" || typeof want !== "object" || got === null || want === null) {
    return false;
  }
  if (seen.has(want)) return seen.get(want) === got;
  seen.set(want, got);
  const type = typeName(want);
  if (typeName(got) !== type) return false;
  if (want.constructor?.name === "KvU64") {
    return got.constructor?.name === "KvU64" && got.value === want.value;
  }
  if (want instanceof Date) return Object.is(got.getTime(), want.getTime());
  if (want instanceof RegExp) return got.source === want.source && got.flags === want.flags;
  if (want instanceof ArrayBuffer) return sameBytes(new Uint8Array(got), new Uint8Array(want));
  if (ArrayBuffer.isView(want)) return sameBytes(viewBytes(got), viewBytes(want));
  if (want instanceof Error) {
    return got.name === want.name && got.message === want.message &&
      ("cause" in got) === ("cause" in want) && sameValue(got.cause, want.cause, seen);
  }
  if (want instanceof Map) {
    if (got.size !== want.size) return false;
    const g = [...got];
    return [...want].every(([k, v], i) => sameValue(g[i][0], k, seen) && sameValue(g[i][1], v, seen));
  }
  if (want instanceof Set) {
    if (got.size !== want.size) return false;
    const g = [...got];
    return [...want].every((v, i) => sameValue(g[i], v, seen));
  }
  if (Array.isArray(want) && got.length !== want.length) return false;
  const keys = Reflect.ownKeys(want);
  const gotKeys = Reflect.ownKeys(got);
  if (keys.length !== gotKeys.length) return false;
  return keys.every((k) => Object.hasOwn(got, k) && sameValue(got[k], want[k], seen));
}

/** "OK", or what went wrong reading a value (short, for the table). */
export function describeRead(read) {
  if (read.error !== undefined) return `error: ${read.error}`;
  return read.same ? "OK" : "differs";
}
