// Queue behaviours of the @kvconnect/queue clients against kvconnect, shared by Node
// (queue_clients.test.mjs runs them in-process with clients/node) and Deno
// (deno/queue_scenario.ts runs them with clients/deno). They follow what Deno's own queue tests
// check for its local queue (delivery of every value type, delay, retries along the backoff
// schedule, keysIfUndelivered, graceful close), plus ordering, lease extension and load.
//
// Each scenario takes ctx = { openQueue, url, token, kvGet(key) -> {value, versionstamp},
// args } and throws on a failed expectation; what it returns is printed in the summary.
import assert from "node:assert/strict";
import { crossValues, sameValue } from "./cross_runtime_values.mjs";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The values every runtime can store in a queue message (KvU64 is a KV value, not V8). */
export const queueValues = crossValues.filter(([name]) => name !== "KvU64");

/** The message @deno/kv's kv.enqueue sends in the cross-runtime test. */
export const denoKvMessage = () => ({ via: "@deno/kv", when: new Date(3), m: new Map([[1, "a"]]), n: -5n });

/** Rejects with `what` unless `promise` settles within `ms`. */
async function within(promise, ms, what) {
  let timer;
  const t = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, t]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `cond` every `intervalMs` until it holds; throws naming `what` after `ms`. */
async function waitFor(cond, ms, what, intervalMs = 20) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** A queue whose listeners long-poll 1 s at a time (default 5 s), so that close() is quick. */
function open(ctx, extra = {}) {
  const q = ctx.openQueue({ url: ctx.url, accessToken: ctx.token, ...extra });
  const listen = q.listenQueue.bind(q);
  q.listenQueue = (handler, options = {}) => listen(handler, { pullWait: 1000, ...options });
  return q;
}

