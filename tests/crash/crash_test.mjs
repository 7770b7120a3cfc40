#!/usr/bin/env node
// Crash-safety driver: bank transfers under SIGKILL.
//
// Each cycle runs W concurrent writers (spread over a few @deno/kv clients) that move
// money between N accounts. A transfer reads both balances with getMany and commits one
// atomic write that checks both versionstamps, sets both new balances and sets a unique
// log key ["log", "<cycle>w<writer>-<seq>"] = {from, to, amount}; a failed check is
// retried with fresh balances. At a random moment (seeded PRNG) the server is SIGKILLed,
// restarted on the same data dir (--sync full), and the driver verifies:
//   1. every acknowledged commit (ok:true) is there: its log key holds the recorded value
//      with exactly the acknowledged versionstamp (this includes all earlier cycles);
//   2. nothing is half-applied: the balances equal the initial balances plus the replay of
//      every log entry present (acknowledged, or in flight at the kill and made it), each
//      balance carries the versionstamp of the last transfer touching it, the replay in
//      versionstamp order never goes negative, the total is N * initial, no log key
//      appears that was refused (ok:false) or never written, and in-flight writes that
//      did not make it stay absent in all later cycles;
//   3. versionstamps keep growing across restarts: the first write after a restart gets a
//      larger versionstamp than every one seen before, and the next cycle's commits are
//      larger still.
//
// Runs under `node --test` (cycles from CRASH_CYCLES, default 50) or as a CLI:
//   KVCONNECT_BIN=build/kvconnect node tests/crash/crash_test.mjs --cycles 50 --seed 7
// See README.md in this directory for the options. postgres_test.mjs reuses the driver (the
// exports below) for two nodes on one PostgreSQL; importing this file registers no test.
import { test } from "node:test";
import fs from "node:fs/promises";
import path from "node:path";
import v8 from "node:v8";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import {
  annotate, makeTempDir, randomToken, removeTempDirs, sleep, startServer, withTimeout,
} from "../e2e/harness.mjs";
import { prng } from "../e2e/prng.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DENO_KV_MODULE = path.join(HERE, "..", "e2e", "node_modules", "@deno", "kv", "esm", "npm.js");

export const VS_RE = /^[0-9a-f]{20}$/;
const REQUEST_TIMEOUT_MS = 10_000; // no single request may take longer than this
export const SETTLE_MS = 3_000; // after the kill, writers must notice within this time ...
export const ABANDON_MS = 3_000; // ... or, after aborting their requests, within this one

// ---------------------------------------------------------------------------
// Options

const OPTIONS = {
  cycles: { env: "CRASH_CYCLES", def: 50, min: 1, help: "kill/restart cycles" },
  seed: { env: "CRASH_SEED", def: undefined, min: 0, help: "PRNG seed (default: random, printed)" },
  accounts: { env: "CRASH_ACCOUNTS", def: 20, min: 2, help: "accounts N" },
  writers: { env: "CRASH_WRITERS", def: 16, min: 1, help: "concurrent writers W" },
  clients: { env: "CRASH_CLIENTS", def: 4, min: 1, help: "@deno/kv clients the writers share" },
  "initial-balance": { env: "CRASH_INITIAL_BALANCE", def: 1000, min: 1, help: "starting balance per account" },
  "min-kill-ms": { env: "CRASH_MIN_KILL_MS", def: 150, min: 0, help: "earliest kill, ms into the load" },
  "max-kill-ms": { env: "CRASH_MAX_KILL_MS", def: 1200, min: 0, help: "latest kill, ms into the load" },
};

function usage() {
  const lines = ["usage: node tests/crash/crash_test.mjs [options]   (needs KVCONNECT_BIN)", ""];
  for (const [name, o] of Object.entries(OPTIONS)) {
    lines.push(`  --${name.padEnd(16)} ${o.help}; env ${o.env}${o.def !== undefined ? `, default ${o.def}` : ""}`);
  }
  lines.push(`  --${"sync".padEnd(16)} --sync of the server (full|normal|off); env CRASH_SYNC, default full`);
  lines.push(`  --${"keep".padEnd(16)} keep the data dir (also kept on failure); env E2E_KEEP=1`);
  return lines.join("\n");
}

