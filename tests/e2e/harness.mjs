// Test harness for the kvconnect end-to-end suite.
//
// * startServer(): runs `kvconnect serve` on 127.0.0.1 port 0 (each listener: the kernel picks
//   the port) with a fresh data dir (or a given --sqlite-path, or --postgres) and a random
//   24-char access token, waits for its --ready-file (which names the ports it got), and keeps
//   the last lines of its stderr/stdout for failure reports.
//   With tlsCert/tlsKey the server speaks TLS (https://); with tlsPort as well it
//   listens in plain text on one port and TLS on another.
// * runDeno(): runs one of the Deno scripts under ./deno with KV_URL,
//   DENO_KV_ACCESS_TOKEN, DENO_CERT etc. and returns {code, signal, stdout, stderr, summary}.
// * runKvconnect() / server.dbCmd() / server.tokenCmd(): the `kvconnect db|token`
//   subcommands on a server's data dir, returning {code, stdout, stderr}.
// * makeCerts(): a private CA and a server certificate from deploy/make-certs.sh.
// * Every child process is registered and SIGKILLed when this process exits,
//   so a failing or interrupted test never leaves servers behind.
// * startServer({postgres}) keeps everything in PostgreSQL (--postgres CONNINFO) instead of a
//   data dir; with E2E_BACKEND=postgres every server started without sqlitePath, dataDir or
//   postgres gets a fresh database of one PostgreSQL (pg.mjs) started for this process.
//
// Environment:
//   KVCONNECT_BIN       path of the kvconnect binary (required for server tests)
//   DENO_BIN            override the Deno binary (default: the npm "deno" package)
//   E2E_LOCAL_BACKEND=1 self-check mode: run the Deno scripts / Node client tests
//                       against local SQLite files instead of a server
//   E2E_BACKEND=postgres  servers keep their data in PostgreSQL (see above)
//   E2E_VERBOSE=1       echo server and Deno output while tests run
//   E2E_KEEP=1          keep temporary data dirs

import { spawn, spawnSync } from "node:child_process";
import { test } from "node:test";
import crypto from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const E2E_DIR = path.dirname(fileURLToPath(import.meta.url));
export const DENO_SCRIPTS_DIR = path.join(E2E_DIR, "deno");
export const LOCAL_BACKEND = process.env.E2E_LOCAL_BACKEND === "1";
export const SERVER_BACKEND = process.env.E2E_BACKEND ?? "sqlite";
if (!["sqlite", "postgres"].includes(SERVER_BACKEND)) {
  throw new Error(`E2E_BACKEND must be sqlite or postgres, not ${SERVER_BACKEND}`);
}
const VERBOSE = process.env.E2E_VERBOSE === "1";
const EXPECTED_DENO_VERSION = "2.9.6";

// ---------------------------------------------------------------------------
// Child-process bookkeeping

const liveChildren = new Set();

function track(child) {
  liveChildren.add(child);
  child.once("exit", () => liveChildren.delete(child));
  return child;
}

export function killAllChildren() {
  for (const child of liveChildren) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
}

process.on("exit", killAllChildren);
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.once(sig, () => {
    killAllChildren();
    process.exit(128 + (os.constants.signals[sig] ?? 1));
  });
}

function waitForExit(child) {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
}

/** Keeps the last `max` lines written to a stream. */
class LineTail {
  constructor(max = 400, prefix = "") {
    this.max = max;
    this.prefix = prefix;
    this.lines = [];
    this.partial = "";
  }
  push(chunk) {
    const text = this.partial + chunk.toString("utf8");
    const parts = text.split("\n");
    this.partial = parts.pop();
    for (const line of parts) {
      this.lines.push(line);
      if (VERBOSE) process.stderr.write(`${this.prefix}${line}\n`);
    }
    if (this.lines.length > this.max) this.lines.splice(0, this.lines.length - this.max);
  }
  text(n = 60) {
    const all = this.partial ? [...this.lines, this.partial] : this.lines;
    return all.slice(-n).join("\n");
  }
}

