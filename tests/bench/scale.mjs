#!/usr/bin/env node
// Scale benchmarks: point reads against a small and a large database, and many open watches.
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/scale.mjs [--keys-small 100000]
//       [--keys-large 10000000] [--duration 10] [--json scale.json]
//
// 1. Point reads vs. key count. For each N (--keys-small, then --keys-large): a fresh
//    `kvconnect serve --sync full --rate-limit-rps 0` on a fresh data dir; `kvconnect bench
//    --workload get --keys N` writes the N keys (batches of 1000 per atomic write) and runs one
//    window; then `kvconnect bench --workload get --no-preload --keys N --connections 4
//    --streams 64` is measured against that server (default read cache), and again after a
//    restart on the same data dir with `--read-cache-bytes 0`, and again after a restart with a
//    read cache sized to the data (--data-cache-bytes-per-key x N), measured once the server's
//    prewarm of that cache has finished (kvconnect_read_cache_prewarm_running falls to 0).
//    Reports ops/s and p50/p99 for each N and cache setting, the database size, the prewarm's
//    time, and the ratio large/small per setting (goal ≥ 0.8x).
//    The free space of the temp dir is checked first (3x the estimated size).
// 2. Watches. A fresh server; `kvconnect bench --workload watch --watchers 10000 --watch-keys
//    100 --connections 100 --watch-interval-ms 10`; the server's VmRSS is sampled every 250 ms.
//    Reports watchers opened, frames/s, change-to-frame latency, server RSS idle and peak, with
//    the goals RSS ≤ 200 MiB and change-to-frame p99 ≤ 50 ms.
//
// No figure fails the run: the exit code is 1 only when a run failed or reported errors.
// The numbers belong to the machine they were taken on, which must be otherwise idle.
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { metricValue, removeTempDirs, sleep, startServer } from "../e2e/harness.mjs";
import {
  commandLine, describeKvcBench, fmtInt, fmtMiB, fmtMs, log, machineInfo, numberOption,
  optionValues, printMachine, runKvcBench,
} from "./lib.mjs";

const SERVER_ARGS = ["--sync", "full", "--rate-limit-rps", "0"];
const NO_CACHE_ARGS = ["--read-cache-bytes", "0"];
/**
 * Read cache per key for the data-sized setting: an entry of a bench key is charged about 250
 * bytes (a 20-byte key, a 104-byte value, 128 bytes of bookkeeping).
 */
const DATA_CACHE_BYTES_PER_KEY = 300;
/** How long a prewarm may take before the run counts as failed. */
const PREWARM_TIMEOUT_MS = 900_000;
/** Estimated database size per key (a key of ["bench","kv",i], a 100-character value, SQLite). */
const DISK_BYTES_PER_KEY = 200;
/** The free space asked for, as a multiple of the estimate. */
const DISK_FACTOR = 3;
const GOALS = { readRatio: 0.8, watchRssMiB: 200, watchP99Ms: 50 };
/** `kvconnect bench --timeout` of the preload run: it allows this per 100 atomic writes. */
const PRELOAD_TIMEOUT_S = 60;
const READ_SHAPE = ["--connections", "4", "--streams", "64"];
const WATCH_SHAPE = { watchKeys: 100, connections: 100, intervalMs: 10 };
const RSS_SAMPLE_MS = 250;

const USAGE = `usage: KVCONNECT_BIN=build/kvconnect node tests/bench/scale.mjs [options]

  --keys-small N   keys of the small database (default 100000)
  --keys-large N   keys of the large database (default 10000000: about 1.7 GB on disk, and
                   \`kvconnect bench\` holds the whole preload in memory, about 1.6 GB)
  --duration S     timed window of every measurement, seconds (default 10)
  --warmup S       untimed warm-up before it, seconds (default 1)
  --watchers N     watch streams of the watch benchmark (default 10000)
  --no-reads       skip the point-read benchmark
  --no-watch       skip the watch benchmark
  --data-cache-bytes-per-key B
                   read cache per key of the data-sized setting (default ${DATA_CACHE_BYTES_PER_KEY}; 0 skips
                   that setting)
  --server-args S  extra \`kvconnect serve\` flags for every server, space-separated
                   (e.g. --server-args="--max-read-batch 1"), printed
  --json FILE      also write the machine and every result to FILE
  -h, --help       this text

The data dirs are made under $TMPDIR (default /tmp); set TMPDIR to use another disk.`;

