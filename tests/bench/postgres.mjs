#!/usr/bin/env node
// PostgreSQL storage benchmark: kvconnect nodes on one PostgreSQL beside a kvconnect node on
// SQLite, in one run, both durable.
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/postgres.mjs [--duration 5] [--warmup 1]
//       [--json FILE] [--node-args="--reader-threads 8"] [--smoke]
//
// Starts, through ../e2e/harness.mjs and ../e2e/pg.mjs:
// * SQLite: `kvconnect serve --sync full --rate-limit-rps 0` on a fresh data dir (every commit
//   fsynced before it is acknowledged).
// * PostgreSQL 15 (pg.mjs: initdb in a temp dir) with fsync=on and synchronous_commit=on (every
//   commit flushed to its WAL on disk before it is acknowledged: durable like --sync full),
//   shared_buffers=128MB (PostgreSQL's default; the fixture's own is smaller), and
//   pg_stat_statements for the diagnostics below.
// * Two nodes `kvconnect serve --postgres <conninfo> --rate-limit-rps 0 ...` on it, with the
//   same access token (each registers the URL it is bound at).
// Then measures, one run each, in this order:
// 1. durable set: `kvconnect bench --workload set --connections 1 --streams 64` against the
//    SQLite node; against PG node 1; against both PG nodes at once (two bench processes, one per
//    node, 64 in flight each, seeds 1 and 2), ops/s summed. Ratios PG1/SQLite (goal >= 0.5x) and
//    PG2/PG1 (goal >= 1.0x).
// 2. get through the Deno client: deno/bench.ts (Deno.openKv(url), 10,000 keys written first,
//    64 concurrent kv.get loops) against PG node 1, then against the SQLite node. Ratio
//    PG/SQLite (goal >= 0.8x). Then `kvconnect bench --workload get --connections 1 --streams
//    64` against both, for context.
// Every row has p50/p99 latency. Under the table, where the time went:
// * CPU of each process group during each measurement (clients, nodes, PostgreSQL, the rest of
//   the machine), from /proc;
// * storage transactions: the SQLite node's /metrics (group commits, writes per commit, commit
//   time); for PostgreSQL pg_stat_statements, reset before each measurement (write and read
//   transactions, writes per transaction, time waiting for and taking the counter row's lock,
//   other statements' time);
// * what the nodes' PostgreSQL backends were doing (executing, lock, WAL, waiting for the
//   node), from pg_stat_activity sampled every 5 ms by a DO block in the `postgres` database.
//
// No figure fails the run: the exit code is 1 only when something could not run or reported
// errors. --smoke (0.5 s windows) is the ctest `bench_postgres_smoke`: it checks that every
// part runs and the table is printed, never the timings. The numbers belong to the machine they
// were taken on, which must be otherwise idle.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { randomToken, removeTempDirs, sleep, spawnDeno, startServer } from "../e2e/harness.mjs";
import { cleanupPg, startPg } from "../e2e/pg.mjs";
import {
  CLK_TCK, commandLine, describeKvcBench, fmtInt, fmtMs, log, machineInfo, numberOption,
  optionValues, postgresCpu, printMachine, procCpu, runKvcBench,
} from "./lib.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DENO_SCRIPT = path.join(HERE, "deno", "bench.ts");
const SQLITE_ARGS = ["--sync", "full", "--rate-limit-rps", "0"];
const PG_NODE_ARGS = ["--rate-limit-rps", "0"];
const PG_SETTINGS = [
  "fsync=on",
  "synchronous_commit=on",
  "shared_buffers=128MB",
  "shared_preload_libraries=pg_stat_statements",
];
/** `kvconnect bench` shape of every row: one HTTP/2 connection with 64 requests in flight. */
const SHAPE = ["--connections", "1", "--streams", "64"];
const IN_FLIGHT = 64;
const GOALS = { pg1VsSqlite: 0.5, pg2VsPg1: 1.0, denoGet: 0.8 };

const USAGE = `usage: KVCONNECT_BIN=build/kvconnect node tests/bench/postgres.mjs [options]

  --duration S   timed window of every measurement, seconds (default 5)
  --warmup S     untimed warm-up before it, seconds (default 1)
  --json FILE    also write the machine, the settings, every raw result and the table to FILE
  --node-args S  extra \`kvconnect serve\` flags for the PostgreSQL nodes, space-separated
                 (--node-args="--reader-threads 8"), printed with the results
  --smoke        0.5 s windows after 0.2 s warm-up: only checks that everything runs
  -h, --help     this text

Needs PostgreSQL 15 (KVC_PG_BINDIR, else /usr/lib/postgresql/15/bin) and \`npm ci\` in
tests/e2e (the Deno binary and the harness come from there). A run with the defaults takes
about 50 s.`;

