// Unit tests of @kvconnect/queue for Deno without a server: key encoding, V8 bytes through
// node:v8 for every Deno KV value type, and the request logic against a fake fetch.
// Run: deno test mod_test.ts   (against kvconnect: tests/e2e/queue_clients.test.mjs)
import { keyToJSONText, openQueue, QueueError } from "./mod.ts";
import { fromBase64Url, toBase64Url } from "./keys.ts";
import { deserialize, serialize } from "./v8.ts";

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

/** Deno's inspect shows every value type Deno KV stores, including cycles and holes. */
const show = (v: unknown) =>
  Deno.inspect(v, { depth: 10, colors: false, showHidden: false, iterableLimit: 1000 })
    .replace(/\n\s+at .*/g, ""); // error stacks differ

Deno.test("keys: every part kind as KvKeyJSON text", () => {
  const text = keyToJSONText(["s", 1.5, -0, NaN, -Infinity, 5n, true, Uint8Array.of(0xfb, 0xff, 0)]);
  const want = "[" + [
    '{"type":"string","value":"s"}',
    '{"type":"number","value":1.5}',
    '{"type":"number","value":-0}',
    '{"type":"number","value":"NaN"}',
    '{"type":"number","value":"-Infinity"}',
    '{"type":"bigint","value":"5"}',
    '{"type":"boolean","value":true}',
    '{"type":"Uint8Array","value":"-_8A"}',
  ].join(",") + "]";
  assert(text === want, `got ${text}`);
  let threw = false;
  try {
    keyToJSONText(["a", {} as unknown as string]);
  } catch (e) {
    threw = e instanceof TypeError;
  }
  assert(threw, "an object key part is refused");
});

Deno.test("base64url without padding, both ways", () => {
  for (let n = 0; n < 20; n++) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 73 + 250) & 0xff);
    const text = toBase64Url(bytes);
    assert(!/[+/=]/.test(text), text);
    assert(show(fromBase64Url(text)) === show(bytes), `length ${n}`);
  }
  const big = new Uint8Array(100_000).map((_, i) => i);
  assert(show(fromBase64Url(toBase64Url(big))) === show(big), "100 kB");
});

Deno.test("V8 through node:v8: format 15, V8's own view tags, every value type round-trips", () => {
  const bytes = serialize(Uint8Array.of(1, 2, 3));
  assert(bytes[0] === 0xff && bytes[1] === 0x0f, "format 15 header");
  assert(bytes[2] === 0x42 && bytes[7] === 0x56, "ArrayBuffer then a V8 view ('B' ... 'V')");
  const cyclic: Record<string, unknown> = { name: "loop" };
  cyclic.self = cyclic;
  // deno-lint-ignore no-sparse-arrays
  const values: unknown[] = [undefined, null, true, 0, -0, NaN, -Infinity, 1.5, -(2n ** 100n), "", "héllo €",
    "x\ud800y", new Date(1700000000123), new Date(NaN), /a+b/giu, Uint8Array.of(0, 255), Int16Array.of(-1, 2),
    Float64Array.of(NaN, -0), BigInt64Array.of(-5n), new DataView(Uint8Array.of(1, 2, 3).buffer, 1, 1),
    Uint8Array.of(9).buffer, new Map<unknown, unknown>([["a", 1], [2, new Set([3])]]), new Set(["x", 1n]),
    { a: { b: [1, "two", null] } }, [1, , 3], new RangeError("r"), new Error("outer", { cause: { code: 7 } }),
    cyclic];
  for (const value of values) {
    const back = deserialize(serialize(value));
    assert(show(back) === show(value), `round trip of ${show(value)}: got ${show(back)}`);
  }
  // format 16 (what Deno's own KV writes) reads too
  const v16 = serialize({ d: new Date(5) });
  v16[1] = 0x10;
  assert(show(deserialize(v16)) === show({ d: new Date(5) }), "format 16");
});

Deno.test("enqueue body and listenQueue ack/nack against a fake server", async () => {
  const calls: { op: string; body: Record<string, unknown> }[] = [];
  const pending = [
    { id: "1", lease: "L1", value: { type: "v8", value: toBase64Url(serialize("ok")) }, attempt: 1 },
    { id: "2", lease: "L2", value: { type: "v8", value: toBase64Url(serialize("fail")) }, attempt: 1 },
  ];
  const fakeFetch = async (input: string | URL | Request, init?: RequestInit) => {
    const op = String(input).replace(/^.*\/queue\/v1\//, "");
    const body = JSON.parse(String(init?.body));
    calls.push({ op, body });
    const json = (status: number, v: unknown) => new Response(JSON.stringify(v), { status });
    if (op === "enqueue") return json(200, { ok: true, versionstamp: "00000000000000010000" });
    if (op === "pull") {
      const messages = pending.splice(0, body.max_messages);
      if (messages.length === 0) await new Promise((r) => setTimeout(r, 20)); // a short long poll
      return json(200, { messages });
    }
    if (op === "nack" && body.leases[0] === "L9") return json(403, { error: "read-only", code: "forbidden" });
    return json(200, { results: body.leases.map((lease: string) => ({ lease, status: "ok" })) });
  };
  const q = openQueue({ url: "http://h:1/", accessToken: "t", fetch: fakeFetch as typeof fetch });
  const r = await q.enqueue(new Map([[1, 2]]), { delay: 10, keysIfUndelivered: [["k", 1]], backoffSchedule: [1] });
  assert(r.ok && r.versionstamp === "00000000000000010000", "enqueue answer");
  const m = (calls[0].body.messages as Record<string, unknown>[])[0];
  assert(JSON.stringify(m.keys_if_undelivered) === '[[{"type":"string","value":"k"},{"type":"number","value":1}]]',
    `keys ${JSON.stringify(m)}`);
  assert(show(deserialize(fromBase64Url((m.value as { value: string }).value))) === show(new Map([[1, 2]])), "value");

  const done = q.listenQueue((msg) => {
    if (msg === "fail") throw new Error("nope");
  });
  while (calls.filter((c) => c.op === "ack" || c.op === "nack").length < 2) {
    await new Promise((r) => setTimeout(r, 5));
  }
  q.close();
  await done;
  const settles = calls.filter((c) => c.op === "ack" || c.op === "nack").map((c) => JSON.stringify([c.op, c.body]))
    .sort();
  assert(
    settles.join() === '["ack",{"leases":["L1"]}],["nack",{"leases":["L2"],"error":"Error: nope"}]',
    settles.join(),
  );
  let rejected: unknown;
  try {
    await q.enqueue(1);
  } catch (e) {
    rejected = e;
  }
  assert(rejected instanceof Error && rejected.message === "already closed", "enqueue after close");
  assert(new QueueError(400, "x").status === 400, "QueueError");
});
