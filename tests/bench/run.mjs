#!/usr/bin/env node
// Benchmark runner: the same workloads through the real Deno client against kvconnect and
// against Deno's own local SQLite file, in one run, printed as a ratio table.
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/run.mjs [--duration 5] [--repeat 1]
//       [--warmup 1] [--workloads set@64,get,...] [--json results.json] [--no-raw] [--no-tools]
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
// * Raw protocol: `kvconnect bench` (the C++ load generator in the binary) drives the same
//   server without the Deno client: point get and durable set over HTTP/2 with 50
//   connections x 1 stream, compared with redis-benchmark GET (no persistence) and SET
//   (appendfsync always) at 50 connections, plus context rows (50 x 16 streams, HTTP/1.1).
//   --no-raw skips it.
// * When h2load is on PATH, it also drives the server directly over one HTTP/2 connection
//   (no Deno client); when redis-benchmark and redis-server are, it measures a private
//   redis-server (GET/SET, and SET with appendfsync always) once, for the tools table and as
//   the raw rows' baseline. Missing tools are skipped with a note.
//
// The numbers belong to the machine they were taken on, which must be otherwise idle.
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { makeTempDir, removeTempDirs, startServer } from "../e2e/harness.mjs";
import { dataPath, H2, metadata } from "../e2e/raw_client.mjs";
import {
  commandLine, DENO_RUN_OPTIONS, describeDenoRun, describeKvcBench, fmtInt, fmtMs, log,
  machineInfo, median, numberOption, optionValues, printMachine, redisRows, runCommand,
  runDenoBench, runKvcBench, runRounds, selectRows, tupleKey, which,
} from "./lib.mjs";