function resolveOptions(argv = [], env = process.env) {
  const spec = { help: { type: "boolean", short: "h" }, keep: { type: "boolean" }, sync: { type: "string" } };
  for (const name of Object.keys(OPTIONS)) spec[name] = { type: "string" };
  const { values } = parseArgs({ args: argv, options: spec, strict: true, allowPositionals: false });
  if (values.help) return { help: true };
  const out = {};
  for (const [name, o] of Object.entries(OPTIONS)) {
    const raw = values[name] ?? env[o.env];
    if (raw === undefined || raw === "") {
      out[name] = o.def;
      continue;
    }
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < o.min) throw new Error(`--${name} (${o.env}) must be an integer >= ${o.min}, got ${raw}`);
    out[name] = n;
  }
  if (out.seed === undefined) out.seed = Math.floor(Math.random() * 2 ** 31);
  if (out["max-kill-ms"] < out["min-kill-ms"]) throw new Error("--max-kill-ms must be >= --min-kill-ms");
  out.sync = values.sync ?? env.CRASH_SYNC ?? "full";
  if (!["full", "normal", "off"].includes(out.sync)) throw new Error(`--sync must be full, normal or off, got ${out.sync}`);
  out.keep = Boolean(values.keep) || env.E2E_KEEP === "1";
  return out;
}

// ---------------------------------------------------------------------------
// Helpers

export const randInt = (rng, n) => Math.floor(rng() * n); // 0 .. n-1
export const subSeed = (seed, ...parts) => parts.reduce((h, p) => Math.imul(h ^ (p + 0x9e3779b9), 0x85ebca6b) >>> 0, seed >>> 0);

const maxVs = (a, b) => (a === undefined || (b !== undefined && b > a) ? b : a);
const sameTransfer = (v, w) =>
  v !== null && typeof v === "object" && v.from === w.from && v.to === w.to && v.amount === w.amount &&
  Object.keys(v).length === 3;
export const fmtMs = (ms) => `${(ms / 1000).toFixed(2)} s`;
export const describeErr = (e) => {
  const cause = e?.cause ? ` (cause: ${e.cause.code ?? ""} ${e.cause.message ?? e.cause})` : "";
  return `${e?.name ?? "Error"}: ${String(e?.message ?? e).split("\n")[0]}${cause}`;
};

let denoKv;
async function loadDenoKv() {
  if (denoKv) return denoKv;
  try {
    denoKv = await import(pathToFileURL(DENO_KV_MODULE).href);
  } catch (e) {
    throw new Error(`cannot load @deno/kv from tests/e2e/node_modules (${e.message}); run \`npm ci\` in tests/e2e first`);
  }
  return denoKv;
}

/**
 * Opens a @deno/kv client on `server` whose requests all end: each has a timeout (`timeoutMs`), and
 * `signal` aborts them together. maxRetries 0: no hidden retries of 5xx answers, so every
 * commit is sent exactly once and its outcome is what the writer sees. `observe(url, status,
 * error)`, if given, sees every HTTP answer (status) or failed request (error).
 */
export async function openClient(server, signal, observe, timeoutMs = REQUEST_TIMEOUT_MS) {
  const { openKv } = await loadDenoKv();
  const fetcher = async (url, init = {}) => {
    const request = fetch(url, { ...init, signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) });
    if (!observe) return await request;
    try {
      const res = await request;
      observe(String(url), res.status, undefined);
      return res;
    } catch (e) {
      observe(String(url), undefined, e);
      throw e;
    }
  };
  return await openKv(server.url, {
    accessToken: server.token,
    encodeV8: v8.serialize,
    decodeV8: v8.deserialize,
    maxRetries: 0,
    fetcher,
  });
}

export function closeQuietly(kv) {
  try {
    kv?.close();
  } catch {
    // already closed
  }
}

export const acct = (i) => ["acct", i];

// ---------------------------------------------------------------------------
// The driver

