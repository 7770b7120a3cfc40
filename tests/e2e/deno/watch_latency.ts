// A watcher on node B (KV_URL_B) and a writer on node A (KV_URL), in one process so both
// use one clock: WATCH_WRITES sets of one key to 1, 2, ... via A, WATCH_SPACING_MS apart.
// Every frame B delivers must carry a value A wrote with the versionstamp A's commit
// returned, values only grow (frames may coalesce), and the last value arrives. Reports, per
// value seen, the time from A's commit answer to B's frame (negative: the frame came first).
// env: KV_URL_B, WATCH_WRITES, WATCH_SPACING_MS
import { assert, assertEquals, main, ns, openKv, readFrame, sleep, step } from "./_lib.ts";

type Frame = Deno.KvEntryMaybe<number>[];

await main("watch_latency", async () => {
  const urlB = Deno.env.get("KV_URL_B");
  assert(urlB, "env KV_URL_B (node B) is not set");
  const writes = Number(Deno.env.get("WATCH_WRITES") ?? "200");
  const spacingMs = Number(Deno.env.get("WATCH_SPACING_MS") ?? "5");
  const a = await openKv();
  const b = await Deno.openKv(urlB);
  const key = [...ns("watch_latency"), "k"];

  step("initial value via A, first frame via B");
  const r0 = await a.set(key, 0);
  const reader = b.watch<[number]>([key]).getReader();
  const first = await readFrame<Frame>(reader, 5000, "first frame");
  assertEquals(first, [{ key, value: 0, versionstamp: r0.versionstamp }], "B's first frame has A's write");

  const ackAt = new Array<number>(writes + 1);
  const sentAt = new Array<number>(writes + 1);
  const stamps = new Array<string>(writes + 1);
  const seen: { value: number; versionstamp: string; at: number }[] = [];
  let done = false;
  const watching = (async () => {
    const deadline = () => (done ? 10_000 : 60_000);
    while (seen.length === 0 || seen[seen.length - 1].value !== writes) {
      const f = await readFrame<Frame>(reader, deadline(), `frame after value ${seen.at(-1)?.value ?? 0}`);
      seen.push({ value: f[0].value as number, versionstamp: f[0].versionstamp as string, at: performance.now() });
    }
  })();

  step("writes via A");
  for (let i = 1; i <= writes; i++) {
    sentAt[i] = performance.now();
    const r = await a.set(key, i);
    ackAt[i] = performance.now();
    stamps[i] = r.versionstamp;
    if (spacingMs > 0) await sleep(spacingMs);
  }
  done = true;

  step("B sees the last value");
  await watching;
  await reader.cancel();

  step("frames are A's commits, in order");
  for (let i = 0; i < seen.length; i++) {
    const s = seen[i];
    assert(Number.isInteger(s.value) && s.value >= 1 && s.value <= writes, `frame ${i}: value ${s.value} was never written`);
    assertEquals(s.versionstamp, stamps[s.value], `frame ${i} (value ${s.value}): versionstamp of A's commit`);
    if (i > 0) assert(s.value > seen[i - 1].value, `frame ${i}: value ${s.value} after ${seen[i - 1].value}`);
  }
  const latencies = seen.map((s) => Math.round((s.at - ackAt[s.value]) * 100) / 100);
  const fromSend = seen.map((s) => Math.round((s.at - sentAt[s.value]) * 100) / 100);
  const writeMs = ackAt.slice(1).map((t, i) => t - sentAt[i + 1]);
  a.close();
  b.close();
  return {
    writes,
    frames: seen.length,
    lastValue: seen[seen.length - 1].value,
    latenciesMs: latencies,
    fromSendMs: fromSend,
    writeMsAvg: Math.round(writeMs.reduce((x, y) => x + y, 0) / writeMs.length * 100) / 100,
  };
});
