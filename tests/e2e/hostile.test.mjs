// Hostile input, one row per test: each row does the bad thing, records what the
// server answered, and then checks that a well-behaved client (HTTP/2 metadata
// exchange + a snapshot_read with Deno's own request bytes, over h2c and over TLS)
// is still served. At the end the observations are printed as a markdown table
// ("| input | observed answer |").
//
// The main server runs plain --addr and TLS --tls-addr with
//   --header-timeout-ms 2000 --tls-handshake-timeout-ms 2000 --h2-max-streams 100
// (default --max-header-bytes 16384); the rate-limit row has its own server with
//   --rate-limit-rps 5 --rate-limit-burst 5. Rate limits answer 503 with Retry-After (clients
// retry 5xx; a 429 would be a hard error in every client).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import {
  annotate, describeRun, expectCliOk, expectDenoOk, makeCerts, makeTempDir, removeTempDirs, runDeno, startServer,
} from "./harness.mjs";
import {
  dataPath, describeAnswer, fixture, H2, H2_FRAME, http1Post, metadata, METADATA_BODY, pbMutation, pollUntil, RawH2,
  rawExchange, statusLine, trickle, withH2,
} from "./raw_client.mjs";

const TOKEN_RE = /^kvt_([0-9a-f]{16})_([0-9a-f]{64})$/;
const rows = [];

function printTable() {
  const cell = (s) => String(s).replace(/\|/g, "\\|").replace(/\s*\n\s*/g, " ");
  const lines = ["| input | observed answer |", "|---|---|", ...rows.map(([i, o]) => `| ${cell(i)} | ${cell(o)} |`)];
  console.log(`\nHostile-input table (kvconnect ${new Date().toISOString().slice(0, 10)}):\n${lines.join("\n")}\n`);
}

after(async () => {
  printTable();
  await removeTempDirs();
});

/** "closed by the server after 2.1 s" / "still open after 15 s". */
function closing(r) {
  const secs = (r.elapsedMs / 1000).toFixed(1);
  return r.closed ? `connection closed by the server after ${secs} s` : `connection still open after ${secs} s`;
}

/** What came back on a raw connection: an HTTP status line, a TLS alert, or n bytes. */
function rawAnswer(r) {
  if (r.data.length === 0) return "nothing sent back";
  const line = statusLine(r.text);
  if (line) return line;
  if (r.data[0] === 0x15 && r.data.length >= 7) return `TLS alert (level ${r.data[5]}, description ${r.data[6]})`;
  return `${r.data.length} bytes (${r.data.subarray(0, 8).toString("hex")}…)`;
}

