// Two kvconnect nodes on one PostgreSQL (pg.mjs), driven by the real clients:
//   1. conformance: the SQLite suite's Deno scripts (deno_scripts.test.mjs) alternately on node
//      A and node B; deno/two_nodes.ts switching nodes between operations in one process; the
//      Node @deno/kv client on node B (HTTP/1.1) alternating with Deno on node A (values and
//      versionstamps must agree); an @deno/kv enqueue on A pulled through B's queue API; a
//      watch on B woken by a write on A. Prints "conformance on two nodes: N/N checks".
//   2. check-and-set increments of one counter from Deno processes on both nodes, with retries:
//      the counter equals the number of successful commits, every value is written once.
//   3. a Deno watcher on B, writes on A: latency from A's commit answer to B's frame (p50/p99),
//      next to the same run with watcher and writer on one node.
//   4. `kvconnect db create` / `token create` / `token revoke` with --postgres reach both nodes.
//   5. the node deleting expired keys is killed: the other takes over, its watcher sees the key go.
//   6. bad input (malformed protobuf, oversized bodies, wrong tokens, invalid keys and limits,
//      too many mutations, dropped connections) against node B and against a SQLite server in
//      the same run: the same 4xx and text, never a 5xx, both nodes still serving, and no
//      PostgreSQL session left in a transaction. (hostile.test.mjs runs whole against
//      PostgreSQL as the ctest e2e_hostile_postgres, through E2E_BACKEND=postgres.)
// The tables are printed at the end.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import http from "node:http";
import { KvU64, openKv } from "@deno/kv";
import {
  annotate, describeRun, expectCliOk, expectDenoOk, randomToken, readFrame, removeTempDirs, runDeno, sleep,
  startServer,
} from "./harness.mjs";
import { decodeV8, nodeV8Codec } from "./node_v8.mjs";
import { cleanupPg, startPg } from "./pg.mjs";
import {
  dataPath, describeAnswer, fixture, H2, M_SUM, metadata, pbBytes as lenField, pbCheck as check, pbInt as intField,
  pbMutation as mutation, pbRange as range, pollUntil, VE_LE64,
} from "./raw_client.mjs";

const codec = nodeV8Codec;
const VS = /^[0-9a-f]{20}$/;
const plain = (v) => (v instanceof Uint8Array ? Array.from(v) : v);

const report = [];
after(async () => {
  if (report.length) console.log(`\n${report.join("\n\n")}\n`);
  await cleanupPg();
  await removeTempDirs();
});

