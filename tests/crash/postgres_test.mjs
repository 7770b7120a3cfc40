#!/usr/bin/env node
// Crash safety of kvconnect on PostgreSQL: the bank-transfer driver of crash_test.mjs (same
// ledger, same checks after every cycle) over two nodes `serve --postgres` on one PostgreSQL 15
// (tests/e2e/pg.mjs, fsync on), half of the writers' clients on each node. Three faults:
//
//   kill-nodes  SIGKILL of one node or of both (seeded choice) at a random moment under load.
//               The writers of a killed node stop; those of the other node keep going and must
//               get acknowledgements while it is down (a kill inside a transaction must not
//               leave the per-database counter row locked). The killed nodes are started again.
//   stop-pg     PostgreSQL itself stopped with an immediate stop (SIGQUIT: a crash for its data
//               dir, recovery at the next start) under load, kept down for a while, started
//               again on the same port. The nodes are NOT restarted: each must take writes again
//               by itself. The writers keep going through the outage and retry: every answer
//               during it must be a 5xx (a 4xx would make clients give up), never a hang.
//               A commit answered 5xx has an unknown outcome (the COMMIT may have reached the
//               WAL before PostgreSQL died), so a writer retries the same transfer with a check
//               that its log key is still absent, and reads the log key to learn whether an
//               earlier attempt landed. When a read fails, it commits on the balances it read
//               last (the checks keep that safe), so writes keep arriving during the outage.
//   kill-sessions  PostgreSQL stays up, but every session of the nodes is ended
//               (pg_terminate_backend) again and again for a while, in the middle of transactions,
//               reads and idle times; writers as for stop-pg. A node must never carry a
//               transaction over to a new session (its later statements would each commit on
//               their own, outside the counter-row lock): before storage/postgres pinned its
//               connections inside transactions, this fault created money out of nothing.
//
// After each cycle (verify() of crash_test.mjs, through one node, alternating): every
// acknowledged write is there with its versionstamp, nothing is half-applied, the balances are
// the replay of the log, versionstamps keep growing. Duplicates cannot happen by construction
// (unique log keys checked absent); the run counts the commits answered 5xx that had landed all
// the same: a client that blindly re-sends such a write would apply it twice.
//
// Runs under `node --test` (all three faults; cycles from CRASH_PG_NODE_CYCLES,
// CRASH_PG_OUTAGE_CYCLES and CRASH_PG_SESSION_CYCLES) or as a CLI:
//   KVCONNECT_BIN=build/kvconnect node tests/crash/postgres_test.mjs --fault stop-pg --cycles 5
// See README.md in this directory.
import { test } from "node:test";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { annotate, makeTempDir, randomToken, sleep, startServer, withTimeout } from "../e2e/harness.mjs";
import { cleanupPg, startPg } from "../e2e/pg.mjs";
import { prng } from "../e2e/prng.mjs";
import {
  ABANDON_MS, CrashRun, SETTLE_MS, VS_RE, acct, closeQuietly, describeErr, fmtMs, openClient, randInt,
  runWithWatchdog, subSeed,
} from "./crash_test.mjs";

const FAULTS = ["kill-nodes", "stop-pg", "kill-sessions"];
const NODES = 2;
const RECOVERY_ACKS = 5; // acknowledgements each node must give after a fault ...
const RECOVERY_LIMIT_MS = 30_000; // ... within this time

// ---------------------------------------------------------------------------
// Options