describe("hostile input", { timeout: 300_000 }, () => {
  let certs;
  let caPem;
  let server;
  let defaultId;

  before(async () => {
    certs = await makeCerts(await makeTempDir("kvconnect-e2e-certs-"));
    caPem = fs.readFileSync(certs.ca, "utf8");
    server = await startServer({
      tlsCert: certs.cert,
      tlsKey: certs.key,
      tlsPort: true,
      extraArgs: [
        "--header-timeout-ms", "2000",
        "--tls-handshake-timeout-ms", "2000",
        "--h2-max-streams", "100",
        "--catalog-poll-ms", "200",
      ],
    });
  });
  after(async () => {
    if (server) await server.kill();
  });

  /** Metadata + snapshot_read on fresh connections to both listeners; throws if refused. */
  async function stillServing(what) {
    assert.ok(server.running, `the server exited after: ${what}`);
    for (const [url, ca] of [[server.url, undefined], [server.tlsUrl, caPem]]) {
      await withH2(url, { ca }, async (h2) => {
        const m = await metadata(h2, server.token);
        assert.equal(m.status, 200, `${url}: metadata exchange after "${what}": ${describeAnswer(m)}`);
        defaultId ??= m.json.databaseId;
        const r = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
        assert.equal(r.status, 200, `${url}: snapshot_read after "${what}": ${describeAnswer(r)}`);
      });
    }
  }

  async function createToken(target, ...args) {
    const res = expectCliOk(await target.tokenCmd("create", ...args), target);
    const token = res.stdout.trim();
    const m = TOKEN_RE.exec(token);
    assert.ok(m, `token create printed ${JSON.stringify(res.stdout)}`);
    return { token, id: m[1] };
  }

  /** Metadata exchange until the answer is `status` (new tokens reach the server within a poll). */
  async function metaUntil(h2, token, status, what, reqPath = "/") {
    return await pollUntil(() => metadata(h2, token, { reqPath }), (r) => r.status === status, {
      timeoutMs: 10_000, intervalMs: 150, what,
    });
  }

  /**
   * One table row: fn(obs) sets obs.text to what it observed, then asserts; afterwards
   * a well-behaved client must still be served (`target` = the server to check).
   */
  function row(input, fn, { timeout = 60_000, target } = {}) {
    test(input, { timeout }, async () => {
      const obs = { text: "(no answer recorded)" };
      try {
        await fn(obs);
        if (!target) await stillServing(input);
        rows.push([input, `${obs.text}; then a normal client is served`]);
      } catch (e) {
        rows.push([input, `TEST FAILED — ${obs.text} — ${String(e.message).split("\n")[0]}`]);
        throw annotate(e, target?.() ?? server);
      }
    });
  }

  test("baseline: a well-behaved client is served over h2c and TLS", async () => {
    try {
      await stillServing("start-up");
    } catch (e) {
      throw annotate(e, server);
    }
  });

  // --- transport -------------------------------------------------------------

  row("4 KB of garbage instead of a TLS ClientHello (TLS port)", async (obs) => {
    const junk = crypto.randomBytes(4096);
    junk[0] = 0x00; // never a TLS record type
    const r = await rawExchange(server.tlsPort, (s) => s.write(junk), { timeoutMs: 15_000 });
    obs.text = `${rawAnswer(r)}, ${closing(r)}`;
    assert.ok(r.closed, "the server must close the connection");
  });

  row("TCP connection to the TLS port that never sends a ClientHello (--tls-handshake-timeout-ms 2000)", async (obs) => {
    const r = await rawExchange(server.tlsPort, () => {}, { timeoutMs: 15_000 });
    obs.text = `${rawAnswer(r)}, ${closing(r)}`;
    assert.ok(r.closed, "the server must close an idle handshake within 15 s");
  });

  row("plain HTTP/1.1 request sent to the TLS port", async (obs) => {
    const r = await rawExchange(server.tlsPort, (s) => s.write(http1Post("/", { body: METADATA_BODY })), { timeoutMs: 15_000 });
    obs.text = `${rawAnswer(r)}, ${closing(r)}`;
    assert.ok(r.closed, "the server must close the connection");
    assert.doesNotMatch(statusLine(r.text), /^HTTP\/1\.1 200/);
  });

  row("4 KB of binary garbage on the plain listener", async (obs) => {
    const junk = crypto.randomBytes(4096);
    junk[0] = 0x00;
    const r = await rawExchange(server.port, (s) => s.write(junk), { timeoutMs: 15_000 });
    obs.text = `${rawAnswer(r)}, ${closing(r)}`;
    assert.ok(r.closed, "the server must close the connection");
    assert.doesNotMatch(statusLine(r.text), /^HTTP\/1\.1 2\d\d/);
  });

  // --- headers -----------------------------------------------------------------

  const bigHeaderRequest = () => http1Post("/", {
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", "x-big": "a".repeat(20_000) },
    body: METADATA_BODY,
  });
  const headersDone = (text) => /^HTTP\/1\.[01] \d{3}[\s\S]*\r\n\r\n/.test(text);

  row("HTTP/1.1 request with a 20 KB header (> --max-header-bytes 16384), plain", async (obs) => {
    const r = await rawExchange(server.port, (s) => s.write(bigHeaderRequest()), { until: headersDone, timeoutMs: 15_000 });
    obs.text = `${rawAnswer(r)}, ${closing(r)}`;
    assert.match(statusLine(r.text), /^HTTP\/1\.1 431/);
  });

  row("HTTP/1.1 request with a 20 KB header over TLS (ALPN http/1.1)", async (obs) => {
    const r = await rawExchange(server.tlsPort, (s) => s.write(bigHeaderRequest()), {
      tlsOptions: { ca: caPem, ALPNProtocols: ["http/1.1"] }, until: headersDone, timeoutMs: 15_000,
    });
    obs.text = `${rawAnswer(r)}, ${closing(r)}`;
    assert.match(statusLine(r.text), /^HTTP\/1\.1 431/);
  });

  row("HTTP/2 request with a 20 KB header (> --max-header-bytes 16384)", async (obs) => {
    const h2 = await H2.connect(server.url);
    try {
      const res = await h2.request("/", {
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", "x-big": "a".repeat(20_000) },
        body: METADATA_BODY,
      });
      await pollUntil(async () => h2.goaway || !h2.alive, (x) => x, { timeoutMs: 300, intervalMs: 50 }).catch(() => {});
      const ga = h2.goaway ? `, GOAWAY code ${h2.goaway.code}` : "";
      obs.text = `${describeAnswer(res)}${ga}${h2.alive ? "" : ", connection closed"}`;
      assert.ok(res.status === undefined || [431].includes(res.status), `must not be served: ${describeAnswer(res)}`);
    } finally {
      h2.close();
    }
  });

  row("HTTP/1.1 slowloris: request headers trickled 1 byte/s (--header-timeout-ms 2000)", async (obs) => {
    const slow = `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${"a".repeat(100)}`;
    const r = await rawExchange(server.port, (s) => trickle(s, slow, 1000), { timeoutMs: 15_000 });
    obs.text = `${rawAnswer(r)}, ${closing(r)}`;
    assert.ok(r.closed, "the server must close a connection whose headers never finish (within 15 s)");
  }, { timeout: 30_000 });

  row("HTTP/2 stream flood: 2000 streams opened at once, ignoring SETTINGS (--h2-max-streams 100)", async (obs) => {
    const raw = await RawH2.connect(server.port);
    try {
      const settings = raw.frames.find((f) => f.type === H2_FRAME.SETTINGS && !(f.flags & 1));
      let maxStreams = "not sent";
      for (let off = 0; off + 6 <= settings.payload.length; off += 6) {
        if (settings.payload.readUInt16BE(off) === 0x3) maxStreams = settings.payload.readUInt32BE(off + 2);
      }
      const head = [
        [":method", "POST"], [":scheme", "http"], [":path", "/"], [":authority", `127.0.0.1:${server.port}`],
        ["authorization", `Bearer ${server.token}`], ["content-type", "application/json"],
      ];
      const frames = [];
      for (let i = 0; i < 2000; i++) frames.push(raw.headers(2 * i + 1, head)); // no END_STREAM: streams stay open
      raw.write(Buffer.concat(frames));
      await raw.waitFor((f) => f.type === H2_FRAME.GOAWAY, 3000);
      // another connection is served while the flooding one is still around
      await stillServing("a stream flood on another connection");
      const s = raw.summary();
      const rst = Object.entries(s.rst).map(([k, v]) => `${v}× RST_STREAM ${k}`).join(", ") || "no RST_STREAM";
      const ga = s.goaway ? `GOAWAY ${s.goaway.code} (last stream ${s.goaway.lastStreamId})` : "no GOAWAY";
      obs.text = `server SETTINGS_MAX_CONCURRENT_STREAMS=${maxStreams}; ${rst}; ${ga}; ${s.headers} response HEADERS` +
        `${s.closed ? "; connection closed" : ""}`;
      assert.equal(maxStreams, 100, "the server advertises --h2-max-streams");
      assert.ok((s.rst.REFUSED_STREAM ?? 0) > 0 || s.goaway, "streams beyond the limit are refused or the connection is closed");
    } finally {
      raw.close();
    }
  });

  // --- tokens ------------------------------------------------------------------

  row("expired access token (token create --expires 2s)", async (obs) => {
    await withH2(server.url, {}, async (h2) => {
      const tok = await createToken(server, "--db", "default", "--scope", "write", "--expires", "2s");
      const fresh = await metadata(h2, tok.token);
      assert.equal(fresh.status, 200, `before expiry: ${describeAnswer(fresh)}`);
      const m = await pollUntil(() => metadata(h2, tok.token), (r) => r.status !== 200, {
        timeoutMs: 15_000, intervalMs: 250, what: "expired token refused at the metadata exchange",
      });
      const dp = await dataPath(h2, fresh.json, "snapshot_read", fixture("snapshot_read_get"));
      obs.text = `metadata: ${describeAnswer(m)}; data path with a data-path token issued before expiry: ${describeAnswer(dp)}`;
      assert.equal(m.status, 401);
      assert.match(m.text, /Invalid access token/);
    });
  });

  row("revoked access token (token revoke ID)", async (obs) => {
    await withH2(server.url, {}, async (h2) => {
      const tok = await createToken(server, "--db", "default", "--scope", "write");
      const m0 = await metaUntil(h2, tok.token, 200, "new token accepted");
      const ok = await dataPath(h2, m0.json, "snapshot_read", fixture("snapshot_read_get"));
      assert.equal(ok.status, 200, `before revocation: ${describeAnswer(ok)}`);
      expectCliOk(await server.tokenCmd("revoke", tok.id), server);
      const dp = await pollUntil(() => dataPath(h2, m0.json, "snapshot_read", fixture("snapshot_read_get")),
        (r) => r.status !== 200, { timeoutMs: 10_000, intervalMs: 100, what: "data-path token of a revoked access token refused" });
      const m = await metadata(h2, tok.token);
      obs.text = `metadata: ${describeAnswer(m)}; data path: ${describeAnswer(dp)}`;
      assert.equal(m.status, 401);
      assert.equal(dp.status, 401);
      assert.match(dp.text, /authoriz/i);
    });
  });

  let other; // { token, meta } of database "other"

  row("access token of database `other` at POST / (database `default`)", async (obs) => {
    expectCliOk(await server.dbCmd("create", "other"), server);
    const tok = await createToken(server, "--db", "other", "--scope", "write");
    await withH2(server.url, {}, async (h2) => {
      const mo = await metaUntil(h2, tok.token, 200, "token of `other` on /databases/other/connect", "/databases/other/connect");
      other = { token: tok.token, meta: mo.json };
      const m = await metadata(h2, tok.token);
      obs.text = describeAnswer(m);
      assert.equal(m.status, 403);
      assert.match(m.text, /not valid for database 'default'/);
    });
  });

  row("data-path token of database `other` sent with x-denokv-database-id of `default`", async (obs) => {
    assert.ok(other, "needs the previous row");
    assert.notEqual(other.meta.databaseId, defaultId);
    await withH2(server.url, {}, async (h2) => {
      const own = await dataPath(h2, other.meta, "snapshot_read", fixture("snapshot_read_get"));
      assert.equal(own.status, 200, `with its own database id: ${describeAnswer(own)}`);
      const r = await dataPath(h2, other.meta, "snapshot_read", fixture("snapshot_read_get"), { databaseId: defaultId });
      const w = await dataPath(h2, other.meta, "atomic_write", fixture("atomic_write_set"), { databaseId: defaultId });
      obs.text = `snapshot_read: ${describeAnswer(r)}; atomic_write: ${describeAnswer(w)}`;
      assert.equal(r.status, 401);
      assert.match(r.text, /authoriz/i);
      assert.equal(w.status, 401);
    });
  });

  row("read-scope token writing (atomic_write)", async (obs) => {
    const tok = await createToken(server, "--db", "default", "--scope", "read");
    await withH2(server.url, {}, async (h2) => {
      const m = await metaUntil(h2, tok.token, 200, "read token accepted");
      const rd = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
      assert.equal(rd.status, 200, `read: ${describeAnswer(rd)}`);
      const w = await dataPath(h2, m.json, "atomic_write", fixture("atomic_write_set"));
      obs.text = describeAnswer(w);
      assert.equal(w.status, 403);
      assert.match(w.text, /read-only/);
    });
  });

  // --- metadata exchange --------------------------------------------------------

  row("malformed JSON metadata body", async (obs) => {
    await withH2(server.url, {}, async (h2) => {
      const m = await metadata(h2, server.token, { body: '{"supportedVersions":[1,2,3' });
      obs.text = describeAnswer(m);
      assert.equal(m.status, 400);
    });
  });

  row("metadata exchange without an authorization header", async (obs) => {
    await withH2(server.url, {}, async (h2) => {
      const m = await metadata(h2, undefined);
      obs.text = describeAnswer(m);
      assert.equal(m.status, 401);
    });
  });

  // --- queue API (docs/queues.md) ---------------------------------------------

  /** A queue API call over HTTP/1.1 (fetch); returns {status, text}. */
  async function queueCall(op, body, { token = server.token, method = "POST", query = "" } = {}) {
    const res = await fetch(`${server.url}/queue/v1/${op}${query}`, {
      method, headers: { authorization: `Bearer ${token}` }, body,
    });
    return { status: res.status, text: await res.text() };
  }
  const queueRows = [
    ["queue pull with a body that is not JSON", () => queueCall("pull", "{max_messages:"), 400, /not valid JSON/],
    ["queue ack naming 101 leases", () => queueCall("ack", JSON.stringify({ leases: Array(101).fill("x") })), 400, /schema/],
    ["queue pull waiting 10 minutes", () => queueCall("pull", JSON.stringify({ wait: 600000 })), 400, /wait must be between/],
    ["queue enqueue of a 70 KB value", () => queueCall("enqueue", JSON.stringify({ messages: [{ value: { type: "string", value: "x".repeat(70000) } }] })), 400, /value size limit/],
    ["queue enqueue delayed 31 days", () => queueCall("enqueue", JSON.stringify({ messages: [{ value: { type: "null" }, delay: 31 * 86400000 }] })), 400, /30 days/],
    ["queue enqueue of a top-level Uint8Array", () => queueCall("enqueue", JSON.stringify({ messages: [{ value: { type: "Uint8Array", value: "AQID" } }] })), 400, /V8 value/],
    ["queue nack with a forged lease", () => queueCall("nack", JSON.stringify({ leases: ["00000000-0000-0000-0000-000000000000.ffff"] })), 200, /"stale"/],
    ["queue pull with a wrong token", () => queueCall("pull", "{}", { token: "kvt_0000000000000000_" + "0".repeat(64) }), 401, /access token/i],
    ["queue stream with max_in_flight=0", () => queueCall("stream", undefined, { method: "GET", query: "?max_in_flight=0" }), 400, /max_in_flight/],
    ["queue operation that does not exist", () => queueCall("dequeue", "{}"), 404, /No queue API resource/],
  ];
  for (const [input, call, status, text] of queueRows) {
    row(input, async (obs) => {
      const r = await call();
      obs.text = `${r.status} ${r.text.slice(0, 90)}`;
      assert.equal(r.status, status);
      assert.match(r.text, text);
    });
  }

  // --- rate limits -------------------------------------------------------------

  /** Counts answers by status (or error) and checks every throttled one: 503 + Retry-After. */
  function throttleCounts(answers) {
    const counts = {};
    for (const a of answers) counts[a.status ?? a.error] = (counts[a.status ?? a.error] ?? 0) + 1;
    for (const a of answers.filter((x) => x.status === 503)) {
      assert.match(a.text, /Rate limit exceeded/);
      const retryAfter = a.headers["retry-after"];
      assert.match(String(retryAfter), /^[1-9][0-9]*$/, `Retry-After is whole seconds >= 1: ${retryAfter}`);
    }
    return counts;
  }
  const countsText = (counts) => Object.entries(counts).map(([k, v]) => `${v}× ${k}`).join(", ");

  row("token with its own --rate-limit 5 (server burst 20000): 50 data-path requests at once", async (obs) => {
    const tok = await createToken(server, "--db", "default", "--scope", "write", "--rate-limit", "5");
    await withH2(server.url, {}, async (h2) => {
      const m = await metaUntil(h2, tok.token, 200, "token accepted");
      const body = fixture("snapshot_read_get");
      const answers = await Promise.all(Array.from({ length: 50 }, () => dataPath(h2, m.json, "snapshot_read", body)));
      const counts = throttleCounts(answers);
      const limitedAnswer = answers.find((a) => a.status === 503);
      obs.text = `${countsText(counts)}; Retry-After: ${limitedAnswer?.headers["retry-after"] ?? "(none)"}`;
      // The bucket holds 5 (the metadata exchange took one); no timing is asserted.
      assert.ok((counts[200] ?? 0) >= 1 && counts[200] <= 10, `a burst of about 5 is served: ${obs.text}`);
      assert.equal((counts[200] ?? 0) + (counts[503] ?? 0), 50, `the rest is 503: ${obs.text}`);
    });
  });

  row("Deno with a --rate-limit 2 token: 1 set and 8 sequential kv.get calls", async (obs) => {
    const tok = await createToken(server, "--db", "default", "--scope", "write", "--rate-limit", "2");
    const res = await runDeno("rate_limited.ts", { kvUrl: server.url, token: tok.token, timeoutMs: 50_000 });
    const summary = expectDenoOk(res, server);
    const retries = res.stderr.split("\n").filter((l) => /status=503/.test(l)).length;
    obs.text = `${summary.message}; Deno logged ${retries} throttled call(s) (status=503) and retried`;
    assert.equal(summary.gets, 8, describeRun(res));
  }, { timeout: 60_000 });

  let limited;
  row("rate limit (--rate-limit-rps 5 --rate-limit-burst 5): 50 data-path requests at once", async (obs) => {
    limited = await startServer({ extraArgs: ["--rate-limit-rps", "5", "--rate-limit-burst", "5", "--catalog-poll-ms", "200"] });
    try {
      const tok = await createToken(limited, "--db", "default", "--scope", "write");
      await withH2(limited.url, {}, async (h2) => {
        const m = await metaUntil(h2, tok.token, 200, "token accepted");
        const body = fixture("snapshot_read_get");
        const answers = await Promise.all(Array.from({ length: 50 }, () => dataPath(h2, m.json, "snapshot_read", body)));
        const counts = throttleCounts(answers);
        const limitedAnswer = answers.find((a) => a.status === 503);
        // another access token has its own budget
        const admin = await metadata(h2, limited.token);
        const adminRead = admin.status === 200
          ? await dataPath(h2, admin.json, "snapshot_read", body) : admin;
        // and the limited token recovers
        const recovered = await pollUntil(() => dataPath(h2, m.json, "snapshot_read", body), (r) => r.status === 200, {
          timeoutMs: 10_000, intervalMs: 500, what: "rate-limited token served again",
        });
        obs.text = `${countsText(counts)}; 503 body: ` +
          `${limitedAnswer ? JSON.stringify(limitedAnswer.text.trim()) : "(none)"}, Retry-After: ` +
          `${limitedAnswer?.headers["retry-after"] ?? "(none)"}; another token meanwhile: ` +
          `${describeAnswer(adminRead).slice(0, 3)}; the limited token later: ${recovered.status}`;
        assert.ok(counts[503] > 0, "some requests are refused with 503");
        assert.ok(!counts[429], "no 429: clients treat it as final");
        assert.ok(counts[200] > 0, "the burst is served");
        assert.match(limitedAnswer.text, /Rate limit exceeded/);
        assert.equal(adminRead.status, 200, "another token is not limited by this one's requests");
      });
      assert.ok(limited.running, "the rate-limited server keeps running");
    } finally {
      await limited.kill();
    }
  }, { target: () => limited });
});

