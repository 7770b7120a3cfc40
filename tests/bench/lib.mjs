// Helpers shared by the benchmark runners (run.mjs, scale.mjs, ceiling.mjs, ...): running
// commands, `kvconnect bench` and deno/bench.ts, finding tools on PATH, the CPU time of a
// process, Deno KV keys, the machine description, number formatting, and the redis-benchmark
// baseline against a private redis-server.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { denoBin, guessTcpPort, kvconnectBin, makeTempDir, runKvconnect, sleep, spawnDeno } from "../e2e/harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));

// ---------------------------------------------------------------------------
// Processes

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

/** Spawns a helper process that is killed when this process exits (unless it ended first). */
export function spawnHelper(cmd, args, opts) {
  const child = spawn(cmd, args, opts);
  children.add(child);
  child.once("close", () => children.delete(child));
  return child;
}

/** Runs a command to completion; resolves { code, signal, stdout, stderr }. */
export function runCommand(cmd, args, { timeoutMs = 120_000, cwd } = {}) {
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
export function which(name) {
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

/**
 * Runs `kvconnect bench --url <server.url> <args...> --json` (the token goes in through
 * DENO_KV_ACCESS_TOKEN, so it is not on the command line), in the default database unless `args`
 * name one (`--db`): these benchmarks measure a server's own database, and some runs read what
 * an earlier run wrote. Resolves
 * { command, code, signal, timedOut, seconds (wall time), ok, report, stderr }: `report` is the
 * parsed JSON object (see src/loadgen/report.cc) or null; `ok` means exit 0, a report that says
 * ok and no errors. `stderr` is kept (last 4000 characters) only when the run is not ok.
 */
export async function runKvcBench(server, args, { timeoutMs = 180_000 } = {}) {
  const named = args.includes("--db") || args.includes("--database");
  const full = ["bench", "--url", server.url, ...(named ? [] : ["--db", "default"]), ...args, "--json"];
  const started = Date.now();
  const res = await runKvconnect(full, { env: { DENO_KV_ACCESS_TOKEN: server.token }, timeoutMs });
  let report = null;
  for (const line of res.stdout.trim().split("\n").reverse()) {
    if (!line.startsWith("{")) continue;
    try {
      report = JSON.parse(line);
      break;
    } catch {
      // not JSON
    }
  }
  const valid = report && typeof report.ops === "number" && report.errors;
  const ok = res.code === 0 && Boolean(valid) && report.ok === true && report.errors.total === 0;
  return {
    command: `kvconnect ${full.join(" ")}`,
    code: res.code,
    signal: res.signal,
    timedOut: res.timedOut,
    seconds: (Date.now() - started) / 1000,
    ok,
    report: valid ? report : null,
    stderr: ok ? undefined : `${res.stderr}${valid || !res.stdout.trim() ? "" : `\n--- stdout ---\n${res.stdout}`}`.slice(-4000),
  };
}

// ---------------------------------------------------------------------------
// deno/bench.ts: one workload through the real Deno client

export const BENCH_SCRIPT = path.join(HERE, "deno", "bench.ts");

/**
 * Runs deno/bench.ts once: the workload of `row` ({id, workload, concurrency}) for
 * opts.duration seconds after opts.warmup, against `kvUrl` (a KV Connect URL, with `token`, or
 * a SQLite file path). `env` adds or overrides KV_BENCH_* settings; the key namespace defaults
 * to `<row id>-<8 random characters>`. `onStdoutLine(line, proc)` sees each line the script
 * prints as it arrives (proc: the Deno child process). Resolves
 * { row, target, code, signal, timedOut, ok, result, stderr }: `result` is the script's JSON
 * line or null; `ok` means exit 0, a result and no errors; `stderr` (last 4000 characters) is
 * kept only when something went wrong.
 */
export async function runDenoBench(row, target, { kvUrl, token, opts, env = {}, onStdoutLine } = {}) {
  const fullEnv = {
    KV_BENCH_WORKLOAD: row.workload,
    KV_BENCH_CONCURRENCY: String(row.concurrency),
    KV_BENCH_DURATION: String(opts.duration),
    KV_BENCH_WARMUP: String(opts.warmup),
    KV_BENCH_NS: `${row.id}-${Math.random().toString(36).slice(2, 10)}`,
    ...env,
  };
  const timeoutMs = Math.ceil((opts.duration + opts.warmup) * 1000) + 180_000;
  const spawned = spawnDeno(BENCH_SCRIPT, {
    kvUrl, token, env: fullEnv, timeoutMs,
    onStdoutLine: onStdoutLine ? (line) => onStdoutLine(line, spawned.proc) : undefined,
  });
  const res = await spawned.done;
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
}

/** One line about a runDenoBench() result for the progress log. */
export function describeDenoRun(r) {
  if (!r.result) {
    return `FAILED (exit ${r.code}${r.signal ? `, ${r.signal}` : ""}${r.timedOut ? ", timed out" : ""})`;
  }
  const s = r.result;
  const money = s.extra?.preserved === undefined ? "" : `, total ${s.extra.total_after}/${s.extra.total_expected}`;
  return `${fmtInt(s.ops_per_s)} ops/s, p50 ${fmtMs(s.p50_ms)} ms, p99 ${fmtMs(s.p99_ms)} ms` +
    `${s.errors ? `, ${s.errors} errors` : ""}${money}${r.code === 0 ? "" : ` (exit ${r.code})`}`;
}

/**
 * The rows a `--workloads` list selects from `rows` ({id, workload, concurrency, ...}), in the
 * list's order: a row id, a bare workload name (all its rows) or any other
 * `<workload>@<in flight>` of a workload in `workloads` (a new row). All rows when `spec` is
 * empty. Throws on anything else.
 */
export function selectRows(spec, rows, workloads) {
  if (!spec) return rows;
  const out = [];
  const add = (row) => {
    if (!out.some((r) => r.id === row.id)) out.push(row);
  };
  for (const item of spec.split(",").map((s) => s.trim()).filter(Boolean)) {
    const known = rows.filter((r) => r.id === item || r.workload === item);
    if (known.length) {
      known.forEach(add);
      continue;
    }
    const m = /^([a-z]+)@(\d+)$/.exec(item);
    if (!m || !workloads.includes(m[1]) || Number(m[2]) < 1) {
      throw new Error(`unknown row "${item}": use ${rows.map((r) => r.id).join(", ")}, a workload name ` +
        `(${workloads.join(", ")}) or <workload>@<in flight>`);
    }
    add({ id: item, workload: m[1], concurrency: Number(m[2]) });
  }
  if (!out.length) throw new Error("--workloads selects no row");
  return out;
}

// ---------------------------------------------------------------------------
// CPU time of a process

/** Clock ticks per second of the times in /proc/<pid>/stat. */
export const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout) || 100;

/**
 * {ppid, self, children} of a process from /proc/<pid>/stat: `self` is the CPU seconds (user +
 * system) of all its threads so far, `children` those of its reaped children; null if gone.
 */
export function procCpu(pid) {
  try {
    const f = statFields(`/proc/${pid}/stat`);
    return { ppid: Number(f[1]), self: (Number(f[11]) + Number(f[12])) / CLK_TCK, children: (Number(f[13]) + Number(f[14])) / CLK_TCK };
  } catch {
    return null;
  }
}

/** The fields of a /proc stat file after the command name: [0] is field 3 (state). Throws if gone. */
function statFields(file) {
  const text = fs.readFileSync(file, "utf8");
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

/**
 * CPU seconds of each thread of a process so far, by thread id: {name, cpu}, where name is the
 * thread's name (/proc/<pid>/task/<tid>/comm; kvconnect names its threads by role, e.g. kvc-io,
 * kvc-writer, see src/common/thread_name.h). Empty if the process is gone.
 */
export function threadCpu(pid) {
  const out = new Map();
  let tids;
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const name = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
      const f = statFields(`/proc/${pid}/task/${tid}/stat`);
      out.set(tid, { name, cpu: (Number(f[11]) + Number(f[12])) / CLK_TCK });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/**
 * The CPU seconds each thread name took between two threadCpu() samples: the threads alive at
 * the end, less what each had at the start (0 for threads started in between). Threads that
 * ended in between are missing: their time is only in the process total.
 */
export function threadCpuBetween(start, end) {
  const byName = {};
  for (const [tid, t] of end) {
    const before = start.get(tid);
    const used = t.cpu - (before && before.name === t.name ? before.cpu : 0);
    byName[t.name] = (byName[t.name] ?? 0) + Math.max(0, used);
  }
  return byName;
}

/** A backend of the `postgres` database (postgres.mjs's wait-event sampler), by its title. */
function isSamplerBackend(pid) {
  try {
    return /^postgres: \S+ postgres /.test(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8"));
  } catch {
    return false;
  }
}

/**
 * CPU seconds of a PostgreSQL server so far: its postmaster and the children alive now
 * (backends, walwriter, checkpointer, ...), but not a backend of the `postgres` database (the
 * wait-event sampler of postgres.mjs, which is not the workload's).
 */
export function postgresCpu(postmasterPid) {
  let total = procCpu(postmasterPid)?.self ?? 0;
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const p = procCpu(Number(name));
    if (p && p.ppid === postmasterPid && !isSamplerBackend(Number(name))) total += p.self;
  }
  return total;
}

/**
 * The TCP ports process `pid` listens on (IPv4 and IPv6), from its socket inodes in
 * /proc/<pid>/fd and the LISTEN rows of /proc/net/tcp{,6}: how to learn the port of a server
 * that was told to bind port 0 and does not say which port it got. [] when gone.
 */
export function listeningPorts(pid) {
  const inodes = new Set();
  let fds = [];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = [];
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = fs.readFileSync(file, "utf8");
    } catch {
      continue;  // no IPv6
    }
    for (const line of text.trim().split("\n").slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f[3] === "0A" && inodes.has(f[9])) ports.push(parseInt(f[1].split(":")[1], 16));
    }
  }
  return ports;
}