const OPTIONS = {
  cycles: { env: "", def: undefined, min: 1, help: "cycles (default: 20 kill-nodes, 6 stop-pg, 6 kill-sessions)" },
  seed: { env: "CRASH_SEED", def: undefined, min: 0, help: "PRNG seed (default: random, printed)" },
  accounts: { env: "CRASH_ACCOUNTS", def: 20, min: 2, help: "accounts N" },
  writers: { env: "CRASH_WRITERS", def: 16, min: 2, help: "concurrent writers W, half per node" },
  clients: { env: "CRASH_CLIENTS", def: 4, min: 2, help: "@deno/kv clients, half per node" },
  "initial-balance": { env: "CRASH_INITIAL_BALANCE", def: 1000, min: 1, help: "starting balance per account" },
  "min-kill-ms": { env: "CRASH_MIN_KILL_MS", def: 150, min: 0, help: "earliest fault, ms into the load" },
  "max-kill-ms": { env: "CRASH_MAX_KILL_MS", def: 1200, min: 0, help: "latest fault, ms into the load" },
  "min-outage-ms": { env: "CRASH_PG_MIN_OUTAGE_MS", def: 300, min: 0, help: "stop-pg, kill-sessions: shortest fault" },
  "max-outage-ms": { env: "CRASH_PG_MAX_OUTAGE_MS", def: 1500, min: 0, help: "stop-pg, kill-sessions: longest fault" },
};
const DEFAULT_CYCLES = {
  "kill-nodes": ["CRASH_PG_NODE_CYCLES", 20],
  "stop-pg": ["CRASH_PG_OUTAGE_CYCLES", 6],
  "kill-sessions": ["CRASH_PG_SESSION_CYCLES", 6],
};

function usage() {
  const lines = [`usage: node tests/crash/postgres_test.mjs --fault ${FAULTS.join("|")} [options]   (needs KVCONNECT_BIN)`, ""];
  for (const [name, o] of Object.entries(OPTIONS)) {
    lines.push(`  --${name.padEnd(16)} ${o.help}${o.env ? `; env ${o.env}` : ""}${o.def !== undefined ? `, default ${o.def}` : ""}`);
  }
  lines.push(`  --${"keep".padEnd(16)} keep the temp dirs (also kept on failure); env E2E_KEEP=1`);
  lines.push("", "cycles under node --test: env CRASH_PG_NODE_CYCLES (20), CRASH_PG_OUTAGE_CYCLES (6), CRASH_PG_SESSION_CYCLES (6)");
  return lines.join("\n");
}

function resolveOptions(fault, argv = [], env = process.env) {
  const spec = { help: { type: "boolean", short: "h" }, keep: { type: "boolean" }, fault: { type: "string" } };
  for (const name of Object.keys(OPTIONS)) spec[name] = { type: "string" };
  const { values } = parseArgs({ args: argv, options: spec, strict: true, allowPositionals: false });
  if (values.help) return { help: true };
  const out = { fault: values.fault ?? fault };
  if (!FAULTS.includes(out.fault)) throw new Error(`--fault must be one of ${FAULTS.join(", ")}, got ${out.fault}`);
  const [cyclesEnv, cyclesDef] = DEFAULT_CYCLES[out.fault];
  for (const [name, o] of Object.entries(OPTIONS)) {
    const raw = values[name] ?? (name === "cycles" ? env[cyclesEnv] : env[o.env]);
    if (raw === undefined || raw === "") {
      out[name] = name === "cycles" ? cyclesDef : o.def;
      continue;
    }
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < o.min) throw new Error(`--${name} must be an integer >= ${o.min}, got ${raw}`);
    out[name] = n;
  }
  if (out.seed === undefined) out.seed = Math.floor(Math.random() * 2 ** 31);
  if (out["max-kill-ms"] < out["min-kill-ms"]) throw new Error("--max-kill-ms must be >= --min-kill-ms");
  if (out["max-outage-ms"] < out["min-outage-ms"]) throw new Error("--max-outage-ms must be >= --min-outage-ms");
  out.keep = Boolean(values.keep) || env.E2E_KEEP === "1";
  return out;
}

const count = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);
const fmtCounts = (map) => (map.size ? [...map].sort().map(([k, n]) => `${k} x${n}`).join(", ") : "none");
const requestKind = (url) => (url.endsWith("/atomic_write") ? "write" : url.endsWith("/snapshot_read") ? "read" : new URL(url).pathname);

// ---------------------------------------------------------------------------
// Two nodes on one PostgreSQL

