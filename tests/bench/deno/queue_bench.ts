// Deno's local queue, the baseline of tests/bench/queue.mjs: the same work as the kvconnect
// side, on `Deno.openKv(KV_URL)` (a fresh SQLite file) with kv.enqueue and kv.listenQueue.
//
//   KV_URL=/tmp/q.sqlite QB_MESSAGES=20000 QB_LATENCY_MESSAGES=200 \
//     deno run --unstable-kv -A tests/bench/deno/queue_bench.ts
//
// 1. Throughput: QB_MESSAGES messages {k: "t", i} enqueued in atomic batches of
//    QB_ENQUEUE_BATCH (at most 1000, Deno's mutation limit), then one listenQueue handler
//    counts them until every i arrived: delivery messages/s from the listenQueue call to the
//    last delivery. (A Deno process has one listener; Deno dispatches to it with its own
//    concurrency.)
// 2. Latency: with the queue idle, QB_LATENCY_MESSAGES messages {k: "l", t0} one at a time:
//    t0 = performance.now() before kv.enqueue; the handler takes performance.now() - t0. The
//    next one is enqueued QB_GAP_MS after the handler returned; the first QB_LATENCY_WARMUP
//    (default 5) are not counted.
// Prints one JSON line: {ok, messages, enqueue_s, enqueue_per_s, deliver_s, deliver_per_s,
// duplicates, latency: {count, p50, p90, p99, max}, enqueue_ms: {p50, p99}}; exits 1 when a
// message is missing or the watchdog (KV_SCRIPT_TIMEOUT_MS) fires.

function fail(msg: string): never {
  console.error(`queue_bench: ${msg}`);
  Deno.exit(1);
}

const target = Deno.env.get("KV_URL") ?? fail("KV_URL is not set");
const num = (name: string, def: number) => {
  const raw = Deno.env.get(name);
  if (raw === undefined || raw === "") return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) fail(`${name} must be a positive integer, got ${raw}`);
  return n;
};
const MESSAGES = num("QB_MESSAGES", 20000);
const LATENCY_MESSAGES = num("QB_LATENCY_MESSAGES", 200);
const BATCH = Math.min(1000, num("QB_ENQUEUE_BATCH", 1000));
const GAP_MS = num("QB_GAP_MS", 10);
const WARMUP = Number(Deno.env.get("QB_LATENCY_WARMUP") ?? "5");
const watchdogMs = Number(Deno.env.get("KV_SCRIPT_TIMEOUT_MS") ?? "0");
if (watchdogMs > 0) setTimeout(() => fail(`watchdog: still running after ${watchdogMs} ms`), watchdogMs);

/** Nearest-rank percentile of an ascending array. */
function percentile(sorted: number[], p: number): number | null {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
}
const round3 = (x: number | null) => (x === null ? null : Math.round(x * 1000) / 1000);

const kv = await Deno.openKv(target);

// 1. Throughput.
const seen = new Uint8Array(MESSAGES);
let delivered = 0;
let duplicates = 0;
let allDelivered: () => void;
const allDone = new Promise<void>((r) => (allDelivered = r));
let onLatency: ((ms: number) => void) | null = null;

const e0 = performance.now();
for (let i = 0; i < MESSAGES; i += BATCH) {
  const op = kv.atomic();
  for (let j = i; j < Math.min(MESSAGES, i + BATCH); j++) op.enqueue({ k: "t", i: j });
  const r = await op.commit();
  if (!r.ok) fail("an enqueue commit was refused");
}
const enqueueS = (performance.now() - e0) / 1000;

const d0 = performance.now();
let dEnd = d0;
const listening = kv.listenQueue((m: { k: string; i?: number; t0?: number }) => {
  if (m.k === "t") {
    if (seen[m.i!]) {
      duplicates++;
      return;
    }
    seen[m.i!] = 1;
    if (++delivered === MESSAGES) {
      dEnd = performance.now();
      allDelivered();
    }
  } else if (m.k === "l") {
    const ms = performance.now() - m.t0!;
    onLatency?.(ms);
  }
});
await allDone;
const deliverS = (dEnd - d0) / 1000;

// 2. Latency, the queue idle.
await new Promise((r) => setTimeout(r, 200));
const lat: number[] = [];
const enq: number[] = [];
for (let n = 0; n < WARMUP + LATENCY_MESSAGES; n++) {
  const got = new Promise<number>((r) => (onLatency = r));
  const t0 = performance.now();
  await kv.enqueue({ k: "l", t0 });
  const te = performance.now() - t0;
  const ms = await got;
  if (n < WARMUP) continue;
  enq.push(te);
  lat.push(ms);
  onLatency = null;
  await new Promise((r) => setTimeout(r, GAP_MS));
}
lat.sort((a, b) => a - b);
enq.sort((a, b) => a - b);

kv.close();
await listening.catch(() => {});
console.log(JSON.stringify({
  ok: delivered === MESSAGES && lat.length === LATENCY_MESSAGES,
  messages: MESSAGES,
  enqueue_s: round3(enqueueS),
  enqueue_per_s: Math.round(MESSAGES / enqueueS),
  deliver_s: round3(deliverS),
  deliver_per_s: Math.round(MESSAGES / deliverS),
  duplicates,
  latency: {
    count: lat.length,
    p50: round3(percentile(lat, 50)),
    p90: round3(percentile(lat, 90)),
    p99: round3(percentile(lat, 99)),
    max: round3(percentile(lat, 100)),
  },
  enqueue_ms: { p50: round3(percentile(enq, 50)), p99: round3(percentile(enq, 99)) },
}));
Deno.exit(0);
