#!/usr/bin/env node
// Benchmark runner: the same workloads through the real Deno client against kvconnect and
// against Deno's own local SQLite file, in one run, printed as a ratio table.
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/run.mjs [--duration 5] [--repeat 1]
//       [--warmup 1] [--workloads set@64,get,...] [--json results.json]
//
// * Starts `kvconnect serve` through ../e2e/harness.mjs: fresh data dir, random token,
//   `--sync full` (every commit is fsynced before it is acknowledged) and `--rate-limit-rps 0`
//   (the default per-token limit of 10,000 requests/s would otherwise be the ceiling).
// * For every row (workload at a number of operations in flight) it runs deno/bench.ts once
//   against the server (a fresh key namespace) and once against a fresh SQLite file in a
//   temp dir, opened with Deno's defaults. With --repeat N it does that N times, swapping
//   which target goes first each time (A B, B A, A B, ...), and reports the medians.
// * Prints the machine, then a markdown table: ops/s of both, their ratio, the goal and
//   whether this run met it, and p50/p99/p99.9 latencies. No figure fails the run; the exit
//   code is 1 only when a benchmark could not run, reported errors, or lost money in the
//   transfer workload.
// * When h2load is on PATH, it also drives the server directly over one HTTP/2 connection
//   (no Deno client); when redis-benchmark and redis-server are, it measures a private
//   redis-server (GET/SET, and SET with appendfsync always) for context. Missing tools are
//   skipped with a note.
//
// The numbers belong to the machine they were taken on, which must be otherwise idle.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  denoBin, freePort, kvconnectBin, makeTempDir, removeTempDirs, sleep, spawnDeno, startServer,
} from "../e2e/harness.mjs";
import { dataPath, H2, metadata } from "../e2e/raw_client.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BENCH_SCRIPT = path.join(HERE, "deno", "bench.ts");

/** The rows of the table, in order. `goal` is what the issue asks of kvconnect. */
const ROWS = [
  { id: "set@64", workload: "set", concurrency: 64, goal: { ratio: 5 } },
  { id: "set@1", workload: "set", concurrency: 1 },
  { id: "get@64", workload: "get", concurrency: 64, goal: { ratio: 0.8 } },
  { id: "get@1", workload: "get", concurrency: 1, goal: { p50Ms: 0.15 } },
  { id: "transfer@64", workload: "transfer", concurrency: 64, goal: { ratio: 3, preserved: true } },
  { id: "list@16", workload: "list", concurrency: 16 },
];
const WORKLOADS = ["set", "get", "transfer", "list"];
const TARGETS = ["kvconnect", "local"];
const SERVER_ARGS = ["--sync", "full", "--rate-limit-rps", "0"];

// ---------------------------------------------------------------------------
// Options

const USAGE = `usage: KVCONNECT_BIN=build/kvconnect node tests/bench/run.mjs [options]

  --duration S      timed window of every benchmark, seconds (default 5)
  --warmup S        untimed warm-up before it, seconds (default 1)
  --repeat N        runs per target and row, alternating which goes first; medians are
                    reported (default 1)
  --workloads LIST  comma-separated rows: ${ROWS.map((r) => r.id).join(", ")};
                    a bare workload name (e.g. get) selects all its rows; any other
                    <workload>@<in flight> adds a row without a goal (default: all rows)
  --json FILE       also write every raw result, the machine and the table to FILE
  --server-args S   extra \`kvconnect serve\` flags, space-separated (e.g. "--read-cache-bytes 0"),
                    to compare server settings; they are printed with the results
  --no-tools        skip the h2load and redis-benchmark rows
  -h, --help        this text

Needs \`npm ci\` in tests/e2e first (the Deno binary and the harness come from there).`;

