// The console's pure modules in Node, without a browser or server: the Deno literal syntax of
// the value editor (src/console/literal.js) read into KvValueJSON and written back, its errors
// with their place; the URL hash of a place (route.js) for keys of every part type; expiry
// texts (kv.js). console.test.mjs drives the same code in Chromium against the server.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { importConsoleModule } from "./harness.mjs";

// Imported through the harness, so any Node reads them as the ES modules they are.
const { formatLiteral, parseLiteral } = await importConsoleModule("literal.js");
const { formatRoute, parseRoute, partSegment, segmentPart } = await importConsoleModule("route.js");
const { readExpiry, relativeTime } = await importConsoleModule("kv.js");

const S = (value) => ({ type: "string", value });
const N = (value) => ({ type: "number", value });

describe("Deno literal syntax", () => {
  test("reads every form into KvValueJSON", () => {
    const cases = [
      ['"a\\n\\u00e9\\u{1F600}"', S("a\né😀")],
      ["'single \\'quoted\\''", S("single 'quoted'")],
      ["`template`", S("template")],
      ["42", N(42)], ["-1.5e3", N(-1500)], [".5", N(0.5)], ["0x1f", N(31)], ["1_000", N(1000)],
      ["NaN", N("NaN")], ["Infinity", N("Infinity")], ["-Infinity", N("-Infinity")],
      ["123n", { type: "bigint", value: "123" }], ["-0n", { type: "bigint", value: "0" }],
      ["-98765432109876543210n", { type: "bigint", value: "-98765432109876543210" }],
      ["true", { type: "boolean", value: true }], ["null", { type: "null", value: null }],
      ["undefined", { type: "undefined", value: null }],
      ["[1, 'a',]", { type: "Array", value: [N(1), S("a")] }],
      ['{ a: 1, "b c": "x", 3: null, }', {
        type: "object", value: { a: N(1), "b c": S("x"), 3: { type: "null", value: null } },
      }],
      ['new Date("2024-05-06T07:08:09.010Z")', { type: "Date", value: "2024-05-06T07:08:09.010Z" }],
      ["new Date(0)", { type: "Date", value: "1970-01-01T00:00:00.000Z" }],
      ["new Date(NaN)", { type: "Date", value: null }],
      ['new Map([["k", 1n]])', { type: "Map", value: [[S("k"), { type: "bigint", value: "1" }]] }],
      ["new Set([])", { type: "Set", value: [] }],
      ["new Set()", { type: "Set", value: [] }],
      ["new Uint8Array([0, 255])", { type: "Uint8Array", value: "AP8" }],
      ["new Int16Array([-1])", { type: "Int16Array", value: "__8" }],
      ["new BigUint64Array([1n])", { type: "BigUint64Array", value: "AQAAAAAAAAA" }],
      ['new RegExp("a/b", "g")', { type: "RegExp", value: "/a\\/b/g" }],
      ['new TypeError("bad")', { type: "TypeError", value: { message: "bad" } }],
      ["new Deno.KvU64(7n)", { type: "KvU64", value: "7" }],
      ["// comment\n/* block */ 1 // after", N(1)],
    ];
    for (const [text, want] of cases) assert.deepEqual(parseLiteral(text), want, text);
  });

  test("writes values back so that they read the same", () => {
    const texts = [
      '{ name: "Ada", langs: ["en", "fr"], born: 1815 }',
      'new Map([["theme", "dark"], [2n, new Set([true, null])]])',
      'new Date("2024-05-06T07:08:09.010Z")',
      "new Uint8Array([1, 2, 3])",
      "new Float64Array([1.5, -0, NaN])",
      "new BigInt64Array([-5n])",
      'new RegExp("ab+c", "gi")',
      'new RangeError("out")',
      "new Deno.KvU64(18446744073709551615n)",
      '{ "two words": 1, "__proto__": 2, ok: [undefined, -Infinity] }',
      `[${Array.from({ length: 40 }, (_, i) => i).join(", ")}]`,
    ];
    for (const text of texts) {
      const value = parseLiteral(text);
      const written = formatLiteral(value);
      assert.notEqual(written, null, text);
      assert.deepEqual(parseLiteral(written), value, `${text} -> ${written}`);
    }
    assert.equal(formatLiteral(parseLiteral('{ name: "Ada", born: 1815 }')), '{ name: "Ada", born: 1815 }');
    assert.equal(formatLiteral(parseLiteral("[1, 2, 3]")), "[1, 2, 3]");
    assert.equal(formatLiteral(parseLiteral(`[${"1, ".repeat(30)}1]`)).split("\n").length, 33, "long lists go one item a line");
  });

  test("values the syntax cannot write give null (the typed editor)", () => {
    for (const v of [
      { type: "ref", value: 1 },
      { type: "Array", value: [null], length: 1 },
      { type: "ArrayBuffer", value: "AAE" },
      { type: "NumberObject", value: 1 },
      { type: "Error", value: { message: "m", stack: "Error: m\n    at x" } },
      { type: "object", value: { k: { type: "KvU64", value: "1" } } },
      { type: "Uint8Array", value: "AAE", byteOffset: 1 },
    ]) {
      assert.equal(formatLiteral(v), null, JSON.stringify(v));
    }
  });

  test("errors name the line and column", () => {
    const cases = [
      ["new Map([[1, 2], [3]])", /each Map item is a \[key, value\] pair at line 1, column 5/],
      ["{ a: 1,\n  b 2 }", /expected ":" but found "2" at line 2, column 5/],
      ["[1, 2", /expected "," or "]" at line 1, column 6/],
      ['"open', /unterminated string at line 1, column 1/],
      ["new Uint8Array([256])", /bytes \(0 to 255\)/],
      ["Map([])", /unknown name Map \(write new Map\(…\)\)/],
      ["new Foo()", /unknown constructor Foo/],
      ["1 2", /unexpected text after the value at line 1, column 3/],
      ["alert(1)", /unknown name alert/],
      ["`a${b}`", /template substitutions/],
      ["{ a: 1, a: 2 }", /property "a" given twice/],
      ["new Deno.KvU64(-1n)", /KvU64 takes a bigint/],
      ["[new Deno.KvU64(1n)]", /only be a whole value/],
      ["", /the text ended/],
    ];
    for (const [text, re] of cases) assert.throws(() => parseLiteral(text), re, text);
  });
});

