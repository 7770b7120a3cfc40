// The read caches of a server's databases share one budget (`serve --read-cache-total`; the
// default is 25% of the server's memory), driven by the real Deno 2.9.6 CLI. One database alone
// may fill the whole budget; when a second one fills up too, each ends with a share and the
// caches together stay within the budget (the first gives its excess back); every key reads
// back its value from both, evicted or not; after a restart the prewarm fills both within the
// budget. The figures come from /metrics (kvconnect_read_cache_bytes and _limit_bytes). A
// budget the server cannot take is refused at start with a text naming the accepted forms.
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import {
  annotatedTest, expectCliOk, expectDenoOk, LOCAL_BACKEND, makeTempDir, metricValue, removeTempDirs, runDeno,
  runKvconnect, startServer, waitFor,
} from "./harness.mjs";

const BUDGET = 1_000_000;
const KEYS = 5000; // about 460 charged bytes each: 2.3 MB per database, more than the budget

describe("read caches sharing one budget", { skip: LOCAL_BACKEND, timeout: 300_000 }, () => {
  let server;

  before(async () => {
    server = await startServer({
      extraArgs: ["--read-cache-total", String(BUDGET), "--catalog-poll-ms", "200"],
    });
    expectCliOk(await server.dbCmd("create", "second"), server);
  });
  after(async () => {
    await server?.kill();
    await removeTempDirs();
  });

  const urlOf = (db) => (db === "default" ? server.url : `${server.url}/databases/${db}/connect`);
  async function deno(mode, db) {
    const res = await runDeno("cache_fill.ts", {
      kvUrl: urlOf(db), token: server.token,
      env: { KV_MODE: mode, KV_LABEL: db, KV_KEYS: String(KEYS) },
    });
    expectDenoOk(res, server);
  }
  /** One scrape: each database's cache bytes and limit, and the server-wide budget figures. */
  async function scrape() {
    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const value = (name, db) => {
      const labels = db === undefined ? "" : `\\{database="${db}"\\}`;
      const m = new RegExp(`^${name}${labels} (\\S+)$`, "m").exec(text);
      assert.ok(m, `no ${name} ${db ?? ""} in /metrics`);
      return Number(m[1]);
    };
    const db = (name) => ({
      bytes: value("kvconnect_read_cache_bytes", name),
      limit: value("kvconnect_read_cache_limit_bytes", name),
    });
    return {
      a: db("default"),
      b: db("second"),
      total: value("kvconnect_read_cache_total_bytes"),
      used: value("kvconnect_read_cache_total_used_bytes"),
    };
  }
  async function cache(db) {
    return (await scrape())[db === "default" ? "a" : "b"];
  }

  const t = annotatedTest(() => server);

  t("the start names the budget", async () => {
    assert.match(server.logTail(200), /read cache: 976\.6 KiB shared by the databases \(--read-cache-total 1000000;/);
  });

  t("one database alone fills the whole budget", async () => {
    await deno("write", "default");
    const c = await cache("default");
    assert.equal(c.limit, BUDGET, "the other database holds nothing: the whole budget");
    assert.ok(c.bytes <= BUDGET, `charged ${c.bytes} of ${BUDGET}`);
    assert.ok(c.bytes > BUDGET * 0.85, `charged ${c.bytes}: written keys fill the cache`);
  });

  t("a second database gets a share; together they stay within the budget", async () => {
    await deno("write", "second");
    const both = await waitFor(async () => {
      const a = await cache("default");
      const b = await cache("second");
      // The first gives its excess back at the directory's next poll (200 ms here).
      return a.bytes <= a.limit && a.bytes + b.bytes <= BUDGET * 1.02 ? { a, b } : null;
    }, { timeoutMs: 15_000, intervalMs: 100, what: "the first cache to give back its excess" });
    const m = await scrape();
    assert.equal(m.total, BUDGET, "kvconnect_read_cache_total_bytes");
    assert.equal(m.used, m.a.bytes + m.b.bytes, "kvconnect_read_cache_total_used_bytes is the sum");
    assert.ok(both.b.limit >= BUDGET / 2, `second's limit ${both.b.limit}`);
    assert.ok(both.b.bytes > BUDGET * 0.4, `second holds ${both.b.bytes}`);
    assert.ok(both.a.bytes > BUDGET * 0.4, `default keeps ${both.a.bytes}`);
  });

  t("every key of both databases reads back its value", async () => {
    await deno("verify", "default");
    await deno("verify", "second");
    const a = await cache("default");
    const b = await cache("second");
    assert.ok(a.bytes + b.bytes <= BUDGET * 1.02, `${a.bytes} + ${b.bytes}`);
  });

  t("after a restart the prewarm fills both within the budget", async () => {
    server = await server.restart();
    const both = await waitFor(async () => {
      for (const db of ["default", "second"]) {
        if (await metricValue(server, "kvconnect_read_cache_prewarm_running", { database: db }) !== 0) return null;
      }
      // The prewarm that ends first may fill the whole budget before the other takes its
      // share: the excess is given back at the directory's next poll.
      const a = await cache("default");
      const b = await cache("second");
      return a.bytes + b.bytes <= BUDGET * 1.02 ? { a, b } : null;
    }, { timeoutMs: 30_000, intervalMs: 100, what: "both prewarms to end within the budget" });
    const total = both.a.bytes + both.b.bytes;
    assert.ok(total <= BUDGET * 1.02, `${both.a.bytes} + ${both.b.bytes}`);
    assert.ok(total > BUDGET * 0.7, `the prewarms filled ${total} of ${BUDGET}`);
    await deno("verify", "second");
  });

  t("a budget the server cannot take is refused at start", async () => {
    const dir = await makeTempDir();
    for (const bad of ["150%", "0%", "lots", "-1", "12.5.5%"]) {
      const res = await runKvconnect(["serve", "--data-dir", dir, "--addr", "127.0.0.1:0",
        `--read-cache-total=${bad}`]);
      assert.notEqual(res.code, 0, `--read-cache-total ${bad} started a server`);
      assert.match(res.stderr, /expected a number of bytes \(e\.g\. 4294967296\) or a percentage of the server's memory from 1% to 100%/, bad);
    }
  });
});
