#!/usr/bin/env node
// The no-work ceiling: the same Deno-client workloads against kvconnect and against a server
// that does no work at all, in one run, printed side by side.
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/ceiling.mjs [--duration 5] [--warmup 1]
//       [--repeat 2] [--workloads get@1,set,...] [--storage sqlite|postgres] [--json results.json]
//       [--smoke]
//
// * kvconnect: `kvconnect serve --sync full --rate-limit-rps 0` through ../e2e/harness.mjs
//   (fresh data dir, random token, port 0), as in run.mjs. With --storage postgres, a node
//   `kvconnect serve --postgres CONNINFO --rate-limit-rps 0` on a PostgreSQL 15 that this script
//   starts (../e2e/pg.mjs, fsync=on, synchronous_commit=on: durable like --sync full); its CPU
//   per operation is then the node's plus PostgreSQL's (postmaster and backends), both shown.
// * ceiling: Debian's `nghttpd` (package nghttp2-server) in plain-text HTTP/2 on 127.0.0.1
//   port 0, serving a directory of canned KV Connect answers this script writes first: the
//   metadata exchange JSON, and for each workload a fixed SnapshotReadOutput and a fixed
//   AtomicWriteOutput, encoded with `protoc --encode` from proto/datapath.proto. nghttpd
//   answers a POST with the file at its path and ignores the body, so every answer costs it
//   the same small constant work; no KV Connect server can answer the same client faster.
// * Every row runs deno/bench.ts (the real Deno client, `Deno.openKv`) against both, with
//   --repeat N runs per target alternating which goes first; the best run of each target (the
//   highest ops/s) is reported with its own latencies and CPU.
// * Around the timed window bench.ts prints marks (KV_BENCH_MARKS=1); at each mark this
//   script reads the user+system CPU time of the server process (and of the Deno client) from
//   /proc/PID/stat, so the CPU per operation covers exactly the measured window.
// * Prints the machine, then a markdown table: ops/s and p50/p99 of both, their ratio
//   (kvconnect / ceiling), and the server CPU per operation of each server process; then where
//   the CPU went, with kvconnect's split by thread (its I/O threads, its writers, the rest),
//   read from /proc/PID/task/*/{comm,stat} at the same marks (the server names its threads by
//   role, src/common/thread_name.h). No figure
//   fails the run; the exit code is 1 when a run failed or reported errors, or kvconnect's
//   bank transfers lost money. --smoke (ctest bench_ceiling_smoke) runs every row briefly and
//   checks that both targets ran every row without errors, that kvconnect's threads named
//   kvc-io and kvc-writer were found, and that the table was printed.
//
// The numbers belong to the machine they were taken on, which must be otherwise idle.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import http2 from "node:http2";
import path from "node:path";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import { makeTempDir, removeTempDirs, sleep, startServer } from "../e2e/harness.mjs";
import { cleanupPg, startPg } from "../e2e/pg.mjs";
import {
  commandLine, DENO_RUN_OPTIONS, describeDenoRun, fmtInt, fmtMs, listeningPorts, log, machineInfo,
  numberOption, optionValues, postgresCpu, printMachine, procCpu, runDenoBench, runRounds, selectRows,
  spawnHelper, threadCpu, threadCpuBetween, tupleKey, which,
} from "./lib.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PROTO_DIR = path.resolve(HERE, "../../proto");

/** The rows of the table, in order (ids as the performance issue names them). */
const ROWS = [
  { id: "get@1", workload: "get", concurrency: 1 },
  { id: "get@64", workload: "get", concurrency: 64 },
  { id: "set@64", workload: "set", concurrency: 64 },
  { id: "getMany@64", workload: "getmany", concurrency: 64 },
  { id: "list@16", workload: "list", concurrency: 16 },
  { id: "bank@64", workload: "transfer", concurrency: 64 },
];
const WORKLOADS = ["get", "set", "getmany", "list", "transfer"];
const TARGETS = ["kvconnect", "ceiling"];
const SERVER_ARGS = ["--sync", "full", "--rate-limit-rps", "0"];
const PG_NODE_ARGS = ["--rate-limit-rps", "0"];
// Durable like --sync full: every commit flushed to PostgreSQL's WAL before it is acknowledged.
const PG_SETTINGS = ["fsync=on", "synchronous_commit=on", "shared_buffers=128MB"];
const STORAGES = ["sqlite", "postgres"];