// No request may take longer than this. A node whose connection broke during COMMIT keeps the
// commit's answer while it asks PostgreSQL whether it landed, for up to --pg-commit-check-ms
// (10 s by default) through an outage and restart, so the bound sits above that (a bound equal
// to it failed on a loaded machine, where PostgreSQL alone takes seconds to restart).
const PG_REQUEST_TIMEOUT_MS = 25_000;
// The longest a burst of pg_terminate_backend goes on waiting for a write it cut off, and the
// longest PostgreSQL stays stopped waiting for one.
const MAX_SESSION_BURST_MS = 20_000;

class PgCrashRun extends CrashRun {
  constructor(opts, out) {
    super(opts, out);
    this.tag = `crash-pg ${opts.fault}`;
    this.nodes = [];
  }

  servers() {
    return this.nodes;
  }

  async startNode() {
    return await startServer({ postgres: this.pg.conninfo, token: this.token });
  }

  async setUp() {
    const { opts } = this;
    this.dataDir = await makeTempDir("kvconnect-crash-pg-"); // forensics only
    this.token = randomToken();
    this.out(
      `${this.tag}: seed ${opts.seed}, ${opts.cycles} cycles, ${this.N} accounts x ${this.initial}, ${opts.writers} writers on ` +
        `${opts.clients} clients over ${NODES} nodes on one PostgreSQL (fsync on), fault ${opts["min-kill-ms"]}-` +
        `${opts["max-kill-ms"]} ms into the load` +
        (opts.fault === "kill-nodes" ? "" : `, fault lasting ${opts["min-outage-ms"]}-${opts["max-outage-ms"]} ms`),
    );
    this.pg = await startPg({ fsync: true });
    // one after the other: the first one creates the schema and the default database
    for (let i = 0; i < NODES; i++) this.nodes.push(await this.startNode());
    this.server = this.nodes[0];
  }

  async tearDown() {
    for (const n of this.nodes) await n.kill();
    this.pgLogTail = this.pg?.log().split("\n").slice(-30).join("\n");
    await cleanupPg();
  }

  /** Clients per node, and for writer w its node and client. */
  async openNodeClients(signals, observe) {
    const per = Math.max(1, Math.floor(this.opts.clients / NODES));
    const clients = [];
    for (let n = 0; n < NODES; n++) {
      clients.push([]);
      for (let i = 0; i < per; i++) {
        clients[n].push(await openClient(this.nodes[n], signals[n], observe?.(n), PG_REQUEST_TIMEOUT_MS));
      }
    }
    return clients;
  }

  writerId(cycle, w) {
    return `c${String(cycle).padStart(4, "0")}w${String(w).padStart(2, "0")}`;
  }

  /** Stops every writer; aborts their requests if they do not end; the cycle is then closed. */
  async stopWriters(st, writers, aborts) {
    st.stopped = true;
    let settled = await withTimeout(Promise.allSettled(writers), SETTLE_MS, null);
    if (!settled) {
      st.warnings.push(`writers still busy ${SETTLE_MS} ms after the stop; aborting their requests`);
      for (const a of aborts) a.abort();
      settled = await withTimeout(Promise.allSettled(writers), ABANDON_MS, null);
      if (!settled) st.warnings.push("writers still hung after the abort; abandoned");
    }
    for (const r of settled ?? []) {
      if (r.status === "rejected") st.warnings.push(`writer crashed: ${describeErr(r.reason)}`);
    }
  }

  finishLoad(st, clients, aborts) {
    st.closed = true;
    for (const a of aborts) a.abort();
    for (const kv of clients.flat()) closeQuietly(kv);
    for (const op of st.pending) st.unknown.push(op); // hung or abandoned: outcome unknown
    st.pending.clear();
  }