function parseOptions(argv) {
  const values = optionValues(argv, {
    "keys-small": { type: "string" },
    "keys-large": { type: "string" },
    duration: { type: "string" },
    warmup: { type: "string" },
    watchers: { type: "string" },
    "no-reads": { type: "boolean" },
    "no-watch": { type: "boolean" },
    "server-args": { type: "string" },
    "data-cache-bytes-per-key": { type: "string" },
    json: { type: "string" },
  });
  if (values.help) return { help: true };
  const num = (name, def, min, integer) => numberOption(values, name, def, min, integer);
  const opts = {
    keysSmall: num("keys-small", 100_000, 1, true),
    keysLarge: num("keys-large", 10_000_000, 1, true),
    duration: num("duration", 10, 0.1, false),
    warmup: num("warmup", 1, 0, false),
    dataCachePerKey: num("data-cache-bytes-per-key", DATA_CACHE_BYTES_PER_KEY, 0, true),
    watchers: num("watchers", 10_000, 1, true),
    reads: !values["no-reads"],
    watch: !values["no-watch"],
    serverArgs: (values["server-args"] ?? "").split(/\s+/).filter(Boolean),
    json: values.json,
  };
  if (opts.keysLarge < opts.keysSmall) throw new Error("--keys-large must be at least --keys-small");
  return opts;
}

const fmtGiB = (bytes) => `${(bytes / 1073741824).toFixed(2)} GiB`;
const plural = (n, word) => `${fmtInt(n)} ${word}${n === 1 ? "" : "s"}`;

// ---------------------------------------------------------------------------
// 1. Point reads vs. key count

/** Fails (throws) unless the temp dir has DISK_FACTOR x the estimated size of `keys` free. */
function checkDisk(keys) {
  const dir = os.tmpdir();
  const need = keys * DISK_BYTES_PER_KEY;
  const st = fs.statfsSync(dir);
  const free = Number(st.bavail) * Number(st.bsize);
  const line = `${fmtInt(keys)} keys need about ${fmtGiB(need)} on disk (${DISK_BYTES_PER_KEY} bytes per key); ` +
    `${dir} has ${fmtGiB(free)} free`;
  log(`disk: ${line}`);
  if (free < DISK_FACTOR * need) {
    throw new Error(`not enough disk space: ${line}, and ${DISK_FACTOR}x the estimate ` +
      `(${fmtGiB(DISK_FACTOR * need)}) is asked for. Free some space, set TMPDIR to a bigger disk, ` +
      "or pass a smaller --keys-large.");
  }
  return { dir, need_bytes: need, free_bytes: free };
}

/** Size of the default database of a data dir: the SQLite file and its WAL. */
function databaseSize(dataDir) {
  const size = (name) => {
    try {
      return fs.statSync(path.join(dataDir, name)).size;
    } catch {
      return 0;
    }
  };
  const file = size("default.sqlite3");
  const wal = size("default.sqlite3-wal");
  return { file_bytes: file, wal_bytes: wal, total_bytes: file + wal };
}

/** A measurement run counts as good only when it reported no errors and no misses. */
function measured(run) {
  const ok = run.ok && run.report?.misses === 0;
  return { ...run, ok, stderr: ok ? undefined : run.stderr ?? `${run.report.misses} preloaded keys were missing` };
}