function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: "string" },
      warmup: { type: "string" },
      repeat: { type: "string" },
      workloads: { type: "string" },
      json: { type: "string" },
      "server-args": { type: "string" },
      "no-tools": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return { help: true };
  const num = (name, def, min, integer) => {
    const raw = values[name];
    if (raw === undefined) return def;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
      throw new Error(`--${name} must be ${integer ? "an integer" : "a number"} >= ${min}, got ${raw}`);
    }
    return n;
  };
  return {
    duration: num("duration", 5, 0.1, false),
    warmup: num("warmup", 1, 0, false),
    repeat: num("repeat", 1, 1, true),
    rows: selectRows(values.workloads),
    json: values.json,
    serverArgs: (values["server-args"] ?? "").split(/\s+/).filter(Boolean),
    tools: !values["no-tools"],
  };
}

function selectRows(spec) {
  if (!spec) return ROWS;
  const out = [];
  const add = (row) => {
    if (!out.some((r) => r.id === row.id)) out.push(row);
  };
  for (const item of spec.split(",").map((s) => s.trim()).filter(Boolean)) {
    const known = ROWS.filter((r) => r.id === item || r.workload === item);
    if (known.length) {
      known.forEach(add);
      continue;
    }
    const m = /^([a-z]+)@(\d+)$/.exec(item);
    if (!m || !WORKLOADS.includes(m[1]) || Number(m[2]) < 1) {
      throw new Error(`unknown row "${item}": use ${ROWS.map((r) => r.id).join(", ")}, a workload name ` +
        `(${WORKLOADS.join(", ")}) or <workload>@<in flight>`);
    }
    add({ id: item, workload: m[1], concurrency: Number(m[2]) });
  }
  if (!out.length) throw new Error("--workloads selects no row");
  return out;
}

// ---------------------------------------------------------------------------
// Small helpers

/** Our own helper processes (redis-server, h2load, ...); killed when we exit. */
const children = new Set();
process.on("exit", () => {
  for (const c of children) {
    try {
      c.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
});

/** Runs a command to completion; resolves { code, signal, stdout, stderr }. */
function runCommand(cmd, args, { timeoutMs = 120_000, cwd } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], cwd });
    children.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (e) => (stderr += `spawn error: ${e.message}\n`));
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The full path of `name` on PATH, or null. */
function which(name) {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return null;
}

function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: "127.0.0.1", port });
    const done = (ok) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(1000, () => done(false));
    sock.once("connect", () => done(true));
    sock.once("error", () => done(false));
  });
}

function median(values) {
  const v = values.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

const fmtInt = (x) => (x === null || x === undefined ? "—" : Math.round(x).toLocaleString("en-US"));
const fmtMs = (x) => (x === null || x === undefined ? "—" : x < 10 ? x.toFixed(3) : x.toFixed(1));
const fmtLat = (s) => (s ? `${fmtMs(s.p50_ms)} / ${fmtMs(s.p99_ms)} / ${fmtMs(s.p999_ms)}` : "—");
const log = (msg) => process.stderr.write(`${msg}\n`);

// ---------------------------------------------------------------------------
// Machine

function firstLine(text) {
  return (text ?? "").split("\n")[0].trim();
}

function machineInfo() {
  let cpu = os.cpus()[0]?.model ?? "unknown";
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"));
    if (m) cpu = m[1].trim();
  } catch {
    // not Linux
  }
  const deno = spawnSync(denoBin(), ["--version"], { encoding: "utf8", timeout: 30_000 });
  const kvc = spawnSync(kvconnectBin(), ["--version"], { encoding: "utf8", timeout: 30_000 });
  return {
    nproc: typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length,
    cpu,
    kernel: `${os.type()} ${os.release()} ${typeof os.machine === "function" ? os.machine() : os.arch()}`,
    deno: firstLine(deno.stdout) || `unknown (${firstLine(deno.stderr)})`,
    kvconnect: firstLine(kvc.stdout) || firstLine(kvc.stderr) || "unknown",
    node: process.version,
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
    date: new Date().toISOString(),
  };
}