function parseOptions(argv) {
  const values = optionValues(argv, {
    duration: { type: "string" },
    warmup: { type: "string" },
    json: { type: "string" },
    "node-args": { type: "string" },
    smoke: { type: "boolean" },
  });
  if (values.help) return { help: true };
  const smoke = Boolean(values.smoke);
  return {
    smoke,
    duration: numberOption(values, "duration", smoke ? 0.5 : 5, 0.1, false),
    warmup: numberOption(values, "warmup", smoke ? 0.2 : 1, 0, false),
    json: values.json,
    nodeArgs: (values["node-args"] ?? "").split(/\s+/).filter(Boolean),
  };
}

// ---------------------------------------------------------------------------
// Diagnostics: CPU of each process group, /metrics of a node, pg_stat_statements, pg_stat_activity

/** Busy and total CPU seconds of the whole machine, from /proc/stat. */
function machineCpu() {
  const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: (total - f[3] - f[4]) / CLK_TCK, total: total / CLK_TCK };
}

/**
 * CPU seconds used so far: by the clients (this process's reaped children: `kvconnect bench`
 * and Deno, which are waited for before a measurement ends), by the kvconnect nodes, by
 * PostgreSQL, and by the whole machine.
 */
function cpuSnapshot(nodes, pg) {
  return {
    at: performance.now(),
    clients: procCpu(process.pid)?.children ?? 0,
    nodes: nodes.reduce((n, s) => n + (procCpu(s.proc.pid)?.self ?? 0), 0),
    postgres: pg ? postgresCpu(pg.proc.pid) : 0,
    machine: machineCpu().busy,
  };
}

/** CPUs busy (1.0 = one CPU all the time) between two snapshots, per group. */
function cpuUse(a, b) {
  const wall = (b.at - a.at) / 1000;
  const cpus = (k) => (b[k] - a[k]) / wall;
  const use = { wall_s: wall, clients: cpus("clients"), nodes: cpus("nodes"), postgres: cpus("postgres"), machine: cpus("machine") };
  use.other = use.machine - use.clients - use.nodes - use.postgres;
  return use;
}

/** The samples of a Prometheus text exposition: [{name, labels: {..}, value}]. */
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The commit figures of a node's /metrics for writes (origin="write"), summed. */
async function commitMetrics(server) {
  const res = await fetch(`${server.url}/metrics`, {
    headers: { authorization: `Bearer ${server.token}` }, signal: AbortSignal.timeout(10_000),
  });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const samples = parseMetrics(await res.text());
  const sum = (name) => samples
    .filter((s) => s.name === name && s.labels.origin === "write")
    .reduce((n, s) => n + s.value, 0);
  return {
    groups: sum("kvconnect_commit_groups_total"),
    writes: sum("kvconnect_committed_writes_total"),
    transaction_s: sum("kvconnect_commit_transaction_seconds_sum"),
    transaction_count: sum("kvconnect_commit_transaction_seconds_count"),
    sync_s: sum("kvconnect_commit_sync_seconds_sum"),
    sync_count: sum("kvconnect_commit_sync_seconds_count"),
  };
}

/** What a SQLite node's write commits did between two commitMetrics() snapshots. */
function sqliteCommitDiag(before, after) {
  const d = (k) => after[k] - before[k];
  const groups = d("groups");
  const transactionMs = d("transaction_count") > 0 ? (1000 * d("transaction_s")) / d("transaction_count") : null;
  const commitMs = d("sync_count") > 0 ? (1000 * d("sync_s")) / d("sync_count") : null;
  return {
    kind: "sqlite",
    write_transactions: groups,
    writes: d("writes"),
    writes_per_transaction: groups > 0 ? d("writes") / groups : null,
    transaction_ms: transactionMs,
    commit_ms: commitMs,
    before_commit_ms: transactionMs !== null && commitMs !== null ? transactionMs - commitMs : null,
  };
}

async function resetPgStats(pg) {
  await pg.query("SELECT pg_stat_statements_reset()");
}