// Deep nesting and oversized bodies on every JSON endpoint: the metadata exchange (POST / and
// /databases/default/connect, HTTP/1.1 and HTTP/2), the admin API, the queue API and NDJSON import.
// Bodies nest arrays and objects at most --max-json-depth (64) levels and are parsed off the I/O
// threads, so each row wants a 4xx with a readable text, and /healthz answered within 1 s on
// another connection while the bad requests (two at once, one per I/O thread) are being handled.
describe("hostile input: deep nesting and 16 MB bodies on every JSON endpoint", { timeout: 600_000 }, () => {
  let server;
  let queueToken;

  before(async () => {
    server = await startServer({ extraArgs: ["--catalog-poll-ms", "200"] });
    const res = expectCliOk(await server.tokenCmd("create", "--db", "default", "--scope", "queue"), server);
    queueToken = res.stdout.trim();
  });
  after(async () => {
    if (server) await server.kill();
  });

  /** Metadata + snapshot_read over h2c; throws if the server is gone or refuses. */
  async function stillServing(what) {
    assert.ok(server.running, `the server exited after: ${what}`);
    await withH2(server.url, {}, async (h2) => {
      const m = await metadata(h2, server.token);
      assert.equal(m.status, 200, `metadata exchange after "${what}": ${describeAnswer(m)}`);
      const r = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
      assert.equal(r.status, 200, `snapshot_read after "${what}": ${describeAnswer(r)}`);
    });
  }

  /** GET /healthz on a connection of its own: { status, ms }. */
  async function healthz() {
    const started = Date.now();
    const r = await rawExchange(server.port, (s) => s.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
      { timeoutMs: 15_000 });
    return { status: statusLine(r.text), ms: Date.now() - started };
  }

  /**
   * An HTTP/1.1 POST on a raw connection: { status, text } of the answer (or what happened).
   * The whole body is written at once, as any client would: the server refuses a Content-Length
   * over --max-body-bytes at once and then reads and drops what is still coming (a lingering
   * close, --linger-timeout-ms), so the client reads the 413 instead of a reset.
   */
  async function http1(reqPath, headers, body) {
    const send = async (s) => {
      s.write(http1Post(reqPath, { headers, body }));
    };
    // Connection: close, so the answer ends when the server closes.
    const r = await rawExchange(server.port, send, { timeoutMs: 60_000 });
    const line = statusLine(r.text);
    const status = line ? Number(line.split(" ")[1]) : undefined;
    const at = r.text.indexOf("\r\n\r\n");
    return { status, text: at < 0 ? `${rawAnswer(r)}, ${closing(r)}` : r.text.slice(at + 4) };
  }

  async function http2(reqPath, headers, body) {
    return await withH2(server.url, {}, (h2) => h2.request(reqPath, { headers, body, timeoutMs: 60_000 }));
  }

  const json = { "content-type": "application/json" };
  const endpoints = [
    { name: "metadata exchange POST / over HTTP/1.1", send: (b) => http1("/", { authorization: `Bearer ${server.token}`, ...json }, b) },
    { name: "metadata exchange POST / over HTTP/2", send: (b) => http2("/", { authorization: `Bearer ${server.token}`, ...json }, b) },
    { name: "metadata exchange POST /databases/default/connect over HTTP/1.1",
      send: (b) => http1("/databases/default/connect", { authorization: `Bearer ${server.token}`, ...json }, b) },
    { name: "metadata exchange POST /databases/default/connect over HTTP/2",
      send: (b) => http2("/databases/default/connect", { authorization: `Bearer ${server.token}`, ...json }, b) },
    { name: "admin API POST /admin/v1/databases/default/entries/list (admin token)",
      send: (b) => http1("/admin/v1/databases/default/entries/list", { authorization: `Bearer ${server.token}`, ...json }, b) },
    { name: "queue API POST /queue/v1/enqueue (queue-scope token)",
      send: (b) => http1("/queue/v1/enqueue", { authorization: `Bearer ${queueToken}`, ...json }, b) },
    { name: "NDJSON import POST /admin/v1/databases/default/import (admin token)", import: true,
      send: (b) => http1("/admin/v1/databases/default/import", { authorization: `Bearer ${server.token}`, "content-type": "application/x-ndjson" }, b) },
  ];
  const bodies = [
    { name: "150 KB of '['", body: () => "[".repeat(150_000), copies: 6, status: 400,
      text: /nested deeper than 64 levels/, importText: /line 1: .*too deep/ },
    { name: "80,000-deep valid JSON", body: () => "[".repeat(80_000) + "]".repeat(80_000), copies: 6, status: 400,
      text: /nested deeper than 64 levels/, importText: /line 1: .*too deep/ },
    { name: "a 16 MB body (Content-Length 16777216, --max-body-bytes 4 MiB)", body: () => "[".repeat(16 * 1024 * 1024), copies: 2, status: 413,
      text: /exceeds the limit of 4194304 bytes/, importText: /exceeds the limit of 4194304 bytes/ },
  ];

  for (const e of endpoints) {
    for (const b of bodies) {
      const input = `${e.name}: ${b.name}`;
      test(input, { timeout: 120_000 }, async () => {
        const obs = { text: "(no answer recorded)" };
        try {
          // A server that an earlier row brought down is started again, so each row stands alone.
          if (!server.running || !(await healthz()).status) server = await server.restart();
          const body = b.body();
          const failed = (err) => ({ status: undefined, text: `no answer (${err.code ?? err.message})` });
          const bad = Array.from({ length: b.copies }, () => e.send(body).catch(failed));
          await new Promise((resolve) => setTimeout(resolve, 50)); // the bodies are on their way
          const health = await healthz();
          const [r] = await Promise.all(bad);
          const text = r.text.length > 90 ? `${r.text.slice(0, 90)}…` : r.text;
          obs.text = `${r.status ?? "no status"} ${JSON.stringify(text.trim())}; /healthz meanwhile: ` +
            `${health.status || "no answer"} after ${health.ms} ms`;
          assert.equal(r.status, b.status, "the status of the answer");
          assert.match(r.text, e.import ? b.importText : b.text);
          assert.match(String(health.status), /^HTTP\/1\.1 200/, "/healthz answers");
          assert.ok(health.ms < 1000, `/healthz took ${health.ms} ms while the bad requests were handled`);
          await stillServing(input);
          rows.push([input, `${obs.text}; then a normal client is served`]);
        } catch (err) {
          rows.push([input, `TEST FAILED — ${obs.text} — ${String(err.message).split("\n")[0]}`]);
          throw annotate(err, server);
        }
      });
    }
  }
});