export class CrashRun {
  constructor(opts, out = console.log) {
    this.opts = opts;
    this.out = out;
    this.tag = "crash"; // starts every line printed
    this.N = opts.accounts;
    this.initial = opts["initial-balance"];
    this.phase = "starting";
    // ledger over all cycles
    this.durable = new Map(); // log id -> {value, vs, cycle, how}: must stay with this value and stamp
    this.absent = new Map(); // log id -> {value, cycle, why}: must never appear
    this.initVs = []; // per account: versionstamp of its set-up
    this.seenVs = undefined; // largest versionstamp seen so far
    this.totals = { acked: 0, inflight: 0, inflightLanded: 0, lateAcks: 0, conflicts: 0, lost: 0, partial: 0, warnings: 0 };
    this.cycleMs = [];
    this.idleCycles = 0;
    this.broken = false; // set when a check failed (as opposed to the run breaking down)
  }

  serverOpts() {
    return { dataDir: this.dataDir, token: this.token, extraArgs: ["--sync", this.opts.sync] };
  }

  /** The servers whose output goes into an error report. */
  servers() {
    return [this.server];
  }

  /** Prints the first line, makes the storage, starts the server(s); this.server takes the set-up. */
  async setUp() {
    const { opts } = this;
    this.dataDir = await makeTempDir("kvconnect-crash-");
    this.token = randomToken();
    this.out(
      `crash: seed ${opts.seed}, ${opts.cycles} cycles, ${this.N} accounts x ${this.initial}, ${opts.writers} writers on ` +
        `${opts.clients} clients, kill ${opts["min-kill-ms"]}-${opts["max-kill-ms"]} ms into the load, --sync ${opts.sync}`,
    );
    this.server = await startServer(this.serverOpts());
  }

  async tearDown() {
    await this.server?.kill();
  }

  /** Lines of the summary beyond the first two. */
  summaryExtra() {
    return [];
  }

  async run() {
    const { opts } = this;
    let ok = false;
    try {
      await this.setUp();
      await this.setUpAccounts();
      for (let cycle = 1; cycle <= opts.cycles; cycle++) await this.cycle(cycle);
      ok = true;
    } catch (e) {
      // DOMExceptions (request timeouts) have a read-only message: wrap them
      const err = e instanceof Error && e.constructor === Error ? e : new Error(describeErr(e), { cause: e });
      if (!this.broken) err.message = `run aborted in "${this.phase}": ${err.message}`;
      throw annotate(err, ...this.servers());
    } finally {
      this.phase = "cleanup";
      await this.tearDown();
      const t = this.totals;
      const avg = this.cycleMs.length ? this.cycleMs.reduce((a, b) => a + b, 0) / this.cycleMs.length : 0;
      const max = this.cycleMs.length ? Math.max(...this.cycleMs) : 0;
      this.out(
        `${this.tag}: ${this.cycleMs.length} cycles, ${t.acked} acknowledged writes, ${t.lost} lost, ${t.partial} partial, ` +
          `${ok ? "invariant held" : this.broken ? "INVARIANT BROKEN" : "run aborted (see the error)"}`,
      );
      this.out(
        `${this.tag}: seed ${opts.seed}; ${t.inflight} in flight at kill (${t.lateAcks} answered after the kill, ` +
          `${t.inflightLanded} unanswered made it); ${t.conflicts} check conflicts retried; ${t.warnings} warnings; ` +
          `cycle avg ${fmtMs(avg)}, max ${fmtMs(max)}`,
      );
      for (const line of this.summaryExtra()) this.out(`${this.tag}: ${line}`);
      if (ok && !opts.keep) await removeTempDirs();
      else this.out(`${this.tag}: data dir kept: ${this.dataDir}`);
    }
  }

  async setUpAccounts() {
    this.phase = "account set-up";
    const abort = new AbortController();
    const kv = await openClient(this.server, abort.signal);
    try {
      // in commits of up to 100 accounts (the server's default --max-checks)
      this.initVs = [];
      for (let first = 0; first < this.N; first += 100) {
        const op = kv.atomic();
        const last = Math.min(first + 100, this.N);
        for (let i = first; i < last; i++) op.check({ key: acct(i), versionstamp: null }).set(acct(i), this.initial);
        const res = await op.commit();
        if (!res.ok || !VS_RE.test(res.versionstamp)) throw new Error(`account set-up failed: ${JSON.stringify(res)}`);
        for (let i = first; i < last; i++) this.initVs[i] = res.versionstamp;
        this.seenVs = this.startVs = res.versionstamp;
      }
    } finally {
      closeQuietly(kv);
      abort.abort();
    }
  }