/** The rows of the table, in order. `goal` is what the issue asks of kvconnect. */
const ROWS = [
  { id: "set@64", workload: "set", concurrency: 64, goal: { ratio: 5 } },
  { id: "set@1", workload: "set", concurrency: 1 },
  { id: "get@64", workload: "get", concurrency: 64, goal: { ratio: 0.8 } },
  { id: "get@1", workload: "get", concurrency: 1, goal: { p50Ms: 0.15 } },
  { id: "transfer@64", workload: "transfer", concurrency: 64, goal: { ratio: 3, preserved: true } },
  { id: "list@16", workload: "list", concurrency: 16 },
];
const WORKLOADS = ["set", "get", "getmany", "transfer", "list"];
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
  --no-raw          skip the raw-protocol rows (\`kvconnect bench\` against the same server,
                    compared with redis-benchmark)
  --no-tools        skip the h2load and redis-benchmark rows of the tools table (redis is
                    still measured as the raw rows' baseline unless --no-raw is given too)
  -h, --help        this text

Needs \`npm ci\` in tests/e2e first (the Deno binary and the harness come from there).`;

function parseOptions(argv) {
  const values = optionValues(argv, {
    ...DENO_RUN_OPTIONS,
    "server-args": { type: "string" },
    "no-tools": { type: "boolean" },
    "no-raw": { type: "boolean" },
  });
  if (values.help) return { help: true };
  const num = (name, def, min, integer) => numberOption(values, name, def, min, integer);
  return {
    duration: num("duration", 5, 0.1, false),
    warmup: num("warmup", 1, 0, false),
    repeat: num("repeat", 1, 1, true),
    rows: selectRows(values.workloads, ROWS, WORKLOADS),
    json: values.json,
    serverArgs: (values["server-args"] ?? "").split(/\s+/).filter(Boolean),
    tools: !values["no-tools"],
    raw: !values["no-raw"],
  };
}

const fmtLat = (s) => (s ? `${fmtMs(s.p50_ms)} / ${fmtMs(s.p99_ms)} / ${fmtMs(s.p999_ms)}` : "—");

// ---------------------------------------------------------------------------
// Deno benchmarks

async function runBench(row, target, server, opts) {
  if (target === "kvconnect") return await runDenoBench(row, target, { kvUrl: server.url, token: server.token, opts });
  const localDir = await makeTempDir("kvconnect-bench-local-");
  try {
    return await runDenoBench(row, target, { kvUrl: path.join(localDir, "bench.sqlite"), opts });
  } finally {
    await fsp.rm(localDir, { recursive: true, force: true }).catch(() => {});
  }
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
// Raw protocol: `kvconnect bench` against the same server, compared with redis-benchmark

/**
 * The raw rows. `baseline` picks the redis-benchmark row (50 connections) a row is compared
 * with; `goal` is the ratio (kvconnect bench ops/s / redis req/s) the issue asks for.
 */
const RAW_ROWS = [
  { id: "get h2 50x1", workload: "get", http: "2", connections: 50, streams: 1, baseline: { command: "GET", mode: "no persistence" }, goal: 1 },
  { id: "set h2 50x1", workload: "set", http: "2", connections: 50, streams: 1, baseline: { command: "SET", mode: "appendfsync always" }, goal: 0.5 },
  { id: "get h2 50x16", workload: "get", http: "2", connections: 50, streams: 16, baseline: { command: "GET", mode: "no persistence" } },
  { id: "set h2 50x16", workload: "set", http: "2", connections: 50, streams: 16, baseline: { command: "SET", mode: "appendfsync always" } },
  { id: "get h1.1 50", workload: "get", http: "1.1", connections: 50, baseline: { command: "GET", mode: "no persistence" } },
  { id: "set h1.1 50", workload: "set", http: "1.1", connections: 50, baseline: { command: "SET", mode: "appendfsync always" } },
];

function rawArgs(row, opts) {
  return [
    "--workload", row.workload, "--http", row.http, "--connections", String(row.connections),
    ...(row.http === "2" ? ["--streams", String(row.streams)] : []),
    "--duration", String(opts.duration), "--warmup", String(opts.warmup),
  ];
}

async function runRaw(row, server, opts) {
  const timeoutMs = Math.ceil((opts.duration + opts.warmup) * 1000) + 120_000;
  const r = await runKvcBench(server, rawArgs(row, opts), { timeoutMs });
  return { row: row.id, ...r };
}

function summarizeRaw(row, runs, redis, opts) {
  const mine = runs.filter((r) => r.row === row.id);
  const done = mine.filter((r) => r.report);
  const pick = (f) => median(done.map((r) => f(r.report)));
  const kvc = {
    runs: mine.length,
    failed: mine.filter((r) => !r.ok).length,
    ok: mine.length > 0 && mine.every((r) => r.ok),
    ops_per_s: done.length ? pick((x) => x.ops_per_s) : null,
    p50_ms: done.length ? pick((x) => x.latency_ms.p50) : null,
    p99_ms: done.length ? pick((x) => x.latency_ms.p99) : null,
    errors: done.reduce((n, r) => n + r.report.errors.total, 0),
    exit_codes: mine.map((r) => r.code),
  };
  const base = redis.rows.find((b) => b.command === row.baseline.command && b.mode === row.baseline.mode);
  const baseline = base
    ? { test: base.test, connections: base.connections, req_per_s: base.req_per_s }
    : { test: `${row.baseline.command} (${row.baseline.mode})`, missing: redis.missing ?? "not measured" };
  const ratio = kvc.ops_per_s && base?.req_per_s ? kvc.ops_per_s / base.req_per_s : null;
  let goal = "— (context)";
  let met = "—";
  if (row.goal !== undefined) {
    goal = `≥ ${row.goal.toFixed(1)}x redis ${row.baseline.command}`;
    met = kvc.ops_per_s === null ? "n/a (failed)" : ratio === null ? "n/a (no baseline)" : ratio >= row.goal ? "yes" : "**no**";
  }
  return {
    id: row.id, workload: row.workload, http: row.http, connections: row.connections, streams: row.streams ?? 1,
    command: `kvconnect bench ${rawArgs(row, opts).join(" ")}`,
    kvconnect: kvc, baseline, ratio, goal, met,
  };
}

function printRawTable(rows, redis, opts) {
  console.log("### Raw protocol: `kvconnect bench` (no Deno client) vs. redis-benchmark\n");
  console.log(`kvconnect: the same \`kvconnect serve ${[...SERVER_ARGS, ...opts.serverArgs].join(" ")}\`, ` +
    "driven by `kvconnect bench` (point `snapshot_read` / `atomic_write` of one `M_SET`, 10,000 keys, " +
    "100-character values); \"50x16\" is 50 connections with 16 requests in flight each, HTTP/1.1 has one " +
    "per connection. Baseline: a private redis-server measured with `redis-benchmark -c 50 -d 100 -r 10000` " +
    "(GET with no persistence; SET with `appendfsync always`, durable like `--sync full`).\n");
  console.log(`${opts.duration} s timed after ${opts.warmup} s warm-up; ` +
    `${opts.repeat === 1 ? "one run per row" : `median of ${opts.repeat} runs per row`}; latencies in ms (p50 / p99)\n`);
  console.log("| row | kvconnect bench ops/s | p50 / p99 ms | baseline | baseline req/s | ratio | goal | met? |");
  console.log("|---|---:|---:|---|---:|---:|---|---|");
  for (const r of rows) {
    const k = r.kvconnect;
    const ops = k.ops_per_s === null
      ? `failed (exit ${k.exit_codes.join(", ")})`
      : `${fmtInt(k.ops_per_s)}${k.ok ? "" : " (!)"}`;
    const lat = k.ops_per_s === null ? "—" : `${fmtMs(k.p50_ms)} / ${fmtMs(k.p99_ms)}`;
    const label = `${r.workload}, HTTP/${r.http}, ${r.connections} conn${r.http === "2" ? ` x ${r.streams} stream${r.streams === 1 ? "" : "s"}` : ""}`;
    const base = r.baseline.missing
      ? `no baseline (${r.baseline.missing})`
      : `redis ${r.baseline.test}, ${r.baseline.connections} conn`;
    console.log(`| ${label} | ${ops} | ${lat} | ${base} | ${r.baseline.missing ? "—" : fmtInt(r.baseline.req_per_s)} | ` +
      `${r.ratio === null ? "—" : `${r.ratio.toFixed(2)}x`} | ${r.goal} | ${r.met} |`);
  }
  console.log("");
  const bad = rows.filter((r) => !r.kvconnect.ok);
  console.log(bad.length
    ? `- runs with failures or errors (marked (!)): ${bad.map((r) => `${r.id} (${r.kvconnect.ops_per_s === null ? "no report" : `${fmtInt(r.kvconnect.errors)} errors`}, ` +
      `exit ${r.kvconnect.exit_codes.join(", ")})`).join("; ")}`
    : "- errors: none");
  for (const n of redis.rows.length ? [] : redis.notes) console.log(`- ${n}`);
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
  const { opts, exitCode } = commandLine(parseOptions, USAGE);
  if (!opts) return exitCode;
  const machine = machineInfo();
  printMachine(machine);

  const server = await startServer({ extraArgs: [...SERVER_ARGS, ...opts.serverArgs] });
  const runs = [];
  const rawRuns = [];
  const tools = { rows: [], notes: [] };
  let redis = { rows: [], notes: [], missing: "not measured" };
  try {
    log(`server: ${server.describe()}`);
    await runRounds(opts, TARGETS, runs, (row, target) => runBench(row, target, server, opts),
      describeDenoRun, (row) => {
        if (!server.running) throw new Error(`kvconnect exited during ${row.id}:\n${server.logTail(40)}`);
      });
    for (const row of opts.raw ? RAW_ROWS : []) {
      for (let rep = 0; rep < opts.repeat; rep++) {
        const r = await runRaw(row, server, opts);
        r.repeat = rep + 1;
        rawRuns.push(r);
        log(`[raw ${row.id} ${rep + 1}/${opts.repeat}] ${describeKvcBench(r)}`);
        if (r.stderr) log(r.stderr.trim().split("\n").slice(-10).map((l) => `    ${l}`).join("\n"));
        if (!server.running) throw new Error(`kvconnect exited during raw ${row.id}:\n${server.logTail(40)}`);
      }
    }
    if (opts.tools) {
      try {
        const t = await h2loadRows(server, opts);
        tools.rows.push(...t.rows);
        tools.notes.push(...t.notes);
      } catch (e) {
        tools.notes.push(`load tool failed: ${e.message}`);
      }
    }
    // redis-benchmark is measured once: for the tools table and as the raw rows' baseline.
    if (opts.tools || opts.raw) {
      try {
        redis = await redisRows(opts);
      } catch (e) {
        redis = { rows: [], notes: [`redis-benchmark failed: ${e.message}`], missing: "redis-benchmark failed" };
      }
      if (opts.tools) {
        tools.rows.push(...redis.rows);
        tools.notes.push(...redis.notes);
      }
    }
  } finally {
    await server.stop();
  }

  const rows = opts.rows.map((row) => summarize(row, runs));
  const rawRows = opts.raw ? RAW_ROWS.map((row) => summarizeRaw(row, rawRuns, redis, opts)) : [];
  printTable(rows, opts);
  if (opts.raw) printRawTable(rawRows, redis, opts);
  if (opts.tools) printTools(tools);

  if (opts.json) {
    const out = {
      machine,
      options: {
        duration: opts.duration, warmup: opts.warmup, repeat: opts.repeat, rows: opts.rows.map((r) => r.id),
        raw: opts.raw, tools: opts.tools,
      },
      server: { args: server.describe().replace(/--data-dir \S+/, "--data-dir <temp>").replace(/--ready-file \S+/, "--ready-file <temp>") },
      runs,
      rows,
      raw: opts.raw ? { rows: rawRows, runs: rawRuns, redis } : null,
      tools,
    };
    fs.writeFileSync(opts.json, `${JSON.stringify(out, null, 2)}\n`);
    log(`all results written to ${opts.json}`);
  }
  await removeTempDirs();
  const broken = rows.some((r) => !r.kvconnect.ok || !r.local.ok) ||
    rows.some((r) => r.workload === "transfer" && (r.kvconnect.preserved === false || r.local.preserved === false)) ||
    rawRows.some((r) => !r.kvconnect.ok);
  return broken ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e?.stack ?? String(e));
    process.exit(1);
  },
);