function printMachine(m) {
  console.log("## kvconnect benchmark\n");
  console.log(`- machine: ${m.nproc} CPUs (nproc), ${m.cpu}`);
  console.log(`- kernel: ${m.kernel}`);
  console.log(`- ${m.deno}, node ${m.node}`);
  console.log(`- ${m.kvconnect}`);
  console.log(`- load average at start: ${m.loadavg.join(" ")}; ${m.date}`);
  if (m.loadavg[0] > Math.max(0.5, 0.1 * m.nproc)) {
    console.log(`- **warning**: the machine is not idle (1-minute load ${m.loadavg[0]} on ${m.nproc} CPUs); ` +
      "these numbers are not meaningful");
  }
  console.log("");
}

// ---------------------------------------------------------------------------
// Deno benchmarks

async function runBench(row, target, server, opts) {
  let kvUrl;
  let token;
  let localDir;
  if (target === "kvconnect") {
    kvUrl = server.url;
    token = server.token;
  } else {
    localDir = await makeTempDir("kvconnect-bench-local-");
    kvUrl = path.join(localDir, "bench.sqlite");
  }
  const env = {
    KV_BENCH_WORKLOAD: row.workload,
    KV_BENCH_CONCURRENCY: String(row.concurrency),
    KV_BENCH_DURATION: String(opts.duration),
    KV_BENCH_WARMUP: String(opts.warmup),
    KV_BENCH_NS: `${row.id}-${Math.random().toString(36).slice(2, 10)}`,
  };
  const timeoutMs = Math.ceil((opts.duration + opts.warmup) * 1000) + 180_000;
  try {
    const res = await spawnDeno(BENCH_SCRIPT, { kvUrl, token, env, timeoutMs }).done;
    const s = res.summary;
    const valid = s && typeof s.ops === "number" && s.workload === row.workload;
    const errors = valid ? s.errors : null;
    return {
      row: row.id,
      target,
      code: res.code,
      signal: res.signal,
      timedOut: res.timedOut,
      ok: res.code === 0 && valid && errors === 0,
      result: valid ? s : null,
      stderr: res.code === 0 && !errors ? undefined : res.stderr.slice(-4000),
    };
  } finally {
    if (localDir) await fsp.rm(localDir, { recursive: true, force: true }).catch(() => {});
  }
}

function describeRun(r) {
  if (!r.result) {
    return `FAILED (exit ${r.code}${r.signal ? `, ${r.signal}` : ""}${r.timedOut ? ", timed out" : ""})`;
  }
  const s = r.result;
  const money = s.extra?.preserved === undefined ? "" : `, total ${s.extra.total_after}/${s.extra.total_expected}`;
  return `${fmtInt(s.ops_per_s)} ops/s, p50 ${fmtMs(s.p50_ms)} ms, p99 ${fmtMs(s.p99_ms)} ms` +
    `${s.errors ? `, ${s.errors} errors` : ""}${money}${r.code === 0 ? "" : ` (exit ${r.code})`}`;
}

function summarize(row, runs) {
  const side = (target) => {
    const mine = runs.filter((r) => r.row === row.id && r.target === target);
    const done = mine.filter((r) => r.result);
    if (!done.length) return { runs: mine.length, failed: mine.length, ok: false };
    const pick = (k) => median(done.map((r) => r.result[k]));
    const preservedAll = done.every((r) => r.result.extra?.preserved !== false);
    return {
      runs: mine.length,
      failed: mine.filter((r) => !r.ok).length,
      ok: mine.every((r) => r.ok),
      ops_per_s: pick("ops_per_s"),
      p50_ms: pick("p50_ms"),
      p99_ms: pick("p99_ms"),
      p999_ms: pick("p999_ms"),
      errors: done.reduce((n, r) => n + (r.result.errors ?? 0), 0),
      preserved: row.workload === "transfer" ? preservedAll && mine.length === done.length : undefined,
      totals: row.workload === "transfer"
        ? done.map((r) => `${r.result.extra.total_after}/${r.result.extra.total_expected}`)
        : undefined,
      conflicts: row.workload === "transfer" ? median(done.map((r) => r.result.extra.conflicts)) : undefined,
    };
  };
  const kvc = side("kvconnect");
  const local = side("local");
  const ratio = kvc.ops_per_s && local.ops_per_s ? kvc.ops_per_s / local.ops_per_s : null;
  let goal = "— (context)";
  let met = "—";
  const g = row.goal;
  if (g?.ratio !== undefined) {
    goal = `≥ ${g.ratio}x local${g.preserved ? ", total kept" : ""}`;
    if (ratio === null) met = "n/a (failed)";
    else if (g.preserved && !(kvc.preserved && local.preserved)) met = "**no** (money lost)";
    else met = ratio >= g.ratio ? "yes" : "**no**";
  } else if (g?.p50Ms !== undefined) {
    goal = `kvconnect p50 ≤ ${g.p50Ms} ms`;
    met = kvc.p50_ms === null || kvc.p50_ms === undefined ? "n/a (failed)" : kvc.p50_ms <= g.p50Ms ? "yes" : "**no**";
  }
  return { id: row.id, workload: row.workload, concurrency: row.concurrency, kvconnect: kvc, local, ratio, goal, met };
}