function table(title, head, rows) {
  const cell = (s) => String(s).replace(/\|/g, "\\|").replace(/\s*\n\s*/g, " ");
  return [
    title, "",
    `| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ].join("\n");
}

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

describe("two kvconnect nodes on one PostgreSQL", { timeout: 300_000 }, () => {
  let pg;
  let A;
  let B;
  let token;
  const servers = () => [A, B].filter(Boolean);
  const nodeName = (s) => (s === A ? "A" : "B");

  before(async () => {
    pg = await startPg({ fsync: false });
    token = randomToken();
    // both at once: the schema is made by whichever gets there first
    [A, B] = await Promise.all([0, 1].map(() => startServer({
      postgres: pg.conninfo, token, extraArgs: ["--catalog-poll-ms", "200"],
    })));
  });
  after(async () => {
    for (const s of servers()) await s.kill();
  });

  /** The node that deletes expired keys of `default` (it logs so when it takes the lock). */
  let sweeps; // the line
  async function sweeperNode() {
    if (!sweeps) {
      const h2 = await H2.connect(A.url);
      const m = await metadata(h2, token);
      h2.close();
      assert.equal(m.status, 200, describeAnswer(m));
      sweeps = `database ${m.json.databaseId}: this node now sweeps expired keys`;
    }
    const which = await pollUntil(() => [A, B].filter((s) => s.logTail(400).includes(sweeps)),
      (list) => list.length > 0, { timeoutMs: 10_000, intervalMs: 100, what: "a node sweeping expired keys" });
    assert.equal(which.length, 1, "exactly one node sweeps expired keys");
    return which[0];
  }

  /** Runs a test body; on failure both nodes' output tails are attached. */
  function t(name, fn, timeout = 120_000) {
    test(name, { timeout }, async (ctx) => {
      try {
        await fn(ctx);
      } catch (e) {
        throw annotate(e, ...servers());
      }
    });
  }

  // --- 1. conformance ------------------------------------------------------------------------

  t("conformance on two nodes", async (ctx) => {
    const results = []; // [what, node(s), checks passed, checks, detail]
    const failures = [];
    const record = (what, where, passed, total, detail = "") => {
      results.push([what, where, passed, total, detail]);
      if (passed !== total) failures.push(`${what} (${where}): ${detail}`);
    };

    // The SQLite suite's scripts, alternating nodes; a script's steps count as its checks.
    // expiry.ts and watch.ts (an expiring key vanishing from a watch) run on the node that does
    // not delete expired keys: it hides them by time and learns of the deletion from the feed.
    const sweeper = await sweeperNode();
    const other = sweeper === A ? B : A;
    const scripts = [
      "basic.ts", "list.ts", "atomic.ts", "atomic_limits.ts", "sum.ts", "versionstamp.ts", "values.ts",
      "expiry.ts", "watch.ts",
    ];
    for (const [i, script] of scripts.entries()) {
      const sweeps = ["expiry.ts", "watch.ts"].includes(script);
      const node = sweeps ? other : i % 2 ? B : A;
      const res = await runDeno(script, { kvUrl: node.url, token, env: { KV_EXPECT_PROMPT_EXPIRY: "1" }, timeoutMs: 60_000 });
      const where = `${nodeName(node)}${sweeps ? " (not the sweeper)" : ""}`;
      if (res.code === 0 && res.summary?.ok === true) {
        record(`deno/${script}`, where, res.summary.steps, res.summary.steps, `${res.summary.ms} ms`);
      } else {
        record(`deno/${script}`, where, 0, 1, describeRun(res).slice(0, 3000));
      }
    }

    // One Deno process, operations alternating between the nodes.
    {
      const res = await runDeno("two_nodes.ts", { kvUrl: A.url, token, env: { KV_URL_B: B.url }, timeoutMs: 60_000 });
      if (res.code === 0 && res.summary?.ok === true) {
        record("deno/two_nodes.ts", "A+B", res.summary.checks, res.summary.checks, `${res.summary.ms} ms`);
      } else {
        record("deno/two_nodes.ts", "A+B", 0, 1, describeRun(res).slice(0, 3000));
      }
    }

    // @deno/kv (Node, HTTP/1.1) on B alternating with Deno on A; an @deno/kv client on A too.
    {
      let passed = 0;
      let total = 0;
      const check = (fn, what) => {
        total++;
        try {
          fn();
          passed++;
        } catch (e) {
          failures.push(`@deno/kv: ${what}: ${e.message.split("\n")[0]}`);
        }
      };
      const nodeB = await openKv(B.url, { accessToken: token, ...codec });
      const nodeA = await openKv(A.url, { accessToken: token, ...codec });
      try {
        const space = randomToken(8);
        const P = ["cross", space];
        const sets = {
          str: await nodeB.set([...P, "node", "str"], "written by node ✓"),
          obj: await nodeB.set([...P, "node", "obj"], { a: [1, 2.5, "x"], d: new Date(1234567890123), m: new Map([["k", new Set([1n])]]) }),
          bytes: await nodeB.set([...P, "node", "bytes"], new Uint8Array([1, 2, 3, 0, 255])),
          u64: await nodeB.set([...P, "node", "u64"], new KvU64(42n)),
          big: await nodeB.set([...P, "node", "big"], -(2n ** 70n)),
        };
        const res = await runDeno("cross_client.ts", { kvUrl: A.url, token, env: { CROSS_NS: space }, timeoutMs: 45_000 });
        check(() => expectDenoOk(res), "Deno on A reads Node's values from B and writes its own");
        const summary = res.summary ?? {};
        check(() => assert.deepEqual(summary.read, Object.fromEntries(Object.entries(sets).map(([k, r]) => [k, r.versionstamp]))),
          "Deno on A sees the versionstamps Node's writes on B got");
        const got = await nodeB.getMany([
          [...P, "deno", "str"], [...P, "deno", "obj"], [...P, "deno", "bytes"], [...P, "deno", "u64"], [...P, "node", "u64"],
        ]);
        check(() => assert.equal(got[0].value, "written by deno ✓"), "string from Deno");
        check(() => assert.deepEqual(got[1].value, { list: [1, "two", null], when: new Date(42), nested: { t: true } }), "object from Deno");
        check(() => assert.deepEqual(plain(got[2].value), [9, 8, 7]), "bytes from Deno");
        check(() => assert.deepEqual(got[3].value, new KvU64(2n ** 64n - 1n)), "KvU64 from Deno");
        check(() => assert.deepEqual(got[4].value, new KvU64(50n)), "Deno's sum on A onto Node's KvU64 from B");
        check(() => assert.deepEqual(got.map((e) => e.versionstamp), [summary.wrote?.str, summary.wrote?.obj, summary.wrote?.bytes, summary.wrote?.u64, summary.wrote?.sum]),
          "Node on B sees the versionstamps Deno's writes on A got");

        // @deno/kv on A and on B: reads after writes, checks, sums
        const Q = ["node2", randomToken(8)];
        const w1 = await nodeA.set([...Q, "k"], "via A");
        const r1 = await nodeB.get([...Q, "k"]);
        check(() => assert.deepEqual(r1, { key: [...Q, "k"], value: "via A", versionstamp: w1.versionstamp }), "B reads A's write");
        const w2 = await nodeB.set([...Q, "k"], "via B");
        check(() => assert.ok(VS.test(w2.versionstamp) && w2.versionstamp > w1.versionstamp), "B's overwrite is newer");
        const stale = await nodeA.atomic().check(r1).set([...Q, "k"], "lost").commit();
        check(() => assert.deepEqual(stale, { ok: false }), "A's check with the versionstamp read before B's write fails");
        const cur = await nodeA.get([...Q, "k"]);
        check(() => assert.deepEqual([cur.value, cur.versionstamp], ["via B", w2.versionstamp]), "A reads B's write");
        const ok2 = await nodeA.atomic().check(cur).sum([...Q, "n"], 3n).commit();
        check(() => assert.equal(ok2.ok, true), "A's check with the current versionstamp");
        await nodeB.atomic().sum([...Q, "n"], 4n).max([...Q, "mx"], 9n).min([...Q, "mn"], 2n).commit();
        const sums = await nodeA.getMany([[...Q, "n"], [...Q, "mx"], [...Q, "mn"]]);
        check(() => assert.deepEqual(sums.map((e) => e.value), [new KvU64(7n), new KvU64(9n), new KvU64(2n)]), "sum/min/max via both");
        const listed = [];
        for await (const e of nodeB.list({ prefix: Q }, { reverse: true, limit: 2 })) listed.push(e.key.at(-1));
        check(() => assert.deepEqual(listed, ["n", "mx"]), "list reverse limit via B");

        // @deno/kv enqueues on A; B's queue API delivers the message
        const enq = await nodeA.atomic().enqueue({ job: space, n: 1 }).commit();
        check(() => assert.equal(enq.ok, true), "@deno/kv enqueue via atomic on A");
        const pulled = await queueCall(B, "pull", { max_messages: 1, wait: 5000, visibility_timeout: 5000, format: "v8" });
        const msg = pulled.json?.messages?.[0];
        check(() => assert.deepEqual(msg && decodeV8(Buffer.from(msg.value.value, "base64url")), { job: space, n: 1 }),
          `B's queue API delivers A's enqueue (${pulled.status} ${pulled.text.slice(0, 120)})`);
        const acked = msg ? await queueCall(A, "ack", { leases: [msg.lease] }) : { json: {} };
        check(() => assert.equal(acked.json?.results?.[0]?.status, "ok"), "A acks B's lease");

        // a watch through B woken by a write through A
        const W = [...Q, "w"];
        const w0 = await nodeA.set(W, 0);
        const reader = nodeB.watch([W]).getReader();
        const f0 = await readFrame(reader, 5000, "first frame");
        check(() => assert.deepEqual([f0[0].value, f0[0].versionstamp], [0, w0.versionstamp]), "watch first frame via B");
        const wA = await nodeA.set(W, 1);
        const f1 = await readFrame(reader, 5000, "frame after A's write");
        check(() => assert.deepEqual([f1[0].value, f1[0].versionstamp], [1, wA.versionstamp]), "B's watch sees A's write");
        await reader.cancel();
      } finally {
        nodeA.close();
        nodeB.close();
      }
      record("@deno/kv on B + Deno on A", "A+B", passed, total);
    }

    const passed = results.reduce((n, r) => n + r[2], 0);
    const total = results.reduce((n, r) => n + r[3], 0);
    const line = `conformance on two nodes: ${passed}/${total} checks`;
    report.push(table(line, ["what", "node", "checks passed", "checks", "note"],
      results.map(([w, n, p, c, d]) => [w, n, p, c, d.length > 60 ? "FAILED, see the test output" : d])));
    ctx.diagnostic(line);
    console.log(line);
    assert.deepEqual(failures, [], failures.join("\n\n"));
  }, 240_000);

  // --- 2. concurrency --------------------------------------------------------------------------

  t("check-and-set increments from both nodes: no lost update, never two winners", async (ctx) => {
    const PROCS = 6;
    const LOOPS = 4;
    const INCREMENTS = 20;
    const space = randomToken(8);
    const started = Date.now();
    const runs = await Promise.all(Array.from({ length: PROCS }, (_, id) => runDeno("cas_counter.ts", {
      kvUrl: (id % 2 ? B : A).url,
      token,
      env: { CAS_NS: space, CAS_LOOPS: String(LOOPS), CAS_INCREMENTS: String(INCREMENTS), WORKER_ID: String(id) },
      timeoutMs: 90_000,
    })));
    const elapsed = Date.now() - started;
    const summaries = runs.map((r) => expectDenoOk(r, ...servers()));
    const wins = summaries.flatMap((s) => s.wrote);
    const stamps = summaries.flatMap((s) => s.stamps);
    const expected = PROCS * LOOPS * INCREMENTS;

    const kv = await openKv(A.url, { accessToken: token, ...codec });
    let counter;
    let commits;
    try {
      [counter, commits] = await kv.getMany([["e2e", "cas", space, "counter"], ["e2e", "cas", space, "commits"]]);
    } finally {
      kv.close();
    }
    const rows = summaries.map((s) => [`deno ${s.id}`, s.id % 2 ? "B" : "A", LOOPS, s.wrote.length, s.retries]);
    rows.push(["total", "A+B", PROCS * LOOPS, wins.length, summaries.reduce((n, s) => n + s.retries, 0)]);
    const line = `CAS counter: ${wins.length} successful commits, counter ${counter.value}, ` +
      `commit count ${commits.value?.value ?? commits.value}, ${elapsed} ms`;
    report.push(table(line, ["client", "node", "loops", "successful commits", "check failures (retried)"], rows));
    ctx.diagnostic(line);

    assert.equal(wins.length, expected, "every loop made its increments");
    assert.equal(counter.value, wins.length, "the counter equals the number of successful commits");
    assert.deepEqual(commits.value, new KvU64(BigInt(wins.length)), "the unchecked commit count agrees (no lost update)");
    assert.deepEqual([...wins].sort((x, y) => x - y), Array.from({ length: expected }, (_, i) => i + 1),
      "every value 1..N was written by exactly one winner");
    assert.equal(new Set(stamps).size, stamps.length, "every commit has its own versionstamp");
    // the commit that wrote v+1 comes after the one that wrote v
    const byValue = new Map(summaries.flatMap((s) => s.wrote.map((v, i) => [v, s.stamps[i]])));
    for (let v = 2; v <= expected; v++) {
      assert.ok(byValue.get(v) > byValue.get(v - 1), `versionstamp of value ${v} > that of ${v - 1}`);
    }
    assert.equal(counter.versionstamp, byValue.get(expected), "the counter's versionstamp is the last winner's");
  });

  // --- 3. cross-node watch ---------------------------------------------------------------------

  t("a watch on B sees writes on A: latency from A's commit answer to B's frame", async (ctx) => {
    const WRITES = 200;
    const runs = [];
    for (const [label, writer, watcher] of [["write A, watch B", A, B], ["write A, watch A (baseline)", A, A]]) {
      const res = await runDeno("watch_latency.ts", {
        kvUrl: writer.url,
        token,
        env: { KV_URL_B: watcher.url, WATCH_WRITES: String(WRITES), WATCH_SPACING_MS: "5" },
        timeoutMs: 90_000,
      });
      const s = expectDenoOk(res, ...servers());
      assert.equal(s.lastValue, WRITES, "the watcher saw the final value");
      assert.ok(s.frames >= 1 && s.frames <= WRITES);
      const sorted = [...s.latenciesMs].sort((x, y) => x - y);
      runs.push({ label, s, sorted });
    }
    const rows = runs.map(({ label, s, sorted }) => {
      const fromSend = [...s.fromSendMs].sort((x, y) => x - y);
      return [
        label, s.writes, s.frames, s.writeMsAvg.toFixed(2), percentile(sorted, 50).toFixed(2), percentile(sorted, 99).toFixed(2),
        sorted[sorted.length - 1].toFixed(2), sorted.filter((x) => x < 0).length,
        percentile(fromSend, 50).toFixed(2), percentile(fromSend, 99).toFixed(2),
      ];
    });
    const cross = runs[0];
    const line = `cross-node watch: p50 ${percentile(cross.sorted, 50).toFixed(2)} ms, ` +
      `p99 ${percentile(cross.sorted, 99).toFixed(2)} ms (${cross.s.frames} frames for ${WRITES} writes)`;
    report.push(table(line,
      ["run", "writes", "frames seen", "write ms (avg)", "ack→frame p50 ms", "p99 ms", "max ms", "frames before the ack",
        "send→frame p50 ms", "p99 ms"], rows));
    ctx.diagnostic(line);
  });

  // --- 4. databases and tokens made with the CLI ----------------------------------------------

  t("db create, token create and token revoke with --postgres reach both nodes", async (ctx) => {
    const rows = [];
    const tokenOf = (res) => {
      const tok = expectCliOk(res, ...servers()).stdout.trim();
      const m = /^kvt_([0-9a-f]{16})_[0-9a-f]{64}$/.exec(tok);
      assert.ok(m, `token create printed ${JSON.stringify(tok)}`);
      return { token: tok, id: m[1] };
    };
    const name = `shop${randomToken(6).toLowerCase().replace(/[^a-z0-9]/g, "x")}`;
    const reqPath = `/databases/${name}/connect`;
    const id = expectCliOk(await A.dbCmd("create", name), ...servers()).stdout.trim();
    const listed = JSON.parse(expectCliOk(await B.dbCmd("list", "--json"), ...servers()).stdout);
    assert.ok(JSON.stringify(listed).includes(id), `db list through B's PostgreSQL lists ${name} (${id})`);
    const write = tokenOf(await A.tokenCmd("create", "--db", name, "--scope", "write"));
    const read = tokenOf(await B.tokenCmd("create", "--db", name, "--scope", "read"));

    const h2A = await H2.connect(A.url);
    const h2B = await H2.connect(B.url);
    try {
      const until = (h2, tok, status, what) => pollUntil(() => metadata(h2, tok, { reqPath }), (r) => r.status === status, {
        timeoutMs: 10_000, intervalMs: 100, what,
      });
      const mB = await until(h2B, write.token, 200, "the new write token accepted by B");
      const mA = await until(h2A, write.token, 200, "the new write token accepted by A");
      assert.equal(mA.json.databaseId, id);
      assert.equal(mB.json.databaseId, id);
      const w = await dataPath(h2B, mB.json, "atomic_write", fixture("atomic_write_set"));
      rows.push(["write token: atomic_write via B", brief(w)]);
      assert.equal(w.status, 200, describeAnswer(w));
      const mRead = await until(h2A, read.token, 200, "the new read token accepted by A");
      const rd = await dataPath(h2A, mRead.json, "snapshot_read", fixture("snapshot_read_get"));
      const rw = await dataPath(h2A, mRead.json, "atomic_write", fixture("atomic_write_set"));
      rows.push(["read token: snapshot_read via A", brief(rd)], ["read token: atomic_write via A", brief(rw)]);
      assert.equal(rd.status, 200, describeAnswer(rd));
      assert.equal(rw.status, 403, describeAnswer(rw));
      assert.match(rw.text, /read-only/);
      const other = await metadata(h2B, write.token);
      rows.push([`write token of ${name} at POST / via B`, describeAnswer(other)]);
      assert.equal(other.status, 403, describeAnswer(other));

      expectCliOk(await B.tokenCmd("revoke", write.id), ...servers());
      for (const [node, h2, m] of [["A", h2A, mA], ["B", h2B, mB]]) {
        const dp = await pollUntil(() => dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get")), (r) => r.status !== 200, {
          timeoutMs: 10_000, intervalMs: 100, what: `revocation reaching node ${node}'s data path`,
        });
        const meta = await metadata(h2, write.token, { reqPath });
        rows.push([`revoked write token via ${node}`, `metadata ${describeAnswer(meta)}; data path ${describeAnswer(dp)}`]);
        assert.equal(meta.status, 401, describeAnswer(meta));
        assert.equal(dp.status, 401, describeAnswer(dp));
      }
    } finally {
      h2A.close();
      h2B.close();
    }
    report.push(table(`Databases and tokens made with the CLI on PostgreSQL (database ${name})`, ["request", "answer"], rows));
    ctx.diagnostic(`${rows.length} token rows`);
  });

  // --- 5. the sweeper dies ---------------------------------------------------------------------

  t("when the sweeping node is killed, the other one deletes expired keys and wakes its watchers", async (ctx) => {
    const sweeper = await sweeperNode();
    const survivor = sweeper === A ? B : A;
    const kv = await openKv(survivor.url, { accessToken: token, ...codec });
    try {
      const k = ["e2e", "takeover", randomToken(8)];
      const expiresAt = Date.now() + 1000;
      const w = await kv.set(k, "expiring", { expireIn: 1000 });
      const reader = kv.watch([k]).getReader();
      const first = await readFrame(reader, 5000, "first frame");
      assert.deepEqual([first[0].value, first[0].versionstamp], ["expiring", w.versionstamp]);
      const killedAt = Date.now();
      await sweeper.kill();
      const gone = await readFrame(reader, 15_000, "frame with the expired key gone");
      const ms = Date.now() - killedAt;
      const afterExpiry = Date.now() - expiresAt;
      await reader.cancel();
      assert.deepEqual([gone[0].value, gone[0].versionstamp], [null, null]);
      await pollUntil(() => survivor.logTail(400), (text) => text.includes(sweeps), {
        timeoutMs: 5000, intervalMs: 100, what: `node ${nodeName(survivor)} logging that it sweeps now`,
      });
      const line = `sweeper ${nodeName(sweeper)} killed: node ${nodeName(survivor)} took over; its watcher saw the ` +
        `key (expireIn 1000 ms) vanish ${ms} ms after the kill, ${afterExpiry} ms after it expired`;
      report.push(line);
      ctx.diagnostic(line);
    } finally {
      kv.close();
    }
    // later tests get the node back (same PostgreSQL, same token, new port)
    const restarted = await startServer({ postgres: pg.conninfo, token, extraArgs: ["--catalog-poll-ms", "200"] });
    if (sweeper === A) A = restarted;
    else B = restarted;
  });

  // --- 6. bad input ----------------------------------------------------------------------------

  /** A queue API call over HTTP/1.1; resolves {status, text, json}. */
  async function queueCall(server, op, body) {
    const res = await fetch(`${server.url}/queue/v1/${op}`, {
      method: "POST", headers: { authorization: `Bearer ${token}` }, body: JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, text, json };
  }

  t("bad input against a PostgreSQL node answers as the SQLite server does", async (ctx) => {
    const S = await startServer({ token: randomToken() });
    const rows = [];
    try {
      const targets = [];
      for (const server of [S, B]) {
        const h2 = await H2.connect(server.url);
        const m = await metadata(h2, server.token);
        assert.equal(m.status, 200, describeAnswer(m));
        targets.push({ server, h2, meta: m.json, label: server === S ? "SQLite" : "PostgreSQL (node B)" });
      }
      const stillServing = async (what) => {
        for (const server of [S, A, B]) {
          assert.ok(server.running, `the server exited after: ${what}`);
          const h2 = await H2.connect(server.url);
          try {
            const m = await metadata(h2, server.token);
            assert.equal(m.status, 200, `metadata after "${what}": ${describeAnswer(m)}`);
            const r = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
            assert.equal(r.status, 200, `snapshot_read after "${what}": ${describeAnswer(r)}`);
          } finally {
            h2.close();
          }
        }
      };

      for (const [input, call, expectStatus] of badInputs()) {
        const answers = [];
        for (const target of targets) answers.push(await call(target));
        rows.push([input, ...answers.map(describeAnswer)]);
        for (const [i, a] of answers.entries()) {
          const where = `${input} on ${targets[i].label}`;
          assert.ok(a.status !== undefined, `${where}: no HTTP answer: ${describeAnswer(a)}`);
          assert.ok(a.status < 500, `${where}: ${describeAnswer(a)}`);
          if (expectStatus) assert.equal(a.status, expectStatus, `${where}: ${describeAnswer(a)}`);
          assert.ok(a.status >= 400, `${where}: must be refused: ${describeAnswer(a)}`);
          assert.match(String(a.headers["content-type"]), /^text\/plain/, `${where}: content-type`);
          assert.ok(a.text.trim().length > 0, `${where}: a text body`);
        }
        assert.equal(answers[1].status, answers[0].status, `${input}: same status as SQLite`);
        assert.equal(answers[1].text, answers[0].text, `${input}: same text as SQLite`);
      }
      for (const target of targets) target.h2.close();

      for (const [input, drop] of droppedConnections()) {
        const seen = [];
        for (const server of [S, B]) seen.push(await drop(server));
        await stillServing(input);
        rows.push([input, ...seen.map((s) => `${s}; then served`)]);
      }
      // after all that, no PostgreSQL session of ours is left inside a transaction
      const open = await pollUntil(
        () => pg.query("SELECT count(*) FROM pg_stat_activity WHERE datname = 'kvc' AND state LIKE 'idle in transaction%'"),
        (n) => n === "0", { timeoutMs: 10_000, intervalMs: 200, what: "no PostgreSQL session idle in a transaction" },
      );
      rows.push(["PostgreSQL sessions idle in a transaction afterwards", "-", open]);
    } catch (e) {
      throw annotate(e, S);
    } finally {
      report.push(table("Bad input: the same requests to a SQLite server and to PostgreSQL node B (the same run)",
        ["input", "SQLite server", "PostgreSQL node B"], rows));
      await S.kill();
    }
    ctx.diagnostic(`${rows.length} bad-input rows`);
  });
});