  /** After load(): brings the killed server back; returns how long that took (ms). */
  async recover(cycle) {
    this.phase = `cycle ${cycle}: restart`;
    const tRestart = Date.now();
    this.server = await startServer(this.serverOpts());
    return Date.now() - tRestart;
  }

  /** Lines printed under a cycle's line (what the load saw beyond the common counts). */
  describeCycle(/* st */) {
    return [];
  }

  async cycle(cycle) {
    const t0 = Date.now();
    const st = await this.load(cycle);
    const restartMs = await this.recover(cycle, st);
    this.phase = `cycle ${cycle}: verify`;
    const v = await this.verify(cycle, st);
    const ms = Date.now() - t0;
    this.cycleMs.push(ms);

    const t = this.totals;
    t.acked += st.acked.length;
    t.inflight += st.inflightAtKill.length;
    t.lateAcks += st.lateAcks;
    t.inflightLanded += v.landed;
    t.conflicts += st.conflicts;
    t.lost += v.lost;
    t.partial += v.partial;
    t.warnings += st.warnings.length;
    this.out(
      `cycle ${String(cycle).padStart(3)}/${this.opts.cycles}: killed at ${st.killAtMs} ms, ${st.acked.length} acked, ` +
        `${st.inflightAtKill.length} in flight at kill (answered late: ${st.lateAcks} ok, ${st.lateRefused} refused; ` +
        `unanswered: ${v.landed} of ${v.unknown} made it), ` +
        `${v.logEntries} log entries checked; restart ${restartMs} ms, verify ${v.ms} ms; cycle ${fmtMs(ms)}`,
    );
    for (const line of this.describeCycle(st, v)) this.out(`  ${line}`);
    for (const w of st.warnings.slice(0, 5)) this.out(`  warning: ${w}`);
    if (st.warnings.length > 5) this.out(`  ... ${st.warnings.length - 5} more warnings`);
    if (v.problems.length) {
      for (const p of v.problems.slice(0, 30)) this.out(`  PROBLEM: ${p}`);
      if (v.problems.length > 30) this.out(`  ... ${v.problems.length - 30} more problems`);
      this.broken = true;
      await this.writeForensics(cycle, st, v).catch(() => {});
      throw new Error(
        `cycle ${cycle} (seed ${this.opts.seed}): ${v.lost} lost, ${v.partial} partial: ${v.problems.slice(0, 5).join("; ")}`,
      );
    }
    if (st.acked.length === 0) {
      // possible on a very busy machine now and then; if it is the rule, the writers are stuck
      this.idleCycles++;
      this.out(`  warning: no write was acknowledged in ${st.killAtMs} ms`);
      if (this.idleCycles > Math.max(2, this.opts.cycles / 5)) {
        throw new Error(`${this.idleCycles} cycles without a single acknowledged write; warnings: ${st.warnings.join("; ")}`);
      }
    }
  }