// ---------------------------------------------------------------------------
// Deno KV keys

/**
 * A Deno KV key in the tuple codec: a string part is 0x02 <utf-8, 0x00 as 0x00 0xff> 0x00, a
 * number part 0x21 and the big-endian IEEE double with the sign bit flipped (all bits flipped
 * when negative), so that byte order is numeric order.
 */
export function tupleKey(...parts) {
  return Buffer.concat(parts.map((p) => {
    if (typeof p === "string") {
      const utf8 = Buffer.from(p);
      const escaped = [];
      for (const b of utf8) escaped.push(...(b === 0 ? [0, 0xff] : [b]));
      return Buffer.from([2, ...escaped, 0]);
    }
    if (typeof p === "number") {
      const d = Buffer.alloc(8);
      d.writeDoubleBE(p);
      if (d[0] & 0x80) for (let i = 0; i < 8; i++) d[i] ^= 0xff;
      else d[0] ^= 0x80;
      return Buffer.concat([Buffer.from([0x21]), d]);
    }
    throw new Error(`tupleKey: unsupported key part ${typeof p}`);
  }));
}

/** One line about a `kvconnect bench` run for the progress log. */
export function describeKvcBench(r) {
  const rep = r.report;
  if (!rep) return `FAILED (exit ${r.code}${r.signal ? `, ${r.signal}` : ""}${r.timedOut ? ", timed out" : ""})`;
  const lat = rep.watch ? rep.watch.change_to_frame_ms : rep.latency_ms;
  const kinds = Object.entries(rep.errors.by_kind).map(([k, n]) => `${k} ${n}`).join(", ");
  return `${fmtInt(rep.ops_per_s)} ${rep.watch ? "frames" : "ops"}/s, p50 ${fmtMs(lat.p50)} ms, ` +
    `p99 ${fmtMs(lat.p99)} ms${rep.errors.total ? `, ${rep.errors.total} errors (${kinds})` : ""}` +
    `${rep.misses ? `, ${rep.misses} misses` : ""}${r.code === 0 ? "" : ` (exit ${r.code})`}`;
}

