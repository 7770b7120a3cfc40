// Linearizability across two kvconnect nodes that share one PostgreSQL (serve --postgres).
//
// (a) Two nodes on one PostgreSQL 15 (tests/e2e/pg.mjs); @deno/kv clients dealt out over them
//     in turn (half per node) record the same workloads as linearizability.test.mjs (get 50% /
//     set 25% / cas 25% on 3 keys; 32 clients on one hot key with 10% deletes), smaller. Each
//     history must be linearizable, and reads on one node must have seen writes made through
//     the other.
// (b) Negative controls: the main history deliberately corrupted (corruptions.mjs, as for
//     SQLite) and a get on one node made to read a value that a write through the other node
//     had overwritten before the get began: both rejected. And a real broken deployment: two
//     nodes that do NOT share storage (two SQLite data dirs, one database id each), presented
//     to the clients as one database, must give a history the checker rejects.
//
// Environment: KVCONNECT_BIN (required); LIN_PG_OPS (8000), LIN_PG_CLIENTS (8), LIN_PG_KEYS (3)
// for the main workload; LIN_PG_HOT_OPS (4000, 0 = off); LIN_SPLIT_OPS (1000) for the
// split-storage control; LIN_SEED (random, printed); LIN_KEEP_HISTORY=FILE keeps the main
// history as JSON. PostgreSQL 15 from KVC_PG_BINDIR or /usr/lib/postgresql/15/bin.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { checkHistory, compareVs, historyToJson } from "./checker.mjs";
import { rejectCorruptions } from "./corruptions.mjs";
import { recordHistory, summarize } from "./recorder.mjs";
import { annotate, randomToken, removeTempDirs, startServer } from "../e2e/harness.mjs";
import { cleanupPg, startPg } from "../e2e/pg.mjs";

const OPS = Number(process.env.LIN_PG_OPS ?? 8_000);
const CLIENTS = Number(process.env.LIN_PG_CLIENTS ?? 8);
const KEYS = Number(process.env.LIN_PG_KEYS ?? 3);
const HOT_OPS = Number(process.env.LIN_PG_HOT_OPS ?? 4_000);
const SPLIT_OPS = Number(process.env.LIN_SPLIT_OPS ?? 1_000);
const SEED = Number(process.env.LIN_SEED ?? Math.floor(Math.random() * 2 ** 31));

const WORKLOADS = [
  { name: "main", ops: OPS, clients: CLIENTS, keys: KEYS, seed: SEED },
  { name: "hot key", ops: HOT_OPS, clients: 32, keys: 1, seed: SEED + 1, mix: { delete: 0.1 } },
].filter((w) => w.ops > 0);

const done = (e) => e.returnTime !== null && e.returnTime !== undefined;
const isWrite = (e) => done(e) && (e.op === "set" || (e.op === "cas" && e.result.ok));
const writeValue = (e) => (e.op === "set" ? e.args[0] : e.args[1]);

/** Per node: operations, and completed gets that returned a value written through the other node. */
function nodeStats(history) {
  const writerNode = new Map();
  for (const e of history) if (e.op === "set" || e.op === "cas") writerNode.set(writeValue(e), e.node);
  const perNode = new Map();
  for (const e of history) {
    const n = perNode.get(e.node) ?? { ops: 0, crossReads: 0 };
    n.ops++;
    if (e.op === "get" && done(e) && e.result && writerNode.get(e.result.value) !== e.node) n.crossReads++;
    perNode.set(e.node, n);
  }
  return [...perNode.entries()].sort((a, b) => a[0] - b[0]);
}