async function readsAt(keys, opts) {
  const window = ["--duration", String(opts.duration), "--warmup", String(opts.warmup)];
  const out = { keys, preload: null, cached: null, uncached: null, sized: null, db: null, failures: [] };
  let server = await startServer({ extraArgs: [...SERVER_ARGS, ...opts.serverArgs], readyTimeoutMs: 120_000 });
  const dataDir = server.dataDir;
  try {
    log(`[reads ${fmtInt(keys)} keys] preloading: ${server.describe()}`);
    const batches = Math.ceil(keys / 1000);
    const preloadBudget = PRELOAD_TIMEOUT_S * (1 + Math.floor(batches / 100)) + opts.duration + opts.warmup + 120;
    out.preload = await runKvcBench(server, [
      "--workload", "get", "--keys", String(keys), ...READ_SHAPE, ...window, "--timeout", String(PRELOAD_TIMEOUT_S),
    ], { timeoutMs: preloadBudget * 1000 });
    log(`[reads ${fmtInt(keys)} keys] preload run: ${out.preload.seconds.toFixed(1)} s wall time; ${describeKvcBench(out.preload)}`);
    if (!out.preload.ok) {
      out.failures.push(`preload of ${fmtInt(keys)} keys`);
      return out;
    }
    const measure = ["--workload", "get", "--no-preload", "--keys", String(keys), ...READ_SHAPE, ...window];
    const timeoutMs = Math.ceil((opts.duration + opts.warmup) * 1000) + 180_000;
    out.cached = measured(await runKvcBench(server, measure, { timeoutMs }));
    out.cached.server = server.describe().replace(/--data-dir \S+/, "--data-dir <temp>").replace(/--ready-file \S+/, "--ready-file <temp>");
    log(`[reads ${fmtInt(keys)} keys, default read cache] ${describeKvcBench(out.cached)}`);
    if (!out.cached.ok) out.failures.push(`get at ${fmtInt(keys)} keys, default read cache`);

    server = await server.restart({ extraArgs: [...SERVER_ARGS, ...opts.serverArgs, ...NO_CACHE_ARGS] });
    out.uncached = measured(await runKvcBench(server, measure, { timeoutMs }));
    out.uncached.server = server.describe().replace(/--data-dir \S+/, "--data-dir <temp>").replace(/--ready-file \S+/, "--ready-file <temp>");
    log(`[reads ${fmtInt(keys)} keys, --read-cache-bytes 0] ${describeKvcBench(out.uncached)}`);
    if (!out.uncached.ok) out.failures.push(`get at ${fmtInt(keys)} keys, --read-cache-bytes 0`);

    if (opts.dataCachePerKey > 0) {
      const bytes = keys * opts.dataCachePerKey;
      const args = ["--read-cache-bytes", String(bytes)];
      server = await server.restart({ extraArgs: [...SERVER_ARGS, ...opts.serverArgs, ...args] });
      const prewarm = await waitForPrewarm(server);
      log(`[reads ${fmtInt(keys)} keys, --read-cache-bytes ${bytes}] prewarm: ${fmtInt(prewarm.entries)} entries in ${prewarm.seconds.toFixed(1)} s`);
      out.sized = measured(await runKvcBench(server, measure, { timeoutMs }));
      out.sized.cache_bytes = bytes;
      out.sized.prewarm = prewarm;
      out.sized.server = server.describe().replace(/--data-dir \S+/, "--data-dir <temp>").replace(/--ready-file \S+/, "--ready-file <temp>");
      log(`[reads ${fmtInt(keys)} keys, --read-cache-bytes ${bytes}] ${describeKvcBench(out.sized)}`);
      if (!out.sized.ok) out.failures.push(`get at ${fmtInt(keys)} keys, --read-cache-bytes ${bytes}`);
    }
    return out;
  } finally {
    if (server.running) {
      const stopped = await server.stop("SIGTERM", 60_000);
      if (stopped.code !== 0) log(`[reads ${fmtInt(keys)} keys] server exit: code ${stopped.code}, signal ${stopped.signal}`);
    }
    out.db = databaseSize(dataDir);
    log(`[reads ${fmtInt(keys)} keys] database: ${fmtMiB(out.db.file_bytes)} MiB file + ${fmtMiB(out.db.wal_bytes)} MiB WAL`);
    // Free the disk before the next size (E2E_KEEP=1 keeps it, like the harness does).
    if (process.env.E2E_KEEP !== "1") await fsp.rm(dataDir, { recursive: true, force: true }).catch(() => {});
  }
}

/**
 * Waits until the server's read cache prewarm of the default database has finished (its gauge
 * is 0), polling its /metrics; returns the entries it stored and the seconds it took from the
 * server's start.
 */
async function waitForPrewarm(server) {
  const labels = { database: "default" };
  const started = Date.now();
  for (;;) {
    const running = await metricValue(server, "kvconnect_read_cache_prewarm_running", labels);
    if (running === 0) {
      const entries = await metricValue(server, "kvconnect_read_cache_prewarmed_entries", labels);
      const seconds = await metricValue(server, "kvconnect_read_cache_prewarm_seconds", labels);
      return { entries: entries ?? 0, seconds: seconds ?? (Date.now() - started) / 1000 };
    }
    if (running === undefined) throw new Error("the server reports no kvconnect_read_cache_prewarm_running gauge");
    if (Date.now() - started > PREWARM_TIMEOUT_MS) throw new Error(`the read cache prewarm did not finish in ${PREWARM_TIMEOUT_MS / 1000} s`);
    await sleep(500);
  }
}

