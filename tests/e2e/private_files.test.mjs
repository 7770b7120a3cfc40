// Files stay private and secrets stay off the command line (issue: hardening, items 5 and 6).
//
// The server is started the way README "Secrets" does it: the bootstrap token from
// --access-token-file, the push signing secret from KVCONNECT_QUEUE_PUSH_SECRET, under an
// explicit `umask 022`, in a data directory the "operator" made 0755 beforehand. After a
// client's writes, a second database, a continuous backup to a directory target, a one-off
// `kvconnect backup` and an export, every file the server and the CLI wrote must be 0600 and
// every directory they made 0700; /proc/<pid>/cmdline must hold neither secret. Then files an
// older version left 0644 are tightened at the next start (with a warning), and a token file
// others can read is refused.
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { openKv } from "@deno/kv";
import {
  annotate, expectCliOk, kvconnectBin, makeTempDir, randomToken, removeTempDirs, runKvconnect, Server,
} from "./harness.mjs";
import { pollUntil } from "./raw_client.mjs";

const PUSH_SECRET = "whsec_" + Buffer.from("private-files-push-secret").toString("base64");

after(removeTempDirs);

/** Every path under `root` (not `root` itself) with its mode, depth first. */
function walk(root) {
  const out = [];
  for (const entry of fs.readdirSync(root, { withFileTypes: true })) {
    const p = path.join(root, entry.name);
    const st = fs.lstatSync(p);
    out.push({ path: p, dir: st.isDirectory(), mode: st.mode & 0o7777 });
    if (st.isDirectory()) out.push(...walk(p));
  }
  return out;
}

/** Asserts files 0600 and directories 0700 under `root` (and `root` itself unless skipped). */
function assertPrivate(root, { includeRoot = true } = {}) {
  const entries = walk(root);
  if (includeRoot) entries.push({ path: root, dir: true, mode: fs.statSync(root).mode & 0o7777 });
  const wrong = entries
    .filter((e) => e.mode !== (e.dir ? 0o700 : 0o600))
    .map((e) => `${e.path}: ${e.mode.toString(8).padStart(4, "0")}`);
  assert.deepEqual(wrong, [], `files not 0600 / directories not 0700 under ${root}`);
  return entries.length;
}

/**
 * Starts `kvconnect serve ARGS` under `umask 022` (sh -c ... exec, so the pid is the server's),
 * with `env` added to the environment. Returns the harness Server (waitReady not yet called).
 */
