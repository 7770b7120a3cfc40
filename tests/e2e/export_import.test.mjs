// Export and import with the real binary and the real Deno client: Deno writes every value
// type, the database is exported three ways (CLI through the admin API, CLI on the data
// directory while the server runs, the admin API itself), the dumps agree, they are imported
// into other databases three ways (CLI through the API, the API itself, the CLI offline with
// the server stopped), and Deno reads every copy back equal to the original (`list`), with new
// versionstamps. Also: the offline import refuses while a server holds the data directory, and
// a bad line is reported by its number.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  annotate, expectCliOk, expectDenoOk, makeTempDir, removeTempDirs, runDeno, runKvconnect, startServer,
} from "./harness.mjs";

after(removeTempDirs);

const connectUrl = (server, db) => `${server.url}/databases/${db}/connect`;

async function api(server, db, what, body, query = "") {
  const res = await fetch(`${server.url}/admin/v1/databases/${db}/${what}${query}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}` },
    body,
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

function withoutVersionstamps(dump) {
  return dump.replace(/"versionstamp":"[0-9a-f]{20}"/g, '"versionstamp":"-"');
}

async function compare(server, from, to) {
  const res = await runDeno("export_import.ts", {
    kvUrl: connectUrl(server, from),
    token: server.token,
    env: { KV_MODE: "compare", KV_URL_COPY: connectUrl(server, to) },
  });
  return expectDenoOk(res, server);
}

test("export and import round-trip every value type Deno writes", { timeout: 240_000 }, async () => {
  let server = await startServer();
  try {
    for (const db of ["src", "viacli", "viaapi", "offline"]) expectCliOk(await server.dbCmd("create", db), server);
    const wrote = expectDenoOk(await runDeno("export_import.ts", {
      kvUrl: connectUrl(server, "src"), token: server.token, env: { KV_MODE: "write" },
    }), server);
    assert.ok(wrote.written >= 39);

    const dir = await makeTempDir("kvconnect-dump-");
    const viaUrl = path.join(dir, "url.ndjson");
    const direct = path.join(dir, "direct.ndjson");
    const urlArgs = ["--url", server.url, "--token", server.token];
    const ex1 = expectCliOk(await runKvconnect(["export", "--db", "src", ...urlArgs, "-o", viaUrl]), server);
    assert.match(ex1.stderr, new RegExp(`Exported ${wrote.written} entries`));
    // On the data directory while the server runs: a reader needs no claim.
    expectCliOk(await server.cli(["export", "--db", "src", "-o", direct]), server);
    const fromApi = await api(server, "src", "export", "");
    assert.equal(fromApi.status, 200, fromApi.text);
    assert.equal(fromApi.headers.get("content-type"), "application/x-ndjson");
    assert.match(fromApi.headers.get("x-kvc-versionstamp"), /^[0-9a-f]{20}$/);
    const dump = fs.readFileSync(viaUrl, "utf8");
    assert.equal(dump.trim().split("\n").length, wrote.written);
    assert.equal(fs.readFileSync(direct, "utf8"), dump, "CLI --url and --data-dir exports");
    assert.equal(fromApi.text, dump, "admin API and CLI exports");
    for (const line of dump.trim().split("\n")) {
      const e = JSON.parse(line);
      assert.ok(Array.isArray(e.key) && e.value?.type && /^[0-9a-f]{20}$/.test(e.versionstamp), line);
    }
    const sample = dump.split("\n").find((l) => l.includes('"KvU64 max"'));
    assert.match(sample, /"value":\{"type":"KvU64","value":"18446744073709551615"\}/);

    // Import: the CLI through the server, and the API itself.
    const im = expectCliOk(await runKvconnect(["import", "--db", "viacli", ...urlArgs, "-i", viaUrl]), server);
    assert.match(im.stderr, new RegExp(`Imported ${wrote.written} entries`));
    assert.match(im.stderr, /new versionstamps/);
    const imApi = await api(server, "viaapi", "import", dump, "?mode=replace");
    assert.equal(imApi.status, 200, imApi.text);
    assert.equal(JSON.parse(imApi.text).entries, wrote.written);
    const copy = await api(server, "viacli", "export", "");
    assert.equal(withoutVersionstamps(copy.text), withoutVersionstamps(dump), "export of the copy");
    for (const db of ["viacli", "viaapi"]) {
      const got = await compare(server, "src", db);  // (also sums into a KvU64 of the copy)
      assert.equal(got.compared, wrote.written, db);
    }

    // The offline import refuses while the server holds the data directory.
    const refused = await server.cli(["import", "--db", "offline", "-i", viaUrl]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /another kvconnect process writes to the data directory .* pid \d+/);
    assert.match(refused.stderr, /--url/);

    // A bad line: its number, and what was written before it.
    const bad = path.join(dir, "bad.ndjson");
    const lines = dump.trim().split("\n");
    lines.splice(20, 0, '{"key":[{"type":"string","value":"x"}],"value":{"type":"nope"},"versionstamp":"00000000000000010000"}');
    fs.writeFileSync(bad, lines.join("\n") + "\n");
    const badRun = await runKvconnect(["import", "--db", "viacli", ...urlArgs, "--batch", "10", "-i", bad]);
    assert.equal(badRun.code, 2, badRun.stderr);
    assert.match(badRun.stderr, /error: line 21: /);
    assert.match(badRun.stderr, /the 20 entries of lines 1-20 \(2 complete batches\) were imported/);

    // With the server stopped, the offline import takes the claim and writes directly.
    await server.stop();
    const off = expectCliOk(await runKvconnect(["import", "--db", "offline", "--data-dir", server.dataDir, "-i", direct]));
    assert.match(off.stderr, new RegExp(`Imported ${wrote.written} entries`));
    server = await server.restart();
    const got = await compare(server, "src", "offline");
    assert.equal(got.compared, wrote.written);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});
