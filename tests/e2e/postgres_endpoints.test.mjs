// Endpoint lists on PostgreSQL: a strong node on the primary and an eventual node reading from a
// streaming standby (--postgres-read), both registered in the node registry.
//   * every node's metadata answer lists itself first, then the other live nodes, strong before
//     eventual;
//   * Deno's CLI sends everything to the first strong endpoint, even when it connected through
//     the eventual node;
//   * @deno/kv sends reads with consistency "eventual" and watches to the eventual node, strong
//     reads and writes to the strong one;
//   * while the standby's replay lag exceeds --max-replica-lag-ms, the eventual node reads from
//     the primary instead of serving stale data, and goes back to the standby once it caught up.
// Which node handled what is read off each node's own request counters (/metrics).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { openKv } from "@deno/kv";
import { expectDenoOk, removeTempDirs, runDeno, startServer } from "./harness.mjs";
import { nodeV8Codec } from "./node_v8.mjs";
import { cleanupPg, startPg } from "./pg.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let pg;
let strong;
let eventual;
const opened = [];

async function nodeKv(server) {
  const kv = await openKv(server.url, { accessToken: server.token, ...nodeV8Codec });
  opened.push(kv);
  return kv;
}

/** The data-path requests a node answered, by route. */
async function served(server) {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } })).text();
  const out = { snapshot_read: 0, atomic_write: 0, watch: 0 };
  for (const m of text.matchAll(/^kvconnect_http_requests_total\{([^}]*)\} (\d+(?:\.\d+)?)/gm)) {
    const route = /route="([^"]+)"/.exec(m[1])?.[1];
    if (route in out) out[route] += Number(m[2]);
  }
  return out;
}