// What the workloads read. A list must fit one page: Deno asks for 100 entries a page and
// asks again after a full one, and the canned server would give the same full page forever.
const LIST_SIZE = 99;
const GETMANY_KEYS = 10;  // the most one snapshot read of Deno's may carry
const ACCOUNTS = 100;
/** The key namespace of the canned answers, also used by the ceiling's client. */
const CANNED_NS = "ceiling-canned0";
const VALUE = "v".repeat(100);  // bench.ts's value
const BALANCE = 1000;  // bench.ts's starting balance
const VERSIONSTAMP = Buffer.from("00000000000000010000", "hex");

// ---------------------------------------------------------------------------
// Options

const USAGE = `usage: KVCONNECT_BIN=build/kvconnect node tests/bench/ceiling.mjs [options]

  --duration S      timed window of every benchmark, seconds (default 5)
  --warmup S        untimed warm-up before it, seconds (default 1)
  --repeat N        runs per target and row, alternating which goes first; the best run
                    (highest ops/s) of each target is reported (default 1)
  --workloads LIST  comma-separated rows: ${ROWS.map((r) => r.id).join(", ")};
                    a bare workload name (${WORKLOADS.join(", ")}) selects its rows; any other
                    <workload>@<in flight> adds a row (default: all rows)
  --storage KIND    ${STORAGES.join(" or ")} (default sqlite): what the kvconnect server keeps its
                    data in; postgres starts a PostgreSQL 15 for the run (KVC_PG_BINDIR, else
                    /usr/lib/postgresql/15/bin) and adds its CPU to kvconnect's
  --json FILE       also write every raw result, the machine and the table to FILE
  --smoke           brief windows (0.3 s after 0.2 s, 1,000 keys), then check that both targets
                    ran every row without errors, that kvconnect's I/O and writer threads were
                    found by name, and that the table was printed (ctest bench_ceiling_smoke);
                    the figures mean nothing
  -h, --help        this text

Needs nghttpd (Debian: apt-get install nghttp2-server; NGHTTPD_BIN=<path> picks another),
protoc (protobuf-compiler) and
\`npm ci\` in tests/e2e (the Deno binary and the harness come from there).`;

function parseOptions(argv) {
  const values = optionValues(argv, {
    ...DENO_RUN_OPTIONS,
    smoke: { type: "boolean" },
    storage: { type: "string" },
  });
  if (values.help) return { help: true };
  const smoke = Boolean(values.smoke);
  const storage = values.storage ?? "sqlite";
  if (!STORAGES.includes(storage)) throw new Error(`--storage takes ${STORAGES.join(" or ")}, not ${storage}`);
  const num = (name, def, min, integer) => numberOption(values, name, def, min, integer);
  return {
    smoke,
    duration: num("duration", smoke ? 0.3 : 5, 0.1, false),
    warmup: num("warmup", smoke ? 0.2 : 1, 0, false),
    repeat: num("repeat", 1, 1, true),
    keys: smoke ? 1000 : 10000,
    rows: selectRows(values.workloads, ROWS, WORKLOADS),
    json: values.json,
    storage,
  };
}

// ---------------------------------------------------------------------------
// The canned answers

/** Bytes as a protobuf text-format string literal: every byte a three-digit octal escape. */
const textBytes = (buf) => `"${[...buf].map((b) => `\\${b.toString(8).padStart(3, "0")}`).join("")}"`;

/** `text` (protobuf text format) encoded as message `type` of proto/datapath.proto. */
function protocEncode(type, text) {
  const res = spawnSync("protoc", [`--proto_path=${PROTO_DIR}`, `--encode=com.deno.kv.datapath.${type}`, "datapath.proto"], {
    input: text, maxBuffer: 16 << 20,
  });
  if (res.error) {
    throw new Error(`protoc failed to start (${res.error.message}): install Debian's protobuf-compiler`);
  }
  if (res.status !== 0) throw new Error(`protoc --encode=${type} failed: ${res.stderr}\n--- input ---\n${text}`);
  return res.stdout;
}