async function spawnServe({ dataDir, args, env = {} }) {
  const readyFile = path.join(os.tmpdir(), `kvconnect-ready-${process.pid}-${randomToken(12)}.json`);
  const saved = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  try {
    return new Server({
      bin: "/bin/sh",
      args: ["-c", 'umask 022 && exec "$0" "$@"', kvconnectBin(), "serve", "--addr", "127.0.0.1:0",
        "--ready-file", readyFile, "--data-dir", dataDir, ...args],
      readyFile, tls: false, token: "<from a file>", dataDir, opts: {},
    });
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe("private files and secrets off the command line", () => {
  test("0755 data directory, umask 022: every file 0600, every new directory 0700; no secret in cmdline", { timeout: 120_000 }, async () => {
    const work = await makeTempDir("kvconnect-private-");
    const dataDir = path.join(work, "data");
    fs.mkdirSync(dataDir, { mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    const secretsDir = path.join(work, "secrets");
    fs.mkdirSync(secretsDir, { mode: 0o700 });
    const token = `kvc_${randomToken(32)}`;
    // As README "Secrets": a file only its owner reads; the newline `echo` adds is dropped.
    const tokenFile = path.join(secretsDir, "access-token");
    fs.writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const continuousDir = path.join(work, "continuous-backup");  // made by the server
    const oneOffDir = path.join(work, "one-off-backup");        // made by `kvconnect backup`
    const exportDir = path.join(work, "exports");
    fs.mkdirSync(exportDir, { mode: 0o755 });
    fs.chmodSync(exportDir, 0o755);
    const exportFile = path.join(exportDir, "default.ndjson");

    const args = [
      "--access-token-file", tokenFile,
      "--queue-push", "default=http://127.0.0.1:9/hook", "--queue-push-allow", "127.0.0.1",
      "--backup-to", continuousDir, "--backup-interval-ms", "100",
    ];
    let server = await spawnServe({ dataDir, args, env: { KVCONNECT_QUEUE_PUSH_SECRET: `default=${PUSH_SECRET}` } });
    try {
      await server.waitReady(20_000);
      const pid = server.proc.pid;
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
      assert.match(cmdline, /kvconnect.* serve /, `pid ${pid} is the server: ${cmdline}`);
      assert.ok(!cmdline.includes(token), `the access token is in /proc/${pid}/cmdline: ${cmdline}`);
      assert.ok(!cmdline.includes(PUSH_SECRET), `the push secret is in /proc/${pid}/cmdline: ${cmdline}`);
      assert.ok(!cmdline.includes("whsec_"), `a push secret is in /proc/${pid}/cmdline: ${cmdline}`);

      // The token from the file works (so it was read, and trimmed).
      const kv = await openKv(server.url, { accessToken: token });
      try {
        for (let i = 0; i < 20; i++) await kv.set(["private", i], { i, pad: "x".repeat(100) });
        assert.equal((await kv.get(["private", 7])).value.i, 7);
      } finally {
        kv.close();
      }
      expectCliOk(await runKvconnect(["db", "create", "sales", "--data-dir", dataDir], { cwd: work }));
      // The continuous backup ships within --backup-interval-ms; wait for its first object.
      await pollUntil(
        () => (fs.existsSync(continuousDir) ? walk(continuousDir).filter((e) => !e.dir).length : 0),
        (n) => n > 0, { timeoutMs: 15_000, intervalMs: 100, what: "continuous backup objects" });
      const cli = (argv) => runKvconnect(argv, { cwd: work, env: { KVCONNECT_ACCESS_TOKEN: token } });
      expectCliOk(await cli(["backup", "--all", "--to", oneOffDir, "--data-dir", dataDir]));
      expectCliOk(await cli(["export", "--db", "default", "--url", server.url, "--output", exportFile, "--quiet"]));
      assert.ok(fs.statSync(exportFile).size > 0, "the export holds the entries");

      const files = walk(dataDir).filter((e) => !e.dir).map((e) => path.basename(e.path));
      for (const f of ["catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm", "default.sqlite3",
        "server-secret", "kvconnect.lock"]) {
        assert.ok(files.includes(f), `${f} is in the data directory: ${files.join(", ")}`);
      }
      assert.ok(files.some((f) => /^db-[0-9a-f]+\.sqlite3$/.test(f)), `the sales database file: ${files.join(", ")}`);
      assertPrivate(dataDir, { includeRoot: false });
      assert.equal(fs.statSync(dataDir).mode & 0o777, 0o755, "the operator's directory keeps its mode");
      assert.ok(assertPrivate(continuousDir) > 1);
      assert.ok(assertPrivate(oneOffDir) > 1);
      assert.equal(fs.statSync(exportFile).mode & 0o7777, 0o600, "the export file");

      const stopped = await server.stop("SIGTERM");
      assert.deepEqual([stopped.code, stopped.signal, stopped.forced], [0, null, false], server.logTail());

      // Files an older version left world-readable: tightened at the next start, with a warning.
      for (const f of ["catalog.sqlite3", "default.sqlite3", "default.sqlite3-wal", "server-secret"]) {
        const p = path.join(dataDir, f);
        if (fs.existsSync(p)) fs.chmodSync(p, 0o644);
      }
      server = await spawnServe({ dataDir, args, env: { KVCONNECT_QUEUE_PUSH_SECRET: `default=${PUSH_SECRET}` } });
      await server.waitReady(20_000);
      assertPrivate(dataDir, { includeRoot: false });
      assert.match(server.logTail(200), /catalog\.sqlite3 had mode 0644; set it to 0600/);
      assert.match(server.logTail(200), /server-secret had mode 0644; set it to 0600/);
      const again = await server.stop("SIGTERM");
      assert.equal(again.code, 0, server.logTail());
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
  });

  test("a token file others can read is refused with a readable error", { timeout: 60_000 }, async () => {
    const work = await makeTempDir("kvconnect-private-");
    const dataDir = path.join(work, "data");
    const tokenFile = path.join(work, "access-token");
    fs.writeFileSync(tokenFile, `kvc_${randomToken(32)}\n`);
    fs.chmodSync(tokenFile, 0o644);
    const res = await runKvconnect(
      ["serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--access-token-file", tokenFile], { cwd: work });
    assert.equal(res.code, 2, `${res.stdout}\n${res.stderr}`);
    assert.match(res.stderr, /--access-token-file: .*access-token has mode 0644, so every user of this machine can read/);
    assert.match(res.stderr, /chmod 600 /);
    await fsp.rm(work, { recursive: true, force: true });
  });
});