async function metadata(server) {
  const res = await fetch(`${server.url}/`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify({ supportedVersions: [1, 2, 3] }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return await res.json();
}

// The node's own word on where its eventual reads go (kvconnect_reading_from_replica: 1 the
// standby, 0 the primary). Read from /metrics rather than counted in the log: a count of log
// lines in the kept tail can stand still when older lines scroll out as a new one arrives.
async function readingFromReplica(server) {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
  const m = /^kvconnect_reading_from_replica (\d+)$/m.exec(await res.text());
  return m ? Number(m[1]) : null;
}

async function until(what, fn, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

before(async () => {
  pg = await startPg({ standby: true, fsync: false });
  const common = ["--postgres", pg.conninfo, "--node-heartbeat-ms", "200"];
  strong = await startServer({ extraArgs: common });
  eventual = await startServer({
    token: strong.token,
    extraArgs: [...common, "--postgres-read", pg.standby.conninfo, "--max-replica-lag-ms", "1500"],
  });
  // Both registered, and the eventual node reading from its standby.
  await until("both nodes in the registry", async () => (await metadata(strong)).endpoints.length === 2);
  await until("the eventual node to read from its standby", async () =>
    /reads now go to the standby/.test(eventual.logTail(400)));
});

after(async () => {
  for (const kv of opened) kv.close();
  await strong?.kill();
  await eventual?.kill();
  await cleanupPg();
  await removeTempDirs();
});

test("metadata answers list the answering node first, then strong, then eventual nodes", async () => {
  const viaStrong = await metadata(strong);
  assert.deepEqual(viaStrong.endpoints, [
    { url: `${strong.url}/v2`, consistency: "strong" },
    { url: `${eventual.url}/v2`, consistency: "eventual" },
  ]);
  const metrics = await (await fetch(`${eventual.url}/metrics`, { headers: { authorization: `Bearer ${eventual.token}` } })).text();
  assert.match(metrics, /^kvconnect_nodes_live\{role="strong"\} 1$/m);
  assert.match(metrics, /^kvconnect_nodes_live\{role="eventual"\} 1$/m);
  assert.match(metrics, /^kvconnect_replica_lag_seconds \d/m);
  assert.match(metrics, /^kvconnect_reading_from_replica 1$/m);
  const viaEventual = await metadata(eventual);
  assert.deepEqual(viaEventual.endpoints, [
    { url: `${eventual.url}/v2`, consistency: "eventual" },
    { url: `${strong.url}/v2`, consistency: "strong" },
  ]);
});

test("Deno's CLI uses the first strong endpoint, also when it connected through the eventual node", async () => {
  const s0 = await served(strong);
  const e0 = await served(eventual);
  expectDenoOk(await runDeno("basic.ts", { kvUrl: eventual.url, token: strong.token }), strong, eventual);
  const s1 = await served(strong);
  const e1 = await served(eventual);
  assert.ok(s1.atomic_write > s0.atomic_write && s1.snapshot_read > s0.snapshot_read, JSON.stringify({ s0, s1 }));
  assert.equal(e1.snapshot_read, e0.snapshot_read, "Deno read from the eventual node");
  assert.equal(e1.atomic_write, e0.atomic_write, "Deno wrote through the eventual node");
});

test("@deno/kv sends eventual reads and watches to the eventual node, strong ones to the strong node", async () => {
  const kv = await nodeKv(strong);
  const key = ["endpoints", "k"];
  await kv.set(key, "v1");
  const s0 = await served(strong);
  const e0 = await served(eventual);
  const strongRead = await kv.get(key);
  assert.equal(strongRead.value, "v1");
  // Eventual: served by the standby once it replayed the write.
  const seen = await until("the standby to replay the write", async () => {
    const r = await kv.get(key, { consistency: "eventual" });
    return r.value === "v1" ? r : null;
  });
  assert.equal(seen.versionstamp, strongRead.versionstamp);
  const stream = kv.watch([key]);
  const reader = stream.getReader();
  const first = await reader.read();
  assert.equal(first.value[0].value, "v1");
  await reader.cancel();
  const s1 = await served(strong);
  const e1 = await served(eventual);
  assert.ok(e1.snapshot_read > e0.snapshot_read, `eventual reads went elsewhere: ${JSON.stringify({ e0, e1 })}`);
  assert.ok(e1.watch > e0.watch || (await served(eventual)).watch > e0.watch, "the watch went elsewhere");
  assert.equal(s1.snapshot_read, s0.snapshot_read + 1, "only the strong read reached the strong node");
});

test("above the lag bound the eventual node reads from the primary, and goes back once caught up", async () => {
  const kv = await nodeKv(strong);
  const key = ["endpoints", "lag"];
  await kv.set(key, "before");
  await until("the standby to replay", async () => (await kv.get(key, { consistency: "eventual" })).value === "before");
  await pg.standby.query("select pg_wal_replay_pause()");
  try {
    await kv.set(key, "after");
    // Within the bound a stale answer is allowed; past it, the node must not serve stale data.
    await until("the eventual node to turn to the primary", async () => (await readingFromReplica(eventual)) === 0);
    for (let i = 0; i < 5; i++) {
      const r = await kv.get(key, { consistency: "eventual" });
      assert.equal(r.value, "after", "a lagging standby's stale value was served");
    }
  } finally {
    await pg.standby.query("select pg_wal_replay_resume()");
  }
  await until("the eventual node to return to its standby", async () => (await readingFromReplica(eventual)) === 1);
  assert.equal((await kv.get(key, { consistency: "eventual" })).value, "after");
});

test("queue messages enqueued through one node are leased through the other and acked through the first", async () => {
  const call = async (server, op, body) => {
    const res = await fetch(`${server.url}/queue/v1/${op}`, {
      method: "POST",
      headers: { authorization: `Bearer ${strong.token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    assert.equal(res.status, 200, `${op}: ${text}`);
    return JSON.parse(text);
  };
  const values = ["q1", "q2", "q3"];
  for (const v of values) await call(strong, "enqueue", { messages: [{ value: { type: "string", value: v } }] });
  const got = [];
  while (got.length < values.length) {
    const { messages } = await call(eventual, "pull", { max_messages: 3, wait: 5000 });
    assert.ok(messages.length > 0, "no message reached the other node");
    got.push(...messages);
  }
  assert.deepEqual(got.map((m) => m.value.value).sort(), values);
  const { results } = await call(strong, "ack", { leases: got.map((m) => m.lease) });
  assert.deepEqual(results.map((r) => r.status), ["ok", "ok", "ok"]);
  // Acked once: a second ack through the other node is stale.
  const again = await call(eventual, "ack", { leases: [got[0].lease] });
  assert.equal(again.results[0].status, "stale");
});
