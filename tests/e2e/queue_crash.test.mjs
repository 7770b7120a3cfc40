// Queues, at least once under kill -9 (docs/queues.md): with producers and consumers running,
// the server is SIGKILLed at random moments (seeded PRNG, the seed is printed) and restarted on
// the same data dir and port; at the end the consumers drain the queue and the run is checked.
// Everything goes through the HTTP queue API with plain fetch (no client library).
//
// * P producers enqueue uniquely numbered messages in batches of 1..10. A number counts as
//   enqueued when its request answered 200 (an acknowledged write); one that got a connection
//   error or a 5xx is "uncertain" (it may or may not be there), a 4xx is refused.
//   Every POISON_EVERY-th number is poison: backoff [50, 50] and a keys_if_undelivered key
//   ["qcrash", "undelivered", n]; the others get 10 steps of 100 ms.
// * C consumers pull (max_messages B, visibility 2 s, wait 1 s), record each delivery (number,
//   id, attempt, lease expiry), hold the batch up to 100 ms ("work"), nack poison always and other messages now and then on their
//   first attempt (the backoff path), ack the rest. A settle that hits a dead server is retried
//   with the same leases until it gets an answer; "stale" after such a retry is ambiguous (the
//   first try may have committed).
// * Checks, after the queue is empty (admin counts ready = delayed = leased = 0):
//   - every enqueued (200) number was acked ("ok", or ambiguous after a retry), or, for poison,
//     is a dead letter; a number that is neither is lost;
//   - dead letters are exactly poison numbers, after at most 3 deliveries, with the consumer's
//     error or a lease expiry as last error; each one's keys_if_undelivered key exists, and no
//     other key under ["qcrash"];
//   - no delivery after an "ok" ack of a later-or-equal attempt, no attempt number delivered
//     twice, one message id per number, nothing delivered that was never sent or was refused;
//   - an ack or nack answered "stale" without a crash or retry in between, before the lease's
//     own expiry, is a violation (the server dropped a live lease);
//   - duplicates (deliveries beyond the first that no nack of ours asked for) are at most
//     crashes x C x B: only leases held at a kill can expire unsettled. Duplicates whose
//     previous delivery was in the same server lifetime are counted apart (a consumer slower
//     than the visibility timeout; none expected).
// A second test feeds the checker made-up runs (a lost message, a redelivery after ack, a
// phantom, a wrongly dead message) to show it fails.
//
// Environment: QUEUE_CRASH_SEED (default random), QUEUE_CRASH_CYCLES (default 5).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import {
  annotate, LOCAL_BACKEND, makeTempDir, randomToken, removeTempDirs, sleep, startServer,
} from "./harness.mjs";
import { prng } from "./prng.mjs";

after(removeTempDirs);

const CFG = {
  producers: 4,
  consumers: 4,
  batch: 10,              // max_messages per pull
  visibilityMs: 2000,
  waitMs: 1000,
  crashes: Number(process.env.QUEUE_CRASH_CYCLES ?? 5),
  firstKillAfterMs: 1500,
  killGapMs: [2000, 6000],  // between a restart and the next kill
  downMs: [0, 3000],        // how long the server stays down (longer than visibilityMs at times:
                            // the leases held at the kill then expire)
  tailMs: 2000,             // load after the last restart
  drainTimeoutMs: 30_000,
  nackProbability: 0.05,
  workMs: 100,              // a consumer holds each batch up to this long before settling it
};
const POISON_EVERY = 50;
const isPoison = (n) => n % POISON_EVERY === 7;
const POISON_SCHEDULE = [50, 50];
const NORMAL_SCHEDULE = Array(10).fill(100);
const POISON_ERROR = "poison";
const EXPIRED_ERROR = "the lease expired before a settle";  // src/queue/queue.cc
const REQUEST_TIMEOUT_MS = 10_000;
const SETTLE_GIVE_UP_MS = 20_000;
const STALE_SLACK_MS = 100;  // clock reading differences between us and the server

// ---------------------------------------------------------------------------
// HTTP

/** POST JSON; resolves {status, body} (body parsed when JSON), throws on connection errors. */
async function post(url, token, body, timeoutMs = REQUEST_TIMEOUT_MS) {
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON (kept as text for the report)
  }
  return { status: res.status, body: parsed };
}

