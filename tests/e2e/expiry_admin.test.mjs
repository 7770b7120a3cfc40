// Expiry through the admin API and dumps, on the built binary with the real Deno client:
// an entry Deno wrote with expireIn shows `expires_at` in entries/get, entries/list and both
// kinds of watch; entries/set sets an absolute expiry and clears one, and Deno's reads obey
// both; an export carries `expires_at`, an import keeps it, and an entry whose expiry has
// passed is skipped and counted (by the API and by `kvconnect import`). Every answer is
// validated against schemas/admin-api.schema.json.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { validate } from "./admin_schema.mjs";
import {
  annotate, expectCliOk, expectDenoOk, LOCAL_BACKEND, makeTempDir, removeTempDirs, runDeno,
  runKvconnect, startServer,
} from "./harness.mjs";

const HOUR = 3_600_000;
// Deno and the server read the same clock; this only absorbs the time a write takes.
const SLACK_MS = 5_000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe("expiry in the admin API and dumps", { skip: LOCAL_BACKEND }, () => {
  let server;
  const run = `x${Date.now()}`;
  const str = (value) => ({ type: "string", value });
  const key = (name) => [str("expiry_admin"), str(run), ...(name === undefined ? [] : [str(name)])];

  async function call(method, apiPath, body, db = "default") {
    const res = await fetch(`${server.url}/admin/v1/databases/${db}/${apiPath}`, {
      method,
      headers: { authorization: `Bearer ${server.token}` },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, headers: res.headers };
  }
  async function ok(definition, apiPath, body, db) {
    const r = await call("POST", apiPath, body, db);
    assert.equal(r.status, 200, `${apiPath}: ${r.text}`);
    const parsed = JSON.parse(r.text);
    validate(definition, parsed);
    return parsed;
  }
  const get = async (name, db) => (await ok("GetResponse", "entries/get", { key: key(name) }, db)).entry;
  const deno = async (step, env = {}, db) => expectDenoOk(await runDeno("expiry_admin.ts", {
    kvUrl: db ? `${server.url}/databases/${db}/connect` : server.url,
    token: server.token,
    env: { EXPIRY_STEP: step, EXPIRY_RUN: run, ...env },
  }), server);

  // The Server-Sent Events of a watch, parsed and validated, until `pred` holds (15 s at most).
  async function waitForEvent(res, pred) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    const deadline = Date.now() + 15_000;
    try {
      while (Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const data = buf.slice(0, i).split("\n").find((l) => l.startsWith("data: "));
          buf = buf.slice(i + 2);
          if (!data) continue;
          const event = JSON.parse(data.slice(6));
          validate("WatchEvent", event);
          if (pred(event)) return event;
        }
      }
    } finally {
      reader.releaseLock();
    }
    throw new Error("no matching watch event");
  }

  let written;  // the Deno write step's summary
  before(async () => {
    server = await startServer({});
    written = await deno("write");
  });
  after(async () => {
    await server?.kill();
    await removeTempDirs();
  });

  test("get, list and watch show the expiry Deno set with expireIn", async () => {
    try {
      const hour = await get("hour");
      assert.match(hour.expires_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const at = Date.parse(hour.expires_at);
      assert.ok(at >= written.before + HOUR - SLACK_MS && at <= written.after + HOUR + SLACK_MS,
        `expires_at ${hour.expires_at} is an hour after the write (${written.before}..${written.after})`);
      const never = await get("never");
      assert.deepEqual(never.value, str("forever"));
      assert.equal("expires_at" in never, false, JSON.stringify(never));

      for (const raw of [false, true]) {
        const list = await ok("EntryList", "entries/list", { prefix: key(), raw });
        const byName = new Map(list.entries.map((e) => [e.key.at(-1).value, e]));
        assert.equal(byName.get("hour").expires_at, hour.expires_at);
        assert.equal("expires_at" in byName.get("never"), false);
      }

      const ctrl = new AbortController();
      const open = (body) => fetch(`${server.url}/admin/v1/databases/default/watch`, {
        method: "POST", headers: { authorization: `Bearer ${server.token}` },
        body: JSON.stringify(body), signal: ctrl.signal,
      });
      try {
        // A watch on keys: the first event holds both keys as they are.
        const byKeys = await open({ keys: [key("hour"), key("never")] });
        assert.equal(byKeys.status, 200);
        const first = await waitForEvent(byKeys, (e) => e.entries.length === 2);
        assert.equal(first.entries[0].expires_at, hour.expires_at);
        assert.equal("expires_at" in first.entries[1], false);
        // A watch on the prefix: the entry a Deno write changed, with its expiry.
        const byPrefix = await open({ prefix: key() });
        assert.equal(byPrefix.status, 200);
        const touching = deno("touch");
        const touched = await waitForEvent(byPrefix,
          (e) => e.entries.some((x) => x.key.at(-1).value === "touched" && x.value !== null));
        await touching;
        const t = touched.entries.find((x) => x.key.at(-1).value === "touched");
        assert.ok(Date.parse(t.expires_at) > Date.now() + HOUR - 2 * 60_000, JSON.stringify(t));
      } finally {
        ctrl.abort();
      }
    } catch (e) {
      throw annotate(e, server);
    }
  });

  test("entries/set sets an absolute expiry and clears one; Deno reads obey both", async () => {
    try {
      // An absolute time in an hour: answered back to the millisecond, in UTC.
      const inAnHour = new Date(Date.now() + HOUR + 123);
      await ok("WriteResponse", "entries/set", { key: key("api-at"), value: str("from the api"), expires_at: inAnHour.toISOString() });
      assert.equal((await get("api-at")).expires_at, inAnHour.toISOString());
      // An offset is read as the time it names.
      const offset = new Date(Date.now() + HOUR);
      offset.setUTCMilliseconds(0);
      const plus2 = new Date(offset.getTime() + 2 * HOUR).toISOString().replace(/\.000Z$/, "+02:00");
      await ok("WriteResponse", "entries/set", { key: key("api-offset"), value: str("o"), expires_at: plus2 });
      assert.equal((await get("api-offset")).expires_at, offset.toISOString());
      // Soon: gone for Deno once the time has passed.
      const soon = Date.now() + 1_500;
      await ok("WriteResponse", "entries/set", { key: key("api-soon"), value: str("soon"), expires_at: new Date(soon).toISOString() });
      assert.equal((await get("api-soon")).expires_at, new Date(soon).toISOString());

      // Clear the expiry Deno gives "clear" (4 s), with the entry's versionstamp as the check.
      await deno("clear", { EXPIRY_CLEAR_MS: "4000" });
      const clear = await get("clear");
      assert.ok(clear.expires_at, JSON.stringify(clear));
      await ok("WriteResponse", "entries/set", { key: key("clear"), value: clear.value, versionstamp: clear.versionstamp, expires_at: null });
      const cleared = await get("clear");
      assert.equal("expires_at" in cleared, false, JSON.stringify(cleared));

      // Refused, and nothing written: a time that has passed, both forms at once, no time.
      const hourBefore = await get("hour");
      for (const [body, pattern] of [
        [{ key: key("hour"), value: str("x"), expires_at: "2001-01-01T00:00:00Z" }, /not in the future/],
        [{ key: key("hour"), value: str("x"), expires_at: inAnHour.toISOString(), expire_in: 5 }, /at most one/],
        [{ key: key("hour"), value: str("x"), expires_at: "tomorrow" }, /expires_at/],
      ]) {
        const r = await call("POST", "entries/set", body);
        assert.equal(r.status, 400, r.text);
        const err = JSON.parse(r.text);
        validate("Error", err);
        assert.equal(err.code, "invalid_argument");
        assert.match(err.error, pattern);
      }
      assert.deepEqual(await get("hour"), hourBefore);

      // Past "clear"'s old expiry and "api-soon"'s: Deno reads what the API wrote.
      const clearAt = Date.parse(clear.expires_at);
      await sleep(Math.max(clearAt, soon) + 300 - Date.now());
      const read = await deno("read", { EXPIRY_KEYS: "api-at,api-soon,clear,hour" });
      assert.deepEqual(read.values, { "api-at": "from the api", "api-soon": null, clear: "to clear", hour: "an hour" });
      assert.equal(await get("api-soon"), null);
    } catch (e) {
      throw annotate(e, server);
    }
  });

  test("export carries expires_at, import keeps it and skips entries already expired", async () => {
    try {
      for (const db of ["copy", "viacli"]) {
        const r = await fetch(`${server.url}/admin/v1/databases`, {
          method: "POST", headers: { authorization: `Bearer ${server.token}` }, body: JSON.stringify({ name: db }),
        });
        assert.equal(r.status, 201, await r.text());
      }
      const exported = await call("POST", "export", { prefix: key() });
      assert.equal(exported.status, 200, exported.text);
      const lines = exported.text.trim().split("\n").map((l) => JSON.parse(l));
      const byName = new Map(lines.map((e) => [e.key.at(-1).value, e]));
      for (const e of lines) validate("Entry", e);
      const hour = await get("hour");
      assert.equal(byName.get("hour").expires_at, hour.expires_at);
      assert.equal(byName.get("api-at").expires_at, (await get("api-at")).expires_at);
      assert.equal("expires_at" in byName.get("never"), false);
      // The CLI writes the same dump.
      const dir = await makeTempDir("kvconnect-expiry-");
      const file = path.join(dir, "dump.ndjson");
      const urlArgs = ["--url", server.url, "--token", server.token];
      expectCliOk(await runKvconnect(["export", "--db", "default", "--prefix", JSON.stringify(key()), ...urlArgs, "-o", file]), server);
      assert.equal(fs.readFileSync(file, "utf8"), exported.text);

      // Plus an entry whose expiry passed after the export, and an older line without the field.
      const line = (name, extra) => JSON.stringify({ key: key(name), value: str(name), versionstamp: "00000000000000010000", ...extra });
      const dump = exported.text + line("stale", { expires_at: "2001-02-03T04:05:06.789Z" }) + "\n" + line("old") + "\n";
      const imported = await ok("ImportResult", "import", dump, "copy");
      assert.equal(imported.entries, lines.length + 1);
      assert.equal(imported.skipped, 1);
      assert.equal((await get("hour", "copy")).expires_at, hour.expires_at);
      assert.equal((await get("stale", "copy")), null);
      assert.equal("expires_at" in (await get("old", "copy")), false);
      assert.equal("expires_at" in (await get("never", "copy")), false);
      const read = await deno("read", { EXPIRY_KEYS: "hour,never,old,stale" }, "copy");
      assert.deepEqual(read.values, { hour: "an hour", never: "forever", old: "old", stale: null });

      // `kvconnect import` says what it skipped.
      fs.writeFileSync(file, dump);
      const im = expectCliOk(await runKvconnect(["import", "--db", "viacli", ...urlArgs, "-i", file]), server);
      assert.match(im.stderr, new RegExp(`Imported ${lines.length + 1} entries`));
      assert.match(im.stderr, /Skipped 1 entry whose expires_at had already passed/);
      assert.equal((await get("hour", "viacli")).expires_at, hour.expires_at);
    } catch (e) {
      throw annotate(e, server);
    }
  });
});
