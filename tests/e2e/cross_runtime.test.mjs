// Values shared across runtimes (README "Values across runtimes", --portable-v8-values): Deno
// 2.9.6 and Node 20 with @deno/kv 0.14 (v8.serialize / v8.deserialize) exchange one value of
// every kind through the server, both ways, and Node reads a SQLite file Deno wrote locally
// and the server serves with --sqlite-path (conversion at read time, snapshot reads and watch
// frames). Each exchange runs with the switch off (values stored and served exactly as sent)
// and on. Printed: a table of value x direction, before (off) / after (on).
//
// Asserted: with the switch on every value reads back equal in every direction; with it off the
// known failures appear, and only those: Node cannot read any V8 value Deno wrote (format 16,
// "Unable to deserialize cloned data due to invalid or unsupported version."), only the raw
// bytes of a top-level Uint8Array and KvU64s, which are not V8 values; Deno cannot read a value
// Node wrote with a typed array or DataView in it (Node's host-object form), nor an error with
// both a cause and a stack (Node 20 writes the cause first).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import v8 from "node:v8";
import { KvU64, openKv } from "@deno/kv";
import {
  annotate, expectDenoOk, makeTempDir, removeTempDirs, runDeno, startServer,
} from "./harness.mjs";
import { crossValues, describeRead, sameValue } from "./cross_runtime_values.mjs";

const codec = { encodeV8: v8.serialize, decodeV8: v8.deserialize };
const OFF = ["--portable-v8-values=false"];

// Not V8 values: @deno/kv and Deno store these as raw bytes (VE_BYTES) and LE64 (VE_LE64).
const NOT_V8 = new Set(["Uint8Array (top level)", "KvU64"]);
// Deno cannot read these as Node's v8.serialize writes them: typed arrays as Node host objects,
// and an error's cause before its stack (Node 20's V8; Deno's reads prototype, message, stack,
// cause and nothing else).
const NODE_ONLY_FORMS = new Set([
  "Int8Array", "Uint8Array (in an object)", "Uint8ClampedArray", "Int16Array", "Uint16Array",
  "Int32Array", "Uint32Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array",
  "DataView", "typed arrays (shared buffer)", "Error (cause)",
]);
const DIRECTIONS = {
  denoToNode: { title: "Deno → Node", failsBefore: (name) => !NOT_V8.has(name) },
  nodeToDeno: { title: "Node → Deno", failsBefore: (name) => NODE_ONLY_FORMS.has(name) },
  denoFileToNode: { title: "Deno file → Node", failsBefore: (name) => !NOT_V8.has(name) },
};

after(removeTempDirs);

async function openNode(server) {
  return await openKv(server.url, { accessToken: server.token, ...codec });
}

// Node reads each value at [prefix, who, name]: "OK", "differs" or "error: ...".
async function nodeReads(kv, prefix, who) {
  const reads = {};
  for (const [name, make] of crossValues) {
    try {
      const entry = await kv.get([prefix, who, name]);
      reads[name] = entry.versionstamp === null
        ? "error: missing"
        : describeRead({ same: sameValue(entry.value, make(KvU64)) });
    } catch (e) {
      reads[name] = describeRead({ error: e instanceof Error ? e.message : String(e) });
    }
  }
  return reads;
}

// Node watches every value at [prefix, who, name] (10 keys per watch) and returns the names
// whose first frame did not hold the value.
async function nodeWatchMismatches(kv, prefix, who) {
  const bad = [];
  for (let i = 0; i < crossValues.length; i += 10) {
    const chunk = crossValues.slice(i, i + 10);
    const reader = kv.watch(chunk.map(([name]) => [prefix, who, name])).getReader();
    try {
      const { value: entries } = await reader.read();
      chunk.forEach(([name, make], j) => {
        if (!sameValue(entries[j].value, make(KvU64))) bad.push(name);
      });
    } finally {
      await reader.cancel();
    }
  }
  return bad;
}

// kvconnect_portable_v8_values_total by "path/outcome" from the server's /metrics.
async function conversionCounts(server) {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } })).text();
  const counts = {};
  for (const m of text.matchAll(/^kvconnect_portable_v8_values_total\{([^}]*)\} (\S+)$/gm)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    counts[`${labels.path}/${labels.outcome}`] = Number(m[2]);
  }
  return counts;
}

