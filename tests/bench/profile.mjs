#!/usr/bin/env node
// Where the server's CPU goes under one Deno-client workload: `perf record` on the kvconnect
// process over exactly the benchmark's timed window, then the functions and the libraries that
// took the most of it.
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/profile.mjs [--workload get] [--concurrency 64]
//       [--duration 10] [--warmup 1] [--frequency 1000] [--call-graph dwarf,16384] [--top 40]
//       [--out DIR] [-- serve flags...]
//
// * The server: `kvconnect serve --sync full --rate-limit-rps 0` (as ceiling.mjs and run.mjs
//   start it) plus any serve flags after `--`, on a fresh data directory, port 0.
// * The client: deno/bench.ts (the real Deno client) with KV_BENCH_MARKS=1. At "# window-start"
//   this script starts `perf record --call-graph MODE -F FREQ -p PID`, at "# window-end" it
//   stops it (SIGINT), so the profile holds the measured window only; it also reads the
//   server's CPU time from /proc at both marks.
// * Prints the bench result, the server CPU per operation, then from `perf report`: the top
//   functions by self time (children excluded), the top by inclusive time (callers charged with
//   their callees), the self time by library (kvconnect, libc, libsqlite3, libnghttp2,
//   libprotobuf, libcrypto, the kernel, ...), and by thread and library (the server's threads
//   are named by role: kvc-io, kvc-writer, kvc-checkpoint, ...; src/common/thread_name.h).
//   perf.data stays in --out (default: a new directory under the system's temporary directory,
//   printed) for `perf report -i`.
//
// Needs `perf` (Debian linux-perf) and a kernel that lets this user profile the process
// (kernel.perf_event_paranoid <= 1, or root). Not part of ctest: it reports, it checks nothing.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { removeTempDirs, startServer } from "../e2e/harness.mjs";
import { commandLine, log, numberOption, procCpu, runDenoBench, which } from "./lib.mjs";

const USAGE = `usage: node tests/bench/profile.mjs [--workload get|set|getmany|list|transfer]
    [--concurrency N] [--duration S] [--warmup S] [--frequency HZ] [--call-graph MODE]
    [--top N] [--out DIR]
    [-- serve flags...]`;

function parse(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      workload: { type: "string" },
      concurrency: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      frequency: { type: "string" },
      "call-graph": { type: "string" },
      top: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const workload = values.workload ?? "get";
  if (!["get", "set", "getmany", "list", "transfer"].includes(workload)) {
    throw new Error(`--workload must be get, set, getmany, list or transfer, got ${workload}`);
  }
  return {
    help: values.help,
    workload,
    concurrency: numberOption(values, "concurrency", 64, 1, true),
    duration: numberOption(values, "duration", 10, 0.1, false),
    warmup: numberOption(values, "warmup", 1, 0, false),
    frequency: numberOption(values, "frequency", 1000, 1, true),
    callGraph: values["call-graph"] ?? "dwarf,16384",
    top: numberOption(values, "top", 40, 1, true),
    out: values.out,
    serveArgs: positionals,
  };
}

/** `perf report` of `data` sorted as `sortKeys`, its comment lines dropped, `top` lines kept. */
function report(perf, data, args, top) {
  const r = spawnSync(perf, ["report", "-i", data, "--stdio", "--percent-limit", "0.3", ...args], {
    encoding: "utf8",
    maxBuffer: 256 << 20,
  });
  if (r.status !== 0) return `perf report failed: ${r.stderr.trim()}`;
  return r.stdout
    .split("\n")
    .filter((l) => l.trim() && !l.startsWith("#"))
    .map((l) => l.replace(/(\s+-)*\s*$/, "")) // perf pads every line to the widest symbol
    .slice(0, top)
    .join("\n");
}

async function main() {
  const cmd = commandLine(parse, USAGE);
  if (cmd.exitCode !== undefined) return cmd.exitCode;
  const opts = cmd.opts;
  const perf = which("perf");
  if (!perf) {
    log("profile.mjs needs perf (Debian package linux-perf)");
    return 2;
  }
  const out = opts.out ?? fs.mkdtempSync(path.join(os.tmpdir(), "kvconnect-profile-"));
  fs.mkdirSync(out, { recursive: true });
  const data = path.join(out, "perf.data");
  const server = await startServer({ extraArgs: ["--sync", "full", "--rate-limit-rps", "0", ...opts.serveArgs] });
  let recorder = null;
  const marks = {};
  try {
    const row = { id: `${opts.workload}@${opts.concurrency}`, workload: opts.workload, concurrency: opts.concurrency };
    const res = await runDenoBench(row, "kvconnect", {
      kvUrl: server.url,
      token: server.token,
      opts,
      env: { KV_BENCH_MARKS: "1" },
      onStdoutLine: (line) => {
        if (line === "# window-start") {
          marks.start = procCpu(server.proc.pid);
          recorder = spawn(perf, ["record", "--call-graph", opts.callGraph, "-F", String(opts.frequency), "-o", data, "-p", String(server.proc.pid)], {
            stdio: ["ignore", "ignore", "pipe"],
          });
        } else if (line === "# window-end") {
          marks.end = procCpu(server.proc.pid);
          recorder?.kill("SIGINT");
        }
      },
    });
    if (recorder && recorder.exitCode === null) await new Promise((resolve) => recorder.once("close", resolve));
    if (!res.ok) {
      log(`the benchmark failed (exit ${res.code}): ${res.stderr ?? ""}`);
      return 1;
    }
    const s = res.result;
    console.log(`${row.id}: ${Math.round(s.ops_per_s)} ops/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms, ${s.ops} ops in ${s.seconds.toFixed(2)} s`);
    if (marks.start && marks.end) {
      const cpuUs = (marks.end.self - marks.start.self) * 1e6;
      console.log(`server CPU in the window: ${(cpuUs / 1e6).toFixed(2)} s, ${(cpuUs / s.ops).toFixed(1)} µs per operation`);
    }
    if (!fs.existsSync(data)) {
      log("perf wrote no profile (is kernel.perf_event_paranoid too high?)");
      return 1;
    }
    console.log(`\n## Self time by function (top ${opts.top})\n`);
    console.log(report(perf, data, ["--no-children", "--sort", "dso,symbol", "-g", "none"], opts.top));
    console.log(`\n## Inclusive time by function (top ${opts.top})\n`);
    console.log(report(perf, data, ["--children", "--sort", "symbol", "-g", "none"], opts.top));
    console.log("\n## Self time by library\n");
    console.log(report(perf, data, ["--no-children", "--sort", "dso", "-g", "none"], 20));
    console.log("\n## Self time by thread (kvconnect names its threads by role: kvc-io, kvc-writer, ...)\n");
    console.log(report(perf, data, ["--no-children", "--sort", "comm,dso", "-g", "none"], 30));
    console.log(`\nperf.data: ${data}`);
    return 0;
  } finally {
    recorder?.kill("SIGINT");
    await server.kill();
    await removeTempDirs(); // the server's data directory; the profile stays
  }
}

process.exitCode = await main();
