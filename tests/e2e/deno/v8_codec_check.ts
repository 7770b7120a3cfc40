// Used by ../v8_codec.test.mjs: stores the bytes our encoder wrote (DIR/encoded.json: name,
// value encoding, hex) as the values of a Deno KV SQLite file, reads them with Deno.openKv, and
// prints {"checked", "mismatches"} comparing them with the samples' original values.
import { DatabaseSync } from "node:sqlite";
import util from "node:util";
import { samples } from "../../fixtures/v8/samples.mjs";

const dir = Deno.args[0];
const encoded: { name: string; encoding: number; hex: string }[] = JSON.parse(
  Deno.readTextFileSync(`${dir}/encoded.json`),
);
const path = `${dir}/kv.sqlite3`;

// Create the rows through Deno (placeholder values), then put our bytes in them.
let kv = await Deno.openKv(path);
for (const e of encoded) await kv.set(["v8", e.name], null);
kv.close();
const db = new DatabaseSync(path);
const update = db.prepare("UPDATE kv SET v = ?, v_encoding = ? WHERE k = ?");
const keyOf = (name: string) => {
  const enc = new TextEncoder();
  return new Uint8Array([2, ...enc.encode("v8"), 0, 2, ...enc.encode(name), 0]);
};
for (const e of encoded) {
  const bytes = new Uint8Array(e.hex.match(/../g)?.map((h) => parseInt(h, 16)) ?? []);
  update.run(bytes, e.encoding, keyOf(e.name));
}
db.close();

kv = await Deno.openKv(path);
const mismatches: string[] = [];
for (const e of encoded) {
  const sample = samples.find((s) => s.name === e.name)!;
  const want = await sample.make();
  let got: unknown;
  try {
    got = (await kv.get(["v8", e.name])).value;
  } catch (error) {
    mismatches.push(`${e.name}: ${error}`);
    continue;
  }
  const same = want instanceof Date && got instanceof Date
    ? Object.is(want.getTime(), got.getTime())
    : want instanceof CryptoKey
    ? got instanceof CryptoKey && util.isDeepStrictEqual(want.algorithm, got.algorithm)
    : util.isDeepStrictEqual(got, want);
  if (!same) mismatches.push(`${e.name}: ${Deno.inspect(got)} != ${Deno.inspect(want)}`);
}
kv.close();
console.log(JSON.stringify({ checked: encoded.length, mismatches }));