/**
 * What PostgreSQL's statements did since resetPgStats(), from pg_stat_statements of the
 * benchmark's database: write transactions (updates of the counter row) and the rows they
 * wrote, the time of the counter-row lock (SELECT ... FOR UPDATE: waiting for it and taking
 * it), read transactions (the version query of a read snapshot) and every other statement's
 * execution time. Statement times leave out the network and COMMIT's WAL flush.
 */
async function pgDiag(pg) {
  const row = await pg.query(`
    SELECT
      coalesce(sum(calls) FILTER (WHERE query LIKE 'update kvc_data_version%'), 0),
      coalesce(sum(rows) FILTER (WHERE query LIKE 'insert into kvc_kv %'), 0),
      coalesce(sum(total_exec_time) FILTER (WHERE query LIKE '%from kvc_data_version%for update%'), 0),
      coalesce(sum(calls) FILTER (WHERE (query LIKE 'select version from kvc_data_version%' OR query LIKE 'select d.version%') AND query NOT LIKE '%for update%'), 0),
      coalesce(sum(total_exec_time) FILTER (WHERE query NOT LIKE '%from kvc_data_version%for update%'), 0),
      coalesce(sum(calls), 0)
    FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'`);
  const [txns, sets, lockMs, readTxns, execMs, calls] = row.split("|").map(Number);
  return {
    kind: "postgres",
    write_transactions: txns,
    writes: sets,
    writes_per_transaction: txns > 0 ? sets / txns : null,
    lock_ms_per_transaction: txns > 0 ? lockMs / txns : null,
    read_transactions: readTxns,
    statements: calls,
    statement_ms: execMs,
  };
}

// Wait-event sampling: what the nodes' PostgreSQL backends are doing, every SAMPLE_INTERVAL_S,
// recorded by a DO block in the `postgres` database (so its long transaction holds back no
// cleanup in the benchmark's database) into WAITS_TABLE.
const WAITS_TABLE = "kvc_bench_waits";
const SAMPLE_INTERVAL_S = 0.005;

async function createWaitsTable(pg) {
  await pg.query(`CREATE TABLE ${WAITS_TABLE} (run text, round int, pid int, state text, wait text, query text)`,
    { dbname: "postgres" });
}

/** Samples pg_stat_activity of `database`'s kvconnect backends for `seconds` under `run`. */
async function sampleWaits(pg, database, run, seconds) {
  await pg.query(`
    DO $$
    DECLARE
      stop timestamptz := clock_timestamp() + make_interval(secs => ${seconds});
      n int := 0;
    BEGIN
      WHILE clock_timestamp() < stop LOOP
        n := n + 1;
        PERFORM pg_stat_clear_snapshot();
        INSERT INTO ${WAITS_TABLE}
          SELECT '${run}', n, pid, coalesce(state, ''), coalesce(wait_event_type || ':' || wait_event, ''), left(query, 60)
          FROM pg_stat_activity
          WHERE datname = '${database}' AND backend_type = 'client backend' AND application_name LIKE 'kvconnect%';
        PERFORM pg_sleep(${SAMPLE_INTERVAL_S});
      END LOOP;
    END $$`, { dbname: "postgres" });
}

/**
 * The samples of `run`, by role (a backend that ran a write statement is a writer, one that read
 * keys a reader) and by what it was doing: executing, waiting for the counter-row lock, WAL
 * (writing or flushing, or waiting for another backend's flush), in a transaction waiting for
 * the node (idle in transaction, or reading the rest of a pipeline), idle between transactions,
 * other waits. Shares are of the role's samples; `backends` is the role's backends per round.
 */
