#!/usr/bin/env node
// Soak test: many HTTP/2 connections holding many watch streams, a steady writer, and
// clients that keep vanishing, for a bounded time against one `kvconnect serve`.
//
// * C connections (default 1000, node:http2, h2c prior knowledge on 127.0.0.1), each
//   after its own metadata exchange, each holding W watch streams (default 10) on 1-3 of
//   K keys (default 500);
// * a writer sets random keys (atomic_write, one M_SET, VE_BYTES value = write sequence
//   number) at R writes/s (default 200) over a few connections of its own; every watch
//   frame is decoded and checked (status, one entry per key, keys, versionstamps only
//   grow), and for each key whose versionstamp moved, the time from sending that write to
//   receiving the frame is recorded (change-to-frame latency);
// * churn: connections are destroyed abruptly (TCP FIN or RST) with their watches open,
//   or in the middle of a request (HEADERS + part of a DATA body, then the socket goes),
//   and single streams are cancelled (RST_STREAM CANCEL) before or after the answer or in
//   the middle of a request body; every lost connection / stream is replaced, so the
//   totals stay near C and C*W;
// * every 5 s: the server's RSS and open fds, its CPU, and the client's counts;
// * at the end: writer and churn stop, every watch must show the last acknowledged write
//   of each of its keys, all clients are closed, and then the server must still answer a
//   metadata exchange and a read (of the last value written), its open fds must be back
//   near the idle baseline, its RSS must not grow over the last third of the run, and
//   nothing may have gone wrong that the test did not cause itself.
//
// Runs under `node --test` (tests/soak/soak.test.mjs; options from the environment) or as
// a CLI:  KVCONNECT_BIN=build/kvconnect node tests/soak/soak.mjs --seconds 60
// See README.md in this directory.
import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import path from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { removeTempDirs, sleep, startServer } from "../e2e/harness.mjs";
import { prng } from "../e2e/prng.mjs";
import { H2, metadata, dataPath } from "../e2e/raw_client.mjs";

const { NGHTTP2_CANCEL } = http2.constants;

// ---------------------------------------------------------------------------
// Options

export const OPTIONS = {
  seconds: { env: "SOAK_SECONDS", def: 600, min: 1, help: "duration of the load phase, s" },
  connections: { env: "SOAK_CONNECTIONS", def: 1000, min: 1, help: "watching connections held" },
  "watches-per-conn": { env: "SOAK_WATCHES_PER_CONN", def: 10, min: 1, help: "watch streams per connection" },
  keys: { env: "SOAK_KEYS", def: 500, min: 3, help: "keys watched and written" },
  "writes-per-sec": { env: "SOAK_WRITES_PER_SEC", def: 200, min: 0, help: "writer rate" },
  "writer-conns": { env: "SOAK_WRITER_CONNS", def: 4, min: 1, help: "connections the writer uses" },
  "churn-per-sec": { env: "SOAK_CHURN_PER_SEC", def: 10, min: 0, help: "connections destroyed per second" },
  "cancels-per-sec": { env: "SOAK_CANCELS_PER_SEC", def: 20, min: 0, help: "single streams cancelled per second" },
  "sample-ms": { env: "SOAK_SAMPLE_MS", def: 5000, min: 100, help: "sampling interval, ms" },
  "connect-concurrency": { env: "SOAK_CONNECT_CONCURRENCY", def: 50, min: 1, help: "connection set-ups in flight" },
  "fd-margin": { env: "SOAK_FD_MARGIN", def: 5, min: 0, help: "allowed open fds above the idle baseline at the end" },
  "rss-margin-mib": { env: "SOAK_RSS_MARGIN_MIB", def: 8, min: 0, help: "absolute RSS growth allowed (plus 10%)" },
  seed: { env: "SOAK_SEED", def: undefined, min: 0, help: "PRNG seed (default: random, printed)" },
};

export function usage() {
  const lines = ["usage: node tests/soak/soak.mjs [options]   (needs KVCONNECT_BIN)", ""];
  for (const [name, o] of Object.entries(OPTIONS)) {
    lines.push(`  --${name.padEnd(20)} ${o.help}; env ${o.env}${o.def !== undefined ? `, default ${o.def}` : ""}`);
  }
  return lines.join("\n");
}

export function resolveOptions(argv = [], env = process.env) {
  const spec = { help: { type: "boolean", short: "h" } };
  for (const name of Object.keys(OPTIONS)) spec[name] = { type: "string" };
  const { values } = parseArgs({ args: argv, options: spec, strict: true, allowPositionals: false });
  if (values.help) return { help: true };
  const out = {};
  for (const [name, o] of Object.entries(OPTIONS)) {
    const raw = values[name] ?? env[o.env];
    if (raw === undefined || raw === "") {
      out[name] = o.def;
      continue;
    }
    const n = Number(raw);
    if (!Number.isFinite(n) || n < o.min) throw new Error(`--${name} (${o.env}) must be a number >= ${o.min}, got ${raw}`);
    out[name] = n;
  }
  if (out.seed === undefined) out.seed = Math.floor(Math.random() * 2 ** 31);
  return out;
}

/** How long a run may take before its watchdog ends the process. */
export function watchdogMs(opts) {
  return opts.seconds * 1000 + 240_000;
}

// ---------------------------------------------------------------------------
// Small helpers: protobuf by hand, tuple keys, /proc