// ---------------------------------------------------------------------------
// Numbers

/** The parseArgs options of the benchmarks that run Deno rows (run.mjs, ceiling.mjs). */
export const DENO_RUN_OPTIONS = {
  duration: { type: "string" },
  warmup: { type: "string" },
  repeat: { type: "string" },
  workloads: { type: "string" },
  json: { type: "string" },
};

/**
 * Runs `one(row, target)` for every row of `opts.rows`, `opts.repeat` times, the order of
 * `targets` reversed every other round so that neither always goes first. Each result gets its
 * round (`repeat`), is pushed to `runs` and logged with `describe`, with the tail of its stderr;
 * `check(row)` runs after each and throws to stop (e.g. a server that exited).
 */
export async function runRounds(opts, targets, runs, one, describe, check) {
  for (const row of opts.rows) {
    for (let rep = 0; rep < opts.repeat; rep++) {
      const order = rep % 2 === 0 ? targets : [...targets].reverse();
      for (const target of order) {
        const r = await one(row, target);
        r.repeat = rep + 1;
        runs.push(r);
        log(`[${row.id} ${target} ${rep + 1}/${opts.repeat}] ${describe(r)}`);
        if (r.stderr) log(r.stderr.trim().split("\n").slice(-10).map((l) => `    ${l}`).join("\n"));
        check(row);
      }
    }
  }
}