async function waitShares(pg, run) {
  const rows = await pg.query(`
    WITH s AS (SELECT * FROM ${WAITS_TABLE} WHERE run = '${run}'),
    roles AS (
      SELECT pid, CASE
        WHEN bool_or(query LIKE 'insert into kvc_kv %' OR query LIKE '%for update%' OR query LIKE 'update kvc_data_version%') THEN 'writer'
        WHEN bool_or(query LIKE 'select k, v, v_encoding%' OR query LIKE 'select d.version%') THEN 'reader'
        ELSE 'other' END AS role
      FROM s GROUP BY pid),
    c AS (
      SELECT r.role, CASE
        WHEN s.state = 'active' AND s.wait = '' THEN 'executing'
        WHEN s.state = 'active' AND s.wait LIKE 'Lock:%' THEN 'lock'
        WHEN s.state = 'active' AND (s.wait LIKE 'IO:WAL%' OR s.wait LIKE 'LWLock:WAL%') THEN 'wal'
        WHEN s.state LIKE 'idle in transaction%' OR (s.state = 'active' AND s.wait LIKE 'Client:%') THEN 'node_in_txn'
        WHEN s.state = 'idle' THEN 'idle'
        ELSE 'other' END AS what
      FROM s JOIN roles r USING (pid))
    SELECT role, what, count(*), (SELECT count(DISTINCT round) FROM s) FROM c GROUP BY role, what ORDER BY role, what`,
  { dbname: "postgres" });
  const out = {};
  for (const line of rows.split("\n").filter(Boolean)) {
    const [role, what, n, rounds] = line.split("|");
    out[role] ??= { samples: 0, rounds: Number(rounds), shares: {} };
    out[role].samples += Number(n);
    out[role].shares[what] = Number(n);
  }
  for (const r of Object.values(out)) {
    r.backends = r.rounds > 0 ? r.samples / r.rounds : null;
    for (const k of Object.keys(r.shares)) r.shares[k] /= r.samples;
  }
  return out;
}

/**
 * Runs `fn` (a measurement resolving a table cell) between diagnostics snapshots; resolves
 * the cell with `cpu` (CPUs busy per process group), `storage` (after(before()), or null) and,
 * with `sample` ({pg, database, run, delayS, seconds}), `waits` (waitShares of PostgreSQL
 * backends sampled from delayS after the start, for `seconds`).
 */
async function measure(fn, { nodes, pg, before, after, sample }) {
  const warn = (what) => (e) => log(`${what} unavailable: ${e.message}`);
  const failed = Symbol("failed");
  const snap = await before().catch((e) => (warn("storage diagnostics")(e), failed));
  const c0 = cpuSnapshot(nodes, pg);
  const sampling = sample
    ? sleep(sample.delayS * 1000).then(() => sampleWaits(sample.pg, sample.database, sample.run, sample.seconds))
      .then(() => true, (e) => warn("wait-event samples")(e))
    : Promise.resolve(false);
  const cell = await fn();
  cell.cpu = cpuUse(c0, cpuSnapshot(nodes, pg));
  cell.storage = snap === failed ? null : (await after(snap).catch(warn("storage diagnostics"))) ?? null;
  cell.waits = (await sampling) ? (await waitShares(sample.pg, sample.run).catch(warn("wait-event samples"))) ?? null : null;
  return cell;
}

// ---------------------------------------------------------------------------
// Measurements

function benchArgs(workload, opts, extra = []) {
  return ["--workload", workload, ...SHAPE, "--duration", String(opts.duration), "--warmup", String(opts.warmup), ...extra];
}

const benchTimeoutMs = (opts) => Math.ceil((opts.duration + opts.warmup) * 1000) + 120_000;

/** A `kvconnect bench` run as a table cell: ops/s and latency of one or more parallel runs. */
function kvcCell(runs) {
  const reports = runs.map((r) => r.report);
  const complete = reports.every(Boolean);
  return {
    source: "kvconnect bench",
    ok: runs.every((r) => r.ok),
    ops_per_s: complete ? reports.reduce((n, r) => n + r.ops_per_s, 0) : null,
    p50_ms: complete ? reports.map((r) => r.latency_ms.p50) : null,
    p99_ms: complete ? reports.map((r) => r.latency_ms.p99) : null,
    errors: reports.reduce((n, r) => n + (r?.errors.total ?? 0), 0),
    runs: runs.map((r) => ({
      command: r.command.replace(/--url \S+/, "--url <node>"), code: r.code, ok: r.ok, report: r.report, stderr: r.stderr,
    })),
  };
}

async function kvcBench(label, servers, workload, opts) {
  const runs = await Promise.all(servers.map((s, i) =>
    runKvcBench(s, benchArgs(workload, opts, ["--seed", String(i + 1)]), { timeoutMs: benchTimeoutMs(opts) })));
  runs.forEach((r, i) => log(`[${label}${servers.length > 1 ? ` node ${i + 1}` : ""}] ${describeKvcBench(r)}`));
  for (const r of runs) if (r.stderr) log(r.stderr.trim().split("\n").slice(-10).map((l) => `    ${l}`).join("\n"));
  return kvcCell(runs);
}

