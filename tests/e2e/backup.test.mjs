// Backups with the built binary and the real Deno CLI:
//  - continuous backup to a directory while a Deno writer runs, the server killed with
//    SIGKILL twice mid-stream (shipping resumes after each restart); then `kvconnect restore`
//    into a fresh data directory holds every acknowledged write with its versionstamp, and
//    `restore --at <an acknowledged versionstamp>` holds exactly the writes up to it;
//  - a database Deno made locally, served with --sqlite-path and backed up (continuously and
//    with `kvconnect backup` while it runs), restored and opened by Deno's own local backend;
//  - continuous backup to S3 (the npm S3 stand-in, SigV4-signed through libcurl) through a
//    target outage: shipping errors show in /metrics, the lag drains once the target is back,
//    and the restore from S3 holds every acknowledged write;
//  - a database on PostgreSQL backed up (continuously and with `kvconnect backup`), restored
//    into a data directory (latest and a point in time) and into PostgreSQL under a new name.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import {
  annotate, E2E_DIR, expectCliOk, expectDenoOk, freshPgDatabase, LOCAL_BACKEND, makeTempDir, randomToken,
  removeTempDirs, runDeno, runKvconnect, sleep, spawnDeno, startServer, waitFor, withTimeout,
} from "./harness.mjs";

after(removeTempDirs);
const skip = LOCAL_BACKEND && "needs the kvconnect server";

function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}
const bearer = (server) => ({ headers: { authorization: `Bearer ${server.token}` } });
async function metrics(server) {
  return parseMetrics(await (await fetch(`${server.url}/metrics`, bearer(server))).text());
}
const m = (ms, name, db = "default") => ms.get(`${name}{database="${db}"}`);

/** Waits until everything the database committed is shipped; returns the last metrics. */
async function waitShipped(server, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await metrics(server);
    if (m(last, "kvconnect_backup_lag_commits") === 0 &&
        m(last, "kvconnect_backup_shipped_version") === m(last, "kvconnect_database_last_version")) {
      return last;
    }
    await sleep(100);
  }
  throw annotate(new Error(`backup did not catch up within ${timeoutMs} ms: ` +
    JSON.stringify([...last].filter(([k]) => k.includes("backup") || k.includes("last_version")))), server);
}

/** Runs the durability writer (tests/e2e/deno) until it exits or the server stops; ACK lines. */
async function write(kvUrl, token, ns, { maxMs = 1500, stop, after: afterAcks = 300 } = {}) {
  const acks = [];
  let enough;
  const reached = new Promise((r) => (enough = r));
  const writer = spawnDeno("durability_writer.ts", {
    kvUrl, token, env: { DUR_NS: ns, DUR_MAX_MS: String(maxMs), DUR_WORKERS: "4" }, timeoutMs: 120_000,
    onStdoutLine: (line) => {
      if (!line.startsWith("ACK ")) return;
      acks.push(JSON.parse(line.slice(4)));
      if (acks.length >= afterAcks) enough();
    },
  });
  if (stop) {
    await withTimeout(Promise.race([reached, writer.done]), 30_000, null);
    await stop();
    await sleep(300);
    writer.proc.kill("SIGKILL");
  }
  await writer.done;
  assert.ok(acks.length > 0, `writer ${ns}: no acknowledged write`);
  return acks;
}

async function verifyAll(kvUrl, token, dir, acks, label) {
  const file = path.join(dir, `acks-${label}.json`);
  await fs.writeFile(file, JSON.stringify(acks));
  const res = await runDeno("durability_verify.ts", { kvUrl, token, env: { DUR_ACKS_FILE: file }, timeoutMs: 90_000 });
  return expectDenoOk(res);
}

async function dbPath(dataDir, name) {
  const res = expectCliOk(await runKvconnect(["db", "list", "--json", "--data-dir", dataDir]));
  const dbs = JSON.parse(res.stdout);
  const db = dbs.find((d) => d.name === name);
  assert.ok(db, `no database ${name} in ${res.stdout}`);
  return db.path;
}

