// Continuous backup's cost and restore time, each next to a baseline measured in the same run.
// Prints markdown tables; asserts nothing about times (exit 1 only if a step fails).
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/backup.mjs [--duration S] [--repeat N]
//       [--keys N] [--value-bytes B]
//
// 1. Durable `set` throughput through `kvconnect bench` (HTTP/2, 64 in flight, --sync full):
//    a server without backup and one with --backup-to DIR (every commit also written to the
//    change log in its transaction, shipped every second), alternating, medians of --repeat.
// 2. Restore time for a database of --keys keys (default 1,000,000): imported offline, then
//    served with --backup-to (its first snapshot), then 5 s of writes (log after the snapshot);
//    `kvconnect restore` of the latest state into a fresh data directory, timed, next to
//    copying the database file with `sqlite3 .backup` (the floor: one file copy).
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { expectCliOk, makeTempDir, removeTempDirs, runKvconnect, startServer } from "../e2e/harness.mjs";
import {
  describeKvcBench, fmtInt, log, machineInfo, median, numberOption, printMachine, runCommand, runKvcBench, which,
} from "./lib.mjs";

const { values: args } = parseArgs({
  options: {
    duration: { type: "string" }, repeat: { type: "string" }, keys: { type: "string" },
    "value-bytes": { type: "string" },
  },
});
const duration = numberOption(args, "duration", 5, 1, false);
const repeat = numberOption(args, "repeat", 3, 1, true);
const keys = numberOption(args, "keys", 1_000_000, 1, true);
const valueBytes = numberOption(args, "value-bytes", 100, 0, true);

async function timed(what, fn) {
  log(`${what} ...`);
  const t0 = process.hrtime.bigint();
  const r = await fn();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  log(`${what}: ${seconds.toFixed(2)} s`);
  return { r, seconds };
}

const servers = [];
try {
  printMachine(machineInfo({ deno: false }), "kvconnect continuous backup");

  // 1. Throughput, backup off vs on, alternating.
  const backupDir = await makeTempDir("kvconnect-bench-backup-");
  const off = await startServer({ extraArgs: ["--rate-limit-rps", "0"] });
  servers.push(off);
  const on = await startServer({ extraArgs: ["--rate-limit-rps", "0", "--backup-to", backupDir] });
  servers.push(on);
  const results = { off: [], on: [] };
  const benchArgs = ["--workload", "set", "--streams", "64", "--duration", String(duration), "--keys", "10000"];
  for (let i = 0; i < repeat; i++) {
    for (const [name, server] of [["off", off], ["on", on]]) {
      const r = await runKvcBench(server, benchArgs);
      log(`set@64, backup ${name}, run ${i + 1}: ${describeKvcBench(r)}`);
      if (!r.ok) throw new Error(`kvconnect bench failed:\n${r.stderr}`);
      results[name].push(r.report);
    }
  }
  const ops = (name) => median(results[name].map((r) => r.ops_per_s));
  const p99 = (name) => median(results[name].map((r) => r.latency_ms.p99));

  // 2. Restore time.
  const dir = await makeTempDir("kvconnect-bench-restore-");
  const input = path.join(dir, "input.ndjson");
  const pad = "x".repeat(valueBytes);
  const out = fs.createWriteStream(input);
  for (let i = 0; i < keys; i++) {
    const line = `{"key":[{"type":"string","value":"bench"},{"type":"number","value":${i}}],` +
      `"value":{"type":"string","value":"${pad}"},"versionstamp":"00000000000000010000"}\n`;
    if (!out.write(line)) await new Promise((r) => out.once("drain", r));
  }
  await new Promise((r) => out.end(r));
  const dataDir = path.join(dir, "data");
  const target = path.join(dir, "backup");
  fs.mkdirSync(dataDir);  // the import needs the data directory to exist
  await timed(`offline import of ${fmtInt(keys)} keys`, async () =>
    expectCliOk(await runKvconnect(["import", "--db", "default", "--data-dir", dataDir, "-i", input, "--quiet"],
      { timeoutMs: 3_600_000 })));
  const big = await startServer({ dataDir, extraArgs: ["--rate-limit-rps", "0", "--backup-to", target] });
  servers.push(big);
  const w = await runKvcBench(big, ["--workload", "set", "--streams", "64", "--duration", "5", "--keys", "100000", "--no-preload"]);
  log(`writes after the first snapshot: ${describeKvcBench(w)}`);
  await big.stop();
  const list = expectCliOk(await runKvconnect(["backup", "list", "--from", target, "--json"]));
  const restoredDir = path.join(dir, "restored");
  fs.mkdirSync(restoredDir);  // restore needs the data directory to exist
  const restore = await timed("kvconnect restore (snapshot + log)", async () =>
    expectCliOk(await runKvconnect(["restore", "--data-dir", restoredDir, "--from", target, "--db", "default"],
      { timeoutMs: 3_600_000 })));
  log(restore.r.stdout.trim());
  const file = JSON.parse(expectCliOk(await runKvconnect(["db", "list", "--json", "--data-dir", dataDir])).stdout)
    .find((d) => d.name === "default").path;
  let copy = null;
  if (which("sqlite3")) {
    copy = await timed("sqlite3 .backup of the same database file", async () => {
      const r = await runCommand("sqlite3", [file, `.backup '${path.join(dir, "copy.sqlite3")}'`], { timeoutMs: 3_600_000 });
      if (r.code !== 0) throw new Error(`sqlite3 .backup failed: ${r.stderr}`);
      return r;
    });
  }
  const applied = /\+ (\d+) logged commits/.exec(restore.r.stdout);

  console.log(`\nDurable set through kvconnect bench (HTTP/2, 64 in flight, --sync full), ${duration} s windows, median of ${repeat}; load average now ${machineInfo({ deno: false }).loadavg.join(" ")}\n`);
  console.log("| server | set ops/s | p99 ms | ratio |");
  console.log("|---|---:|---:|---:|");
  console.log(`| without backup | ${fmtInt(ops("off"))} | ${p99("off").toFixed(2)} | 1.00 |`);
  console.log(`| --backup-to DIR (change log + shipping) | ${fmtInt(ops("on"))} | ${p99("on").toFixed(2)} | ${(ops("on") / ops("off")).toFixed(2)} (goal >= 0.85) |`);
  console.log(`\nRestore of a ${fmtInt(keys)}-key database (values ${valueBytes} bytes), ${JSON.parse(list.stdout).length} snapshot(s) in the target\n`);
  console.log("| step | seconds |");
  console.log("|---|---:|");
  console.log(`| kvconnect restore, latest state (snapshot + ${applied ? fmtInt(Number(applied[1])) : "?"} logged commits) | ${restore.seconds.toFixed(2)} |`);
  if (copy) console.log(`| baseline: sqlite3 .backup of the same file | ${copy.seconds.toFixed(2)} |`);
} catch (e) {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exitCode = 1;
} finally {
  for (const s of servers) await s.kill();
  await removeTempDirs();
}
