// A real PostgreSQL 15 server for end-to-end tests: the JavaScript twin of
// tests/testutil/pg_server.h (same layout, settings and clean-up rules).
//
// * startPg(opts): initdb (trust, superuser `kvc`, UTF8, locale C) in a fresh temp dir
//   `kvc-pg-XXXXXX`, then `postgres` listening only on a Unix socket in that dir
//   (listen_addresses='': no TCP port to race other processes for; wal_level=replica, so
//   standbys can be made), waits until pg_isready says so and creates the database `kvc`.
//   Options:
//     standby      also start a streaming standby (pg.standby)
//     synchronous  with standby: make it synchronous (synchronous_standby_names)
//     fsync        default true; false is faster (no crash of a test can lose data either way)
//     database     default "kvc"
//     settings     more ["name=value", ...] passed as `-c`, after (overriding) ours
//     timeoutMs    for each start, stop, promotion and replay wait (default 60 s)
//     tcp          also listen on 127.0.0.1 and connect over TCP (conninfo, url): only for the
//                  PostgreSQL benchmark, which measures what a network connection costs.
//                  PostgreSQL cannot take port 0, so a port the kernel just handed out (and
//                  took back) is tried, and another on "could not bind", a few times
// * A PgServer has conninfo (host=<its dir>, the socket; 127.0.0.1 with tcp), conninfoFor(db),
//   socketConninfo, url (postgresql://), host, port (the socket's .s.PGSQL.<port>: 5432; the
//   TCP port with tcp), dataDir, dir, running, log(); stop({mode: "fast" | "immediate"})
//   (SIGINT / SIGQUIT, as `pg_ctl stop -m`; immediate is a crash for the data dir), restart()
//   (same data dir and socket, and the same TCP port),
//   query(sql) (through this version's `psql -X -A -t`: rows on lines, columns split by "|";
//   rejects with psql's message), startStandby({synchronous}) (pg_basebackup -R -X stream
//   into a new dir, its own socket there; waits until the primary reports it streaming / sync),
//   promote() (pg_promote, as `pg_ctl promote`; waits until pg_is_in_recovery() is false),
//   waitForReplay(primary), replayLagBytes(primary) and cleanup() (immediate stop, directory
//   removed; also for its standby).
// * cleanupPg() cleans up every server still alive. It also runs (synchronously) when the
//   process exits, and every postmaster gets SIGQUIT from the kernel if this process dies
//   anyway (setpriv --pdeathsig). Directories of dead test processes are removed at the next
//   start. E2E_KEEP=1 keeps the directories.
//
// Binaries: KVC_PG_BINDIR, else /usr/lib/postgresql/15/bin, else `pg_config --bindir` of a
// PostgreSQL 15. As root, initdb, postgres and pg_basebackup run as the `postgres` system
// user (initdb and postgres refuse root) through setpriv, and the temp dir is theirs.

import { execFile, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { guessTcpPort, sleep } from "./harness.mjs";

export const PG_USER = "kvc";
const DIR_PREFIX = "kvc-pg-";
// The number in the socket's name; every server has a directory (and so a socket) of its own.
const SOCKET_PORT = 5432;
// With tcp only: ports tried before giving up (see guessTcpPort in harness.mjs).
const TCP_PORT_ATTEMPTS = 5;
const KEEP = process.env.E2E_KEEP === "1";

// ---------------------------------------------------------------------------
// Binaries and the user that runs them

let binDirCache;

export function pgBinDir() {
  if (binDirCache) return binDirCache;
  const candidates = [process.env.KVC_PG_BINDIR, "/usr/lib/postgresql/15/bin"].filter(Boolean);
  const config = spawnSync("pg_config", ["--version", "--bindir"], { encoding: "utf8" });
  if (config.status === 0 && /^PostgreSQL 15\./.test(config.stdout)) {
    candidates.push(config.stdout.split("\n")[1].trim());
  }
  const dir = candidates.find((d) => fs.existsSync(path.join(d, "postgres")));
  if (!dir) {
    throw new Error(
      `PostgreSQL 15 not found (tried ${candidates.join(", ")}): ` +
        "apt-get install postgresql-15, or set KVC_PG_BINDIR",
    );
  }
  binDirCache = dir;
  return dir;
}

let runAsCache;

/** {switchUser, uid, gid}: the postgres system user when we are root, else ourselves. */
function pgUser() {
  if (runAsCache) return runAsCache;
  if (process.getuid() !== 0) {
    runAsCache = { switchUser: false };
    return runAsCache;
  }
  const id = (flag) => spawnSync("id", [flag, "postgres"], { encoding: "utf8" });
  const uid = id("-u");
  const gid = id("-g");
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error("running as root, PostgreSQL needs the `postgres` system user, which does not exist");
  }
  runAsCache = { switchUser: true, uid: Number(uid.stdout), gid: Number(gid.stdout) };
  return runAsCache;
}

