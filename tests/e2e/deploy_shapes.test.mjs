// Apps written as for Deno Deploy (no URL in code: Deno.openKv() and Deno.openKv("name")) open
// kvconnect through DENO_KV_DEFAULT_PATH and DENO_KV_PATH_PREFIX, with the URL shapes Deno builds
// from them: prefix + name, nothing appended, so /databases/NAME and /v2/databases/NAME, besides
// our /databases/NAME/connect and Deploy's /v2/databases/ID/connect. @deno/kv opens the same
// shapes. Opening never fails for load: Deno 2.9.6 gives up on openKv at the first non-200 answer
// to its one metadata POST, so the exchange is not charged to the token's data budget; a token
// whose bucket is empty opens at once, and its first data call is the one answered 503 with
// Retry-After (Deno retries it). While draining after SIGTERM the exchange is still answered.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { openKv as nodeOpenKv } from "@deno/kv";
import {
  annotate, describeRun, expectCliOk, expectDenoFailure, expectDenoOk, LOCAL_BACKEND, makeCerts, makeTempDir,
  removeTempDirs, runDeno, sleep, spawnDeno, startServer, withTimeout,
} from "./harness.mjs";
import { dataPath, describeAnswer, fixture, metadata, pollUntil, withH2 } from "./raw_client.mjs";
import { nodeV8Codec } from "./node_v8.mjs";

after(removeTempDirs);