function printReads(results, opts) {
  console.log("### Point reads vs. database size\n");
  console.log(`\`kvconnect serve ${[...SERVER_ARGS, ...opts.serverArgs].join(" ")}\` on a fresh data dir per size; the keys are written ` +
    "by `kvconnect bench --workload get --keys N` (atomic writes of 1000 sets, 100-character values), then " +
    `\`kvconnect bench --workload get --no-preload --keys N ${READ_SHAPE.join(" ")}\` reads random keys ` +
    `(${opts.duration} s after ${opts.warmup} s warm-up), once with the default read cache, once after a ` +
    "restart with `--read-cache-bytes 0` (the OS page cache stays warm)" +
    (opts.dataCachePerKey > 0
      ? `, and once after a restart with a cache sized to the data (\`--read-cache-bytes\` ${opts.dataCachePerKey} x keys), ` +
        "measured when the server's prewarm of it had finished"
      : "") + ".\n");
  console.log("| keys | read cache | get ops/s | p50 / p99 ms | misses | database MiB (file + WAL) | preload run s |");
  console.log("|---:|---|---:|---:|---:|---:|---:|");
  for (const r of results) {
    const db = r.db ? `${fmtMiB(r.db.file_bytes)} + ${fmtMiB(r.db.wal_bytes)}` : "—";
    const preload = r.preload ? `${r.preload.seconds.toFixed(1)}${r.preload.ok ? "" : " (failed)"}` : "—";
    const settings = [["default", r.cached], ["none (--read-cache-bytes 0)", r.uncached]];
    if (opts.dataCachePerKey > 0) {
      const pw = r.sized?.prewarm;
      settings.push([`sized to the data (${fmtInt(r.keys * opts.dataCachePerKey)} bytes)` +
        (pw ? `, prewarmed: ${fmtInt(pw.entries)} entries in ${pw.seconds.toFixed(1)} s` : ""), r.sized]);
    }
    for (const [label, run] of settings) {
      const rep = run?.report;
      const ops = !run ? "not run" : rep ? `${fmtInt(rep.ops_per_s)}${run.ok ? "" : " (!)"}` : `failed (exit ${run.code})`;
      const lat = rep ? `${fmtMs(rep.latency_ms.p50)} / ${fmtMs(rep.latency_ms.p99)}` : "—";
      console.log(`| ${fmtInt(r.keys)} | ${label} | ${ops} | ${lat} | ${rep ? fmtInt(rep.misses) : "—"} | ${db} | ${preload} |`);
    }
  }
  console.log("");
  const small = results[0];
  const large = results[results.length - 1];
  const ratios = readRatios(small, large);
  if (ratios.length) {
    console.log(`| read cache | ops/s at ${fmtInt(small.keys)} keys | ops/s at ${fmtInt(large.keys)} keys | ratio | goal | met? |`);
    console.log("|---|---:|---:|---:|---|---|");
    for (const q of ratios) {
      console.log(`| ${q.cache} | ${fmtInt(q.small_ops_per_s)} | ${fmtInt(q.large_ops_per_s)} | ` +
        `${q.ratio === null ? "—" : `${q.ratio.toFixed(2)}x`} | ${q.goal} | ${q.met} |`);
    }
    console.log("");
  }
  console.log("- preload run s: wall time of the first `kvconnect bench` run (metadata exchange, writing the keys, " +
    `${opts.warmup} s warm-up and a ${opts.duration} s window of gets)`);
  const failed = results.flatMap((r) => r.failures);
  console.log(failed.length ? `- runs with failures, errors or misses (marked (!)): ${failed.join(", ")}` : "- errors: none");
  console.log("");
}

/**
 * large/small ops/s for each cache setting. The goal (the issue's "with the read cache on") is
 * judged for the default cache and for the cache sized to the data; without one no setting
 * meets it.
 */