// --- keys that are no Deno key (issue 20, item 4) ---------------------------------------------
// KV Connect keys are opaque bytes, so a write token can store bytes no Deno client writes.
// Each row stores one such key with a hand-made atomic_write, then lists the root, reads the
// key by its raw form, exports and deletes it through the admin API: every answer must be
// non-5xx with readable content (the raw key part {"type":"raw","value":base64url}), and the
// server keeps serving. Before the raw form the listing answered 500 "damaged data" and the
// export ended at 0 bytes.
describe("hostile input: keys that are no Deno key", { timeout: 120_000 }, () => {
  let server;

  before(async () => {
    server = await startServer({});
  });
  after(async () => {
    if (server) await server.kill();
  });

  async function admin(op, body, db = "default") {
    const res = await fetch(`${server.url}/admin/v1/databases/${db}/${op}`, {
      method: "POST", headers: { authorization: `Bearer ${server.token}` },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  }

  /** As the first block's stillServing, on h2c: metadata + snapshot_read with Deno's bytes. */
  async function stillServing(what) {
    assert.ok(server.running, `the server exited after: ${what}`);
    await withH2(server.url, {}, async (h2) => {
      const m = await metadata(h2, server.token);
      assert.equal(m.status, 200, `metadata exchange after "${what}": ${describeAnswer(m)}`);
      const r = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
      assert.equal(r.status, 200, `snapshot_read after "${what}": ${describeAnswer(r)}`);
    });
  }

  const poisonKeys = [
    ["an unknown tag (bytes 99 61 62 63)", Buffer.from([0x99, 0x61, 0x62, 0x63])],
    ["a string part that is not UTF-8 (02 c3 28 00)", Buffer.from([0x02, 0xc3, 0x28, 0x00])],
    ["a non-minimal integer (1d 02 00 05)", Buffer.from([0x1d, 0x02, 0x00, 0x05])],
    ["a typed part then a truncated float (02 'p' 00 21 80)", Buffer.from([0x02, 0x70, 0x00, 0x21, 0x80])],
  ];
  for (const [n, [what, key]] of poisonKeys.entries()) {
    const input = `a key that is no Deno key, ${what}, written over KV Connect; then list, get, export, delete`;
    test(input, async () => {
      const obs = [];
      try {
        await withH2(server.url, {}, async (h2) => {
          const m = await metadata(h2, server.token);
          assert.equal(m.status, 200, describeAnswer(m));
          const w = await dataPath(h2, m.json, "atomic_write", pbMutation(key, { data: Buffer.from(`row${n}`) }));
          obs.push(`atomic_write ${w.status}`);
          assert.equal(w.status, 200, `atomic_write: ${describeAnswer(w)}`);
        });
        const list = await admin("entries/list", {});
        obs.push(`list ${list.status}`);
        assert.equal(list.status, 200, list.text);
        const value = Buffer.from(`row${n}`).toString("base64url");
        const listed = JSON.parse(list.text).entries.find((e) => e.value.value === value);
        assert.equal(listed?.key.at(-1)?.type, "raw", `the listing shows the key with a raw part: ${list.text}`);
        const keyJson = listed.key;
        obs.push(`as ${JSON.stringify(keyJson)}`);
        const get = await admin("entries/get", { key: keyJson });
        obs.push(`get ${get.status}`);
        assert.equal(get.status, 200, get.text);
        assert.deepEqual(JSON.parse(get.text).entry?.key, keyJson);
        const dump = await admin("export", "");
        obs.push(`export ${dump.status} (${dump.text.length} bytes)`);
        assert.equal(dump.status, 200, dump.text);
        assert.ok(dump.text.includes(JSON.stringify(keyJson)), `the export holds the key: ${dump.text}`);
        const del = await admin("entries/delete", { key: keyJson });
        obs.push(`delete ${del.status}`);
        assert.equal(del.status, 200, del.text);
        const gone = await admin("entries/get", { key: keyJson });
        assert.equal(JSON.parse(gone.text).entry, null, "deleted by its raw form");
        await stillServing(input);
        rows.push([input, `${obs.join(", ")}; then a normal client is served`]);
      } catch (e) {
        rows.push([input, `TEST FAILED — ${obs.join(", ")} — ${String(e.message).split("\n")[0]}`]);
        throw annotate(e, server);
      }
    });
  }

  test("a raw key part that is not base64, in entries/get", async () => {
    const input = "entries/get with a raw key part that is not base64";
    let obs = "(no answer recorded)";
    try {
      const r = await admin("entries/get", { key: [{ type: "raw", value: "@@" }] });
      obs = `${r.status} ${r.text.slice(0, 90)}`;
      assert.equal(r.status, 400);
      assert.match(r.text, /'key':/);
      await stillServing(input);
      rows.push([input, `${obs}; then a normal client is served`]);
    } catch (e) {
      rows.push([input, `TEST FAILED — ${obs} — ${String(e.message).split("\n")[0]}`]);
      throw annotate(e, server);
    }
  });
});

// --- what callers without a token see, and the smaller transport findings ---------------
// Its own servers: `guarded` (the run's backend) with a TLS listener, --idle-timeout-ms 3000
// and --allowed-host 127.0.0.1; `public` (SQLite: it runs --backup-to, so /readyz has backup
// lines to leak) with a --metrics-addr listener opened by --metrics-public.
// (Its own import line, so blocks appended by other changes merge without touching the top.)
import { sleep } from "./harness.mjs";
import { http1Body } from "./raw_client.mjs";

describe("hostile input: exposure", { timeout: 300_000 }, () => {
  let caPem;
  let guarded;
  let publicServer;
  let backupDir;

  before(async () => {
    const certs = await makeCerts(await makeTempDir("kvconnect-e2e-certs-"));
    caPem = fs.readFileSync(certs.ca, "utf8");
    guarded = await startServer({
      tlsCert: certs.cert,
      tlsKey: certs.key,
      tlsPort: true,
      extraArgs: ["--idle-timeout-ms", "3000", "--allowed-host", "127.0.0.1", "--catalog-poll-ms", "200"],
    });
  });
  after(async () => {
    await guarded?.kill();
    await publicServer?.kill();
  });

  const bearer = (token) => ({ authorization: `Bearer ${token}` });

  /** Metadata + snapshot_read on fresh connections to both listeners of `guarded`. */
  async function stillServing(what) {
    assert.ok(guarded.running, `the server exited after: ${what}`);
    for (const [url, ca] of [[guarded.url, undefined], [guarded.tlsUrl, caPem]]) {
      await withH2(url, { ca }, async (h2) => {
        const m = await metadata(h2, guarded.token);
        assert.equal(m.status, 200, `${url}: metadata exchange after "${what}": ${describeAnswer(m)}`);
        const r = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
        assert.equal(r.status, 200, `${url}: snapshot_read after "${what}": ${describeAnswer(r)}`);
      });
    }
  }

  function row(input, fn, { timeout = 60_000, target = () => guarded } = {}) {
    test(input, { timeout }, async () => {
      const obs = { text: "(no answer recorded)" };
      try {
        await fn(obs);
        if (target() === guarded) await stillServing(input);
        else assert.ok(target().running, `the server exited after: ${input}`);
        rows.push([input, `${obs.text}; then a normal client is served`]);
      } catch (e) {
        rows.push([input, `TEST FAILED — ${obs.text} — ${String(e.message).split("\n")[0]}`]);
        throw annotate(e, target());
      }
    });
  }

  /** A database and an admin token bound to it, made with the CLI. */
  async function scopedAdmin(name) {
    expectCliOk(await guarded.dbCmd("create", name), guarded);
    const res = expectCliOk(await guarded.tokenCmd("create", "--db", name, "--scope", "admin"), guarded);
    return res.stdout.trim();
  }

  row("GET /metrics without a token, with a database's admin token, with the bootstrap token", async (obs) => {
    const token = await scopedAdmin("exposure-metrics");
    const none = await fetch(`${guarded.url}/metrics`);
    const noneText = await none.text();
    const scoped = await pollUntil(() => fetch(`${guarded.url}/metrics`, { headers: bearer(token) }),
      (r) => r.status !== 401, { timeoutMs: 10_000, intervalMs: 150, what: "token known" });
    const boot = await fetch(`${guarded.url}/metrics`, { headers: bearer(guarded.token) });
    const bootText = await boot.text();
    obs.text = `${none.status} ${JSON.stringify(noneText.trim())}; scoped admin: ${scoped.status}; bootstrap: ${boot.status}`;
    assert.equal(none.status, 401, noneText);
    assert.doesNotMatch(noneText, /kvconnect_|database=/);
    assert.equal(scoped.status, 403, "a database's admin must not see every database's metrics");
    assert.equal(boot.status, 200);
    assert.match(bootText, /kvconnect_http_requests_total/);
  });

  row("GET /readyz without a token names no database; ?verbose=1 needs the bootstrap token", async (obs) => {
    const plain = await fetch(`${guarded.url}/readyz`);
    const plainText = await plain.text();
    const verboseNone = await fetch(`${guarded.url}/readyz?verbose=1`);
    const verbose = await fetch(`${guarded.url}/readyz?verbose=1`, { headers: bearer(guarded.token) });
    obs.text = `${plain.status} ${JSON.stringify(plainText)}; ?verbose=1 without a token: ${verboseNone.status}, ` +
      `with the bootstrap token: ${verbose.status}`;
    assert.equal(plain.status, 200);
    assert.equal(plainText, "ready\n");
    assert.equal(verboseNone.status, 401);
    assert.equal(verbose.status, 200);
  });

  row("server with --backup-to: /readyz (no token) shows no backup lines; --metrics-public opens only --metrics-addr", async (obs) => {
    backupDir = await makeTempDir("kvconnect-e2e-backup-");
    publicServer = await startServer({
      dataDir: await makeTempDir(),  // SQLite: --backup-to is for SQLite storage
      metrics: true,  // --metrics-addr 127.0.0.1:0
      extraArgs: ["--backup-to", backupDir, "--backup-interval-ms", "100", "--metrics-public"],
    });
    const side = publicServer.metricsUrl;
    const ready = await fetch(`${publicServer.url}/readyz`);
    const readyText = await ready.text();
    const mainMetrics = await fetch(`${publicServer.url}/metrics`);
    const mainVerbose = await fetch(`${publicServer.url}/readyz?verbose=1`);
    const sideMetrics = await fetch(`${side}/metrics`);
    const sideVerbose = await fetch(`${side}/readyz?verbose=1`);
    const sideVerboseText = await sideVerbose.text();
    obs.text = `/readyz ${ready.status} ${JSON.stringify(readyText)}; main /metrics ${mainMetrics.status}, ` +
      `main ?verbose=1 ${mainVerbose.status}; metrics listener /metrics ${sideMetrics.status}, ` +
      `?verbose=1 ${sideVerbose.status}`;
    assert.equal(ready.status, 200);
    assert.doesNotMatch(readyText, /backup|default/, "no database names or backup state without a token");
    assert.equal(mainMetrics.status, 401, "--metrics-public with --metrics-addr leaves the main listener closed");
    assert.equal(mainVerbose.status, 401);
    assert.equal(sideMetrics.status, 200);
    assert.match(sideVerboseText, /backup of 'default'/);
  }, { target: () => publicServer });

  const rawRequest = (lines, body = "") => `${lines.join("\r\n")}\r\n\r\n${body}`;
  const chunked = (text) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`;

  for (const coding of ["chunked, identity", "gzip, chunked", "identity"]) {
    row(`HTTP/1.1 metadata exchange with Transfer-Encoding: ${coding}`, async (obs) => {
      const req = rawRequest([
        "POST / HTTP/1.1", `Host: 127.0.0.1:${guarded.port}`, `Authorization: Bearer ${guarded.token}`,
        "Content-Type: application/json", `Transfer-Encoding: ${coding}`,
      ], chunked(METADATA_BODY));
      const r = await rawExchange(guarded.port, (s) => s.write(req), { timeoutMs: 10_000 });
      obs.text = `${rawAnswer(r)} ${JSON.stringify(http1Body(r.text).trim())}, ${closing(r)}`;
      assert.match(statusLine(r.text), /^HTTP\/1\.1 400/);
      assert.match(http1Body(r.text), /Transfer-Encoding/);
      assert.ok(r.closed, "the server closes the connection");
    });
  }

  row("HTTP/1.1 metadata exchange with Transfer-Encoding: chunked (control)", async (obs) => {
    const req = rawRequest([
      "POST / HTTP/1.1", `Host: 127.0.0.1:${guarded.port}`, `Authorization: Bearer ${guarded.token}`,
      "Content-Type: application/json", "Transfer-Encoding: chunked", "Connection: close",
    ], chunked(METADATA_BODY));
    const r = await rawExchange(guarded.port, (s) => s.write(req), { timeoutMs: 10_000 });
    obs.text = rawAnswer(r);
    assert.match(statusLine(r.text), /^HTTP\/1\.1 200/);
  });

  row("Strict-Transport-Security on TLS answers (HTTP/2 and HTTP/1.1), none on plain HTTP", async (obs) => {
    const h2tls = await withH2(guarded.tlsUrl, { ca: caPem }, (h2) => metadata(h2, guarded.token));
    const h2plain = await withH2(guarded.url, {}, (h2) => metadata(h2, guarded.token));
    const h1 = await rawExchange(guarded.tlsPort, (s) => s.write(rawRequest([
      "GET /healthz HTTP/1.1", "Host: 127.0.0.1", "Connection: close"])), {
      tlsOptions: { ca: caPem, ALPNProtocols: ["http/1.1"] }, timeoutMs: 10_000,
    });
    const h1hsts = /^strict-transport-security: *(.*)$/im.exec(h1.text)?.[1]?.trim();
    obs.text = `h2 over TLS: ${h2tls.headers["strict-transport-security"] ?? "(none)"}; HTTP/1.1 over TLS: ` +
      `${h1hsts ?? "(none)"}; h2c: ${h2plain.headers["strict-transport-security"] ?? "(none)"}`;
    assert.equal(h2tls.headers["strict-transport-security"], "max-age=31536000");
    assert.equal(h1hsts, "max-age=31536000");
    assert.equal(h2plain.headers["strict-transport-security"], undefined);
  });

  row("watch with zero keys (an empty Watch message)", async (obs) => {
    await withH2(guarded.url, {}, async (h2) => {
      const m = await metadata(h2, guarded.token);
      const r = await dataPath(h2, m.json, "watch", Buffer.alloc(0), { timeoutMs: 5_000 });
      obs.text = describeAnswer(r);
      assert.equal(r.status, 400, obs.text);
      assert.match(r.text, /at least one key/);
    });
  });

  row("HTTP/2 connection that only sends PINGs (--idle-timeout-ms 3000)", async (obs) => {
    const raw = await RawH2.connect(guarded.port);
    const started = Date.now();
    const ping = Buffer.concat([Buffer.from([0, 0, 8, H2_FRAME.PING, 0, 0, 0, 0, 0]), crypto.randomBytes(8)]);
    try {
      while (!raw.closed && Date.now() - started < 15_000) {
        raw.write(ping);
        await sleep(500);
      }
      const s = raw.summary();
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      obs.text = `${s.goaway ? `GOAWAY ${s.goaway.code}` : "no GOAWAY"}; ` +
        `${raw.closed ? `closed by the server after about ${secs} s` : `still open after ${secs} s`}`;
      assert.ok(raw.closed, "a connection that only pings is idle and must be closed");
    } finally {
      raw.close();
    }
  }, { timeout: 30_000 });

  row("HTTP/2 connection with an open watch and nothing else (--idle-timeout-ms 3000, control)", async (obs) => {
    const h2 = await H2.connect(guarded.url);
    try {
      const m = await metadata(h2, guarded.token);
      const endpoint = new URL(m.json.endpoints[0].url);
      // Watch { keys: [ WatchKey { key: ["exposure"] } ] }
      const key = Buffer.concat([Buffer.from([0x02]), Buffer.from("exposure"), Buffer.from([0x00])]);
      const watchKey = Buffer.concat([Buffer.from([0x0a, key.length]), key]);
      const body = Buffer.concat([Buffer.from([0x0a, watchKey.length]), watchKey]);
      const stream = h2.session.request({
        ":method": "POST", ":path": `${endpoint.pathname}/watch`, ...bearer(m.json.token),
        "x-denokv-version": String(m.json.version), "x-denokv-database-id": m.json.databaseId,
        "content-type": "application/x-protobuf",
      });
      let status;
      let bytes = 0;
      stream.on("response", (h) => { status = h[":status"]; });
      stream.on("data", (d) => { bytes += d.length; });
      stream.on("error", () => {});
      stream.end(body);
      await sleep(7_000);  // over twice the idle timeout
      obs.text = `watch ${status}, ${bytes} bytes of frames; connection ${h2.alive && !h2.goaway ? "still open" : "closed"} after 7 s`;
      assert.equal(status, 200);
      assert.ok(h2.alive && !h2.goaway, "an open watch stream is not idle");
      stream.close();
    } finally {
      h2.close();
    }
  }, { timeout: 30_000 });

  row("metadata exchange with a Host not in --allowed-host 127.0.0.1", async (obs) => {
    const ask = (host) => rawExchange(guarded.port, (s) => s.write(rawRequest([
      "POST / HTTP/1.1", `Host: ${host}`, `Authorization: Bearer ${guarded.token}`,
      "Content-Type: application/json", "Connection: close", `Content-Length: ${METADATA_BODY.length}`,
    ], METADATA_BODY)), { timeoutMs: 10_000 });
    const evil = await ask("evil.example");
    const good = await ask(`127.0.0.1:${guarded.port}`);
    obs.text = `${rawAnswer(evil)} ${JSON.stringify(http1Body(evil.text).trim())}; Host 127.0.0.1:${guarded.port}: ` +
      `${rawAnswer(good)}`;
    assert.match(statusLine(evil.text), /^HTTP\/1\.1 400/);
    assert.match(http1Body(evil.text), /--allowed-host/);
    assert.doesNotMatch(http1Body(evil.text), /evil\.example\/v2/);
    assert.match(statusLine(good.text), /^HTTP\/1\.1 200/);
  });

  row("a database's admin token lists databases: no server file path", async (obs) => {
    const token = await scopedAdmin("exposure-paths");
    const list = await pollUntil(() => fetch(`${guarded.url}/admin/v1/databases`, { headers: bearer(token) }),
      (r) => r.status === 200, { timeoutMs: 10_000, intervalMs: 150, what: "token known" });
    const json = await list.json();
    const full = await (await fetch(`${guarded.url}/admin/v1/databases`, { headers: bearer(guarded.token) })).json();
    const own = json.databases.find((d) => d.name === "exposure-paths");
    const seen = full.databases.find((d) => d.name === "exposure-paths");
    obs.text = `scoped admin: ${json.databases.length} database(s), location ${JSON.stringify(own?.location)}; ` +
      `bootstrap token: location ${seen?.location ? "(set)" : JSON.stringify(seen?.location)}`;
    assert.equal(json.databases.length, 1);
    assert.equal(own.location, "");
    if (guarded.dataDir) assert.ok(!JSON.stringify(json).includes(guarded.dataDir), "no data directory path");
    assert.ok(seen.location, "a server-wide token still sees where the database lives");
  });
});

// --- issue 20, items 2 and 3: backup destinations and rotated bootstrap tokens -------------
// Own servers (the backup flags and a restart do not fit the shared one). Names imported under
// their own aliases so other blocks appended here can import freely.
import {
  randomToken as scopeRandomToken, runKvconnect as scopeRunKvconnect, SERVER_BACKEND as SCOPE_BACKEND,
} from "./harness.mjs";

describe("hostile input: backup destinations and rotated bootstrap tokens", { timeout: 300_000 }, () => {
  // On PostgreSQL this server is started without --backup-to/--backup-allow, so there every
  // backup request is refused (403, "no backup destination").
  const pg = SCOPE_BACKEND === "postgres";
  let server;
  let defaultDest;
  let otherDest;
  let strayDir;

  before(async () => {
    const dests = await makeTempDir("kvconnect-e2e-dests-");
    defaultDest = `${dests}/default`;
    otherDest = `${dests}/other`;
    strayDir = `${dests}/stray`;
    server = await startServer({
      extraArgs: [
        "--catalog-poll-ms", "200",
        ...(pg ? [] : [
          "--backup-to", defaultDest,
          "--backup-allow", otherDest,
          "--backup-allow", "s3://allowed-bucket/kv",
          "--backup-min-interval-ms", "600000",
        ]),
      ],
    });
  });
  let rotated;
  after(async () => {
    if (server) await server.kill();
    if (rotated) await rotated.kill();
  });

  /** The server still runs and a metadata exchange + snapshot_read is served. */
  async function alive(target, what) {
    assert.ok(target.running, `the server exited after: ${what}`);
    await withH2(target.url, {}, async (h2) => {
      const m = await metadata(h2, target.token);
      assert.equal(m.status, 200, `metadata exchange after "${what}": ${describeAnswer(m)}`);
      const r = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
      assert.equal(r.status, 200, `snapshot_read after "${what}": ${describeAnswer(r)}`);
    });
  }

  function scopeRow(input, fn, { timeout = 60_000, skip, target = () => server } = {}) {
    test(input, { timeout, skip }, async () => {
      const obs = { text: "(no answer recorded)" };
      try {
        await fn(obs);
        await alive(target(), input);
        rows.push([input, `${obs.text}; then a normal client is served`]);
      } catch (e) {
        rows.push([input, `TEST FAILED — ${obs.text} — ${String(e.message).split("\n")[0]}`]);
        throw annotate(e, target());
      }
    });
  }

  /** POST /admin/v1/databases/DB/backup; {status, text, json, retryAfter}. */
  async function backupCall(db, body, token = server.token) {
    const res = await fetch(`${server.url}/admin/v1/databases/${db}/backup`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, text, json, retryAfter: res.headers.get("retry-after") };
  }
  const short = (r) => `${r.status} ${(r.json?.error ?? r.text).slice(0, 110)}`;
  const noBackups = /no backup destination/;

  scopeRow("admin backup `to` an absolute path the operator did not allow (bootstrap token)", async (obs) => {
    const r = await backupCall("default", { to: strayDir });
    obs.text = short(r);
    assert.equal(r.status, 403);
    assert.match(r.json.error, pg ? noBackups : /not one the operator allowed/);
    assert.ok(!fs.existsSync(strayDir), "nothing is written there");
  });

  scopeRow("admin backup `to` a relative path", async (obs) => {
    const r = await backupCall("default", { to: "backups/x" });
    obs.text = short(r);
    assert.equal(r.status, 400);
    assert.match(r.json.error, /relative path/);
    assert.ok(!fs.existsSync(`${server.dataDir}/backups`), "nothing is written in the working directory");
  });

  scopeRow("admin backup `to` the data directory itself, a path inside it, and one with `..` and a trailing slash", async (obs) => {
    const before = fs.readdirSync(server.dataDir).sort();
    const base = server.dataDir.split("/").pop();
    const answers = [];
    for (const to of [server.dataDir, `${server.dataDir}/sub`, `${server.dataDir}/x/../${base}-not/../y/`]) {
      const r = await backupCall("default", { to });
      answers.push(r);
      // On PostgreSQL the harness's directory is only the working directory: no destinations.
      assert.equal(r.status, pg ? 403 : 400, short(r));
      assert.match(r.json.error, pg ? noBackups : /inside the server's data directory/);
    }
    obs.text = answers.map(short).join(" / ");
    assert.deepEqual(fs.readdirSync(server.dataDir).sort(), before, "nothing new in the data directory");
  });

  scopeRow("admin backup `to` an s3:// URL the operator did not allow", async (obs) => {
    const r = await backupCall("default", { to: "s3://someone-elses-bucket/loot" });
    const sub = await backupCall("default", { to: "s3://allowed-bucket/kv/../other" });
    obs.text = `${short(r)}; with '..': ${short(sub)}`;
    assert.equal(r.status, 403);
    assert.match(r.json.error, pg ? noBackups : /not one the operator allowed/);
    assert.equal(sub.status, 400);
    assert.match(sub.json.error, /'\.' or '\.\.' segment/);
  });

  scopeRow("database-scoped admin token choosing an allowed destination other than the default", async (obs) => {
    const token = expectCliOk(await server.tokenCmd("create", "--db", "default", "--scope", "admin"), server).stdout.trim();
    const r = await backupCall("default", { to: otherDest }, token);
    const own = await backupCall("default", {}, token);
    obs.text = `${short(r)}; with no "to": ${short(own)}`;
    assert.equal(r.status, 403);
    assert.match(r.json.error, pg ? noBackups : /bound to one database/);
    assert.ok(!fs.existsSync(`${otherDest}/default`), "nothing is written to the other destination");
    if (pg) {
      assert.equal(own.status, 403);
    } else {
      assert.equal(own.status, 200, short(own));
      assert.ok(fs.existsSync(`${defaultDest}/default/snapshots`), "the default destination holds the snapshot");
    }
  });

  scopeRow("repeated admin backups of one database (--backup-min-interval-ms 600000)", async (obs) => {
    expectCliOk(await server.dbCmd("create", "rated"), server);
    const first = await backupCall("rated", { to: otherDest });
    const second = await backupCall("rated", {});
    const third = await backupCall("rated", { to: otherDest });
    obs.text = `${short(first)}; then ${short(second)}, Retry-After ${second.retryAfter}; then ${third.status}`;
    assert.equal(first.status, 200, short(first));
    for (const r of [second, third]) {
      assert.equal(r.status, 503, short(r));
      assert.match(r.json.error, /backed up less than 600000 ms ago/);
      assert.match(String(r.retryAfter), /^[1-9][0-9]*$/, `Retry-After is whole seconds >= 1: ${r.retryAfter}`);
    }
  }, { skip: pg && "PostgreSQL nodes take no online snapshots (no destination can be configured), so no backup ever runs to be repeated" });

  scopeRow("data-path token minted through bootstrap token A, after a restart with --access-token B", async (obs) => {
    const tokenA = scopeRandomToken();
    const tokenB = scopeRandomToken();
    const first = await startServer({ token: tokenA });
    rotated = first;
    let meta;
    await withH2(first.url, {}, async (h2) => {
      const m = await metadata(h2, tokenA);
      assert.equal(m.status, 200, describeAnswer(m));
      meta = m.json;
      const ok = await dataPath(h2, meta, "snapshot_read", fixture("snapshot_read_get"));
      assert.equal(ok.status, 200, `before the rotation: ${describeAnswer(ok)}`);
    });
    rotated = await first.restart({ token: tokenB });
    await withH2(rotated.url, {}, async (h2) => {
      const read = await dataPath(h2, meta, "snapshot_read", fixture("snapshot_read_get"));
      const write = await dataPath(h2, meta, "atomic_write", fixture("atomic_write_set"));
      const exchange = await metadata(h2, tokenA);
      obs.text = `snapshot_read: ${describeAnswer(read)}; atomic_write: ${write.status}; ` +
        `metadata exchange with A: ${describeAnswer(exchange)}`;
      for (const r of [read, write]) {
        assert.equal(r.status, 401, describeAnswer(r));
        assert.match(r.text, /authorization token is no longer valid.*bootstrap access token/);
      }
      assert.equal(exchange.status, 401);
    });
    const deno = expectDenoOk(await runDeno("basic.ts", { kvUrl: rotated.url, token: tokenB }), rotated);
    obs.text += `; Deno with B: ${deno.message ?? "ok"}`;
  }, { timeout: 120_000, target: () => rotated });

  // The answers come from a server that never started; the shared server of this block is
  // checked alive afterwards as for every row.
  scopeRow("serve --backup-to a relative path / --backup-allow inside the data directory (start-up)", async (obs) => {
    // A SQLite data directory on either backend: the flags are checked before anything starts.
    const dir = await makeTempDir();
    const answers = [];
    for (const flags of [["--backup-to", "backups"], ["--backup-allow", `${dir}/backups`]]) {
      const res = await scopeRunKvconnect(["serve", "--addr", "127.0.0.1:0", "--data-dir", dir,
        "--access-token", scopeRandomToken(), ...flags], { cwd: dir, timeoutMs: 20_000 });
      answers.push(res);
      assert.notEqual(res.code, 0, `serve ${flags.join(" ")} must not start: ${res.stderr}`);
      assert.ok(!res.timedOut, "it stops at once");
    }
    obs.text = answers.map((r) => `exit ${r.code}: ${r.stderr.trim().split("\n").pop().slice(0, 110)}`).join(" / ");
    assert.match(answers[0].stderr, /--backup-to: .*relative path/);
    assert.match(answers[1].stderr, /--backup-allow: .*inside the server's data directory/);
  });
});

// The metadata exchange's URL shapes (/databases/NAME[/connect], /v2/databases/NAME[/connect]):
// odd shapes are refused, and each row also checks that the well-formed shape beside it opens
// (so every row needs a server that knows the shapes). A token throttled to 1 request per second
// still opens: the exchange has its own budget (Deno's openKv gives up on a 503).
describe("hostile input: metadata URL shapes", { timeout: 120_000 }, () => {
  let server;
  before(async () => {
    server = await startServer({ extraArgs: ["--catalog-poll-ms", "200"] });
  });
  after(async () => {
    if (server) await server.kill();
  });

  function shapeRow(input, fn, { timeout = 60_000 } = {}) {
    test(input, { timeout }, async () => {
      const obs = { text: "(no answer recorded)" };
      try {
        await withH2(server.url, {}, async (h2) => {
          await fn(h2, obs);
          assert.ok(server.running, `the server exited after: ${input}`);
          const m = await metadata(h2, server.token, { reqPath: "/v2/databases/default" });
          assert.equal(m.status, 200, `the exchange at /v2/databases/default after "${input}": ${describeAnswer(m)}`);
          const r = await dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"));
          assert.equal(r.status, 200, `snapshot_read after "${input}": ${describeAnswer(r)}`);
        });
        rows.push([input, `${obs.text}; then a normal client is served`]);
      } catch (e) {
        rows.push([input, `TEST FAILED — ${obs.text} — ${String(e.message).split("\n")[0]}`]);
        throw annotate(e, server);
      }
    });
  }
  const short = (r) => `${r.status} ${r.text}`;

  shapeRow("POST /databases//connect (an empty name)", async (h2, obs) => {
    const odd = await metadata(h2, server.token, { reqPath: "/databases//connect" });
    const good = await metadata(h2, server.token, { reqPath: "/databases/default" });
    obs.text = `${short(odd)} (the router folds '//', so this names a database 'connect'); ` +
      `/databases/default: ${good.status}`;
    assert.equal(odd.status, 404, describeAnswer(odd));
    assert.equal(odd.text, "Database 'connect' not found.");
    assert.equal(good.status, 200, describeAnswer(good));
  });

  shapeRow("POST /v2/databases/x/y/connect and /v2/databases/default/connect/x (two segments)", async (h2, obs) => {
    const answers = [];
    for (const reqPath of ["/v2/databases/x/y/connect", "/v2/databases/default/connect/x", "/databases/default/x"]) {
      answers.push(await metadata(h2, server.token, { reqPath }));
    }
    const good = await metadata(h2, server.token, { reqPath: "/v2/databases/default/connect" });
    obs.text = `${answers.map(short).join(" / ")}; /v2/databases/default/connect: ${good.status}`;
    for (const a of answers) {
      assert.equal(a.status, 404, describeAnswer(a));
      assert.equal(a.text, "Resource not found.");
    }
    assert.equal(good.status, 200, describeAnswer(good));
  });

  shapeRow("POST /databases/%2e%2e, /databases/%2e%2e/connect, /v2/databases/.. (no decoding, no traversal)", async (h2, obs) => {
    const answers = [];
    for (const reqPath of ["/databases/%2e%2e", "/databases/%2e%2e/connect", "/v2/databases/..", "/databases/%64efault"]) {
      answers.push(await metadata(h2, server.token, { reqPath }));
    }
    const good = await metadata(h2, server.token, { reqPath: "/databases/default/connect" });
    obs.text = `${answers.map(short).join(" / ")}; /databases/default/connect: ${good.status}`;
    assert.deepEqual(answers.map((a) => [a.status, a.text]), [
      [404, "Database '%2e%2e' not found."],
      [404, "Database '%2e%2e' not found."],
      [404, "Database '..' not found."],
      [404, "Database '%64efault' not found."],
    ]);
    assert.equal(good.status, 200, describeAnswer(good));
  });

  // HEAD over HTTP/2 used to carry a body after the header block (on any route), which Node's
  // client answers with a stream reset (PROTOCOL_ERROR); now the header block ends the stream.
  shapeRow("GET, PUT, DELETE, HEAD (HTTP/2) and HEAD (HTTP/1.1) on /databases/NAME and /v2/databases/NAME[/connect]", async (h2, obs) => {
    const seen = {};
    const note = (key) => { seen[key] = (seen[key] ?? 0) + 1; };
    for (const reqPath of ["/databases/default", "/v2/databases/default", "/v2/databases/default/connect"]) {
      for (const method of ["GET", "PUT", "DELETE"]) {
        const r = await h2.request(reqPath, { method, headers: { authorization: `Bearer ${server.token}` } });
        note(`${r.status} ${r.text}`);
        assert.equal(r.status, 405, `${method} ${reqPath}: ${describeAnswer(r)}`);
        assert.equal(r.text, "Method not allowed; KV Connect uses POST.");
      }
      const head = await fetch(`${server.url}${reqPath}`, { method: "HEAD", headers: { authorization: `Bearer ${server.token}` } });
      note(`${head.status} (HEAD)`);
      assert.equal(head.status, 405, `HEAD ${reqPath}`);
      const h2head = await h2.request(reqPath, { method: "HEAD", headers: { authorization: `Bearer ${server.token}` } });
      note(`${h2head.status} (HEAD over HTTP/2, ${h2head.text.length} body bytes)`);
      assert.equal(h2head.status, 405, `HEAD ${reqPath} over HTTP/2: ${describeAnswer(h2head)}`);
      assert.equal(h2head.text, "", "a HEAD answer has no body");
    }
    // the connection is still good for the exchange
    const after = await metadata(h2, server.token, { reqPath: "/databases/default" });
    assert.equal(after.status, 200, describeAnswer(after));
    obs.text = Object.entries(seen).map(([k, n]) => `${n}× ${k}`).join(", ");
  });

  shapeRow("40 metadata exchanges at once by a token with --rate-limit 1", async (h2, obs) => {
    const created = expectCliOk(await server.tokenCmd("create", "--db", "default", "--scope", "write",
      "--rate-limit", "1"), server);
    const token = created.stdout.trim();
    await pollUntil(() => metadata(h2, token), (r) => r.status === 200, {
      timeoutMs: 10_000, intervalMs: 150, what: "the new token is known",
    });
    const shapes = ["/", "/databases/default", "/databases/default/connect", "/v2/databases/default",
      "/v2/databases/default/connect"];
    const answers = await Promise.all(Array.from({ length: 40 },
      (_, i) => metadata(h2, token, { reqPath: shapes[i % shapes.length] })));
    const counts = {};
    for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
    obs.text = `exchanges: ${Object.entries(counts).map(([k, n]) => `${n}× ${k}`).join(", ")}`;
    assert.deepEqual(counts, { 200: 40 }, "every exchange is answered 200");
    const m = answers.find((a) => a.status === 200);
    const data = await Promise.all(Array.from({ length: 5 },
      () => dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"))));
    const throttled = data.find((d) => d.status === 503);
    obs.text += `; 5 data calls then: ${data.map((d) => d.status).join(" ")}, ` +
      `Retry-After ${throttled?.headers["retry-after"]}`;
    assert.ok(throttled, "the data path is throttled (the bucket holds 1)");
    assert.match(String(throttled.headers["retry-after"]), /^[1-9][0-9]*$/);
  });
});

// --- issue 21, item 4: tokens of several databases, or of all ---------------------------------
// A token of several databases, or of all of them, is no server-wide token: with scope admin it
// is a database admin on each of its databases, and managing databases and tokens (and reading
// /metrics) still needs the bootstrap token. Own server; names imported under their own aliases.
import { validate as multiValidate } from "./admin_schema.mjs";
import { pollUntil as multiPollUntil } from "./raw_client.mjs";

describe("hostile input: tokens of several databases or all", { timeout: 300_000 }, () => {
  let server;
  before(async () => {
    server = await startServer({ extraArgs: ["--catalog-poll-ms", "200"] });
    for (const db of ["a", "b", "c"]) expectCliOk(await server.dbCmd("create", db), server);
  });
  after(async () => {
    if (server) await server.kill();
  });

  /** An admin API call; {status, json, text}. */
  async function api(method, apiPath, token, body) {
    const res = await fetch(`${server.url}${apiPath}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, json, text };
  }
  const short = (r) => `${r.status} ${(r.json?.error ?? r.text).slice(0, 100)}`;
  /** An admin call until the catalog poll has brought the token in (it is not 401). */
  const settled = (method, apiPath, token, body) =>
    multiPollUntil(() => api(method, apiPath, token, body), (r) => r.status !== 401, {
      timeoutMs: 10_000, intervalMs: 150, what: `${method} ${apiPath}`,
    });
  /** A token made through the admin API with the bootstrap token. */
  async function mint(body) {
    const r = await api("POST", "/admin/v1/tokens", server.token, body);
    assert.equal(r.status, 201, short(r));
    multiValidate("CreatedToken", r.json);
    return r.json;
  }

  function multiRow(input, fn) {
    test(input, { timeout: 60_000 }, async () => {
      const obs = { text: "(no answer recorded)" };
      try {
        await fn(obs);
        const m = await api("GET", "/admin/v1/databases", server.token);
        assert.equal(m.status, 200, `the bootstrap token still manages the server: ${short(m)}`);
        rows.push([input, `${obs.text}; then the bootstrap token is served`]);
      } catch (e) {
        rows.push([input, `TEST FAILED — ${obs.text} — ${String(e.message).split("\n")[0]}`]);
        throw annotate(e, server);
      }
    });
  }

  multiRow("bootstrap token: POST /admin/v1/tokens {databases:[a,b]}, list, DELETE", async (obs) => {
    const made = await mint({ databases: ["a", "b"], scope: "write", name: "ab" });
    assert.deepEqual(made.info.databases, ["a", "b"]);
    assert.equal(made.info.all_databases, false);
    const list = await api("GET", "/admin/v1/tokens", server.token);
    assert.equal(list.status, 200, short(list));
    multiValidate("TokenList", list.json);
    const listed = list.json.tokens.find((t) => t.id === made.info.id);
    assert.deepEqual(listed?.databases, ["a", "b"]);
    const gone = await api("DELETE", `/admin/v1/tokens/${made.info.id}`, server.token);
    assert.equal(gone.status, 200, short(gone));
    const again = await api("DELETE", `/admin/v1/tokens/${made.info.id}`, server.token);
    obs.text = `201 with databases [a, b]; listed with them; revoked 200, again ${short(again)}`;
    assert.equal(again.status, 409, short(again));
  });

  multiRow("POST /admin/v1/tokens naming databases two ways, none, or one that does not exist", async (obs) => {
    const answers = [];
    for (const body of [
      { database: "a", databases: ["b"], scope: "read" },
      { database: "a", all_databases: true, scope: "read" },
      { all_databases: false, scope: "read" },
      { databases: [], scope: "read" },
      { scope: "read" },
    ]) {
      const r = await api("POST", "/admin/v1/tokens", server.token, body);
      answers.push(r.status);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${short(r)}`);
    }
    const before = (await api("GET", "/admin/v1/tokens", server.token)).json.tokens.length;
    const missing = await api("POST", "/admin/v1/tokens", server.token, { databases: ["a", "nope"], scope: "read" });
    obs.text = `400 ×${answers.length}; with a missing database ${short(missing)}`;
    assert.equal(missing.status, 404, short(missing));
    const after = (await api("GET", "/admin/v1/tokens", server.token)).json.tokens.length;
    assert.equal(after, before, "no token made for a refused request");
  });

  multiRow("admin token of database a: mint a token for b, for a, for all databases", async (obs) => {
    const admin = (await mint({ database: "a", scope: "admin" })).token;
    const forB = await settled("POST", "/admin/v1/tokens", admin, { database: "b", scope: "write" });
    const forA = await api("POST", "/admin/v1/tokens", admin, { database: "a", scope: "write" });
    const forAll = await api("POST", "/admin/v1/tokens", admin, { all_databases: true, scope: "read" });
    obs.text = `for b: ${short(forB)}; for a: ${forA.status}; for all: ${forAll.status}`;
    for (const r of [forB, forA, forAll]) assert.equal(r.status, 403, short(r));
    assert.match(forB.json.error, /bound to one database/);
  });

  multiRow("admin token of databases a and b: mint tokens; reach c's entries; a's entries", async (obs) => {
    const admin = (await mint({ databases: ["a", "b"], scope: "admin" })).token;
    const mintAB = await settled("POST", "/admin/v1/tokens", admin, { databases: ["a", "b"], scope: "write" });
    const entriesC = await api("POST", "/admin/v1/databases/c/entries/count", admin, {});
    const entriesA = await api("POST", "/admin/v1/databases/a/entries/count", admin, {});
    const listed = await api("GET", "/admin/v1/databases", admin);
    obs.text = `mint: ${short(mintAB)}; c's entries: ${short(entriesC)}; a's entries: ${entriesA.status}; ` +
      `databases listed: ${listed.json?.databases?.map((d) => d.name).join(", ")}`;
    assert.equal(mintAB.status, 403, short(mintAB));
    assert.match(mintAB.json.error, /bound to its databases/);
    assert.equal(entriesC.status, 403, short(entriesC));
    assert.match(entriesC.json.error, /not valid for database 'c'/);
    assert.equal(entriesA.status, 200, short(entriesA));
    assert.deepEqual(listed.json.databases.map((d) => d.name).sort(), ["a", "b"]);
  });

  multiRow("admin token of all databases: tokens, databases, /metrics (server-wide operations)", async (obs) => {
    const admin = (await mint({ all_databases: true, scope: "admin" })).token;
    const answers = {
      "POST /admin/v1/tokens": await settled("POST", "/admin/v1/tokens", admin, { database: "a", scope: "admin" }),
      "GET /admin/v1/tokens": await api("GET", "/admin/v1/tokens", admin),
      "POST /admin/v1/databases": await api("POST", "/admin/v1/databases", admin, { name: "mine" }),
      "PATCH /admin/v1/databases/a": await api("PATCH", "/admin/v1/databases/a", admin, { name: "renamed" }),
      "DELETE /admin/v1/databases/c": await api("DELETE", "/admin/v1/databases/c", admin),
    };
    const metrics = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${admin}` } });
    await metrics.text();
    const listed = await api("GET", "/admin/v1/databases", admin);
    const entries = await api("POST", "/admin/v1/databases/c/entries/count", admin, {});
    obs.text = Object.entries(answers).map(([k, r]) => `${k} ${r.status}`).join(", ") +
      `, GET /metrics ${metrics.status}; its own work: GET /admin/v1/databases ${listed.status}, c's entries ${entries.status}`;
    for (const [k, r] of Object.entries(answers)) assert.equal(r.status, 403, `${k}: ${short(r)}`);
    assert.match(answers["POST /admin/v1/tokens"].json.error, /for every database, not for the server/);
    assert.equal(metrics.status, 403);
    assert.equal(listed.status, 200, short(listed));
    const names = listed.json.databases.map((d) => d.name).sort();
    assert.deepEqual(names, ["a", "b", "c", "default"]);
    for (const d of listed.json.databases) assert.equal(d.location, "", "not where the server keeps it");
    assert.equal(entries.status, 200, short(entries));
    const still = await api("GET", "/admin/v1/databases/c", server.token);
    assert.equal(still.status, 200, "c was not deleted");
  });
});

