// Unit tests of @kvconnect/queue without a server: key encoding, V8 bytes, and the request
// logic against a fake fetch (bodies sent, retries, errors surfaced, ack/nack/extend, close).
// Run: node --test test/   (the e2e behaviour against kvconnect: tests/e2e/queue_clients.test.mjs)
import { test } from "node:test";
import assert from "node:assert/strict";
import v8 from "node:v8";
import { keyToJSONText, openQueue, QueueError } from "../mod.js";
import { fromBase64Url, toBase64Url } from "../keys.js";
import { deserialize, serialize } from "../v8.js";

test("keys: every part kind as KvKeyJSON text", () => {
  const text = keyToJSONText(["s\"x", 1.5, -0, NaN, Infinity, -Infinity, 5n, -(2n ** 70n), true, false,
    Uint8Array.of(0xfb, 0xff, 0x00)]);
  assert.equal(text, "[" + [
    '{"type":"string","value":"s\\"x"}',
    '{"type":"number","value":1.5}',
    '{"type":"number","value":-0}',
    '{"type":"number","value":"NaN"}',
    '{"type":"number","value":"Infinity"}',
    '{"type":"number","value":"-Infinity"}',
    '{"type":"bigint","value":"5"}',
    '{"type":"bigint","value":"-1180591620717411303424"}',
    '{"type":"boolean","value":true}',
    '{"type":"boolean","value":false}',
    '{"type":"Uint8Array","value":"-_8A"}',
  ].join(",") + "]");
  assert.deepEqual(JSON.parse(keyToJSONText([])), []);
  assert.throws(() => keyToJSONText(["a", {}]), TypeError);
  assert.throws(() => keyToJSONText(["a", undefined]), TypeError);
  assert.throws(() => keyToJSONText("a"), TypeError);
});

test("base64url without padding, both ways", () => {
  for (let n = 0; n < 20; n++) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 73 + 250) & 0xff);
    const text = toBase64Url(bytes);
    assert.doesNotMatch(text, /[+/=]/);
    assert.deepEqual(fromBase64Url(text), bytes);
  }
  assert.deepEqual(fromBase64Url("AQI="), Uint8Array.of(1, 2), "padding accepted");
});

test("V8: typed arrays get V8's own tags, not Node host objects (Deno reads them)", () => {
  const bytes = serialize(Uint8Array.of(1, 2, 3));
  // header ff 0f, ArrayBuffer 'B' len 3, bytes, view 'V' 'B'(Uint8Array) offset 0 length 3 flags
  assert.deepEqual([...bytes.subarray(0, 8)], [0xff, 0x0f, 0x42, 0x03, 1, 2, 3, 0x56]);
  assert.equal(bytes[8], 0x42);
  assert.notDeepEqual([...v8.serialize(Uint8Array.of(1, 2, 3))], [...bytes], "v8.serialize differs");
});

test("V8: every Deno KV value type round-trips", () => {
  const cyclic = { name: "loop" };
  cyclic.self = cyclic;
  const values = [undefined, null, true, false, 0, -0, NaN, Infinity, 1.5, -(2n ** 100n), "", "héllo €",
    new Date(1700000000123), /a+b/giu, Uint8Array.of(0, 255), Int16Array.of(-1, 2), Float64Array.of(NaN, -0),
    BigUint64Array.of(2n ** 64n - 1n), new DataView(Uint8Array.of(1, 2, 3).buffer, 1, 1), Uint8Array.of(9).buffer,
    new Map([["a", 1], [2, new Set([3])]]), new Set(["x", 1n]), { a: { b: [1, "two", null] } }, [1, , 3],
    new RangeError("r"), new Error("outer", { cause: { code: 7 } }), cyclic];
  for (const value of values) {
    const back = deserialize(serialize(value));
    assert.deepEqual(back, value, `round trip of ${String(value)}`);
  }
});

// ---------------------------------------------------------------------------
// A fake server behind the fetch option.

