// Child process for security.test.mjs: the npm client @deno/kv under Node over
// https://. Node reads NODE_EXTRA_CA_CERTS only when the process starts, so the test
// runs this file in its own `node` process with NODE_EXTRA_CA_CERTS=<ca.pem>.
// env: KV_URL (https://...), DENO_KV_ACCESS_TOKEN.
// Prints one JSON line {"ok":true,...} and exits 0, or prints the error and exits 1.
import v8 from "node:v8";
import { KvU64, openKv } from "@deno/kv";

const url = process.env.KV_URL;
const watchdog = setTimeout(() => {
  console.error("FAIL: still running after 30 s");
  process.exit(2);
}, 30_000);

try {
  const kv = await openKv(url, {
    accessToken: process.env.DENO_KV_ACCESS_TOKEN,
    encodeV8: v8.serialize,
    decodeV8: v8.deserialize,
    maxRetries: 0,
  });
  const p = ["node-https", Math.random().toString(36).slice(2)];
  const r = await kv.set([...p, "a"], { via: "node" });
  const got = await kv.get([...p, "a"]);
  if (got.value?.via !== "node" || got.versionstamp !== r.versionstamp) {
    throw new Error(`get after set returned ${JSON.stringify(got)}`);
  }
  const at = await kv.atomic().check({ key: [...p, "b"], versionstamp: null }).set([...p, "b"], 1).sum([...p, "n"], 2n).commit();
  if (!at.ok) throw new Error("atomic commit failed");
  const listed = [];
  for await (const e of kv.list({ prefix: p })) listed.push(e.key[e.key.length - 1]);
  if (JSON.stringify(listed) !== JSON.stringify(["a", "b", "n"])) throw new Error(`list returned ${JSON.stringify(listed)}`);
  const n = (await kv.get([...p, "n"])).value;
  if (!(n instanceof KvU64) || n.value !== 2n) throw new Error(`sum gave ${n}`);
  kv.close();
  clearTimeout(watchdog);
  console.log(JSON.stringify({ ok: true, url, listed }));
} catch (e) {
  console.error(`FAIL: ${e?.stack ?? e}`);
  process.exit(1);
}