  /** Writers run until the kill; returns what they saw. */
  async load(cycle) {
    const { opts } = this;
    const server = this.server;
    const rng = prng(subSeed(opts.seed, cycle));
    const killAtMs = opts["min-kill-ms"] + randInt(rng, opts["max-kill-ms"] - opts["min-kill-ms"] + 1);
    const st = {
      cycle, killAtMs, stopped: false, closed: false, pending: new Set(), acked: [], rejected: [], unknown: [],
      inflightAtKill: [], lateAcks: 0, lateRefused: 0, conflicts: 0, warnings: [], startVs: this.startVs,
    };
    const abort = new AbortController();
    this.phase = `cycle ${cycle}: open clients`;
    const clients = [];
    try {
      for (let i = 0; i < opts.clients; i++) clients.push(await openClient(server, abort.signal));

      this.phase = `cycle ${cycle}: load`;
      const writers = [];
      for (let w = 0; w < opts.writers; w++) {
        const id = `c${String(cycle).padStart(4, "0")}w${String(w).padStart(2, "0")}`;
        writers.push(this.writer(st, clients[w % clients.length], id, prng(subSeed(opts.seed, cycle, w + 1))));
      }
      await sleep(killAtMs);

      this.phase = `cycle ${cycle}: kill`;
      if (!server.running) st.warnings.push(`the server was not running at the kill: ${JSON.stringify(await server.exited)}`);
      st.stopped = true; // no writer starts a new request from here on
      st.inflightAtKill = [...st.pending];
      for (const op of st.inflightAtKill) op.atKill = true;
      const killed = await server.kill();
      if (killed.signal !== "SIGKILL") st.warnings.push(`server exit at kill: ${JSON.stringify(killed)}`);

      this.phase = `cycle ${cycle}: writers settling`;
      let settled = await withTimeout(Promise.allSettled(writers), SETTLE_MS, null);
      if (!settled) {
        st.warnings.push(`writers still waiting ${SETTLE_MS} ms after the kill; aborting their requests`);
        abort.abort();
        settled = await withTimeout(Promise.allSettled(writers), ABANDON_MS, null);
        if (!settled) st.warnings.push(`writers still hung after the abort; abandoned`);
      }
      for (const r of settled ?? []) {
        if (r.status === "rejected") st.warnings.push(`writer crashed: ${describeErr(r.reason)}`);
      }
    } finally {
      st.closed = true;
      abort.abort();
      for (const kv of clients) closeQuietly(kv);
    }
    for (const op of st.pending) st.unknown.push(op); // hung or abandoned: outcome unknown
    st.pending.clear();
    return st;
  }

  /**
   * Transfers until `ctl.stopped` (default: the cycle's st.stopped); answers that arrive once
   * `ctl.closed` are not checked (default st.closed). Several nodes pass per-node flags.
   */
  async writer(st, kv, id, rng, ctl = st) {
    const { N } = this;
    let seq = 0;
    while (!ctl.stopped) {
      const from = randInt(rng, N);
      let to = randInt(rng, N - 1);
      if (to >= from) to++;
      let a;
      let b;
      try {
        [a, b] = await kv.getMany([acct(from), acct(to)]);
      } catch (e) {
        if (ctl.stopped) return;
        st.warnings.push(`${id}: getMany failed before the kill: ${describeErr(e)}`);
        await sleep(20);
        continue;
      }
      if (ctl.stopped) return;
      if (typeof a.value !== "number" || typeof b.value !== "number") {
        st.warnings.push(`${id}: account ${from} or ${to} missing or not a number: ${a.value} ${b.value}`);
        return;
      }
      if (a.value < 1) continue;
      const amount = 1 + randInt(rng, Math.min(a.value, 100));
      const op = { id: `${id}-${seq++}`, value: { from, to, amount }, atKill: false, node: ctl.node };
      st.pending.add(op);
      let res;
      try {
        res = await kv.atomic()
          .check(a)
          .check(b)
          .set(acct(from), a.value - amount)
          .set(acct(to), b.value + amount)
          .set(["log", op.id], op.value)
          .commit();
      } catch (e) {
        st.pending.delete(op);
        if (ctl.closed) return;
        st.unknown.push(op);
        if (ctl.stopped) return;
        st.warnings.push(`${op.id}: commit failed before the kill (outcome unknown): ${describeErr(e)}`);
        continue;
      } finally {
        st.pending.delete(op);
      }
      if (ctl.closed) {
        // answered after the cycle was given up: cannot be checked any more
        if (res.ok) st.warnings.push(`${op.id}: acknowledged after the cycle was closed (not checked)`);
        return;
      }
      if (res.ok) {
        if (!VS_RE.test(res.versionstamp)) st.warnings.push(`${op.id}: odd versionstamp ${res.versionstamp}`);
        op.vs = res.versionstamp;
        st.acked.push(op);
        if (op.atKill) st.lateAcks++;
      } else {
        if (op.atKill) st.lateRefused++;
        st.conflicts++;
        st.rejected.push(op);
      }
    }
  }