// --- helpers ---------------------------------------------------------------------------------

/** describeAnswer(), with a protobuf body as its size. */
function brief(res) {
  if (res.status === 200 && /protobuf/.test(String(res.headers?.["content-type"]))) return `200 (${res.body.length}-byte protobuf)`;
  return describeAnswer(res);
}

// Protobuf of the KV Connect data path: raw_client.mjs.
/** A key of string parts (no NULs) in the tuple codec. */
const key = (...parts) => Buffer.concat(parts.map((s) => Buffer.concat([Buffer.from([0x02]), Buffer.from(s), Buffer.from([0])])));
const watchKeys = (n) => Buffer.concat(Array.from({ length: n }, (_, i) => lenField(1, lenField(1, key("bad", `w${i}`)))));

/** [input, call(target) -> answer, expected status or undefined] */
function badInputs() {
  const dp = (method, body, opts) => (target) => dataPath(target.h2, target.meta, method, body, opts);
  const meta = (token, opts) => (target) => metadata(target.h2, token === "own" ? target.server.token : token, opts);
  const garbage = crypto.randomBytes(64);
  garbage[0] = 0xff; // field 31, wire type 7: never valid
  const bigKey = key("bad", "k".repeat(2100));
  return [
    ["metadata: wrong access token", meta(randomToken(24)), 401],
    ["metadata: `Authorization: Basic` instead of Bearer", meta(undefined, { headers: { authorization: "Basic a2V5OnZhbHVl" } }), 401],
    ["metadata: supportedVersions [7]", meta("own", { body: JSON.stringify({ supportedVersions: [7] }) }), 400],
    ["metadata: a body that is not JSON", meta("own", { body: '{"supportedVersions":[1,2,3' }), 400],
    ["data path: a forged data-path token", dp("snapshot_read", fixture("snapshot_read_get"), { token: "x".repeat(40) }), 401],
    ["snapshot_read: 64 bytes of garbage", dp("snapshot_read", garbage), 400],
    ["snapshot_read: a field longer than the body", dp("snapshot_read", Buffer.from([0x0a, 0x64, 0x0a, 0x01])), 400],
    ["atomic_write: 64 bytes of garbage", dp("atomic_write", garbage), 400],
    ["watch: 64 bytes of garbage", dp("watch", garbage), 400],
    ["atomic_write: a 5 MiB body (> --max-body-bytes 4 MiB)", dp("atomic_write", Buffer.concat([mutation(key("bad", "big"), { data: Buffer.alloc(5 << 20) })])), 413],
    ["snapshot_read: 11 ranges", dp("snapshot_read", Buffer.concat(Array.from({ length: 11 }, () => range(key("a"), key("b"))))), 400],
    ["snapshot_read: limit 0", dp("snapshot_read", range(key("a"), key("b"), 0)), 400],
    ["snapshot_read: limit -1", dp("snapshot_read", range(key("a"), key("b"), -1)), 400],
    ["snapshot_read: a 2104-byte start key", dp("snapshot_read", range(bigKey, key("z"))), 400],
    ["atomic_write: set of a 2104-byte key", dp("atomic_write", mutation(bigKey)), 400],
    ["atomic_write: set of an empty key", dp("atomic_write", mutation(Buffer.alloc(0))), 400],
    ["atomic_write: 1001 mutations", dp("atomic_write", Buffer.concat(Array.from({ length: 1001 }, (_, i) => mutation(key("bad", `m${i}`))))), 400],
    ["atomic_write: 101 checks", dp("atomic_write", Buffer.concat([
      ...Array.from({ length: 101 }, (_, i) => check(key("bad", `c${i}`), Buffer.alloc(0))), mutation(key("bad", "c")),
    ])), 400],
    ["atomic_write: a check with a 5-byte versionstamp", dp("atomic_write", Buffer.concat([check(key("bad", "v"), Buffer.alloc(5)), mutation(key("bad", "v"))])), 400],
    ["atomic_write: a 65537-byte value", dp("atomic_write", mutation(key("bad", "val"), { data: Buffer.alloc(65537) })), 400],
    ["atomic_write: mutation type 99", dp("atomic_write", mutation(key("bad", "t"), { type: 99 })), 400],
    ["atomic_write: set without a value", dp("atomic_write", mutation(key("bad", "nv"), { value: false })), 400],
    ["atomic_write: expire_at_ms -5", dp("atomic_write", mutation(key("bad", "e"), { expireAt: -5 })), 400],
    ["atomic_write: sum with a bytes operand", dp("atomic_write", mutation(key("bad", "s"), { type: M_SUM })), 400],
    ["atomic_write: sum with a 3-byte LE64 operand", dp("atomic_write", mutation(key("bad", "s3"), { type: M_SUM, data: Buffer.alloc(3), encoding: VE_LE64 })), 400],
    ["watch: 11 keys", dp("watch", watchKeys(11)), 400],
  ];
}

