// Linearizability checker for histories of single-key operations on Deno KV.
//
// A history is an array of entries
//   { client, key, op, args, invokeTime, returnTime, result }
// op / args / result:
//   "get"    args []                      result {value, versionstamp} | null (absent)
//   "set"    args [value]                 result {ok: true, versionstamp}
//   "cas"    args [expectedVs|null, value] result {ok: true, versionstamp} | {ok: false}
//            (atomic().check({key, versionstamp: expectedVs}).set(key, value).commit())
//   "delete" args []                      result {ok: true, versionstamp} (versionstamp may be
//            missing, e.g. from kv.delete(); it is then treated as unknown)
// invokeTime / returnTime come from one monotonic clock (bigint, number or a decimal string,
// e.g. process.hrtime.bigint()). An entry whose returnTime is null/undefined is *pending*
// (error, timeout, crash): it may have taken effect at any point after its invocation, or never.
//
// Keys are independent (a single-key register per key), so each key's sub-history is
// checked on its own (P-compositionality). The model per key is a register that is either
// absent or holds (value, versionstamp):
//   * get must return exactly the value and versionstamp of the last linearized write
//     (null if there is none or it was a delete);
//   * every successful write takes the versionstamp its result reported, and these must be
//     strictly increasing in linearization order;
//   * cas succeeds iff its check holds (expected null: key absent; otherwise the current
//     versionstamp equals the expected one), and reports ok:false iff it does not.
// A pending write has an unknown versionstamp. If a completed get observed its value (and no
// other write wrote that value) the observed versionstamp is taken as its own; otherwise the
// model keeps "unknown, greater than the previous one, different from these" and resolves it
// at the first read or successful cas that pins it down.
//
// The search follows Wing & Gong: keep the call and return events in time order in a linked
// list; an operation may be linearized next if its call comes before the first remaining
// return ("minimal"); linearizing removes both its events; when the first remaining return
// belongs to an operation that cannot be linearized next, backtrack. As in Lowe's version,
// configurations (set of linearized operations, model state) already explored are cached and
// never explored again. Pending operations have no return event: the search succeeds once
// every completed operation is linearized. Two prunings specific to this model, both sound:
// operations that leave the state unchanged (gets, failed cas) are linearized as soon as they
// are legal without branching (see the search loop for why), and completed writes are only
// tried in the order of their versionstamps. On kvconnect's histories the search then never
// backtracks. A step/time budget makes the answer "unknown" instead of hanging.

import path from "node:path";
import { fileURLToPath } from "node:url";

const MAX_VS_LEN = 64;
const TAIL = 64; // operations of the deepest partial linearization kept for the report

/** Total order on versionstamps (hex strings of equal length compare as strings). */
export function compareVs(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : 1;
}

/** A canonical string for a stored value (deep, key-order independent). */
export function canonicalValue(v) {
  if (v === undefined) return "u";
  if (v === null) return "n";
  switch (typeof v) {
    case "string":
      return `s${JSON.stringify(v)}`;
    case "number":
      return Object.is(v, -0) ? "d-0" : `d${String(v)}`;
    case "bigint":
      return `b${v}`;
    case "boolean":
      return v ? "t" : "f";
    default:
      break;
  }
  if (ArrayBuffer.isView(v)) {
    return `${v.constructor.name}[${Array.from(new Uint8Array(v.buffer, v.byteOffset, v.byteLength)).join(",")}]`;
  }
  if (v instanceof Date) return `D${v.getTime()}`;
  if (Array.isArray(v)) return `[${v.map(canonicalValue).join(",")}]`;
  if (v instanceof Map) {
    return `M{${[...v].map(([k, x]) => `${canonicalValue(k)}=>${canonicalValue(x)}`).sort().join(",")}}`;
  }
  if (v instanceof Set) return `S{${[...v].map(canonicalValue).sort().join(",")}}`;
  if (typeof v.value === "bigint" && v.constructor?.name === "KvU64") return `U${v.value}`;
  const keys = Object.keys(v).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalValue(v[k])}`).join(",")}}`;
}

function keyLabel(key) {
  if (typeof key === "string") return key;
  return canonicalValue(key);
}

function toTime(t) {
  if (t === null || t === undefined) return null;
  if (typeof t === "bigint") return t;
  if (typeof t === "number") return BigInt(Math.round(t));
  if (typeof t === "string" && /^-?\d+$/.test(t)) return BigInt(t);
  throw new Error(`bad time ${String(t)}`);
}

