// Helpers shared by the benchmark runners (run.mjs, scale.mjs): running commands and
// `kvconnect bench`, finding tools on PATH, the machine description, number formatting, and
// the redis-benchmark baseline against a private redis-server.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { denoBin, guessTcpPort, kvconnectBin, makeTempDir, runKvconnect, sleep } from "../e2e/harness.mjs";

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