async function getJson(url, token) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

const numberOf = (value) => (value && value.type === "string" && /^\d+$/.test(value.value) ? Number(value.value) : NaN);

// ---------------------------------------------------------------------------
// The checker: a pure function of what the run recorded.

/**
 * run: {
 *   enq: Map<n, "ok" | "uncertain" | "refused">,
 *   deliveries: Map<n, [{id, attempt, epoch, expiresAt}]>,
 *   settles: Map<n, [{op: "ack"|"nack", status: "ok"|"stale"|"dead"|"unknown", hadError, attempt,
 *                     deliveryEpoch, epoch, answeredAt, expiresAt}]>,
 *   dead: [{n, id, attempts, last_error}], undeliveredKeys: Set<n>, crashes, violations: [text]
 * }
 * Returns {stats, violations}.
 */
export function checkQueueRun(run, cfg = CFG) {
  const v = [...run.violations];
  const deadByN = new Map();
  for (const d of run.dead) {
    if (!Number.isFinite(d.n)) {
      v.push(`dead letter ${d.id} has no number payload`);
      continue;
    }
    if (deadByN.has(d.n)) v.push(`number ${d.n} is a dead letter twice`);
    deadByN.set(d.n, d);
    if (!isPoison(d.n)) v.push(`number ${d.n} is a dead letter but was never nacked on purpose (last error "${d.last_error}", ${d.attempts} attempts)`);
    if (d.attempts > POISON_SCHEDULE.length + 1) v.push(`dead letter ${d.n}: ${d.attempts} attempts, more than its schedule allows`);
    if (d.last_error !== POISON_ERROR && d.last_error !== EXPIRED_ERROR) v.push(`dead letter ${d.n}: unexpected last error "${d.last_error}"`);
    if (!run.undeliveredKeys.has(d.n)) v.push(`dead letter ${d.n}: its keys_if_undelivered key was not written`);
    const s = run.enq.get(d.n);
    if (s !== "ok" && s !== "uncertain") v.push(`dead letter ${d.n} was never sent (enqueue: ${s ?? "none"})`);
  }
  for (const n of run.undeliveredKeys) {
    if (!deadByN.has(n)) v.push(`keys_if_undelivered key of ${n} exists but ${n} is no dead letter`);
  }

  let delivered = 0;
  let duplicates = 0;
  let sameLifetimeDuplicates = 0;
  let acked = 0;
  let ambiguousAcks = 0;
  let nacks = 0;
  let uncertainDelivered = 0;
  const lost = [];
  const numbers = new Set([...run.enq.keys()]);
  for (const n of run.deliveries.keys()) numbers.add(n);
  for (const n of numbers) {
    const state = run.enq.get(n);
    const ds = run.deliveries.get(n) ?? [];
    const ss = run.settles.get(n) ?? [];
    delivered += ds.length;
    if (ds.length && state !== "ok" && state !== "uncertain") v.push(`number ${n} delivered but never sent (enqueue: ${state ?? "none"})`);
    if (ds.length && state === "uncertain") uncertainDelivered++;
    const ids = new Set(ds.map((d) => d.id));
    if (ids.size > 1) v.push(`number ${n} delivered under ${ids.size} message ids`);
    const attempts = ds.map((d) => d.attempt).sort((a, b) => a - b);
    for (let i = 1; i < attempts.length; i++) {
      if (attempts[i] === attempts[i - 1]) v.push(`number ${n}: attempt ${attempts[i]} delivered twice`);
    }
    const okAcks = ss.filter((s) => s.op === "ack" && s.status === "ok");
    if (okAcks.length) acked++;
    else if (ss.some((s) => s.op === "ack" && s.hadError && (s.status === "stale" || s.status === "unknown"))) ambiguousAcks++;
    for (const a of okAcks) {
      const later = ds.filter((d) => d.attempt > a.attempt);
      if (later.length) v.push(`number ${n}: delivered again (attempt ${later[0].attempt}) after attempt ${a.attempt} was acked "ok"`);
    }
    if (okAcks.length > 1) v.push(`number ${n}: acked "ok" ${okAcks.length} times`);
    // A stale answer to a first try, with no kill since the delivery, before the lease's expiry.
    for (const s of ss) {
      if (s.status === "stale" && !s.hadError && s.epoch === s.deliveryEpoch && s.answeredAt < s.expiresAt - STALE_SLACK_MS) {
        v.push(`number ${n}: ${s.op} of attempt ${s.attempt} answered "stale" ${s.expiresAt - s.answeredAt} ms before its lease expired, with no kill in between`);
      }
    }
    const requeuedByUs = ss.filter((s) => s.op === "nack" && (s.status === "ok" || (s.hadError && s.status !== "dead"))).length;
    nacks += ss.filter((s) => s.op === "nack").length;
    const dup = Math.max(0, ds.length - 1 - requeuedByUs);
    duplicates += dup;
    if (dup > 0) {
      const byAttempt = [...ds].sort((a, b) => a.attempt - b.attempt);
      for (let i = 1; i < byAttempt.length; i++) {
        if (byAttempt[i].epoch === byAttempt[i - 1].epoch) {
          const nackedPrev = ss.some((s) => s.op === "nack" && s.attempt === byAttempt[i - 1].attempt);
          if (!nackedPrev) sameLifetimeDuplicates++;
        }
      }
    }
    if (state !== "ok") continue;
    if (isPoison(n)) {
      if (!deadByN.has(n)) lost.push(`${n} (poison, not a dead letter; ${ds.length} deliveries)`);
    } else if (!okAcks.length && !ss.some((s) => s.op === "ack" && s.hadError && s.status !== "ok")) {
      lost.push(`${n} (${ds.length} deliveries, settles: ${ss.map((s) => `${s.op}:${s.status}`).join(",") || "none"})`);
    }
  }
  if (lost.length) v.push(`${lost.length} acknowledged enqueues never acked or dead-lettered, e.g. ${lost.slice(0, 10).join("; ")}`);
  const bound = run.crashes * cfg.consumers * cfg.batch;
  if (duplicates > bound) v.push(`${duplicates} duplicate deliveries, more than crashes x consumers x batch = ${bound}`);
  const enqueued = [...run.enq.values()].filter((s) => s === "ok").length;
  const stats = {
    enqueued,
    uncertain: [...run.enq.values()].filter((s) => s === "uncertain").length,
    uncertain_delivered: uncertainDelivered,
    refused: [...run.enq.values()].filter((s) => s === "refused").length,
    delivered,
    acked,
    ambiguous_acks: ambiguousAcks,
    nacks,
    dead: run.dead.length,
    duplicates,
    duplicate_bound: bound,
    same_lifetime_duplicates: sameLifetimeDuplicates,
    crashes: run.crashes,
    lost: lost.length,
  };
  return { stats, violations: v };
}

