// Check-and-set increments of one counter: CAS_LOOPS concurrent loops in this process each
// make CAS_INCREMENTS successful increments of [...CAS_NS, "counter"] (get, then an atomic
// that checks the versionstamp read and sets value + 1), retrying when the check fails. Each
// commit also sums 1 into [...CAS_NS, "commits"] (no check), so a lost update shows up as
// commits > counter. Prints the values this process wrote, its retries and versionstamps.
// env: CAS_NS, CAS_LOOPS, CAS_INCREMENTS, WORKER_ID
import { assert, main, openKv, step } from "./_lib.ts";

await main("cas_counter", async () => {
  const space = Deno.env.get("CAS_NS");
  assert(space, "env CAS_NS is not set");
  const loops = Number(Deno.env.get("CAS_LOOPS") ?? "4");
  const increments = Number(Deno.env.get("CAS_INCREMENTS") ?? "10");
  const counter = ["e2e", "cas", space, "counter"];
  const commits = ["e2e", "cas", space, "commits"];
  const kv = await openKv();
  const wrote: number[] = [];
  const stamps: string[] = [];
  let retries = 0;

  step("increment");
  const loop = async () => {
    for (let done = 0; done < increments;) {
      const cur = await kv.get<number>(counter);
      const next = (cur.value ?? 0) + 1;
      const r = await kv.atomic().check(cur).set(counter, next).sum(commits, 1n).commit();
      if (r.ok) {
        wrote.push(next);
        stamps.push(r.versionstamp);
        done++;
      } else {
        retries++;
      }
    }
  };
  await Promise.all(Array.from({ length: loops }, loop));
  kv.close();
  return { id: Number(Deno.env.get("WORKER_ID") ?? "0"), wrote, stamps, retries };
});