// ---------------------------------------------------------------------------
// Binaries

export function kvconnectBin() {
  const bin = process.env.KVCONNECT_BIN;
  if (!bin) {
    throw new Error(
      "KVCONNECT_BIN is not set. Build the server and run e.g.\n" +
        "  cd tests/e2e && KVCONNECT_BIN=../../build/kvconnect npm test",
    );
  }
  const abs = path.resolve(process.cwd(), bin);
  let st;
  try {
    st = fs.statSync(abs);
  } catch {
    throw new Error(`KVCONNECT_BIN=${bin} does not exist (resolved to ${abs})`);
  }
  if (!st.isFile()) throw new Error(`KVCONNECT_BIN=${abs} is not a file`);
  try {
    fs.accessSync(abs, fs.constants.X_OK);
  } catch {
    throw new Error(`KVCONNECT_BIN=${abs} is not executable`);
  }
  return abs;
}

let denoBinCache;

export function denoBin() {
  if (denoBinCache) return denoBinCache;
  let bin = process.env.DENO_BIN;
  if (!bin) {
    const candidates = [
      path.join(E2E_DIR, "node_modules", "deno", process.platform === "win32" ? "deno.exe" : "deno"),
      path.join(E2E_DIR, "node_modules", "@deno", `${process.platform}-${process.arch}-glibc`, "deno"),
      path.join(E2E_DIR, "node_modules", "@deno", `${process.platform}-${process.arch}`, "deno"),
      path.join(E2E_DIR, "node_modules", ".bin", "deno"),
    ];
    bin = candidates.find((c) => fs.existsSync(c));
    if (!bin) {
      throw new Error(`Deno not found under ${E2E_DIR}/node_modules; run \`npm ci\` in tests/e2e first`);
    }
  }
  const r = spawnSync(bin, ["--version"], { encoding: "utf8", timeout: 30_000 });
  if (r.status !== 0) {
    throw new Error(`\`${bin} --version\` failed (status ${r.status}): ${r.stderr || r.error}`);
  }
  const m = /deno (\S+)/.exec(r.stdout);
  if (!process.env.DENO_BIN && (!m || m[1] !== EXPECTED_DENO_VERSION)) {
    throw new Error(`expected deno ${EXPECTED_DENO_VERSION}, got: ${r.stdout.trim()}`);
  }
  denoBinCache = bin;
  return bin;
}

// ---------------------------------------------------------------------------
// Temp dirs, ports, tokens

const tempDirs = [];