/** [input, drop(server) -> observation]: connections that go away mid-request. */
function droppedConnections() {
  return [
    ["HTTP/1.1 atomic_write cut off mid-body (Content-Length 100000, 1000 bytes sent)", async (server) => {
      const h2 = await H2.connect(server.url);
      const m = await metadata(h2, server.token);
      h2.close();
      const ep = new URL(m.json.endpoints[0].url, `${server.url}/`);
      return await new Promise((resolve) => {
        const req = http.request(`${ep.href.replace(/\/$/, "")}/atomic_write`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${m.json.token}`, "x-denokv-version": String(m.json.version),
            "x-denokv-database-id": m.json.databaseId, "content-type": "application/x-protobuf", "content-length": "100000",
          },
        });
        req.on("error", () => resolve("connection dropped by the client"));
        req.on("response", (res) => resolve(`answered ${res.statusCode} before the body was complete`));
        req.write(Buffer.alloc(1000, 1), () => setTimeout(() => {
          req.destroy();
          resolve("connection dropped by the client");
        }, 100));
      });
    }],
    ["HTTP/2 session destroyed with 50 atomic_writes in flight", async (server) => {
      const h2 = await H2.connect(server.url);
      const m = await metadata(h2, server.token);
      const body = fixture("atomic_write_set");
      const pending = Array.from({ length: 50 }, () => dataPath(h2, m.json, "atomic_write", body, { timeoutMs: 5000 }));
      await sleep(5);
      h2.session.destroy();
      const answers = await Promise.all(pending);
      const counts = {};
      for (const a of answers) counts[a.status ?? "no answer"] = (counts[a.status ?? "no answer"] ?? 0) + 1;
      assert.ok(!answers.some((a) => a.status >= 500), `no 5xx: ${JSON.stringify(counts)}`);
      return Object.entries(counts).map(([k, v]) => `${v}× ${k}`).join(", ");
    }],
    ["HTTP/2 session destroyed while a watch stream is open", async (server) => {
      const h2 = await H2.connect(server.url);
      const m = await metadata(h2, server.token);
      const w = dataPath(h2, m.json, "watch", watchKeys(2), { timeoutMs: 3000 });
      await sleep(300);
      h2.session.destroy();
      const a = await w;
      return a.status === undefined ? `watch ended: ${a.error}` : `watch answered ${a.status}`;
    }],
    ["HTTP/2 stream reset mid-body (RST_STREAM CANCEL after 16 KB of 64 KB)", async (server) => {
      const h2 = await H2.connect(server.url);
      try {
        const m = await metadata(h2, server.token);
        const ep = new URL(m.json.endpoints[0].url, `${server.url}/`);
        const stream = h2.session.request({
          ":method": "POST", ":path": `${ep.pathname.replace(/\/$/, "")}/atomic_write`,
          authorization: `Bearer ${m.json.token}`, "x-denokv-version": String(m.json.version),
          "x-denokv-database-id": m.json.databaseId, "content-type": "application/x-protobuf", "content-length": "65536",
        });
        stream.on("error", () => {});
        stream.write(Buffer.alloc(16384, 1));
        await sleep(100);
        stream.close(0x8);
        await sleep(100);
        const after = await metadata(h2, server.token);
        return `same connection answers ${after.status} afterwards`;
      } finally {
        h2.close();
      }
    }],
  ];
}
