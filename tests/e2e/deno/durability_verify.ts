// Durability check after a crash: every acknowledged key must be present with the
// acknowledged versionstamp, and new writes must get larger versionstamps.
// env: DUR_ACKS_FILE: JSON array of {k, vs} (acks of all cycles so far)
import { assert, assertEquals, collect, fmt, main, openKv, step } from "./_lib.ts";

await main("durability_verify", async () => {
  const acks = JSON.parse(await Deno.readTextFile(Deno.env.get("DUR_ACKS_FILE")!)) as { k: Deno.KvKey; vs: string }[];
  assert(acks.length > 0, "no acknowledged writes to verify");
  const kv = await openKv();

  step("read everything under [dur]");
  const entries = await collect(kv.list<Record<string, unknown>>({ prefix: ["dur"] }, { batchSize: 1000 }));
  const stored = new Map(entries.map((e) => [JSON.stringify(e.key), e]));

  step("every acknowledged key is present with its versionstamp");
  const missing: string[] = [];
  const wrong: string[] = [];
  const seqAcked = new Map<string, number>();
  for (const { k, vs } of acks) {
    const e = stored.get(JSON.stringify(k));
    if (!e) {
      missing.push(JSON.stringify(k));
      continue;
    }
    if (e.versionstamp !== vs) wrong.push(`${JSON.stringify(k)}: acked ${vs}, stored ${e.versionstamp}`);
    const last = k[k.length - 1];
    if (k[2] === "seq") {
      assertEquals(e.value.i, last, `value of ${JSON.stringify(k)}`);
      seqAcked.set(String(k[1]), Math.max(seqAcked.get(String(k[1])) ?? 0, (last as number) + 1));
    } else if (k[2] === "par") {
      assertEquals([e.value.w, e.value.i], [k[3], k[4]], `value of ${JSON.stringify(k)}`);
    }
  }
  assert(missing.length === 0, `${missing.length} of ${acks.length} acknowledged keys are missing, e.g. ${missing.slice(0, 5).join(" ")}`);
  assert(wrong.length === 0, `${wrong.length} acknowledged keys have another versionstamp, e.g. ${wrong.slice(0, 5).join("; ")}`);

  step("sequential counters cover every acknowledged sequential write");
  for (const [ns, n] of seqAcked) {
    const c = await kv.get<Deno.KvU64>(["dur", ns, "seqcount"]);
    assert(c.value instanceof Deno.KvU64 && c.value.value >= BigInt(n),
      `seqcount of cycle ${ns} is ${fmt(c.value)}, but ${n} sequential writes were acknowledged`);
  }

  step("pairs written atomically are complete");
  for (const e of entries) {
    if (e.key[2] !== "pair") continue;
    const other = [...e.key.slice(0, -1), e.key[e.key.length - 1] === "a" ? "b" : "a"];
    const o = stored.get(JSON.stringify(other));
    assert(o && o.versionstamp === e.versionstamp, `atomic pair torn: ${fmt(e.key)} present without its partner`);
  }

  step("new writes get larger versionstamps than anything acknowledged");
  const maxAck = acks.map((a) => a.vs).reduce((a, b) => (a > b ? a : b));
  const maxStored = entries.map((e) => e.versionstamp).reduce((a, b) => (a > b ? a : b));
  const r = await kv.set(["dur-probe"], Date.now());
  assert(r.versionstamp > maxStored && r.versionstamp > maxAck,
    `versionstamp after restart ${r.versionstamp} must exceed stored ${maxStored} / acked ${maxAck}`);

  kv.close();
  return { acks: acks.length, stored: entries.length, maxAck, probe: r.versionstamp };
});