describe("two kvconnect nodes on one PostgreSQL: recorded histories", { timeout: 240_000 }, () => {
  let pg;
  const nodes = [];
  const recs = new Map();
  let recordError;

  before(async () => {
    try {
      pg = await startPg({ fsync: false }); // crash safety is tests/crash's business
      const token = randomToken();
      // one after the other: the first creates the schema and the default database
      for (let i = 0; i < 2; i++) nodes.push(await startServer({ postgres: pg.conninfo, token }));
      for (const w of WORKLOADS) {
        const keyPrefix = ["linearizability-pg", w.name, w.seed];
        recs.set(w.name, await recordHistory({ urls: nodes.map((n) => n.url), token, keyPrefix, ...w }));
      }
    } catch (e) {
      recordError = annotate(e, ...nodes);
    }
    const main = recs.get("main");
    if (main && process.env.LIN_KEEP_HISTORY) {
      fs.writeFileSync(process.env.LIN_KEEP_HISTORY, historyToJson({ meta: main.meta, history: main.history }));
    }
  });

  after(async () => {
    for (const n of nodes) await n.kill();
    await cleanupPg();
    await removeTempDirs();
  });

  for (const w of WORKLOADS) {
    const title = `${w.name}: ${w.ops} operations from ${w.clients} clients on 2 nodes, ${w.keys} key${w.keys === 1 ? "" : "s"}, are linearizable`;
    test(title, () => {
      if (recordError) throw recordError;
      const rec = recs.get(w.name);
      const s = summarize(rec.history);
      assert.equal(s.ops, w.ops);
      assert.ok(s.clients === w.clients && s.keys === w.keys, JSON.stringify(s));
      const r = checkHistory(rec.history, { timeoutMs: 30_000 });
      const perNode = nodeStats(rec.history);
      console.log(
        `linearizability on PostgreSQL, 2 nodes${w.name === "main" ? "" : ` (${w.name})`}: ${s.ops} ops (${s.get} gets, ` +
          `${s.set} sets, ${s.cas} cas: ${s.casOk} ok / ${s.casFailed} failed${s.delete ? `, ${s.delete} deletes` : ""}), ` +
          `${s.keys} keys, ${s.clients} clients: ${r.result} (search visited ${r.stats.states} states in ${r.stats.ms.toFixed(0)} ms)`,
      );
      console.log(
        `  seed ${w.seed}; recorded in ${rec.meta.durationMs.toFixed(0)} ms (${((s.ops / rec.meta.durationMs) * 1000).toFixed(0)} ops/s); ` +
          `${s.pending} pending; ` +
          perNode.map(([n, x]) => `node ${n}: ${x.ops} ops, ${x.crossReads} gets read the other node's writes`).join("; "),
      );
      for (const e of rec.meta.errors.slice(0, 5)) console.log(`  error: client ${e.client} ${e.op}: ${e.error}`);
      if (r.failure) console.log(r.failure.text);
      assert.equal(r.result, "linearizable", r.failure?.text ?? "search budget exhausted");
      assert.ok(s.pending <= s.ops / 100, `${s.pending} operations failed: ${JSON.stringify(rec.meta.errors.slice(0, 5))}`);
      assert.ok(s.casOk > 0 && s.casFailed > 0, "the workload exercises both CAS outcomes");
      assert.equal(perNode.length, 2, "both nodes served clients");
      for (const [n, x] of perNode) assert.ok(x.crossReads > 0, `node ${n} never read a write made through the other node`);
    });
  }

  test("the main history, deliberately corrupted, is rejected", () => {
    if (recordError) throw recordError;
    const h = recs.get("main").history;
    rejectCorruptions(h);

    // A stale read across nodes: a get on one node returns the value a write through the other
    // node had already replaced (the replacing write returned before the get was invoked).
    let found = false;
    for (let i = Math.floor(h.length / 2); i < h.length && !found; i++) {
      const g = h[i];
      if (g.op !== "get" || !done(g)) continue;
      const newer = h.find((e) => e.key === g.key && isWrite(e) && e.node !== g.node && e.returnTime < g.invokeTime);
      if (!newer) continue;
      const older = h.find((e) => e.key === g.key && isWrite(e) && compareVs(e.result.versionstamp, newer.result.versionstamp) < 0);
      if (!older) continue;
      const corrupt = structuredClone(h);
      corrupt[i].result = { value: writeValue(older), versionstamp: older.result.versionstamp };
      const r = checkHistory(corrupt, { timeoutMs: 20_000 });
      console.log(
        `  corrupted (history[${i}] get on node ${g.node} reads ${older.result.versionstamp}, replaced by node ` +
          `${newer.node}'s ${newer.result.versionstamp} before it): ${r.result}`,
      );
      assert.equal(r.result, "not linearizable");
      assert.equal(r.failure.key, g.key);
      found = true;
    }
    assert.ok(found, "found a get to corrupt across nodes");
  });
});

describe("negative control: two nodes that do not share storage", { timeout: 120_000 }, () => {
  const nodes = [];
  after(async () => {
    for (const n of nodes) await n.kill();
    await removeTempDirs();
  });

  test(`${SPLIT_OPS} operations on two SQLite nodes presented as one database are not linearizable`, async () => {
    const token = randomToken();
    try {
      for (let i = 0; i < 2; i++) nodes.push(await startServer({ token }));
      const rec = await recordHistory({
        urls: nodes.map((n) => n.url), token, ops: SPLIT_OPS, clients: 8, keys: 3, seed: SEED + 2,
        keyPrefix: ["linearizability-split", SEED],
      });
      const s = summarize(rec.history);
      const r = checkHistory(rec.history, { timeoutMs: 30_000 });
      console.log(
        `negative control (2 nodes, separate SQLite storage): ${s.ops} ops (${s.get} gets, ${s.set} sets, ${s.cas} cas), ` +
          `${s.keys} keys, ${s.clients} clients: ${r.result} (search visited ${r.stats.states} states in ${r.stats.ms.toFixed(0)} ms)`,
      );
      if (r.failure) console.log(r.failure.text.split("\n").slice(0, 12).map((l) => `    ${l}`).join("\n"));
      assert.equal(r.result, "not linearizable", "split storage went unnoticed");
    } catch (e) {
      throw annotate(e, ...nodes);
    }
  });
});