  /** Waits until every node in `nodes` has RECOVERY_ACKS acknowledgements counted in st.acksAfter. */
  async waitForAcks(st, nodes, what) {
    const deadline = Date.now() + RECOVERY_LIMIT_MS;
    while (nodes.some((n) => st.acksAfter[n] < RECOVERY_ACKS)) {
      if (Date.now() > deadline) {
        const got = nodes.map((n) => `node ${n}: ${st.acksAfter[n]}`).join(", ");
        throw new Error(`${what}: fewer than ${RECOVERY_ACKS} acknowledged writes per node within ${RECOVERY_LIMIT_MS} ms (${got})`);
      }
      await sleep(10);
    }
  }

  async recover(cycle, st) {
    return st.restartMs; // the load brought everything back already
  }

  async verify(cycle, st) {
    this.server = this.nodes[cycle % NODES]; // read back through each node in turn
    const v = await super.verify(cycle, st);
    v.problems.push(...(st.problems ?? []));
    return v;
  }
}

// ---------------------------------------------------------------------------
// kill-nodes

class NodeKillRun extends PgCrashRun {
  async load(cycle) {
    const { opts } = this;
    const rng = prng(subSeed(opts.seed, cycle));
    const killAtMs = opts["min-kill-ms"] + randInt(rng, opts["max-kill-ms"] - opts["min-kill-ms"] + 1);
    const r = rng();
    const victims = r < 1 / 3 ? [0, 1] : [r < 2 / 3 ? 0 : 1];
    const survivors = [...Array(NODES).keys()].filter((n) => !victims.includes(n));
    const st = {
      cycle, killAtMs, stopped: false, closed: false, pending: new Set(), acked: [], rejected: [], unknown: [],
      inflightAtKill: [], lateAcks: 0, lateRefused: 0, conflicts: 0, warnings: [], startVs: this.startVs,
      victims, killed: new Set(), closedNodes: new Set(), acksAfter: new Array(NODES).fill(0), restartMs: 0,
    };
    const aborts = Array.from({ length: NODES }, () => new AbortController());
    this.phase = `cycle ${cycle}: open clients`;
    let clients = [];
    try {
      clients = await this.openNodeClients(aborts.map((a) => a.signal));
      this.phase = `cycle ${cycle}: load`;
      const writers = [];
      const byNode = Array.from({ length: NODES }, () => []);
      for (let w = 0; w < opts.writers; w++) {
        const node = w % NODES;
        const ctl = {
          node,
          get stopped() {
            return st.stopped || st.killed.has(node);
          },
          get closed() {
            return st.closed || st.closedNodes.has(node);
          },
        };
        const kv = clients[node][Math.floor(w / NODES) % clients[node].length];
        const p = this.writer(st, kv, this.writerId(cycle, w), prng(subSeed(opts.seed, cycle, w + 1)), ctl);
        writers.push(p);
        byNode[node].push(p);
      }
      await sleep(killAtMs);

      this.phase = `cycle ${cycle}: kill node ${victims.join(" and ")}`;
      for (const v of victims) st.killed.add(v);
      st.inflightAtKill = [...st.pending].filter((op) => victims.includes(op.node));
      for (const op of st.inflightAtKill) op.atKill = true;
      const killed = await Promise.all(victims.map((v) => this.nodes[v].kill()));
      for (const k of killed) if (k.signal !== "SIGKILL") st.warnings.push(`node exit at kill: ${JSON.stringify(k)}`);

      // The other node keeps going: it must acknowledge writes while the killed one is down (a
      // kill inside a transaction must not leave the counter row locked).
      this.phase = `cycle ${cycle}: survivor acknowledgements`;
      const ackedAtKill = st.acked.length;
      const tKilled = Date.now();
      const acksOf = (n) => st.acked.slice(ackedAtKill).filter((op) => op.node === n).length;
      while (survivors.some((n) => acksOf(n) < RECOVERY_ACKS) && Date.now() - tKilled < RECOVERY_LIMIT_MS) await sleep(5);
      for (const n of survivors) st.acksAfter[n] = acksOf(n);
      st.survivorAcks = survivors.reduce((a, n) => a + st.acksAfter[n], 0);
      st.survivorMs = Date.now() - tKilled;
      if (survivors.some((n) => st.acksAfter[n] < RECOVERY_ACKS)) {
        throw new Error(
          `node ${survivors.join(", ")} acknowledged only ${st.survivorAcks} writes in ${RECOVERY_LIMIT_MS} ms after ` +
            `node ${victims.join(" and ")} was killed (a lock left behind by the killed node?)`,
        );
      }

      this.phase = `cycle ${cycle}: killed nodes' writers settling`;
      const victimWriters = victims.flatMap((v) => byNode[v]);
      let settled = await withTimeout(Promise.allSettled(victimWriters), SETTLE_MS, null);
      if (!settled) {
        st.warnings.push(`writers of a killed node still waiting ${SETTLE_MS} ms after the kill; aborting their requests`);
        for (const v of victims) aborts[v].abort();
        settled = await withTimeout(Promise.allSettled(victimWriters), ABANDON_MS, null);
        if (!settled) st.warnings.push("writers of a killed node still hung after the abort; abandoned");
      }
      for (const v of victims) st.closedNodes.add(v);

      this.phase = `cycle ${cycle}: restart node ${victims.join(" and ")}`;
      const tRestart = Date.now();
      const restarted = await Promise.all(victims.map(() => this.startNode()));
      victims.forEach((v, i) => (this.nodes[v] = restarted[i]));
      st.restartMs = Date.now() - tRestart;

      // Restarted nodes have no writers until the next cycle; the next verify may read through them.

      this.phase = `cycle ${cycle}: stop`;
      await this.stopWriters(st, writers, aborts);
    } finally {
      this.finishLoad(st, clients, aborts);
    }
    return st;
  }