/** GET/POST BASE/admin/v1/databases/NAME/queue... with the (admin) token. */
async function admin(ctx, suffix, body) {
  const u = new URL(ctx.url);
  const m = /\/databases\/([^/]+)/.exec(u.pathname);
  const res = await fetch(`${u.origin}/admin/v1/databases/${m ? m[1] : "default"}/queue${suffix}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${ctx.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `admin queue${suffix}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** The queue's counts {ready, delayed, leased, dead} from the admin API. */
export async function queueCounts(ctx) {
  const body = await admin(ctx, "");
  const c = body.counts ?? body;
  for (const k of ["ready", "delayed", "leased", "dead"]) {
    assert.equal(typeof c[k], "number", `admin queue counts lack ${k}: ${JSON.stringify(body)}`);
  }
  return c;
}

function collector(count) {
  const got = [];
  let resolve;
  const all = new Promise((r) => (resolve = r));
  return {
    got,
    all,
    push(v) {
      got.push(v);
      if (got.length >= count) resolve();
    },
  };
}

export const scenarios = {
  /** Every value type, enqueued one by one, comes back equal, in order (concurrency 1). */
  async values(ctx) {
    const q = open(ctx);
    let last = "";
    // delay i: due times strictly grow, so the order is defined (ties have none, as in Deno)
    for (const [i, [, make]] of queueValues.entries()) {
      const r = await q.enqueue(make(), { delay: i });
      assert.equal(r.ok, true);
      assert.match(r.versionstamp, /^[0-9a-f]{20}$/);
      assert.ok(r.versionstamp > last, "versionstamps grow");
      last = r.versionstamp;
    }
    const c = collector(queueValues.length);
    const done = q.listenQueue((v) => c.push(v), { concurrency: 1 });
    await within(c.all, 30_000, `${c.got.length} of ${queueValues.length} values delivered`);
    await sleep(300); // nothing more may come
    q.close();
    await within(done, 10_000, "listenQueue to resolve after close");
    assert.equal(c.got.length, queueValues.length, "one delivery per message");
    const wrong = queueValues.filter(([, make], i) => !sameValue(c.got[i], make())).map(([name]) => name);
    assert.deepEqual(wrong, [], "values that did not come back equal (or in order)");
    return { values: queueValues.length };
  },

  /** A delayed message is not delivered before its delay; one enqueued after it without delay
   *  comes first. (Only what the server guarantees is checked: the delayed one no earlier than
   *  1500 ms after t0, which precedes its enqueue; how soon the other one comes depends on the
   *  machine's load, so only the order says it was not delayed.) */
  async delay(ctx) {
    const q = open(ctx);
    const t0 = Date.now();
    await q.enqueue("later", { delay: 1500 });
    await q.enqueue("now");
    const c = collector(2);
    const done = q.listenQueue((v) => c.push({ v, t: Date.now() - t0 }));
    await within(c.all, 15_000, "both messages delivered");
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    assert.deepEqual(c.got.map((x) => x.v), ["now", "later"]);
    assert.ok(c.got[1].t >= 1500, `delayed message delivered after ${c.got[1].t} ms (< 1500)`);
    return { nowMs: c.got[0].t, laterMs: c.got[1].t };
  },

  /** Due messages come in order of their due time (whatever the order of enqueueing). */
  async order(ctx) {
    const q = open(ctx);
    // Due times are fixed in advance, 150 ms apart, falling with i: each delay is what is left
    // until its due time, so a slow enqueue (a loaded machine) shifts only its own due time by
    // its own latency instead of pushing every later one back. The server's due time is its
    // clock at arrival plus the delay: within [sent + delay, answered + delay] (one clock, one
    // machine). Two of them have a known order when those windows do not overlap: always on an
    // idle machine, and on a loaded one every pair but those an enqueue slower by 150 ms blurred.
    const start = Date.now();
    const dueAt = (i) => start + 1000 + (10 - i) * 150;
    const due = [];
    for (let i = 0; i < 10; i++) {
      const delay = Math.max(0, dueAt(i) - Date.now());
      const sent = Date.now();
      await q.enqueue(`d${i}`, { delay });
      due.push({ from: sent + delay, to: Date.now() + delay });
    }
    // Every delayed one is due, so before any enqueued from now on: the server says so.
    await waitFor(async () => (await queueCounts(ctx)).delayed === 0, 30_000, "the delayed messages to come due", 100);
    for (let i = 0; i < 10; i++) {
      await sleep(3); // distinct due times: the order of equal ones is not defined
      await q.enqueue(`n${i}`);
    }
    const c = collector(20);
    const done = q.listenQueue((v) => c.push(v), { concurrency: 1 });
    await within(c.all, 15_000, "20 messages delivered");
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    const ds = Array.from({ length: 10 }, (_, i) => `d${i}`);
    const ns = Array.from({ length: 10 }, (_, i) => `n${i}`);
    assert.deepEqual([...c.got].sort(), [...ds, ...ns].sort(), "each message once");
    assert.deepEqual(c.got.slice(10), ns, `the ones due later come after the delayed ones, in order: ${c.got}`);
    const at = new Map(c.got.map((v, k) => [v, k]));
    let orderedPairs = 0;
    for (let i = 0; i < 10; i++) {
      for (let j = 0; j < 10; j++) {
        if (due[j].to >= due[i].from) continue; // not known to be due before d_i
        orderedPairs++;
        assert.ok(at.get(`d${j}`) < at.get(`d${i}`),
          `d${j} (due by ${due[j].to - start} ms) came after d${i} (due from ${due[i].from - start} ms): ${c.got}`);
      }
    }
    return { orderedPairs };
  },

  /** A handler that throws gets the message again after each step of the backoff schedule;
   *  a success ends it. With [1] and a handler that always throws: 1 attempt + 1 retry. */
  async retries(ctx) {
    const q = open(ctx);
    const schedule = [300, 600, 900];
    await q.enqueue({ kind: "flaky" }, { backoffSchedule: schedule });
    await q.enqueue({ kind: "broken" }, { backoffSchedule: [1] });
    const calls = { flaky: [], broken: [] };
    const done = q.listenQueue((v) => {
      const list = calls[v.kind];
      list.push(Date.now());
      if (v.kind === "broken" || list.length <= 2) throw new TypeError(`dequeue error ${list.length}`);
    });
    await within(waitFor(() => calls.flaky.length >= 3, 15_000, "third delivery"), 16_000, "retries");
    await sleep(2000); // no further delivery of either
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    assert.equal(calls.flaky.length, 3, "two failures and a success: three deliveries");
    assert.equal(calls.broken.length, 2, "backoffSchedule [1]: 1 attempt + 1 retry");
    const gaps = [calls.flaky[1] - calls.flaky[0], calls.flaky[2] - calls.flaky[1]];
    gaps.forEach((gap, i) => {
      assert.ok(gap >= schedule[i] - 5, `retry ${i + 1} came ${gap} ms after the failure (step ${schedule[i]})`);
      assert.ok(gap < schedule[i] + 3000, `retry ${i + 1} came ${gap} ms after the failure (step ${schedule[i]})`);
    });
    const counts = await queueCounts(ctx);
    assert.equal(counts.ready + counts.delayed + counts.leased, 0, `left: ${JSON.stringify(counts)}`);
    assert.equal(counts.dead, 1, "the broken message is a dead letter");
    return { gaps };
  },

  /** Deno's default schedule [100, 1000, 5000, 30000, 60000]: the first 3 retries each come no
   *  sooner than its step after the failure before it; the next one is 30 s away. */
  async defaultSchedule(ctx) {
    const q = open(ctx);
    await q.enqueue("test");
    const calls = [];
    const done = q.listenQueue(async () => {
      calls.push(Date.now());
      await sleep(10);
      throw new TypeError("dequeue error");
    });
    // The third retry comes about 6.1 s in; once it failed, the message waits out the 30 s step.
    await waitFor(() => calls.length >= 4, 60_000, "1 attempt and 3 retries");
    await waitFor(async () => (await queueCounts(ctx)).delayed === 1, 10_000,
      "the third retry's failure to be settled (the message delayed by the next step)", 50);
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    assert.equal(calls.length, 4, "1 attempt + 3 retries before the 30 s step");
    const gaps = calls.slice(1).map((t, i) => t - calls[i]);
    [100, 1000, 5000].forEach((step, i) => {
      assert.ok(gaps[i] >= step - 5, `retry ${i + 1} came ${gaps[i]} ms after the attempt before it (step ${step})`);
    });
    return { count: calls.length, gaps };
  },

  /** After the last retry failed the message is written to every keysIfUndelivered key (not
   *  before), readable through KV; the handler's error text is kept with the dead letter. */
  async undelivered(ctx) {
    const q = open(ctx);
    const id = Math.random().toString(36).slice(2);
    const value = { id, when: new Date(7), tags: new Map([["a", Uint8Array.of(1, 2)]]), n: 5n };
    const keys = [["undelivered", id, "a"], ["undelivered", id, "b", 1.5, 2n, true, Uint8Array.of(0, 1, 255)]];
    await q.enqueue(value, { backoffSchedule: [50, 100], keysIfUndelivered: keys });
    let calls = 0;
    let writtenEarly = null;
    const errorText = `dequeue error ${id}`;
    const done = q.listenQueue(async () => {
      calls++;
      if (calls === 2) writtenEarly = (await ctx.kvGet(keys[0])).versionstamp;
      throw new TypeError(errorText);
    });
    await within(waitFor(async () => (await ctx.kvGet(keys[1])).versionstamp !== null, 15_000,
      "the keysIfUndelivered entry"), 16_000, "keysIfUndelivered");
    await sleep(500);
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    assert.equal(writtenEarly, null, "keysIfUndelivered written while retries were left");
    assert.equal(calls, 3, "1 attempt + 2 retries");
    for (const key of keys) {
      const e = await ctx.kvGet(key);
      assert.ok(sameValue(e.value, value), `value at ${String(key)}: ${String(e.value)}`);
    }
    const dead = JSON.stringify(await admin(ctx, "/dead/list", { limit: 100 }));
    assert.ok(dead.includes(errorText), `the dead letter keeps the handler's error: ${dead.slice(0, 500)}`);
    return { calls };
  },

  /** close() while a handler runs: listenQueue resolves only after the handler finished and
   *  its message was settled (acked: nothing left; a failure: nacked, delayed, not leased). */
  async gracefulClose(ctx) {
    const q = open(ctx);
    await q.enqueue("slow");
    let started;
    const running = new Promise((r) => (started = r));
    let finished = false;
    const done = q.listenQueue(async () => {
      started();
      await sleep(1500);
      finished = true;
    });
    await within(running, 10_000, "the handler to start");
    q.close();
    await within(done, 10_000, "listenQueue to resolve after close");
    assert.ok(finished, "listenQueue resolved before its running handler finished");
    let counts = await queueCounts(ctx);
    assert.deepEqual([counts.ready, counts.delayed, counts.leased, counts.dead], [0, 0, 0, 0],
      `the message was not acked: ${JSON.stringify(counts)}`);
    await assert.rejects(async () => await q.enqueue(1), /already closed/);

    // An abort signal closes one listener the same way; a failing handler's message is nacked.
    const q2 = open(ctx);
    await q2.enqueue("fails", { backoffSchedule: [60_000] });
    const ctrl = new AbortController();
    let started2;
    const running2 = new Promise((r) => (started2 = r));
    const done2 = q2.listenQueue(async () => {
      started2();
      await sleep(500);
      throw new Error("failed while closing");
    }, { signal: ctrl.signal });
    await within(running2, 10_000, "the second handler to start");
    ctrl.abort();
    await within(done2, 10_000, "listenQueue to resolve after abort");
    counts = await queueCounts(ctx);
    assert.deepEqual([counts.ready, counts.delayed, counts.leased], [0, 1, 0],
      `the failed message should wait out its 60 s backoff step: ${JSON.stringify(counts)}`);
    return {};
  },

  /** A handler running longer than the visibility timeout keeps its lease: one delivery. */
  async extend(ctx) {
    const q = open(ctx);
    await q.enqueue("long");
    let count = 0;
    let ended = false;
    const done = q.listenQueue(async () => {
      count++;
      await sleep(3500);
      ended = true;
    }, { visibilityTimeout: 1000 });
    await within(waitFor(() => ended, 15_000, "the handler to end"), 16_000, "extend");
    await sleep(1500);
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    assert.equal(count, 1, "delivered again while its handler ran: the lease was not extended");
    const counts = await queueCounts(ctx);
    assert.equal(counts.ready + counts.delayed + counts.leased + counts.dead, 0, JSON.stringify(counts));
    return {};
  },

  /** 1000 messages, 16 handlers at a time: every one delivered, no duplicates. */
  async many(ctx) {
    const n = Number(ctx.args?.n ?? 1000);
    const q = open(ctx);
    const t0 = Date.now();
    let next = 0;
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < n) await q.enqueue({ i: next++ });
    }));
    const enqueueMs = Date.now() - t0;
    const seen = new Map();
    let inFlight = 0;
    let maxInFlight = 0;
    let all;
    const allSeen = new Promise((r) => (all = r));
    const done = q.listenQueue(async ({ i }) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await sleep(Math.random() * 4);
      inFlight--;
      seen.set(i, (seen.get(i) ?? 0) + 1);
      if (seen.size === n) all();
    }, { concurrency: 16 });
    await within(allSeen, 120_000, `all ${n} messages (seen ${seen.size})`);
    await sleep(500);
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    const duplicates = [...seen.values()].reduce((s, c) => s + c - 1, 0);
    assert.equal(seen.size, n);
    assert.ok([...seen.keys()].every((i) => Number.isInteger(i) && i >= 0 && i < n), "ids");
    assert.equal(duplicates, 0, "messages delivered more than once though no lease expired");
    assert.ok(maxInFlight <= 16, `${maxInFlight} handlers ran at once (concurrency 16)`);
    assert.ok(maxInFlight >= 2, "handlers never ran concurrently");
    const counts = await queueCounts(ctx);
    assert.equal(counts.ready + counts.delayed + counts.leased + counts.dead, 0, JSON.stringify(counts));
    return { n, duplicates, maxInFlight, enqueueMs, consumeMs: Date.now() - t0 - enqueueMs };
  },

  /** Refusals surface as QueueError with the server's text; nothing is retried into a hang. */
  async errors(ctx) {
    const bad = open(ctx, { accessToken: "not-a-token-at-all-000000" });
    const is = (status, re) => (e) => {
      assert.equal(e.name, "QueueError", String(e));
      assert.equal(e.status, status, `${e.message}`);
      assert.ok(e.message.length > 0);
      if (re) assert.match(e.message, re);
      return true;
    };
    await within(assert.rejects(bad.enqueue(1), is(401)), 10_000, "enqueue with a bad token");
    await within(assert.rejects(bad.listenQueue(() => {}), is(401)), 10_000, "listenQueue with a bad token");
    const q = open(ctx);
    await within(assert.rejects(q.enqueue(1, { backoffSchedule: Array(11).fill(1) }), is(400, /backoff/i)),
      10_000, "11 backoff intervals");
    await within(assert.rejects(q.enqueue(1, { backoffSchedule: [3_600_001] }), is(400, /backoff/i)),
      10_000, "an interval over 1 h");
    await within(assert.rejects(q.enqueue(1, { delay: -1 }), is(400, /delay/i)), 10_000, "negative delay");
    const month = 30 * 24 * 60 * 60 * 1000;
    await within(assert.rejects(q.enqueue(1, { delay: month + 1 }), is(400, /delay/i)), 10_000, "delay > 30 days");
    assert.equal((await q.enqueue(1, { delay: month })).ok, true, "30 days is allowed");
    const keys = Array.from({ length: 11 }, (_, i) => ["k", i]);
    await within(assert.rejects(q.enqueue(1, { keysIfUndelivered: keys }), is(400)), 10_000, "11 keys");
    await within(assert.rejects(q.enqueue("x".repeat(70_000)), is(400)), 10_000, "a 70 kB payload");
    return {};
  },

  /** Handles what it gets (4 at a time, 20 ms each) until 2 s pass without a message; prints
   *  "listening" once its listener runs. Returns the ids ({i}) it handled. */
  async share(ctx) {
    const q = open(ctx);
    const ids = [];
    let lastAt = Date.now();
    const done = q.listenQueue(async ({ i }) => {
      ids.push(i);
      lastAt = Date.now();
      await sleep(20);
    }, { concurrency: 4 });
    console.log("listening");
    await waitFor(() => ids.length > 0 && Date.now() - lastAt > 2000, 60_000, "messages, then 2 s of quiet");
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    return { ids };
  },

  /** Enqueues queueValues, due in their order (the other runtime consumes them). */
  async produce(ctx) {
    const q = open(ctx);
    for (const [i, [, make]] of queueValues.entries()) await q.enqueue(make(), { delay: i });
    return { produced: queueValues.length };
  },

  /** Consumes queueValues in order, plus args.extra messages equal to denoKvMessage(). Returns
   *  which arrived equal ("OK") and which did not. */
  async consume(ctx) {
    const extra = Number(ctx.args?.extra ?? 0);
    const q = open(ctx);
    const total = queueValues.length + extra;
    const c = collector(total);
    const done = q.listenQueue((v) => c.push(v), { concurrency: 1 });
    await within(c.all, 30_000, `${c.got.length} of ${total} messages`);
    await sleep(300);
    q.close();
    await within(done, 10_000, "listenQueue to resolve");
    const reads = {};
    queueValues.forEach(([name, make], i) => (reads[name] = sameValue(c.got[i], make()) ? "OK" : "differs"));
    for (let i = 0; i < extra; i++) {
      reads[`@deno/kv ${i}`] = sameValue(c.got[queueValues.length + i], denoKvMessage()) ? "OK" : "differs";
    }
    return { received: c.got.length, reads };
  },
};
