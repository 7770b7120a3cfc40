// Linearizability of single-key get / set / compare-and-set through the real protocol.
//
// (a) the checker on small hand-written histories: valid ones accepted, broken ones
//     rejected, pending operations handled both ways, the search budget answers "unknown";
// (b) kvconnect driven by concurrent @deno/kv clients (recorder.mjs), history checked;
// (c) that real history, deliberately corrupted, is rejected.
//
// Environment: KVCONNECT_BIN (required for (b)/(c)); LIN_OPS (10000), LIN_CLIENTS (8),
// LIN_KEYS (3) for the main workload; LIN_HOT_OPS (4000, 0 = off) for a second one with 32
// clients on one key, deletes included; LIN_SEED (random, printed); LIN_KEEP_HISTORY=FILE
// writes the main history as JSON (check it again with `node checker.mjs FILE`).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { checkHistory, compareVs, historyToJson } from "./checker.mjs";
import { rejectCorruptions } from "./corruptions.mjs";
import { prng, recordHistory, summarize } from "./recorder.mjs";
import { annotate, removeTempDirs, startServer } from "../e2e/harness.mjs";

// ---------------------------------------------------------------------------
// Hand-written histories. Times are small integers; vs(n) is a 20-hex-digit versionstamp.

const vs = (n) => n.toString(16).padStart(20, "0");
const P = null; // returnTime of a pending operation

function get(client, t0, t1, result, key = "x") {
  const r = t1 === P ? undefined : result === null ? null : { value: result[0], versionstamp: vs(result[1]) };
  return { client, key, op: "get", args: [], invokeTime: t0, returnTime: t1, result: r };
}
function set(client, t0, t1, value, stamp, key = "x") {
  const result = t1 === P ? undefined : { ok: true, versionstamp: vs(stamp) };
  return { client, key, op: "set", args: [value], invokeTime: t0, returnTime: t1, result };
}
/** cas(expected stamp | null, value); stamp = new versionstamp if it succeeded, false if not. */
function cas(client, t0, t1, expected, value, stamp, key = "x") {
  const result = t1 === P ? undefined : stamp === false ? { ok: false } : { ok: true, versionstamp: vs(stamp) };
  return { client, key, op: "cas", args: [expected === null ? null : vs(expected), value], invokeTime: t0, returnTime: t1, result };
}
function del(client, t0, t1, stamp, key = "x") {
  const result = t1 === P ? undefined : { ok: true, versionstamp: vs(stamp) };
  return { client, key, op: "delete", args: [], invokeTime: t0, returnTime: t1, result };
}

function accepts(history, what) {
  const r = checkHistory(history);
  assert.equal(r.result, "linearizable", `${what}: expected linearizable\n${r.failure?.text ?? ""}`);
  return r;
}
function rejects(history, what) {
  const r = checkHistory(history);
  assert.equal(r.result, "not linearizable", `${what}: expected a violation, got ${r.result}`);
  assert.equal(r.ok, false);
  assert.ok(r.failure && r.failure.text.includes("no linearization exists"), `${what}: report`);
  return r;
}