  describeCycle(st) {
    const survivors = [...Array(NODES).keys()].filter((n) => !st.victims.includes(n));
    return [
      `killed node ${st.victims.join(" and ")}, restarted in ${st.restartMs} ms` +
        (survivors.length ? `; node ${survivors.join(", ")} acknowledged ${st.survivorAcks} writes in the ${st.survivorMs} ms after the kill` : ""),
    ];
  }
}

// ---------------------------------------------------------------------------
// stop-pg and kill-sessions

class OutageRun extends PgCrashRun {
  constructor(opts, out) {
    super(opts, out);
    this.outage = {
      statuses: new Map(), // "<during|after> <read|write> <status>" over the run
      clientErrors: 0,
      landedAfter5xx: 0,
      recoveryMs: [],
      outageMs: [],
    };
  }

  summaryExtra() {
    const o = this.outage;
    const during = [...o.statuses].filter(([k]) => k.startsWith("during ")).map(([k, n]) => [k.slice(7), n]);
    const after = [...o.statuses].filter(([k]) => k.startsWith("after ")).map(([k, n]) => [k.slice(6), n]);
    const what = this.opts.fault === "stop-pg" ? "PostgreSQL down" : "sessions killed during";
    return [
      `${what} ${o.outageMs.length} windows (${o.outageMs.map((ms) => `${ms} ms`).join(", ")}); answers in them: ` +
        `${fmtCounts(new Map(during))}; after: ${fmtCounts(new Map(after))}; 4xx: ${o.clientErrors}`,
      `nodes took writes again by themselves after ${o.recoveryMs.map((ms) => `${ms} ms`).join(", ") || "-"} ` +
        `(slowest node per cycle); ${o.landedAfter5xx} commits answered 5xx had landed (a blind re-send would ` +
        `duplicate them; here 0 duplicates: each log key is checked absent)`,
    ];
  }