describe("hostile input: admin entries/children (the console's folders)", { timeout: 300_000 }, () => {
  let server;
  before(async () => {
    server = await startServer({ extraArgs: ["--catalog-poll-ms", "200"] });
  });
  after(async () => {
    if (server) await server.kill();
  });

  async function api(apiPath, token, body) {
    const res = await fetch(`${server.url}${apiPath}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: res.status, json, text };
  }
  const short = (r) => `${r.status} ${(r.json?.error ?? r.text).slice(0, 90)}`;
  const children = (body, token = server.token, db = "default") =>
    api(`/admin/v1/databases/${db}/entries/children`, token, body);

  function row(input, fn) {
    test(input, async () => {
      const obs = { text: "(no answer recorded)" };
      try {
        await fn(obs);
        const ok = await children({});
        assert.equal(ok.status, 200, `a normal request after "${input}": ${short(ok)}`);
        rows.push([input, `${obs.text}; then a normal request is served`]);
      } catch (e) {
        rows.push([input, `TEST FAILED — ${obs.text} — ${String(e.message).split("\n")[0]}`]);
        throw annotate(e, server);
      }
    });
  }

  row("entries/children: 20,000 one-entry parts, limit 1000; and their parent part (counts capped)", async (obs) => {
    const lines = [];
    for (let i = 0; i < 20_000; i++) {
      lines.push(JSON.stringify({
        key: [{ type: "string", value: "h" }, { type: "bigint", value: String(i) }],
        value: { type: "string", value: "x" }, versionstamp: "00000000000000010000",
      }));
    }
    const imported = await api("/admin/v1/databases/default/import", server.token, `${lines.join("\n")}\n`);
    assert.equal(imported.status, 200, short(imported));
    let t = Date.now();
    const page = await children({ prefix: [{ type: "string", value: "h" }], limit: 1000 });
    const pageMs = Date.now() - t;
    t = Date.now();
    const root = await children({});
    const rootMs = Date.now() - t;
    obs.text = `limit 1000: ${page.status}, ${page.json?.children?.length} parts, cursor ${page.json?.cursor ? "given" : "null"} ` +
      `(${pageMs} ms); the root: ${JSON.stringify(root.json?.children?.map((c) => [c.part.value, c.count, c.count_capped]))} (${rootMs} ms)`;
    assert.equal(page.status, 200, short(page));
    assert.equal(page.json.children.length, 1000);
    assert.ok(page.json.cursor);
    assert.deepEqual(root.json.children.map((c) => [c.part.value, c.count, c.count_capped]), [["h", 1000, true]]);
  });

  row("entries/children: a cursor naming a key outside the prefix", async (obs) => {
    const outside = Buffer.from([0x02, 0x7a, 0x00]).toString("base64url");  // ["z"]
    const r = await children({ prefix: [{ type: "string", value: "h" }], cursor: outside });
    obs.text = short(r);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { children: [], cursor: null });
  });

  row("entries/children: an 80,000-deep prefix, a 65-part prefix, limit 100000, a cursor of junk", async (obs) => {
    const answers = [
      await children(`{"prefix":${"[".repeat(80_000)}${"]".repeat(80_000)}}`),
      await children({ prefix: Array.from({ length: 65 }, () => ({ type: "string", value: "p" })) }),
      await children({ limit: 100_000 }),
      await children({ cursor: "%%%" }),
    ];
    obs.text = answers.map(short).join("; ");
    for (const a of answers) assert.equal(a.status, 400, short(a));
  });

  row("entries/children with a token of another database, and with a read token", async (obs) => {
    const created = await api("/admin/v1/databases", server.token, { name: "other" });
    assert.equal(created.status, 201, short(created));
    const mint = async (body) => {
      const r = await api("/admin/v1/tokens", server.token, body);
      assert.equal(r.status, 201, short(r));
      return r.json.token;
    };
    const otherAdmin = await mint({ database: "other", scope: "admin" });
    const reader = await mint({ database: "default", scope: "read" });
    const settle = (token) => multiPollUntil(() => children({}, token), (r) => r.status !== 401,
      { timeoutMs: 10_000, intervalMs: 150, what: "the new token" });
    const foreign = await settle(otherAdmin);
    const read = await settle(reader);
    const own = await children({}, otherAdmin, "other");
    obs.text = `other database's admin on default: ${short(foreign)}; read token: ${short(read)}; on its own: ${own.status}`;
    assert.equal(foreign.status, 403);
    assert.equal(read.status, 403);
    assert.equal(own.status, 200, short(own));
  });
});

