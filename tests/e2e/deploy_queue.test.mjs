// clients/deno/deploy.ts against the built server: an app written as for Deno Deploy
// (deno/deploy_queue_app.ts: no URL in its code, one added import line) uses kv.enqueue and
// kv.listenQueue on a database it opened through DENO_KV_DEFAULT_PATH or by name, with delay,
// backoffSchedule and keysIfUndelivered; a local ":memory:" database in the same process keeps
// Deno's own queue. The same app without the import line fails as Deno 2.9.6 makes it fail.
// kv.atomic() with an enqueue commits as one write (or, with a failed check, not at all).
// Also runs the module's unit tests (clients/deno/deploy_test.ts, kv_connect_test.ts; no server).
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fsp from "node:fs/promises";
import path from "node:path";
import {
  annotate, DENO_SCRIPTS_DIR, denoBin, denoEnv, E2E_DIR, expectDenoOk, LOCAL_BACKEND, makeTempDir, removeTempDirs,
  runDeno, startServer,
} from "./harness.mjs";

after(removeTempDirs);

/** POST (or GET without a body) SERVER/admin/v1/... with the server's token; the parsed answer. */
async function admin(server, suffix, body) {
  const res = await fetch(`${server.url}/admin/v1${suffix}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.status === 200 || res.status === 201, `admin ${suffix}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** Runs deno/deploy_queue_app.ts with `env` (no KV_URL: the app names no database itself). */
async function runApp(server, env, script = "deploy_queue_app.ts") {
  return await runDeno(script, { token: server.token, env, timeoutMs: 90_000 });
}

/** After a run: the database's queue is empty; the two messages that always fail are dead letters. */
async function expectQueueSettled(server, db) {
  const counts = await admin(server, `/databases/${db}/queue`);
  assert.equal(counts.ready + counts.delayed + counts.leased, 0, `queue of ${db}: ${JSON.stringify(counts)}`);
  const { dead_letters: dead } = await admin(server, `/databases/${db}/queue/dead/list`, { limit: 100 });
  assert.equal(dead.length, 2, `dead letters of ${db}: ${JSON.stringify(dead)}`);
  const doomed = dead.find((d) => /doomed always fails/.test(d.last_error));
  assert.ok(doomed, `the doomed message is a dead letter: ${JSON.stringify(dead)}`);
  assert.equal(doomed.attempts, 2, "the doomed message: one attempt and one retry");
  assert.equal(doomed.keys_if_undelivered.length, 1);
  const once = dead.find((d) => /no retry either/.test(d.last_error));
  assert.ok(once, `the message without retries is a dead letter: ${JSON.stringify(dead)}`);
  assert.equal(once.attempts, 1, "backoffSchedule [] : one attempt");
}

describe("Deno Deploy apps: queues with one import (clients/deno/deploy.ts)", {
  skip: LOCAL_BACKEND && "needs kvconnect",
}, () => {
  test("Deno.openKv() with DENO_KV_DEFAULT_PATH; a local :memory: database keeps Deno's queue", {
    timeout: 120_000,
  }, async () => {
    const server = await startServer();
    try {
      const res = await runApp(server, { DENO_KV_DEFAULT_PATH: server.url, APP_LOCAL: "1" });
      const s = expectDenoOk(res, server);
      assert.equal(s.flakyAttempts, 3);
      assert.equal(s.doomedAttempts, 2);
      assert.deepEqual(s.local, { got: 2 });
      assert.match(res.stderr, /Exception in queue handler Error: flaky attempt 1/, "handler errors logged as Deno does");
      console.log(`deploy app (default path): ${JSON.stringify(s)}`);
      await expectQueueSettled(server, "default");
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
  });

  test("Deno.openKv(name) on a named database", { timeout: 120_000 }, async () => {
    const server = await startServer();
    try {
      // As a Deploy app opens a named database: DENO_KV_PATH_PREFIX + the name (the
      // /databases/NAME shape), and once more with Deploy's own URL shape
      // /v2/databases/NAME/connect, whose queue BASE is .../databases/NAME. (No APP_LOCAL:
      // with DENO_KV_PATH_PREFIX set, Deno prefixes ":memory:" as well.)
      const runs = [
        ["orders", { DENO_KV_PATH_PREFIX: `${server.url}/databases/`, APP_DB: "orders" }],
        ["billing", { APP_DB: `${server.url}/v2/databases/billing/connect` }],
      ];
      for (const [db, env] of runs) {
        await admin(server, "/databases", { name: db });
        const s = expectDenoOk(await runApp(server, env), server);
        console.log(`deploy app (database ${db}): ${JSON.stringify(s)}`);
        await expectQueueSettled(server, db);
      }
      // the messages went to those databases' queues, none to the default one
      const dflt = await admin(server, "/databases/default/queue");
      assert.equal(dflt.ready + dflt.delayed + dflt.leased + dflt.dead, 0, `default queue: ${JSON.stringify(dflt)}`);
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
  });

  test("the same app without the import line: Deno refuses the enqueue", { timeout: 120_000 }, async () => {
    const server = await startServer();
    try {
      const source = await fsp.readFile(path.join(DENO_SCRIPTS_DIR, "deploy_queue_app.ts"), "utf8");
      const line = 'import "../../../clients/deno/deploy.ts";\n';
      assert.ok(source.includes(line), "deploy_queue_app.ts has the import line");
      const copy = path.join(await makeTempDir("kvconnect-deploy-app-"), "deploy_queue_app_plain.ts");
      await fsp.writeFile(copy, source.replace(line, ""));
      const res = await runApp(server, { DENO_KV_DEFAULT_PATH: server.url }, copy);
      assert.equal(res.code, 1, `exit code ${res.code}\n${res.stderr}`);
      assert.match(res.stderr, /FAIL \[deploy_app\] in step "enqueue"/);
      assert.match(res.stderr, /Enqueue operations are not supported in KV Connect/);
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
  });
});

test("clients/deno deploy_test.ts and kv_connect_test.ts (deno test, no server)", { timeout: 120_000 }, () => {
  const dir = path.resolve(E2E_DIR, "../../clients/deno");
  const r = spawnSync(denoBin(), [
    "test", "--unstable-kv", "-A", "--config", "deno.json", "--no-lock", "deploy_test.ts", "kv_connect_test.ts",
  ], { cwd: dir, env: denoEnv(), encoding: "utf8", timeout: 110_000 });
  assert.equal(r.status, 0, `deno test failed:\n${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /8 passed \| 0 failed/);
});