/** deno/bench.ts --workload get --concurrency 64 against `server`, as a table cell. */
async function denoGet(label, server, opts) {
  const env = {
    KV_BENCH_WORKLOAD: "get",
    KV_BENCH_CONCURRENCY: String(IN_FLIGHT),
    KV_BENCH_DURATION: String(opts.duration),
    KV_BENCH_WARMUP: String(opts.warmup),
    KV_BENCH_NS: `pg-${Math.random().toString(36).slice(2, 10)}`,
  };
  const timeoutMs = Math.ceil((opts.duration + opts.warmup) * 1000) + 180_000;
  const res = await spawnDeno(DENO_SCRIPT, { kvUrl: server.url, token: server.token, env, timeoutMs }).done;
  const s = res.summary;
  const valid = Boolean(s && typeof s.ops === "number" && s.workload === "get");
  const ok = res.code === 0 && valid && s.errors === 0;
  log(`[${label}] ${valid ? `${fmtInt(s.ops_per_s)} ops/s, p50 ${fmtMs(s.p50_ms)} ms, p99 ${fmtMs(s.p99_ms)} ms` +
    `${s.errors ? `, ${s.errors} errors` : ""}` : "FAILED"}${res.code === 0 ? "" : ` (exit ${res.code}${res.timedOut ? ", timed out" : ""})`}`);
  if (!ok) log(res.stderr.trim().split("\n").slice(-10).map((l) => `    ${l}`).join("\n"));
  return {
    source: "deno",
    ok,
    ops_per_s: valid ? s.ops_per_s : null,
    p50_ms: valid ? [s.p50_ms] : null,
    p99_ms: valid ? [s.p99_ms] : null,
    errors: valid ? s.errors : 0,
    runs: [{ command: `deno run --unstable-kv -A tests/bench/deno/bench.ts --workload get --concurrency ${IN_FLIGHT} ` +
      `--duration ${opts.duration} --warmup ${opts.warmup}`, code: res.code, ok, result: valid ? s : null,
      stderr: ok ? undefined : res.stderr.slice(-4000) }],
  };
}

// ---------------------------------------------------------------------------
// The table

function ratioRow(num, den, goal, what) {
  const ratio = num?.ops_per_s && den?.ops_per_s ? num.ops_per_s / den.ops_per_s : null;
  return {
    what,
    ratio,
    goal: goal === undefined ? "— (context)" : `≥ ${goal.toFixed(1)}x`,
    met: goal === undefined ? "—" : ratio === null ? "n/a (failed)" : ratio >= goal ? "yes" : "**no**",
  };
}

function buildRows(m) {
  return [
    { part: "1", measurement: "durable set, `kvconnect bench` 1 conn x 64 streams", target: "SQLite node", cell: m.setSqlite },
    { part: "1", measurement: "durable set, `kvconnect bench` 1 conn x 64 streams", target: "PG, 1 node", cell: m.setPg1,
      ratio: ratioRow(m.setPg1, m.setSqlite, GOALS.pg1VsSqlite, "PG1/SQLite") },
    { part: "1", measurement: "durable set, `kvconnect bench` 2 x (1 conn x 64 streams)", target: "PG, 2 nodes (sum)", cell: m.setPg2,
      ratio: ratioRow(m.setPg2, m.setPg1, GOALS.pg2VsPg1, "PG2/PG1") },
    { part: "2", measurement: "get, Deno client (`Deno.openKv(url)`), 64 in flight", target: "SQLite node", cell: m.denoSqlite },
    { part: "2", measurement: "get, Deno client (`Deno.openKv(url)`), 64 in flight", target: "PG, 1 node", cell: m.denoPg,
      ratio: ratioRow(m.denoPg, m.denoSqlite, GOALS.denoGet, "PG/SQLite") },
    { part: "2", measurement: "get, `kvconnect bench` 1 conn x 64 streams", target: "SQLite node", cell: m.getSqlite },
    { part: "2", measurement: "get, `kvconnect bench` 1 conn x 64 streams", target: "PG, 1 node", cell: m.getPg,
      ratio: ratioRow(m.getPg, m.getSqlite, undefined, "PG/SQLite") },
  ];
}

const fmtLatList = (xs) => (xs ? xs.map(fmtMs).join(" / ") : "—");