function shortValue(v, max = 40) {
  let s;
  try {
    s = typeof v === "string" ? JSON.stringify(v) : typeof v === "bigint" ? `${v}n` : JSON.stringify(v, (_, x) => (typeof x === "bigint" ? `${x}n` : x));
  } catch {
    s = String(v);
  }
  if (s === undefined) s = String(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function normalizeVs(vs, where) {
  if (vs === null || vs === undefined) return null;
  if (typeof vs !== "string" || vs.length === 0 || vs.length > MAX_VS_LEN) {
    throw new Error(`${where}: bad versionstamp ${shortValue(vs)}`);
  }
  return vs;
}

// ---------------------------------------------------------------------------
// Normalisation

/**
 * Turns raw entries into per-key lists of normalised operations.
 * Each op: { id (index in the input), client, key, kind, pending, call, ret (bigint|null),
 *            val (value id | -1), valText, expected, vs (reported versionstamp | null),
 *            ok (cas), present (get), raw }
 */
function normalize(history) {
  const byKey = new Map();
  history.forEach((e, id) => {
    const where = `history[${id}]`;
    if (!e || typeof e !== "object") throw new Error(`${where}: not an object`);
    const call = toTime(e.invokeTime);
    if (call === null) throw new Error(`${where}: invokeTime missing`);
    const ret = toTime(e.returnTime);
    if (ret !== null && ret < call) throw new Error(`${where}: returnTime before invokeTime`);
    const pending = ret === null;
    const label = keyLabel(e.key);
    let group = byKey.get(label);
    if (!group) {
      group = { key: e.key, label, ops: [], values: new Map(), valueTexts: [] };
      byKey.set(label, group);
    }
    const intern = (v) => {
      const c = canonicalValue(v);
      let i = group.values.get(c);
      if (i === undefined) {
        i = group.valueTexts.length;
        group.values.set(c, i);
        group.valueTexts.push(shortValue(v));
      }
      return i;
    };
    const args = e.args ?? [];
    const r = e.result;
    const op = { id, client: e.client, key: e.key, kind: e.op, pending, call, ret, val: -1, expected: null, vs: null, ok: true, present: false, raw: e };
    switch (e.op) {
      case "get":
        if (!pending) {
          if (r === null || r === undefined || r.versionstamp === null || r.versionstamp === undefined) {
            op.present = false;
          } else {
            op.present = true;
            op.val = intern(r.value);
            op.vs = normalizeVs(r.versionstamp, where);
          }
        }
        break;
      case "set":
        op.val = intern(args[0]);
        if (!pending) {
          if (!r || r.ok !== true) throw new Error(`${where}: a completed set must have result {ok: true, versionstamp}`);
          op.vs = normalizeVs(r.versionstamp, where);
          if (op.vs === null) throw new Error(`${where}: set result without versionstamp`);
        }
        break;
      case "cas":
        op.expected = normalizeVs(args[0], `${where} expected`);
        op.val = intern(args[1]);
        if (!pending) {
          if (!r || typeof r.ok !== "boolean") throw new Error(`${where}: cas result must be {ok: boolean}`);
          op.ok = r.ok;
          if (r.ok) {
            op.vs = normalizeVs(r.versionstamp, where);
            if (op.vs === null) throw new Error(`${where}: successful cas without versionstamp`);
          }
        }
        break;
      case "delete":
        if (!pending) op.vs = normalizeVs(r?.versionstamp, where);
        break;
      default:
        throw new Error(`${where}: unknown op ${shortValue(e.op)}`);
    }
    group.ops.push(op);
  });
  return byKey;
}

// ---------------------------------------------------------------------------
// Model: state = { present, val, vs, unk, ex }. With unk the versionstamp u of the last write
// is unknown: vs is then a strict lower bound of u and ex lists values u is known to differ
// from (expected stamps of failed cas). Versionstamps are assumed dense enough that a stamp
// strictly between two others exists (80-bit stamps from a commit counter: in practice yes).

const INITIAL = Object.freeze({ present: false, val: -1, vs: null, unk: false, ex: null });

function stateKey(s) {
  return `${s.present ? 1 : 0}${s.unk ? 1 : 0}${s.val}|${s.vs ?? ""}${s.ex ? `|${s.ex.join(",")}` : ""}`;
}

/** Can the register's current versionstamp equal `x`? Returns the resolved state or null. */
function pinVs(s, x) {
  if (!s.unk) return s.vs === x ? s : null;
  if (compareVs(x, s.vs) <= 0 || (s.ex && s.ex.includes(x))) return null;
  return { present: s.present, val: s.val, vs: x, unk: false, ex: null };
}

/** Records that the (unknown) current versionstamp differs from `x`. */
function excludeVs(s, x) {
  if (!s.unk || compareVs(x, s.vs) <= 0 || (s.ex && s.ex.includes(x))) return s;
  const ex = s.ex ? [...s.ex, x].sort(compareVs) : [x];
  return { ...s, ex };
}

/** Applies a write (new value or delete) with versionstamp `vs` (null: unknown). */
function write(s, present, val, vs) {
  if (vs === null) return { present, val, vs: s.vs, unk: true, ex: null };
  // With an unknown current stamp u we only know s.vs < u; u < vs is possible iff s.vs < vs.
  if (s.vs !== null && compareVs(vs, s.vs) <= 0) return null;
  return { present, val, vs, unk: false, ex: null };
}

/**
 * One model step. Returns the new state (the same object if nothing changed), or null if
 * `op` with its recorded result cannot happen in state `s`. Pending ops are only offered
 * here in their "took effect" form.
 */
function step(s, op) {
  switch (op.kind) {
    case "get":
      if (!op.present) return s.present ? null : s;
      if (!s.present || s.val !== op.val) return null;
      return pinVs(s, op.vs);
    case "set":
      return write(s, true, op.val, op.pending ? op.vsGuess : op.vs);
    case "delete":
      return write(s, false, -1, op.pending ? op.vsGuess : op.vs);
    case "cas": {
      let checked;
      if (op.expected === null) checked = s.present ? null : s;
      else checked = s.present ? pinVs(s, op.expected) : null;
      if (op.pending) return checked ? write(checked, true, op.val, op.vsGuess) : null;
      if (!op.ok) {
        // The check must fail.
        if (op.expected === null) return s.present ? s : null;
        if (!s.present) return s;
        if (s.unk) return excludeVs(s, op.expected);
        return s.vs !== op.expected ? s : null;
      }
      return checked ? write(checked, true, op.val, op.vs) : null;
    }
    default:
      return null;
  }
}

function describeState(s, group) {
  if (s === null) return "?";
  const vs = s.unk ? `(unknown > ${s.vs ?? "none"})` : (s.vs ?? "none");
  if (!s.present) return s.vs === null && !s.unk ? "absent (never written)" : `absent (last write ${vs})`;
  return `${group.valueTexts[s.val]} @ ${vs}`;
}

// ---------------------------------------------------------------------------
// Search for one key

class BudgetExceeded extends Error {
  constructor(stats) {
    super("search budget exhausted");
    this.stats = stats;
  }
}

function checkKey(group, budget) {
  const ops = group.ops;
  // Rank = position in invocation order.
  ops.sort((a, b) => (a.call < b.call ? -1 : a.call > b.call ? 1 : a.id - b.id));
  ops.forEach((op, i) => {
    op.rank = i;
  });
  // Gets that never returned constrain nothing.
  const live = ops.filter((op) => !(op.pending && op.kind === "get"));

  // Pending writes: borrow the versionstamp a completed get saw for their (unique) value.
  const writersOfValue = new Map();
  for (const op of ops) {
    if (op.kind === "set" || op.kind === "cas") writersOfValue.set(op.val, (writersOfValue.get(op.val) ?? 0) + 1);
  }
  const seenVs = new Map();
  for (const op of ops) {
    if (op.kind === "get" && !op.pending && op.present) {
      if (!seenVs.has(op.val)) seenVs.set(op.val, new Set());
      seenVs.get(op.val).add(op.vs);
    }
  }
  for (const op of live) {
    op.vsGuess = null;
    if (op.pending && (op.kind === "set" || op.kind === "cas") && writersOfValue.get(op.val) === 1) {
      const seen = seenVs.get(op.val);
      if (seen && seen.size === 1) op.vsGuess = [...seen][0];
    }
  }

  // Events: calls and returns, sorted by time; on equal times calls first (permissive).
  const head = { op: null, isCall: false, prev: null, next: null };
  const events = [];
  for (const op of live) {
    const c = { op, isCall: true, time: op.call, match: null, prev: null, next: null };
    events.push(c);
    if (!op.pending) {
      const r = { op, isCall: false, time: op.ret, prev: null, next: null };
      c.match = r;
      events.push(r);
    }
  }
  events.sort((a, b) => {
    if (a.time !== b.time) return a.time < b.time ? -1 : 1;
    if (a.isCall !== b.isCall) return a.isCall ? -1 : 1;
    return a.op.rank - b.op.rank;
  });
  let prev = head;
  for (const ev of events) {
    ev.prev = prev;
    prev.next = ev;
    prev = ev;
  }

  const n = ops.length;
  const bits = new Uint32Array((n >>> 5) + 1);
  const setBit = (i) => {
    bits[i >>> 5] |= 1 << (i & 31);
  };
  const clearBit = (i) => {
    bits[i >>> 5] &= ~(1 << (i & 31));
  };
  const hasBit = (i) => (bits[i >>> 5] & (1 << (i & 31))) !== 0;
  const pendingLive = live.filter((op) => op.pending);

  const stateIds = new Map();
  const internState = (s) => {
    const k = stateKey(s);
    let id = stateIds.get(k);
    if (id === undefined) {
      id = stateIds.size;
      stateIds.set(k, id);
    }
    return id;
  };

  // Cache of explored configurations. The linearized set is stored exactly but compactly:
  // the lowest-ranked completed op not yet linearized (everything completed below it is
  // linearized), the linearized ops above it, and the linearized pending ops below it.
  const cache = new Set();
  const configKey = (stateId, maxRank) => {
    let frontier = n;
    for (let e = head.next; e; e = e.next) {
      if (e.isCall && !e.op.pending) {
        frontier = e.op.rank;
        break;
      }
      if (!e.isCall) break; // cannot happen: a return's call is still in the list before it
    }
    const parts = [stateId, frontier];
    for (let i = frontier + 1; i <= maxRank; i++) if (hasBit(i)) parts.push(i);
    parts.push("p");
    for (const op of pendingLive) if (op.rank < frontier && hasBit(op.rank)) parts.push(op.rank);
    return parts.join(",");
  };

  const lift = (c) => {
    c.prev.next = c.next;
    if (c.next) c.next.prev = c.prev;
    const r = c.match;
    if (r) {
      r.prev.next = r.next;
      if (r.next) r.next.prev = r.prev;
    }
  };
  const unlift = (c) => {
    const r = c.match;
    if (r) {
      r.prev.next = r;
      if (r.next) r.next.prev = r;
    }
    c.prev.next = c;
    if (c.next) c.next.prev = c;
  };

  // Completed writes must be linearized in the order of their versionstamps (they strictly
  // increase), so only the next one in that order is ever tried: this removes almost all
  // branching between concurrent writes.
  const ordered = live.filter((op) => !op.pending && op.vs !== null && op.kind !== "get" && op.ok);
  ordered.sort((a, b) => compareVs(a.vs, b.vs) || a.rank - b.rank);
  for (const op of live) op.wpos = -1;
  ordered.forEach((op, i) => {
    op.wpos = i;
  });
  let writesDone = 0;

  let remaining = live.filter((op) => !op.pending).length;
  let state = INITIAL;
  let maxRank = -1;
  const stack = [];
  let steps = 0;
  let best = null; // deepest point where the search got stuck
  cache.add(configKey(internState(state), maxRank));

  const tick = () => {
    if (++steps > budget.stepsLeft || ((steps & 4095) === 0 && performance.now() > budget.deadline)) {
      budget.stepsLeft = 0;
      throw new BudgetExceeded({ ops: ops.length, steps, states: cache.size, depth: stack.length });
    }
  };
  const legal = (op) => (op.wpos < 0 || op.wpos === writesDone ? step(state, op) : null);
  /** Linearizes entry's op; false if that configuration was explored before. */
  const tryPush = (e, next, forced) => {
    const op = e.op;
    setBit(op.rank);
    lift(e);
    const newMax = Math.max(maxRank, op.rank);
    const key = configKey(internState(next), newMax);
    if (cache.has(key)) {
      unlift(e);
      clearBit(op.rank);
      return false;
    }
    cache.add(key);
    stack.push({ entry: e, state, maxRank, forced });
    state = next;
    maxRank = newMax;
    if (!op.pending) remaining--;
    if (op.wpos >= 0) writesDone++;
    return true;
  };

  // `from`: where phase 2 resumes in the current configuration (null: a fresh configuration).
  let from = null;
  search: while (remaining > 0) {
    // Phase 1. An operation that leaves the state as it is (a get, a failed cas) and is legal
    // now can always go first: moving it ahead of the others in any valid completion keeps
    // that completion valid (its call precedes every unlinearized return, so no real-time
    // order is broken). So it is linearized without trying alternatives ("forced"), and if
    // the configuration it leads to fails, so does this one.
    let dead = false;
    if (from === null) {
      for (let e = head.next; e && e.isCall; e = e.next) {
        tick();
        const next = legal(e.op);
        if (next !== null && next === state) {
          if (tryPush(e, next, true)) continue search;
          dead = true; // explored before, and failed
          break;
        }
      }
    }
    // Phase 2: branch over the state-changing operations whose calls are minimal.
    if (!dead) {
      for (let e = from ?? head.next; e && e.isCall; e = e.next) {
        tick();
        const next = legal(e.op);
        if (next !== null && next !== state && tryPush(e, next, false)) {
          from = null;
          continue search;
        }
      }
      // Stuck: the first return in the list belongs to an operation that cannot go next.
      if (!best || stack.length > best.depth) {
        let r = head.next;
        while (r && r.isCall) r = r.next;
        // Only the tail of the partial linearization is kept (copying all of it every time
        // the search gets deeper would be quadratic).
        const tailStart = Math.max(0, stack.length - TAIL);
        best = {
          depth: stack.length,
          stuck: r ? r.op : null,
          state,
          tailStart,
          tail: stack.slice(tailStart).map((f) => f.entry.op),
        };
      }
    }
    // Backtrack: undo forced steps, then the last choice, and try its alternatives.
    let top;
    do {
      top = stack.pop();
      if (!top) break search;
      const op = top.entry.op;
      unlift(top.entry);
      clearBit(op.rank);
      if (!op.pending) remaining++;
      if (op.wpos >= 0) writesDone--;
      state = top.state;
      maxRank = top.maxRank;
    } while (top.forced);
    from = top.entry.next;
  }
  budget.stepsLeft -= steps;
  const stats = { ops: ops.length, steps, states: cache.size };
  if (remaining === 0) return { ok: true, stats, order: stack.map((f) => f.entry.op.id) };
  return { ok: false, stats, best };
}

// ---------------------------------------------------------------------------
// Failure report

function fmtTime(t, t0) {
  if (t === null) return "       never";
  const us = Number(t - t0) / 1000;
  return `${(us / 1000).toFixed(3).padStart(10)}ms`;
}

function describeOp(op, group) {
  const v = (i) => group.valueTexts[i];
  let call;
  switch (op.kind) {
    case "get":
      call = "get()";
      break;
    case "set":
      call = `set(${v(op.val)})`;
      break;
    case "cas":
      call = `cas(${op.expected ?? "null"}, ${v(op.val)})`;
      break;
    case "delete":
      call = "delete()";
      break;
    default:
      call = op.kind;
  }
  let res;
  if (op.pending) res = `pending${op.raw.error ? ` (${String(op.raw.error).slice(0, 60)})` : ""}`;
  else if (op.kind === "get") res = op.present ? `${v(op.val)} @ ${op.vs}` : "null";
  else if (op.kind === "cas" && !op.ok) res = "ok:false";
  else res = `ok @ ${op.vs ?? "?"}`;
  return `${call} -> ${res}`;
}

function buildReport(group, best, total) {
  const ops = group.ops;
  const t0 = ops.reduce((m, op) => (op.call < m ? op.call : m), ops[0].call);
  const stuck = best.stuck;
  const inOrder = new Map(best.tail.map((op, i) => [op, best.tailStart + i]));
  const picked = new Set();
  const notes = new Map();
  if (stuck) {
    picked.add(stuck);
    notes.set(stuck, "<-- cannot be linearized");
    // Everything overlapping the stuck operation's interval.
    for (const op of ops) {
      const end = op.ret ?? null;
      if (op.call <= stuck.ret && (end === null || end >= stuck.call)) picked.add(op);
    }
    // Writes whose versionstamp the stuck op refers to.
    const refs = [stuck.vs, stuck.expected].filter((x) => x);
    for (const op of ops) {
      if (op.kind !== "get" && op.vs && refs.includes(op.vs) && op !== stuck) {
        picked.add(op);
        notes.set(op, "<-- wrote the versionstamp it refers to");
      }
    }
    // The last completed writes before the stuck op was invoked.
    const before = ops.filter((op) => op.kind !== "get" && !op.pending && op.vs && op.ret < stuck.call && !(op.kind === "cas" && !op.ok));
    before.sort((a, b) => (a.ret < b.ret ? -1 : 1));
    for (const op of before.slice(-3)) picked.add(op);
  }
  // The last few operations of the deepest partial linearization.
  for (const op of best.tail.slice(-4)) picked.add(op);
  const window = [...picked].sort((a, b) => (a.call < b.call ? -1 : a.call > b.call ? 1 : a.id - b.id));
  const lines = [];
  lines.push(`key ${group.label}: no linearization exists (${ops.length} ops on this key, ${total} in the history).`);
  lines.push(
    `The deepest partial linearization placed ${best.depth} ops; model state then: ${describeState(best.state, group)}.`,
  );
  if (stuck) {
    lines.push(
      `Operation #${stuck.id} (client ${stuck.client}) ${describeOp(stuck, group)} returned before it could be linearized.`,
    );
  }
  lines.push(`Window (times relative to the key's first invocation; L<n> = position in that partial linearization):`);
  for (const op of window) {
    const pos = inOrder.has(op) ? `L${inOrder.get(op) + 1}` : "-";
    lines.push(
      `  #${String(op.id).padEnd(6)} client ${String(op.client).padEnd(4)} ${fmtTime(op.call, t0)} .. ${fmtTime(op.ret, t0)}  ${pos.padEnd(7)} ${describeOp(op, group)}${notes.has(op) ? `  ${notes.get(op)}` : ""}`,
    );
  }
  return {
    text: lines.join("\n"),
    window: window.map((op) => op.id),
    stuckOp: stuck ? stuck.id : null,
    linearizedPrefix: best.depth,
  };
}

// ---------------------------------------------------------------------------
// Public API

/**
 * Checks a history. Options:
 *   maxSteps  total search steps over all keys (default 20,000,000)
 *   timeoutMs wall-clock budget (default 30,000)
 * Returns {
 *   result: "linearizable" | "not linearizable" | "unknown",
 *   ok: boolean (linearizable), keys: [{key, result, ops, steps, states, ms}],
 *   stats: {ops, keys, steps, states, ms},
 *   failure?: {key, text, window: [history indices], stuckOp, linearizedPrefix}
 * }
 * Keys are checked one after the other; the first non-linearizable key stops the check.
 */
export function checkHistory(history, opts = {}) {
  const started = performance.now();
  const budget = {
    stepsLeft: opts.maxSteps ?? 20_000_000,
    deadline: started + (opts.timeoutMs ?? 30_000),
  };
  const groups = normalize(history);
  const keys = [];
  const stats = { ops: history.length, keys: groups.size, steps: 0, states: 0, ms: 0 };
  let result = "linearizable";
  let failure;
  for (const group of groups.values()) {
    const t = performance.now();
    let r;
    try {
      r = checkKey(group, budget);
    } catch (e) {
      if (!(e instanceof BudgetExceeded)) throw e;
      stats.steps += e.stats.steps;
      stats.states += e.stats.states;
      keys.push({ key: group.label, result: "unknown", ...e.stats, ms: performance.now() - t });
      result = "unknown";
      break;
    }
    const ms = performance.now() - t;
    stats.steps += r.stats.steps;
    stats.states += r.stats.states;
    keys.push({ key: group.label, result: r.ok ? "linearizable" : "not linearizable", ...r.stats, ms });
    if (!r.ok) {
      result = "not linearizable";
      failure = { key: group.label, ...buildReport(group, r.best, history.length) };
      break;
    }
  }
  stats.ms = performance.now() - started;
  return { result, ok: result === "linearizable", keys, stats, failure };
}

/** JSON with bigints as decimal strings (times), readable back by checkHistory. */
export function historyToJson(history) {
  return JSON.stringify(history, (_, v) => (typeof v === "bigint" ? v.toString() : v));
}

// CLI: node checker.mjs history.json [--max-steps N] [--timeout-ms N]
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { readFileSync } = await import("node:fs");
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith("--"));
  if (!file) {
    console.error("usage: node checker.mjs HISTORY.json [--max-steps N] [--timeout-ms N]");
    process.exit(2);
  }
  const opt = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : undefined;
  };
  const data = JSON.parse(readFileSync(file, "utf8"));
  const history = Array.isArray(data) ? data : data.history;
  const res = checkHistory(history, { maxSteps: opt("--max-steps"), timeoutMs: opt("--timeout-ms") });
  console.log(
    `${res.result}: ${res.stats.ops} ops, ${res.stats.keys} keys, search visited ${res.stats.states} states ` +
      `(${res.stats.steps} steps) in ${res.stats.ms.toFixed(0)} ms`,
  );
  if (res.failure) console.log(res.failure.text);
  process.exit(res.ok ? 0 : res.result === "unknown" ? 3 : 1);
}
