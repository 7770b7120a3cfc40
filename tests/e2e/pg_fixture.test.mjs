// The PostgreSQL fixture (pg.mjs) against the real PostgreSQL 15 it starts: SQL through psql
// over its Unix socket (no TCP listener unless asked for, as the benchmark does), committed rows
// surviving an immediate stop and a restart on the same socket, a synchronous
// standby following the primary and promoted to timeline 2 after the primary "crashes", and
// cleanup leaving no process and no directory. Prints the timings it sees.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { cleanupPg, startPg } from "./pg.mjs";

after(cleanupPg);

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

async function timed(t, what, fn) {
  const start = Date.now();
  const result = await fn();
  t.diagnostic(`[pg timings] ${what}: ${Date.now() - start} ms`);
  return result;
}

test("SQL, an immediate stop, a restart on the same socket, cleanup", async (t) => {
  const pg = await timed(t, "start", () => startPg());
  assert.equal(pg.conninfo, `host='${pg.dir}' port=5432 user=kvc dbname='kvc'`);
  assert.ok(fs.existsSync(`${pg.dir}/.s.PGSQL.5432`), "the socket is in the server's own directory");
  assert.equal(await pg.query("SHOW listen_addresses"), "", "no TCP listener");
  assert.equal(await pg.query("SELECT inet_server_port() IS NULL"), "t");
  assert.equal(await pg.query("SELECT current_database() || ' ' || current_user"), "kvc kvc");
  assert.equal(await pg.query("SHOW fsync"), "on");
  await pg.query("CREATE TABLE t (k int PRIMARY KEY, v text)");
  await pg.query("INSERT INTO t VALUES (1, 'one'), (2, 'two')");
  assert.equal(await pg.query("SELECT k, v FROM t ORDER BY k"), "1|one\n2|two");
  await assert.rejects(pg.query("SELECT * FROM no_such_table"), /no_such_table/);

  const conninfo = pg.conninfo;
  await pg.stop({ mode: "immediate" });
  assert.equal(pg.running, false);
  await timed(t, "restart after immediate stop", () => pg.restart());
  assert.equal(pg.conninfo, conninfo);
  assert.equal(await pg.query("SELECT string_agg(v, ',' ORDER BY k) FROM t"), "one,two");
  assert.match(pg.log(), /was interrupted/);

  const pid = pg.proc.pid;
  const dir = pg.dir;
  await pg.cleanup();
  assert.equal(alive(pid), false);
  assert.equal(fs.existsSync(dir), false);
});

test("a synchronous standby follows, is promoted and takes writes", async (t) => {
  const primary = await timed(t, "start with a synchronous standby", () =>
    startPg({ standby: true, synchronous: true, fsync: false }),
  );
  const standby = primary.standby;
  assert.notEqual(standby.dir, primary.dir);
  assert.equal(
    await primary.query("SELECT application_name || ' ' || sync_state FROM pg_stat_replication"),
    `${standby.applicationName} sync`,
  );
  await primary.query("CREATE TABLE t (k int PRIMARY KEY, v text)");
  await primary.query("INSERT INTO t VALUES (1, 'on the primary')");
  await standby.waitForReplay(primary);
  assert.equal(await standby.query("SELECT v FROM t"), "on the primary");
  assert.equal(await standby.replayLagBytes(primary), 0);
  await assert.rejects(standby.query("INSERT INTO t VALUES (2, 'x')"), /read-only/);

  await primary.stop({ mode: "immediate" });
  await timed(t, "promote", () => standby.promote());
  await standby.query("CHECKPOINT");
  assert.equal(await standby.query("SELECT timeline_id FROM pg_control_checkpoint()"), "2");
  await standby.query("INSERT INTO t VALUES (2, 'on the promoted standby')");
  assert.equal(await standby.query("SELECT count(*) FROM t"), "2");
});

test("tcp: also on 127.0.0.1 (the benchmark's PostgreSQL)", async (t) => {
  const pg = await timed(t, "start with tcp", () => startPg({ tcp: true, fsync: false }));
  try {
    assert.ok(pg.port > 0);
    assert.equal(pg.conninfo, `host='127.0.0.1' port=${pg.port} user=kvc dbname='kvc'`);
    // (startPg waited for pg_isready over 127.0.0.1:port)
    assert.equal(await pg.query("SHOW listen_addresses"), "127.0.0.1");
  } finally {
    await pg.cleanup();
  }
});