/** Our environment without PG* variables, with C messages (the log is searched). */
function childEnv() {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PG")));
  env.LC_ALL = "C";
  return env;
}

/**
 * Starts a PostgreSQL program under setpriv (as postgres when root), with `deathSignal` sent
 * to it when this process dies; output appended to `logPath`.
 */
function spawnPg(program, args, { cwd, logPath, deathSignal }) {
  const runAs = pgUser();
  const argv = [
    ...(runAs.switchUser ? ["--reuid=postgres", "--regid=postgres", "--init-groups"] : []),
    "--pdeathsig", deathSignal, "--", path.join(pgBinDir(), program), ...args,
  ];
  const log = fs.openSync(logPath, "a");
  try {
    const proc = spawn("setpriv", argv, { cwd, env: childEnv(), stdio: ["ignore", log, log] });
    proc.spawnError = null;
    proc.once("error", (error) => (proc.spawnError = error));
    return proc;
  } finally {
    fs.closeSync(log);
  }
}

const hasExited = (proc) => proc.exitCode !== null || proc.signalCode !== null || proc.spawnError !== null;

function exited(proc) {
  if (hasExited(proc)) {
    return Promise.resolve({ code: proc.exitCode, signal: proc.signalCode, error: proc.spawnError ?? undefined });
  }
  return new Promise((resolve) => {
    proc.once("exit", (code, signal) => resolve({ code, signal }));
    proc.once("error", (error) => resolve({ code: null, signal: null, error }));
  });
}