function fakeServer(routes) {
  const calls = [];
  const fetch = async (url, init) => {
    assert.equal(init.signal, undefined, "requests are never cut off");
    const op = url.replace(/^.*\/queue\/v1\//, "");
    const body = JSON.parse(init.body);
    calls.push({ url, op, body, auth: init.headers.authorization });
    const route = routes[op];
    if (!route) return new Response('{"error":"no route","code":"not_found"}', { status: 404 });
    const [status, answer, headers] = await route(body, calls.length);
    return new Response(JSON.stringify(answer), { status, headers });
  };
  return { fetch, calls };
}

const v8wire = (value) => ({ type: "v8", value: toBase64Url(serialize(value)) });

test("enqueue: the body of docs/queues.md, the URL, the token", async () => {
  const srv = fakeServer({ enqueue: () => [200, { ok: true, versionstamp: "00000000000000010000" }] });
  const q = openQueue({ url: "http://h:1/databases/orders/", accessToken: "tok", fetch: srv.fetch });
  const value = { when: new Date(5), bytes: Uint8Array.of(7) };
  const r = await q.enqueue(value, { delay: 1500, backoffSchedule: [10, 20], keysIfUndelivered: [["failed", 1n]] });
  assert.deepEqual(r, { ok: true, versionstamp: "00000000000000010000" });
  const [call] = srv.calls;
  assert.equal(call.url, "http://h:1/databases/orders/queue/v1/enqueue");
  assert.equal(call.auth, "Bearer tok");
  const [m] = call.body.messages;
  assert.equal(m.value.type, "v8");
  assert.deepEqual(deserialize(fromBase64Url(m.value.value)), value);
  assert.equal(m.delay, 1500);
  assert.deepEqual(m.backoff_schedule, [10, 20]);
  assert.deepEqual(m.keys_if_undelivered, [[{ type: "string", value: "failed" }, { type: "bigint", value: "1" }]]);
  await assert.rejects(q.enqueue(1, { delay: NaN }), TypeError);
  await assert.rejects(q.enqueue(() => 1), /could not be cloned/);
});

test("enqueue: 503 and 429 are retried, a 400 surfaces the server's text at once", async () => {
  let n = 0;
  const srv = fakeServer({
    enqueue: () => (++n < 3 ? [n === 1 ? 503 : 429, { error: "busy", code: "unavailable" }, { "retry-after": "0" }]
      : [200, { ok: true, versionstamp: "0".repeat(20) }]),
  });
  const q = openQueue({ url: "http://h:1", fetch: srv.fetch });
  assert.equal((await q.enqueue("x")).ok, true);
  assert.equal(srv.calls.length, 3);

  const bad = fakeServer({ enqueue: () => [400, { error: "Invalid backoffSchedule", code: "invalid_argument" }] });
  const q2 = openQueue({ url: "http://h:1", fetch: bad.fetch });
  await assert.rejects(q2.enqueue("x"), (e) => e instanceof QueueError && e.status === 400 &&
    e.message === "Invalid backoffSchedule" && e.code === "invalid_argument");
  assert.equal(bad.calls.length, 1, "no retry of a 400");
});

test("listenQueue: handler result acks, a throw nacks with its text, close drains", async () => {
  const queue = [
    { id: "1", lease: "L1", value: v8wire({ n: 1 }), attempt: 1 },
    { id: "2", lease: "L2", value: v8wire({ n: 2, fail: true }), attempt: 1 },
  ];
  const srv = fakeServer({
    pull: async (body) => {
      assert.equal(body.format, "v8");
      const messages = queue.splice(0, body.max_messages);
      if (messages.length === 0) await new Promise((r) => setTimeout(r, 20)); // a short long poll
      return [200, { messages }];
    },
    ack: (b) => [200, { results: b.leases.map((lease) => ({ lease, status: "ok" })) }],
    nack: (b) => [200, { results: b.leases.map((lease) => ({ lease, status: "ok" })) }],
  });
  const q = openQueue({ url: "http://h:1", fetch: srv.fetch });
  const seen = [];
  const done = q.listenQueue((msg) => {
    seen.push(msg.n);
    if (msg.fail) throw new TypeError("bad order");
  }, { concurrency: 1 });
  while (srv.calls.filter((c) => c.op === "ack" || c.op === "nack").length < 2) await new Promise((r) => setTimeout(r, 5));
  q.close();
  await done;
  assert.deepEqual(seen, [1, 2]);
  const settles = srv.calls.filter((c) => c.op !== "pull").map((c) => [c.op, c.body]);
  assert.deepEqual(settles, [["ack", { leases: ["L1"] }], ["nack", { leases: ["L2"], error: "TypeError: bad order" }]]);
  assert.ok(srv.calls.filter((c) => c.op === "pull").every((c) => c.body.max_messages === 1), "concurrency 1");
  await assert.rejects(q.listenQueue(() => {}), /already closed/);
});

test("listenQueue: a running handler's lease is extended; close waits for it and settles it", async () => {
  let delivered = false;
  const srv = fakeServer({
    pull: async () => {
      if (!delivered) {
        delivered = true;
        return [200, { messages: [{ id: "1", lease: "L1", value: v8wire("slow"), attempt: 1 }] }];
      }
      await new Promise((r) => setTimeout(r, 20));
      return [200, { messages: [] }];
    },
    extend: (b) => [200, { results: b.leases.map((lease) => ({ lease, status: "ok" })) }],
    ack: (b) => [200, { results: b.leases.map((lease) => ({ lease, status: "ok" })) }],
  });
  const q = openQueue({ url: "http://h:1", fetch: srv.fetch });
  let started;
  const running = new Promise((r) => (started = r));
  let finished = false;
  const done = q.listenQueue(async () => {
    started();
    await new Promise((r) => setTimeout(r, 1200));
    finished = true;
  }, { visibilityTimeout: 1000 });
  await running;
  q.close();
  await done;
  assert.ok(finished, "listenQueue resolved before the handler finished");
  const ops = srv.calls.map((c) => c.op).filter((op) => op !== "pull");
  assert.ok(ops.filter((op) => op === "extend").length >= 2, `extends: ${ops}`);
  assert.equal(ops.at(-1), "ack");
  const ext = srv.calls.find((c) => c.op === "extend");
  assert.deepEqual(ext.body, { leases: ["L1"], visibility_timeout: 1000 });
});

test("listenQueue: a refused pull rejects with the server's text; 5xx are retried", async () => {
  let n = 0;
  const srv = fakeServer({
    pull: () => (++n === 1 ? [502, { error: "bad gateway" }] : [401, { error: "Invalid access token.", code: "unauthenticated" }]),
  });
  const q = openQueue({ url: "http://h:1", fetch: srv.fetch });
  await assert.rejects(q.listenQueue(() => {}), (e) => e instanceof QueueError && e.status === 401 &&
    e.message === "Invalid access token.");
  assert.equal(n, 2);
});

test("listenQueue: an aborted signal stops the listener", async () => {
  const srv = fakeServer({
    pull: async (body) => {
      assert.equal(body.wait, 200);
      await new Promise((r) => setTimeout(r, body.wait));
      return [200, { messages: [] }];
    },
  });
  const q = openQueue({ url: "http://h:1", fetch: srv.fetch });
  const ctrl = new AbortController();
  const t0 = Date.now();
  const done = q.listenQueue(() => {}, { signal: ctrl.signal, pullWait: 200 });
  setTimeout(() => ctrl.abort(), 50);
  await done;
  assert.equal(srv.calls.length, 1, "no pull after the abort");
  assert.ok(Date.now() - t0 >= 190, "the pull under way was finished, not cut off");
  await assert.rejects(q.listenQueue(() => {}, { pullWait: 20_001 }), TypeError);
});

test("listenQueue: messages of the pull under way at close are still handled and acked", async () => {
  let pulls = 0;
  let closeNow;
  const closing = new Promise((r) => (closeNow = r));
  const srv = fakeServer({
    pull: async () => {
      if (++pulls > 1) throw new Error("pulled after close");
      closeNow();
      await new Promise((r) => setTimeout(r, 100)); // close() is called meanwhile
      return [200, { messages: [{ id: "1", lease: "L1", value: v8wire("late"), attempt: 1 }] }];
    },
    ack: (b) => [200, { results: b.leases.map((lease) => ({ lease, status: "ok" })) }],
  });
  const q = openQueue({ url: "http://h:1", fetch: srv.fetch });
  const got = [];
  const done = q.listenQueue((v) => got.push(v));
  await closing;
  q.close();
  await done;
  assert.deepEqual(got, ["late"]);
  assert.deepEqual(srv.calls.map((c) => c.op), ["pull", "ack"]);
});