function printTable(rows, ctx, opts) {
  console.log("### kvconnect on PostgreSQL vs. on SQLite\n");
  console.log(`- SQLite node: \`kvconnect serve ${SQLITE_ARGS.join(" ")}\` (fresh data dir; every commit fsynced ` +
    "before it is acknowledged; read cache at its default)");
  console.log(`- PostgreSQL: ${ctx.pgVersion}, ${ctx.pgSettings}: every commit is flushed to the WAL on disk ` +
    "before it is acknowledged, durable like SQLite's `--sync full`; client and server on this machine over TCP");
  console.log(`- PG nodes: 2 x \`kvconnect serve --postgres <conninfo> ${[...PG_NODE_ARGS, ...opts.nodeArgs].join(" ")}\` ` +
    "(no read cache: other nodes write too)");
  console.log(`- every measurement: ${opts.duration} s timed after ${opts.warmup} s warm-up, one run; ` +
    "10,000 keys, 100-character values; latencies in ms (the 2-node row: node 1 / node 2)\n");
  console.log("| part | measurement | target | ops/s | p50 ms | p99 ms | ratio | goal | met? |");
  console.log("|---|---|---|---:|---:|---:|---:|---|---|");
  for (const r of rows) {
    const c = r.cell;
    const ops = c.ops_per_s === null ? "failed" : `${fmtInt(c.ops_per_s)}${c.ok ? "" : " (!)"}`;
    const ratio = r.ratio ? `${r.ratio.what} ${r.ratio.ratio === null ? "—" : `${r.ratio.ratio.toFixed(2)}x`}` : "";
    console.log(`| ${r.part} | ${r.measurement} | ${r.target} | ${ops} | ${fmtLatList(c.p50_ms)} | ` +
      `${fmtLatList(c.p99_ms)} | ${ratio} | ${r.ratio?.goal ?? ""} | ${r.ratio?.met ?? ""} |`);
  }
  console.log("");
  const bad = rows.filter((r) => !r.cell.ok);
  console.log(bad.length
    ? `- runs with failures or errors (marked (!)): ${bad.map((r) => `${r.measurement}, ${r.target} (${fmtInt(r.cell.errors)} errors)`).join("; ")}`
    : "- errors: none");
  console.log("- the 2-node row runs two `kvconnect bench` processes at once (128 requests in flight in all); " +
    "client, nodes and databases share this machine's CPUs");
  console.log("");
}

const fmtCpu = (x) => (x === null || x === undefined ? "—" : x.toFixed(2));

function printCpu(rows, machine) {
  console.log(`### CPU during each measurement (CPUs busy; this machine has ${machine.nproc})\n`);
  console.log("| measurement | target | clients | kvconnect node(s) | PostgreSQL | other processes | machine | " +
    "CPU ms per 1,000 ops (clients + nodes + PostgreSQL) |");
  console.log("|---|---|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const u = r.cell.cpu;
    if (!u) continue;
    const ops = r.cell.ops_per_s;
    const perK = ops ? (1e6 * (u.clients + u.nodes + u.postgres)) / ops : null;
    console.log(`| ${r.measurement} | ${r.target} | ${fmtCpu(u.clients)} | ${fmtCpu(u.nodes)} | ` +
      `${r.target.startsWith("PG") ? fmtCpu(u.postgres) : "—"} | ${fmtCpu(u.other)} | ${fmtCpu(u.machine)} | ${fmtCpu(perK)} |`);
  }
  console.log("");
  console.log("- over each measurement's whole run (connecting, preloading the keys, warm-up and window); " +
    "clients: the `kvconnect bench` or Deno processes (CPU of children once they exited); PostgreSQL: " +
    "the postmaster and its live children; other processes: the rest of the machine (other work running " +
    "at the same time); per 1,000 ops uses the window's ops/s, so it runs a little high");
  console.log("");
}

