// Backups with the built binary and the real Deno CLI:
//  - continuous backup to a directory while a Deno writer runs, the server killed with
//    SIGKILL twice mid-stream (shipping resumes after each restart); then `kvconnect restore`
//    into a fresh data directory holds every acknowledged write with its versionstamp, and
//    `restore --at <an acknowledged versionstamp>` holds exactly the writes up to it;
//  - a database Deno made locally, served with --sqlite-path and backed up (continuously and
//    with `kvconnect backup` while it runs), restored and opened by Deno's own local backend;
//  - continuous backup to S3 (the npm S3 stand-in, SigV4-signed through libcurl) through a
//    target outage: shipping errors show in /metrics, the lag drains once the target is back,
//    and the restore from S3 holds every acknowledged write.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import {
  annotate, E2E_DIR, expectCliOk, expectDenoOk, freePort, LOCAL_BACKEND, makeTempDir, randomToken,
  removeTempDirs, runDeno, runKvconnect, sleep, spawnDeno, startServer, withTimeout,
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
async function metrics(server) {
  return parseMetrics(await (await fetch(`${server.url}/metrics`)).text());
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

      // Latest state, into a fresh data directory, served and read by Deno.
      const restored = await makeTempDir();
      const res = expectCliOk(await runKvconnect(["restore", "--data-dir", restored, "--from", backupDir, "--db", "default"]));
      console.log(res.stdout.trim());
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