describe("routes", () => {
  const key = [
    S("users"), S("42"), S(""), S("a/b?c#d&e f"), S("true"), N(42), N(-0.5), { type: "bigint", value: "7" },
    { type: "boolean", value: false }, { type: "Uint8Array", value: "AQI" }, S("é"), { type: "raw", value: "mWFi" },
  ];

  test("every key part survives a segment", () => {
    for (const part of key) {
      assert.deepEqual(segmentPart(partSegment(part)), part, JSON.stringify(part));
    }
    assert.equal(partSegment(S("users")), "users");
    assert.equal(partSegment(S("42")), '"42"');
  });

  test("places survive the hash", () => {
    const places = [
      { page: "entries", db: "default", prefix: [], view: "folders", open: null },
      { page: "entries", db: "my db", prefix: key, view: "all", open: [...key, S("x")] },
      { page: "queue", db: "default" },
      { page: "tokens", db: null },
    ];
    for (const place of places) {
      const hash = formatRoute(place);
      assert.match(hash, /^#\//);
      assert.ok(!/[\s#]/.test(hash.slice(1)), `no space or # inside: ${hash}`);
      assert.deepEqual(parseRoute(hash), place, hash);
    }
    assert.equal(formatRoute({ page: "entries", db: "default", prefix: [S("users"), N(42)] }),
      "#/db/default/prefix/users/42");
    assert.deepEqual(parseRoute("#/db/default"), { page: "entries", db: "default", prefix: [], view: "folders", open: null });
    assert.equal(parseRoute("#/nothing"), null);
    assert.equal(parseRoute("#/db/default/watch/extra"), null);
  });
});

describe("expiry texts", () => {
  const now = Date.parse("2030-01-01T00:00:00Z");
  test("relative times", () => {
    assert.equal(relativeTime(null, now), "never");
    assert.equal(relativeTime("2030-01-01T00:05:00Z", now), "in 5 min");
    assert.equal(relativeTime("2030-01-01T02:00:00Z", now), "in 2 h");
    assert.equal(relativeTime("2030-01-04T00:00:00Z", now), "in 3 days");
    assert.equal(relativeTime("2029-12-31T23:58:00Z", now), "2 min ago");
  });
  test("what the Expires field accepts", () => {
    assert.equal(readExpiry("never", now), null);
    assert.equal(readExpiry("", now), null);
    assert.equal(readExpiry("10m", now), 600_000);
    assert.equal(readExpiry("1.5h", now), 5_400_000);
    assert.equal(readExpiry("2030-01-01T00:00:30Z", now), 30_000);
    assert.throws(() => readExpiry("2029-01-01T00:00:00Z", now), /in the past/);
    assert.throws(() => readExpiry("soon", now), /neither/);
  });
});