// Hostile storage specs (issue 23, one storage spec): every command that opens a storage
// (`serve --storage`, its short forms --postgres and --data-dir, `db`, `export`, `backup`) refuses
// them as bad input (exit 2) before anything is opened, connected to or created, and never
// echoes what may be a password.
describe("hostile storage specs", { timeout: 120_000 }, () => {
  const secret = "hunter2-never-in-logs";
  const specs = [
    `mysql:host=db password=${secret}`,
    `host=db password=${secret}`,
    `postgres:host=db password=${secret} bogus`,
    `postgres:host='db password=${secret}`,
    `postgres:password ${secret}`,
    "sqlite:",
    "postgres:",
  ];
  let kvc;
  let work;
  before(async () => {
    const harness = await import("./harness.mjs");
    work = await harness.makeTempDir("kvconnect-spec-");
    kvc = (args) => harness.runKvconnect(args, { cwd: work, env: { KVCONNECT_POSTGRES: "" } });
  });

  test("refused with exit 2, no secret echoed, nothing created", async () => {
    for (const spec of specs) {
      for (const args of [
        ["serve", "--addr", "127.0.0.1:0", "--storage", spec],
        ["db", "list", "--storage", spec],
        ["export", "--storage", spec],
        ["backup", "--all", "--to", `${work}/bk`, "--storage", spec],
      ]) {
        const res = await kvc(args);
        const what = `${res.command}: code=${res.code}\n${res.stderr}`;
        assert.equal(res.code, 2, what);
        assert.ok(!res.stderr.includes(secret) && !res.stdout.includes(secret), what);
        assert.deepEqual(fs.readdirSync(work), [], what);
      }
    }
    // The short form --postgres goes through the same check: a conninfo libpq cannot parse is
    // refused without a connection attempt.
    const res = await kvc(["db", "list", "--postgres", `host=db password=${secret} bogus`]);
    assert.equal(res.code, 2, res.stderr);
    assert.ok(!res.stderr.includes(secret), res.stderr);
    assert.match(res.stderr, /conninfo does not parse/);
  });
});