  async load(cycle) {
    const { opts } = this;
    const rng = prng(subSeed(opts.seed, cycle));
    const killAtMs = opts["min-kill-ms"] + randInt(rng, opts["max-kill-ms"] - opts["min-kill-ms"] + 1);
    const outageMs = opts["min-outage-ms"] + randInt(rng, opts["max-outage-ms"] - opts["min-outage-ms"] + 1);
    const st = {
      cycle, killAtMs, stopped: false, closed: false, pending: new Set(), acked: [], rejected: [], unknown: [],
      inflightAtKill: [], lateAcks: 0, lateRefused: 0, conflicts: 0, warnings: [], startVs: this.startVs,
      problems: [], when: "before", statuses: new Map(), acksAfter: new Array(NODES).fill(0), firstAckMs: [],
      outageMs, restartMs: 0, sent5xxLanded: 0,
    };
    const observe = (node) => (url, status, error) => {
      const what = `${st.when} ${requestKind(url)} ${status ?? `error (${error?.cause?.code ?? error?.name ?? "?"})`}`;
      count(st.statuses, what);
      if (st.when !== "before") count(this.outage.statuses, what);
      if (status >= 400 && status < 500) {
        this.outage.clientErrors++;
        st.problems.push(`node ${node} answered ${status} to a ${requestKind(url)} (${st.when} the fault): clients give up on a 4xx`);
      } else if (status === undefined && !st.stopped) {
        st.problems.push(`node ${node} gave no answer to a ${requestKind(url)} (${st.when} the fault): ${describeErr(error)}`);
      }
    };
    const aborts = Array.from({ length: NODES }, () => new AbortController());
    this.phase = `cycle ${cycle}: open clients`;
    let clients = [];
    try {
      clients = await this.openNodeClients(aborts.map((a) => a.signal), observe);
      this.phase = `cycle ${cycle}: read every balance`;
      const writerClients = Array.from({ length: opts.writers }, (_, w) => {
        const node = w % NODES;
        return { node, kv: clients[node][Math.floor(w / NODES) % clients[node].length] };
      });
      // Every writer knows every balance before the fault: when its reads fail during the fault
      // it commits on what it knows (the checks keep that safe), so writes reach the nodes while
      // PostgreSQL is away. (A writer that had never read its next pair only retried the read,
      // and a fault early in the load could pass with no write sent at all.)
      const known = await Promise.all(writerClients.map(({ kv }) => this.readBalances(kv)));
      this.phase = `cycle ${cycle}: load`;
      const writers = writerClients.map(({ node, kv }, w) =>
        this.retryingWriter(st, kv, this.writerId(cycle, w), prng(subSeed(opts.seed, cycle, w + 1)), node, known[w]));
      await sleep(killAtMs);

      const failedDuring = () =>
        [...st.statuses].filter(([k]) => /^during write 5\d\d$/.test(k)).reduce((a, [, n]) => a + n, 0);
      st.inflightAtKill = [...st.pending];
      for (const op of st.inflightAtKill) op.atKill = true;
      st.when = "during";
      const tStop = Date.now();
      if (opts.fault === "stop-pg") {
        this.phase = `cycle ${cycle}: PostgreSQL immediate stop`;
        await this.pg.stop({ mode: "immediate" });
        await sleep(outageMs);
        // As with the session bursts below: down until a write has been answered with a 5xx.
        while (failedDuring() === 0 && Date.now() - tStop < MAX_SESSION_BURST_MS) await sleep(20);
        this.phase = `cycle ${cycle}: PostgreSQL restart`;
        const tRestart = Date.now();
        await this.pg.restart();
        st.restartMs = Date.now() - tRestart;
      } else {
        this.phase = `cycle ${cycle}: terminating the nodes' sessions`;
        st.terminated = 0;
        // A burst hits a write only when it finds a session inside a transaction, which on a
        // loaded machine can take longer than the drawn window: the burst goes on (up to
        // MAX_SESSION_BURST_MS) until a write has been answered with a 5xx, so every cycle
        // exercises the fault it counts.
        while (Date.now() - tStop < outageMs || (failedDuring() === 0 && Date.now() - tStop < MAX_SESSION_BURST_MS)) {
          st.terminated += Number(await this.pg.query(
            "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name like 'kvconnect%'",
          ));
          await sleep(randInt(rng, 40));
        }
      }
      st.when = "after";
      st.upAt = Date.now();
      this.outage.outageMs.push(st.upAt - tStop);
      const failedWrites = failedDuring();
      if (failedWrites === 0) st.problems.push("no write was answered with a 5xx during the fault: it was not exercised");

      this.phase = `cycle ${cycle}: nodes reconnecting by themselves`;
      await this.waitForAcks(st, [...Array(NODES).keys()], "after PostgreSQL came back (no node restarted)");
      this.outage.recoveryMs.push(Math.max(...st.firstAckMs));
      for (const [i, n] of this.nodes.entries()) {
        if (!n.running) st.problems.push(`node ${i} exited during the outage: ${JSON.stringify(await n.exited)}`);
      }

      this.phase = `cycle ${cycle}: stop`;
      await this.stopWriters(st, writers, aborts);
    } finally {
      this.finishLoad(st, clients, aborts);
    }
    return st;
  }