function printStorage(rows) {
  const f1 = (x) => (x === null || x === undefined ? "—" : x.toFixed(1));
  // Write transactions follow one another (one writer per node, the counter-row lock across nodes).
  const wallPerTxn = (r) => (r.part === "1" && r.cell.storage.write_transactions > 0
    ? (1000 * r.cell.cpu.wall_s) / r.cell.storage.write_transactions : null);
  console.log("### Storage transactions (whole measurement: preload and warm-up included)\n");
  console.log("| measurement | target | write txns | writes per write txn | wall ms per write txn | read txns | " +
    "counter-row lock ms per write txn | statement ms per txn | commit ms |");
  console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const d = r.cell.storage;
    if (!d) continue;
    if (d.kind === "sqlite") {
      if (r.part !== "1") continue;  // a get row's writes are its preload
      console.log(`| ${r.measurement} | ${r.target} | ${fmtInt(d.write_transactions)} | ${f1(d.writes_per_transaction)} | ` +
        `${fmtMs(wallPerTxn(r))} | — | — | ${fmtMs(d.before_commit_ms)} | ${fmtMs(d.commit_ms)} |`);
    } else {
      const txns = d.write_transactions + d.read_transactions;
      console.log(`| ${r.measurement} | ${r.target} | ${fmtInt(d.write_transactions)} | ${f1(d.writes_per_transaction)} | ` +
        `${fmtMs(wallPerTxn(r))} | ${fmtInt(d.read_transactions)} | ${fmtMs(d.lock_ms_per_transaction)} | ${fmtMs(txns ? d.statement_ms / txns : null)} | — |`);
    }
  }
  console.log("");
  console.log("- SQLite rows (write transactions only): the node's /metrics (`kvconnect_commit_*`, origin `write`): " +
    "a group commit is one transaction; wall ms per write txn is the measurement's wall time over its write " +
    "transactions (they follow one another), statement ms a transaction's time before the commit call, commit ms the commit " +
    "call (mostly the fsync). Reads do not show there, so only the set rows are listed");
  console.log("- PostgreSQL rows: pg_stat_statements of the benchmark's database, reset before each measurement: a " +
    "write transaction is one update of the database's counter row, a read transaction one read snapshot; " +
    "the lock column is the time of `SELECT ... FOR UPDATE` on the counter row (waiting for the other node's " +
    "transaction included); statement ms is every other statement's execution time per transaction, " +
    "without the network and without COMMIT's WAL flush (the PG nodes' `kvconnect_commit_*` histograms " +
    "stay empty: their commits reach the metrics through the change feed, without timings)");
  console.log("");
}

const WAIT_COLUMNS = [
  ["executing", "executing"],
  ["lock", "counter-row lock"],
  ["wal", "WAL write / flush"],
  ["node_in_txn", "in a transaction, waiting for the node"],
  ["idle", "idle, waiting for the node"],
  ["other", "other waits"],
];

function printWaits(rows) {
  const sampled = rows.filter((r) => r.cell.waits);
  if (!sampled.length) return;
  console.log(`### PostgreSQL backends of the nodes, sampled every ${SAMPLE_INTERVAL_S * 1000} ms in the window\n`);
  console.log(`| measurement | target | role | backends | ${WAIT_COLUMNS.map(([, h]) => h).join(" | ")} |`);
  console.log(`|---|---|---|---:|${WAIT_COLUMNS.map(() => "---:").join("|")}|`);
  for (const r of sampled) {
    for (const role of ["writer", "reader"]) {
      const w = r.cell.waits[role];
      if (!w) continue;
      const pct = (k) => `${Math.round(100 * (w.shares[k] ?? 0))} %`;
      console.log(`| ${r.measurement} | ${r.target} | ${role} | ${w.backends === null ? "—" : w.backends.toFixed(1)} | ` +
        `${WAIT_COLUMNS.map(([k]) => pct(k)).join(" | ")} |`);
    }
  }
  console.log("");
  console.log("- pg_stat_activity of the nodes' backends, sampled from PostgreSQL itself (a DO block in the `postgres` " +
    `database) for ${(0.6).toFixed(1)}x the window, starting about 1 s after the warm-up (past the preload). A backend ` +
    "that ran a write statement is a writer, one that read keys a reader; backends is the average number of them. " +
    "Shares are of a role's samples. \"Waiting for the node\": the backend waits for the kvconnect node's next " +
    "message (network, the node's CPU, its queue); in a transaction the write transaction holds the counter-row " +
    "lock meanwhile");
  console.log("");
}

// ---------------------------------------------------------------------------

