// `kvconnect bench` against a real `kvconnect serve` (both the built binary, KVCONNECT_BIN):
// every workload over HTTP/2 (h2c) and HTTP/1.1 with --json, then TLS (ALPN h2 and
// http/1.1, verified with --ca, refused without it, accepted with --insecure), a named
// database, a rejected token and bad usage.
//
// Each run is short (--duration 0.5 --warmup 0.2). The checks are on what the run reports
// and on its exit code, never on timings: ops > 0, no errors, the sum check ok, every
// watcher open. Registered in tests/CMakeLists.txt as the ctest `bench_cli` (label e2e).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  annotate, makeCerts, makeTempDir, removeTempDirs, runKvconnect, startServer,
} from "../e2e/harness.mjs";

const WORKLOADS = ["get", "set", "cas", "list", "sum", "mixed", "watch"];
const SHORT = ["--duration", "0.5", "--warmup", "0.2", "--json"];
// Small enough to keep each run short (preload of 1000 keys, 40 watchers), big enough to
// exercise concurrency on both protocols.
const SIZES = ["--connections", "2", "--streams", "8", "--keys", "1000", "--watchers", "40",
  "--watch-keys", "4", "--watch-interval-ms", "5"];
const RUN_TIMEOUT_MS = 90_000;

async function bench(server, url, extra) {
  const args = ["bench", "--url", url, "--token", server.token, ...extra];
  return await runKvconnect(args, { timeoutMs: RUN_TIMEOUT_MS });
}

function describeRun(res) {
  return `\`${res.command}\`: code=${res.code} signal=${res.signal}` +
    `${res.timedOut ? " (TIMED OUT)" : ""}\n--- stdout ---\n${res.stdout.slice(-3000)}\n` +
    `--- stderr ---\n${res.stderr.slice(-3000)}`;
}

/** Parses the --json report of a run that must have succeeded, and checks the common part. */
function expectGoodReport(res, { workload, protocol }) {
  assert.equal(res.code, 0, describeRun(res));
  const lines = res.stdout.trim().split("\n");
  assert.equal(lines.length, 1, `--json prints one line\n${describeRun(res)}`);
  const r = JSON.parse(lines[0]);
  assert.equal(r.workload, workload);
  assert.equal(r.protocol, protocol);
  assert.equal(r.protocol_version, 3);
  assert.equal(r.ok, true, describeRun(res));
  assert.equal(r.errors.total, 0, describeRun(res));
  assert.deepEqual(r.errors.by_kind, {});
  assert.ok(r.ops > 0, `no operations counted\n${describeRun(res)}`);
  assert.ok(r.ops_per_s > 0);
  assert.ok(r.seconds > 0);
  assert.equal(r.latency_ms.count > 0, true);
  assert.ok(r.latency_ms.p50 <= r.latency_ms.p99 && r.latency_ms.p99 <= r.latency_ms.max);
  return r;
}

function checkWorkload(r, workload, res) {
  switch (workload) {
    case "get":
    case "list":
    case "mixed":
      assert.equal(r.misses, 0, `preloaded keys were missing\n${describeRun(res)}`);
      break;
    case "cas":
      // Successes are ops; conflicts are reported apart and are not errors.
      assert.ok(Number.isInteger(r.conflicts) && r.conflicts >= 0);
      assert.equal(r.latency_ms.count, r.ops + r.conflicts, describeRun(res));
      break;
    case "sum":
      assert.ok(r.sum_check, describeRun(res));
      assert.equal(r.sum_check.ok, true, describeRun(res));
      assert.equal(r.sum_check.unknown, 0);
      assert.ok(r.sum_check.successes >= r.ops);
      assert.equal(r.sum_check.final, r.sum_check.start + r.sum_check.successes, describeRun(res));
      break;
    case "watch":
      assert.ok(r.watch, describeRun(res));
      assert.equal(r.watch.watchers, 40);
      assert.equal(r.watch.watchers_open, 40, describeRun(res));
      assert.ok(r.watch.frames > 0 && r.watch.frames === r.ops);
      assert.ok(r.watch.writes > 0);
      assert.equal(r.watch.change_to_frame_ms.count, r.watch.frames);
      break;
    default:
      break;
  }
  if (workload !== "sum") assert.equal(r.sum_check, null);
  if (workload !== "watch") assert.equal(r.watch, null);
}