test("continuous backup survives SIGKILL; restore and point-in-time restore hold the acknowledged writes",
  { timeout: 300_000, skip }, async () => {
    const dataDir = await makeTempDir();
    const backupDir = await makeTempDir("kvconnect-backup-");
    const token = randomToken();
    const extraArgs = ["--backup-to", backupDir, "--backup-interval-ms", "100",
      "--backup-snapshot-log-bytes", "60000"];
    let server = await startServer({ dataDir, token, extraArgs });
    const all = [];
    const byCycle = [];
    try {
      for (let cycle = 1; cycle <= 2; cycle++) {
        const acks = await write(server.url, token, `cycle${cycle}`, { maxMs: 60_000, stop: () => server.kill(), after: 1500 });
        byCycle.push(acks);
        all.push(...acks);
        server = await startServer({ dataDir, token, extraArgs });
      }
      const shipped = await waitShipped(server);
      await server.stop();
      console.log(`backup: ${all.length} acknowledged writes over 2 SIGKILL cycles; shipped through version ` +
        `${m(shipped, "kvconnect_backup_shipped_version")}`);

      const list = expectCliOk(await runKvconnect(["backup", "list", "--from", backupDir, "--json"]));
      const ranges = JSON.parse(list.stdout);
      assert.ok(ranges.length >= 2, `expected several snapshots (generations), got ${list.stdout}`);

      // Latest state, into a data directory that does not exist yet (a fresh machine): restore
      // makes it and says so. Served and read by Deno.
      const restored = path.join(await makeTempDir(), "fresh-machine");
      const res = expectCliOk(await runKvconnect(["restore", "--data-dir", restored, "--from", backupDir, "--db", "default"]));
      console.log(res.stdout.trim());
      assert.match(res.stdout, /created the data directory .*fresh-machine/);
      const s2 = await startServer({ dataDir: restored, token });
      try {
        const summary = await verifyAll(s2.url, token, restored, all, "latest");
        assert.equal(summary.acks, all.length);
      } finally {
        await s2.kill();
      }

      // Point in time: an acknowledged versionstamp from the middle of the first cycle.
      const first = byCycle[0];
      const at = first[Math.floor(first.length / 2)].vs;
      const pitrDir = await makeTempDir();
      expectCliOk(await runKvconnect(["restore", "--data-dir", pitrDir, "--from", backupDir, "--db", "default", "--at", at]));
      const s3 = await startServer({ dataDir: pitrDir, token });
      try {
        const file = path.join(pitrDir, "acks.json");
        await fs.writeFile(file, JSON.stringify(all));
        const pitr = expectDenoOk(await runDeno("backup_pitr_verify.ts", {
          kvUrl: s3.url, token, env: { PITR_ACKS_FILE: file, PITR_AT: at }, timeoutMs: 90_000,
        }));
        assert.ok(pitr.before > 0 && pitr.after > 0, JSON.stringify(pitr));
        console.log(`point-in-time restore at ${at}: ${pitr.before} writes before it present, ${pitr.after} after it absent`);
      } finally {
        await s3.kill();
      }
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
  });

test("a database Deno made, served and backed up, restores to a file Deno opens locally",
  { timeout: 240_000, skip }, async () => {
    const dir = await makeTempDir();
    const file = path.join(dir, "made-by-deno.sqlite3");
    const backupDir = await makeTempDir("kvconnect-backup-");
    const snapshotDir = await makeTempDir("kvconnect-backup-");
    const token = randomToken();
    const local = await write(file, undefined, "local", { maxMs: 1000 });
    const server = await startServer({ sqlitePath: file, token,
      extraArgs: ["--backup-to", backupDir, "--backup-interval-ms", "100"] });
    let remote;
    try {
      remote = await write(server.url, token, "remote", { maxMs: 1000 });
      // An online snapshot by the CLI while the server runs.
      const cli = expectCliOk(await runKvconnect(["backup", "--data-dir", path.join(dir, "kvconnect-data"),
        "--db", "default", "--to", snapshotDir]), server);
      assert.match(cli.stdout, /backed up 'default' at versionstamp [0-9a-f]{20}/);
      await waitShipped(server);
      await server.stop();
    } finally {
      await server.kill();
    }
    const all = [...local, ...remote];
    for (const [from, label] of [[backupDir, "continuous"], [snapshotDir, "snapshot"]]) {
      const dataDir = await makeTempDir();
      expectCliOk(await runKvconnect(["restore", "--data-dir", dataDir, "--from", from, "--db", "default", "--as", "fromdeno"]));
      const restoredFile = await dbPath(dataDir, "fromdeno");
      // Deno's own local SQLite backend opens the restored file.
      const summary = await verifyAll(restoredFile, undefined, dataDir, all, label);
      assert.equal(summary.backend, "local");
      assert.equal(summary.acks, all.length);
      console.log(`${label} backup of a Deno-made file: ${all.length} writes (${local.length} local, ` +
        `${remote.length} remote) read back by Deno from ${path.basename(restoredFile)}`);
    }
  });

// The S3 stand-in of the C++ tests (tests/testutil/s3_standin.cjs: @20minutes/s3rver with
// S3's all-or-nothing PUT). The first one listens on a port the kernel picks; for the outage it
// is stopped and started again on that same port, because the running server keeps the
// endpoint it was given (AWS_ENDPOINT_URL).
const S3_KEY = "kvconnect-e2e";
const S3_SECRET = "kvconnect-e2e-secret";
async function startS3(dataDir, port = 0) {
  const launcher = path.resolve(E2E_DIR, "../testutil/s3_standin.cjs");
  // Between the stop and this start the old port is free, so another process's socket may hold
  // it for a moment: a few tries on "address in use", and only when re-binding.
  for (let attempt = 1; ; attempt++) {
    const proc = spawn(process.execPath, ["--openssl-legacy-provider", launcher, E2E_DIR, dataDir, "backups", S3_KEY, S3_SECRET],
      { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, S3_STANDIN_PORT: String(port) } });
    let err = "";
    proc.stderr.on("data", (d) => {
      err += d;
      process.stderr.write(d);
    });
    const exited = new Promise((r) => proc.once("exit", r));
    const listening = new Promise((resolve, reject) => {
      let out = "";
      proc.stdout.on("data", (d) => {
        out += d;
        if (out.includes("\n")) resolve(Number(/listening (\d+)/.exec(out)?.[1]));
      });
      proc.once("exit", (code) => reject(new Error(`the S3 stand-in exited (${code}); run npm ci in tests/e2e\n${err}`)));
    });
    listening.catch(() => {});
    const got = await withTimeout(listening.catch((e) => e), 30_000, null);
    if (got instanceof Error && port !== 0 && /EADDRINUSE/.test(err) && attempt < 5) {
      await sleep(200 * attempt);
      continue;
    }
    if (got instanceof Error) throw got;
    if (!got || (port !== 0 && got !== port)) {
      proc.kill("SIGKILL");
      throw new Error(`the S3 stand-in did not start on port ${port || "(any)"}: ${got}\n${err}`);
    }
    return { port: got, proc, stop: async () => { proc.kill("SIGKILL"); await exited; } };
  }
}