async function exitedWithin(proc, ms) {
  let timer;
  const timeout = new Promise((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  try {
    return await Promise.race([exited(proc), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function tail(file, lines = 40) {
  const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
  return text.split("\n").slice(-lines).join("\n");
}

/** Runs initdb or pg_basebackup to completion; throws with the log's tail if it fails. */
async function runTool(program, args, { dir, logPath, timeoutMs }) {
  const proc = spawnPg(program, args, { cwd: dir, logPath, deathSignal: "KILL" });
  const res = await exitedWithin(proc, timeoutMs);
  if (!res) {
    proc.kill("SIGKILL");
    await exited(proc);
    throw new Error(`${program} did not finish within ${timeoutMs} ms; its log:\n${tail(logPath)}`);
  }
  if (res.code !== 0) {
    const why = res.error ? `cannot run setpriv: ${res.error.message}` : `code=${res.code} signal=${res.signal}`;
    throw new Error(`${program} failed (${why}); its log:\n${tail(logPath)}`);
  }
}

// ---------------------------------------------------------------------------
// Temp dirs

function alive(pid) {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

function readPid(file) {
  try {
    return Number.parseInt(fs.readFileSync(file, "utf8"), 10);
  } catch {
    return 0;
  }
}

/** Removes dirs of dead test processes whose postmaster is gone too. */
function removeStaleDirs() {
  let names = [];
  try {
    names = fs.readdirSync(os.tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const dir = path.join(os.tmpdir(), name);
    const owner = readPid(path.join(dir, "owner"));
    if (!(owner > 0) || alive(owner)) continue;
    if (alive(readPid(path.join(dir, "data", "postmaster.pid")))) continue;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function makeDir() {
  removeStaleDirs();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX));
  fs.writeFileSync(path.join(dir, "owner"), `${process.pid}\n`);
  const runAs = pgUser();
  if (runAs.switchUser) fs.chownSync(dir, runAs.uid, runAs.gid);
  return dir;
}

const sqlLiteral = (text) => `'${String(text).replaceAll("'", "''")}'`;
const sqlIdent = (text) => `"${String(text).replaceAll('"', '""')}"`;
const connValue = (text) => `'${String(text).replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

// ---------------------------------------------------------------------------
// Servers

const live = new Set();
let standbyCounter = 0;

export class PgServer {
  constructor(opts, dir) {
    this.opts = opts;
    this.dir = dir;
    this.dataDir = path.join(dir, "data");
    this.logPath = path.join(dir, "postgres.log");
    this.port = opts.tcp ? 0 : SOCKET_PORT;
    this.proc = null;
    this.applicationName = "";
    this.standby = undefined;
    live.add(this);
  }

  get running() {
    return this.proc !== null && !hasExited(this.proc);
  }

  /** Where clients connect: the socket directory, or 127.0.0.1 with tcp. */
  get host() {
    return this.opts.tcp ? "127.0.0.1" : this.dir;
  }

  /** "host='<dir>' port=5432 user=kvc dbname='<dbname>'" (host='127.0.0.1' port=N with tcp) */
  conninfoFor(dbname = this.opts.database) {
    return `host=${connValue(this.host)} port=${this.port} user=${PG_USER} dbname=${connValue(dbname)}`;
  }

  /** conninfoFor() of the database startPg made. */
  get conninfo() {
    return this.conninfoFor();
  }

  /** conninfoFor() over the Unix socket in this.dir (also with tcp). */
  socketConninfoFor(dbname = this.opts.database) {
    return `host=${connValue(this.dir)} port=${this.port} user=${PG_USER} dbname=${connValue(dbname)}`;
  }

  get socketConninfo() {
    return this.socketConninfoFor();
  }

  /** "postgresql://kvc@%2Ftmp%2Fkvc-pg-XXXXXX:5432/kvc" (127.0.0.1:N with tcp) */
  get url() {
    return `postgresql://${PG_USER}@${encodeURIComponent(this.host)}:${this.port}/${encodeURIComponent(this.opts.database)}`;
  }

  /** What initdb, pg_basebackup and the server printed so far. */
  log() {
    return fs.existsSync(this.logPath) ? fs.readFileSync(this.logPath, "utf8") : "";
  }

  /**
   * Starts the postmaster and waits until it is ready. With tcp and `newPort`, on a fresh port
   * guess, and on another one (a few times) if that one was taken meanwhile.
   */
  async launch(newPort) {
    const deadline = Date.now() + this.opts.timeoutMs;
    const retryPort = this.opts.tcp && newPort;
    let lastError;
    for (let attempt = 0; attempt < (retryPort ? TCP_PORT_ATTEMPTS : 1); attempt++) {
      if (retryPort) this.port = await guessTcpPort();
      const settings = [
        `listen_addresses=${this.opts.tcp ? "127.0.0.1" : ""}`, // empty: no TCP listener
        `fsync=${this.opts.fsync ? "on" : "off"}`,
        "shared_buffers=16MB",
        "wal_level=replica",
        "max_wal_senders=10",
        "max_replication_slots=10",
        "hot_standby=on",
        "wal_keep_size=128MB", // a standby stopped for a while can still catch up
        "max_connections=50",
        ...this.opts.settings,
      ];
      // -k: the socket goes into the server's own directory.
      const args = ["-D", this.dataDir, "-p", String(this.port), "-k", this.dir, ...settings.flatMap((s) => ["-c", s])];
      const logStart = this.log().length;
      // SIGQUIT is an immediate shutdown: the postmaster stops its children, then itself.
      this.proc = spawnPg("postgres", args, { cwd: this.dir, logPath: this.logPath, deathSignal: "QUIT" });
      try {
        await this.waitReady(deadline);
        return;
      } catch (e) {
        lastError = e;
        await this.stop({ mode: "immediate" });
        const portTaken = /could not bind|could not create any TCP\/IP/.test(this.log().slice(logStart));
        if (!portTaken || Date.now() >= deadline) break;
      }
    }
    throw lastError;
  }

  async waitReady(deadline) {
    const isready = path.join(pgBinDir(), "pg_isready");
    for (;;) {
      if (!this.running) {
        const { code, signal, error } = await exited(this.proc);
        const why = error ? `cannot run setpriv: ${error.message}` : `code=${code} signal=${signal}`;
        throw new Error(`postgres exited at start (${why}); its log:\n${tail(this.logPath)}`);
      }
      const args = ["-q", "-t", "2", "-h", this.host, "-p", String(this.port), "-U", PG_USER, "-d", "postgres"];
      const ready = await new Promise((resolve) => execFile(isready, args, { env: childEnv() }, (error) => resolve(!error)));
      if (ready) return;
      if (Date.now() >= deadline) {
        throw new Error(
          `postgres did not accept connections (host ${this.host}, port ${this.port}) within ${this.opts.timeoutMs} ms; ` +
            `its log:\n${tail(this.logPath)}`,
        );
      }
      await sleep(20);
    }
  }

  /** Stops the server: mode "fast" (SIGINT) or "immediate" (SIGQUIT, like a crash). */
  async stop({ mode = "fast" } = {}) {
    if (!this.proc) return;
    const proc = this.proc;
    if (this.running) proc.kill(mode === "immediate" ? "SIGQUIT" : "SIGINT");
    const res = await exitedWithin(proc, this.opts.timeoutMs);
    if (!res) {
      proc.kill("SIGKILL");
      await exited(proc);
    }
    this.proc = null;
    if (!res) throw new Error(`postgres did not stop within ${this.opts.timeoutMs} ms and was killed`);
  }

  /** Starts again on the same data dir and socket (and TCP port) (after a fast stop if running). */
  async restart() {
    await this.stop({ mode: "fast" });
    await this.launch(false);
  }

  /**
   * Runs `sql` through `psql -X -A -t -q` in the database (or `dbname`); resolves with its
   * output without the last newline (rows on lines, columns split by "|").
   */
  query(sql, { dbname } = {}) {
    if (!this.running) return Promise.reject(new Error("the PostgreSQL server is stopped"));
    const psql = path.join(pgBinDir(), "psql");
    const args = ["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", this.socketConninfoFor(dbname), "-c", sql];
    return new Promise((resolve, reject) => {
      execFile(psql, args, { env: childEnv(), timeout: this.opts.timeoutMs }, (error, stdout, stderr) => {
        if (error) reject(new Error(`psql: ${sql}: ${stderr.trim() || error.message}`));
        else resolve(stdout.replace(/\n$/, ""));
      });
    });
  }

  /** Polls `sql` here until it returns `want`; throws `what` and `logOf`'s log after the timeout. */
  async waitFor(sql, want, what, logOf = this) {
    const deadline = Date.now() + this.opts.timeoutMs;
    for (;;) {
      const got = await this.query(sql).catch((e) => `<${e.message}>`);
      if (got === want) return;
      if (Date.now() >= deadline) {
        throw new Error(`${what} within ${this.opts.timeoutMs} ms (last answer: ${got}); its log:\n${tail(logOf.logPath)}`);
      }
      await sleep(20);
    }
  }

  /**
   * A streaming standby of this server (pg_basebackup -R -X stream --no-sync into a new dir,
   * its own socket there). With `synchronous`, this server's synchronous_standby_names becomes the
   * standby's application name (replacing an earlier one): destroy the standby only after
   * the last write here. Resolves once this server reports it streaming (sync or async).
   */
  async startStandby({ synchronous = false } = {}) {
    if (!this.running) throw new Error("the primary is stopped");
    const standby = new PgServer(this.opts, makeDir());
    standby.applicationName = `kvc_standby_${process.pid}_${++standbyCounter}`;
    try {
      await this.makeStandby(standby, synchronous);
      return standby;
    } catch (e) {
      await standby.cleanup();
      throw e;
    }
  }

  async makeStandby(standby, synchronous) {    // -c fast: no spread checkpoint. --no-sync: the copy is not flushed as a whole (seconds);
    // the standby itself runs with the primary's fsync setting.
    await runTool(
      "pg_basebackup",
      ["-D", standby.dataDir, "-h", this.dir, "-p", String(this.port), "-U", PG_USER, "-X", "stream", "-R", "-c", "fast", "--no-sync"],
      { dir: standby.dir, logPath: standby.logPath, timeoutMs: this.opts.timeoutMs },
    );
    // Later lines win: our primary_conninfo names the standby; a copied
    // synchronous_standby_names is cleared so a promoted standby waits for nobody.
    const primaryConninfo = `host=${connValue(this.dir)} port=${this.port} user=${PG_USER} application_name=${standby.applicationName}`;
    fs.appendFileSync(
      path.join(standby.dataDir, "postgresql.auto.conf"),
      `primary_conninfo = ${sqlLiteral(primaryConninfo)}\nsynchronous_standby_names = ''\n`,
    );
    await standby.launch(true);
    if (synchronous) {
      await this.query(`ALTER SYSTEM SET synchronous_standby_names = ${sqlLiteral(standby.applicationName)}`);
      await this.query("SELECT pg_reload_conf()");
    }
    await this.waitFor(
      `SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming' AND application_name = ${sqlLiteral(standby.applicationName)}`,
      synchronous ? "sync" : "async",
      "the standby is not streaming",
      standby,
    );
  }

  /** Promotes this standby and waits until it is out of recovery. */
  async promote() {
    if ((await this.query("SELECT pg_is_in_recovery()")) !== "t") throw new Error("not a standby: nothing to promote");
    await this.query(`SELECT pg_promote(true, ${Math.ceil(this.opts.timeoutMs / 1000)})`);
    await this.waitFor("SELECT pg_is_in_recovery()", "f", "the standby was not promoted");
  }

  /** Waits until this standby has replayed `primary`'s current WAL position. */
  async waitForReplay(primary) {
    const lsn = await primary.query("SELECT pg_current_wal_lsn()");
    await this.waitFor(
      `SELECT coalesce(pg_last_wal_replay_lsn() >= ${sqlLiteral(lsn)}::pg_lsn, false)`,
      "t",
      `the standby did not replay up to ${lsn}`,
    );
  }

  /** Bytes of `primary`'s WAL this standby has not replayed yet. */
  async replayLagBytes(primary) {
    const lsn = await primary.query("SELECT pg_current_wal_lsn()");
    const lag = await this.query(`SELECT greatest(0, pg_wal_lsn_diff(${sqlLiteral(lsn)}, pg_last_wal_replay_lsn()))::bigint`);
    if (lag === "") throw new Error("no replay position on this server (not a standby?)");
    return Number(lag);
  }

  /** Immediate stop and directory removed; its standby (startPg({standby})) too. */
  async cleanup() {
    if (this.standby) await this.standby.cleanup();
    await this.stop({ mode: "immediate" }).catch(() => {});
    if (!KEEP) fs.rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }

  /** cleanup() for the process 'exit' hook: no awaiting there. */
  cleanupSync() {
    if (this.running) {
      this.proc.kill("SIGQUIT");
      // The postmaster removes postmaster.pid as it exits; the child is reaped by nobody now.
      const pidFile = path.join(this.dataDir, "postmaster.pid");
      const deadline = Date.now() + 5_000;
      const pause = new Int32Array(new SharedArrayBuffer(4));
      while (fs.existsSync(pidFile) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 10);
      if (fs.existsSync(pidFile)) this.proc.kill("SIGKILL");
    }
    if (!KEEP) fs.rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }
}

/** Starts a PostgreSQL 15 server (and a standby with {standby: true}); see the top. */
export async function startPg(opts = {}) {
  const options = {
    fsync: opts.fsync ?? true,
    database: opts.database ?? "kvc",
    settings: opts.settings ?? [],
    timeoutMs: opts.timeoutMs ?? 60_000,
    tcp: opts.tcp ?? false,
  };
  pgBinDir();
  const pg = new PgServer(options, makeDir());
  try {
    await runTool("initdb", ["-D", pg.dataDir, "-A", "trust", "-U", PG_USER, "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"], {
      dir: pg.dir,
      logPath: pg.logPath,
      timeoutMs: options.timeoutMs,
    });
    await pg.launch(true);
    await pg.query(`CREATE DATABASE ${sqlIdent(options.database)}`, { dbname: "postgres" });
    if (opts.standby) pg.standby = await pg.startStandby({ synchronous: opts.synchronous ?? false });
    return pg;
  } catch (e) {
    await pg.cleanup();
    throw e;
  }
}

/** Cleans up every server this process started and has not cleaned up. */
export async function cleanupPg() {
  for (const pg of [...live]) await pg.cleanup();
}

process.on("exit", () => {
  for (const pg of [...live]) pg.cleanupSync();
});