  /** Checks the restarted server against the ledger; updates the ledger. */
  async verify(cycle, st) {
    const t0 = Date.now();
    const problems = [];
    let lost = 0;
    let partial = 0;
    const abort = new AbortController();
    const kv = await openClient(this.server, abort.signal);
    try {
      // --- read everything
      const entries = new Map();
      for await (const e of kv.list({ prefix: ["log"] }, { batchSize: 500 })) {
        entries.set(e.key[1], { value: e.value, vs: e.versionstamp });
      }
      const balances = [];
      for (let i = 0; i < this.N; i += 10) {
        const keys = [];
        for (let j = i; j < Math.min(i + 10, this.N); j++) keys.push(acct(j));
        balances.push(...(await kv.getMany(keys)));
      }

      // --- 1. acknowledged writes (this cycle's and all earlier ones) are there, unchanged
      for (const op of st.acked) {
        if (!(op.vs > st.startVs)) {
          problems.push(`${op.id}: acknowledged versionstamp ${op.vs} not above the restart probe ${st.startVs}`);
          partial++;
        }
        this.durable.set(op.id, { value: op.value, vs: op.vs, cycle, how: op.atKill ? "acked after kill" : "acked" });
      }
      for (const [id, d] of this.durable) {
        const e = entries.get(id);
        if (!e) {
          lost++;
          problems.push(`LOST ${d.how} write ${id} ${JSON.stringify(d.value)} vs ${d.vs} (cycle ${d.cycle}): key missing`);
        } else if (e.vs !== d.vs || !sameTransfer(e.value, d.value)) {
          lost++;
          problems.push(
            `CHANGED ${d.how} write ${id} (cycle ${d.cycle}): expected ${JSON.stringify(d.value)} @ ${d.vs}, ` +
              `found ${JSON.stringify(e.value)} @ ${e.vs}`,
          );
        }
      }

      // --- writes without an answer: each either made it whole or not at all
      let landed = 0;
      for (const op of st.unknown) {
        const e = entries.get(op.id);
        if (!e) {
          this.absent.set(op.id, { value: op.value, cycle, why: "in flight at the kill and did not make it" });
          continue;
        }
        landed++;
        if (!sameTransfer(e.value, op.value)) {
          partial++;
          problems.push(`in-flight write ${op.id}: sent ${JSON.stringify(op.value)}, found ${JSON.stringify(e.value)}`);
        }
        this.durable.set(op.id, { value: op.value, vs: e.vs, cycle, how: "unanswered but landed" });
      }
      for (const op of st.rejected) this.absent.set(op.id, { value: op.value, cycle, why: "refused with ok:false" });
      for (const [id, e] of entries) {
        if (this.durable.has(id)) continue;
        partial++;
        const a = this.absent.get(id);
        problems.push(
          a
            ? `log ${id} present although ${a.why} (cycle ${a.cycle}): ${JSON.stringify(e.value)} @ ${e.vs}`
            : `log ${id} was never written by this run: ${JSON.stringify(e.value)} @ ${e.vs}`,
        );
      }

      // --- 2. the balances are exactly the replay of the log
      const sorted = [...entries.entries()].sort((x, y) => (x[1].vs < y[1].vs ? -1 : x[1].vs > y[1].vs ? 1 : 0));
      const bal = new Array(this.N).fill(this.initial);
      const lastVs = [...this.initVs];
      let prevVs = this.initVs[this.N - 1];
      let negative = 0;
      for (const [id, e] of sorted) {
        if (!(e.vs > prevVs)) {
          partial++;
          problems.push(`log ${id}: versionstamp ${e.vs} not above the previous one ${prevVs} (shared or not after set-up)`);
        }
        prevVs = e.vs;
        const { from, to, amount } = e.value ?? {};
        if (!(from >= 0 && from < this.N && to >= 0 && to < this.N && amount > 0)) {
          partial++;
          problems.push(`log ${id}: malformed ${JSON.stringify(e.value)}`);
          continue;
        }
        bal[from] -= amount;
        bal[to] += amount;
        lastVs[from] = lastVs[to] = e.vs;
        if (bal[from] < 0) negative++;
      }
      if (negative) {
        partial++;
        problems.push(`replaying the log in versionstamp order drives a balance negative ${negative} times (not serializable)`);
      }
      let total = 0;
      for (let i = 0; i < this.N; i++) {
        const got = balances[i];
        total += typeof got.value === "number" ? got.value : NaN;
        if (got.value !== bal[i] || got.versionstamp !== lastVs[i]) {
          partial++;
          problems.push(
            `account ${i}: stored ${got.value} @ ${got.versionstamp}, log replay gives ${bal[i]} @ ${lastVs[i]}`,
          );
        }
      }
      if (total !== this.N * this.initial) {
        partial++;
        problems.push(`total ${total} != ${this.N * this.initial}`);
      }

      // --- 3. the first write after the restart gets a larger versionstamp than all before it
      let seen = this.seenVs;
      for (const op of st.acked) seen = maxVs(seen, op.vs);
      for (const e of entries.values()) seen = maxVs(seen, e.vs);
      for (const b of balances) seen = maxVs(seen, b.versionstamp ?? undefined);
      const probe = await kv.set(["probe"], cycle);
      if (!probe.ok || !(probe.versionstamp > seen)) {
        partial++;
        problems.push(`versionstamp went backwards after the restart: probe ${probe.versionstamp} <= ${seen}`);
      }
      this.seenVs = maxVs(seen, probe.versionstamp);
      this.startVs = probe.versionstamp;

      return { problems, lost, partial, landed, unknown: st.unknown.length, logEntries: entries.size, ms: Date.now() - t0 };
    } finally {
      closeQuietly(kv);
      abort.abort();
    }
  }