/**
 * The values of a benchmark's options (`node:util` parseArgs `options`) in `argv`, with -h/--help
 * added; strict, no positional arguments (throws on anything else, for commandLine()).
 */
export function optionValues(argv, options) {
  return parseArgs({
    args: argv,
    options: { ...options, help: { type: "boolean", short: "h" } },
    strict: true,
    allowPositionals: false,
  }).values;
}

/**
 * A benchmark's command line read with `parse` (which throws on a bad option): {opts}, or, after
 * printing `usage` (with the reason for a bad option, on stderr), {exitCode} 0 for --help and 2
 * for a bad option.
 */
export function commandLine(parse, usage, argv = process.argv.slice(2)) {
  let opts;
  try {
    opts = parse(argv);
  } catch (e) {
    console.error(`${e.message}\n\n${usage}`);
    return { exitCode: 2 };
  }
  if (opts.help) {
    console.log(usage);
    return { exitCode: 0 };
  }
  return { opts };
}

/**
 * The number option `--name` of parseArgs `values`, or `def` when absent; throws unless it is
 * a number (an integer when `integer`) >= `min`.
 */
export function numberOption(values, name, def, min, integer) {
  const raw = values[name];
  if (raw === undefined) return def;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
    throw new Error(`--${name} must be ${integer ? "an integer" : "a number"} >= ${min}, got ${raw}`);
  }
  return n;
}

export function median(values) {
  const v = values.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

export const fmtInt = (x) => (x === null || x === undefined ? "—" : Math.round(x).toLocaleString("en-US"));
export const fmtMs = (x) => (x === null || x === undefined ? "—" : x < 10 ? x.toFixed(3) : x.toFixed(1));
export const fmtMiB = (bytes) => (bytes === null || bytes === undefined ? "—" : (bytes / 1048576).toFixed(1));
export const log = (msg) => process.stderr.write(`${msg}\n`);

// ---------------------------------------------------------------------------
// Machine

function firstLine(text) {
  return (text ?? "").split("\n")[0].trim();
}

/** CPU count and model, kernel, versions, load average. `deno: false` leaves Deno out. */
export function machineInfo({ deno = true } = {}) {
  let cpu = os.cpus()[0]?.model ?? "unknown";
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"));
    if (m) cpu = m[1].trim();
  } catch {
    // not Linux
  }
  const d = deno ? spawnSync(denoBin(), ["--version"], { encoding: "utf8", timeout: 30_000 }) : null;
  const kvc = spawnSync(kvconnectBin(), ["--version"], { encoding: "utf8", timeout: 30_000 });
  return {
    nproc: typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length,
    cpu,
    memory_gib: Math.round((os.totalmem() / 1073741824) * 10) / 10,
    kernel: `${os.type()} ${os.release()} ${typeof os.machine === "function" ? os.machine() : os.arch()}`,
    deno: d ? firstLine(d.stdout) || `unknown (${firstLine(d.stderr)})` : undefined,
    kvconnect: firstLine(kvc.stdout) || firstLine(kvc.stderr) || "unknown",
    node: process.version,
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
    date: new Date().toISOString(),
  };
}

export function printMachine(m, title = "kvconnect benchmark") {
  console.log(`## ${title}\n`);
  console.log(`- machine: ${m.nproc} CPUs (nproc), ${m.cpu}, ${m.memory_gib} GiB RAM`);
  console.log(`- kernel: ${m.kernel}`);
  console.log(`- ${m.deno ? `${m.deno}, ` : ""}node ${m.node}`);
  console.log(`- ${m.kvconnect}`);
  console.log(`- load average at start: ${m.loadavg.join(" ")}; ${m.date}`);
  if (m.loadavg[0] > Math.max(0.5, 0.1 * m.nproc)) {
    console.log(`- **warning**: the machine is not idle (1-minute load ${m.loadavg[0]} on ${m.nproc} CPUs); ` +
      "these numbers are not meaningful");
  }
  console.log("");
}

// ---------------------------------------------------------------------------
// redis-benchmark against a private redis-server

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

/**
 * Measures a private redis-server with `redis-benchmark -c 50 -d 100 -r 10000`: SET and GET
 * with no persistence, then SET with appendfsync always. Each test first runs a short
 * calibration (20,000 requests, 2,000 with fsync), then, if that was much shorter than
 * opts.duration, again with about opts.duration seconds' worth of requests (the reported run).
 * Resolves { rows, notes, missing }:
 * each row has tool, test ("GET (no persistence)"), command ("GET"), mode, connections,
 * in_flight, requests, req_per_s, p50_ms, p99_ms, mean_ms; `missing` says why nothing was measured
 * when a tool is not installed.
 */
