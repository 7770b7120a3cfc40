// The queue client libraries (clients/node in this process, clients/deno through real Deno)
// against the built server: every scenario of queue_scenarios.mjs in both runtimes, one
// runtime enqueueing and the other consuming (plus @deno/kv's kv.enqueue), stale leases,
// named databases, a full queue (429) and a server restart under a running listener.
// Each test gets a fresh server. Also runs the Deno library's unit tests (no server).
//
// Until the server implements docs/queues.md, POST /queue/v1/pull answers 404 and the server
// tests skip with "queue API not in this server build".
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import v8 from "node:v8";
import { openKv } from "@deno/kv";
import { openQueue } from "../../clients/node/mod.js";
import {
  annotate, denoBin, denoEnv, E2E_DIR, expectDenoOk, LOCAL_BACKEND, removeTempDirs, runDeno, sleep, spawnDeno, startServer,
} from "./harness.mjs";
import { denoKvMessage, queueCounts, queueValues, scenarios } from "./queue_scenarios.mjs";

after(removeTempDirs);

const NOT_BUILT = "queue API not in this server build (POST /queue/v1/pull answered 404)";

/** POST BASE/queue/v1/OP with the server's token; returns { status, body }. */
async function raw(server, op, body, base = server.url) {
  const res = await fetch(`${base}/queue/v1/${op}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed };
}

async function expectOk(server, op, body, base) {
  const r = await raw(server, op, body, base);
  assert.equal(r.status, 200, `${op}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/**
 * A test on a fresh server (options `server` for startServer); skipped when the server has no
 * queue API (pull answers 404), and only then.
 */
function qtest(name, { timeout = 90_000, server: serverOpts = {} } = {}, fn) {
  test(name, { timeout }, async (t) => {
    const server = await startServer(serverOpts);
    try {
      const probe = await raw(server, "pull", { wait: 0 });
      if (probe.status === 404) {
        t.skip(NOT_BUILT);
        return;
      }
      await fn(server);
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
  });
}

// Node 20's V8 reads format <= 15; kvconnect serves 15 (README "Values across runtimes").
const codec = { encodeV8: v8.serialize, decodeV8: (bytes) => v8.deserialize(bytes) };

/** Runs `fn(ctx)` with the Node library; kvGet reads through @deno/kv. */
async function withNodeCtx(server, fn, { url = server.url, args = {} } = {}) {
  const kv = await openKv(url, { accessToken: server.token, ...codec });
  try {
    return await fn({ openQueue, url, token: server.token, kvGet: (key) => kv.get(key), args });
  } finally {
    kv.close();
  }
}

/** Runs one scenario with the Deno library in a Deno process; returns its result. */
async function denoScenario(server, name, { url = server.url, args = {}, timeoutMs = 150_000 } = {}) {
  const res = await runDeno("queue_scenario.ts", {
    kvUrl: url,
    token: server.token,
    env: { QUEUE_SCENARIO: name, QUEUE_ARGS: JSON.stringify(args) },
    timeoutMs,
  });
  const summary = expectDenoOk(res, server);
  assert.equal(summary.scenario, name);
  return summary.result;
}

const BOTH = ["values", "delay", "order", "retries", "undelivered", "gracefulClose", "extend", "many", "errors"];

describe("queue client libraries", { skip: LOCAL_BACKEND && "needs kvconnect" }, () => {
  for (const name of BOTH) {
    qtest(`node: ${name}`, { timeout: 180_000 }, async (server) => {
      const result = await withNodeCtx(server, (ctx) => scenarios[name](ctx));
      if (name === "many") console.log(`node many: ${JSON.stringify(result)}`);
    });
    qtest(`deno: ${name}`, { timeout: 180_000 }, async (server) => {
      const result = await denoScenario(server, name);
      if (name === "many") console.log(`deno many: ${JSON.stringify(result)}`);
    });
  }

  qtest("node: Deno's default backoff schedule (1 attempt + 3 retries, then a 30 s step)", {}, async (server) => {
    await withNodeCtx(server, (ctx) => scenarios.defaultSchedule(ctx));
  });

  qtest("a Deno app enqueues, a Node worker consumes", {}, async (server) => {
    const produced = await denoScenario(server, "produce");
    assert.equal(produced.produced, queueValues.length);
    const { reads } = await withNodeCtx(server, (ctx) => scenarios.consume(ctx));
    assert.deepEqual(Object.entries(reads).filter(([, r]) => r !== "OK"), [], "values Node read differently");
  });

  qtest("a Node app (client library and @deno/kv's kv.enqueue) enqueues, a Deno worker consumes", {}, async (server) => {
    await withNodeCtx(server, async (ctx) => {
      await scenarios.produce(ctx);
      await sleep(100); // due after the last of produce's (delay i) messages
      const kv = await openKv(server.url, { accessToken: server.token, ...codec });
      try {
        const r = await kv.enqueue(denoKvMessage());
        assert.equal(r.ok, true);
      } finally {
        kv.close();
      }
    });
    const { reads, received } = await denoScenario(server, "consume", { args: { extra: 1 } });
    assert.equal(received, queueValues.length + 1);
    assert.deepEqual(Object.entries(reads).filter(([, r]) => r !== "OK"), [], "values Deno read differently");
  });

  qtest("a Node and a Deno worker share one queue: each message handled once", {}, async (server) => {
    const n = 300;
    let listening;
    const ready = new Promise((r) => (listening = r));
    const deno = spawnDeno("queue_scenario.ts", {
      kvUrl: server.url,
      token: server.token,
      env: { QUEUE_SCENARIO: "share", QUEUE_ARGS: "{}" },
      timeoutMs: 90_000,
      onStdoutLine: (line) => line === "listening" && listening(),
    });
    await Promise.race([ready, deno.done]);
    const q = openQueue({ url: server.url, accessToken: server.token });
    const mine = [];
    const done = q.listenQueue(async ({ i }) => {
      mine.push(i);
      await sleep(20);
    }, { concurrency: 4 });
    for (let i = 0; i < n; i++) await q.enqueue({ i });
    const theirs = expectDenoOk(await deno.done, server).result.ids; // Deno stops after 2 s without messages
    const deadline = Date.now() + 30_000;
    while (mine.length + theirs.length < n && Date.now() < deadline) await sleep(50);
    await sleep(500);
    q.close();
    await done;
    const all = [...mine, ...theirs].sort((a, b) => a - b);
    assert.deepEqual(all, Array.from({ length: n }, (_, i) => i), "every message handled exactly once");
    console.log(`shared queue: Node handled ${mine.length}, Deno ${theirs.length}`);
    assert.ok(mine.length > 0 && theirs.length > 0, "both workers got messages");
  });

  qtest("a stale lease cannot settle; the current one can (raw API)", {}, async (server) => {
    await expectOk(server, "enqueue", {
      messages: [{ value: { type: "string", value: "s" }, backoff_schedule: [100, 100] }],
    });
    const first = await expectOk(server, "pull", { max_messages: 1, visibility_timeout: 1000, wait: 5000 });
    assert.equal(first.messages.length, 1);
    const m1 = first.messages[0];
    assert.deepEqual(m1.value, { type: "string", value: "s" });
    assert.equal(m1.attempt, 1);
    assert.ok(m1.lease_expires_at > Date.now() - 1000 && m1.lease_expires_at <= Date.now() + 1500, "lease_expires_at");
    await sleep(1300); // the lease expires; after the 100 ms step the message is ready again
    const second = await expectOk(server, "pull", { max_messages: 1, visibility_timeout: 30_000, wait: 5000 });
    assert.equal(second.messages.length, 1, "the message is delivered again after its lease expired");
    const m2 = second.messages[0];
    assert.equal(m2.id, m1.id);
    assert.equal(m2.attempt, 2);
    assert.notEqual(m2.lease, m1.lease);
    for (const op of ["ack", "nack", "extend"]) {
      const r = await expectOk(server, op, { leases: [m1.lease], visibility_timeout: 5000 });
      assert.deepEqual(r.results.map((x) => [x.lease, x.status]), [[m1.lease, "stale"]], `${op} with the old lease`);
    }
    const ext = await expectOk(server, "extend", { leases: [m2.lease], visibility_timeout: 60_000 });
    assert.equal(ext.results[0].status, "ok");
    assert.ok(ext.results[0].lease_expires_at > Date.now() + 50_000, "extend moved the expiry");
    const ack = await expectOk(server, "ack", { leases: [m2.lease, m1.lease] });
    assert.deepEqual(ack.results.map((x) => x.status), ["ok", "stale"], "results in request order");
    const again = await expectOk(server, "ack", { leases: [m2.lease] });
    assert.equal(again.results[0].status, "stale", "an acked message's lease is stale");
    const empty = await expectOk(server, "pull", { max_messages: 10, wait: 0 });
    assert.deepEqual(empty.messages, []);
  });

  qtest("a named database has its own queue (URL .../databases/NAME)", {}, async (server) => {
    const created = await fetch(`${server.url}/admin/v1/databases`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "orders" }),
    });
    assert.ok(created.status === 200 || created.status === 201, `create database: ${created.status}`);
    const url = `${server.url}/databases/orders`;
    const orders = openQueue({ url, accessToken: server.token });
    const dflt = openQueue({ url: server.url, accessToken: server.token });
    await orders.enqueue("for orders");
    await dflt.enqueue("for default");
    const got = { orders: [], dflt: [] };
    const a = orders.listenQueue((v) => got.orders.push(v));
    const b = dflt.listenQueue((v) => got.dflt.push(v));
    const deadline = Date.now() + 15_000;
    while ((got.orders.length < 1 || got.dflt.length < 1) && Date.now() < deadline) await sleep(20);
    await sleep(300);
    orders.close();
    dflt.close();
    await Promise.all([a, b]);
    assert.deepEqual(got, { orders: ["for orders"], dflt: ["for default"] });
    const counts = await queueCounts({ url, token: server.token });
    assert.equal(counts.ready + counts.delayed + counts.leased, 0);
    const missing = openQueue({ url: `${server.url}/databases/nosuchdb`, accessToken: server.token });
    await assert.rejects(missing.enqueue(1), (e) => e.name === "QueueError" && e.status === 404);
  });

  qtest("enqueue waits out a full queue (429) until a worker drains it", {
    server: { extraArgs: ["--queue-max-undelivered", "3"] },
  }, async (server) => {
    const q = openQueue({ url: server.url, accessToken: server.token });
    for (let i = 0; i < 3; i++) await q.enqueue(i);
    const full = await raw(server, "enqueue", { messages: [{ value: { type: "number", value: 9 } }] });
    assert.equal(full.status, 429, JSON.stringify(full.body));
    assert.match(full.body.error, /Too many undelivered messages/);
    let resolved = false;
    const pending = q.enqueue(3).then((r) => {
      resolved = true;
      return r;
    });
    await sleep(600);
    assert.equal(resolved, false, "the fourth enqueue went through a full queue");
    const got = [];
    const done = q.listenQueue((v) => got.push(v));
    assert.equal((await pending).ok, true);
    const deadline = Date.now() + 15_000;
    while (got.length < 4 && Date.now() < deadline) await sleep(20);
    q.close();
    await done;
    assert.deepEqual([...got].sort(), [0, 1, 2, 3]);
  });

  qtest("a listener outlives a server restart", {}, async (server) => {
    const q = openQueue({ url: server.url, accessToken: server.token });
    const got = [];
    const done = q.listenQueue((v) => got.push(v));
    await q.enqueue("before");
    let deadline = Date.now() + 10_000;
    while (got.length < 1 && Date.now() < deadline) await sleep(20);
    // The listener keeps the URL it was opened with, so the new server must be found there:
    // it binds the port the old one got from the kernel (see Server.restart).
    const restarted = await server.restart({ samePort: true });
    try {
      await q.enqueue("after"); // retried until the server is back
      deadline = Date.now() + 20_000;
      while (got.length < 2 && Date.now() < deadline) await sleep(20);
      q.close();
      await done;
      assert.deepEqual(got, ["before", "after"]);
    } catch (e) {
      throw annotate(e, restarted);
    } finally {
      await restarted.kill();
    }
  });
});

test("clients/deno unit tests (deno test, no server)", { timeout: 120_000 }, () => {
  const dir = path.resolve(E2E_DIR, "../../clients/deno");
  const r = spawnSync(denoBin(), ["test", "--config", "deno.json", "--no-lock", "mod_test.ts"], {
    cwd: dir, env: denoEnv(), encoding: "utf8", timeout: 110_000,
  });
  assert.equal(r.status, 0, `deno test failed:\n${r.stdout}\n${r.stderr}`);
});