/** A SnapshotReadOutput: `ranges` is an array of ranges, each an array of [key, value]. */
function snapshotReadOutput(ranges) {
  const entry = ([key, value]) => `values { key: ${textBytes(key)} value: ${textBytes(v8.serialize(value))} ` +
    `encoding: VE_V8 versionstamp: ${textBytes(VERSIONSTAMP)} }`;
  const text = ranges.map((entries) => `ranges { ${entries.map(entry).join(" ")} }\n`).join("") +
    "read_disabled: false\nread_is_strongly_consistent: true\nstatus: SR_SUCCESS\n";
  return protocEncode("SnapshotReadOutput", text);
}

/**
 * The one answer to every snapshot read of a workload, as deno/bench.ts would get it from a
 * server holding its data: get one entry, getMany GETMANY_KEYS ranges of one entry, list
 * LIST_SIZE entries in one range, transfer's getMany two accounts with BALANCE each. (set
 * reads nothing; it gets get's answer.)
 */
function cannedRead(workload) {
  const key = (...parts) => tupleKey("bench", CANNED_NS, workload, ...parts);
  switch (workload) {
    case "get":
    case "set":
      return snapshotReadOutput([[[key(4242), VALUE]]]);
    case "getmany":
      return snapshotReadOutput(Array.from({ length: GETMANY_KEYS }, (_, i) => [[key(1000 + i), VALUE]]));
    case "list":
      return snapshotReadOutput([Array.from({ length: LIST_SIZE }, (_, i) => [key(i), VALUE])]);
    case "transfer":
      return snapshotReadOutput([[[key("acct", 17), BALANCE]], [[key("acct", 42), BALANCE]]]);
    default:
      throw new Error(`no canned answer for workload ${workload}`);
  }
}

/**
 * Writes the htdocs directory nghttpd serves: for each workload W, `W/metadata.json` (the
 * metadata exchange answer; Deno opens http://host:port/W/metadata.json) naming the endpoint
 * `/W/v3`, and `W/v3/snapshot_read` and `W/v3/atomic_write` (the data-path answers). Returns
 * the sizes of the answers, for the report.
 */
function writeCannedAnswers(dir) {
  const atomicWrite = protocEncode("AtomicWriteOutput", `status: AW_SUCCESS versionstamp: ${textBytes(VERSIONSTAMP)}\n`);
  const sizes = {};
  for (const w of WORKLOADS) {
    fs.mkdirSync(path.join(dir, w, "v3"), { recursive: true });
    const metadata = {
      version: 3,
      databaseId: "00000000-0000-0000-0000-000000000000",
      endpoints: [{ url: `/${w}/v3`, consistency: "strong" }],
      token: "canned-data-path-token",
      expiresAt: "2999-12-31T23:59:59Z",
    };
    fs.writeFileSync(path.join(dir, w, "metadata.json"), JSON.stringify(metadata));
    const read = cannedRead(w);
    fs.writeFileSync(path.join(dir, w, "v3", "snapshot_read"), read);
    fs.writeFileSync(path.join(dir, w, "v3", "atomic_write"), atomicWrite);
    sizes[w] = { snapshot_read: read.length, atomic_write: atomicWrite.length };
  }
  return sizes;
}

// ---------------------------------------------------------------------------
// The canned server: nghttpd

function nghttpdVersion(bin) {
  const res = spawnSync(bin, ["--version"], { encoding: "utf8", timeout: 10_000 });
  return (res.stdout || res.stderr || "").split("\n")[0].trim() || "unknown";
}

/**
 * Starts `nghttpd --no-tls` on 127.0.0.1 port 0 serving `htdocs` and finds the port it got
 * (listeningPorts). Fails, saying to install nghttp2-server, when nghttpd is not on PATH.
 */