// ---------------------------------------------------------------------------
// The run

function newRecord() {
  return {
    enq: new Map(),
    deliveries: new Map(),
    settles: new Map(),
    dead: [],
    undeliveredKeys: new Set(),
    crashes: 0,
    violations: [],
  };
}

function push(map, k, x) {
  let a = map.get(k);
  if (!a) map.set(k, (a = []));
  a.push(x);
}

test("queue: at least once under kill -9 with producers and consumers running", { timeout: 120_000, skip: LOCAL_BACKEND && "needs the kvconnect server" }, async () => {
  const seed = process.env.QUEUE_CRASH_SEED !== undefined ? Number(process.env.QUEUE_CRASH_SEED) : Math.floor(Math.random() * 2 ** 31);
  console.log(`queue crash: seed ${seed} (QUEUE_CRASH_SEED=${seed} repeats the kill schedule and nack choices)`);
  const rand = prng(seed);
  const dataDir = await makeTempDir();
  const token = randomToken();
  let server = await startServer({ dataDir, token });
  // Each restart binds a new port (the kernel's choice): every request goes to the current
  // server's URL. While the server is down there is none (the old port may belong to another
  // process by then), and a request fails as it would against a dead port.
  let url = server.url;
  const base = () => {
    if (!url) throw new Error("the server is down");
    return url;
  };
  const rec = newRecord();
  let epoch = 0;  // server lifetimes: +1 at every kill
  let producing = true;
  let consuming = true;
  let nextNumber = 1;
  let held = 0;  // leases the consumers hold and have not settled
  const started = Date.now();

  const producer = async (p) => {
    const r = prng(seed + 1000 + p);
    while (producing) {
      const size = 1 + Math.floor(r() * 10);
      const numbers = Array.from({ length: size }, () => nextNumber++);
      const messages = numbers.map((n) => ({
        value: { type: "string", value: String(n) },
        backoff_schedule: isPoison(n) ? POISON_SCHEDULE : NORMAL_SCHEDULE,
        ...(isPoison(n) ? { keys_if_undelivered: [[{ type: "string", value: "qcrash" }, { type: "string", value: "undelivered" }, { type: "number", value: n }]] } : {}),
      }));
      let state = "uncertain";
      try {
        const res = await post(`${base()}/queue/v1/enqueue`, token, { messages });
        if (res.status === 200 && res.body?.ok === true) state = "ok";
        else if (res.status >= 400 && res.status < 500 && res.status !== 408) {
          state = "refused";
          if (res.status !== 429) rec.violations.push(`enqueue answered ${res.status}: ${JSON.stringify(res.body)}`);
        }
      } catch {
        // the server is down: uncertain
      }
      for (const n of numbers) rec.enq.set(n, state);
      await sleep(state === "ok" ? 30 + r() * 50 : 200);
    }
  };

  // Settles `items` (one kind) until an answer; records one result per lease. `epoch` of a
  // result is the server lifetime its last try was sent in.
  const settle = async (op, items, extra) => {
    let hadError = false;
    const deadline = Date.now() + SETTLE_GIVE_UP_MS;
    let results = null;
    let epochAtSend = epoch;
    while (Date.now() < deadline) {
      epochAtSend = epoch;
      try {
        const res = await post(`${base()}/queue/v1/${op}`, token, { leases: items.map((i) => i.lease), ...extra });
        if (res.status === 200 && Array.isArray(res.body?.results)) {
          results = res.body.results;
          break;
        }
        if (res.status >= 400 && res.status < 500 && res.status !== 429) {
          rec.violations.push(`${op} answered ${res.status}: ${JSON.stringify(res.body)}`);
          break;
        }
      } catch {
        // down: retry
      }
      hadError = true;
      await sleep(50);
    }
    const answeredAt = Date.now();
    held -= items.length;
    items.forEach((item, i) => {
      const r = results?.[i];
      if (r && r.lease !== item.lease) rec.violations.push(`${op}: result ${i} names another lease`);
      push(rec.settles, item.n, {
        op, status: r?.status ?? "unknown", hadError, attempt: item.attempt,
        deliveryEpoch: item.epoch, epoch: epochAtSend,
        answeredAt, expiresAt: item.expiresAt,
      });
    });
  };

  const consumer = async (c) => {
    const r = prng(seed + 2000 + c);
    while (consuming) {
      const pullEpoch = epoch;
      let res;
      try {
        res = await post(`${base()}/queue/v1/pull`, token,
          { max_messages: CFG.batch, visibility_timeout: CFG.visibilityMs, wait: CFG.waitMs, format: "json" },
          CFG.waitMs + REQUEST_TIMEOUT_MS);
      } catch {
        await sleep(50);
        continue;
      }
      if (res.status !== 200) {
        if (res.status >= 400 && res.status < 500 && res.status !== 429) rec.violations.push(`pull answered ${res.status}: ${JSON.stringify(res.body)}`);
        await sleep(50);
        continue;
      }
      const acks = [];
      const nacks = [];
      for (const m of res.body.messages ?? []) {
        const n = numberOf(m.value);
        if (!Number.isFinite(n)) {
          rec.violations.push(`delivery without a number payload: ${JSON.stringify(m)}`);
          continue;
        }
        const item = { n, lease: m.lease, attempt: m.attempt, epoch: pullEpoch, expiresAt: m.lease_expires_at };
        held++;
        push(rec.deliveries, n, { id: m.id, attempt: m.attempt, epoch: pullEpoch, expiresAt: m.lease_expires_at });
        if (isPoison(n) || (m.attempt === 1 && r() < CFG.nackProbability)) nacks.push(item);
        else acks.push(item);
      }
      // "Work" on the batch, so that kills often find leases in the consumers' hands.
      if (acks.length || nacks.length) await sleep(r() * CFG.workMs);
      const work = [];
      if (acks.length) work.push(settle("ack", acks, {}));
      if (nacks.length) {
        const poison = nacks.filter((i) => isPoison(i.n));
        const other = nacks.filter((i) => !isPoison(i.n));
        if (poison.length) work.push(settle("nack", poison, { error: POISON_ERROR }));
        // half of the others name their own delay instead of the backoff step
        if (other.length) work.push(settle("nack", other, r() < 0.5 ? { error: "retry" } : { error: "retry", delay: Math.floor(r() * 300) }));
      }
      await Promise.all(work);
    }
  };

  const producers = Array.from({ length: CFG.producers }, (_, p) => producer(p));
  const consumers = Array.from({ length: CFG.consumers }, (_, c) => consumer(c));
  const counts = () => getJson(`${base()}/admin/v1/databases/default/queue`, token);
  try {
    await sleep(CFG.firstKillAfterMs);
    for (let k = 1; k <= CFG.crashes; k++) {
      if (k > 1) await sleep(CFG.killGapMs[0] + rand() * (CFG.killGapMs[1] - CFG.killGapMs[0]));
      epoch++;
      const heldAtKill = held;
      url = null;
      const res = await server.kill();
      assert.equal(res.signal, "SIGKILL", `kill ${k}: the server was not killed (it exited ${res.code})`);
      rec.crashes++;
      const down = CFG.downMs[0] + rand() * (CFG.downMs[1] - CFG.downMs[0]);
      await sleep(down);
      server = await startServer({ dataDir, token });
      url = server.url;
      console.log(`queue crash: kill ${k} at ${((Date.now() - started) / 1000).toFixed(1)} s, down ${Math.round(down)} ms, ` +
        `${heldAtKill} leases held by consumers at the kill; ` +
        `${[...rec.enq.values()].filter((s) => s === "ok").length} enqueued so far`);
    }
    await sleep(CFG.tailMs);
    producing = false;
    await Promise.all(producers);
    // Drain: the consumers go on until nothing is ready, delayed or leased.
    const drainStart = Date.now();
    let c;
    for (;;) {
      c = await counts();
      if (c.ready === 0 && c.delayed === 0 && c.leased === 0) break;
      if (Date.now() - drainStart > CFG.drainTimeoutMs) {
        assert.fail(`the queue did not drain within ${CFG.drainTimeoutMs} ms: ${JSON.stringify(c)}`);
      }
      await sleep(250);
    }
    consuming = false;
    await Promise.all(consumers);
    const drainMs = Date.now() - drainStart;

    // Dead letters and the keys_if_undelivered keys.
    let cursor = null;
    do {
      const res = await post(`${base()}/admin/v1/databases/default/queue/dead/list`, token, { limit: 1000, ...(cursor ? { cursor } : {}) });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      for (const d of res.body.dead_letters) rec.dead.push({ n: numberOf(d.value), id: d.id, attempts: d.attempts, last_error: d.last_error });
      cursor = res.body.cursor;
    } while (cursor);
    cursor = null;
    do {
      const res = await post(`${base()}/admin/v1/databases/default/entries/list`, token,
        { prefix: [{ type: "string", value: "qcrash" }], limit: 1000, ...(cursor ? { cursor } : {}) });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      for (const e of res.body.entries) {
        const n = e.key[2]?.value;
        if (e.key.length !== 3 || e.key[1]?.value !== "undelivered" || typeof n !== "number") {
          rec.violations.push(`unexpected key ${JSON.stringify(e.key)}`);
          continue;
        }
        if (numberOf(e.value) !== n) rec.violations.push(`keys_if_undelivered key of ${n} holds ${JSON.stringify(e.value)}`);
        rec.undeliveredKeys.add(n);
      }
      cursor = res.body.cursor;
    } while (cursor);
    const final = await counts();
    if (final.dead !== rec.dead.length) rec.violations.push(`admin counts say ${final.dead} dead, the list has ${rec.dead.length}`);

    const { stats, violations } = checkQueueRun(rec);
    console.log(`queue crash summary: seed ${seed}, enqueued ${stats.enqueued} (+${stats.uncertain} uncertain, ` +
      `${stats.uncertain_delivered} of them delivered), delivered ${stats.delivered}, acked ${stats.acked} ` +
      `(+${stats.ambiguous_acks} ambiguous), nacks ${stats.nacks}, dead ${stats.dead}, duplicates ${stats.duplicates} ` +
      `(bound ${stats.duplicate_bound}; ${stats.same_lifetime_duplicates} without a kill in between), ` +
      `crashes ${stats.crashes}, lost ${stats.lost}; drain ${drainMs} ms, total ${((Date.now() - started) / 1000).toFixed(1)} s`);
    assert.ok(stats.enqueued > 0 && stats.acked > 0 && stats.dead > 0, `the run did too little: ${JSON.stringify(stats)}`);
    assert.deepEqual(violations, [], `seed ${seed}: ${violations.length} violations:\n${violations.slice(0, 30).join("\n")}`);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    producing = false;
    consuming = false;
    await server.kill();
  }
});

