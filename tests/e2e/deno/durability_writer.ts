// Durability writer: performs sequential and concurrent writes and prints one line
//   ACK {"k":[...key],"vs":"<versionstamp>"}
// for every key as soon as the client's promise resolves (= acknowledged). It never
// exits on its own before DUR_MAX_MS; the test SIGKILLs the server (and then this
// process) at some point.
// env: DUR_NS (namespace for this cycle), DUR_WORKERS (concurrent loops, default 6),
//      DUR_MAX_MS (default 30000), DUR_WATCH=1 (also keep a watch stream open)
import { openKv } from "./_lib.ts";

const ns = Deno.env.get("DUR_NS") ?? "default";
const workers = Number(Deno.env.get("DUR_WORKERS") ?? "6");
const maxMs = Number(Deno.env.get("DUR_MAX_MS") ?? "30000");
const P = ["dur", ns];
const kv = await openKv();
const started = Date.now();
const enc = new TextEncoder();
const ack = (k: Deno.KvKey, vs: string) => {
  // Deno writes stdout synchronously, so the line is out before the next await.
  const buf = enc.encode(`ACK ${JSON.stringify({ k, vs })}\n`);
  for (let off = 0; off < buf.length;) off += Deno.stdout.writeSync(buf.subarray(off));
};
const pad = "p".repeat(200);

async function sequential() {
  for (let i = 0; Date.now() - started < maxMs; i++) {
    const k = [...P, "seq", i];
    // one atomic: the key plus a counter that must be >= the number of acked seq keys
    const r = await kv.atomic().set(k, { i, pad }).sum([...P, "seqcount"], 1n).commit();
    if (!r.ok) throw new Error(`seq ${i} not ok`);
    ack(k, r.versionstamp);
  }
}

async function concurrent(w: number) {
  for (let i = 0; Date.now() - started < maxMs; i++) {
    if (i % 3 === 2) {
      const ka = [...P, "pair", w, i, "a"];
      const kb = [...P, "pair", w, i, "b"];
      const r = await kv.atomic().check({ key: ka, versionstamp: null }).set(ka, { w, i }).set(kb, { w, i }).commit();
      if (!r.ok) throw new Error(`pair ${w}/${i} not ok`);
      ack(ka, r.versionstamp);
      ack(kb, r.versionstamp);
    } else {
      const k = [...P, "par", w, i];
      const r = await kv.set(k, { w, i, pad });
      ack(k, r.versionstamp);
    }
  }
}

if (Deno.env.get("DUR_WATCH") === "1") {
  // a long-lived watch stream that the server has to deal with when it shuts down
  (async () => {
    try {
      for await (const _frame of kv.watch([[...P, "seq", 0], [...P, "seqcount"]])) { /* keep reading */ }
    } catch (e) {
      console.error(`durability writer ${ns}: watch ended: ${e}`);
    }
  })();
}

console.error(`durability writer ${ns}: starting ${workers} concurrent loops + 1 sequential loop`);
await Promise.all([sequential(), ...Array.from({ length: workers }, (_, w) => concurrent(w))]);
console.error(`durability writer ${ns}: DUR_MAX_MS reached without being killed`);
kv.close();