async function startNghttpd(htdocs) {
  // NGHTTPD_BIN overrides; Debian installs it in /usr/sbin, which is not on every user's PATH.
  const override = process.env.NGHTTPD_BIN;
  const bin = override
    ? (fs.existsSync(override) ? override : null)
    : which("nghttpd") ?? (fs.existsSync("/usr/sbin/nghttpd") ? "/usr/sbin/nghttpd" : null);
  if (!bin) {
    throw new Error(`nghttpd not found (${override ? `NGHTTPD_BIN=${override}` : "on PATH or in /usr/sbin"}): the no-work ` +
      "ceiling needs it. Install Debian's nghttp2-server (apt-get install nghttp2-server; deploy/dev.sh test installs it)");
  }
  const args = ["--no-tls", "--address=127.0.0.1", `--htdocs=${htdocs}`, "0"];
  const proc = spawnHelper(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout.on("data", (d) => (out = (out + d).slice(-4000)));
  proc.stderr.on("data", (d) => (out = (out + d).slice(-4000)));
  proc.once("error", (e) => (out += `spawn error: ${e.message}\n`));
  const running = () => proc.exitCode === null && proc.signalCode === null;
  const deadline = Date.now() + 10_000;
  let ports = [];
  while (running() && Date.now() < deadline) {
    ports = listeningPorts(proc.pid);
    if (ports.length) break;
    await sleep(25);
  }
  if (ports.length !== 1) {
    proc.kill("SIGKILL");
    throw new Error(`nghttpd ${args.join(" ")} ${running() ? `listens on ${ports.length} ports` : "exited"}:\n${out}`);
  }
  return {
    proc,
    pid: proc.pid,
    port: ports[0],
    version: nghttpdVersion(bin),
    command: `nghttpd ${args.join(" ").replace(htdocs, "<htdocs>")}`,
    running,
    output: () => out,
    stop: () => proc.kill("SIGTERM"),
  };
}

/** POSTs a metadata exchange to the canned server, as Deno does first; throws unless 200 JSON v3. */
function checkCannedMetadata(url) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const client = http2.connect(u.origin);
    const fail = (e) => {
      client.destroy();
      reject(new Error(`the canned server did not answer the metadata exchange at ${url}: ${e.message ?? e}`));
    };
    client.once("error", fail);
    const req = client.request({ ":method": "POST", ":path": u.pathname, "content-type": "application/json" });
    let status;
    let body = "";
    req.on("response", (h) => (status = h[":status"]));
    req.on("data", (d) => (body += d));
    req.on("error", fail);
    req.on("end", () => {
      client.close();
      try {
        if (status !== 200 || JSON.parse(body).version !== 3) throw new Error(`status ${status}, body ${body}`);
        resolve();
      } catch (e) {
        fail(e);
      }
    });
    req.end(JSON.stringify({ supportedVersions: [1, 2, 3] }));
  });
}

// ---------------------------------------------------------------------------
// Runs

/**
 * CPU seconds of the server, of its PostgreSQL (when `pgPid`) and of the Deno client now; null
 * where a process is gone. With `byThread`, also the server's threads (lib.mjs threadCpu).
 */
function cpuSample(serverPid, clientPid, pgPid, byThread) {
  return {
    at: performance.now(),
    server: procCpu(serverPid)?.self ?? null,
    client: procCpu(clientPid)?.self ?? null,
    pg: pgPid ? postgresCpu(pgPid) : null,
    threads: byThread ? threadCpu(serverPid) : null,
  };
}

// kvconnect's threads by role (src/common/thread_name.h): HTTP I/O, the databases' writers, and
// the rest (readers, checkpoints, the catalog poll, metrics, ...).
const THREAD_GROUPS = [["io", ["kvc-io"]], ["writer", ["kvc-writer"]]];