function varint(n) {
  const out = [];
  while (n > 127) {
    out.push((n % 128) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}
const lenField = (no, buf) => Buffer.concat([varint((no << 3) | 2), varint(buf.length), buf]);
const varField = (no, n) => Buffer.concat([varint(no << 3), varint(n)]);

/** Protobuf fields of `buf` as [fieldNo, wireType, value] (LEN values are subarrays). */
export function pbFields(buf) {
  const out = [];
  let off = 0;
  const readVarint = () => {
    let n = 0;
    let mul = 1;
    for (;;) {
      if (off >= buf.length) throw new Error("truncated varint");
      const b = buf[off++];
      n += (b & 127) * mul;
      if (b < 128) return n;
      mul *= 128;
      if (mul > 2 ** 63) throw new Error("varint too long");
    }
  };
  while (off < buf.length) {
    const tag = readVarint();
    const no = Math.floor(tag / 8);
    const wt = tag & 7;
    if (wt === 0) out.push([no, wt, readVarint()]);
    else if (wt === 2) {
      const len = readVarint();
      if (off + len > buf.length) throw new Error("truncated field");
      out.push([no, wt, buf.subarray(off, off + len)]);
      off += len;
    } else if (wt === 1) {
      off += 8;
      out.push([no, wt, null]);
    } else if (wt === 5) {
      off += 4;
      out.push([no, wt, null]);
    } else throw new Error(`wire type ${wt}`);
  }
  if (off !== buf.length) throw new Error("truncated fixed field");
  return out;
}

/** Deno KV tuple encoding of ["soak", "k<i>"]. */
export function soakKey(i) {
  return Buffer.concat([Buffer.from([2]), Buffer.from("soak"), Buffer.from([0, 2]), Buffer.from(`k${i}`), Buffer.from([0])]);
}

/** Watch{ keys: [WatchKey{key}] } */
export function watchBody(keys) {
  return Buffer.concat(keys.map((k) => lenField(1, lenField(1, k))));
}

/** AtomicWrite{ mutations: [Mutation{key, value: KvValue{data, VE_BYTES}, M_SET}] } */
export function setBody(key, data) {
  const value = Buffer.concat([lenField(1, data), varField(2, 3)]);
  return lenField(2, Buffer.concat([lenField(1, key), lenField(2, value), varField(3, 1)]));
}

/** SnapshotRead{ ranges: [ReadRange{start: key, end: key||00, limit: 1}] } */
export function getBody(key) {
  return lenField(1, Buffer.concat([lenField(1, key), lenField(2, Buffer.concat([key, Buffer.from([0])])), varField(3, 1)]));
}

/** KvEntry -> {key, value, encoding, versionstamp} */
export function decodeEntry(buf) {
  const e = { key: null, value: Buffer.alloc(0), encoding: 0, versionstamp: null };
  for (const [no, wt, v] of pbFields(buf)) {
    if (no === 1 && wt === 2) e.key = v;
    else if (no === 2 && wt === 2) e.value = v;
    else if (no === 3 && wt === 0) e.encoding = v;
    else if (no === 4 && wt === 2) e.versionstamp = v;
  }
  return e;
}

/** WatchOutput -> {status, keys: [{changed, entry}]} */
export function decodeWatchOutput(buf) {
  const out = { status: 0, keys: [] };
  for (const [no, wt, v] of pbFields(buf)) {
    if (no === 1 && wt === 0) out.status = v;
    else if (no === 2 && wt === 2) {
      const k = { changed: false, entry: null };
      for (const [n2, w2, v2] of pbFields(v)) {
        if (n2 === 1 && w2 === 0) k.changed = v2 !== 0;
        else if (n2 === 2 && w2 === 2) k.entry = decodeEntry(v2);
      }
      out.keys.push(k);
    }
  }
  return out;
}

/** AtomicWriteOutput -> {status, versionstamp} */
export function decodeWriteOutput(buf) {
  const out = { status: 0, versionstamp: null };
  for (const [no, wt, v] of pbFields(buf)) {
    if (no === 1 && wt === 0) out.status = v;
    else if (no === 2 && wt === 2) out.versionstamp = v;
  }
  return out;
}

/** SnapshotReadOutput -> {status, ranges: [[entry...]]} */
export function decodeReadOutput(buf) {
  const out = { status: 0, ranges: [] };
  for (const [no, wt, v] of pbFields(buf)) {
    if (no === 8 && wt === 0) out.status = v;
    else if (no === 1 && wt === 2) {
      out.ranges.push(pbFields(v).filter(([n2, w2]) => n2 === 1 && w2 === 2).map(([, , v2]) => decodeEntry(v2)));
    }
  }
  return out;
}

const CLK_TCK = (() => {
  const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
  const n = Number(r.stdout?.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

/** RSS (bytes), open fds and CPU seconds of process `pid` from /proc; null if gone. */
export function procSample(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const m = /VmRSS:\s+(\d+) kB/.exec(status);
    const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cpu = (Number(f[11]) + Number(f[12])) / CLK_TCK; // utime + stime (fields 14, 15)
    return { rss: m ? Number(m[1]) * 1024 : NaN, fds, cpu };
  } catch {
    return null;
  }
}

/** [soft, hard] open-file limits of `pid` (Infinity for "unlimited"), or null. */
function openFileLimits(pid) {
  try {
    const m = /Max open files\s+(\S+)\s+(\S+)/.exec(fs.readFileSync(`/proc/${pid}/limits`, "utf8"));
    const num = (x) => (x === "unlimited" ? Infinity : Number(x));
    return m ? [num(m[1]), num(m[2])] : null;
  } catch {
    return null;
  }
}

function openFileLimit(pid) {
  const l = openFileLimits(pid);
  return l ? `${l[0]} (hard ${l[1]})` : "?";
}

/** Latency histogram, 0.1 ms buckets up to 30 s (the rest counted in the last bucket). */
class Hist {
  constructor() {
    this.b = new Uint32Array(300_001);
    this.n = 0;
    this.max = 0;
  }
  add(ms) {
    const i = Math.min(this.b.length - 1, Math.max(0, Math.round(ms * 10)));
    this.b[i]++;
    this.n++;
    if (ms > this.max) this.max = ms;
  }
  q(p) {
    if (!this.n) return NaN;
    const want = Math.ceil(p * this.n);
    let acc = 0;
    for (let i = 0; i < this.b.length; i++) {
      acc += this.b[i];
      if (acc >= want) return i / 10;
    }
    return this.max;
  }
  reset() {
    this.b.fill(0);
    this.n = 0;
    this.max = 0;
  }
}

const MiB = 1024 * 1024;
const fmtMiB = (b) => (b / MiB).toFixed(1);
const fmtMs = (ms) => (Number.isFinite(ms) ? ms.toFixed(1) : "-");
const SEQ_RING = 1 << 18;

// ---------------------------------------------------------------------------
// The run

class SoakRun {
  constructor(opts, out) {
    this.opts = opts;
    this.out = out;
    this.rand = prng(opts.seed);
    this.keys = Array.from({ length: opts.keys }, (_, i) => soakKey(i));
    this.phase = "starting";
    this.stopping = false; // no more churn, writes or replacements
    this.closing = false; // everything from now on is our own doing
    this.conns = new Array(opts.connections).fill(null);
    this.writers = [];
    this.connectQueue = [];
    this.connecting = 0;
    // what the writer acknowledged: per key the greatest versionstamp (hex) and its seq
    this.ackedVs = new Array(opts.keys).fill(null);
    this.ackedSeq = new Array(opts.keys).fill(-1);
    this.sendTime = new Float64Array(SEQ_RING);
    this.sendSeq = new Int32Array(SEQ_RING).fill(-1);
    this.seq = 0;
    this.writesInFlight = 0;
    this.latAll = new Hist();
    this.latTick = new Hist();
    this.writeLat = new Hist();
    this.c = {
      connsOpened: 0, connsChurned: 0, metadata: 0, watchesOpened: 0, cancels: 0, partialRequests: 0,
      frames: 0, keepalives: 0, writes: 0, writesSkipped: 0, framesForLatency: 0,
    };
    this.churnKinds = {};
    this.cancelKinds = {};
    this.unexpected = new Map(); // kind -> count
    this.unexpectedSamples = [];
    this.caused = new Map(); // kind -> count: errors we provoked (destroyed sockets, cancels)
    this.samples = [];
    this.serverLog = { warn: 0, error: 0, critical: 0, samples: [] };
    this.loopDelay = monitorEventLoopDelay({ resolution: 10 });
  }

  // --- bookkeeping -------------------------------------------------------

  bump(map, kind, n = 1) {
    map.set(kind, (map.get(kind) ?? 0) + n);
  }

  unexpectedError(kind, detail) {
    this.bump(this.unexpected, kind);
    if (this.unexpectedSamples.length < 40) {
      const line = `${((performance.now() - (this.t0 ?? performance.now())) / 1000).toFixed(1)} s ${kind}${detail ? `: ${detail}` : ""}`;
      this.unexpectedSamples.push(line);
      this.out(`soak: UNEXPECTED ${line}`);
    }
  }

  causedError(kind) {
    this.bump(this.caused, kind);
  }

  get unexpectedTotal() {
    let n = 0;
    for (const v of this.unexpected.values()) n += v;
    return n;
  }

  get causedTotal() {
    let n = 0;
    for (const v of this.caused.values()) n += v;
    return n;
  }

  watchStats() {
    let conns = 0;
    let open = 0;
    let pending = 0;
    for (const c of this.conns) {
      if (!c || !c.ready || c.dead) continue;
      conns++;
      for (const w of c.watches) {
        if (w.state === "open") open++;
        else if (w.state === "pending") pending++;
      }
    }
    return { conns, open, pending };
  }

  // --- connections ---------------------------------------------------------

  /** A raw TCP socket we can destroy (FIN) or reset (RST) ourselves, under an h2 session. */
  connectSession() {
    const sock = net.connect({ host: "127.0.0.1", port: this.server.port });
    sock.setNoDelay(true);
    const session = http2.connect(this.server.url, { createConnection: () => sock });
    return { sock, session };
  }

  async sessionReady(session, sock) {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("connect timed out after 10 s")), 10_000);
      session.once("connect", () => {
        clearTimeout(timer);
        resolve();
      });
      session.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
      sock.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  }

  /** Queues the (re)connection of slot `i` behind the connect-concurrency limit. */
  scheduleConnect(i, delayMs = 0) {
    const go = () => {
      if (this.stopping) return;
      this.connectQueue.push(i);
      this.pumpConnects();
    };
    if (delayMs > 0) setTimeout(go, delayMs);
    else go();
  }

  pumpConnects() {
    while (this.connecting < this.opts["connect-concurrency"] && this.connectQueue.length && !this.stopping) {
      const i = this.connectQueue.shift();
      this.connecting++;
      this.openConn(i).finally(() => {
        this.connecting--;
        this.pumpConnects();
      });
    }
  }

  async openConn(slot) {
    const conn = { slot, ready: false, dead: false, killed: false, watches: new Set(), meta: null, prefix: null };
    this.conns[slot] = conn;
    const { sock, session } = this.connectSession();
    conn.sock = sock;
    conn.session = session;
    const h2 = new H2(session, this.server.url); // its listeners swallow session errors
    session.on("error", (e) => {
      if (conn.killed || this.closing) this.causedError(`session error after our kill: ${e.code ?? e.message}`);
      else if (conn.ready) this.unexpectedError("session-error", e.code ?? e.message);
    });
    sock.on("error", (e) => {
      if (conn.killed || this.closing) this.causedError(`socket error after our kill: ${e.code ?? e.message}`);
    });
    session.on("goaway", (code) => {
      if (!conn.killed && !this.closing) this.unexpectedError("goaway", `code ${code}`);
    });
    session.on("close", () => this.onConnClosed(conn));
    try {
      await this.sessionReady(session, sock);
      this.c.connsOpened++;
      const res = await metadata(h2, this.server.token);
      if (res.status !== 200 || !res.json?.token) {
        if (!conn.killed && !this.closing) this.unexpectedError(`metadata-${res.status ?? res.error}`, res.text?.slice(0, 120));
        this.kill(conn, "fin", false);
        return;
      }
      this.c.metadata++;
      conn.meta = res.json;
      const ep = res.json.endpoints.find((e) => e.consistency === "strong") ?? res.json.endpoints[0];
      conn.prefix = new URL(ep.url, `${this.server.url}/`).pathname.replace(/\/$/, "");
      conn.ready = true;
      for (let k = 0; k < this.opts["watches-per-conn"]; k++) this.openWatch(conn);
    } catch (e) {
      if (!conn.killed && !this.closing && !this.stopping) this.unexpectedError("connect", e.code ?? e.message);
      this.kill(conn, "fin", false);
    }
  }

  onConnClosed(conn) {
    if (conn.dead) return;
    conn.dead = true;
    for (const w of conn.watches) w.state = "closed";
    conn.watches.clear();
    if (!conn.killed && !this.closing && conn.ready) this.unexpectedError("connection-closed", `slot ${conn.slot}`);
    if (this.conns[conn.slot] === conn && !this.stopping) {
      this.scheduleConnect(conn.slot, conn.killed ? Math.floor(this.rand() * 1000) : 1000);
    }
  }

  /** Ends a connection abruptly: "fin" (close the socket) or "rst" (TCP reset). */
  kill(conn, how, churn = true) {
    if (conn.killed) return;
    conn.killed = true;
    if (churn) this.c.connsChurned++;
    for (const w of conn.watches) w.cancelled = true;
    if (how === "rst" && typeof conn.sock.resetAndDestroy === "function") conn.sock.resetAndDestroy();
    else conn.sock.destroy();
    // node:http2 notices the dead socket on its own; make sure the session goes too
    setImmediate(() => {
      if (!conn.session.destroyed) conn.session.destroy();
    });
  }

  dataHeaders(conn, method, extra = {}) {
    return {
      ":method": "POST",
      ":path": `${conn.prefix}/${method}`,
      authorization: `Bearer ${conn.meta.token}`,
      "x-denokv-version": String(conn.meta.version),
      "x-denokv-database-id": conn.meta.databaseId,
      "content-type": "application/x-protobuf",
      ...extra,
    };
  }

  // --- watches -------------------------------------------------------------

  openWatch(conn) {
    if (conn.dead || conn.killed || this.stopping) return;
    const n = 1 + Math.floor(this.rand() * 3);
    const idx = [];
    while (idx.length < n) {
      const k = Math.floor(this.rand() * this.opts.keys);
      if (!idx.includes(k)) idx.push(k);
    }
    const w = {
      conn, idx, keys: idx.map((k) => this.keys[k]), lastVs: new Array(n).fill(undefined), state: "pending",
      cancelled: false, frames: 0, pendingBuf: null, openedAt: performance.now(), lastRecvAt: performance.now(), flagged: false,
    };
    let stream;
    try {
      stream = conn.session.request(this.dataHeaders(conn, "watch"), { endStream: false });
    } catch (e) {
      if (!conn.killed && !this.closing) this.unexpectedError("watch-request", e.code ?? e.message);
      return;
    }
    w.stream = stream;
    conn.watches.add(w);
    this.c.watchesOpened++;
    stream.on("response", (h) => {
      const status = h[":status"];
      if (status === 200) {
        w.state = "open";
        return;
      }
      const chunks = [];
      stream.on("data", (d) => chunks.push(d));
      stream.on("end", () => {
        if (!w.cancelled && !conn.killed && !this.closing) {
          this.unexpectedError(`watch-status-${status}`, Buffer.concat(chunks).toString("utf8").slice(0, 120));
        }
      });
      w.state = "failed";
    });
    stream.on("data", (d) => {
      if (w.state === "open") this.onWatchData(w, d);
    });
    stream.on("error", (e) => {
      if (w.cancelled || conn.killed || this.closing) this.causedError(`watch stream error after our kill/cancel: ${e.code ?? e.message}`);
      else this.unexpectedError("watch-stream-error", `${e.code ?? e.message} rst=${stream.rstCode}`);
    });
    stream.on("close", () => {
      const wasState = w.state;
      w.state = "closed";
      conn.watches.delete(w);
      if (w.cancelled || conn.killed || this.closing || conn.dead) {
        if (!this.closing) this.causedError(w.cancelled && !conn.killed ? "watch closed by our RST_STREAM" : "watch lost with a connection we destroyed");
        return;
      }
      if (wasState !== "failed") this.unexpectedError("watch-ended", `rst=${stream.rstCode} after ${w.frames} frames`);
      // keep the total up
      if (!this.stopping) setTimeout(() => this.openWatch(conn), 1000);
    });
    stream.end(watchBody(w.keys));
  }

  onWatchData(w, chunk) {
    const now = performance.now();
    w.lastRecvAt = now;
    let buf = w.pendingBuf ? Buffer.concat([w.pendingBuf, chunk]) : chunk;
    let off = 0;
    while (buf.length - off >= 4) {
      const len = buf.readUInt32LE(off);
      if (len > 16 * MiB) {
        this.unexpectedError("frame-too-large", `${len} bytes`);
        this.cancelWatch(w, "bad frame");
        return;
      }
      if (buf.length - off - 4 < len) break;
      if (len === 0) this.c.keepalives++;
      else this.onFrame(w, buf.subarray(off + 4, off + 4 + len), now);
      off += 4 + len;
    }
    w.pendingBuf = off < buf.length ? Buffer.from(buf.subarray(off)) : null;
  }

  onFrame(w, payload, now) {
    this.c.frames++;
    const first = w.frames === 0;
    w.frames++;
    let msg;
    try {
      msg = decodeWatchOutput(payload);
    } catch (e) {
      this.unexpectedError("frame-undecodable", e.message);
      return;
    }
    if (msg.status !== 1) this.unexpectedError("frame-status", `status ${msg.status}`);
    if (msg.keys.length !== w.keys.length) {
      this.unexpectedError("frame-key-count", `${msg.keys.length} entries for ${w.keys.length} keys`);
      return;
    }
    for (let i = 0; i < msg.keys.length; i++) {
      const k = msg.keys[i];
      if (!k.changed) {
        if (first) this.unexpectedError("frame-first-unchanged");
        continue;
      }
      const e = k.entry;
      let vs = null;
      if (e) {
        if (!e.key || !e.key.equals(w.keys[i])) {
          this.unexpectedError("frame-wrong-key");
          continue;
        }
        if (!e.versionstamp || e.versionstamp.length !== 10) {
          this.unexpectedError("frame-bad-versionstamp");
          continue;
        }
        vs = e.versionstamp.toString("hex");
      }
      const prev = w.lastVs[i];
      if (vs === prev) continue;
      if (prev && (vs === null || vs < prev)) {
        this.unexpectedError("frame-versionstamp-went-back", `${prev} -> ${vs}`);
      }
      w.lastVs[i] = vs;
      if (!first && vs !== null && e.value.length >= 4 && e.encoding === 3) {
        const seq = e.value.readUInt32LE(0);
        const slot = seq % SEQ_RING;
        if (this.sendSeq[slot] === seq) {
          const ms = now - this.sendTime[slot];
          this.latAll.add(ms);
          this.latTick.add(ms);
          this.c.framesForLatency++;
        }
      }
    }
  }

  cancelWatch(w, why) {
    if (w.state === "closed") return;
    w.cancelled = true;
    try {
      w.stream.close(NGHTTP2_CANCEL);
    } catch {
      // already gone
    }
  }

  // --- writer --------------------------------------------------------------

  async openWriters() {
    for (let i = 0; i < this.opts["writer-conns"]; i++) {
      const { sock, session } = this.connectSession();
      const h2 = new H2(session, this.server.url);
      await this.sessionReady(session, sock);
      const meta = await metadata(h2, this.server.token);
      if (meta.status !== 200) throw new Error(`writer metadata: ${meta.status} ${meta.text}`);
      const w = { h2, meta: meta.json, dead: false };
      session.on("close", () => {
        w.dead = true;
        if (!this.closing) this.unexpectedError("writer-connection-closed");
      });
      this.writers.push(w);
    }
  }

  writerTick() {
    if (this.stopping) return;
    const now = performance.now();
    const due = Math.floor(((now - this.writeStart) / 1000) * this.opts["writes-per-sec"]);
    while (this.c.writes + this.c.writesSkipped < due) {
      if (this.writesInFlight >= 500) {
        this.c.writesSkipped++; // the server is behind; do not pile up
        continue;
      }
      this.write();
    }
  }

  write() {
    const seq = this.seq++;
    const k = Math.floor(this.rand() * this.opts.keys);
    const data = Buffer.alloc(8);
    data.writeUInt32LE(seq, 0);
    const writer = this.writers[seq % this.writers.length];
    const slot = seq % SEQ_RING;
    this.sendSeq[slot] = seq;
    const t = performance.now();
    this.sendTime[slot] = t;
    this.c.writes++;
    this.writesInFlight++;
    dataPath(writer.h2, writer.meta, "atomic_write", setBody(this.keys[k], data), { timeoutMs: 15_000 }).then((res) => {
      this.writesInFlight--;
      if (res.status !== 200) {
        if (!this.closing) this.unexpectedError(`write-${res.status ?? res.error}`, res.text?.slice(0, 120));
        return;
      }
      this.writeLat.add(performance.now() - t);
      let out;
      try {
        out = decodeWriteOutput(res.body);
      } catch (e) {
        this.unexpectedError("write-undecodable", e.message);
        return;
      }
      if (out.status !== 1 || !out.versionstamp || out.versionstamp.length !== 10) {
        this.unexpectedError("write-status", `status ${out.status}`);
        return;
      }
      const vs = out.versionstamp.toString("hex");
      if (this.ackedVs[k] === null || vs > this.ackedVs[k]) {
        this.ackedVs[k] = vs;
        this.ackedSeq[k] = seq;
      }
    });
  }

  // --- churn ---------------------------------------------------------------

  randomConn() {
    for (let tries = 0; tries < 20; tries++) {
      const c = this.conns[Math.floor(this.rand() * this.conns.length)];
      if (c && c.ready && !c.dead && !c.killed && !c.doomed) return c;
    }
    return null;
  }

  churnTick(dtMs) {
    if (this.stopping) return;
    this.churnBudget += (dtMs / 1000) * this.opts["churn-per-sec"];
    this.cancelBudget += (dtMs / 1000) * this.opts["cancels-per-sec"];
    while (this.churnBudget >= 1) {
      this.churnBudget--;
      const conn = this.randomConn();
      if (!conn) break;
      const r = this.rand();
      if (r < 1 / 3) this.churn(conn, "destroy with open watches (FIN)", () => this.kill(conn, "fin"));
      else if (r < 2 / 3) this.churn(conn, "destroy with open watches (RST)", () => this.kill(conn, "rst"));
      else this.churnMidRequest(conn);
    }
    while (this.cancelBudget >= 1) {
      this.cancelBudget--;
      const conn = this.randomConn();
      if (!conn) break;
      const r = this.rand();
      if (r < 0.7) {
        const open = [...conn.watches].filter((w) => w.state === "open");
        if (!open.length) continue;
        const w = open[Math.floor(this.rand() * open.length)];
        this.countCancel("watch with frames flowing");
        this.cancelWatch(w, "established");
        this.openWatch(conn);
      } else if (r < 0.85) {
        // a new watch, reset before (or just as) its answer arrives
        this.openWatch(conn);
        const w = [...conn.watches].pop();
        if (!w || w.state !== "pending") continue;
        this.countCancel("watch before its answer");
        setImmediate(() => this.cancelWatch(w, "before answer"));
      } else {
        this.countCancel("request with half its body");
        this.partialRequest(conn, (st) => st.close(NGHTTP2_CANCEL));
      }
    }
  }

  countCancel(kind) {
    this.c.cancels++;
    this.cancelKinds[kind] = (this.cancelKinds[kind] ?? 0) + 1;
  }

  churn(conn, kind, fn) {
    this.churnKinds[kind] = (this.churnKinds[kind] ?? 0) + 1;
    fn();
  }

  /** HEADERS (content-length of the whole body) + part of the DATA; `then(stream)` later. */
  partialRequest(conn, then) {
    const write = this.rand() < 0.5;
    const body = write ? setBody(this.keys[0], Buffer.alloc(64, 1)) : watchBody([this.keys[1], this.keys[2]]);
    let st;
    try {
      st = conn.session.request(
        this.dataHeaders(conn, write ? "atomic_write" : "watch", { "content-length": String(body.length) }),
        { endStream: false },
      );
    } catch {
      return;
    }
    this.c.partialRequests++;
    let mine = false;
    st.on("error", (e) => {
      if (mine || conn.killed || this.closing) this.causedError(`half-sent request error after our kill/cancel: ${e.code ?? e.message}`);
      else this.unexpectedError("partial-request-error", e.code ?? e.message);
    });
    st.on("response", (h) => {
      // the server must not answer a request whose body has not arrived
      if (!mine && !conn.killed) this.unexpectedError("partial-request-answered", `status ${h[":status"]}`);
    });
    st.write(body.subarray(0, 1 + Math.floor(this.rand() * (body.length - 2))));
    setTimeout(() => {
      mine = true;
      if (!st.destroyed) then(st);
    }, 10 + Math.floor(this.rand() * 190));
  }

  churnMidRequest(conn) {
    const rst = this.rand() < 0.5;
    this.churn(conn, `destroy mid-request (${rst ? "RST" : "FIN"})`, () => {
      this.partialRequest(conn, () => this.kill(conn, rst ? "rst" : "fin"));
      // count the connection as going now so that it is not picked twice
      conn.doomed = true;
    });
  }

  // --- sampling --------------------------------------------------------------

  sample(final = false) {
    const now = performance.now();
    const t = (now - this.t0) / 1000;
    const p = procSample(this.server.proc.pid);
    const ws = this.watchStats();
    const dt = (now - (this.lastTick?.at ?? this.t0)) / 1000;
    const cpu = process.cpuUsage();
    const cliCpu = this.lastTick ? ((cpu.user + cpu.system - this.lastTick.cliCpu) / 1e6 / dt) * 100 : NaN;
    const srvCpu = p && this.lastTick?.srvCpu !== undefined ? ((p.cpu - this.lastTick.srvCpu) / dt) * 100 : NaN;
    const frames = this.c.frames;
    const writes = this.c.writes;
    const row = {
      t, rss: p?.rss ?? NaN, fds: p?.fds ?? NaN, srvCpu, cliCpu, conns: ws.conns, open: ws.open, pending: ws.pending,
      frames, framesPerSec: (frames - (this.lastTick?.frames ?? 0)) / dt, writes,
      writesPerSec: (writes - (this.lastTick?.writes ?? 0)) / dt, churned: this.c.connsChurned, cancels: this.c.cancels,
      p50: this.latTick.q(0.5), p99: this.latTick.q(0.99), unexpected: this.unexpectedTotal, caused: this.causedTotal,
      lagP99: this.loopDelay.percentile(99) / 1e6,
    };
    this.lastTick = { at: now, cliCpu: cpu.user + cpu.system, srvCpu: p?.cpu, frames, writes };
    this.latTick.reset();
    this.loopDelay.reset();
    if (!final) this.samples.push(row);
    this.printRow(row, final);
    // stalled watches: nothing (not even a keep-alive) for 15 s, or no answer for 15 s
    if (!this.stopping) {
      for (const c of this.conns) {
        if (!c || c.dead || c.killed) continue;
        for (const w of c.watches) {
          if (w.flagged || w.cancelled) continue;
          if (w.state === "open" && now - w.lastRecvAt > 15_000) {
            w.flagged = true;
            this.unexpectedError("watch-stalled", `no frame or keep-alive for ${((now - w.lastRecvAt) / 1000).toFixed(1)} s`);
          } else if (w.state === "pending" && now - w.openedAt > 15_000) {
            w.flagged = true;
            this.unexpectedError("watch-unanswered", `no answer after ${((now - w.openedAt) / 1000).toFixed(1)} s`);
          }
        }
      }
    }
    return row;
  }

  printHeader() {
    this.out(
      "soak:   t_s  rss_MiB   fds  srv_cpu%  cli_cpu%  conns  watches  pending     frames  frames/s   writes  writes/s  churned  cancels  lat_p50  lat_p99  loop_p99  unexp  caused",
    );
  }

  printRow(r, final) {
    const pad = (v, n) => String(v).padStart(n);
    this.out(
      `soak: ${pad(final ? "end" : r.t.toFixed(0), 5)} ${pad(fmtMiB(r.rss), 8)} ${pad(r.fds, 5)} ${pad(Number.isFinite(r.srvCpu) ? r.srvCpu.toFixed(0) : "-", 9)} ` +
        `${pad(Number.isFinite(r.cliCpu) ? r.cliCpu.toFixed(0) : "-", 9)} ${pad(r.conns, 6)} ${pad(r.open, 8)} ${pad(r.pending, 8)} ` +
        `${pad(r.frames, 10)} ${pad(r.framesPerSec.toFixed(0), 9)} ${pad(r.writes, 8)} ${pad(r.writesPerSec.toFixed(0), 9)} ` +
        `${pad(r.churned, 8)} ${pad(r.cancels, 8)} ${pad(fmtMs(r.p50), 8)} ${pad(fmtMs(r.p99), 8)} ${pad(fmtMs(r.lagP99), 9)} ` +
        `${pad(r.unexpected, 6)} ${pad(r.caused, 7)}`,
    );
  }

  watchServerLog() {
    let partial = "";
    const onData = (d) => {
      const parts = (partial + d.toString("utf8")).split("\n");
      partial = parts.pop();
      for (const line of parts) {
        const m = /^\S+ (warn|warning|error|critical|err)\b/.exec(line);
        if (!m) continue;
        const level = m[1].startsWith("warn") ? "warn" : m[1] === "critical" ? "critical" : "error";
        this.serverLog[level]++;
        if (this.serverLog.samples.length < 20) this.serverLog.samples.push(line);
      }
    };
    this.server.proc.stdout.on("data", onData);
    this.server.proc.stderr.on("data", onData);
  }

  // --- end checks --------------------------------------------------------------

  /** One fresh connection: metadata exchange + read of the key written last. */
  async probe() {
    const { sock, session } = this.connectSession();
    const h2 = new H2(session, this.server.url);
    try {
      await this.sessionReady(session, sock);
      const meta = await metadata(h2, this.server.token);
      if (meta.status !== 200 || !meta.json?.token) return { ok: false, why: `metadata answered ${meta.status ?? meta.error}: ${meta.text}` };
      let k = 0;
      for (let i = 0; i < this.opts.keys; i++) if (this.ackedSeq[i] > this.ackedSeq[k]) k = i;
      const res = await dataPath(h2, meta.json, "snapshot_read", getBody(this.keys[k]));
      if (res.status !== 200) return { ok: false, why: `snapshot_read answered ${res.status ?? res.error}: ${res.text}` };
      const out = decodeReadOutput(res.body);
      const e = out.ranges[0]?.[0];
      if (out.status !== 1) return { ok: false, why: `snapshot_read status ${out.status}` };
      if (this.ackedSeq[k] < 0) return { ok: !e, why: e ? "read found a key never written" : "" };
      if (!e) return { ok: false, why: `key k${k} not found, last write seq ${this.ackedSeq[k]}` };
      const gotSeq = e.value.readUInt32LE(0);
      const gotVs = e.versionstamp.toString("hex");
      if (gotSeq !== this.ackedSeq[k] || gotVs !== this.ackedVs[k]) {
        return { ok: false, why: `key k${k}: read seq ${gotSeq} vs ${gotVs}, last acknowledged seq ${this.ackedSeq[k]} vs ${this.ackedVs[k]}` };
      }
      return { ok: true, key: k, seq: gotSeq, vs: gotVs };
    } catch (e) {
      return { ok: false, why: `probe failed: ${e.code ?? e.message}` };
    } finally {
      session.destroy();
    }
  }

  /** Every live watch must have seen the last acknowledged write of each of its keys. */
  staleWatches() {
    let checked = 0;
    const stale = [];
    for (const c of this.conns) {
      if (!c || c.dead || c.killed) continue;
      for (const w of c.watches) {
        if (w.state !== "open" || w.cancelled) continue;
        checked++;
        if (w.frames === 0) {
          stale.push(`slot ${c.slot}: watch answered 200 but sent no frame`);
          continue;
        }
        for (let i = 0; i < w.idx.length; i++) {
          const want = this.ackedVs[w.idx[i]];
          const got = w.lastVs[i] ?? null;
          if (want !== got) {
            stale.push(`slot ${c.slot} key k${w.idx[i]}: saw ${got}, last acknowledged ${want}`);
            break;
          }
        }
      }
    }
    return { checked, stale };
  }

  async run() {
    const o = this.opts;
    this.out(
      `soak: ${o.seconds} s, ${o.connections} connections x ${o["watches-per-conn"]} watches on ${o.keys} keys, ` +
        `${o["writes-per-sec"]} writes/s, churn ${o["churn-per-sec"]} connections/s + ${o["cancels-per-sec"]} stream cancels/s, seed ${o.seed}`,
    );
    this.out(`soak: client open-file limit ${openFileLimit(process.pid)}`);
    const need = o.connections + o["writer-conns"] + 200;
    const lim = openFileLimits(process.pid);
    if (lim && lim[0] < need) {
      throw new Error(
        `this process may open ${lim[0]} files, the run needs about ${need} (one socket per connection): ` +
          (lim[1] >= need
            ? `raise the soft limit first, e.g. \`ulimit -n ${Math.min(lim[1], Math.max(need, 4096))}\`, or lower SOAK_CONNECTIONS`
            : `the hard limit ${lim[1]} is too low as well; raise it (limits.conf, systemd, docker --ulimit) or lower SOAK_CONNECTIONS`),
      );
    }
    this.server = await startServer();
    this.watchServerLog();
    this.out(`soak: server pid ${this.server.proc.pid} on ${this.server.url}, open-file limit ${openFileLimit(this.server.proc.pid)}`);

    // Idle baseline after one warm-up round (databases opened, one write, one read, one watch).
    this.phase = "warm-up";
    await this.openWriters();
    this.writeStart = performance.now();
    this.write();
    while (this.writesInFlight) await sleep(20);
    const warm = await this.probe();
    if (!warm.ok) throw new Error(`warm-up probe failed: ${warm.why}`);
    await this.warmWatch();
    await sleep(1000);
    const base = procSample(this.server.proc.pid);
    this.baseline = { fds: base.fds - this.writers.length, rss: base.rss };
    this.out(`soak: idle baseline ${fmtMiB(base.rss)} MiB RSS, ${this.baseline.fds} fds (without the ${this.writers.length} writer connections)`);

    // Load.
    this.phase = "load";
    this.c.writes = 0;
    this.c.writesSkipped = 0;
    this.t0 = performance.now();
    this.writeStart = this.t0;
    this.loopDelay.enable();
    this.printHeader();
    this.sample();
    for (let i = 0; i < o.connections; i++) this.scheduleConnect(i);
    this.churnBudget = 0;
    this.cancelBudget = 0;
    const writerTimer = setInterval(() => this.writerTick(), 20);
    let lastChurn = performance.now();
    const churnTimer = setInterval(() => {
      const now = performance.now();
      this.churnTick(now - lastChurn);
      lastChurn = now;
    }, 50);
    const endAt = this.t0 + o.seconds * 1000;
    let next = this.t0 + o["sample-ms"];
    while (performance.now() < endAt) {
      await sleep(Math.max(1, Math.min(next, endAt) - performance.now()));
      if (!this.server.running) {
        clearInterval(writerTimer);
        clearInterval(churnTimer);
        const ex = await this.server.exited;
        throw new Error(`the server died during the run (code ${ex.code}, signal ${ex.signal})\n--- server output ---\n${this.server.logTail(60)}`);
      }
      if (performance.now() >= next) {
        this.sample();
        next += o["sample-ms"];
      }
    }

    // Settle: no more churn or writes; every watch must catch up with the last writes.
    this.phase = "settle";
    this.stopping = true;
    clearInterval(writerTimer);
    clearInterval(churnTimer);
    const settleStart = performance.now();
    while (this.writesInFlight && performance.now() - settleStart < 20_000) await sleep(50);
    if (this.writesInFlight) this.unexpectedError("writes-unanswered", `${this.writesInFlight} writes still in flight 20 s after the writer stopped`);
    let stale;
    const staleDeadline = performance.now() + 10_000;
    for (;;) {
      stale = this.staleWatches();
      if (!stale.stale.length || performance.now() > staleDeadline) break;
      await sleep(250);
    }
    const loadEnd = this.sample(true);
    if (stale.stale.length) {
      this.bump(this.unexpected, "watch-missed-last-write", stale.stale.length);
      this.out(`soak: UNEXPECTED ${stale.stale.length} of ${stale.checked} watches did not show the last write of their keys 10 s after the writer stopped, e.g.:`);
      for (const s of stale.stale.slice(0, 10)) this.out(`soak:   ${s}`);
    } else {
      this.out(`soak: all ${stale.checked} open watches show the last acknowledged write of each of their keys`);
    }
    const peakConns = Math.max(...this.samples.map((s) => s.conns), loadEnd.conns);
    const peakWatches = Math.max(...this.samples.map((s) => s.open), loadEnd.open);
    const steady = this.samples.filter((s) => s.t >= o.seconds / 3);
    const avgConns = steady.length ? steady.reduce((a, s) => a + s.conns, 0) / steady.length : loadEnd.conns;
    const avgWatches = steady.length ? steady.reduce((a, s) => a + s.open, 0) / steady.length : loadEnd.open;

    // Close every client (sockets destroyed; the watches have no end of their own).
    this.phase = "close";
    this.closing = true;
    for (const c of this.conns) {
      if (c && !c.dead) {
        c.killed = true;
        c.session.destroy();
      }
    }
    for (const w of this.writers) w.h2.session.destroy();
    this.loopDelay.disable();

    // The server must come back to its idle state.
    this.phase = "after";
    const fdDeadline = performance.now() + 15_000;
    let after = procSample(this.server.proc.pid);
    await sleep(3000);
    for (;;) {
      after = procSample(this.server.proc.pid);
      if (!after || after.fds <= this.baseline.fds + o["fd-margin"] || performance.now() > fdDeadline) break;
      await sleep(500);
    }
    const alive = this.server.running;
    const probe = alive ? await this.probe() : { ok: false, why: "server not running" };
    const afterProbe = procSample(this.server.proc.pid);

    // RSS: the last third must not grow over the second one.
    const third = o.seconds / 3;
    const avg = (xs) => xs.reduce((a, s) => a + s.rss, 0) / xs.length;
    const s2 = this.samples.filter((s) => s.t >= third && s.t < 2 * third);
    const s3 = this.samples.filter((s) => s.t >= 2 * third);
    const rss2 = s2.length ? avg(s2) : NaN;
    const rss3 = s3.length ? avg(s3) : NaN;
    const rssAllowed = rss2 * 0.1 + o["rss-margin-mib"] * MiB;
    const rssMax = Math.max(...this.samples.map((s) => s.rss));
    const slope = rssSlope(this.samples.filter((s) => s.t >= third));

    const problems = [];
    if (!alive) problems.push(`server is not running (${JSON.stringify(await this.server.exited)})`);
    if (!probe.ok) problems.push(`server did not answer a metadata exchange + read afterwards: ${probe.why}`);
    if (!after || after.fds > this.baseline.fds + o["fd-margin"]) {
      problems.push(`open fds ${after?.fds} did not come back to the idle baseline ${this.baseline.fds} (+${o["fd-margin"]}) within 15 s of closing all clients`);
    }
    if (!(rss3 - rss2 <= rssAllowed)) {
      problems.push(`RSS grows: last third averages ${fmtMiB(rss3)} MiB, second third ${fmtMiB(rss2)} MiB (allowed +${fmtMiB(rssAllowed)} MiB)`);
    }
    if (this.unexpectedTotal) problems.push(`${this.unexpectedTotal} unexpected errors: ${JSON.stringify(Object.fromEntries(this.unexpected))}`);
    if (this.serverLog.error || this.serverLog.critical) {
      problems.push(`server logged ${this.serverLog.error} error and ${this.serverLog.critical} critical lines`);
    }

    this.out(`soak: churn: ${JSON.stringify(this.churnKinds)}; cancels: ${JSON.stringify(this.cancelKinds)}`);
    this.out(`soak: errors we caused, by kind: ${JSON.stringify(Object.fromEntries([...this.caused].filter(([, n]) => n > 0)))}`);
    this.out(`soak: unexpected errors, by kind: ${JSON.stringify(Object.fromEntries(this.unexpected))}`);
    this.out(`soak: server log: ${this.serverLog.warn} warn, ${this.serverLog.error} error, ${this.serverLog.critical} critical lines`);
    for (const l of this.serverLog.samples.slice(0, 10)) this.out(`soak:   ${l}`);
    this.out(
      `soak: totals: ${this.c.connsOpened} connections opened, ${this.c.metadata} metadata exchanges, ${this.c.watchesOpened} watches opened, ` +
        `${this.c.partialRequests} half-sent requests, ${this.c.frames} frames + ${this.c.keepalives} keep-alives, ` +
        `${this.c.writes} writes (${this.c.writesSkipped} skipped: writer backlog), write latency p50/p99 ${fmtMs(this.writeLat.q(0.5))}/${fmtMs(this.writeLat.q(0.99))} ms`,
    );
    this.out(
      `soak: held ${avgConns.toFixed(0)} connections / ${avgWatches.toFixed(0)} watches on average after the first third (peak ${peakConns} / ${peakWatches}); ` +
        `RSS 2nd third ${fmtMiB(rss2)} MiB, 3rd third ${fmtMiB(rss3)} MiB, peak ${fmtMiB(rssMax)} MiB, ` +
        `trend over the last two thirds ${Number.isFinite(slope) ? (slope * 60 / MiB).toFixed(2) : "-"} MiB/min; ` +
        `latency samples ${this.latAll.n}, max ${fmtMs(this.latAll.max)} ms; probe ${probe.ok ? `read k${probe.key} = seq ${probe.seq} ok` : "FAILED"}`,
    );
    const summary =
      `soak: ${o.seconds} s, ${peakConns} connections, ${peakWatches} watches (peak; ${avgConns.toFixed(0)}/${avgWatches.toFixed(0)} on average), ` +
      `${this.c.connsChurned} connections churned, ` +
      `${this.c.cancels} streams cancelled, ${this.c.writes} writes, ${this.c.frames} frames, ` +
      `RSS ${fmtMiB(this.baseline.rss)}→${fmtMiB(rssMax)}→${fmtMiB(afterProbe?.rss ?? NaN)} MiB (idle→peak→after), ` +
      `fds ${peakFds(this.samples)}→${after?.fds} (baseline ${this.baseline.fds}), ` +
      `change-to-frame p50/p99 ${fmtMs(this.latAll.q(0.5))}/${fmtMs(this.latAll.q(0.99))} ms, ${this.unexpectedTotal} unexpected errors`;
    this.out(summary);
    this.totals = { summary, problems, unexpected: this.unexpectedTotal, samples: this.samples };

    const stopped = await this.server.stop("SIGTERM", 15_000);
    this.out(`soak: server stopped: code ${stopped.code}, signal ${stopped.signal}${stopped.forced ? " (SIGKILLed after 15 s)" : ""}`);
    if (stopped.forced || stopped.code !== 0) problems.push(`server did not shut down cleanly on SIGTERM: ${JSON.stringify(stopped)}`);
    if (problems.length) {
      throw new Error(`soak failed:\n  - ${problems.join("\n  - ")}\n--- server (last output) ---\n${this.server.logTail(40)}`);
    }
    await removeTempDirs();
  }

  async warmWatch() {
    const { sock, session } = this.connectSession();
    const h2 = new H2(session, this.server.url);
    await this.sessionReady(session, sock);
    const meta = await metadata(h2, this.server.token);
    const conn = { meta: meta.json, prefix: "/v2" };
    const ep = meta.json.endpoints.find((e) => e.consistency === "strong") ?? meta.json.endpoints[0];
    conn.prefix = new URL(ep.url, `${this.server.url}/`).pathname.replace(/\/$/, "");
    const st = session.request(this.dataHeaders(conn, "watch"), { endStream: false });
    st.on("error", () => {});
    const got = new Promise((resolve) => {
      let n = 0;
      st.on("data", (d) => {
        n += d.length;
        if (n > 4) resolve(true);
      });
      setTimeout(() => resolve(false), 5000);
    });
    st.end(watchBody([this.keys[0]]));
    if (!(await got)) throw new Error("warm-up watch got no frame");
    session.destroy();
  }
}

/** Least-squares slope of RSS over time, bytes per second. */
function rssSlope(samples) {
  if (samples.length < 2) return NaN;
  const n = samples.length;
  const mt = samples.reduce((a, s) => a + s.t, 0) / n;
  const mr = samples.reduce((a, s) => a + s.rss, 0) / n;
  let num = 0;
  let den = 0;
  for (const s of samples) {
    num += (s.t - mt) * (s.rss - mr);
    den += (s.t - mt) ** 2;
  }
  return num / den;
}

function peakFds(samples) {
  return Math.max(...samples.map((s) => s.fds));
}

/**
 * Runs the soak with `opts` (see resolveOptions); `out` prints a line. A watchdog ends the
 * process if the run takes far longer than it should. Resolves the totals; throws when a
 * check fails.
 */
export async function runSoak(opts, out = console.log) {
  const run = new SoakRun(opts, out);
  const limitMs = watchdogMs(opts);
  const watchdog = setTimeout(() => {
    out(`soak: WATCHDOG: no end after ${(limitMs / 1000).toFixed(0)} s, stuck in "${run.phase}"; seed ${opts.seed}`);
    if (run.server) out(`--- server (last output) ---\n${run.server.logTail(40)}`);
    process.exit(3); // the harness SIGKILLs the server on exit
  }, limitMs);
  watchdog.unref();
  try {
    await run.run();
    return run.totals;
  } finally {
    clearTimeout(watchdog);
  }
}

// ---------------------------------------------------------------------------
// CLI

const isCli = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);

if (isCli) {
  let opts;
  try {
    opts = resolveOptions(process.argv.slice(2));
  } catch (e) {
    console.error(`${e.message}\n\n${usage()}`);
    process.exit(2);
  }
  if (opts.help) {
    console.log(usage());
    process.exit(0);
  }
  runSoak(opts).then(
    () => process.exit(0),
    (e) => {
      console.error(`soak: FAILED: ${e.stack ?? e}`);
      process.exit(1);
    },
  );
}
