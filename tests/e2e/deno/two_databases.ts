// Several databases of one server opened side by side from one Deno process, each
// with its own access token. Deno reads DENO_KV_ACCESS_TOKEN when Deno.openKv is
// called, so the script sets it before each open.
// env: KV_DBS = JSON [{ "label", "url", "token", "value", "write" }] — every database
// gets KEY set to its `value` if `write`, then every database must read back its own
// `value`. Prints one line per database ("<label> <url>: get [...] -> value") for the
// test log. KV_URL must be set too (to any of the URLs) for _lib.ts.
import { assert, assertEquals, fmt, main, step } from "./_lib.ts";

type Db = { label: string; url: string; token: string; value: string; write?: boolean };
const KEY = ["shared", "greeting"];

await main("two_databases", async () => {
  const dbs: Db[] = JSON.parse(Deno.env.get("KV_DBS") ?? "[]");
  assert(dbs.length > 0, "KV_DBS is empty");
  const handles: Deno.Kv[] = [];
  for (const db of dbs) {
    step(`open ${db.label}`);
    Deno.env.set("DENO_KV_ACCESS_TOKEN", db.token);
    handles.push(await Deno.openKv(db.url));
  }
  const stamps: Record<string, string> = {};
  for (const [i, db] of dbs.entries()) {
    if (!db.write) continue;
    step(`write ${db.label}`);
    const r = await handles[i].set(KEY, db.value);
    assert(r.ok, `set on ${db.label}`);
    stamps[db.label] = r.versionstamp;
    console.log(`${db.label} ${db.url}: set ${fmt(KEY)} = ${fmt(db.value)} (versionstamp ${r.versionstamp})`);
  }
  const seen: Record<string, unknown> = {};
  for (const [i, db] of dbs.entries()) {
    step(`read ${db.label}`);
    const e = await handles[i].get<string>(KEY);
    seen[db.label] = e.value;
    console.log(`${db.label} ${db.url}: get ${fmt(KEY)} -> ${fmt(e.value)} (versionstamp ${e.versionstamp})`);
    assertEquals(e.value, db.value, `value of ${fmt(KEY)} in ${db.label}`);
    if (stamps[db.label]) assertEquals(e.versionstamp, stamps[db.label], `versionstamp in ${db.label}`);
  }
  for (const kv of handles) kv.close();
  return { seen };
});