describe("kvconnect bench", { timeout: 600_000 }, () => {
  let server;

  before(async () => {
    server = await startServer({ extraArgs: ["--rate-limit-rps", "0"] });
  });

  after(async () => {
    await server?.kill();
    await removeTempDirs();
  });

  for (const [http, protocol] of [["2", "h2"], ["1.1", "http/1.1"]]) {
    for (const workload of WORKLOADS) {
      test(`${workload} over ${protocol}`, async () => {
        const res = await bench(server, server.url,
          ["--http", http, "--workload", workload, ...SIZES, ...SHORT]);
        try {
          const r = expectGoodReport(res, { workload, protocol });
          checkWorkload(r, workload, res);
          assert.equal(r.connections, workload === "watch" ? (http === "2" ? 2 : 40) : 2);
          assert.equal(r.streams, workload === "watch" ? (http === "2" ? 20 : 1) : (http === "2" ? 8 : 1));
        } catch (e) {
          throw annotate(e, server);
        }
      });
    }
  }

  test("the text report names the numbers", async () => {
    const res = await bench(server, server.url, ["--workload", "get", "--keys", "200",
      "--duration", "0.3", "--warmup", "0.1"]);
    assert.equal(res.code, 0, describeRun(res));
    for (const label of ["ops/s", "latency ms", "p50", "p99", "p99.9", "errors"]) {
      assert.ok(res.stdout.includes(label), `no "${label}" in\n${res.stdout}`);
    }
  });

  test("a named database (--database)", async () => {
    const created = await server.dbCmd("create", "benchdb");
    assert.equal(created.code, 0, `${created.stdout}\n${created.stderr}`);
    const res = await bench(server, server.url,
      ["--database", "benchdb", "--workload", "sum", ...SHORT]);
    const r = expectGoodReport(res, { workload: "sum", protocol: "h2" });
    assert.match(r.url, /\/databases\/benchdb\/connect$/);
    // A fresh database: its counter starts at zero, unlike the default database's.
    assert.equal(r.sum_check.start, 0);
    assert.equal(r.sum_check.ok, true);
  });

  test("a wrong token: exit code 2 and a readable message", async () => {
    // The scratch database cannot be made with it...
    const res = await runKvconnect(["bench", "--url", server.url, "--token", "not-the-right-token",
      ...SHORT], { timeoutMs: RUN_TIMEOUT_MS });
    assert.equal(res.code, 2, describeRun(res));
    assert.equal(res.stdout, "", "nothing on stdout when the run cannot start");
    assert.match(res.stderr, /creating one on http:\/\/127\.0\.0\.1:\d+ failed: Invalid access token\./);
    // ...nor the metadata exchange of an existing database done.
    const named = await runKvconnect(["bench", "--url", server.url, "--token", "not-the-right-token",
      "--db", "default", ...SHORT], { timeoutMs: RUN_TIMEOUT_MS });
    assert.equal(named.code, 2, describeRun(named));
    assert.equal(named.stdout, "", "nothing on stdout when the metadata exchange fails");
    assert.match(named.stderr, /metadata exchange with http:\/\/127\.0\.0\.1:\d+\/databases\/default\/connect failed: HTTP 401: Invalid access token\./);
  });

  test("bad usage: exit code 2", async () => {
    const cases = [
      ["--workload", "nope"],
      ["--http", "3"],
      ["--workload", "list", "--keys", "10"],
      ["--duration", "0"],
      ["--url", "ftp://127.0.0.1/"],
    ];
    for (const extra of cases) {
      const res = await runKvconnect(["bench", "--url", server.url, "--token", server.token,
        "--json", ...extra], { timeoutMs: RUN_TIMEOUT_MS });
      assert.equal(res.code, 2, describeRun(res));
      assert.ok(res.stderr.length > 0, describeRun(res));
    }
    const unreachable = await runKvconnect(["bench", "--url", "http://127.0.0.1:1",
      "--token", "whatever-token", "--json"], { timeoutMs: RUN_TIMEOUT_MS });
    assert.equal(unreachable.code, 2, describeRun(unreachable));
    assert.match(unreachable.stderr, /failed: connect to 127\.0\.0\.1:1/);
  });

  describe("over TLS", () => {
    let tlsServer;
    let certs;

    before(async () => {
      certs = await makeCerts(await makeTempDir("kvconnect-bench-certs-"));
      tlsServer = await startServer({ tlsCert: certs.cert, tlsKey: certs.key });
    });

    after(async () => {
      await tlsServer?.kill();
    });

    for (const [http, protocol] of [["2", "h2"], ["1.1", "http/1.1"]]) {
      test(`get and watch over ${protocol} with --ca`, async () => {
        assert.match(tlsServer.url, /^https:/);
        for (const workload of ["get", "watch"]) {
          const res = await bench(tlsServer, tlsServer.url,
            ["--http", http, "--ca", certs.ca, "--workload", workload, ...SIZES, ...SHORT]);
          try {
            const r = expectGoodReport(res, { workload, protocol });
            checkWorkload(r, workload, res);
            assert.match(r.endpoint, /^https:/);
          } catch (e) {
            throw annotate(e, tlsServer);
          }
        }
      });
    }

    test("an unknown CA is refused, --insecure accepts it", async () => {
      const refused = await bench(tlsServer, tlsServer.url, ["--workload", "get", ...SHORT]);
      assert.equal(refused.code, 2, describeRun(refused));
      assert.match(refused.stderr, /TLS handshake/);
      const insecure = await bench(tlsServer, tlsServer.url,
        ["--insecure", "--workload", "get", "--keys", "200", ...SHORT]);
      expectGoodReport(insecure, { workload: "get", protocol: "h2" });
    });
  });
});