  /** account -> its entry, for every account, read through `kv` (Deno reads 10 keys at most at once). */
  async readBalances(kv) {
    const known = new Map();
    for (let first = 0; first < this.N; first += 10) {
      const ids = Array.from({ length: Math.min(10, this.N - first) }, (_, i) => first + i);
      const entries = await kv.getMany(ids.map(acct));
      ids.forEach((id, i) => known.set(id, entries[i]));
    }
    return known;
  }

  /**
   * Transfers until st.stopped, through the outage. A failed read or commit is retried after a
   * short pause; a transfer whose commit got no clear answer keeps its log id until its fate is
   * known: the next read shows its log key (it landed: outcome left to verify()), or the same
   * transfer commits with the log key checked absent.
   */
  async retryingWriter(st, kv, id, rng, node, known) {
    const { N } = this;
    // known: account -> the entry this writer read last
    let seq = 0;
    let pause = 20;
    const backOff = async () => {
      await sleep(pause);
      pause = Math.min(pause * 2, 200);
    };
    while (!st.stopped) {
      const from = randInt(rng, N);
      let to = randInt(rng, N - 1);
      if (to >= from) to++;
      const op = { id: `${id}-${seq++}`, value: undefined, atKill: false, node, sent: false };
      const logKey = ["log", op.id];
      for (;;) {
        if (st.stopped) {
          if (op.sent) st.unknown.push(op);
          return;
        }
        let a = known.get(from);
        let b = known.get(to);
        try {
          const [ea, eb, log] = await kv.getMany([acct(from), acct(to), logKey]);
          known.set(from, (a = ea));
          known.set(to, (b = eb));
          pause = 20;
          if (log.versionstamp !== null) {
            // an attempt answered 5xx had landed
            st.sent5xxLanded++;
            st.unknown.push(op);
            break;
          }
        } catch {
          if (!a || !b) {
            await backOff();
            continue;
          }
          // commit on the balances read last: their checks keep this safe
        }
        if (typeof a.value !== "number" || typeof b.value !== "number") {
          st.problems.push(`${op.id}: account ${from} or ${to} missing or not a number: ${a.value} ${b.value}`);
          return;
        }
        if (op.value === undefined) {
          if (a.value < 1) break;
          op.value = { from, to, amount: 1 + randInt(rng, Math.min(a.value, 100)) };
        } else if (a.value < op.value.amount) {
          if (op.sent) st.unknown.push(op); // verify() learns whether an earlier attempt landed
          break;
        }
        st.pending.add(op);
        let res;
        try {
          res = await kv.atomic()
            .check(a)
            .check(b)
            .check({ key: logKey, versionstamp: null })
            .set(acct(from), a.value - op.value.amount)
            .set(acct(to), b.value + op.value.amount)
            .set(logKey, op.value)
            .commit();
        } catch {
          op.sent = true; // outcome unknown
          if (st.closed) return;
          await backOff();
          continue;
        } finally {
          st.pending.delete(op);
        }
        if (st.closed) return;
        if (res.ok) {
          if (!VS_RE.test(res.versionstamp)) st.warnings.push(`${op.id}: odd versionstamp ${res.versionstamp}`);
          op.vs = res.versionstamp;
          st.acked.push(op);
          if (op.atKill) st.lateAcks++;
          if (st.when === "after") {
            if (st.acksAfter[node]++ === 0) st.firstAckMs[node] = Date.now() - st.upAt;
          }
          break;
        }
        if (op.atKill) st.lateRefused++;
        st.conflicts++;
        if (!op.sent) {
          st.rejected.push(op);
          break;
        }
        // a check failed after an attempt without answer: the next read tells whether it landed
      }
    }
  }