/** Sum of the samples of `name` in Prometheus text whose labels include every pair of `labels`. */
function metricSum(text, name, labels = {}) {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    if (Object.entries(labels).every(([k, v]) => rest.includes(`${k}="${v}"`))) {
      sum += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return sum;
}

async function scrape(server) {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
  assert.equal(res.status, 200, "the bootstrap token reads /metrics");
  return await res.text();
}

/** The deploy_app.ts run: `env` holds DENO_KV_* (and KV_APP_*); the token is `token`. */
async function app(server, token, env, { caFile, timeoutMs = 60_000 } = {}) {
  return await runDeno("deploy_app.ts", { kvUrl: server.url, token, caFile, env, timeoutMs });
}

describe("apps written as for Deno Deploy", { skip: LOCAL_BACKEND, timeout: 300_000 }, () => {
  let server;
  let certs;
  let salesId;
  let salesToken;

  before(async () => {
    certs = await makeCerts(await makeTempDir("kvconnect-e2e-certs-"));
    // Plain on --addr, TLS on --tls-addr: the shapes are checked over h2c and over TLS.
    server = await startServer({ tlsCert: certs.cert, tlsKey: certs.key, tlsPort: true });
    expectCliOk(await server.dbCmd("create", "sales"), server);
    const listed = JSON.parse(expectCliOk(await server.dbCmd("list", "--json"), server).stdout);
    salesId = listed.find((d) => d.name === "sales")?.id;
    assert.ok(salesId, `db list --json names sales: ${JSON.stringify(listed)}`);
    salesToken = expectCliOk(await server.tokenCmd("create", "--db", "sales", "--scope", "write"), server)
      .stdout.trim();
  });
  after(async () => {
    if (server) await server.kill();
  });

  function t(name, fn, opts = {}) {
    test(name, { timeout: 120_000, ...opts }, async () => {
      try {
        await fn();
      } catch (e) {
        throw annotate(e, server);
      }
    });
  }

  t("DENO_KV_PATH_PREFIX .../databases/ and .../v2/databases/ (h2c and TLS) and DENO_KV_DEFAULT_PATH reach one database", async () => {
    const value = `v-${Date.now()}`;
    const tls = { caFile: certs.ca };
    const runs = [
      // [what, env, options]; the first one writes, every other one reads what it wrote.
      ["openKv(\"sales\"), prefix http://host/databases/",
        { DENO_KV_PATH_PREFIX: `${server.url}/databases/`, KV_APP_DB: "sales", KV_APP_SET: value }, {}],
      ["openKv(\"sales\"), prefix http://host/v2/databases/",
        { DENO_KV_PATH_PREFIX: `${server.url}/v2/databases/`, KV_APP_DB: "sales" }, {}],
      ["openKv(\"sales\"), prefix https://host/databases/",
        { DENO_KV_PATH_PREFIX: `${server.tlsUrl}/databases/`, KV_APP_DB: "sales" }, tls],
      ["openKv(\"sales\"), prefix https://host/v2/databases/",
        { DENO_KV_PATH_PREFIX: `${server.tlsUrl}/v2/databases/`, KV_APP_DB: "sales" }, tls],
      ["openKv(), DENO_KV_DEFAULT_PATH=sales, prefix http://host/databases/",
        { DENO_KV_PATH_PREFIX: `${server.url}/databases/`, DENO_KV_DEFAULT_PATH: "sales" }, {}],
      ["openKv(), DENO_KV_DEFAULT_PATH=https://host/databases/sales",
        { DENO_KV_DEFAULT_PATH: `${server.tlsUrl}/databases/sales` }, tls],
      ["openKv(), DENO_KV_DEFAULT_PATH=http://host/v2/databases/ID/connect (Deploy's URL)",
        { DENO_KV_DEFAULT_PATH: `${server.url}/v2/databases/${salesId}/connect` }, {}],
    ];
    for (const [what, env, opts] of runs) {
      const res = await app(server, salesToken, env, opts);
      const summary = expectDenoOk(res, server);
      assert.equal(summary.value, value, `${what}: reads the value written through the first shape`);
    }
    // openKv() with DENO_KV_DEFAULT_PATH=http://host is the database "default", not "sales".
    const other = expectDenoOk(await app(server, server.token, { DENO_KV_DEFAULT_PATH: server.url }), server);
    assert.equal(other.value, null, "database default does not hold the value of database sales");
  });

  t("Deno POSTs prefix + name with nothing appended, and kvconnect reads that as a metadata exchange", async () => {
    for (const base of [server.url, server.tlsUrl]) {
      for (const shape of ["/databases/", "/v2/databases/"]) {
        const res = await app(server, server.token, { DENO_KV_PATH_PREFIX: `${base}${shape}`, KV_APP_DB: "nope" },
          { caFile: certs.ca });
        expectDenoFailure(res, server);
        // Deno's own error names the URL it POSTed to; the answer is the metadata exchange's 404.
        assert.ok(res.stderr.includes(`'${base}${shape}nope'`), `Deno POSTed ${base}${shape}nope:\n${describeRun(res)}`);
        assert.match(res.stderr, /404/, describeRun(res));
        assert.ok(res.stderr.includes("Database 'nope' not found."), describeRun(res));
      }
    }
  });

  t("@deno/kv opens /databases/NAME and /v2/databases/NAME/connect (and by id)", async () => {
    const value = `node-${Date.now()}`;
    const urls = [
      `${server.url}/databases/sales`,
      `${server.url}/v2/databases/sales/connect`,
      `${server.url}/v2/databases/${salesId}/connect`,
      `${server.url}/v2/databases/sales`,
    ];
    for (const [i, url] of urls.entries()) {
      const kv = await nodeOpenKv(url, { accessToken: salesToken, maxRetries: 0, ...nodeV8Codec });
      try {
        if (i === 0) assert.ok((await kv.set(["node", "shared"], value)).ok, `${url}: set`);
        assert.equal((await kv.get(["node", "shared"])).value, value, `${url}: reads the value`);
      } finally {
        kv.close();
      }
    }
  });

  t("openKv succeeds at once with a throttled token; its data call is the one answered 503, then succeeds", async () => {
    // A token of 1 request per second (bucket of 1). Raw data-path reads keep its bucket empty
    // from before Deno starts until openKv has resolved, so the exchange meets an empty bucket.
    const token = expectCliOk(await server.tokenCmd("create", "--db", "sales", "--scope", "write",
      "--rate-limit", "1"), server).stdout.trim();
    await withH2(server.url, {}, async (h2) => {
      const m = await pollUntil(() => metadata(h2, token, { reqPath: "/databases/sales/connect" }), (r) => r.status === 200, {
        timeoutMs: 10_000, intervalMs: 150, what: "the new token is known",
      });
      const body = fixture("snapshot_read_get");
      const drain = async () => (await dataPath(h2, m.json, "snapshot_read", body)).status;
      let throttled;
      for (let i = 0; i < 5 && !throttled; i++) {
        const r = await dataPath(h2, m.json, "snapshot_read", body);
        if (r.status === 503) throttled = r;
      }
      assert.ok(throttled, "the bucket is empty");
      assert.match(throttled.text, /Rate limit exceeded/);
      assert.match(String(throttled.headers["retry-after"]), /^[1-9][0-9]*$/, "Retry-After in whole seconds");
      // An empty data bucket does not refuse the exchange, on any shape.
      for (const reqPath of ["/databases/sales/connect", "/databases/sales", "/v2/databases/sales/connect"]) {
        const again = await metadata(h2, token, { reqPath });
        assert.equal(again.status, 200, `${reqPath} with an empty bucket: ${describeAnswer(again)}`);
      }

      const before = await scrape(server);
      let opened = false;
      const run = spawnDeno("deploy_app.ts", {
        kvUrl: server.url, token, timeoutMs: 90_000,
        env: { DENO_KV_DEFAULT_PATH: `${server.url}/databases/sales/connect`, KV_APP_SET: "throttled", KV_GETS: "3" },
        onStdoutLine: (line) => { if (line === "opened") opened = true; },
      });
      let exited = false;
      run.done.then(() => { exited = true; });
      // Keep the bucket empty while Deno starts and opens, and a little longer, so its first
      // write (the app writes first; the drain only reads) meets an empty bucket too.
      while (!opened && !exited) {
        await drain();
        await sleep(10);
      }
      for (const until = Date.now() + 300; Date.now() < until && !exited;) {
        await drain();
        await sleep(10);
      }
      const res = await run.done;
      const summary = expectDenoOk(res, server);
      assert.equal(summary.value, "throttled");
      const after = await scrape(server);
      const writes503 = metricSum(after, "kvconnect_http_requests_total", { route: "atomic_write", code: "5xx" }) -
        metricSum(before, "kvconnect_http_requests_total", { route: "atomic_write", code: "5xx" });
      const metadata503 = metricSum(after, "kvconnect_http_requests_total", { route: "connect", code: "5xx" }) -
        metricSum(before, "kvconnect_http_requests_total", { route: "connect", code: "5xx" });
      assert.ok(writes503 >= 1, `Deno's first write met the empty bucket (503) and was retried: ${writes503}`);
      assert.equal(metadata503, 0, "no metadata exchange was answered 5xx");
      assert.equal(metricSum(after, "kvconnect_rate_limited_total", { reason: "metadata_rate" }), 0);
    });
  });
});

describe("draining after SIGTERM", { skip: LOCAL_BACKEND, timeout: 120_000 }, () => {
  test("the metadata exchange is answered on open connections (and new ones) until the listeners close", async () => {
    const server = await startServer({ extraArgs: ["--shutdown-drain-ms", "4000"] });
    try {
      await withH2(server.url, {}, async (h2) => {
        const first = await metadata(h2, server.token, { reqPath: "/databases/default" });
        assert.equal(first.status, 200, describeAnswer(first));
        server.proc.kill("SIGTERM");
        await pollUntil(() => fetch(`${server.url}/readyz`).then((r) => r.status), (s) => s === 503, {
          timeoutMs: 3_000, intervalMs: 50, what: "/readyz turns 503 (draining)",
        });
        for (const reqPath of ["/", "/databases/default/connect", "/databases/default", "/v2/databases/default/connect"]) {
          const m = await metadata(h2, server.token, { reqPath });
          assert.equal(m.status, 200, `${reqPath} while draining, open connection: ${describeAnswer(m)}`);
          const read = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
          assert.equal(read.status, 200, `data path while draining: ${describeAnswer(read)}`);
        }
        await withH2(server.url, {}, async (fresh) => {
          const m = await metadata(fresh, server.token, { reqPath: "/v2/databases/default" });
          assert.equal(m.status, 200, `while draining, new connection: ${describeAnswer(m)}`);
        });
      });
      const exit = await withTimeout(server.exited, 20_000, null);
      assert.equal(exit?.code, 0, "a drained shutdown");
    } catch (e) {
      throw annotate(e, server);
    } finally {
      await server.kill();
    }
  });
});
