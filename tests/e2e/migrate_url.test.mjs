// `kvconnect migrate --from URL`: a source kvconnect stands in for Deno Deploy (any KV Connect
// server). Real Deno 2.9.6 writes every value type and key-part type (export_import.ts), plus a
// key that is no Deno key through the admin API. The importer copies it over h2c and over TLS
// with HTTP/2 into SQLite, PostgreSQL, a running server and NDJSON; the digests of both sides
// agree and Deno reads every copy back equal to the source. A `kill -9` of the importer mid-copy
// is resumed with --resume; a write to the source during the copy is reported; bad inputs (a
// wrong token, a web server that is not KV Connect, a 404, garbage protobuf) fail clearly
// without writing; 5xx and an expired data-path token are retried as Deno does.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import http2 from "node:http2";
import path from "node:path";
import {
  expectCliOk, expectDenoOk, freshPgDatabase, kvconnectBin, makeCerts, makeTempDir, randomToken,
  removeTempDirs, runDeno, runKvconnect, sleep, startServer,
} from "./harness.mjs";

after(removeTempDirs);

// Deno reads one DENO_KV_ACCESS_TOKEN per process: every server of this file takes this one.
const TOKEN = randomToken();
const RAW_KEY = [{ type: "raw", value: "mWFiYw" }]; // the bytes 99 61 62 63: no Deno key

async function admin(server, db, what, body) {
  const res = await fetch(`${server.url}/admin/v1/databases/${db}/${what}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}` },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

async function rawEntry(server, db) {
  const r = await admin(server, db, "entries/get", { key: RAW_KEY, raw: true });
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text).entry;
}

function migrate(args, { timeoutMs = 120_000, env = {} } = {}) {
  return runKvconnect(["migrate", ...args], { timeoutMs, env });
}

// The digests the importer printed: { source: {entries, sha}, destination: {entries, sha} }.
function digests(stderr) {
  const grab = (side) => {
    const m = stderr.match(new RegExp(`${side}\\s+entries (\\d+)\\s+(?:dump )?bytes \\d+\\s+sha256 ([0-9a-f]{64})`));
    assert.ok(m, `no ${side} digest in:\n${stderr}`);
    return { entries: Number(m[1]), sha: m[2] };
  };
  return { source: grab("source \\(re-read\\)"), destination: grab("destination") };
}

function expectMatch(res, entries, ...servers) {
  expectCliOk(res, ...servers);
  const d = digests(res.stderr);
  assert.equal(d.source.entries, entries, res.stderr);
  assert.deepEqual(d.destination, d.source, res.stderr);
  assert.match(res.stderr, /match: the destination holds what the source holds now/);
  assert.match(res.stderr, /queue messages \(KV Connect cannot list them\)/);
  assert.match(res.stderr, /expiry/);
  return d;
}

async function compareWithDeno(source, copyUrl, { sameStamps = false, servers = [] } = {}) {
  const res = await runDeno("migrate_url.ts", {
    kvUrl: source.url,
    token: TOKEN,
    env: { KV_URL_COPY: copyUrl, KV_SAME_VERSIONSTAMPS: sameStamps ? "1" : "0" },
  });
  return expectDenoOk(res, source, ...servers);
}

function lines(file) {
  if (!fs.existsSync(file)) return 0;
  const text = fs.readFileSync(file, "utf8");
  return text.split("\n").length - 1;
}

// Rows of `db` in a data directory, read by `kvconnect export` (a reader: fine beside a writer).
async function rowsIn(dir, db = "default") {
  const r = await runKvconnect(["export", "--data-dir", dir, "--db", db]);
  return r.code === 0 ? r.stdout.split("\n").length - 1 : 0;
}