export async function redisRows(opts) {
  const bench = which("redis-benchmark");
  if (!bench) {
    return { rows: [], notes: ["redis-benchmark not installed: skipped"], missing: "redis-benchmark not installed" };
  }
  const serverBin = which("redis-server");
  if (!serverBin) {
    return {
      rows: [],
      notes: ["redis-server not installed: redis-benchmark skipped (it needs a private redis-server)"],
      missing: "redis-server not installed",
    };
  }
  // SET runs before GET, so the GETs find the keys.
  const modes = [
    { name: "no persistence", conf: ["appendonly no"], tests: ["set", "get"], calibration: 20_000 },
    { name: "appendfsync always", conf: ["appendonly yes", "appendfsync always"], tests: ["set"], calibration: 2_000 },
  ];
  const rows = [];
  const notes = [];
  for (const mode of modes) {
    const dir = await makeTempDir("kvconnect-bench-redis-");
    let child;
    let port;
    try {
      // Over TCP like kvconnect's rows. redis-server cannot listen on port 0 and report the
      // port, so it gets a guess; if another process took that port first it exits ("Address
      // already in use") and the next guess is tried, a few times.
      for (let attempt = 1; ; attempt++) {
        port = await guessTcpPort();
        const conf = path.join(dir, "redis.conf");
        fs.writeFileSync(conf, [
          `port ${port}`, "bind 127.0.0.1", `dir ${dir}`, 'save ""', "daemonize no", "protected-mode yes",
          'logfile ""', ...mode.conf, "",
        ].join("\n"));
        child = spawn(serverBin, [conf], { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
        children.add(child);
        let out = "";
        child.stdout.on("data", (d) => (out += d));
        child.stderr.on("data", (d) => (out += d));
        // Its own word that it listens (a connection could reach whoever took the port).
        const deadline = Date.now() + 10_000;
        while (!/Ready to accept connections/.test(out) && child.exitCode === null && Date.now() < deadline) {
          await sleep(50);
        }
        if (/Ready to accept connections/.test(out) && child.exitCode === null) break;
        child.kill("SIGKILL");
        children.delete(child);
        if (!/address already in use/i.test(out) || attempt >= 5) {
          throw new Error(`redis-server (${mode.name}) did not start:\n${out.slice(-2000)}`);
        }
      }
      // redis-benchmark has no time limit: a short calibration run gives the rate, then the
      // measured run asks for about --duration seconds' worth of requests.
      const measure = async (test, requests) => {
        const args = ["-h", "127.0.0.1", "-p", String(port), "-c", "50", "-n", String(requests),
          "-r", "10000", "-d", "100", "-t", test, "--csv"];
        log(`[redis-benchmark ${mode.name}] -c 50 -n ${requests} -t ${test}`);
        const res = await runCommand(bench, args, { timeoutMs: 600_000 });
        const parsed = parseRedisCsv(res.stdout);
        if (res.code !== 0 || !parsed.length) {
          notes.push(`redis-benchmark ${test} (${mode.name}) failed: ${(res.stderr || res.stdout).slice(-1000)}`);
          return null;
        }
        return { ...parsed[0], requests };
      };
      for (const test of mode.tests) {
        let p = await measure(test, mode.calibration);
        const wanted = p?.rps > 0 ? Math.min(Math.round(p.rps * opts.duration), 50_000_000) : 0;
        if (p && wanted > 1.5 * mode.calibration) p = await measure(test, wanted);
        if (!p) continue;
        rows.push({
          tool: "redis-benchmark", test: `${p.test} (${mode.name})`, command: p.test, mode: mode.name,
          connections: 50, in_flight: 50, requests: p.requests,
          req_per_s: p.rps, p50_ms: p.p50_latency_ms ?? null, p99_ms: p.p99_latency_ms ?? null, mean_ms: p.avg_latency_ms ?? null,
        });
      }
    } catch (e) {
      notes.push(e.message);
    } finally {
      child?.kill("SIGKILL");
      children.delete(child);
      await fsp.rm(dir, { recursive: true, force: true }).catch(() => {});
    }
  }
  return { rows, notes, missing: rows.length ? undefined : "redis-benchmark failed" };
}
