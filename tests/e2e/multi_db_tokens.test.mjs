// One access token for several databases (`kvconnect token create --db a --db b`) or for all
// of them (`--all-databases`), driven by the real Deno 2.9.6 CLI and by @deno/kv under Node:
// one DENO_KV_ACCESS_TOKEN opens /databases/a/connect and /databases/b/connect (each with its
// own data), and database c refuses it with the 403 a token of another database gets; an
// --all-databases token opens a database created after it; `token list` shows what each token
// opens, `--db X` lists the tokens that open X; deleting one of a token's databases leaves it
// the others; revoking it closes them all.
import { after, before, describe } from "node:test";
import assert from "node:assert/strict";
import { openKv } from "@deno/kv";
import { annotatedTest, describeRun, expectCliOk, expectDenoOk, removeTempDirs, runDeno, startServer, waitFor } from "./harness.mjs";
import { nodeV8Codec } from "./node_v8.mjs";

const TOKEN_RE = /^kvt_([0-9a-f]{16})_([0-9a-f]{64})$/;
const WRONG_DB = (db) => new RegExp(`This access token is not valid for database '${db}'\\.`);

describe("one token, several databases", { timeout: 300_000 }, () => {
  let server;
  const connectUrl = (db) => `${server.url}/databases/${db}/connect`;

  before(async () => {
    server = await startServer({ extraArgs: ["--catalog-poll-ms", "200"] });
    for (const db of ["a", "b", "c"]) expectCliOk(await server.dbCmd("create", db), server);
  });
  after(async () => {
    if (server) await server.kill();
    await removeTempDirs();
  });

  async function createToken(...args) {
    const res = expectCliOk(await server.tokenCmd("create", ...args), server);
    const token = res.stdout.trim();
    const m = TOKEN_RE.exec(token);
    assert.ok(m, `token create printed ${JSON.stringify(res.stdout)}`);
    return { token, id: m[1], stderr: res.stderr };
  }

  /** Runs one_token_databases.ts with `token` as the one DENO_KV_ACCESS_TOKEN. */
  async function denoOpens(token, targets) {
    return await runDeno("one_token_databases.ts", {
      kvUrl: targets[0].url,
      token,
      env: { KV_OPEN: JSON.stringify(targets) },
    });
  }

  /** @deno/kv: open `db` with `token`, write and read back a value; the error text if refused. */
  async function nodeOpens(token, db) {
    let kv;
    try {
      kv = await openKv(connectUrl(db), { accessToken: token, ...nodeV8Codec });
      const key = ["node_one_token", db];
      const r = await kv.set(key, `node ${db}`);
      assert.ok(r.ok);
      const e = await kv.get(key);
      return { ok: true, value: e.value };
    } catch (e) {
      return { ok: false, message: String(e?.message ?? e) };
    } finally {
      try {
        kv?.close();
      } catch {
        // already closed
      }
    }
  }

  const t = annotatedTest(() => server);

  let multi;
  t("token create --db a --db b: one DENO_KV_ACCESS_TOKEN opens a and b in Deno, c answers 403", async () => {
    multi = await createToken("--db", "a", "--db", "b", "--scope", "write", "--name", "ab");
    assert.match(multi.stderr, /for databases a,b/);
    const res = await denoOpens(multi.token, [
      { label: "a", url: connectUrl("a"), expect: "ok" },
      { label: "b", url: connectUrl("b"), expect: "ok" },
      { label: "c", url: connectUrl("c"), expect: "refused" },
    ]);
    const summary = expectDenoOk(res, server);
    console.log(describeRun(res).split("--- stderr ---")[0]);
    assert.deepEqual(summary.opened, ["a", "b"]);
    assert.match(summary.refused.c, /403/);
    assert.match(summary.refused.c, WRONG_DB("c"));
    // As an app written for Deploy opens them: one environment pair, Deno.openKv("a") and
    // Deno.openKv("b") under DENO_KV_PATH_PREFIX (Deno POSTs to /databases/NAME).
    const viaPrefix = await runDeno("one_token_databases.ts", {
      kvUrl: server.url,
      token: multi.token,
      env: {
        DENO_KV_PATH_PREFIX: `${server.url}/databases/`,
        KV_OPEN: JSON.stringify([
          { label: "a", url: "a", expect: "ok" },
          { label: "b", url: "b", expect: "ok" },
          { label: "c", url: "c", expect: "refused" },
        ]),
      },
    });
    const prefixed = expectDenoOk(viaPrefix, server);
    assert.deepEqual(prefixed.opened, ["a", "b"]);
    assert.match(prefixed.refused.c, WRONG_DB("c"));
  });

  t("@deno/kv (Node) with the same token: a and b open, c is refused with the same text", async () => {
    assert.ok(multi, "needs the previous test");
    for (const db of ["a", "b"]) {
      const r = await nodeOpens(multi.token, db);
      assert.deepEqual(r, { ok: true, value: `node ${db}` }, `${db}: ${r.message}`);
    }
    const c = await nodeOpens(multi.token, "c");
    assert.equal(c.ok, false, "database c must refuse the token");
    assert.match(c.message, WRONG_DB("c"));
  });

  let all;
  t("--all-databases: opens every database, one created after the token too (Deno and @deno/kv)", async () => {
    all = await createToken("--all-databases", "--scope", "write", "--name", "everything");
    assert.match(all.stderr, /every database, present and future/);
    expectCliOk(await server.dbCmd("create", "later"), server);
    const summary = expectDenoOk(await denoOpens(all.token, [
      { label: "later", url: connectUrl("later"), expect: "ok" },
      { label: "c", url: connectUrl("c"), expect: "ok" },
      { label: "default", url: server.url, expect: "ok" },
    ]), server);
    assert.deepEqual(summary.opened, ["later", "c", "default"]);
    const node = await nodeOpens(all.token, "later");
    assert.deepEqual(node, { ok: true, value: "node later" }, node.message);
  });

  t("token list shows each token's databases; --db X lists the tokens that open X", async () => {
    assert.ok(multi && all, "needs the previous tests");
    const listed = expectCliOk(await server.tokenCmd("list"), server).stdout;
    const line = (id) => listed.split("\n").find((l) => l.startsWith(id)) ?? "";
    assert.match(line(multi.id), /\ba,b\b/, listed);
    assert.match(line(all.id), /\ball\b/, listed);
    const json = JSON.parse(expectCliOk(await server.tokenCmd("list", "--json"), server).stdout);
    const byId = Object.fromEntries(json.map((j) => [j.id, j]));
    assert.deepEqual(byId[multi.id].databases, ["a", "b"]);
    assert.equal(byId[multi.id].all_databases, false);
    assert.equal(byId[multi.id].database, "a");
    assert.deepEqual(byId[all.id].databases, []);
    assert.equal(byId[all.id].all_databases, true);
    const ids = async (db) => {
      const out = JSON.parse(expectCliOk(await server.tokenCmd("list", "--db", db, "--json"), server).stdout);
      return out.map((j) => j.id).sort();
    };
    assert.deepEqual(await ids("b"), [multi.id, all.id].sort());
    assert.deepEqual(await ids("c"), [all.id]);
    const both = await server.tokenCmd("create", "--db", "a", "--all-databases", "--scope", "read");
    assert.notEqual(both.code, 0, "--db and --all-databases together are refused");
    const neither = await server.tokenCmd("create", "--scope", "read");
    assert.notEqual(neither.code, 0, "a token needs a database or --all-databases");
    assert.match(neither.stderr, /--all-databases/);
  });

  t("db delete b: the token keeps a and loses b; revoking it closes a too", async () => {
    assert.ok(multi, "needs the first test");
    expectCliOk(await server.dbCmd("delete", "b", "--yes"), server);
    const made = expectCliOk(await server.dbCmd("create", "b"), server); // a new b: not the token's
    const newId = made.stdout.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/)?.[0];
    assert.ok(newId, `db create prints the new id: ${made.stdout}`);
    // The server learns of the delete when it rereads the catalog (--catalog-poll-ms); until then
    // its view still has the old b on the token's list. Wait until it serves the new b.
    await waitFor(async () => {
      const res = await fetch(`${server.url}/databases/b/connect`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
        body: JSON.stringify({ supportedVersions: [1, 2, 3] }),
      });
      return res.status === 200 && (await res.json()).databaseId === newId;
    }, { timeoutMs: 10_000, what: "the server to serve the new database b (catalog reread)" });
    const summary = expectDenoOk(await denoOpens(multi.token, [
      { label: "a", url: connectUrl("a"), expect: "ok" },
      { label: "b", url: connectUrl("b"), expect: "refused" },
    ]), server);
    assert.match(summary.refused.b, WRONG_DB("b"));
    const json = JSON.parse(expectCliOk(await server.tokenCmd("list", "--json"), server).stdout);
    const row = json.find((j) => j.id === multi.id);
    assert.deepEqual(row.databases, ["a"]);
    assert.equal(row.status, "active");

    expectCliOk(await server.tokenCmd("revoke", multi.id), server);
    let last;
    for (let i = 0; i < 50; i++) {
      last = await nodeOpens(multi.token, "a");
      if (!last.ok) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(last.ok, false, "a revoked token opens nothing");
    assert.match(last.message, /revoked/);
  });
});