async function main() {
  const { opts, exitCode } = commandLine(parseOptions, USAGE);
  if (!opts) return exitCode;
  const machine = machineInfo();
  printMachine(machine, "kvconnect benchmark: PostgreSQL storage");

  const servers = [];
  let pg = null;
  const m = {};
  const ctx = {};
  try {
    // tcp: the nodes reach PostgreSQL over TCP on 127.0.0.1, as they would over a network
    // (the fixture's default, a Unix socket, is cheaper than any deployment).
    pg = await startPg({ fsync: true, settings: PG_SETTINGS, tcp: true });
    await pg.query("CREATE EXTENSION pg_stat_statements");
    const shown = (await pg.query(
      "SELECT version(), current_setting('fsync'), current_setting('synchronous_commit'), " +
      "current_setting('wal_sync_method'), current_setting('full_page_writes'), current_setting('shared_buffers')")).split("|");
    ctx.pgVersion = (/^PostgreSQL \S+/.exec(shown[0]) ?? [shown[0]])[0];
    ctx.pgSettings = `fsync=${shown[1]}, synchronous_commit=${shown[2]}, wal_sync_method=${shown[3]}, ` +
      `full_page_writes=${shown[4]}, shared_buffers=${shown[5]}`;
    if (shown[1] !== "on" || shown[2] !== "on") throw new Error(`PostgreSQL is not durable: ${ctx.pgSettings}`);
    log(`postgres: ${ctx.pgVersion} on port ${pg.port}, ${ctx.pgSettings}`);

    const sqlite = await startServer({ extraArgs: SQLITE_ARGS });
    servers.push(sqlite);
    const token = randomToken();
    const pgNodes = [];
    for (let i = 0; i < 2; i++) {
      // Each node registers the URL it is bound at (port 0: the kernel's choice) in the node
      // registry, which is what --advertise-url would say here.
      const node = await startServer({
        token,
        extraArgs: ["--postgres", pg.conninfo, ...PG_NODE_ARGS, ...opts.nodeArgs],
      });
      servers.push(node);
      pgNodes.push(node);
    }
    ctx.servers = servers.map((s) => s.describe().replace(/--data-dir \S+/, "--data-dir <temp>").replace(/--ready-file \S+/, "--ready-file <temp>"));
    for (const d of ctx.servers) log(`server: ${d}`);

    await createWaitsTable(pg);
    const database = await pg.query("SELECT current_database()");
    const onSqlite = {
      nodes: [sqlite], pg: null,
      before: () => commitMetrics(sqlite), after: async (b) => sqliteCommitDiag(b, await commitMetrics(sqlite)),
    };
    const onPg = (nodes, run) => ({
      nodes, pg,
      before: () => resetPgStats(pg),
      after: () => pgDiag(pg),
      // the middle of the window, roughly: after the warm-up and the preload (or Deno's start)
      sample: { pg, database, run, delayS: opts.warmup + Math.min(1, 0.2 * opts.duration), seconds: 0.6 * opts.duration },
    });
    m.setSqlite = await measure(() => kvcBench("set, SQLite node", [sqlite], "set", opts), onSqlite);
    m.setPg1 = await measure(() => kvcBench("set, PG 1 node", [pgNodes[0]], "set", opts), onPg([pgNodes[0]], "set_pg1"));
    m.setPg2 = await measure(() => kvcBench("set, PG 2 nodes", pgNodes, "set", opts), onPg(pgNodes, "set_pg2"));
    m.denoPg = await measure(() => denoGet("get, Deno, PG node", pgNodes[0], opts), onPg([pgNodes[0]], "deno_get_pg"));
    m.denoSqlite = await measure(() => denoGet("get, Deno, SQLite node", sqlite, opts), onSqlite);
    m.getPg = await measure(() => kvcBench("get, PG node", [pgNodes[0]], "get", opts), onPg([pgNodes[0]], "get_pg"));
    m.getSqlite = await measure(() => kvcBench("get, SQLite node", [sqlite], "get", opts), onSqlite);

    for (const s of servers) {
      if (!s.running) throw new Error(`${s.describe()} exited during the run:\n${s.logTail(40)}`);
    }
  } finally {
    for (const s of servers) await s.stop();
    if (pg) await pg.cleanup();
    await cleanupPg();
  }

  const rows = buildRows(m);
  printTable(rows, ctx, opts);
  printCpu(rows, machine);
  printStorage(rows);
  printWaits(rows);

  if (opts.json) {
    const out = {
      machine,
      options: { duration: opts.duration, warmup: opts.warmup, smoke: opts.smoke, node_args: opts.nodeArgs },
      postgres: { version: ctx.pgVersion, settings: ctx.pgSettings, command_line: PG_SETTINGS },
      servers: ctx.servers,
      rows: rows.map((r) => ({ part: r.part, measurement: r.measurement, target: r.target, ...r.cell, ratio: r.ratio })),
    };
    fs.writeFileSync(opts.json, `${JSON.stringify(out, null, 2)}\n`);
    log(`all results written to ${opts.json}`);
  }
  await removeTempDirs();
  return rows.every((r) => r.cell.ok) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e?.stack ?? String(e));
    process.exit(1);
  },
);