  async verify(cycle, st) {
    const v = await super.verify(cycle, st);
    this.outage.landedAfter5xx += st.sent5xxLanded;
    return v;
  }

  describeCycle(st) {
    const of = (when) => new Map([...st.statuses].filter(([k]) => k.startsWith(`${when} `)).map(([k, n]) => [k.slice(when.length + 1), n]));
    const fault = this.opts.fault === "stop-pg"
      ? `PostgreSQL stopped (immediate) at ${st.killAtMs} ms, down ${st.outageMs} ms + restart ${st.restartMs} ms`
      : `${st.terminated} sessions of the nodes killed (pg_terminate_backend) from ${st.killAtMs} ms for ${st.outageMs} ms`;
    return [
      `${fault}; answers meanwhile: ${fmtCounts(of("during"))}`,
      `after: ${fmtCounts(of("after"))}; first acknowledgement per node after ` +
        `${st.firstAckMs.map((ms) => `${ms} ms`).join(" / ")}; ${st.sent5xxLanded} commits answered 5xx had landed`,
    ];
  }
}

// ---------------------------------------------------------------------------
// Entry points

/** A cycle takes 1-5 s here; the watchdog allows 20 s per cycle plus 2 minutes. */
function watchdogMs(opts) {
  return 120_000 + opts.cycles * 20_000;
}

export async function runPgCrash(opts, out = console.log) {
  const run = opts.fault === "kill-nodes" ? new NodeKillRun(opts, out) : new OutageRun(opts, out);
  try {
    return await runWithWatchdog(run, watchdogMs(opts), out);
  } catch (e) {
    const err = annotate(e, ...run.servers());
    if (run.pgLogTail) err.message += `\n--- PostgreSQL (last lines) ---\n${run.pgLogTail}`;
    throw err;
  }
}

const isMain = Boolean(process.argv[1]) && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);

if (isMain && !process.env.NODE_TEST_CONTEXT) {
  let opts;
  try {
    opts = resolveOptions(undefined, process.argv.slice(2));
  } catch (e) {
    console.error(`${e.message}\n\n${usage()}`);
    process.exit(2);
  }
  if (opts.help) {
    console.log(usage());
    process.exit(0);
  }
  runPgCrash(opts).then(
    () => process.exit(0),
    (e) => {
      console.error(`crash-pg: FAILED: ${e.stack ?? e}`);
      process.exit(1);
    },
  );
} else if (isMain) {
  const kill = resolveOptions("kill-nodes");
  test(`crash safety on PostgreSQL: ${kill.cycles} cycles of SIGKILL to one or both of two nodes under transfers`, {
    timeout: watchdogMs(kill) + 10_000,
  }, async () => {
    await runPgCrash(kill);
  });
  const outage = resolveOptions("stop-pg");
  test(`crash safety on PostgreSQL: ${outage.cycles} immediate stops of PostgreSQL under transfers, nodes not restarted`, {
    timeout: watchdogMs(outage) + 10_000,
  }, async () => {
    await runPgCrash(outage);
  });
  const sessions = resolveOptions("kill-sessions");
  test(`crash safety on PostgreSQL: ${sessions.cycles} bursts of pg_terminate_backend on the nodes' sessions under transfers`, {
    timeout: watchdogMs(sessions) + 10_000,
  }, async () => {
    await runPgCrash(sessions);
  });
}