/** CPU over the window between two samples: seconds, cores busy and µs per operation. */
function cpuOverWindow(start, end, ops) {
  if (!start || !end || start.server === null || end.server === null || !ops) return null;
  const wall = (end.at - start.at) / 1000;
  const server = end.server - start.server;
  const client = start.client === null || end.client === null ? null : end.client - start.client;
  const pg = start.pg === null || end.pg === null ? null : end.pg - start.pg;
  let threads = null;
  if (start.threads && end.threads) {
    const byName = threadCpuBetween(start.threads, end.threads);
    threads = { names: Object.keys(byName).sort() };
    let grouped = 0;
    for (const [group, names] of THREAD_GROUPS) {
      const secs = names.reduce((n, name) => n + (byName[name] ?? 0), 0);
      threads[`${group}_us_per_op`] = (secs * 1e6) / ops;
      grouped += secs;
    }
    threads.rest_us_per_op = (Math.max(0, server - grouped) * 1e6) / ops;
  }
  return {
    threads,
    pg_us_per_op: pg === null ? null : (pg * 1e6) / ops,
    wall_s: wall,
    server_s: server,
    client_s: client,
    server_us_per_op: (server * 1e6) / ops,
    client_us_per_op: client === null ? null : (client * 1e6) / ops,
    server_cores: wall > 0 ? server / wall : null,
    client_cores: wall > 0 && client !== null ? client / wall : null,
  };
}

async function runOne(row, target, targets, opts) {
  const t = targets[target];
  const marks = {};
  const env = {
    KV_BENCH_MARKS: "1",
    KV_BENCH_KEYS: String(opts.keys),
    KV_BENCH_LIST_SIZE: String(LIST_SIZE),
    KV_BENCH_GETMANY_KEYS: String(GETMANY_KEYS),
    KV_BENCH_ACCOUNTS: String(ACCOUNTS),
    // The canned server keeps no state: nothing to read back after the transfers.
    ...(target === "ceiling" ? { KV_BENCH_NS: CANNED_NS, KV_BENCH_VERIFY: "0" } : {}),
  };
  const r = await runDenoBench(row, target, {
    kvUrl: t.urlFor(row.workload),
    token: t.token,
    opts,
    env,
    onStdoutLine: (line, proc) => {
      if (line === "# window-start") marks.start = cpuSample(t.pid, proc.pid, t.pgPid, target === "kvconnect");
      else if (line === "# window-end") marks.end = cpuSample(t.pid, proc.pid, t.pgPid, target === "kvconnect");
    },
  });
  r.cpu = cpuOverWindow(marks.start, marks.end, r.result?.ops);
  if (r.ok && !r.cpu) {
    r.ok = false;
    r.problem = "no CPU sample over the timed window (a window mark or the server process was missing)";
  }
  return r;
}

function describeOne(r) {
  const cpu = r.cpu ? `, server CPU ${fmtUs(r.cpu.server_us_per_op)} µs/op (${fmtCores(r.cpu.server_cores)} cores)` : "";
  return `${describeDenoRun(r)}${cpu}${r.problem ? `; ${r.problem}` : ""}`;
}

/** One target of a row: its best run (highest ops/s) and whether all its runs were fine. */
function summarizeSide(row, target, runs) {
  const mine = runs.filter((r) => r.row === row.id && r.target === target);
  const done = mine.filter((r) => r.result);
  const out = { runs: mine.length, failed: mine.filter((r) => !r.ok).length, ok: mine.length > 0 && mine.every((r) => r.ok) };
  if (row.workload === "transfer") {
    out.total_check = target === "ceiling"
      ? "n/a (canned answers keep no state)"
      : done.map((r) => `${r.result.extra.total_after}/${r.result.extra.total_expected}`).join(", ") || "not measured";
    if (target === "kvconnect") out.preserved = done.length === mine.length && done.every((r) => r.result.extra.preserved === true);
  }
  if (!done.length) return out;
  const best = done.reduce((a, b) => (b.result.ops_per_s > a.result.ops_per_s ? b : a));
  return {
    ...out,
    best_repeat: best.repeat,
    ops_per_s: best.result.ops_per_s,
    p50_ms: best.result.p50_ms,
    p99_ms: best.result.p99_ms,
    p999_ms: best.result.p999_ms,
    errors: done.reduce((n, r) => n + (r.result.errors ?? 0), 0),
    // With PostgreSQL storage the server's work is the node's and PostgreSQL's together.
    server_us_per_op: best.cpu ? best.cpu.server_us_per_op + (best.cpu.pg_us_per_op ?? 0) : null,
    node_us_per_op: best.cpu?.server_us_per_op ?? null,
    pg_us_per_op: best.cpu?.pg_us_per_op ?? null,
    server_cores: best.cpu?.server_cores ?? null,
    client_us_per_op: best.cpu?.client_us_per_op ?? null,
    client_cores: best.cpu?.client_cores ?? null,
    threads: best.cpu?.threads ?? null,
  };
}