export async function makeTempDir(prefix = "kvconnect-e2e-") {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

export async function removeTempDirs() {
  if (process.env.E2E_KEEP === "1") return;
  for (const dir of tempDirs.splice(0)) {
    await fsp.rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

export function randomToken(len = 24) {
  return crypto.randomBytes(len).toString("base64url").slice(0, len);
}

/**
 * A TCP port for a program that cannot be told to listen on port 0 and report the port
 * (PostgreSQL with tcp in pg.mjs, redis-server in the benchmarks): a random port BELOW the
 * kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), which the kernel never
 * hands to a client socket or a port-0 listener, so only another explicit bind can hold it.
 * The caller still sees that program's "address in use" failure and tries a new guess (a few
 * times). kvconnect itself binds port 0 (startServer).
 */
export function guessTcpPort() {
  let low = 32768;
  try {
    low = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || low;
  } catch {
    // not Linux: the common default
  }
  const floor = 10000;
  if (low - floor < 1000) throw new Error(`guessTcpPort: the ephemeral range starts at ${low}, leaving no room below it`);
  return floor + crypto.randomInt(low - floor);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `cond` (sync or async) every `intervalMs` until it returns a truthy value, and resolves
 * with that value. A throw counts as "not yet" (so `cond` may be a block of assertions that
 * must all come to hold). After `timeoutMs` it throws an error naming `what` and the last
 * value or error. Use it for every wait for something to happen: never a fixed sleep.
 */
export async function waitFor(cond, { timeoutMs = 10_000, intervalMs = 20, what = "the condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  let lastError;
  for (;;) {
    try {
      last = await cond();
      lastError = undefined;
      if (last) return last;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) {
      const seen = lastError ? `last error: ${lastError.message}` : `last value: ${JSON.stringify(last)}`;
      const err = new Error(`timed out after ${timeoutMs} ms waiting for ${what}; ${seen}`);
      if (lastError) err.cause = lastError;
      throw err;
    }
    await sleep(intervalMs);
  }
}

/**
 * The value of one sample of the server's /metrics (Prometheus text), the one named `name`
 * whose labels include `labels`; undefined if there is none. Uses the server's (admin) token.
 */
export async function metricValue(server, name, labels = {}) {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${text.slice(0, 200)}`);
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)]
      .map(([, k, v]) => [k, v]));
    if (Object.entries(labels).every(([k, v]) => got[k] === String(v))) return Number(m[3]);
  }
  return undefined;
}

/**
 * Resolves like `promise`, or with `onTimeout` after `ms`; the timer is cleared
 * either way so it never keeps the test process alive.
 */
export async function withTimeout(promise, ms, onTimeout) {
  let timer;
  const t = new Promise((resolve) => {
    timer = setTimeout(() => resolve(onTimeout), ms);
  });
  try {
    return await Promise.race([promise, t]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The next value of a watch stream's reader (@deno/kv's `kv.watch(...).getReader()`); fails
 * naming `what` when none comes within `ms` or the stream ends.
 */
export async function readFrame(reader, ms, what) {
  let timer;
  const timeout = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new Error(`${what}: no watch frame within ${ms} ms`)), ms);
  });
  try {
    const r = await Promise.race([reader.read(), timeout]);
    if (r.done) throw new Error(`${what}: watch stream ended`);
    return r.value;
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------
// Server

// With E2E_BACKEND=postgres: one PostgreSQL for this process (pg.mjs cleans it up at exit).
let sharedPg;
let pgDatabases = 0;

/** A conninfo naming a fresh database of this process's PostgreSQL. */
export async function freshPgDatabase() {
  // pg.mjs imports this module: load it on first use
  const { startPg } = await import("./pg.mjs");
  sharedPg ??= startPg({ fsync: false }).then((pg) => {
    // it must not keep a test file's process alive: pg.mjs stops it when the process exits
    pg.proc.unref();
    return pg;
  });
  const pg = await sharedPg;
  const name = `kvc_e2e_${++pgDatabases}`;
  await pg.query(`CREATE DATABASE ${name}`, { dbname: "postgres" });
  return pg.conninfoFor(name);
}

/**
 * Starts `kvconnect serve`. Every listener binds port 0: the kernel picks a port nobody holds,
 * and there is no moment between choosing and binding in which another process could take it.
 * The server writes the ports it got to its --ready-file, which startServer polls for and reads
 * (server.port, server.tlsPort, server.metricsPort, server.url, ...).
 * Options:
 *   dataDir     data directory (default: a fresh temp dir); ignored with sqlitePath/postgres
 *   sqlitePath  serve this one SQLite file (--sqlite-path) instead of --data-dir
 *   postgres    a libpq conninfo: --postgres instead of --data-dir (the data dir is still made,
 *               as the server's working directory). Default with E2E_BACKEND=postgres (and no
 *               dataDir or sqlitePath): a fresh database of one PostgreSQL for this process
 *   token       access token (default: random 24 chars). `null`: pass none, so the server
 *               makes its bootstrap token (<data-dir>/access-token), which becomes server.token
 *   tlsCert, tlsKey  PEM files (--tls-cert/--tls-key): server.url becomes https://
 *   tlsPort     `true` with tlsCert/tlsKey: also listen with TLS (--tls-addr) on a port of its
 *               own; server.url stays http:// and server.tlsUrl is the https:// one
 *   metrics     `true`: the separate metrics listener too (--metrics-addr): server.metricsPort,
 *               server.metricsUrl
 *   port        only the port an earlier server of the same test got from the kernel, for a
 *               restart that a long-lived client must find at the same URL (see restart());
 *               default 0. The same for a numeric tlsPort (the metrics port is always new)
 *   extraArgs   appended to the command line
 *   readyTimeoutMs  default 20 s
 */
export async function startServer(opts = {}) {
  const bin = kvconnectBin();
  const bootstrap = opts.token === null;
  const token = bootstrap ? undefined : (opts.token ?? randomToken());
  const sqlitePath = opts.sqlitePath;
  const postgres = opts.postgres ??
    (SERVER_BACKEND === "postgres" && !sqlitePath && !opts.dataDir ? await freshPgDatabase() : undefined);
  if (postgres && bootstrap) throw new Error("startServer: a bootstrap token (token: null) needs a data dir");
  const dataDir = sqlitePath ? undefined : (opts.dataDir ?? (await makeTempDir()));
  const readyTimeoutMs = opts.readyTimeoutMs ?? 20_000;
  const tls = Boolean(opts.tlsCert || opts.tlsKey);
  const tlsPort = tls && opts.tlsPort ? (opts.tlsPort === true ? 0 : opts.tlsPort) : undefined;
  // A fixed port is only ever one an earlier incarnation got from the kernel and held until it
  // stopped (see restart()). Between that stop and this bind the port is free, so a client
  // socket of some other process may hold it for a moment: a few tries, and only then.
  const samePort = Boolean(opts.port) || Boolean(tlsPort);
  let lastError;
  for (let attempt = 0; attempt < (samePort ? 5 : 1); attempt++) {
    if (attempt > 0) await sleep(200 * attempt);
    const readyFile = path.join(os.tmpdir(), `kvconnect-ready-${process.pid}-${randomToken(12)}.json`);
    const args = [
      "serve",
      "--addr", `127.0.0.1:${opts.port ?? 0}`,
      "--ready-file", readyFile,
      ...(postgres ? ["--postgres", postgres] : sqlitePath ? ["--sqlite-path", sqlitePath] : ["--data-dir", dataDir]),
      ...(token !== undefined ? ["--access-token", token] : []),
      ...(tls ? ["--tls-cert", opts.tlsCert, "--tls-key", opts.tlsKey] : []),
      ...(tlsPort !== undefined ? ["--tls-addr", `127.0.0.1:${tlsPort}`] : []),
      ...(opts.metrics ? ["--metrics-addr", "127.0.0.1:0"] : []),
      ...(opts.extraArgs ?? []),
    ];
    const server = new Server({ bin, args, readyFile, tls, token, dataDir, sqlitePath, postgres, opts });
    try {
      await server.waitReady(readyTimeoutMs);
      if (bootstrap) await server.readBootstrapToken(readyTimeoutMs);
      return server;
    } catch (e) {
      lastError = e;
      await server.kill();
      if (!/EADDRINUSE|address already in use/i.test(server.logTail(20))) break;
    }
  }
  throw lastError;
}

export class Server {
  constructor({ bin, args, readyFile, tls, token, dataDir, sqlitePath, postgres, opts }) {
    this.bin = bin;
    this.args = args;
    this.readyFile = readyFile;
    this.tls = tls;
    this.token = token;
    this.dataDir = dataDir;
    this.sqlitePath = sqlitePath;
    this.postgres = postgres;
    this.opts = opts;
    // Set by waitReady() from the ready file.
    this.port = undefined;
    this.tlsPort = undefined;
    this.metricsPort = undefined;
    this.url = undefined;
    this.tlsUrl = undefined;
    this.metricsUrl = undefined;
    this.log = new LineTail(400, "[kvconnect] ");
    this.startedAt = Date.now();
    // Run inside the data dir (or next to the SQLite file, or in a temp dir with PostgreSQL)
    // so that nothing the server writes relative to its working directory lands in the
    // repository.
    const cwd = dataDir ?? path.dirname(sqlitePath);
    const env = { ...process.env };
    if (token === undefined) {
      // the server would take its token from these instead of making a bootstrap token
      delete env.KVCONNECT_ACCESS_TOKEN;
      delete env.DENO_KV_ACCESS_TOKEN;
    }
    this.proc = track(spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env, cwd }));
    this.log.prefix = `[kvconnect pid ${this.proc.pid}] `;
    this.proc.stdout.on("data", (d) => this.log.push(d));
    this.proc.stderr.on("data", (d) => this.log.push(d));
    this.exited = waitForExit(this.proc);
    this.proc.once("error", (e) => this.log.push(`spawn error: ${e.message}\n`));
  }

  get running() {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  logTail(n = 60) {
    return this.log.text(n);
  }

  describe() {
    const cmd = `kvconnect ${this.args.map((a) => (/\s/.test(a) ? `"${a}"` : a)).join(" ")}`;
    return this.token ? cmd.replace(this.token, "<token>") : cmd;
  }

  /** Waits for <data-dir>/access-token (the bootstrap token) and makes it server.token. */
  async readBootstrapToken(timeoutMs) {
    const file = path.join(this.dataDir, "access-token");
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = await fsp.readFile(file, "utf8").catch(() => "");
      if (text.trim()) {
        this.token = text.trim();
        return this.token;
      }
      if (Date.now() > deadline || !this.running) {
        throw new Error(`${this.describe()} wrote no bootstrap token to ${file}.\n--- server output ---\n${this.logTail()}`);
      }
      await sleep(50);
    }
  }

  /** `kvconnect <args...>` with this server's --data-dir (or --postgres); see runKvconnect(). */
  async cli(args, opts = {}) {
    const where = this.postgres ? ["--postgres", this.postgres] : ["--data-dir", this.dataDir];
    return await runKvconnect([...args, ...where], { cwd: this.dataDir, ...opts });
  }

  /** `kvconnect db <args...>` on this server's data dir (or PostgreSQL). */
  async dbCmd(...args) {
    return await this.cli(["db", ...args]);
  }

  /** `kvconnect token <args...>` on this server's data dir (or PostgreSQL). */
  async tokenCmd(...args) {
    return await this.cli(["token", ...args]);
  }

  /**
   * Polls for the ready file, which the server writes (atomically) once every listener is
   * bound, and takes the ports from it. Fails with the server's output if it exits first or
   * the deadline passes.
   */
  async waitReady(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    try {
      while (Date.now() < deadline) {
        const text = await fsp.readFile(this.readyFile, "utf8").catch(() => "");
        if (text) {
          this.takePorts(JSON.parse(text));
          return;
        }
        if (!this.running) {
          const { code, signal } = await this.exited;
          throw new Error(
            `${this.describe()} exited before it was ready (code=${code}, signal=${signal}).\n` +
              `--- server output ---\n${this.logTail()}`,
          );
        }
        await sleep(25);
      }
    } finally {
      await fsp.rm(this.readyFile, { force: true }).catch(() => {});
    }
    throw new Error(
      `${this.describe()} wrote no ready file within ${timeoutMs} ms.\n` +
        `--- server output ---\n${this.logTail()}`,
    );
  }

  takePorts(ready) {
    if (ready.pid !== this.proc.pid) {
      throw new Error(`the ready file ${this.readyFile} is of pid ${ready.pid}, not ${this.proc.pid}`);
    }
    this.port = ready.port;
    this.url = ready.url;
    this.tlsPort = ready.tls_port;
    this.tlsUrl = ready.tls_url ?? (this.tls ? this.url : undefined);
    this.metricsPort = ready.metrics_port;
    this.metricsUrl = ready.metrics_url;
    this.log.prefix = `[kvconnect:${this.port}] `;
  }

  /** Sends `signal` (default SIGTERM) and waits; SIGKILLs after `timeoutMs`. */
  async stop(signal = "SIGTERM", timeoutMs = 10_000) {
    if (!this.running) return { ...(await this.exited), forced: false };
    this.proc.kill(signal);
    const res = await withTimeout(this.exited, timeoutMs, null);
    if (res) return { ...res, forced: false };
    this.proc.kill("SIGKILL");
    return { ...(await this.exited), forced: true };
  }

  async kill() {
    return await this.stop("SIGKILL", 5_000);
  }

  /**
   * Stops this server and starts a new one on the same data dir / SQLite file / PostgreSQL and
   * token. New ports (read server.url of the result) unless `opts.samePort`: then the new
   * server binds the ports this one got from the kernel, for a long-lived client that must find
   * it at the same URL (startServer retries a few times should another process have taken one
   * in between).
   */
  async restart(opts = {}) {
    const { samePort, ...rest } = opts;
    await this.stop();
    return await startServer({
      ...this.opts,
      dataDir: this.dataDir,
      sqlitePath: this.sqlitePath,
      postgres: this.postgres,
      token: this.opts.token === null ? null : this.token,
      port: samePort ? this.port : undefined,
      tlsPort: this.opts.tlsPort ? (samePort ? this.tlsPort : true) : undefined,
      ...rest,
    });
  }
}

// ---------------------------------------------------------------------------
// CLI subcommands and certificates

/**
 * Runs `kvconnect <args...>` (e.g. `db list --json --data-dir D`) to completion.
 * Returns { code, signal, stdout, stderr, timedOut, command }.
 */
export function runKvconnect(args, { cwd, env = {}, timeoutMs = 20_000 } = {}) {
  const bin = kvconnectBin();
  const command = `kvconnect ${args.join(" ")}`;
  return new Promise((resolve) => {
    const proc = track(spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env }, cwd }));
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    proc.stdout.on("data", (d) => (stdout += d.toString("utf8")));
    proc.stderr.on("data", (d) => (stderr += d.toString("utf8")));
    proc.once("error", (e) => (stderr += `spawn error: ${e.message}\n`));
    const timer = setTimeout(() => {
      timedOut = true;
      proc.kill("SIGKILL");
    }, timeoutMs);
    proc.once("close", (code, signal) => {
      clearTimeout(timer);
      if (VERBOSE) process.stderr.write(`[${command}] code=${code}\n${stdout}${stderr}`);
      resolve({ code, signal, stdout, stderr, timedOut, command });
    });
  });
}

/** Throws unless a runKvconnect() result exited 0; returns it. */
export function expectCliOk(res, ...servers) {
  if (res.code !== 0) {
    throw annotate(new Error(
      `\`${res.command}\` failed: code=${res.code} signal=${res.signal}${res.timedOut ? " (TIMED OUT)" : ""}\n` +
        `--- stdout ---\n${res.stdout.slice(-2000)}\n--- stderr ---\n${res.stderr.slice(-4000)}`,
    ), ...servers);
  }
  return res;
}

export const MAKE_CERTS = path.resolve(E2E_DIR, "../../deploy/make-certs.sh");

/**
 * Runs deploy/make-certs.sh OUT_DIR [NAME...] (default names: localhost 127.0.0.1 ::1).
 * Returns the paths { dir, ca, caKey, cert, key } (cert = leaf + CA chain).
 */
export async function makeCerts(outDir, names = [], extraArgs = []) {
  if (!fs.existsSync(MAKE_CERTS)) throw new Error(`${MAKE_CERTS} does not exist`);
  const res = await new Promise((resolve) => {
    const proc = track(spawn("bash", [MAKE_CERTS, ...extraArgs, outDir, ...names], { stdio: ["ignore", "pipe", "pipe"] }));
    let out = "";
    proc.stdout.on("data", (d) => (out += d));
    proc.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
    proc.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
  if (res.code !== 0) throw new Error(`make-certs.sh ${outDir} failed (code ${res.code}):\n${res.out}`);
  const files = {
    dir: outDir,
    ca: path.join(outDir, "ca.pem"),
    caKey: path.join(outDir, "ca-key.pem"),
    cert: path.join(outDir, "server.pem"),
    key: path.join(outDir, "server-key.pem"),
  };
  for (const f of [files.ca, files.cert, files.key]) {
    if (!fs.existsSync(f)) throw new Error(`make-certs.sh did not write ${f}:\n${res.out}`);
  }
  return files;
}

/**
 * Runs `fn(server)` with a fresh server; on failure the server's output tail is
 * appended to the error; the server is always stopped.
 */
export async function withServer(opts, fn) {
  const server = await startServer(opts);
  try {
    return await fn(server);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
}

export function annotate(err, ...servers) {
  const tails = servers
    .filter(Boolean)
    .map((s) => `--- ${s.describe()} (last output) ---\n${s.logTail(80)}`)
    .join("\n");
  if (err instanceof Error) {
    if (!err.message.includes("--- kvconnect")) err.message += `\n${tails}`;
    return err;
  }
  return new Error(`${String(err)}\n${tails}`);
}

/**
 * A `test` whose failure carries the output tail of the server `currentServer()` returns at that
 * moment (a suite that restarts its server passes a getter of the variable holding it).
 */
export function annotatedTest(currentServer, { timeout = 120_000 } = {}) {
  return (name, fn) =>
    test(name, { timeout }, async () => {
      try {
        await fn();
      } catch (e) {
        throw annotate(e, currentServer());
      }
    });
}

// ---------------------------------------------------------------------------
// Deno scripts

export function denoEnv(extra = {}) {
  const cacheDir = path.join(E2E_DIR, ".cache", "deno");
  fs.mkdirSync(cacheDir, { recursive: true });
  const noProxy = ["127.0.0.1", "localhost", "::1", process.env.NO_PROXY ?? process.env.no_proxy]
    .filter(Boolean).join(",");
  return {
    ...process.env,
    DENO_DIR: cacheDir,
    DENO_NO_UPDATE_CHECK: "1",
    DENO_NO_PACKAGE_JSON: "1",
    NO_COLOR: "1",
    NO_PROXY: noProxy,
    no_proxy: noProxy,
    ...extra,
  };
}

/**
 * Runs a Deno script (a file name under ./deno or an absolute path).
 *   kvUrl      -> env KV_URL (server.url or a SQLite file path)
 *   token      -> env DENO_KV_ACCESS_TOKEN
 *   caFile     -> env DENO_CERT (a CA to trust for https:// URLs)
 *   env        extra environment
 *   timeoutMs  hard kill after this long (the script's own watchdog fires 5 s earlier)
 *   onStdoutLine(line)  called for every complete stdout line as it arrives
 * Returns { code, signal, stdout, stderr, summary, timedOut, proc }.
 */
export function spawnDeno(script, { kvUrl, token, caFile, env = {}, timeoutMs = 60_000, onStdoutLine } = {}) {
  const file = path.isAbsolute(script) ? script : path.join(DENO_SCRIPTS_DIR, script);
  const args = [
    "run", "--unstable-kv", "-A", "--no-prompt", "--no-check", "--no-config", "--no-lock", "--no-npm", file,
  ];
  const fullEnv = denoEnv({
    KV_SCRIPT_TIMEOUT_MS: String(Math.max(1_000, timeoutMs - 5_000)),
    ...(kvUrl !== undefined ? { KV_URL: kvUrl } : {}),
    ...(token !== undefined ? { DENO_KV_ACCESS_TOKEN: token } : {}),
    ...(caFile !== undefined ? { DENO_CERT: caFile } : {}),
    ...env,
  });
  const proc = track(spawn(denoBin(), args, { stdio: ["ignore", "pipe", "pipe"], env: fullEnv, cwd: E2E_DIR }));
  const name = path.basename(file);
  let stdout = "";
  let stderr = "";
  let partial = "";
  proc.stdout.on("data", (d) => {
    const s = d.toString("utf8");
    stdout += s;
    if (VERBOSE) process.stderr.write(`[${name} stdout] ${s}`);
    if (onStdoutLine) {
      const parts = (partial + s).split("\n");
      partial = parts.pop();
      for (const line of parts) onStdoutLine(line);
    }
  });
  proc.stderr.on("data", (d) => {
    stderr += d.toString("utf8");
    if (VERBOSE) process.stderr.write(`[${name} stderr] ${d}`);
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, timeoutMs);
  const done = new Promise((resolve) => {
    proc.once("error", (e) => {
      stderr += `spawn error: ${e.message}\n`;
    });
    proc.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, summary: parseSummary(stdout), timedOut, script: name });
    });
  });
  return { proc, done };
}

export async function runDeno(script, opts = {}) {
  return await spawnDeno(script, opts).done;
}

function parseSummary(stdout) {
  const lines = stdout.trim().split("\n").reverse();
  for (const line of lines) {
    if (!line.startsWith("{")) continue;
    try {
      return JSON.parse(line);
    } catch {
      // not JSON
    }
  }
  return null;
}

export function describeRun(res) {
  return [
    `deno ${res.script}: exit code=${res.code} signal=${res.signal}${res.timedOut ? " (TIMED OUT, killed)" : ""}`,
    `--- stdout ---\n${res.stdout.slice(-4000)}`,
    `--- stderr ---\n${res.stderr.slice(-6000)}`,
  ].join("\n");
}

/** Throws unless the script exited 0 with an {ok:true} summary; returns the summary. */
export function expectDenoOk(res, ...servers) {
  if (res.code !== 0 || !res.summary || res.summary.ok !== true) {
    throw annotate(new Error(`Deno script failed.\n${describeRun(res)}`), ...servers);
  }
  return res.summary;
}

/** Throws unless the script failed (non-zero exit). */
export function expectDenoFailure(res, ...servers) {
  if (res.code === 0) {
    throw annotate(new Error(`Deno script was expected to fail but succeeded.\n${describeRun(res)}`), ...servers);
  }
  return res;
}

// ---------------------------------------------------------------------------
// Browser tests (console*.test.mjs)

/** Debian's Chromium, driven by playwright-core (CHROMIUM_BIN overrides). */
export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";

/**
 * Why a browser test file must skip (false when it can run), printed once under `name`: it needs
 * the server (not E2E_LOCAL_BACKEND) and Chromium.
 */
export function browserSkip(name) {
  const skip = LOCAL_BACKEND
    ? "needs the server"
    : !fs.existsSync(CHROMIUM)
      ? `Chromium is not installed at ${CHROMIUM} (Debian: apt-get install chromium; ` +
        "deploy/dev.sh deps installs it)"
      : false;
  if (skip && !LOCAL_BACKEND) console.log(`# ${name} skipped: ${skip}`);
  return skip;
}

/** waitFor with the browser tests' argument order: `what` first, then the condition. */
export const until = (what, fn, ms = 15_000) => waitFor(fn, { timeoutMs: ms, intervalMs: 50, what });

// A module of the web console (src/console/NAME), imported into Node. The console's files are
// ES modules served to browsers as `.js`; a Node before 20.19 (Debian 12 has 18) reads a `.js`
// file outside a `"type": "module"` package as CommonJS. So they are imported from a copy of the
// folder marked as ES modules, made once per process: byte for byte the same code.
let consoleCopy = null;
export async function importConsoleModule(name) {
  if (!consoleCopy) {
    const source = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "src", "console");
    consoleCopy = fs.mkdtempSync(path.join(os.tmpdir(), "kvc-console-modules-"));
    for (const file of fs.readdirSync(source).filter((n) => n.endsWith(".js"))) {
      fs.copyFileSync(path.join(source, file), path.join(consoleCopy, file));
    }
    fs.writeFileSync(path.join(consoleCopy, "package.json"), JSON.stringify({ type: "module" }));
    const dir = consoleCopy;
    process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
  }
  return import(pathToFileURL(path.join(consoleCopy, name)).href);
}