test("continuous backup to S3 through a target outage, restored from S3",
  { timeout: 240_000, skip }, async () => {
    const s3Dir = await makeTempDir("kvconnect-s3-");
    let s3 = await startS3(s3Dir);
    const port = s3.port;
    const env = {
      AWS_ACCESS_KEY_ID: S3_KEY, AWS_SECRET_ACCESS_KEY: S3_SECRET, AWS_REGION: "us-east-1",
      AWS_ENDPOINT_URL: `http://127.0.0.1:${port}`,
    };
    const saved = {};
    for (const [k, v] of Object.entries(env)) {
      saved[k] = process.env[k];
      process.env[k] = v;  // the server and the CLI inherit them
    }
    const token = randomToken();
    const dataDir = await makeTempDir();
    const server = await startServer({ dataDir, token,
      extraArgs: ["--backup-to", "s3://backups/kv/prod", "--backup-interval-ms", "100"] });
    try {
      const before = await write(server.url, token, "s3a", { maxMs: 1000 });
      await waitShipped(server);
      // Outage: writes go on and are acknowledged; shipping fails and the lag grows.
      await s3.stop();
      const during = await write(server.url, token, "s3b", { maxMs: 1000 });
      // The shipper (--backup-interval-ms 100) tries, fails and counts it; the lag stays.
      const down = await waitFor(async () => {
        const now = await metrics(server);
        return m(now, "kvconnect_backup_errors_total") > 0 && m(now, "kvconnect_backup_lag_commits") > 0 && now;
      }, { timeoutMs: 30_000, intervalMs: 100, what: "a counted shipping error and a lag during the S3 outage" });
      const ready = await (await fetch(`${server.url}/readyz?verbose=1`, bearer(server))).text();
      assert.match(ready, /backup of 'default': .* pending/, ready);
      s3 = await startS3(s3Dir, port);
      const caught = await waitShipped(server, 90_000);  // retries back off up to 60 s
      console.log(`S3 outage: ${m(down, "kvconnect_backup_errors_total")} failed attempts, ` +
        `${m(down, "kvconnect_backup_lag_commits")} commits waited; shipped after the target came back ` +
        `(version ${m(caught, "kvconnect_backup_shipped_version")})`);
      await server.stop();
      const restored = await makeTempDir();
      const res = expectCliOk(await runKvconnect(["restore", "--data-dir", restored, "--from", "s3://backups/kv/prod", "--db", "default"]));
      console.log(res.stdout.trim());
      const s2 = await startServer({ dataDir: restored, token });
      try {
        const summary = await verifyAll(s2.url, token, restored, [...before, ...during], "s3");
        assert.equal(summary.acks, before.length + during.length);
      } finally {
        await s2.kill();
      }
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
      await s3.stop();
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

// PostgreSQL storage: continuous backup from a node on PostgreSQL and an online `kvconnect
// backup` of it, restored into a data directory (latest and a point in time, read by Deno
// through a server) and back into PostgreSQL under a new name (--as).
test("a database on PostgreSQL: continuous backup, online snapshot, restore and point-in-time restore",
  { timeout: 240_000, skip }, async () => {
    const conninfo = await freshPgDatabase();
    const backupDir = await makeTempDir("kvconnect-backup-");
    const snapshotDir = await makeTempDir("kvconnect-backup-");
    const token = randomToken();
    const server = await startServer({ postgres: conninfo, token,
      extraArgs: ["--backup-to", backupDir, "--backup-interval-ms", "100"] });
    let acks;
    try {
      acks = await write(server.url, token, "pg", { maxMs: 1500 });
      const cli = expectCliOk(await runKvconnect(["backup", "--postgres", conninfo, "--db", "default",
        "--to", snapshotDir]), server);
      assert.match(cli.stdout, /backed up 'default' at versionstamp [0-9a-f]{20}/);
      await waitShipped(server);
      await server.stop();
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
    for (const [from, label] of [[backupDir, "continuous"], [snapshotDir, "snapshot"]]) {
      const dataDir = await makeTempDir();
      const res = expectCliOk(await runKvconnect(["restore", "--data-dir", dataDir, "--from", from, "--db", "default"]));
      console.log(`PostgreSQL, ${label}: ${res.stdout.trim()}`);
      const s = await startServer({ dataDir, token });
      try {
        const summary = await verifyAll(s.url, token, dataDir, acks, "pg-" + label);
        assert.equal(summary.acks, acks.length);
      } finally {
        await s.kill();
      }
    }
    const at = acks[Math.floor(acks.length / 2)].vs;
    const pitrDir = await makeTempDir();
    expectCliOk(await runKvconnect(["restore", "--data-dir", pitrDir, "--from", backupDir, "--db", "default", "--at", at]));
    const s3 = await startServer({ dataDir: pitrDir, token });
    try {
      const file = path.join(pitrDir, "acks.json");
      await fs.writeFile(file, JSON.stringify(acks));
      const pitr = expectDenoOk(await runDeno("backup_pitr_verify.ts", {
        kvUrl: s3.url, token, env: { PITR_ACKS_FILE: file, PITR_AT: at }, timeoutMs: 90_000,
      }));
      assert.ok(pitr.before > 0 && pitr.after > 0, JSON.stringify(pitr));
      console.log(`PostgreSQL point-in-time restore at ${at}: ${pitr.before} writes before it present, ${pitr.after} after it absent`);
    } finally {
      await s3.kill();
    }
    // Back into PostgreSQL, under a new name (in place over 'default' and its data is refused).
    const intoPg = expectCliOk(await runKvconnect(["restore", "--postgres", conninfo, "--from", backupDir,
      "--db", "default", "--as", "copy"]));
    assert.match(intoPg.stdout, /restored 'default' .* as 'copy' at versionstamp/);
    const inPlace = await runKvconnect(["restore", "--postgres", conninfo, "--from", backupDir, "--db", "default"]);
    assert.notEqual(inPlace.code, 0);
    assert.match(inPlace.stderr, /--as NAME/);
    const list = expectCliOk(await runKvconnect(["db", "list", "--json", "--postgres", conninfo]));
    assert.ok(JSON.parse(list.stdout).some((d) => d.name === "copy"), list.stdout);
  });