function summarize(row, runs) {
  const kvc = summarizeSide(row, "kvconnect", runs);
  const ceil = summarizeSide(row, "ceiling", runs);
  const ratio = (k) => (kvc[k] && ceil[k] ? kvc[k] / ceil[k] : null);
  return {
    id: row.id, workload: row.workload, concurrency: row.concurrency, kvconnect: kvc, ceiling: ceil,
    ops_ratio: ratio("ops_per_s"), p50_ratio: ratio("p50_ms"), cpu_ratio: ratio("server_us_per_op"),
  };
}

// ---------------------------------------------------------------------------
// Report

const fmtX = (x) => (x === null || x === undefined ? "—" : `${x.toFixed(2)}x`);
const fmtUs = (x) => (x === null || x === undefined ? "—" : x.toFixed(1));
const fmtCores = (x) => (x === null || x === undefined ? "—" : x.toFixed(2));

/** The report as lines of markdown. */
function reportLines(rows, opts, targets) {
  const lines = [];
  const p = (s = "") => lines.push(s);
  p("### Deno client: kvconnect vs. a server that does no work (the ceiling)\n");
  p(`kvconnect: ${targets.kvconnect.command}; ceiling: \`${targets.ceiling.command}\` ` +
    `(${targets.ceiling.version}) answering every request with canned bytes: a fixed metadata JSON, SnapshotReadOutput ` +
    "and AtomicWriteOutput per workload, made with `protoc --encode` from proto/datapath.proto. " +
    "One `Deno.Kv` handle (one HTTP/2 connection) per run.\n");
  p(`${opts.duration} s timed after ${opts.warmup} s warm-up; ` +
    `${opts.repeat === 1 ? "one run per target" : `best of ${opts.repeat} runs per target (highest ops/s, with that run's latencies and CPU), alternating order`}; ` +
    "latencies in ms (p50 / p99); ratio = kvconnect / ceiling; CPU = user + system time of the server process " +
    "over the timed window (/proc/PID/stat) per operation, in µs" +
    `${opts.storage === "postgres" ? " (kvconnect's: the node's + PostgreSQL's, its postmaster and every child)" : ""}` +
    `${opts.smoke ? "; **smoke run: the figures mean nothing**" : ""}\n`);
  p("| row | kvconnect ops/s | ceiling ops/s | ratio | kvconnect p50 / p99 | ceiling p50 / p99 | p50 ratio | kvconnect CPU µs/op | nghttpd CPU µs/op | CPU ratio |");
  p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  const ops = (s) => (s.ops_per_s === undefined ? "failed" : `${fmtInt(s.ops_per_s)}${s.ok ? "" : " (!)"}`);
  const lat = (s) => (s.ops_per_s === undefined ? "—" : `${fmtMs(s.p50_ms)} / ${fmtMs(s.p99_ms)}`);
  const kvcCpu = (s) => (s.pg_us_per_op === null || s.pg_us_per_op === undefined
    ? fmtUs(s.server_us_per_op)
    : `${fmtUs(s.server_us_per_op)} (${fmtUs(s.node_us_per_op)} + ${fmtUs(s.pg_us_per_op)})`);
  for (const r of rows) {
    p(`| ${r.id} | ${ops(r.kvconnect)} | ${ops(r.ceiling)} | ${fmtX(r.ops_ratio)} | ${lat(r.kvconnect)} | ${lat(r.ceiling)} | ` +
      `${fmtX(r.p50_ratio)} | ${kvcCpu(r.kvconnect)} | ${fmtUs(r.ceiling.server_us_per_op)} | ${fmtX(r.cpu_ratio)} |`);
  }
  p();
  p("Where the CPU went over the same windows (cores busy: CPU seconds per wall second):\n");
  p("| row | Deno client µs/op, vs. kvconnect | Deno client µs/op, vs. ceiling | Deno cores busy | kvconnect cores busy | nghttpd cores busy | kvconnect µs/op by thread: I/O / writer / rest |");
  p("|---|---:|---:|---:|---:|---:|---:|");
  const byThread = (t) => (t ? `${fmtUs(t.io_us_per_op)} / ${fmtUs(t.writer_us_per_op)} / ${fmtUs(t.rest_us_per_op)}` : "—");
  for (const r of rows) {
    p(`| ${r.id} | ${fmtUs(r.kvconnect.client_us_per_op)} | ${fmtUs(r.ceiling.client_us_per_op)} | ` +
      `${fmtCores(r.kvconnect.client_cores)} / ${fmtCores(r.ceiling.client_cores)} | ${fmtCores(r.kvconnect.server_cores)} | ` +
      `${fmtCores(r.ceiling.server_cores)} | ${byThread(r.kvconnect.threads)} |`);
  }
  p();
  p(`- rows: get = \`kv.get\` of a random key out of ${fmtInt(opts.keys)}; set = durable \`kv.set\`; ` +
    `getMany = \`kv.getMany\` of ${GETMANY_KEYS} random keys; list = \`kv.list({prefix})\` of ${LIST_SIZE} entries (one page); ` +
    `bank = a transfer between two of ${ACCOUNTS} accounts (getMany of both, then a checked atomic commit)`);
  for (const r of rows.filter((x) => x.workload === "transfer")) {
    p(`- ${r.id} total balance after each run: kvconnect ${r.kvconnect.total_check} ` +
      `(${r.kvconnect.preserved ? "preserved" : "**NOT preserved**"}); ceiling ${r.ceiling.total_check}`);
  }
  const bad = rows.flatMap((r) => TARGETS.filter((t) => !r[t].ok).map((t) => `${r.id} ${t}`));
  p(bad.length ? `- runs with failures or errors (marked (!)): ${bad.join(", ")}` : "- errors: none");
  p();
  return lines;
}

/**
 * What --smoke checks: both targets ran every row without errors (with PostgreSQL storage, its
 * CPU was sampled too), and the table has its rows.
 */
function smokeProblems(rows, runs, lines, opts) {
  const problems = [];
  for (const r of rows) {
    for (const t of TARGETS) {
      const s = r[t];
      if (!s.ok || !(s.ops_per_s > 0) || s.server_us_per_op === null) {
        const failed = runs.filter((x) => x.row === r.id && x.target === t && !x.ok);
        problems.push(`${r.id} against ${t}: ${failed.map((x) => describeOne(x)).join("; ") || "no ops or no CPU sample"}`);
      }
    }
    // kvconnect's CPU split by thread needs its threads named (src/common/thread_name.h).
    const names = r.kvconnect.threads?.names ?? [];
    for (const want of ["kvc-io", "kvc-writer"]) {
      if (r.kvconnect.ops_per_s !== undefined && !names.includes(want)) {
        problems.push(`${r.id}: no kvconnect thread named ${want} over the window (threads: ${names.join(", ") || "none"})`);
      }
    }
    if (opts.storage === "postgres" && (r.kvconnect.pg_us_per_op ?? null) === null) {
      problems.push(`${r.id}: no CPU sample of PostgreSQL over the window`);
    }
    if (r.workload === "transfer" && !r.kvconnect.preserved) problems.push(`${r.id}: kvconnect did not keep the total balance`);
    const line = lines.find((l) => l.startsWith(`| ${r.id} |`));
    if (!line || line.includes("failed")) problems.push(`the table has no complete line for ${r.id}`);
  }
  if (!lines.some((l) => l.startsWith("| row | kvconnect ops/s | ceiling ops/s |"))) problems.push("the table header is missing");
  return problems;
}

// ---------------------------------------------------------------------------

async function main() {
  const { opts, exitCode } = commandLine(parseOptions, USAGE);
  if (!opts) return exitCode;

  let nghttpd;
  let server;
  let pg;
  const runs = [];
  try {
    const htdocs = await makeTempDir("kvconnect-bench-ceiling-");
    const sizes = writeCannedAnswers(htdocs);
    nghttpd = await startNghttpd(htdocs);
    const machine = machineInfo();
    printMachine(machine, "kvconnect benchmark: the no-work ceiling");
    console.log(`- ${nghttpd.version}\n`);
    let serverArgs = SERVER_ARGS;
    if (opts.storage === "postgres") {
      pg = await startPg({ fsync: true, settings: PG_SETTINGS, tcp: true });
      serverArgs = ["--postgres", pg.conninfo, ...PG_NODE_ARGS];
      console.log(`- PostgreSQL: ${(await pg.query("SHOW server_version")).trim()} (${PG_SETTINGS.join(", ")})\n`);
    }
    server = await startServer({ extraArgs: serverArgs });
    log(`server: ${server.describe()}`);
    const kvcCommand = opts.storage === "postgres"
      ? `\`kvconnect serve --postgres <conninfo> ${PG_NODE_ARGS.join(" ")}\` (a fresh PostgreSQL 15, ${PG_SETTINGS.join(", ")})`
      : `\`kvconnect serve ${SERVER_ARGS.join(" ")}\` (fresh data dir)`;
    log(`ceiling: ${nghttpd.command} on port ${nghttpd.port} (pid ${nghttpd.pid})`);
    const ceilingUrl = (w) => `http://127.0.0.1:${nghttpd.port}/${w}/metadata.json`;
    await checkCannedMetadata(ceilingUrl("get"));
    const targets = {
      kvconnect: { pid: server.proc.pid, pgPid: pg?.proc.pid, token: server.token, urlFor: () => server.url, command: kvcCommand },
      ceiling: { pid: nghttpd.pid, token: "unused-by-the-canned-server", urlFor: ceilingUrl, command: nghttpd.command, version: nghttpd.version },
    };
    await runRounds(opts, TARGETS, runs, (row, target) => runOne(row, target, targets, opts),
      describeOne, (row) => {
        if (!server.running) throw new Error(`kvconnect exited during ${row.id}:\n${server.logTail(40)}`);
        if (!nghttpd.running()) throw new Error(`nghttpd exited during ${row.id}:\n${nghttpd.output()}`);
      });

    const rows = opts.rows.map((row) => summarize(row, runs));
    const lines = reportLines(rows, opts, targets);
    console.log(lines.join("\n"));

    if (opts.json) {
      const out = {
        machine: { ...machine, nghttpd: nghttpd.version },
        options: { duration: opts.duration, warmup: opts.warmup, repeat: opts.repeat, keys: opts.keys, storage: opts.storage, rows: opts.rows.map((r) => r.id) },
        kvconnect: { args: server.describe().replace(/--data-dir \S+/, "--data-dir <temp>").replace(/--ready-file \S+/, "--ready-file <temp>") },
        ceiling: { command: nghttpd.command, canned: { namespace: CANNED_NS, list_size: LIST_SIZE, getmany_keys: GETMANY_KEYS, accounts: ACCOUNTS, bytes: sizes } },
        runs,
        rows,
      };
      fs.writeFileSync(opts.json, `${JSON.stringify(out, null, 2)}\n`);
      log(`all results written to ${opts.json}`);
    }

    if (opts.smoke) {
      const problems = smokeProblems(rows, runs, lines, opts);
      if (problems.length) {
        console.error(`smoke: FAILED\n${problems.map((x) => `  - ${x}`).join("\n")}`);
        return 1;
      }
      console.log(`smoke: ok (${rows.length} rows, each against kvconnect and the canned server without errors; the table was printed)`);
    }
    const broken = rows.some((r) => !r.kvconnect.ok || !r.ceiling.ok) ||
      rows.some((r) => r.workload === "transfer" && r.kvconnect.preserved === false);
    return broken ? 1 : 0;
  } finally {
    await server?.stop();
    nghttpd?.stop();
    if (pg) await cleanupPg();
    await removeTempDirs();
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e?.stack ?? String(e));
    process.exit(1);
  },
);
