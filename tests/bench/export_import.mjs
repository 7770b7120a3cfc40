// Export and import of a large database (100,000 entries by default), timed, next to SQLite's
// own `.dump` and its restore on the same file in the same run. Prints a markdown table;
// asserts nothing about times (exit 1 only if a step fails or counts disagree).
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/export_import.mjs [--entries N] [--value-bytes B]
//
// Steps: a generated dump (keys ["bench", i], values objects with a number and a B-byte string)
// is imported offline into `src` (the server stopped: the CLI's own engine, direct to the
// file); then with the server running: export through the admin API (CLI --url), export on the
// data directory beside the server, import through the admin API (CLI --url) into `dst`, and the
// same again with --mode replace (deleting the 100,000 first). Every import commits each batch
// of 500 with fsync (--sync full).
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { expectCliOk, makeTempDir, removeTempDirs, runKvconnect, startServer } from "../e2e/harness.mjs";
import { fmtInt, log, machineInfo, numberOption, printMachine, runCommand, which } from "./lib.mjs";

const { values: args } = parseArgs({
  options: { entries: { type: "string" }, "value-bytes": { type: "string" } },
});
const entries = numberOption(args, "entries", 100_000, 1, true);
const valueBytes = numberOption(args, "value-bytes", 100, 0, true);

function countLines(file) {
  const buf = fs.readFileSync(file);
  let n = 0;
  for (const b of buf) if (b === 10) n++;
  return n;
}

async function timed(what, fn) {
  log(`${what} ...`);
  const t0 = process.hrtime.bigint();
  const r = await fn();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  log(`${what}: ${seconds.toFixed(2)} s`);
  return { ...r, seconds };
}

function row(name, n, bytes, seconds) {
  return { name, entries: n, bytes, seconds };
}

const rows = [];
const dir = await makeTempDir("kvconnect-bench-dump-");
let server;
try {
  printMachine(machineInfo({ deno: false }), "kvconnect export/import");

  // A dump as export writes it.
  const input = path.join(dir, "input.ndjson");
  const pad = "x".repeat(valueBytes);
  const out = fs.createWriteStream(input);
  for (let i = 0; i < entries; i++) {
    const line = `{"key":[{"type":"string","value":"bench"},{"type":"number","value":${i}}],` +
      `"value":{"type":"object","value":{"i":{"type":"number","value":${i}},"s":{"type":"string","value":"${pad}"}}},` +
      `"versionstamp":"00000000000000010000"}\n`;
    if (!out.write(line)) await new Promise((r) => out.once("drain", r));
  }
  await new Promise((r) => out.end(r));
  const inputBytes = fs.statSync(input).size;

  const dataDir = path.join(dir, "data");
  for (const db of ["src", "dst"]) {
    expectCliOk(await runKvconnect(["db", "create", db, "--data-dir", dataDir], { timeoutMs: 60_000 }));
  }
  const offline = await timed("offline import (server stopped)", async () =>
    expectCliOk(await runKvconnect(["import", "--db", "src", "--data-dir", dataDir, "-i", input], { timeoutMs: 900_000 })));
  rows.push(row("import, offline (CLI --data-dir, server stopped)", entries, inputBytes, offline.seconds));

  server = await startServer({ dataDir, extraArgs: ["--rate-limit-rps", "0"] });
  const urlArgs = ["--url", server.url, "--token", server.token];
  const viaApi = path.join(dir, "api.ndjson");
  const ex = await timed("export through the admin API", async () =>
    expectCliOk(await runKvconnect(["export", "--db", "src", ...urlArgs, "-o", viaApi], { timeoutMs: 900_000 }), server));
  const exported = countLines(viaApi);
  if (exported !== entries) throw new Error(`exported ${exported} entries, expected ${entries}`);
  rows.push(row("export, admin API (CLI --url)", exported, fs.statSync(viaApi).size, ex.seconds));

  const direct = path.join(dir, "direct.ndjson");
  const exd = await timed("export on the data directory", async () =>
    expectCliOk(await server.cli(["export", "--db", "src", "-o", direct], { timeoutMs: 900_000 }), server));
  rows.push(row("export, data directory beside the server (CLI --data-dir)", countLines(direct), fs.statSync(direct).size, exd.seconds));
  if (fs.readFileSync(direct, "utf8") !== fs.readFileSync(viaApi, "utf8")) throw new Error("the two exports differ");

  const im = await timed("import through the admin API", async () =>
    expectCliOk(await runKvconnect(["import", "--db", "dst", ...urlArgs, "-i", viaApi], { timeoutMs: 900_000 }), server));
  rows.push(row("import, admin API (CLI --url), merge into an empty database", entries, fs.statSync(viaApi).size, im.seconds));
  const rep = await timed("replace through the admin API", async () =>
    expectCliOk(await runKvconnect(["import", "--db", "dst", "--mode", "replace", ...urlArgs, "-i", viaApi], { timeoutMs: 900_000 }), server));
  rows.push(row(`import, admin API, --mode replace (deletes ${fmtInt(entries)} first)`, entries, fs.statSync(viaApi).size, rep.seconds));

  // Baseline: SQLite's own text dump and restore of the same database file, same machine.
  const sqlite = which("sqlite3");
  const list = JSON.parse(expectCliOk(await server.dbCmd("list", "--json"), server).stdout);
  const srcFile = list.find((d) => d.name === "src").path;
  if (sqlite) {
    const sql = path.join(dir, "src.sql");
    const d = await timed("sqlite3 .dump", async () => {
      const r = await runCommand("sh", ["-c", `"${sqlite}" "${srcFile}" .dump > "${sql}"`], { timeoutMs: 900_000 });
      if (r.code !== 0) throw new Error(`sqlite3 .dump failed: ${r.stderr}`);
      return r;
    });
    rows.push(row("baseline: sqlite3 .dump of the same file", entries, fs.statSync(sql).size, d.seconds));
    const restored = path.join(dir, "restored.sqlite3");
    const rr = await timed("sqlite3 restore", async () => {
      const r = await runCommand("sh", ["-c", `"${sqlite}" "${restored}" < "${sql}"`], { timeoutMs: 900_000 });
      if (r.code !== 0) throw new Error(`sqlite3 restore failed: ${r.stderr}`);
      return r;
    });
    rows.push(row("baseline: sqlite3 restore of that .dump (one transaction)", entries, fs.statSync(sql).size, rr.seconds));
  } else {
    log("sqlite3 not installed: no baseline rows");
  }

  console.log(`${fmtInt(entries)} entries, each value an object {i: number, s: ${valueBytes}-byte string}; kvconnect serve --sync full; load average now ${machineInfo({ deno: false }).loadavg.join(" ")}\n`);
  console.log("| step | entries | bytes | seconds | entries/s | MB/s |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    console.log(`| ${r.name} | ${fmtInt(r.entries)} | ${fmtInt(r.bytes)} | ${r.seconds.toFixed(2)} | ` +
      `${fmtInt(r.entries / r.seconds)} | ${(r.bytes / 1e6 / r.seconds).toFixed(1)} |`);
  }
} catch (e) {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exitCode = 1;
} finally {
  if (server) await server.kill();
  await removeTempDirs();
}