test("queue crash checker: made-up runs with a lost, a redelivered, a phantom and a wrongly dead message fail", () => {
  const good = () => {
    const r = newRecord();
    r.crashes = 1;
    r.enq.set(1, "ok");
    r.enq.set(7, "ok");  // poison
    r.deliveries.set(1, [{ id: "a", attempt: 1, epoch: 0, expiresAt: 2000 }]);
    r.settles.set(1, [{ op: "ack", status: "ok", hadError: false, attempt: 1, deliveryEpoch: 0, epoch: 0, answeredAt: 100, expiresAt: 2000 }]);
    r.deliveries.set(7, [1, 2, 3].map((attempt) => ({ id: "p", attempt, epoch: 0, expiresAt: 2000 })));
    r.settles.set(7, [1, 2, 3].map((attempt) => ({ op: "nack", status: attempt === 3 ? "dead" : "ok", hadError: false, attempt, deliveryEpoch: 0, epoch: 0, answeredAt: 100, expiresAt: 2000 })));
    r.dead.push({ n: 7, id: "p", attempts: 3, last_error: POISON_ERROR });
    r.undeliveredKeys.add(7);
    return r;
  };
  assert.deepEqual(checkQueueRun(good()).violations, []);
  assert.equal(checkQueueRun(good()).stats.duplicates, 0);

  const lost = good();
  lost.enq.set(2, "ok");
  assert.match(checkQueueRun(lost).violations.join("\n"), /1 acknowledged enqueues never acked/);

  const again = good();
  again.deliveries.get(1).push({ id: "a", attempt: 2, epoch: 1, expiresAt: 4000 });
  assert.match(checkQueueRun(again).violations.join("\n"), /delivered again \(attempt 2\) after attempt 1 was acked/);

  const phantom = good();
  phantom.deliveries.set(3, [{ id: "x", attempt: 1, epoch: 0, expiresAt: 2000 }]);
  assert.match(checkQueueRun(phantom).violations.join("\n"), /number 3 delivered but never sent/);

  const wronglyDead = good();
  wronglyDead.enq.set(2, "ok");
  wronglyDead.dead.push({ n: 2, id: "b", attempts: 11, last_error: EXPIRED_ERROR });
  wronglyDead.undeliveredKeys.add(2);
  assert.match(checkQueueRun(wronglyDead).violations.join("\n"), /number 2 is a dead letter but was never nacked on purpose/);

  const earlyStale = good();
  earlyStale.settles.get(1)[0].status = "stale";
  assert.match(checkQueueRun(earlyStale).violations.join("\n"), /answered "stale" 1900 ms before its lease expired/);

  const tooManyDuplicates = good();
  tooManyDuplicates.enq.set(2, "ok");
  tooManyDuplicates.deliveries.set(2, Array.from({ length: 50 }, (_, i) => ({ id: "c", attempt: i + 1, epoch: i, expiresAt: 2000 })));
  tooManyDuplicates.settles.set(2, [{ op: "ack", status: "ok", hadError: false, attempt: 50, deliveryEpoch: 49, epoch: 49, answeredAt: 100, expiresAt: 2000 }]);
  assert.match(checkQueueRun(tooManyDuplicates).violations.join("\n"), /49 duplicate deliveries, more than/);
});