function readRatios(small, large) {
  if (!small || !large) return [];
  const settings = [["default", "cached", true], ["none (--read-cache-bytes 0)", "uncached", false]];
  if (small.sized || large.sized) settings.push(["sized to the data, prewarmed", "sized", true]);
  return settings.map(([cache, k, goal]) => {
    const s = small[k]?.report?.ops_per_s ?? null;
    const l = large[k]?.report?.ops_per_s ?? null;
    const ratio = s && l !== null ? l / s : null;
    return {
      cache,
      small_keys: small.keys,
      large_keys: large.keys,
      small_ops_per_s: s,
      large_ops_per_s: l,
      ratio,
      goal: goal ? `≥ ${GOALS.readRatio}x` : "— (context)",
      met: !goal ? "—" : ratio === null ? "n/a (failed)" : ratio >= GOALS.readRatio ? "yes" : "**no**",
    };
  });
}

// ---------------------------------------------------------------------------
// 2. Watches

/** VmRSS and VmHWM of a process in bytes, or nulls when it is gone. */
function readRss(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (name) => {
      const m = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status);
      return m ? Number(m[1]) * 1024 : null;
    };
    return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
  } catch {
    return { rss: null, hwm: null };
  }
}

async function watches(opts) {
  const out = { watchers: opts.watchers, run: null, rss: null, failures: [] };
  const server = await startServer({ extraArgs: [...SERVER_ARGS, ...opts.serverArgs] });
  try {
    const pid = server.proc.pid;
    log(`[watch] ${server.describe()} (pid ${pid})`);
    await sleep(500);
    const idle = readRss(pid).rss;
    let peak = idle;
    let samples = 0;
    const timer = setInterval(() => {
      const { rss } = readRss(pid);
      if (rss !== null) {
        samples++;
        if (peak === null || rss > peak) peak = rss;
      }
    }, RSS_SAMPLE_MS);
    const args = [
      "--workload", "watch", "--watchers", String(opts.watchers), "--watch-keys", String(WATCH_SHAPE.watchKeys),
      "--connections", String(WATCH_SHAPE.connections), "--watch-interval-ms", String(WATCH_SHAPE.intervalMs),
      "--duration", String(opts.duration), "--warmup", String(opts.warmup), "--timeout", "60",
    ];
    try {
      out.run = await runKvcBench(server, args, { timeoutMs: Math.ceil((opts.duration + opts.warmup) * 1000) + 300_000 });
    } finally {
      clearInterval(timer);
    }
    const after = readRss(pid);
    out.rss = { idle_bytes: idle, peak_sampled_bytes: peak, samples, after_bytes: after.rss, hwm_bytes: after.hwm, sample_ms: RSS_SAMPLE_MS };
    log(`[watch] ${describeKvcBench(out.run)}; server RSS idle ${fmtMiB(idle)} MiB, peak ${fmtMiB(peak)} MiB ` +
      `(${samples} samples), VmHWM ${fmtMiB(after.hwm)} MiB`);
    if (!out.run.ok) out.failures.push("watch");
    if (!server.running) out.failures.push(`the server exited during the watch run:\n${server.logTail(40)}`);
    return out;
  } finally {
    await server.stop("SIGTERM", 30_000);
  }
}

function printWatches(w, opts) {
  console.log("### Open watches\n");
  console.log(`\`kvconnect serve ${[...SERVER_ARGS, ...opts.serverArgs].join(" ")}\` on a fresh data dir; \`kvconnect bench --workload watch ` +
    `--watchers ${opts.watchers} --watch-keys ${WATCH_SHAPE.watchKeys} --connections ${WATCH_SHAPE.connections} ` +
    `--watch-interval-ms ${WATCH_SHAPE.intervalMs}\` (HTTP/2; one writer sets a watched key every ` +
    `${WATCH_SHAPE.intervalMs} ms; ${opts.duration} s after ${opts.warmup} s warm-up). Change-to-frame latency runs ` +
    `from submitting the write to the watch frame's arrival. Server RSS is VmRSS sampled every ${RSS_SAMPLE_MS} ms.\n`);
  const rep = w.run?.report;
  const lat = rep?.watch?.change_to_frame_ms;
  const open = rep?.watch ? `${fmtInt(rep.watch.watchers_open)} of ${fmtInt(rep.watch.watchers)}` : "—";
  console.log("| watchers open | frames/s | writes | change→frame p50 / p99 / max ms | server RSS idle MiB | server RSS peak MiB | VmHWM MiB | errors |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|");
  const frames = !w.run ? "not run" : rep ? `${fmtInt(rep.ops_per_s)}${w.run.ok ? "" : " (!)"}` : `failed (exit ${w.run.code})`;
  console.log(`| ${open} | ${frames} | ${rep?.watch ? fmtInt(rep.watch.writes) : "—"} | ` +
    `${lat ? `${fmtMs(lat.p50)} / ${fmtMs(lat.p99)} / ${fmtMs(lat.max)}` : "—"} | ${fmtMiB(w.rss?.idle_bytes)} | ` +
    `${fmtMiB(w.rss?.peak_sampled_bytes)} | ${fmtMiB(w.rss?.hwm_bytes)} | ${rep ? fmtInt(rep.errors.total) : "—"} |`);
  console.log("");
  const goals = watchGoals(w);
  console.log("| goal | measured | met? |");
  console.log("|---|---:|---|");
  for (const g of goals) console.log(`| ${g.goal} | ${g.measured} | ${g.met} |`);
  console.log("");
  if (rep && rep.errors.total) {
    console.log(`- errors: ${Object.entries(rep.errors.by_kind).map(([k, n]) => `${k} ${n}`).join(", ")}`);
  }
  for (const f of w.failures) console.log(`- failed: ${f}`);
  if (!w.failures.length) console.log("- errors: none");
  console.log("");
}

