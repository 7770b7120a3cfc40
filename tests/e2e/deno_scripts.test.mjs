// Runs every Deno script under ./deno against a fresh kvconnect server (one server
// per script, fresh data dir), plus multi-process and bad-token checks.
//
// With E2E_LOCAL_BACKEND=1 the same scripts run against Deno's local SQLite backend
// instead (no server needed): that is how the scripts themselves are validated.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import {
  annotate, expectDenoOk, LOCAL_BACKEND, makeTempDir, randomToken, removeTempDirs, runDeno, startServer,
} from "./harness.mjs";

after(removeTempDirs);

/** Where the scripts talk to: a fresh kvconnect server, or a local SQLite file. */
async function openTarget() {
  if (LOCAL_BACKEND) {
    const dir = await makeTempDir("kvconnect-e2e-local-");
    return { kvUrl: path.join(dir, "kv.sqlite"), token: undefined, env: {}, servers: [], close: async () => {} };
  }
  const server = await startServer();
  return {
    kvUrl: server.url,
    token: server.token,
    env: { KV_EXPECT_PROMPT_EXPIRY: "1" },
    servers: [server],
    close: async () => {
      await server.kill();
    },
  };
}

// [script, timeout ms]
const SCRIPTS = [
  ["basic.ts", 60_000],
  ["list.ts", 60_000],
  ["atomic.ts", 60_000],
  ["atomic_limits.ts", 60_000],
  ["sum.ts", 60_000],
  ["versionstamp.ts", 60_000],
  ["values.ts", 60_000],
  ["expiry.ts", 60_000],
  ["watch.ts", 60_000],
  ["concurrency.ts", 90_000],
];

for (const [script, timeoutMs] of SCRIPTS) {
  test(`deno/${script}`, { timeout: timeoutMs + 30_000 }, async () => {
    const target = await openTarget();
    try {
      const res = await runDeno(script, { kvUrl: target.kvUrl, token: target.token, env: target.env, timeoutMs });
      const summary = expectDenoOk(res, ...target.servers);
      assert.equal(summary.script, path.basename(script, ".ts"));
      assert.equal(summary.backend, LOCAL_BACKEND ? "local" : "remote");
    } finally {
      await target.close();
    }
  });
}

test("several Deno processes write to one database concurrently", { timeout: 150_000 }, async () => {
  const target = await openTarget();
  try {
    const WORKERS = 6;
    const OPS = 60;
    const space = randomToken(8);
    const env = { ...target.env, WORKER_NS: space, WORKER_OPS: String(OPS) };
    const results = await Promise.all(Array.from({ length: WORKERS }, (_, id) =>
      runDeno("concurrent_worker.ts", {
        kvUrl: target.kvUrl,
        token: target.token,
        env: { ...env, WORKER_ID: String(id) },
        timeoutMs: 90_000,
      })));
    const summaries = results.map((r) => expectDenoOk(r, ...target.servers));
    assert.deepEqual(summaries.map((s) => s.id).sort(), Array.from({ length: WORKERS }, (_, i) => i));
    const check = await runDeno("concurrent_check.ts", {
      kvUrl: target.kvUrl,
      token: target.token,
      env: { ...env, EXPECT_WORKERS: String(WORKERS) },
      timeoutMs: 60_000,
    });
    const summary = expectDenoOk(check, ...target.servers);
    assert.equal(summary.total, WORKERS * OPS);
  } finally {
    await target.close();
  }
});

test("a wrong access token makes Deno.openKv reject", { timeout: 90_000, skip: LOCAL_BACKEND && "remote only" }, async () => {
  const server = await startServer();
  try {
    const wrong = await runDeno("open_rejected.ts", {
      kvUrl: server.url,
      token: randomToken(24),
      timeoutMs: 45_000,
    });
    const summary = expectDenoOk(wrong, server);
    assert.match(summary.message, /Could not open Deno KV database/);
    // the right token still works on the same server afterwards
    const right = await runDeno("open_rejected.ts", { kvUrl: server.url, token: server.token, timeoutMs: 45_000 });
    assert.notEqual(right.code, 0, "open_rejected.ts must fail when the token is right");
    assert.match(right.stderr, /Deno\.openKv succeeded/, "with the right token the open must succeed");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("a token that is only a prefix of the real one is rejected", { timeout: 90_000, skip: LOCAL_BACKEND && "remote only" }, async () => {
  const server = await startServer();
  try {
    const res = await runDeno("open_rejected.ts", {
      kvUrl: server.url,
      token: server.token.slice(0, -1),
      timeoutMs: 45_000,
    });
    expectDenoOk(res, server);
  } finally {
    await server.kill();
  }
});
