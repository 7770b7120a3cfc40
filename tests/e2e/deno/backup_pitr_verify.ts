// Point-in-time restore check: the database holds exactly the acknowledged writes whose
// versionstamp is at or before the restore point, each with its versionstamp, and none after.
// env: PITR_ACKS_FILE: JSON array of {k, vs}; PITR_AT: the versionstamp restored to
import { assert, collect, main, openKv, step } from "./_lib.ts";

await main("backup_pitr_verify", async () => {
  const acks = JSON.parse(await Deno.readTextFile(Deno.env.get("PITR_ACKS_FILE")!)) as { k: Deno.KvKey; vs: string }[];
  const at = Deno.env.get("PITR_AT")!;
  const kv = await openKv();
  step("read everything under [dur]");
  const entries = await collect(kv.list({ prefix: ["dur"] }, { batchSize: 1000 }));
  const stored = new Map(entries.map((e) => [JSON.stringify(e.key), e]));
  step("acknowledged writes up to the point are there, later ones are not");
  let before = 0, after = 0;
  const wrong: string[] = [];
  for (const { k, vs } of acks) {
    const e = stored.get(JSON.stringify(k));
    if (vs <= at) {
      before++;
      if (!e || e.versionstamp !== vs) wrong.push(`${JSON.stringify(k)} acked ${vs}: ${e ? e.versionstamp : "missing"}`);
    } else {
      after++;
      if (e && e.versionstamp === vs) wrong.push(`${JSON.stringify(k)} acked ${vs} after the point is present`);
    }
  }
  for (const e of entries) {
    if (e.versionstamp > at) wrong.push(`${JSON.stringify(e.key)} has versionstamp ${e.versionstamp} after the point`);
  }
  assert(wrong.length === 0, `${wrong.length} wrong, e.g. ${wrong.slice(0, 5).join("; ")}`);
  kv.close();
  return { before, after, entries: entries.length };
});
