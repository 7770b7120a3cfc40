// Watch fan-out: `kvconnect bench --workload watch` (N watch streams, one writer setting one of
// the watched keys every few ms) against this build and, with --baseline-bin, against another
// kvconnect binary in the same run. Prints frames/s, change-to-frame latency, server CPU per
// 1,000 frames, and the storage snapshot reads the server made during the window (from
// /metrics, kvconnect_storage_reads_total; a binary without /metrics shows "—").
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/watch_fanout.mjs \
//     [--baseline-bin OLD/kvconnect] [--watchers 1000] [--watch-keys 10] [--duration 5]
import fs from "node:fs";
import { parseArgs } from "node:util";
import { removeTempDirs, startServer } from "../e2e/harness.mjs";
import { describeKvcBench, fmtInt, fmtMs, log, numberOption, runKvcBench } from "./lib.mjs";

const { values } = parseArgs({
  options: {
    "baseline-bin": { type: "string" },
    watchers: { type: "string" },
    "watch-keys": { type: "string" },
    "watch-interval-ms": { type: "string" },
    duration: { type: "string" },
  },
});
const WATCHERS = numberOption(values, "watchers", 1000, 1, true);
const KEYS = numberOption(values, "watch-keys", 10, 1, true);
const INTERVAL = numberOption(values, "watch-interval-ms", 10, 1, true);
const DURATION = numberOption(values, "duration", 5, 1, false);

// utime + stime of a process, in seconds.
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;  // clock ticks (USER_HZ = 100)
}

async function storageReads(server) {
  try {
    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
    if (res.status !== 200) return null;
    let sum = 0;
    for (const line of (await res.text()).split("\n")) {
      if (line.startsWith("kvconnect_storage_reads_total")) sum += Number(line.split(" ").pop());
    }
    return sum;
  } catch {
    return null;
  }
}

async function measure(label, bin) {
  const saved = process.env.KVCONNECT_BIN;
  if (bin) process.env.KVCONNECT_BIN = bin;
  const server = await startServer({ extraArgs: ["--max-connections", String(WATCHERS + 100)] });
  if (bin) process.env.KVCONNECT_BIN = saved;
  try {
    const reads0 = await storageReads(server);
    const cpu0 = cpuSeconds(server.proc.pid);
    const r = await runKvcBench(server, [
      "--workload", "watch", "--watchers", String(WATCHERS), "--watch-keys", String(KEYS),
      "--watch-interval-ms", String(INTERVAL), "--duration", String(DURATION), "--connections", "8",
    ]);
    const cpu = cpuSeconds(server.proc.pid) - cpu0;
    const reads1 = await storageReads(server);
    log(`${label}: ${describeKvcBench(r)}`);
    const rep = r.report;
    const frames = rep ? rep.ops : 0;
    return {
      label,
      ok: r.ok,
      framesPerS: rep?.ops_per_s,
      p50: rep?.watch?.change_to_frame_ms?.p50,
      p99: rep?.watch?.change_to_frame_ms?.p99,
      cpuPer1000: frames ? (cpu / frames) * 1000 : null,
      reads: reads0 === null || reads1 === null ? null : reads1 - reads0,
    };
  } finally {
    await server.kill();
  }
}

const rows = [];
if (values["baseline-bin"]) rows.push(await measure("baseline", values["baseline-bin"]));
rows.push(await measure("this build", undefined));
await removeTempDirs();
console.log(`\nwatch fan-out: ${WATCHERS} watchers on ${KEYS} keys, one set every ${INTERVAL} ms, ${DURATION} s\n`);
console.log("| binary | frames/s | change-to-frame p50 ms | p99 ms | server CPU s per 1,000 frames | storage reads in the window |");
console.log("|---|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(`| ${r.label}${r.ok ? "" : " (errors)"} | ${fmtInt(r.framesPerS)} | ${fmtMs(r.p50)} | ${fmtMs(r.p99)} | ` +
    `${r.cpuPer1000 === null ? "—" : r.cpuPer1000.toFixed(3)} | ${r.reads === null ? "—" : fmtInt(r.reads)} |`);
}
process.exit(rows.every((r) => r.ok) ? 0 : 1);