// Starts the importer as a child we can SIGKILL; resolves {code, signal, stderr} at its exit.
function spawnImporter(args) {
  const proc = spawn(kvconnectBin(), ["migrate", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (d) => (stderr += d));
  proc.stdout.resume();
  const exited = new Promise((resolve) => proc.once("close", (code, signal) => resolve({ code, signal, stderr })));
  return { proc, exited, stderr: () => stderr };
}

async function waitFor(what, check, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe("migrate --from a KV Connect server", { timeout: 600_000 }, () => {
  let certs;
  let src;
  let dst;
  let written;

  before(async () => {
    certs = await makeCerts(await makeTempDir("kvconnect-e2e-certs-"));
    src = await startServer({ token: TOKEN, tlsCert: certs.cert, tlsKey: certs.key, tlsPort: true });
    dst = await startServer({ token: TOKEN });
    const wrote = expectDenoOk(await runDeno("export_import.ts", {
      kvUrl: src.url, token: TOKEN, env: { KV_MODE: "write" },
    }), src);
    const raw = await admin(src, "default", "entries/set", { key: RAW_KEY, value: { type: "string", value: "raw key" } });
    assert.equal(raw.status, 200, raw.text);
    written = wrote.written + 1;
  });

  after(async () => {
    await src?.kill();
    await dst?.kill();
  });

  test("over h2c into SQLite: digests equal, Deno reads the same values and versionstamps", async () => {
    const dir = path.join(await makeTempDir("kvconnect-e2e-dst-"), "data");
    const res = await migrate(["--from", src.url, "--from-token", TOKEN, "--to", `sqlite:${dir}`]);
    expectMatch(res, written, src);
    assert.match(res.stderr, /KV Connect protocol 3/);
    assert.match(res.stderr, /HTTP\/2/);
    const copy = await startServer({ dataDir: dir, token: TOKEN });
    try {
      const cmp = await compareWithDeno(src, copy.url, { sameStamps: true, servers: [copy] });
      assert.equal(cmp.compared, written - 1);
      const a = await rawEntry(src, "default");
      const b = await rawEntry(copy, "default");
      assert.deepEqual(b.raw, a.raw, "the raw key's value bytes");
      assert.equal(b.versionstamp, a.versionstamp);
    } finally {
      await copy.kill();
    }
  });

  test("over TLS with HTTP/2, Deploy's URL shape, into a running server (its admin import API)", async () => {
    // https://HOST/v2/databases/<id>/connect, as a Deploy database's KV Connect URL reads.
    const res = await migrate([
      "--from", `${src.tlsUrl}/v2/databases/default/connect`, "--from-token", TOKEN, "--from-ca-file", certs.ca,
      "--to", dst.url, "--to-token", TOKEN, "--db", "fromtls",
    ]);
    expectMatch(res, written, src, dst);
    assert.match(res.stderr, /https:\/\/.*HTTP\/2/);
    assert.match(res.stderr, /new versionstamp/);
    await compareWithDeno(src, `${dst.url}/databases/fromtls/connect`, { servers: [dst] });
    assert.deepEqual((await rawEntry(dst, "fromtls")).raw, (await rawEntry(src, "default")).raw);
    // The token from the environment, as Deno takes it; a second run is refused (not empty).
    const again = await migrate(["--from", src.url, "--to", dst.url, "--db", "fromtls"], {
      env: { DENO_KV_ACCESS_TOKEN: TOKEN, KVCONNECT_ACCESS_TOKEN: TOKEN },
    });
    assert.equal(again.code, 4, again.stderr);
    assert.match(again.stderr, /already holds entries .*--resume/);
  });

  test("into PostgreSQL", async () => {
    const conninfo = await freshPgDatabase();
    const res = await migrate(["--from", src.url, "--from-token", TOKEN, "--to", `postgres:${conninfo}`, "--db", "imported"]);
    expectMatch(res, written, src);
    const copy = await startServer({ postgres: conninfo, token: TOKEN });
    try {
      await compareWithDeno(src, `${copy.url}/databases/imported/connect`, { sameStamps: true, servers: [copy] });
      // The database the import created carries the source's id, so a URL that names it by id
      // (Deploy's /v2/databases/<id>/connect) works with only the host changed.
      const idOf = async (server, name) => {
        const res = await fetch(`${server.url}/admin/v1/databases`, { headers: { authorization: `Bearer ${server.token}` } });
        assert.equal(res.status, 200);
        return (await res.json()).databases.find((d) => d.name === name)?.id;
      };
      const sourceId = await idOf(src, "default");
      assert.match(sourceId ?? "", /^[0-9a-f-]{36}$/);
      assert.equal(await idOf(copy, "imported"), sourceId, "the new database keeps the source's id");
      await compareWithDeno(src, `${copy.url}/v2/databases/${sourceId}/connect`, { sameStamps: true, servers: [copy] });
    } finally {
      await copy.kill();
    }
  });

  test("into NDJSON: exactly the export format, which import reads back", async () => {
    const dir = await makeTempDir("kvconnect-e2e-ndjson-");
    const file = path.join(dir, "copy.ndjson");
    const res = await migrate(["--from", src.url, "--from-token", TOKEN, "--to", `ndjson:${file}`]);
    expectMatch(res, written, src);
    const exported = expectCliOk(await runKvconnect(["export", "--url", src.url, "--token", TOKEN]), src);
    assert.equal(fs.readFileSync(file, "utf8"), exported.stdout, "the same bytes as kvconnect export");
    // To stdout, over HTTP/1.1 this time, with the token from a file (as serve's secrets: a file
    // others may read is refused).
    const tokenFile = path.join(dir, "source-token");
    fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o644 });
    const open = await migrate(["--from", src.url, "--from-token-file", tokenFile, "--to", "ndjson:-"]);
    assert.equal(open.code, 2, open.stderr);
    assert.match(open.stderr, /chmod/);
    fs.chmodSync(tokenFile, 0o600);
    // DENO_KV_PATH_PREFIX's shape, /databases/NAME (tried with /connect where that is a 404).
    const out = await migrate(["--from", `${src.url}/databases/default`, "--from-token-file", tokenFile, "--from-http1",
      "--to", "ndjson:-"]);
    expectCliOk(out, src);
    assert.equal(out.stdout, exported.stdout);
    assert.match(out.stderr, /HTTP\/1\.1/);
    assert.match(out.stderr, /stdout cannot be read back/);
    expectCliOk(await dst.dbCmd("create", "fromdump"), dst);
    expectCliOk(await runKvconnect(["import", "--db", "fromdump", "--url", dst.url, "--token", TOKEN, "-i", file]), dst);
    await compareWithDeno(src, `${dst.url}/databases/fromdump/connect`, { servers: [dst] });
  });

  describe("a large source", () => {
    const N = 20_000;
    let big;

    before(async () => {
      big = await startServer({ token: TOKEN });
      const dir = await makeTempDir("kvconnect-e2e-big-");
      const dump = path.join(dir, "big.ndjson");
      const pad = "x".repeat(100);
      let text = "";
      for (let i = 0; i < N; i++) {
        text += JSON.stringify({
          key: [{ type: "string", value: "big" }, { type: "number", value: i }],
          value: { type: "object", value: { i: { type: "number", value: i }, pad: { type: "string", value: pad } } },
          versionstamp: "00000000000000010000",
        }) + "\n";
      }
      fs.writeFileSync(dump, text);
      expectCliOk(await runKvconnect(["import", "--url", big.url, "--token", TOKEN, "-i", dump], { timeoutMs: 120_000 }), big);
    });

    after(async () => {
      await big?.kill();
    });

    test("kill -9 of the importer mid-copy, then --resume completes with equal digests", async () => {
      const dir = path.join(await makeTempDir("kvconnect-e2e-resume-"), "data");
      const args = ["--from", big.url, "--from-token", TOKEN, "--to", `sqlite:${dir}`, "--page", "100"];
      const run = spawnImporter([...args, "--max-rate", "2000"]);
      await waitFor("rows at the destination", async () => (await rowsIn(dir)) >= 1000);
      run.proc.kill("SIGKILL");
      const killed = await run.exited;
      assert.equal(killed.signal, "SIGKILL", killed.stderr);
      const before = await rowsIn(dir);
      assert.ok(before > 0 && before < N, `${before} rows after the kill`);
      const refused = await migrate(args);
      assert.equal(refused.code, 4, refused.stderr);
      assert.match(refused.stderr, /already holds entries \(the last is .*\): continue an interrupted import with --resume/);
      const resumed = await migrate([...args, "--resume"]);
      expectMatch(resumed, N, big);
      assert.match(resumed.stderr, /Resuming after the last key the destination holds/);
      const copied = Number(resumed.stderr.match(/Copied (\d+) entries/)[1]);
      assert.ok(copied > 0 && copied <= N - before, `copied ${copied} after ${before}`);
      assert.equal(await rowsIn(dir), N);
    });

    test("an NDJSON file cut mid-line is resumed after its last whole line", async () => {
      const file = path.join(await makeTempDir("kvconnect-e2e-resume-"), "big.ndjson");
      const args = ["--from", big.url, "--from-token", TOKEN, "--to", `ndjson:${file}`, "--page", "100"];
      const run = spawnImporter([...args, "--max-rate", "2000"]);
      await waitFor("lines in the file", () => lines(file) >= 1000);
      run.proc.kill("SIGKILL");
      await run.exited;
      // What a crash inside a write leaves: half a line.
      fs.appendFileSync(file, '{"key":[{"type":"string","value":"bi');
      const resumed = await migrate([...args, "--resume"]);
      expectMatch(resumed, N, big);
      const exported = expectCliOk(await runKvconnect(["export", "--url", big.url, "--token", TOKEN], { timeoutMs: 60_000 }), big);
      assert.equal(fs.readFileSync(file, "utf8"), exported.stdout);
    });

    test("a write to the source during the copy is reported", async () => {
      const file = path.join(await makeTempDir("kvconnect-e2e-moving-"), "moving.ndjson");
      const run = spawnImporter([
        "--from", big.url, "--from-token", TOKEN, "--to", `ndjson:${file}`, "--page", "100", "--max-rate", "4000",
      ]);
      await waitFor("lines in the file", () => lines(file) >= 2000);
      // A key before every copied one: the copy has passed it, the re-read sees it.
      const w = await admin(big, "default", "entries/set", { key: [{ type: "string", value: "a" }], value: { type: "number", value: 1 } });
      assert.equal(w.status, 200, w.text);
      const res = await run.exited;
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stderr, /DIFFERS/);
      assert.match(res.stderr, /The source changed during the copy: 1 entry has a versionstamp newer than any the copy saw/);
      const d = digests(res.stderr);
      assert.equal(d.source.entries, N + 1);
      assert.equal(d.destination.entries, N);
    });
  });

  describe("bad input", () => {
    // An h2c server (as Deno speaks) that answers every request with `handler`.
    async function fakeServer(handler) {
      const server = http2.createServer();
      server.on("stream", (stream, headers) => {
        let body = Buffer.alloc(0);
        stream.on("data", (d) => (body = Buffer.concat([body, d])));
        stream.on("end", () => handler(stream, headers[":path"], body));
      });
      await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
      return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
    }
    const METADATA = (expiresAt = "2099-01-01T00:00:00Z") => JSON.stringify({
      version: 3,
      databaseId: "00000000-0000-0000-0000-000000000000",
      endpoints: [{ url: "/v2", consistency: "strong" }],
      token: "data-token",
      expiresAt,
    });
    // A SnapshotReadOutput of one empty range, read_is_strongly_consistent, status SR_SUCCESS.
    const EMPTY_READ = Buffer.from([0x0a, 0x00, 0x20, 0x01, 0x40, 0x01]);

    test("a wrong token: the server's text, nothing written", async () => {
      const file = path.join(await makeTempDir("kvconnect-e2e-bad-"), "out.ndjson");
      const res = await migrate(["--from", src.url, "--from-token", "not-the-token-at-all", "--to", `ndjson:${file}`]);
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stderr, /the source refused the access token \(HTTP 401\): Invalid access token/);
      assert.ok(!fs.existsSync(file), "no destination file");
      const none = await migrate(["--from", src.url, "--to", `ndjson:${file}`], { env: { DENO_KV_ACCESS_TOKEN: "" } });
      assert.equal(none.code, 2, none.stderr);
      assert.match(none.stderr, /DENO_KV_ACCESS_TOKEN/);
    });

    test("a web server that is not KV Connect, and a 404", async () => {
      const web = await fakeServer((stream, p) => {
        if (p === "/missing") {
          stream.respond({ ":status": 404, "content-type": "text/plain" });
          stream.end("Not Found");
          return;
        }
        stream.respond({ ":status": 200, "content-type": "text/html" });
        stream.end("<!DOCTYPE html><html><body>Welcome</body></html>");
      });
      try {
        const dir = path.join(await makeTempDir("kvconnect-e2e-bad-"), "data");
        const html = await migrate(["--from", web.url, "--from-token", TOKEN, "--to", `sqlite:${dir}`]);
        assert.equal(html.code, 2, html.stderr);
        assert.match(html.stderr, /is not a KV Connect server: .*text\/html.*Welcome/);
        assert.ok(!fs.existsSync(dir), "no destination made");
        const missing = await migrate(["--from", `${web.url}/missing`, "--from-token", TOKEN, "--to", `sqlite:${dir}`]);
        assert.equal(missing.code, 3, missing.stderr);
        assert.match(missing.stderr, /is not a KV Connect metadata URL \(HTTP 404: Not Found\)/);
      } finally {
        web.close();
      }
    });

    test("a source answering garbage protobuf: a clear error, no row written", async () => {
      const junk = await fakeServer((stream, p) => {
        if (p === "/") {
          stream.respond({ ":status": 200, "content-type": "application/json" });
          stream.end(METADATA());
          return;
        }
        stream.respond({ ":status": 200, "content-type": "application/x-protobuf" });
        stream.end(Buffer.from("\x0a\xff\xff\xff\xff\x0f garbage that is no protobuf"));
      });
      try {
        const dir = path.join(await makeTempDir("kvconnect-e2e-bad-"), "data");
        const res = await migrate(["--from", junk.url, "--from-token", TOKEN, "--to", `sqlite:${dir}`]);
        assert.equal(res.code, 1, res.stderr);
        assert.match(res.stderr, /the source's answer to snapshot_read is not KV Connect/);
        assert.equal(await rowsIn(dir), 0);
      } finally {
        junk.close();
      }
    });

    test("5xx is retried, an expired or refused data-path token re-does the metadata exchange", async () => {
      let exchanges = 0;
      let reads = 0;
      const flaky = await fakeServer((stream, p) => {
        if (p === "/") {
          exchanges++;
          stream.respond({ ":status": 200, "content-type": "application/json" });
          // The first token has expired already: renewed before the first data call.
          stream.end(METADATA(exchanges === 1 ? "2000-01-01T00:00:00Z" : undefined));
          return;
        }
        reads++;
        if (reads === 1) {
          stream.respond({ ":status": 503, "content-type": "text/plain" });
          stream.end("The server is temporarially unavailable, try again later.");
        } else if (reads === 2) {
          stream.respond({ ":status": 401, "content-type": "text/plain" });
          stream.end("Invalid authorization token (expired).");
        } else {
          stream.respond({ ":status": 200, "content-type": "application/x-protobuf" });
          stream.end(EMPTY_READ);
        }
      });
      try {
        const file = path.join(await makeTempDir("kvconnect-e2e-flaky-"), "out.ndjson");
        const res = await migrate(["--from", flaky.url, "--from-token", TOKEN, "--to", `ndjson:${file}`]);
        expectCliOk(res);
        assert.match(res.stderr, /HTTP 503.*retrying in \d+ ms/);
        assert.match(res.stderr, /HTTP 401.*exchanging metadata again/);
        assert.match(res.stderr, /the data-path token expired; exchanging metadata again/);
        assert.equal(exchanges, 3);
        assert.equal(lines(file), 0);
      } finally {
        flaky.close();
      }
    });
  });
});
