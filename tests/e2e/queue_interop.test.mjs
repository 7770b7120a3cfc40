// Queue delivery of messages Deno itself enqueued into a local file that kvconnect serves
// (`serve --sqlite-path`), and a Deno process running listenQueue on that file while
// kvconnect's consumers pull from it (docs/queues.md: they compete; none is lost).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import {
  annotate, expectDenoOk, LOCAL_BACKEND, makeTempDir, removeTempDirs, runDeno, sleep, spawnDeno,
  startServer,
} from "./harness.mjs";

after(removeTempDirs);

const skip = LOCAL_BACKEND && "needs the kvconnect server";

async function api(server, op, body) {
  const res = await fetch(`${server.url}/queue/v1/${op}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${op}: ${res.status} ${text}`);
  return JSON.parse(text);
}

async function admin(server, what, body) {
  const res = await fetch(`${server.url}/admin/v1/databases/default/${what}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${what}: ${res.status} ${text}`);
  return JSON.parse(text);
}

test("messages Deno enqueued into a local file are delivered by kvconnect", { timeout: 90_000, skip }, async () => {
  const dir = await makeTempDir();
  const file = path.join(dir, "deno-queue.sqlite");
  const enq = expectDenoOk(await runDeno("queue_local.ts", { kvUrl: file, env: { QUEUE_MODE: "enqueue" } }));
  assert.equal(enq.enqueued, 10);
  const server = await startServer({ sqlitePath: file });
  try {
    const got = [];
    const started = Date.now();
    while (got.length < 10 && Date.now() - started < 20_000) {
      const { messages } = await api(server, "pull", { max_messages: 20, wait: 2000, visibility_timeout: 5000 });
      for (const m of messages) {
        got.push(m);
        if (JSON.stringify(m.value).includes("doomed")) {
          // No retries: a nack dead-letters it and writes its keysIfUndelivered key.
          const r = await api(server, "nack", { leases: [m.lease], error: "refused by the test" });
          assert.equal(r.results[0].status, "dead");
        } else {
          const r = await api(server, "ack", { leases: [m.lease] });
          assert.equal(r.results[0].status, "ok");
        }
      }
    }
    const values = got.map((m) => m.value);
    assert.equal(got.length, 10, `delivered ${JSON.stringify(values)}`);
    const has = (v) => values.some((x) => JSON.stringify(x) === JSON.stringify(v));
    assert.ok(has({ type: "string", value: "text" }));
    assert.ok(has({ type: "number", value: 42 }));
    assert.ok(has({ type: "bigint", value: "12345678901234567890" }));
    assert.ok(has({ type: "Date", value: "2026-01-02T03:04:05.000Z" }));
    assert.ok(has({ type: "Uint8Array", value: "AQID" }));
    assert.ok(has({ type: "Map", value: [[{ type: "string", value: "k" }, { type: "number", value: 1 }]] }));
    assert.ok(has({ type: "Set", value: [{ type: "string", value: "a" }] }));
    // The delayed message came last: all others were due at once.
    assert.ok(JSON.stringify(values.at(-1)).includes("delayed") || JSON.stringify(values.at(-2)).includes("delayed"),
      "the delayed message is delivered after the due ones");
    const entry = await fetch(`${server.url}/admin/v1/databases/default/entries/get`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}` },
      body: JSON.stringify({ key: [{ type: "string", value: "failed" }, { type: "string", value: "doomed" }] }),
    }).then((r) => r.json());
    assert.deepEqual(entry.entry?.value, { type: "object", value: { doomed: { type: "boolean", value: true } } });
    const counts = await admin(server, "queue");
    assert.deepEqual([counts.ready, counts.delayed, counts.leased, counts.dead], [0, 0, 0, 1]);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("a Deno listenQueue on the served file competes with kvconnect's consumers; nothing is lost", { timeout: 120_000, skip }, async () => {
  const dir = await makeTempDir();
  const file = path.join(dir, "shared-queue.sqlite");
  const server = await startServer({ sqlitePath: file });
  try {
    const N = 200;
    for (let i = 0; i < N; i += 50) {
      const messages = [];
      for (let j = i; j < i + 50; j++) messages.push({ value: { type: "number", value: j } });
      await api(server, "enqueue", { messages });
    }
    const deno = spawnDeno("queue_local.ts", { kvUrl: file, env: { QUEUE_MODE: "listen", QUEUE_LISTEN_MS: "3000" }, timeoutMs: 60_000 });
    const ours = [];
    let idle = 0;
    while (idle < 3) {
      const { messages } = await api(server, "pull", { max_messages: 5, wait: 1000, visibility_timeout: 10000 });
      if (messages.length === 0) {
        idle++;
        continue;
      }
      idle = 0;
      for (const m of messages) ours.push(m.value.value);
      await api(server, "ack", { leases: messages.map((m) => m.lease) });
      await sleep(5); // leave Deno a share
    }
    const res = expectDenoOk(await deno.done, server);
    const theirs = res.got.map((s) => JSON.parse(s));
    const seen = new Map();
    for (const n of [...ours, ...theirs]) seen.set(n, (seen.get(n) ?? 0) + 1);
    const missing = [];
    for (let i = 0; i < N; i++) if (!seen.has(i)) missing.push(i);
    const duplicates = [...seen.values()].reduce((a, c) => a + c - 1, 0);
    console.log(`# shared file: kvconnect delivered ${ours.length}, Deno's listenQueue ${theirs.length}, duplicates ${duplicates}`);
    // Whatever is left (Deno stopped listening while holding some) is delivered by kvconnect.
    const started = Date.now();
    while (missing.length > 0 && Date.now() - started < 20_000) {
      const { messages } = await api(server, "pull", { max_messages: 50, wait: 2000, visibility_timeout: 10000 });
      for (const m of messages) {
        const i = missing.indexOf(m.value.value);
        if (i >= 0) missing.splice(i, 1);
      }
      if (messages.length) await api(server, "ack", { leases: messages.map((m) => m.lease) });
    }
    assert.deepEqual(missing, [], "every message was delivered to one of the two");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("@deno/kv's kv.enqueue over KV Connect is delivered, with its delay and keysIfUndelivered", { timeout: 60_000, skip }, async () => {
  const { openKv } = await import("@deno/kv");
  const v8 = await import("node:v8");
  const server = await startServer();
  let kv;
  try {
    kv = await openKv(server.url, { accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize });
    const sent = Date.now();
    const r = await kv.enqueue({ from: "node", n: 7n }, { delay: 1000, keysIfUndelivered: [["undelivered", "node"]] });
    assert.equal(r.ok, true);
    const first = await api(server, "pull", { wait: 0 });
    assert.deepEqual(first.messages, [], "not before its delay");
    const { messages } = await api(server, "pull", { wait: 5000, visibility_timeout: 1000 });
    assert.ok(Date.now() - sent >= 1000, "delivered after the delay");
    assert.equal(messages.length, 1);
    assert.deepEqual(messages[0].value, {
      type: "object", value: { from: { type: "string", value: "node" }, n: { type: "bigint", value: "7" } },
    });
    // @deno/kv sends the schedule [100, 200, 400, 800]: four nacks retry, the fifth dead-letters
    // and writes the key, which @deno/kv then reads.
    let lease = messages[0].lease;
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      const nack = await api(server, "nack", { leases: [lease], error: `attempt ${i + 1}` });
      statuses.push(nack.results[0].status);
      if (nack.results[0].status === "dead") break;
      const again = await api(server, "pull", { wait: 5000, visibility_timeout: 1000 });
      assert.equal(again.messages.length, 1);
      assert.equal(again.messages[0].attempt, i + 2);
      lease = again.messages[0].lease;
    }
    assert.deepEqual(statuses, ["ok", "ok", "ok", "ok", "dead"]);
    const entry = await kv.get(["undelivered", "node"]);
    assert.deepEqual(entry.value, { from: "node", n: 7n });
  } catch (e) {
    throw annotate(e, server);
  } finally {
    kv?.close();
    await server.kill();
  }
});

test("a queue-scope token uses the queue API and nothing else; a read token gets 403", { timeout: 60_000, skip }, async () => {
  const server = await startServer();
  try {
    const create = async (scope) => {
      const res = await server.tokenCmd("create", "--db", "default", "--scope", scope);
      assert.equal(res.code, 0, res.stderr);
      return res.stdout.trim();
    };
    const queueToken = await create("queue");
    const readToken = await create("read");
    const call = async (token, op, body) => {
      for (let i = 0; i < 50; i++) {  // the server learns of new tokens within its catalog poll
        const res = await fetch(`${server.url}/queue/v1/${op}`, {
          method: "POST", headers: { authorization: `Bearer ${token}` }, body: JSON.stringify(body),
        });
        const text = await res.text();
        if (res.status !== 401) return { status: res.status, text };
        await sleep(100);
      }
      return { status: 401 };
    };
    const enq = await call(queueToken, "enqueue", { messages: [{ value: { type: "string", value: "q" } }] });
    assert.equal(enq.status, 200, enq.text);
    const pulled = await call(queueToken, "pull", { wait: 2000 });
    assert.equal(pulled.status, 200, pulled.text);
    assert.equal(JSON.parse(pulled.text).messages[0].value.value, "q");
    const refused = await call(readToken, "pull", { wait: 0 });
    assert.equal(refused.status, 403);
    assert.match(refused.text, /read-only/);
    const res = await runDeno("queue_scope.ts", { kvUrl: server.url, token: queueToken, timeoutMs: 45_000 });
    const summary = expectDenoOk(res, server);
    assert.match(summary.message, /queue API only/);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});
