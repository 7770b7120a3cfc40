// `kvconnect migrate --from URL` (an import over KV Connect, as from Deno Deploy) of a large
// database (100,000 entries by default), timed, next to `kvconnect export` of the same data in
// the same run. Prints a markdown table; asserts nothing about times (exit 1 only if a step
// fails or the copy's digests differ).
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/migrate_from_url.mjs [--entries N] [--value-bytes B]
//
// A source server gets the entries (keys ["bench", i], values objects with a number and a
// B-byte string) through `kvconnect import --url`; then, the source serving over h2c:
//   export          `kvconnect export --url` (the admin API's streamed dump: the baseline)
//   ndjson          migrate --to ndjson:FILE (the same dump, read over KV Connect)
//   sqlite          migrate --to sqlite:DIR (--sync full: one fsync per page of 1000)
//   server          migrate --to http://DEST (a second server's admin import API)
// Each migrate row is the copy alone (the importer's own "Copied N entries ... in S s" line);
// its verification (a re-read of the source and a read of the destination) is timed apart.
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { expectCliOk, makeTempDir, removeTempDirs, runKvconnect, startServer } from "../e2e/harness.mjs";
import { fmtInt, log, machineInfo, numberOption, printMachine } from "./lib.mjs";

const { values: args } = parseArgs({
  options: { entries: { type: "string" }, "value-bytes": { type: "string" } },
});
const entries = numberOption(args, "entries", 100_000, 1, true);
const valueBytes = numberOption(args, "value-bytes", 100, 0, true);

async function timed(what, fn) {
  log(`${what} ...`);
  const t0 = process.hrtime.bigint();
  const r = await fn();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  log(`${what}: ${seconds.toFixed(2)} s`);
  return { r, seconds };
}

const rows = [];
const dir = await makeTempDir("kvconnect-bench-migrate-");
let source;
let dest;
try {
  printMachine(machineInfo({ deno: false }), "kvconnect migrate --from URL");
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

  source = await startServer({ extraArgs: ["--rate-limit-rps", "0"] });
  dest = await startServer({ token: source.token, extraArgs: ["--rate-limit-rps", "0"] });
  const token = source.token;
  expectCliOk(await runKvconnect(["import", "--url", source.url, "--token", token, "-i", input], { timeoutMs: 900_000 }), source);

  // Baseline: the admin API's export of the same database.
  const exported = path.join(dir, "export.ndjson");
  const ex = await timed("kvconnect export --url", async () =>
    expectCliOk(await runKvconnect(["export", "--url", source.url, "--token", token, "-o", exported], { timeoutMs: 900_000 }), source));
  const dumpBytes = fs.statSync(exported).size;
  rows.push({ name: "baseline: kvconnect export --url (admin API dump)", entries, mb: dumpBytes / 1e6, unit: "dump", seconds: ex.seconds });

  const destinations = [
    ["ndjson", `ndjson:${path.join(dir, "copy.ndjson")}`, []],
    ["sqlite", `sqlite:${path.join(dir, "copy-data")}`, []],
    ["server", dest.url, ["--to-token", token, "--db", "copy"]],
  ];
  for (const [name, to, extra] of destinations) {
    const m = await timed(`migrate --to ${name}`, async () =>
      expectCliOk(await runKvconnect(["migrate", "--from", source.url, "--from-token", token, "--to", to, ...extra],
        { timeoutMs: 900_000 }), source, dest));
    const err = m.r.stderr;
    const copied = err.match(/Copied (\d+) entries \(([\d.]+) MB of keys and values\) in ([\d.]+) s/);
    if (!copied || Number(copied[1]) !== entries) throw new Error(`unexpected migrate output:\n${err}`);
    if (!/match: the destination holds what the source holds now/.test(err)) throw new Error(`digests differ:\n${err}`);
    const seconds = Number(copied[3]);
    const mb = name === "ndjson" ? fs.statSync(to.slice(7)).size / 1e6 : Number(copied[2]);
    rows.push({ name: `migrate --from URL --to ${name} (copy)`, entries, mb, unit: name === "ndjson" ? "dump" : "keys+values", seconds });
    rows.push({ name: `  ... and its verification (re-read source, read destination)`, entries, mb: 0, unit: "", seconds: m.seconds - seconds });
  }
  console.log(`${fmtInt(entries)} entries, each value an object {i: number, s: ${valueBytes}-byte string}; ` +
    `source over h2c on 127.0.0.1; load average now ${machineInfo({ deno: false }).loadavg.join(" ")}\n`);
  console.log("| step | entries | MB | seconds | entries/s | MB/s |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const rate = r.mb > 0 ? `${(r.mb / r.seconds).toFixed(1)} (${r.unit})` : "";
    console.log(`| ${r.name} | ${fmtInt(r.entries)} | ${r.mb ? r.mb.toFixed(1) : ""} | ${r.seconds.toFixed(2)} | ` +
      `${fmtInt(r.entries / r.seconds)} | ${rate} |`);
  }
} catch (e) {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exitCode = 1;
} finally {
  if (source) await source.kill();
  if (dest) await dest.kill();
  await removeTempDirs();
}