describe("checker: hand-written histories", () => {
  test("empty history and single operations", () => {
    accepts([], "empty");
    accepts([get(0, 0, 1, null)], "get of a never-written key");
    accepts([set(0, 0, 1, "a", 1)], "one set");
  });

  test("valid sequential history with every operation", () => {
    accepts([
      get(0, 0, 1, null),
      set(0, 2, 3, "a", 1),
      get(1, 4, 5, ["a", 1]),
      cas(0, 6, 7, 1, "b", 2),
      cas(1, 8, 9, 1, "c", false),
      cas(1, 10, 11, null, "c", false),
      get(0, 12, 13, ["b", 2]),
      del(1, 14, 15, 3),
      get(0, 16, 17, null),
      cas(0, 18, 19, 2, "d", false),
      cas(1, 20, 21, null, "d", 4),
      get(0, 22, 23, ["d", 4]),
    ], "sequential");
  });

  test("valid concurrent histories", () => {
    // a get overlapping a set may see either side of it
    accepts([set(0, 0, 10, "a", 1), get(1, 1, 2, null), get(2, 3, 4, ["a", 1]), get(1, 5, 6, ["a", 1])], "get around a set");
    // needs backtracking: the later-invoked get must go before the set
    accepts([set(9, 0, 1, "a", 1), set(0, 10, 20, "b", 2), get(1, 11, 19, ["b", 2]), get(2, 12, 13, ["a", 1])], "backtracking");
    // two overlapping sets: their stamps fix the order
    accepts([set(0, 0, 10, "a", 2), set(1, 0, 10, "b", 1), get(2, 11, 12, ["a", 2])], "stamps order overlapping sets");
    // racing CAS on the same stamp: one winner
    accepts([
      set(0, 0, 1, "a", 1),
      cas(1, 2, 9, 1, "b", false),
      cas(2, 2, 9, 1, "c", 2),
      cas(3, 3, 8, 1, "d", false),
      get(4, 4, 5, ["a", 1]),
      get(0, 10, 11, ["c", 2]),
    ], "one CAS winner");
    // keys are independent
    accepts([
      set(0, 0, 3, "a", 1, "x"),
      set(1, 1, 2, "p", 2, "y"),
      get(2, 4, 5, ["a", 1], "x"),
      get(3, 4, 5, ["p", 2], "y"),
    ], "two keys");
    // Many concurrent gets and failed CAS: they commute, and a naive search that first tries
    // the (earlier-invoked) set would explore 2^20 subsets of the failed CAS before backtracking.
    const h = [set(0, 0, 1, "a", 1), set(99, 2, 100, "b", 2)];
    for (let i = 0; i < 40; i++) h.push(i % 2 ? get(i + 1, 3, 100, ["a", 1]) : cas(i + 1, 3, 100, null, `z${i}`, false));
    h.push(get(0, 101, 102, ["b", 2]));
    const r = accepts(h, "wide concurrency");
    assert.ok(r.stats.states < 1_000, `search size: ${r.stats.states} states`);
  });

  test("stale read after a completed write is rejected", () => {
    const r = rejects([set(0, 0, 1, "a", 1), set(1, 2, 3, "b", 2), get(2, 4, 5, ["a", 1])], "stale read");
    assert.equal(r.failure.key, "x");
    assert.equal(r.failure.stuckOp, 2);
    assert.match(r.failure.text, /#2 .*get\(\) -> "a" @ 00000000000000000001 .*cannot be linearized/);
    assert.ok(r.failure.window.includes(1), "the overwriting write is in the window");
    // the same in a wider concurrent context
    rejects([
      set(0, 0, 1, "a", 1),
      get(3, 0, 20, ["a", 1]),
      set(1, 2, 3, "b", 2),
      get(4, 2, 20, ["b", 2]),
      get(2, 4, 5, ["a", 1]),
    ], "stale read among concurrent ops");
    // null after a completed write
    rejects([set(0, 0, 1, "a", 1), get(1, 2, 3, null)], "null after write");
  });

  test("a lost CAS (two CAS on the same stamp both succeed) is rejected", () => {
    const r = rejects([
      set(0, 0, 1, "a", 1),
      cas(1, 2, 9, 1, "b", 2),
      cas(2, 2, 9, 1, "c", 3),
    ], "lost CAS");
    assert.ok(r.failure.window.includes(1) && r.failure.window.includes(2), r.failure.text);
    // CAS that fails although its check holds
    rejects([set(0, 0, 1, "a", 1), cas(1, 2, 3, 1, "b", false)], "CAS failing wrongly");
    // CAS on null succeeding on an existing key
    rejects([set(0, 0, 1, "a", 1), cas(1, 2, 3, null, "b", 2)], "CAS(null) on existing key");
  });

  test("a read of a value never written is rejected", () => {
    rejects([set(0, 0, 1, "a", 1), get(1, 2, 3, ["zzz", 1])], "value never written");
    rejects([set(0, 0, 1, "a", 1), get(1, 2, 3, ["a", 7])], "right value, wrong versionstamp");
    rejects([get(1, 0, 1, ["a", 1]), set(0, 2, 3, "a", 1)], "read before the write was invoked");
  });

  test("non-monotonic versionstamps are rejected", () => {
    rejects([set(0, 0, 1, "a", 5), set(1, 2, 3, "b", 3)], "later write, smaller stamp");
    rejects([set(0, 0, 1, "a", 5), set(1, 2, 3, "b", 5)], "same stamp twice");
    rejects([set(0, 0, 10, "a", 2), set(1, 0, 10, "b", 1), get(2, 11, 12, ["b", 1])], "overlapping sets read in the wrong order");
    rejects([del(0, 0, 1, 4), set(1, 2, 3, "b", 3)], "write after a delete with a smaller stamp");
  });

  test("pending operations: may take effect (once, after invocation) or never", () => {
    // took effect: its stamp comes from the read that saw it
    accepts([set(0, 0, 1, "a", 1), set(1, 2, P, "b"), get(2, 5, 6, ["b", 2])], "pending set took effect");
    // never took effect
    accepts([set(0, 0, 1, "a", 1), set(1, 2, P, "b"), get(2, 5, 6, ["a", 1]), get(2, 7, 8, ["a", 1])], "pending set never applied");
    // took effect late
    accepts([set(0, 0, 1, "a", 1), set(1, 2, P, "b"), get(2, 5, 6, ["a", 1]), get(3, 7, 8, ["b", 2])], "pending set applied late");
    // unobserved, with an unknown stamp, followed by more writes
    accepts([set(0, 0, 1, "a", 1), set(1, 2, P, "b"), set(2, 5, 6, "c", 3), get(2, 7, 8, ["c", 3])], "pending set unobserved");
    accepts([set(0, 0, 1, "a", 1), set(1, 2, P, "b"), cas(2, 5, 6, 1, "c", 3)], "pending set never applied, CAS on the old stamp");
    accepts([set(0, 0, 1, "a", 1), cas(1, 2, P, 1, "b"), get(2, 3, 4, ["b", 2])], "pending CAS took effect");
    accepts([set(0, 0, 1, "a", 1), del(1, 2, P), get(2, 3, 4, null)], "pending delete took effect");
    accepts([set(0, 0, 1, "a", 1), get(1, 2, P), get(2, 3, 4, ["a", 1])], "pending get");
    // but it cannot un-happen, happen twice, happen before its invocation, or break a check
    rejects([set(0, 0, 1, "a", 1), set(1, 2, P, "b"), get(2, 5, 6, ["b", 2]), get(2, 7, 8, ["a", 1])], "pending set undone");
    rejects([set(0, 0, 1, "a", 1), get(2, 2, 3, ["b", 2]), set(1, 4, P, "b")], "pending set seen before invocation");
    rejects([set(0, 0, 1, "a", 1), cas(1, 2, P, 9, "b"), get(2, 3, 4, ["b", 2])], "pending CAS with a failing check seen");
    rejects([
      set(0, 0, 1, "a", 1),
      set(1, 2, P, "b"),
      get(2, 3, 4, ["b", 2]),
      cas(2, 5, 6, 1, "c", 3),
    ], "CAS on the stamp a pending write already replaced");
    rejects([
      set(0, 0, 1, "a", 1),
      set(1, 2, P, "b"),
      get(2, 3, 4, ["b", 2]),
      set(0, 5, 6, "c", 3),
      get(2, 7, 8, ["b", 2]),
    ], "pending write seen again after being overwritten");
    // The failed cas(null) shows the pending set took effect before it; its stamp u is then
    // unknown but a failed cas(5) proves u != 5, so a later cas on 5 cannot succeed.
    const h = (stamp) => [
      del(0, 0, 1, 1),
      set(1, 2, P, "b"),
      cas(2, 3, 4, null, "c", false),
      cas(2, 5, 6, 5, "d", false),
      cas(3, 7, 8, stamp, "e", 9),
    ];
    accepts(h(6), "unknown stamp pinned later");
    rejects(h(5), "unknown stamp pinned to a value a failed cas excluded");
  });

  test("search budget: answers unknown instead of hanging", () => {
    const h = [];
    for (let i = 0; i < 14; i++) h.push(set(i, 0, 100, `v${i}`, i + 1));
    h.push(get(99, 101, 102, ["v13", 14]));
    const r = checkHistory(h, { maxSteps: 5 });
    assert.equal(r.result, "unknown");
    assert.equal(r.ok, false);
    assert.equal(checkHistory(h).result, "linearizable");
  });

  test("malformed entries are reported", () => {
    assert.throws(() => checkHistory([{ key: "x", op: "get", args: [], returnTime: 1 }]), /invokeTime/);
    assert.throws(() => checkHistory([{ key: "x", op: "frob", args: [], invokeTime: 0, returnTime: 1 }]), /unknown op/);
    assert.throws(() => checkHistory([{ key: "x", op: "set", args: ["a"], invokeTime: 2, returnTime: 1, result: { ok: true, versionstamp: vs(1) } }]), /before/);
    assert.equal(compareVs(vs(2), vs(10)), -1);
    assert.equal(compareVs(null, vs(0)), -1);
  });
});

// ---------------------------------------------------------------------------
// Differential test: the checker against plain enumeration of every ordering.

/**
 * Exhaustive reference: is there a subset of the pending writes, versionstamps for them and
 * an order of all operations that respects real time and the register semantics?
 * Versionstamps are numbers here. A pending write's unknown stamp only matters through its
 * order and equality relative to the stamps in the history, so it ranges over those stamps
 * and two points inside every gap between them.
 */
function bruteForceLinearizable(history) {
  const byKey = new Map();
  for (const e of history) {
    if (!byKey.has(e.key)) byKey.set(e.key, []);
    byKey.get(e.key).push(e);
  }
  const num = (x) => (x === null || x === undefined ? null : parseInt(x, 16));
  for (const entries of byKey.values()) {
    const ops = entries
      .filter((e) => !(e.op === "get" && e.returnTime === P))
      .map((e) => ({
        kind: e.op,
        pending: e.returnTime === P,
        call: e.invokeTime,
        ret: e.returnTime === P ? Infinity : e.returnTime,
        value: e.op === "set" ? e.args[0] : e.op === "cas" ? e.args[1] : undefined,
        expected: e.op === "cas" ? num(e.args[0]) : undefined,
        result: e.result,
      }));
    const stamps = new Set();
    for (const e of entries) {
      if (e.op === "cas" && e.args[0] !== null) stamps.add(num(e.args[0]));
      if (e.result && e.result.versionstamp) stamps.add(num(e.result.versionstamp));
    }
    const sorted = [...stamps].sort((a, b) => a - b);
    const cands = [...sorted];
    const edges = [0, ...sorted, (sorted.at(-1) ?? 0) + 2];
    for (let i = 0; i + 1 < edges.length; i++) {
      const [lo, hi] = [edges[i], edges[i + 1]];
      cands.push(lo + (hi - lo) / 3, lo + (2 * (hi - lo)) / 3);
    }
    const pend = ops.filter((o) => o.pending);
    const stepRef = (st, o) => {
      const r = o.result;
      switch (o.kind) {
        case "get":
          if (r === null) return st.present ? null : st;
          return st.present && st.value === r.value && st.vs === num(r.versionstamp) ? st : null;
        case "set":
        case "delete": {
          const y = o.pending ? o.vsPick : num(r.versionstamp);
          if (st.vs !== null && y <= st.vs) return null;
          return o.kind === "set" ? { present: true, value: o.value, vs: y } : { present: false, value: null, vs: y };
        }
        case "cas": {
          const pass = o.expected === null ? !st.present : st.present && st.vs === o.expected;
          if (!o.pending && !r.ok) return pass ? null : st;
          if (!pass) return null;
          const y = o.pending ? o.vsPick : num(r.versionstamp);
          if (st.vs !== null && y <= st.vs) return null;
          return { present: true, value: o.value, vs: y };
        }
        default:
          throw new Error(o.kind);
      }
    };
    const search = (chosen) => {
      const used = new Array(chosen.length).fill(false);
      const rec = (st, left) => {
        if (left === 0) return true;
        for (let i = 0; i < chosen.length; i++) {
          if (used[i]) continue;
          const o = chosen[i];
          // every unplaced op that returned before o was invoked must come first
          if (chosen.some((p, j) => !used[j] && j !== i && p.ret < o.call)) continue;
          const next = stepRef(st, o);
          if (!next) continue;
          used[i] = true;
          if (rec(next, left - 1)) return true;
          used[i] = false;
        }
        return false;
      };
      return rec({ present: false, value: null, vs: null }, chosen.length);
    };
    const completed = ops.filter((o) => !o.pending);
    let found = false;
    const pick = (i, chosen) => {
      if (found) return;
      if (i === pend.length) {
        found = search(chosen);
        return;
      }
      pick(i + 1, chosen); // never took effect
      for (const c of cands) {
        if (found) return;
        pend[i].vsPick = c;
        pick(i + 1, [...chosen, pend[i]]);
      }
    };
    pick(0, completed);
    if (!found) return false;
  }
  return true;
}

/** A random small history: a correct execution, then perhaps one result altered. */
function randomHistory(rnd) {
  const int = (n) => Math.floor(rnd() * n);
  const n = 2 + int(5);
  const keys = rnd() < 0.2 ? ["x", "y"] : ["x"];
  let nextVs = 10;
  const ops = [];
  for (let i = 0; i < n; i++) {
    const call = int(20);
    const kind = ["get", "get", "set", "cas", "cas", "delete"][int(6)];
    const pending = rnd() < 0.15;
    ops.push({ i, call, ret: pending ? P : call + int(8), kind, key: keys[int(keys.length)], pending });
  }
  // linearization points inside the intervals; a pending op takes effect with probability 1/2
  for (const o of ops) {
    o.point = o.pending ? (rnd() < 0.5 ? o.call + rnd() * 10 : Infinity) : o.call + rnd() * (o.ret - o.call);
  }
  const order = [...ops].sort((a, b) => a.point - b.point);
  const state = new Map(keys.map((k) => [k, { present: false, value: null, vs: null }]));
  const seen = new Map(keys.map((k) => [k, [null]]));
  const history = new Array(n);
  for (const o of order) {
    const st = state.get(o.key);
    const value = `v${o.i}`;
    let e;
    if (o.kind === "get") {
      e = get(o.i, o.call, o.ret, st.present ? [st.value, st.vs] : null, o.key);
      if (st.present) seen.get(o.key).push(st.vs);
    } else if (o.kind === "set" || o.kind === "delete") {
      const y = (nextVs += 10);
      e = o.kind === "set" ? set(o.i, o.call, o.ret, value, y, o.key) : del(o.i, o.call, o.ret, y, o.key);
      if (o.point !== Infinity) state.set(o.key, o.kind === "set" ? { present: true, value, vs: y } : { present: false, value: null, vs: y });
      seen.get(o.key).push(y);
    } else {
      const s = seen.get(o.key);
      const expected = rnd() < 0.2 ? 5 + 10 * int(8) : s[int(s.length)];
      const pass = expected === null ? !st.present : st.present && st.vs === expected;
      const y = pass ? (nextVs += 10) : false;
      e = cas(o.i, o.call, o.ret, expected, value, y, o.key);
      if (pass && o.point !== Infinity) state.set(o.key, { present: true, value, vs: y });
      if (pass) s.push(y);
    }
    history[o.i] = e;
  }
  if (rnd() < 0.6) {
    const done = history.filter((e) => e.returnTime !== P);
    if (done.length) {
      const e = done[int(done.length)];
      const writes = history.filter((w) => w.result && w.result.versionstamp && w.op !== "delete");
      if (e.op === "get") {
        const w = writes[int(writes.length + 1)];
        e.result = w ? { value: w.op === "set" ? w.args[0] : w.args[1], versionstamp: w.result.versionstamp } : null;
      } else if (e.op === "cas" && rnd() < 0.5) {
        e.result = e.result.ok ? { ok: false } : { ok: true, versionstamp: vs(5 + 10 * int(12)) };
      } else if (e.result.versionstamp) {
        e.result = { ...e.result, versionstamp: vs(5 + 10 * int(12)) };
      }
    }
  }
  return history;
}

test("checker agrees with exhaustive enumeration on 3000 random small histories", () => {
  const rnd = prng(20240611);
  const tally = { linearizable: 0, "not linearizable": 0 };
  for (let t = 0; t < 3000; t++) {
    const h = randomHistory(rnd);
    const expected = bruteForceLinearizable(h);
    const r = checkHistory(h);
    tally[r.result]++;
    if (r.ok !== expected) {
      assert.fail(`history #${t}: checker says ${r.result}, enumeration says ${expected ? "" : "not "}linearizable\n` +
        `${JSON.stringify(h, null, 1)}\n${r.failure?.text ?? ""}`);
    }
  }
  console.log(`  random small histories: ${tally.linearizable} linearizable, ${tally["not linearizable"]} not`);
  assert.ok(tally.linearizable > 300 && tally["not linearizable"] > 300, JSON.stringify(tally));
});

// ---------------------------------------------------------------------------
// The real thing

const OPS = Number(process.env.LIN_OPS ?? 10_000);
const CLIENTS = Number(process.env.LIN_CLIENTS ?? 8);
const KEYS = Number(process.env.LIN_KEYS ?? 3);
const HOT_OPS = Number(process.env.LIN_HOT_OPS ?? 4_000);
const SEED = Number(process.env.LIN_SEED ?? Math.floor(Math.random() * 2 ** 31));

const WORKLOADS = [
  { name: "main", ops: OPS, clients: CLIENTS, keys: KEYS, seed: SEED },
  // high contention: many clients on one key, deletes included
  { name: "hot key", ops: HOT_OPS, clients: 32, keys: 1, seed: SEED + 1, mix: { delete: 0.1 } },
].filter((w) => w.ops > 0);

describe("kvconnect through @deno/kv: recorded histories", { timeout: 180_000 }, () => {
  let server;
  const recs = new Map();
  let recordError;

  before(async () => {
    server = await startServer();
    try {
      for (const w of WORKLOADS) {
        const keyPrefix = ["linearizability", w.name, w.seed];
        recs.set(w.name, await recordHistory({ url: server.url, token: server.token, keyPrefix, ...w }));
      }
    } catch (e) {
      recordError = annotate(e, server);
    }
    const main = recs.get("main");
    if (main && process.env.LIN_KEEP_HISTORY) {
      fs.writeFileSync(process.env.LIN_KEEP_HISTORY, historyToJson({ meta: main.meta, history: main.history }));
    }
  });

  after(async () => {
    if (server) await server.kill();
    await removeTempDirs();
  });

  for (const w of WORKLOADS) {
    const title = `${w.name}: ${w.ops} operations from ${w.clients} clients on ${w.keys} key${w.keys === 1 ? "" : "s"} are linearizable`;
    test(title, () => {
      if (recordError) throw recordError;
      const rec = recs.get(w.name);
      const s = summarize(rec.history);
      assert.equal(s.ops, w.ops);
      assert.ok(s.clients === w.clients && s.keys === w.keys, JSON.stringify(s));
      const r = checkHistory(rec.history, { timeoutMs: 30_000 });
      const perKey = r.keys.map((k) => `${k.key}: ${k.ops} ops, ${k.states} states, ${k.steps} steps, ${k.ms.toFixed(0)} ms`).join("; ");
      console.log(
        `linearizability${w.name === "main" ? "" : ` (${w.name})`}: ${s.ops} ops (${s.get} gets, ${s.set} sets, ` +
          `${s.cas} cas: ${s.casOk} ok / ${s.casFailed} failed${s.delete ? `, ${s.delete} deletes` : ""}), ` +
          `${s.keys} keys, ${s.clients} clients: ${r.result} (search visited ${r.stats.states} states in ${r.stats.ms.toFixed(0)} ms)`,
      );
      console.log(
        `  seed ${w.seed}; recorded in ${rec.meta.durationMs.toFixed(0)} ms (${((s.ops / rec.meta.durationMs) * 1000).toFixed(0)} ops/s); ` +
          `${s.pending} pending (errors/timeouts); per key: ${perKey}`,
      );
      for (const e of rec.meta.errors.slice(0, 5)) console.log(`  error: client ${e.client} ${e.op}: ${e.error}`);
      if (r.failure) console.log(r.failure.text);
      assert.equal(r.result, "linearizable", r.failure?.text ?? "search budget exhausted");
      // A healthy local server answers every request; errors would be worth a look of their own.
      assert.ok(s.pending <= s.ops / 100, `${s.pending} operations failed: ${JSON.stringify(rec.meta.errors.slice(0, 5))}`);
      assert.ok(s.casOk > 0 && s.casFailed > 0, "the workload exercises both CAS outcomes");
    });
  }

  test("the main recorded history, deliberately corrupted, is rejected", () => {
    if (recordError) throw recordError;
    rejectCorruptions(recs.get("main").history);
  });
});
