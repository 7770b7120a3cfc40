// The queue's Server-Sent Events stream (GET BASE/queue/v1/stream, docs/queues.md): at most
// max_in_flight unsettled deliveries at a time, each ack makes room for the next, over HTTP/1.1
// (Node's fetch); a stream that goes away settles nothing: its leases expire and the messages
// are delivered again.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import { annotate, LOCAL_BACKEND, metricValue, removeTempDirs, sleep, startServer, waitFor } from "./harness.mjs";

after(removeTempDirs);

const skip = LOCAL_BACKEND && "needs the kvconnect server";

async function api(server, op, body) {
  const res = await fetch(`${server.url}/queue/v1/${op}`, {
    method: "POST", headers: { authorization: `Bearer ${server.token}` }, body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${op}: ${res.status} ${text}`);
  return JSON.parse(text);
}

// Opens the stream and collects its `message` events.
async function openStream(server, query) {
  const ac = new AbortController();
  const res = await fetch(`${server.url}/queue/v1/stream?${query}`, {
    headers: { authorization: `Bearer ${server.token}` }, signal: ac.signal,
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /text\/event-stream/);
  const events = [];
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  const pump = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const lines = block.split("\n");
          if (lines[0] === "event: message") events.push(JSON.parse(lines[1].slice("data: ".length)));
        }
      }
    } catch {
      // aborted
    }
  })();
  return { events, close: async () => { ac.abort(); await pump; } };
}

/** Waits until the server counts `n` waiting pulls (kvconnect_queue_consumers). */
async function waitingPulls(server, n, what) {
  await waitFor(async () => (await metricValue(server, "kvconnect_queue_consumers", { database: "default" })) === n,
    { what: `${n} waiting pull(s): ${what}` });
}

async function until(what, fn, ms = 10_000) {
  const start = Date.now();
  while (Date.now() - start < ms) {
    if (fn()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

test("stream: at most max_in_flight unsettled; acks make room; a closed stream's leases expire", { timeout: 60_000, skip }, async () => {
  const server = await startServer();
  try {
    const stream = await openStream(server, "max_in_flight=3&visibility_timeout=1000");
    const messages = [];
    for (let i = 0; i < 8; i++) messages.push({ value: { type: "number", value: i } });
    await api(server, "enqueue", { messages });
    await until("3 deliveries", () => stream.events.length === 3);
    await sleep(300);
    assert.equal(stream.events.length, 3, "no more than max_in_flight before an ack");
    const got = [];
    while (got.length < 7) {
      const e = stream.events[got.length];
      got.push(e.value.value);
      const r = await api(server, "ack", { leases: [e.lease] });
      assert.equal(r.results[0].status, "ok");
      await until(`delivery ${got.length + 3}`, () => stream.events.length >= Math.min(8, got.length + 3));
    }
    assert.equal(stream.events.length, 8);
    // The eighth is in flight on the stream; the stream goes away without settling it.
    const last = stream.events[7];
    await stream.close();
    const { messages: again } = await api(server, "pull", { wait: 5000 });
    assert.equal(again.length, 1, "the abandoned delivery comes back after its lease");
    assert.equal(again[0].id, last.id);
    assert.equal(again[0].attempt, 2);
    assert.deepEqual([...got, again[0].value.value].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7]);
    const stale = await api(server, "ack", { leases: [last.lease] });
    assert.equal(stale.results[0].status, "stale", "the stream's old lease settles nothing");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("stream: bad parameters are 400 with a text; POST is 405", { timeout: 30_000, skip }, async () => {
  const server = await startServer();
  try {
    for (const q of ["max_in_flight=0", "max_in_flight=x", "visibility_timeout=5", "format=xml"]) {
      const res = await fetch(`${server.url}/queue/v1/stream?${q}`, { headers: { authorization: `Bearer ${server.token}` } });
      assert.equal(res.status, 400, q);
      assert.ok((await res.json()).error.length > 10);
    }
    const post = await fetch(`${server.url}/queue/v1/stream`, { method: "POST", headers: { authorization: `Bearer ${server.token}` } });
    assert.equal(post.status, 405);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("a pull whose client went away takes nothing: the next message goes to a live pull at once", { timeout: 60_000, skip }, async () => {
  const server = await startServer();
  try {
    // A client that goes away: an HTTP/1.1 request whose socket is destroyed while the pull
    // waits (node:http, whose destroy() closes the connection at once in every Node version;
    // an aborted fetch keeps it open in Node 18).
    const body = JSON.stringify({ wait: 15000, visibility_timeout: 30000 });
    const req = http.request(`${server.url}/queue/v1/pull`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-length": Buffer.byteLength(body) },
    });
    const abandoned = new Promise((resolve) => {
      req.on("response", () => resolve("answered"));
      req.on("error", () => resolve("aborted"));
      req.on("close", () => resolve("aborted"));
    });
    req.end(body);
    await waitingPulls(server, 1, "the pull parked on the server");
    req.destroy();
    assert.equal(await abandoned, "aborted");
    await waitingPulls(server, 0, "the server noticed its client went away");
    const live = api(server, "pull", { wait: 15000 });
    await waitingPulls(server, 1, "the live pull parked on the server");
    await api(server, "enqueue", { messages: [{ value: { type: "string", value: "for the living" } }] });
    const { messages } = await live;
    assert.equal(messages.length, 1, "the message went to the pull whose client is still there");
    assert.equal(messages[0].attempt, 1, "first delivery: no lease was wasted on the gone client");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("over HTTP/2 too: a pull whose stream was reset takes nothing", { timeout: 60_000, skip }, async () => {
  const server = await startServer();
  const session = http2.connect(server.url);  // h2c with prior knowledge, as Deno speaks it
  try {
    const req = session.request({
      ":method": "POST", ":path": "/queue/v1/pull", authorization: `Bearer ${server.token}`,
    });
    req.on("error", () => {});
    req.end(JSON.stringify({ wait: 15000, visibility_timeout: 30000 }));
    await waitingPulls(server, 1, "the pull parked on the server");
    req.close(http2.constants.NGHTTP2_CANCEL);  // RST_STREAM, the connection stays
    await waitingPulls(server, 0, "the server dropped the reset stream's pull");
    const live = api(server, "pull", { wait: 15000 });
    await waitingPulls(server, 1, "the live pull parked on the server");
    await api(server, "enqueue", { messages: [{ value: { type: "string", value: "h2" } }] });
    const { messages } = await live;
    assert.equal(messages.length, 1);
    assert.equal(messages[0].attempt, 1, "no lease was wasted on the reset stream");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    session.destroy();
    await server.kill();
  }
});