  async writeForensics(cycle, st, v) {
    const file = path.join(this.dataDir, `crash-cycle-${cycle}.json`);
    await fs.writeFile(file, JSON.stringify({
      seed: this.opts.seed, cycle, killAtMs: st.killAtMs, problems: v.problems, warnings: st.warnings,
      acked: st.acked, unknown: st.unknown, rejected: st.rejected.length,
      durable: Object.fromEntries(this.durable), absent: Object.fromEntries(this.absent),
    }, null, 1));
    this.out(`crash: details in ${file}`);
  }
}

/**
 * Runs the driver with `opts` (see resolveOptions). A watchdog ends the process if the
 * whole run takes far longer than it should. Returns the totals; throws on a violation.
 */
export async function runCrash(opts, out = console.log) {
  return await runWithWatchdog(new CrashRun(opts, out), watchdogMs(opts), out);
}

/** Runs `run` (a CrashRun); ends the process (exit code 3) if that takes over `limitMs`. */
export async function runWithWatchdog(run, limitMs, out = console.log) {
  const watchdog = setTimeout(() => {
    out(`${run.tag}: WATCHDOG: no end after ${fmtMs(limitMs)}, stuck in "${run.phase}"; seed ${run.opts.seed}`);
    for (const s of run.servers().filter(Boolean)) out(`--- ${s.describe()} (last output) ---\n${s.logTail(40)}`);
    process.exit(3); // the harness SIGKILLs the servers on exit
  }, limitMs);
  watchdog.unref();
  try {
    await run.run();
    return run.totals;
  } finally {
    clearTimeout(watchdog);
  }
}

/** A normal cycle takes 0.3-2 s; the watchdog allows ~5 s more per cycle plus 2 minutes. */
function watchdogMs(opts) {
  return 120_000 + opts.cycles * (opts["max-kill-ms"] + 5_000);
}

// ---------------------------------------------------------------------------
// Entry points

// The file run (by node, or by node --test in its child process), not one importing it.
const isMain = Boolean(process.argv[1]) && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
const isCli = isMain && !process.env.NODE_TEST_CONTEXT;

if (isCli) {
  let opts;
  try {
    opts = resolveOptions(process.argv.slice(2));
  } catch (e) {
    console.error(`${e.message}\n\n${usage()}`);
    process.exit(2);
  }
  if (opts.help) {
    console.log(usage());
    process.exit(0);
  }
  runCrash(opts).then(
    () => process.exit(0),
    (e) => {
      console.error(`crash: FAILED: ${e.stack ?? e}`);
      process.exit(1);
    },
  );
} else if (isMain) {
  const opts = resolveOptions([]);
  test(`crash safety: ${opts.cycles} SIGKILL cycles under concurrent bank transfers`, {
    timeout: watchdogMs(opts) + 10_000,
  }, async () => {
    await runCrash(opts);
  });
}