function watchGoals(w) {
  const rep = w.run?.report;
  const peak = w.rss?.peak_sampled_bytes ?? null;
  const p99 = rep?.watch?.change_to_frame_ms?.p99 ?? null;
  const watchers = `${fmtInt(w.watchers)} watches`;
  return [
    {
      goal: `server RSS with ${watchers} open ≤ ${GOALS.watchRssMiB} MiB (sampled peak)`,
      measured: peak === null ? "—" : `${fmtMiB(peak)} MiB`,
      met: peak === null || !rep ? "n/a (failed)" : peak <= GOALS.watchRssMiB * 1048576 ? "yes" : "**no**",
    },
    {
      goal: `change-to-frame p99 ≤ ${GOALS.watchP99Ms} ms`,
      measured: p99 === null ? "—" : `${fmtMs(p99)} ms`,
      met: p99 === null ? "n/a (failed)" : p99 <= GOALS.watchP99Ms ? "yes" : "**no**",
    },
  ];
}

// ---------------------------------------------------------------------------

async function main() {
  const { opts, exitCode } = commandLine(parseOptions, USAGE);
  if (!opts) return exitCode;
  const machine = machineInfo({ deno: false });
  const sizes = [...new Set([opts.keysSmall, opts.keysLarge])];
  let disk = null;
  if (opts.reads) {
    // The data dir of one size is removed before the next one, so the largest one counts.
    try {
      disk = checkDisk(Math.max(...sizes));
    } catch (e) {
      console.error(e.message);
      return 1;
    }
  }
  printMachine(machine, "kvconnect scale benchmark");
  if (disk) {
    console.log(`- disk: the ${fmtInt(opts.keysLarge)}-key database needs about ${fmtGiB(disk.need_bytes)}; ` +
      `${disk.dir} has ${fmtGiB(disk.free_bytes)} free\n`);
  }

  const reads = [];
  let watch = null;
  const failures = [];
  if (opts.reads) {
    for (const keys of sizes) {
      let r;
      try {
        r = await readsAt(keys, opts);
      } catch (e) {
        r = { keys, preload: null, cached: null, uncached: null, sized: null, db: null, failures: [`reads at ${fmtInt(keys)} keys: ${e.message}`] };
        log(r.failures[0]);
      }
      reads.push(r);
      failures.push(...r.failures);
    }
    printReads(reads, opts);
  }
  if (opts.watch) {
    try {
      watch = await watches(opts);
      failures.push(...watch.failures);
    } catch (e) {
      watch = { watchers: opts.watchers, run: null, rss: null, failures: [`watch benchmark: ${e.message}`] };
      failures.push(...watch.failures);
    }
    printWatches(watch, opts);
  }

  if (opts.json) {
    const out = {
      machine,
      options: opts,
      disk,
      reads: opts.reads ? { sizes: reads, ratios: readRatios(reads[0], reads[reads.length - 1]) } : null,
      watch: watch ? { ...watch, goals: watchGoals(watch) } : null,
      failures,
    };
    fs.writeFileSync(opts.json, `${JSON.stringify(out, null, 2)}\n`);
    log(`all results written to ${opts.json}`);
  }
  await removeTempDirs();
  return failures.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e?.stack ?? String(e));
    process.exit(1);
  },
);
