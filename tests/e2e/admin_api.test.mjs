// The admin JSON API (/admin/v1) on the built binary, with the real clients on the same
// database: values Deno wrote are listed as @deno/kv-utils JSON; those JSON views written back
// through the API are read by Deno as the very same values, and by @deno/kv from Node; a stale
// edit is refused with 409 and changes nothing; an SSE watch sees a Node write; deletes by
// prefix go in bounded batches; entries/children lists the next key parts with capped counts; bad input gets a JSON error and nothing is applied; tokens that
// are not admin, or bound to one database, are refused. Every answer is validated against its
// definition in schemas/admin-api.schema.json (ajv, JSON Schema draft 4).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { validate } from "./admin_schema.mjs";
import v8 from "node:v8";
import { openKv } from "@deno/kv";
import {
  annotate, expectDenoOk, LOCAL_BACKEND, removeTempDirs, runDeno, startServer,
} from "./harness.mjs";


const str = (value) => ({ type: "string", value });
const num = (value) => ({ type: "number", value });

describe("admin API", { skip: LOCAL_BACKEND }, () => {
  let server;
  const run = `r${Date.now()}`;

  // One admin call: returns { status, body } with body parsed; checks the content type and,
  // for errors, the Error definition.
  async function call(method, path, body, token = server.token) {
    const headers = {};
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(`${server.url}/admin/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    assert.match(res.headers.get("content-type") ?? "", /^application\/json/, `${method} ${path}: ${text}`);
    const parsed = JSON.parse(text);
    if (res.status >= 400) validate("Error", parsed);
    return { status: res.status, body: parsed };
  }

  async function ok(definition, method, path, body, token) {
    const r = await call(method, path, body, token);
    assert.ok(r.status === 200 || r.status === 201, `${method} ${path} -> ${r.status} ${JSON.stringify(r.body)}`);
    validate(definition, r.body);
    return r.body;
  }

  const key = (...parts) => ["admin", run, ...parts].map((p) => (typeof p === "number" ? num(p) : str(p)));

  before(async () => {
    server = await startServer({});
  });
  after(async () => {
    await server?.kill();
    await removeTempDirs();
  });

  test("values Deno wrote are listed as JSON, and written back from JSON Deno and Node read them equal", async () => {
    try {
      expectDenoOk(await runDeno("admin_values.ts", {
        kvUrl: server.url, token: server.token, env: { ADMIN_STEP: "write", ADMIN_RUN: run },
      }), server);
      const list = await ok("EntryList", "POST", "/databases/default/entries/list",
        { prefix: key("deno"), limit: 100 });
      const byName = new Map(list.entries.map((e) => [e.key.at(-1).value, e]));
      assert.equal(byName.size, 15);
      assert.equal(list.cursor, null);
      // The @deno/kv-utils spellings.
      assert.deepEqual(byName.get("string").value, str("héllo €"));
      assert.deepEqual(byName.get("number").value, num(42.5));
      assert.deepEqual(byName.get("bigint").value, { type: "bigint", value: "12345678901234567890" });
      assert.deepEqual(byName.get("boolean").value, { type: "boolean", value: true });
      assert.deepEqual(byName.get("null").value, { type: "null", value: null });
      assert.deepEqual(byName.get("date").value, { type: "Date", value: "2024-01-02T03:04:05.006Z" });
      assert.deepEqual(byName.get("u64").value, { type: "KvU64", value: "7" });
      assert.deepEqual(byName.get("bytes").value, { type: "Uint8Array", value: "AQID-g" });
      assert.deepEqual(byName.get("map").value, {
        type: "Map", value: [[str("k"), num(1)], [num(2), str("two")]],
      });
      assert.deepEqual(byName.get("set").value, { type: "Set", value: [num(1), str("x")] });
      assert.equal(byName.get("regexp").value.type, "RegExp");
      assert.equal(byName.get("object").value.type, "object");
      assert.equal(byName.get("array").value.type, "Array");
      assert.equal(byName.get("float64array").value.type, "Float64Array");
      for (const e of list.entries) assert.match(e.versionstamp, /^[0-9a-f]{20}$/);

      // Paging: two at a time, in order, until the cursor is null.
      const seen = [];
      let cursor;
      for (let i = 0; i < 20; i++) {
        const page = await ok("EntryList", "POST", "/databases/default/entries/list",
          { prefix: key("deno"), limit: 2, ...(cursor ? { cursor } : {}) });
        seen.push(...page.entries.map((e) => e.key.at(-1).value));
        cursor = page.cursor;
        if (!cursor) break;
      }
      assert.deepEqual(seen, list.entries.map((e) => e.key.at(-1).value));
      // The largest page the engine reads at once is allowed.
      const big = await ok("EntryList", "POST", "/databases/default/entries/list",
        { prefix: key("deno"), limit: 1000 });
      assert.equal(big.entries.length, 15);
      assert.equal(big.cursor, null);
      const reversed = await ok("EntryList", "POST", "/databases/default/entries/list",
        { prefix: key("deno"), limit: 3, reverse: true, raw: true });
      assert.deepEqual(reversed.entries.map((e) => e.key.at(-1).value), seen.slice(-3).reverse());
      assert.ok(reversed.entries.every((e) => ["v8", "le64", "bytes"].includes(e.raw.encoding)));

      // Each JSON view written back under "api"; Deno must read the original value.
      for (const [name, e] of byName) {
        const w = await ok("WriteResponse", "POST", "/databases/default/entries/set",
          { key: key("api", name), value: e.value });
        assert.equal(w.ok, true);
      }
      expectDenoOk(await runDeno("admin_values.ts", {
        kvUrl: server.url, token: server.token, env: { ADMIN_STEP: "verify", ADMIN_RUN: run },
      }), server);
      // @deno/kv from Node reads what the API wrote.
      const kv = await openKv(server.url, {
        accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
      });
      try {
        const at = (name) => ["admin", run, "api", name];
        assert.equal((await kv.get(at("string"))).value, "héllo €");
        assert.deepEqual((await kv.get(at("map"))).value, new Map([["k", 1], [2, "two"]]));
        assert.deepEqual((await kv.get(at("object"))).value, { a: 1, nested: { list: [1, "x", null] } });
        assert.equal((await kv.get(at("bigint"))).value, 12345678901234567890n);
        assert.equal((await kv.get(at("u64"))).value.value, 7n);
      } finally {
        kv.close();
      }
    } catch (e) {
      throw annotate(e, server);
    }
  });

  test("a stale edit is refused with 409 and changes nothing; checked deletes and creates", async () => {
    const k = key("edit", "doc");
    const created = await ok("WriteResponse", "POST", "/databases/default/entries/set",
      { key: k, value: str("v1"), versionstamp: null });
    // Creating again with "must not exist" conflicts.
    let r = await call("POST", "/databases/default/entries/set", { key: k, value: str("x"), versionstamp: null });
    assert.equal(r.status, 409);
    assert.equal(r.body.code, "conflict");
    // Another client changes it.
    const kv = await openKv(server.url, {
      accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
    });
    try {
      await kv.set(["admin", run, "edit", "doc"], "changed by node");
      r = await call("POST", "/databases/default/entries/set",
        { key: k, value: str("stale edit"), versionstamp: created.versionstamp });
      assert.equal(r.status, 409);
      assert.match(r.body.error, /changed since the versionstamp/);
      assert.equal((await kv.get(["admin", run, "edit", "doc"])).value, "changed by node");
      const got = await ok("GetResponse", "POST", "/databases/default/entries/get", { key: k });
      assert.deepEqual(got.entry.value, str("changed by node"));
      // An edit at the current versionstamp goes through.
      const w = await ok("WriteResponse", "POST", "/databases/default/entries/set",
        { key: k, value: str("fresh edit"), versionstamp: got.entry.versionstamp });
      assert.equal((await kv.get(["admin", run, "edit", "doc"])).value, "fresh edit");
      // Delete with a stale check fails, with the current one succeeds.
      r = await call("POST", "/databases/default/entries/delete", { key: k, versionstamp: got.entry.versionstamp });
      assert.equal(r.status, 409);
      await ok("WriteResponse", "POST", "/databases/default/entries/delete", { key: k, versionstamp: w.versionstamp });
      assert.equal((await kv.get(["admin", run, "edit", "doc"])).versionstamp, null);
      const none = await ok("GetResponse", "POST", "/databases/default/entries/get", { key: k });
      assert.equal(none.entry, null);
    } finally {
      kv.close();
    }
  });

  test("entries/get-many reads what Node wrote, at one version, in the order asked", async () => {
    const kv = await openKv(server.url, {
      accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
    });
    try {
      await kv.set(["admin", run, "many", "a"], "first");
      await kv.set(["admin", run, "many", "b"], 2);
      const a = await kv.get(["admin", run, "many", "a"]);
      const b = await kv.get(["admin", run, "many", "b"]);
      const got = await ok("GetManyResponse", "POST", "/databases/default/entries/get-many",
        { keys: [key("many", "b"), key("many", "absent"), key("many", "a")] });
      assert.equal(got.entries.length, 3);
      assert.deepEqual(got.entries[0].value, num(2));
      assert.equal(got.entries[0].versionstamp, b.versionstamp);
      assert.equal(got.entries[1], null);
      assert.deepEqual(got.entries[2].value, str("first"));
      assert.equal(got.entries[2].versionstamp, a.versionstamp);
    } finally {
      kv.close();
    }
    // More keys than one snapshot read may name, a key that is no key, no keys: 400s that say why.
    const many = Array.from({ length: 11 }, (_, i) => key("many", `k${i}`));
    let r = await call("POST", "/databases/default/entries/get-many", { keys: many });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /at most 10 keys/);
    r = await call("POST", "/databases/default/entries/get-many",
      { keys: [key("many", "a"), [{ type: "raw", value: "@@" }]] });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /^'keys\[1\]': /);
    r = await call("POST", "/databases/default/entries/get-many", { keys: [] });
    assert.equal(r.status, 400);
    r = await call("POST", "/databases/default/entries/get-many", "[".repeat(100000));
    assert.equal(r.status, 400);
    // The endpoint has its own metrics route, for its answers and its refusals.
    const metrics = await (await fetch(`${server.url}/metrics`, {
      headers: { authorization: `Bearer ${server.token}` },
    })).text();
    const samples = metrics.split("\n").filter((l) =>
      l.startsWith("kvconnect_http_requests_total{") && l.includes('route="admin_entries_get_many"'));
    assert.ok(samples.some((l) => l.includes('code="2xx"')), samples.join("\n"));
    assert.ok(samples.some((l) => l.includes('code="4xx"')), samples.join("\n"));
  });

  test("an SSE watch on a prefix and on keys sees a Node write", async () => {
    const ctrl = new AbortController();
    const open = (body) => fetch(`${server.url}/admin/v1/databases/default/watch`, {
      method: "POST", headers: { authorization: `Bearer ${server.token}` }, body: JSON.stringify(body), signal: ctrl.signal,
    });
    const byPrefix = await open({ prefix: key("watch") });
    const byKey = await open({ keys: [key("watch", "a")] });
    for (const res of [byPrefix, byKey]) {
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), "text/event-stream");
    }
    // Reads events until one satisfies `pred`.
    async function waitFor(res, pred) {
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      const deadline = Date.now() + 15000;
      while (Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split("\n").find((l) => l.startsWith("data: "));
          if (!data) continue;
          const event = JSON.parse(data.slice(6));
          validate("WatchEvent", event);
          if (pred(event)) {
            reader.releaseLock();
            return event;
          }
        }
      }
      throw new Error("no matching watch event");
    }
    const kv = await openKv(server.url, {
      accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
    });
    try {
      // The key watch's first event: the key is absent.
      await waitFor(byKey, (e) => e.entries.length === 1 && e.entries[0].value === null);
      await kv.set(["admin", run, "watch", "a"], { n: 1 });
      const isSet = (e) => e.entries.some((x) => x.key.at(-1).value === "a" && x.value?.type === "object");
      const p = await waitFor(byPrefix, isSet);
      assert.deepEqual(p.entries[0].value, { type: "object", value: { n: num(1) } });
      await waitFor(byKey, isSet);
      await kv.delete(["admin", run, "watch", "a"]);
      await waitFor(byPrefix, (e) => e.entries.some((x) => x.key.at(-1).value === "a" && x.value === null));
    } finally {
      kv.close();
      ctrl.abort();
    }
  });

  test("count and delete by prefix in bounded batches", async () => {
    const kv = await openKv(server.url, {
      accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
    });
    try {
      const op = kv.atomic();
      for (let i = 0; i < 25; i++) op.set(["admin", run, "bulk", i], `v${i}`);
      assert.ok((await op.commit()).ok);
      const c = await ok("CountResponse", "POST", "/databases/default/entries/count", { prefix: key("bulk") });
      assert.equal(c.count, 25);
      assert.ok(c.bytes > 25 * 5);
      const d = await ok("DeleteRangeResponse", "POST", "/databases/default/entries/delete-range",
        { prefix: key("bulk"), batch: 10 });
      assert.deepEqual(d, { deleted: 25, batches: 3 });
      const after = [];
      for await (const e of kv.list({ prefix: ["admin", run, "bulk"] })) after.push(e);
      assert.equal(after.length, 0);
      // Neighbouring keys are untouched.
      assert.ok((await ok("CountResponse", "POST", "/databases/default/entries/count", { prefix: key("api") })).count > 0);
    } finally {
      kv.close();
    }
  });

  test("entries/children: next key parts with counts; a part past the cap is skipped; pages by cursor", async () => {
    // A server of its own with a small cap and scan budget, so both are reached.
    const small = await startServer({
      extraArgs: ["--admin-children-count-cap", "5", "--admin-children-scan-rows", "40"],
    });
    try {
      const post = async (path, body, definition) => {
        const res = await fetch(`${small.url}/admin/v1/databases/default${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${small.token}` },
          body: typeof body === "string" ? body : JSON.stringify(body),
        });
        const parsed = JSON.parse(await res.text());
        validate(res.ok ? definition : "Error", parsed);
        return { status: res.status, body: parsed };
      };
      const big = (v) => ({ type: "bigint", value: String(v) });
      const bool = (value) => ({ type: "boolean", value });
      const line = (k, v) => JSON.stringify({ key: k, value: str(v), versionstamp: "00000000000000010000" });
      const lines = [line([str("c"), str("a")], "top")];
      for (let i = 0; i < 3; i++) lines.push(line([str("c"), str("a"), num(i)], `a${i}`));
      for (let i = 0; i < 20; i++) lines.push(line([str("c"), str("b"), num(i)], `b${i}`));
      lines.push(line([str("c"), big(7), str("x")], "deep"), line([str("c"), bool(true)], "yes"));
      lines.push(line([str("d")], "d"));
      const imported = await post("/import", `${lines.join("\n")}\n`, "ImportResult");
      assert.equal(imported.body.entries, 27);

      const all = await post("/entries/children", { prefix: [str("c")] }, "EntryChildren");
      const brief = (c) => [c.part, c.count, c.count_capped, c.has_value, c.entry?.value.value ?? null];
      assert.deepEqual(all.body.children.map(brief), [
        [str("a"), 4, false, true, "top"],
        [str("b"), 5, true, false, null],
        [big(7), 1, false, false, null],
        [bool(true), 1, false, true, "yes"],
      ]);
      assert.equal(all.body.cursor, null);
      assert.deepEqual(all.body.children[0].entry.key, [str("c"), str("a")]);
      // The root, and one part a page.
      const root = await post("/entries/children", {}, "EntryChildren");
      assert.deepEqual(root.body.children.map(brief), [[str("c"), 5, true, false, null], [str("d"), 1, false, true, "d"]]);
      const paged = [];
      let cursor;
      for (let pages = 0; pages < 10; pages++) {
        const r = await post("/entries/children", { prefix: [str("c")], limit: 1, ...(cursor ? { cursor } : {}) }, "EntryChildren");
        assert.ok(r.body.children.length <= 1);
        paged.push(...r.body.children.map(brief));
        cursor = r.body.cursor;
        if (!cursor) break;
      }
      assert.deepEqual(paged, all.body.children.map(brief));
      // Bad requests.
      for (const bad of [{ limit: 0 }, { limit: 1001 }, { cursor: "!!!" }, { prefix: "c" }, { prefix: [str("c")], extra: 1 }]) {
        const r = await post("/entries/children", bad);
        assert.equal(r.status, 400, JSON.stringify(bad));
      }
      // A cursor of another prefix cannot reach outside this one.
      const outside = await post("/entries/children", { prefix: [str("c"), str("a")], cursor: Buffer.from([0x02, 0x64, 0x00]).toString("base64url") }, "EntryChildren");
      assert.deepEqual(outside.body, { children: [], cursor: null });
    } catch (e) {
      throw annotate(e, small);
    } finally {
      await small.kill();
    }
  });

  test("bad input gets a JSON error and nothing is applied", async () => {
    const k = key("bad", "x");
    let r = await call("POST", "/databases/default/entries/set", "{not json");
    assert.equal(r.status, 400);
    assert.match(r.body.error, /not valid JSON/);
    r = await call("POST", "/databases/default/entries/set", { key: [{ type: "Date", value: 1 }], value: str("x") });
    assert.equal(r.status, 400);
    r = await call("POST", "/databases/default/entries/set", { key: k, value: { type: "nonsense", value: 1 } });
    assert.equal(r.status, 400);
    assert.equal(r.body.code, "invalid_argument");
    r = await call("POST", "/databases/default/entries/set", { key: k, value: str("x".repeat(70000)) });
    assert.equal(r.status, 400);
    r = await call("POST", "/databases/default/entries/set", { key: k, value: str("x"), extra: 1 });
    assert.equal(r.status, 400);
    r = await call("POST", "/databases/default/entries/list", { start: k });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /both 'start' and 'end'/);
    r = await call("POST", "/databases/default/entries/list", { cursor: "!!!" });
    assert.equal(r.status, 400);
    const got = await ok("GetResponse", "POST", "/databases/default/entries/get", { key: k });
    assert.equal(got.entry, null, "nothing was written");
    r = await call("GET", "/databases/default/entries/list");
    assert.equal(r.status, 405);
    r = await call("GET", "/nothing-here");
    assert.equal(r.status, 404);
    r = await call("POST", "/databases/nosuchdb/entries/list", {});
    assert.equal(r.status, 404);
  });

  test("databases and tokens; non-admin and database-bound tokens are refused", async () => {
    let r = await call("GET", "/databases", undefined, null);
    assert.equal(r.status, 401);
    r = await call("GET", "/databases", undefined, "kvt_0000000000000000_nope");
    assert.equal(r.status, 401);

    const created = await ok("Database", "POST", "/databases", { name: "sales" });
    assert.equal(created.name, "sales");
    assert.equal(created.serving, true);
    r = await call("POST", "/databases", { name: "sales" });
    assert.equal(r.status, 409);
    r = await call("POST", "/databases", { name: "Bad Name" });
    assert.equal(r.status, 400);
    const dbs = await ok("DatabaseList", "GET", "/databases");
    assert.deepEqual(dbs.databases.map((d) => d.name).sort(), ["default", "sales"]);

    const writer = await ok("CreatedToken", "POST", "/tokens", { database: "sales", scope: "write" });
    const admin = await ok("CreatedToken", "POST", "/tokens", { database: "sales", scope: "admin", name: "sales admin" });
    r = await call("GET", "/databases", undefined, writer.token);
    assert.equal(r.status, 403);
    assert.match(r.body.error, /not an admin token/);
    // Bound to sales: sees only sales, may use its entries, nothing else.
    const seen = await ok("DatabaseList", "GET", "/databases", undefined, admin.token);
    assert.deepEqual(seen.databases.map((d) => d.name), ["sales"]);
    await ok("WriteResponse", "POST", "/databases/sales/entries/set", { key: [str("k")], value: num(1) }, admin.token);
    r = await call("POST", "/databases/default/entries/list", {}, admin.token);
    assert.equal(r.status, 403);
    r = await call("POST", "/databases", { name: "other" }, admin.token);
    assert.equal(r.status, 403);
    r = await call("GET", "/tokens", undefined, admin.token);
    assert.equal(r.status, 403);

    // The Node client reaches sales with the write token and sees the admin's write.
    const kv = await openKv(`${server.url}/databases/sales/connect`, {
      accessToken: writer.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
    }).catch(() => null);
    if (kv) {
      try {
        assert.equal((await kv.get(["k"])).value, 1);
      } finally {
        kv.close();
      }
    }

    const tokens = await ok("TokenList", "GET", "/tokens");
    assert.ok(tokens.tokens.some((t) => t.id === admin.info.id && t.name === "sales admin" && t.status === "active"));
    assert.ok(!JSON.stringify(tokens).includes(admin.token), "secrets are never listed");
    await ok("RevokedToken", "DELETE", `/tokens/${writer.info.id}`);
    r = await call("DELETE", `/tokens/${writer.info.id}`);
    assert.equal(r.status, 409);

    const renamed = await ok("Database", "PATCH", "/databases/sales", { name: "revenue" });
    assert.equal(renamed.name, "revenue");
    assert.equal(renamed.id, created.id);
    r = await call("DELETE", "/databases/default");
    assert.equal(r.status, 400);
    await ok("Database", "DELETE", "/databases/revenue");
    r = await call("POST", "/databases/revenue/entries/list", {});
    assert.equal(r.status, 404);
  });
});
