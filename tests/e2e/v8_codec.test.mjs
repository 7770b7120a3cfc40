// Bytes our V8 encoder writes (src/codec/v8/v8_tree.h, through the JSON views of v8_json.h) must be
// read back as the original values by the real runtimes: Node's v8.deserialize, and Deno 2.9.6
// reading them from its own KV SQLite file. The values and their JSON views are the samples of
// tests/fixtures/v8/samples.mjs. Needs V8_CODEC_TOOL (ctest sets it: v8_codec_runtimes).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import test from "node:test";
import util from "node:util";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import { denoBin, denoEnv } from "./harness.mjs";
import { samples, stringify } from "../fixtures/v8/samples.mjs";

const tool = process.env.V8_CODEC_TOOL;
const here = path.dirname(fileURLToPath(import.meta.url));

// What this Node lacks of what some samples need (a sample's `needs`): Debian 12's Node 18 has
// neither the RegExp v flag nor resizable ArrayBuffers. Such samples are left to Deno here and
// named in the output; a newer Node checks them all.
function nodeLacks(need) {
  if (need === "regexp-v") {
    try { new RegExp("", "v"); return false; } catch { return true; }
  }
  if (need === "resizable-buffer") return typeof ArrayBuffer.prototype.resize !== "function";
  return false;
}

// Every sample's JSON view (without expanding shared objects where given), encoded by our codec.
function encodeAll(version) {
  const lines = samples.map((s) => stringify(s.jsonRefs ?? s.json)).join("\n") + "\n";
  const run = spawnSync(tool, [String(version)], { input: lines, encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout.trim().split("\n").map((line, i) => {
    const [encoding, ...rest] = line.split(" ");
    assert.notEqual(encoding, "error", `${samples[i].name}: ${line}`);
    return { name: samples[i].name, encoding: Number(encoding), hex: rest.join("") };
  });
}

export function sameValue(a, b) {
  if (a instanceof Date && b instanceof Date) return Object.is(a.getTime(), b.getTime());
  return util.isDeepStrictEqual(a, b);
}

test("Node reads every value our encoder writes", { skip: !tool && "V8_CODEC_TOOL not set" }, async () => {
  const encoded = encodeAll(15);
  let checked = 0;
  const lacking = [];
  for (const [i, sample] of samples.entries()) {
    if (sample.only === "deno" || encoded[i].encoding !== 1) continue;
    if (sample.needs && nodeLacks(sample.needs)) {
      lacking.push(`${sample.name} (${sample.needs})`);
      continue;
    }
    const bytes = Buffer.from(encoded[i].hex, "hex");
    assert.equal(bytes[1], 15);
    const got = v8.deserialize(bytes);
    let want = await sample.make();
    if (Buffer.isBuffer(want?.v)) want = { v: new Uint8Array(want.v) };
    assert.ok(sameValue(got, want), `${sample.name}: ${util.inspect(got)} != ${util.inspect(want)}`);
    checked++;
  }
  // Shared objects stay shared.
  const shared = v8.deserialize(Buffer.from(encoded.find((e) => e.name === "ref_shared").hex, "hex"));
  assert.equal(shared[0], shared[1]);
  assert.ok(checked > 90, `only ${checked} samples checked`);
  if (lacking.length) console.log(`left to Deno, this Node ${process.version} lacks them: ${lacking.join(", ")}`);
});

test("Deno reads every value our encoder writes from its KV file", { skip: !tool && "V8_CODEC_TOOL not set", timeout: 120_000 }, () => {
  for (const version of [15, 16]) {
    const encoded = encodeAll(version).filter((e) => samples.find((s) => s.name === e.name).only !== "node");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "v8-codec-"));
    try {
      fs.writeFileSync(path.join(dir, "encoded.json"), JSON.stringify(encoded));
      const run = spawnSync(denoBin(), ["run", "--quiet", "--unstable-kv", "--allow-read", "--allow-write",
        path.join(here, "deno", "v8_codec_check.ts"), dir], { encoding: "utf8", env: denoEnv() });
      assert.equal(run.status, 0, `deno failed: ${run.stderr}\n${run.stdout}`);
      const result = JSON.parse(run.stdout);
      assert.deepEqual(result.mismatches, [], `format ${version}`);
      assert.equal(result.checked, encoded.length);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
});