function printTable(rows, opts) {
  console.log(`### Deno client: kvconnect (--sync full) vs. Deno's local SQLite file\n`);
  console.log(`kvconnect: \`kvconnect serve ${[...SERVER_ARGS, ...opts.serverArgs].join(" ")}\`, other options at their defaults; ` +
    "local: `Deno.openKv(<fresh file>)` with Deno's defaults; one `Deno.Kv` handle per run.\n");
  console.log(`${opts.duration} s timed after ${opts.warmup} s warm-up; ` +
    `${opts.repeat === 1 ? "one run per target" : `median of ${opts.repeat} runs per target, alternating order`}; ` +
    "latencies in ms (p50 / p99 / p99.9)\n");
  console.log("| workload | in flight | kvconnect ops/s | local ops/s | ratio | goal | met? | kvconnect latency | local latency |");
  console.log("|---|---:|---:|---:|---:|---|---|---:|---:|");
  for (const r of rows) {
    const ops = (s) => (s.ops_per_s === undefined ? "failed" : `${fmtInt(s.ops_per_s)}${s.ok ? "" : " (!)"}`);
    console.log(`| ${r.workload} | ${r.concurrency} | ${ops(r.kvconnect)} | ${ops(r.local)} | ` +
      `${r.ratio === null ? "—" : `${r.ratio.toFixed(2)}x`} | ${r.goal} | ${r.met} | ` +
      `${fmtLat(r.kvconnect.ops_per_s === undefined ? null : r.kvconnect)} | ` +
      `${fmtLat(r.local.ops_per_s === undefined ? null : r.local)} |`);
  }
  console.log("");
  for (const r of rows) {
    if (r.workload === "transfer") {
      const side = (s) => s.totals
        ? `${s.totals.join(", ")} (${s.preserved ? "preserved" : "NOT preserved"}, median ${fmtInt(s.conflicts)} failed checks retried)`
        : "not measured";
      console.log(`- ${r.id} total balance after the run: kvconnect ${side(r.kvconnect)}; local ${side(r.local)}`);
    }
    if (r.workload === "get" && r.concurrency === 1) {
      console.log(`- ${r.id} p50 latency: kvconnect ${fmtMs(r.kvconnect.p50_ms)} ms, local ${fmtMs(r.local.p50_ms)} ms` +
        `${r.goal.includes("p50") ? ` (goal for kvconnect ≤ ${ROWS.find((x) => x.id === "get@1").goal.p50Ms} ms)` : ""}`);
    }
  }
  const bad = rows.flatMap((r) => TARGETS.filter((t) => !r[t].ok).map((t) => `${r.id} ${t}`));
  console.log(bad.length ? `- runs with failures or errors (marked (!)): ${bad.join(", ")}` : "- errors: none");
  console.log("");
}

// ---------------------------------------------------------------------------
// h2load: the server without the Deno client

/** Protobuf: a varint, and a length-delimited field. */
function varint(n) {
  const out = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}
