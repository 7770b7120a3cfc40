// /metrics, /healthz and /readyz on the built binary while the real clients use it: the
// Prometheus text passes `promtool check metrics` (Debian's prometheus package), the counters
// move under Deno's HTTP/2 traffic and @deno/kv's HTTP/1.1 traffic (requests by route and
// protocol, commit groups, the database's last version, watch streams), the separate
// --metrics-addr listener answers the same, and /readyz turns 503 as soon as SIGTERM arrives
// (--shutdown-drain-ms keeps the listener open meanwhile) while /healthz stays 200. /metrics
// needs the bootstrap token on both listeners (no --metrics-public here).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import v8 from "node:v8";
import { openKv } from "@deno/kv";
import {
  annotate, expectDenoOk, LOCAL_BACKEND, removeTempDirs, runDeno, sleep, startServer, waitFor,
} from "./harness.mjs";

// Parses the text format into { "name{labels}": value }.
function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

// Sum of the samples of `name` whose labels include every pair of `labels`.
function sample(metrics, name, labels = {}) {
  let sum = 0;
  for (const [key, v] of metrics) {
    const brace = key.indexOf("{");
    const n = brace < 0 ? key : key.slice(0, brace);
    if (n !== name) continue;
    const ls = brace < 0 ? "" : key.slice(brace);
    if (Object.entries(labels).every(([k, val]) => ls.includes(`${k}="${val}"`))) sum += v;
  }
  return sum;
}

function promtool(text) {
  const res = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
  if (res.error) {
    throw new Error(`promtool is needed (Debian package prometheus; deploy/dev.sh deps installs it): ${res.error.message}`);
  }
  return res;
}

describe("metrics and health", { skip: LOCAL_BACKEND }, () => {
  let server;

  before(async () => {
    // metrics: --metrics-addr 127.0.0.1:0; the port it got is server.metricsPort
    server = await startServer({
      metrics: true,
      extraArgs: ["--shutdown-drain-ms", "3000",
        "--metrics-stats-interval-ms", "200"],
    });
  });
  after(async () => {
    await server?.kill();
    await removeTempDirs();
  });

  async function scrape(base = server.url) {
    const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /^text\/plain; version=0\.0\.4/);
    return await res.text();
  }

  test("the exposition passes promtool and the counters move under Deno and @deno/kv", async () => {
    const before = await scrape();
    const lint = promtool(before);
    assert.equal(lint.status, 0, `promtool: ${lint.stdout}${lint.stderr}`);
    const m0 = parseMetrics(before);

    // Deno: HTTP/2 (h2c prior knowledge); sets, gets, atomics and watches.
    for (const script of ["basic.ts", "watch.ts"]) {
      const res = await runDeno(script, { kvUrl: server.url, token: server.token });
      expectDenoOk(res, server);
    }
    // @deno/kv: HTTP/1.1.
    const kv = await openKv(server.url, {
      accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
    });
    try {
      await kv.set(["metrics", "node"], "hello");
      assert.equal((await kv.get(["metrics", "node"])).value, "hello");
    } finally {
      kv.close();
    }
    // Everything below shows once the requests ended and the next stats refresh ran
    // (--metrics-stats-interval-ms 200): scrape until it does.
    const check = (m1) => {
      const moved = (name, labels) => sample(m1, name, labels) - sample(m0, name, labels);
      assert.ok(moved("kvconnect_http_requests_total", { route: "atomic_write", protocol: "h2", code: "2xx" }) > 0, "Deno's writes over h2");
      assert.ok(moved("kvconnect_http_requests_total", { route: "snapshot_read", protocol: "h2", code: "2xx" }) > 0, "Deno's reads over h2");
      assert.ok(moved("kvconnect_http_requests_total", { route: "watch", protocol: "h2", code: "2xx" }) > 0, "Deno's watches over h2");
      assert.ok(moved("kvconnect_http_requests_total", { route: "atomic_write", protocol: "h1", code: "2xx" }) > 0, "@deno/kv's writes over HTTP/1.1");
      assert.ok(moved("kvconnect_http_requests_total", { route: "metadata", code: "2xx" }) > 0, "metadata exchanges");
      assert.ok(moved("kvconnect_http_request_duration_seconds_count", { route: "snapshot_read" }) > 0, "read latency observed");
      assert.ok(moved("kvconnect_commit_groups_total", { origin: "write" }) > 0, "group commits");
      assert.ok(moved("kvconnect_committed_writes_total", { origin: "write" }) > 0, "committed writes");
      assert.ok(moved("kvconnect_commit_sync_seconds_count", { origin: "write" }) > 0, "fsync latency observed");
      assert.ok(moved("kvconnect_connections_total", {}) > 0, "connections counted");
      assert.ok(moved("kvconnect_http2_streams_total", {}) > 0, "HTTP/2 streams counted");
      assert.ok(sample(m1, "kvconnect_database_last_version", { database: "default" }) > sample(m0, "kvconnect_database_last_version", { database: "default" }), "last version moved");
      assert.ok(sample(m1, "kvconnect_database_keys", { database: "default" }) > 0, "keys counted");
      assert.ok(sample(m1, "kvconnect_database_bytes", { database: "default" }) > 0, "file size reported");
      assert.ok(sample(m1, "kvconnect_database_wal_bytes", { database: "default" }) > 0, "WAL size reported");
      assert.equal(sample(m1, "kvconnect_database_writable", { database: "default" }), 1);
    };
    let after;
    try {
      after = await waitFor(async () => {
        const text = await scrape();
        check(parseMetrics(text));
        return text;
      }, { timeoutMs: 15_000, intervalMs: 100, what: "the counters and database stats to move" });
      const lint2 = promtool(after);
      assert.equal(lint2.status, 0, `promtool: ${lint2.stdout}${lint2.stderr}`);
      // No secrets in the exposition.
      assert.ok(!after.includes(server.token), "the access token never appears");
    } catch (e) {
      throw annotate(e, server);
    }
  });

  test("the separate metrics listener serves metrics and health", async () => {
    const text = await scrape(server.metricsUrl);
    assert.ok(text.includes("kvconnect_http_requests_total"));
    assert.equal((await fetch(`${server.metricsUrl}/healthz`)).status, 200);
    assert.equal((await fetch(`${server.metricsUrl}/metrics`)).status, 401, "no token, no metrics");
    // KV Connect is not served there.
    const res = await fetch(`${server.metricsUrl}/`, { method: "POST", body: "{}" });
    assert.equal(res.status, 404);
  });

  test("bad methods and paths get 4xx texts", async () => {
    let res = await fetch(`${server.url}/metrics`, { method: "POST", body: "x" });
    assert.equal(res.status, 405);
    assert.match(await res.text(), /Method not allowed/);
    res = await fetch(`${server.url}/readyz/extra`);
    assert.equal(res.status, 404);
    assert.equal(await res.text(), "Resource not found.");
  });

  test("/readyz turns 503 at SIGTERM while /healthz stays 200, then the server exits", async () => {
    let res = await fetch(`${server.url}/readyz`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "ready\n");
    server.proc.kill("SIGTERM");
    let sawNotReady = false;
    const deadline = Date.now() + 2500;  // within --shutdown-drain-ms 3000
    while (Date.now() < deadline) {
      res = await fetch(`${server.url}/readyz`);
      const text = await res.text();
      if (res.status === 503) {
        assert.match(text, /shutting down/);
        sawNotReady = true;
        break;
      }
      await sleep(50);
    }
    assert.ok(sawNotReady, "readiness must flip during the drain");
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200, "still alive while draining");
    const { code } = await server.exited;
    assert.equal(code, 0);
  });
});