// Node writes, Deno writes and reads Node's values, Node reads Deno's.
async function exchange(extraArgs) {
  const server = await startServer({ extraArgs });
  const kv = await openNode(server);
  try {
    for (const [name, make] of crossValues) await kv.set(["xr", "node", name], make(KvU64));
    const res = await runDeno("cross_runtime.ts", {
      kvUrl: server.url, token: server.token, env: { XR_PREFIX: "xr", XR_READ: "1" }, timeoutMs: 90_000,
    });
    const nodeToDeno = expectDenoOk(res, server).reads;
    const denoToNode = await nodeReads(kv, "xr", "deno");
    const watchBad = extraArgs.length === 0 ? await nodeWatchMismatches(kv, "xr", "deno") : [];
    return { nodeToDeno, denoToNode, watchBad, counts: await conversionCounts(server) };
  } catch (e) {
    throw annotate(e, server);
  } finally {
    kv.close();
    await server.kill();
  }
}

// Deno writes a local SQLite file (format 16 on disk); the server serves it; Node reads.
async function fileExchange(extraArgs) {
  const dir = await makeTempDir("kvconnect-xr-file-");
  const file = path.join(dir, "deno.sqlite3");
  expectDenoOk(await runDeno("cross_runtime.ts", { kvUrl: file, env: { XR_PREFIX: "file" } }));
  const server = await startServer({ sqlitePath: file, extraArgs });
  const kv = await openNode(server);
  try {
    const denoFileToNode = await nodeReads(kv, "file", "deno");
    const watchBad = extraArgs.length === 0 ? await nodeWatchMismatches(kv, "file", "deno") : [];
    return { denoFileToNode, watchBad, counts: await conversionCounts(server) };
  } catch (e) {
    throw annotate(e, server);
  } finally {
    kv.close();
    await server.kill();
  }
}

// A markdown table; error texts become footnotes.
function printTable(before, after) {
  const notes = [];
  const cell = (text) => {
    if (text === "OK") return "OK";
    let i = notes.indexOf(text);
    if (i < 0) i = notes.push(text) - 1;
    return `FAIL [${i + 1}]`;
  };
  const dirs = Object.keys(DIRECTIONS);
  const header = ["value", ...dirs.flatMap((d) => [`${DIRECTIONS[d].title} before`, "after"])];
  const lines = [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`];
  for (const [name] of crossValues) {
    lines.push(`| ${name} | ${dirs.flatMap((d) => [cell(before[d][name]), cell(after[d][name])]).join(" | ")} |`);
  }
  console.log(
    "\nValues across runtimes: type x direction, before (--portable-v8-values=false) / after (default)\n\n" +
      lines.join("\n") + "\n\n" + notes.map((n, i) => `[${i + 1}] ${n}`).join("\n") + "\n",
  );
}

test("Deno and Node read each other's values (switch off: before, on: after)", { timeout: 300_000 }, async () => {
  const beforeLive = await exchange(OFF);
  const beforeFile = await fileExchange(OFF);
  const before = { ...beforeLive, ...beforeFile };
  const live = await exchange([]);
  const file = await fileExchange([]);
  const afterReads = { ...live, ...file };
  printTable(before, afterReads);

  for (const [dir, { title, failsBefore }] of Object.entries(DIRECTIONS)) {
    for (const [name] of crossValues) {
      assert.equal(afterReads[dir][name], "OK", `after, ${title}: ${name}`);
      const got = before[dir][name];
      if (failsBefore(name)) {
        assert.match(got, /^error: /, `before, ${title}: ${name} should fail, got ${got}`);
      } else {
        assert.equal(got, "OK", `before, ${title}: ${name}`);
      }
    }
  }
  // The failures the clients report: Node for format 16, Deno for Node's forms.
  assert.match(before.denoToNode.string, /invalid or unsupported version/);
  assert.match(before.nodeToDeno.Int8Array, /could not deserialize value/);
  assert.match(before.nodeToDeno["Error (cause)"], /could not deserialize value/);
  // Watch frames carry the values readable too (written portable; the file's converted on the way out).
  assert.deepEqual(live.watchBad, []);
  assert.deepEqual(file.watchBad, []);
  // /metrics counts the conversions: at write time (Deno's values re-headed, Node's with typed
  // arrays or an error cause rewritten) and, for the file, at read time; nothing with the switch off.
  const v8Values = crossValues.length - NOT_V8.size;
  console.log("conversions (on):", JSON.stringify(live.counts), "file (on):", JSON.stringify(file.counts));
  assert.equal(live.counts["write/format_16_to_15"], v8Values);
  assert.equal(live.counts["write/rewritten"], NODE_ONLY_FORMS.size);
  assert.equal(live.counts["write/kept"], 0);
  assert.ok(file.counts["read/format_16_to_15"] >= 2 * v8Values, JSON.stringify(file.counts));
  for (const { counts } of [beforeLive, beforeFile]) {
    assert.ok(Object.values(counts).every((n) => n === 0), JSON.stringify(counts));
  }
});