const field = (no, bytes) => Buffer.concat([varint((no << 3) | 2), varint(bytes.length), bytes]);
const fieldVarint = (no, n) => Buffer.concat([varint(no << 3), varint(n)]);

/** A Deno KV key of strings in the tuple codec: 0x02 <utf-8> 0x00 per part. */
const tupleKey = (...parts) => Buffer.concat(parts.map((p) => Buffer.concat([Buffer.from([2]), Buffer.from(p), Buffer.from([0])])));

/** SnapshotRead of one point range, as kv.get(key) sends it. */
function snapshotReadBody(key) {
  const range = Buffer.concat([field(1, key), field(2, Buffer.concat([key, Buffer.from([0])])), fieldVarint(3, 1)]);
  return field(1, range);
}

/** AtomicWrite with one M_SET of a VE_BYTES value. */
function atomicSetBody(key, value) {
  const kvValue = Buffer.concat([field(1, value), fieldVarint(2, 3)]);
  const mutation = Buffer.concat([field(1, key), field(2, kvValue), fieldVarint(3, 1)]);
  return field(2, mutation);
}

function parseH2load(out) {
  const num = (re) => {
    const m = re.exec(out);
    return m ? Number(m[1]) : null;
  };
  const toMs = (v, unit) => (unit === "us" ? v / 1000 : unit === "s" ? v * 1000 : v);
  const t = /time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(out);
  return {
    req_per_s: num(/finished in [\d.]+\w*, ([\d.]+) req\/s/),
    done: num(/(\d+) done/),
    succeeded: num(/(\d+) succeeded/),
    failed: num(/(\d+) failed/),
    errored: num(/(\d+) errored/),
    status_2xx: num(/status codes: (\d+) 2xx/),
    mean_ms: t ? toMs(Number(t[5]), t[6]) : null,
    max_ms: t ? toMs(Number(t[3]), t[4]) : null,
  };
}

async function h2loadRows(server, opts) {
  const bin = which("h2load");
  if (!bin) return { rows: [], notes: ["h2load not installed: skipped"] };
  const dir = await makeTempDir("kvconnect-bench-h2load-");
  const key = tupleKey("bench", "h2load", "k");
  const bodies = {
    snapshot_read: snapshotReadBody(key),
    atomic_write: atomicSetBody(key, Buffer.alloc(100, 0x76)),
  };
  // One metadata exchange for the data-path token; one request of each kind must succeed.
  const h2 = await H2.connect(server.url);
  let meta;
  try {
    const m = await metadata(h2, server.token);
    if (m.status !== 200 || !m.json) throw new Error(`metadata exchange: ${m.status} ${m.text}`);
    meta = m.json;
    for (const method of ["atomic_write", "snapshot_read"]) {
      const r = await dataPath(h2, meta, method, bodies[method]);
      if (r.status !== 200) throw new Error(`${method} preflight: ${r.status ?? r.error} ${r.text ?? ""}`);
    }
  } finally {
    h2.close();
  }
  const endpoint = meta.endpoints.find((e) => e.consistency === "strong") ?? meta.endpoints[0];
  const base = new URL(endpoint.url, `${server.url}/`).href.replace(/\/$/, "");
  const headers = [
    `authorization: Bearer ${meta.token}`,
    `x-denokv-version: ${meta.version}`,
    `x-denokv-database-id: ${meta.databaseId}`,
    "content-type: application/x-protobuf",
  ];
  const rows = [];
  const notes = [];
  for (const [method, label] of [["atomic_write", "set (atomic_write)"], ["snapshot_read", "get (snapshot_read)"]]) {
    const file = path.join(dir, `${method}.bin`);
    fs.writeFileSync(file, bodies[method]);
    const clients = 1;
    const streams = 64;
    const args = [
      "-c", String(clients), "-m", String(streams), "-t", "1",
      "-D", `${Math.round(opts.duration * 1000)}ms`,
      ...(opts.warmup > 0 ? ["--warm-up-time", `${Math.round(opts.warmup * 1000)}ms`] : []),
      "-d", file, ...headers.flatMap((h) => ["-H", h]), `${base}/${method}`,
    ];
    log(`[h2load ${method}] -c ${clients} -m ${streams} -D ${opts.duration}`);
    const res = await runCommand(bin, args, { timeoutMs: (opts.duration + opts.warmup) * 1000 + 60_000 });
    const parsed = parseH2load(res.stdout);
    const output = res.code === 0 && parsed.req_per_s !== null ? undefined : `${res.stdout}\n${res.stderr}`.trim().slice(-3000);
    if (output) notes.push(`h2load ${method} failed (exit ${res.code}): ${output.split("\n").slice(-5).join(" | ")}`);
    rows.push({ tool: "h2load", test: label, connections: clients, in_flight: clients * streams, code: res.code, ...parsed, output });
  }
  return { rows, notes };
}

// ---------------------------------------------------------------------------
// redis-benchmark against a private redis-server, for context

function parseRedisCsv(out) {
  const lines = out.split("\n").map((l) => l.trim()).filter((l) => l.startsWith('"'));
  const cells = (l) => l.split('","').map((c) => c.replace(/^"|"$/g, ""));
  let header = ["test", "rps"];
  const rows = [];
  for (const l of lines) {
    const c = cells(l);
    if (c[0] === "test") {
      header = c;
      continue;
    }
    const rec = {};
    header.forEach((h, i) => (rec[h] = i === 0 ? c[i] : Number(c[i])));
    rows.push(rec);
  }
  return rows;
}

async function redisRows(opts) {
  const bench = which("redis-benchmark");
  if (!bench) return { rows: [], notes: ["redis-benchmark not installed: skipped"] };
  const serverBin = which("redis-server");
  if (!serverBin) return { rows: [], notes: ["redis-server not installed: redis-benchmark skipped (it needs a private redis-server)"] };
  const modes = [
    { name: "no persistence", conf: ["appendonly no"], tests: "set,get", requests: Math.round(20_000 * opts.duration) },
    { name: "appendfsync always", conf: ["appendonly yes", "appendfsync always"], tests: "set", requests: Math.round(2_000 * opts.duration) },
  ];
  const rows = [];
  const notes = [];
  for (const mode of modes) {
    const dir = await makeTempDir("kvconnect-bench-redis-");
    const port = await freePort();
    const conf = path.join(dir, "redis.conf");
    fs.writeFileSync(conf, [
      `port ${port}`, "bind 127.0.0.1", `dir ${dir}`, 'save ""', "daemonize no", "protected-mode yes",
      'logfile ""', ...mode.conf, "",
    ].join("\n"));
    const child = spawn(serverBin, [conf], { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
    children.add(child);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    try {
      const deadline = Date.now() + 10_000;
      while (!(await canConnect(port))) {
        if (Date.now() > deadline || child.exitCode !== null) {
          throw new Error(`redis-server (${mode.name}) did not start:\n${out.slice(-2000)}`);
        }
        await sleep(50);
      }
      const args = ["-h", "127.0.0.1", "-p", String(port), "-c", "50", "-n", String(mode.requests),
        "-r", "10000", "-d", "100", "-t", mode.tests, "--csv"];
      log(`[redis-benchmark ${mode.name}] -c 50 -n ${mode.requests} -t ${mode.tests}`);
      const res = await runCommand(bench, args, { timeoutMs: 600_000 });
      const parsed = parseRedisCsv(res.stdout);
      if (res.code !== 0 || !parsed.length) notes.push(`redis-benchmark (${mode.name}) failed: ${(res.stderr || res.stdout).slice(-1000)}`);
      for (const p of parsed) {
        rows.push({
          tool: "redis-benchmark", test: `${p.test} (${mode.name})`, connections: 50, in_flight: 50,
          req_per_s: p.rps, p50_ms: p.p50_latency_ms ?? null, p99_ms: p.p99_latency_ms ?? null, mean_ms: p.avg_latency_ms ?? null,
        });
      }
    } catch (e) {
      notes.push(e.message);
    } finally {
      child.kill("SIGKILL");
      children.delete(child);
      await fsp.rm(dir, { recursive: true, force: true }).catch(() => {});
    }
  }
  return { rows, notes };
}

function printTools(tools) {
  console.log("### Load tools (no Deno client), for context\n");
  if (tools.rows.length) {
    console.log("| tool | test | connections | in flight | requests/s | p50 ms | p99 ms | mean ms | failed |");
    console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const r of tools.rows) {
      // h2load: requests that got no 2xx answer (4xx/5xx, reset, error)
      const failed = r.tool === "h2load"
        ? `${r.done === null || r.status_2xx === null ? "?" : r.done - r.status_2xx}${r.code === 0 ? "" : ` (exit ${r.code})`}`
        : "—";
      console.log(`| ${r.tool} | ${r.test} | ${r.connections} | ${r.in_flight} | ${fmtInt(r.req_per_s)} | ` +
        `${fmtMs(r.p50_ms)} | ${fmtMs(r.p99_ms)} | ${fmtMs(r.mean_ms)} | ${failed} |`);
    }
    if (tools.rows.some((r) => r.tool === "h2load")) {
      console.log("\nh2load talks to kvconnect (--sync full) directly over one HTTP/2 connection with 64 streams, " +
        "fixed protobuf bodies: the server's ceiling without the Deno client.");
    }
    console.log("");
  }
  for (const n of tools.notes) console.log(`- ${n}`);
  console.log("");
}

// ---------------------------------------------------------------------------

async function main() {
  let opts;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (e) {
    console.error(`${e.message}\n\n${USAGE}`);
    return 2;
  }
  if (opts.help) {
    console.log(USAGE);
    return 0;
  }
  const machine = machineInfo();
  printMachine(machine);

  const server = await startServer({ extraArgs: [...SERVER_ARGS, ...opts.serverArgs] });
  const runs = [];
  let tools = { rows: [], notes: [] };
  try {
    log(`server: ${server.describe()}`);
    for (const row of opts.rows) {
      for (let rep = 0; rep < opts.repeat; rep++) {
        const order = rep % 2 === 0 ? TARGETS : [...TARGETS].reverse();
        for (const target of order) {
          const r = await runBench(row, target, server, opts);
          r.repeat = rep + 1;
          runs.push(r);
          log(`[${row.id} ${target} ${rep + 1}/${opts.repeat}] ${describeRun(r)}`);
          if (r.stderr) log(r.stderr.trim().split("\n").slice(-10).map((l) => `    ${l}`).join("\n"));
          if (!server.running) throw new Error(`kvconnect exited during ${row.id}:\n${server.logTail(40)}`);
        }
      }
    }
    for (const part of opts.tools ? [() => h2loadRows(server, opts), () => redisRows(opts)] : []) {
      try {
        const t = await part();
        tools.rows.push(...t.rows);
        tools.notes.push(...t.notes);
      } catch (e) {
        tools.notes.push(`load tool failed: ${e.message}`);
      }
    }
  } finally {
    await server.stop();
  }

  const rows = opts.rows.map((row) => summarize(row, runs));
  printTable(rows, opts);
  printTools(tools);

  if (opts.json) {
    const out = {
      machine,
      options: { duration: opts.duration, warmup: opts.warmup, repeat: opts.repeat, rows: opts.rows.map((r) => r.id) },
      server: { args: server.describe().replace(/--data-dir \S+/, "--data-dir <temp>") },
      runs,
      rows,
      tools,
    };
    fs.writeFileSync(opts.json, `${JSON.stringify(out, null, 2)}\n`);
    log(`raw results written to ${opts.json}`);
  }
  await removeTempDirs();
  const broken = rows.some((r) => !r.kvconnect.ok || !r.local.ok) ||
    rows.some((r) => r.workload === "transfer" && (r.kvconnect.preserved === false || r.local.preserved === false));
  return broken ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e?.stack ?? String(e));
    process.exit(1);
  },
);
