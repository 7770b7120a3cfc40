// Keys that are no Deno key. KV Connect keys are opaque bytes, so any write token can store
// bytes no Deno client would write (an unknown tag, a string that is not UTF-8, a non-minimal
// integer). Such a key is written here with a hand-made atomic_write, and then every JSON view
// must still name it: the admin API lists and reads it as a raw key part
// ({"type": "raw", "value": base64url}), a watch on it through the admin API sees it change, the
// NDJSON export holds it and an import into a fresh database writes the very same bytes (read
// back over KV Connect), the console's key syntax shows and reads it, and it can be deleted.
// Before the raw form, the root listing answered 500 "damaged data" and the export was empty.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { validate } from "./admin_schema.mjs";
import {
  annotate, importConsoleModule, LOCAL_BACKEND, readFrame, removeTempDirs, startServer,
} from "./harness.mjs";
import {
  dataPath, describeAnswer, metadata, pbMutation, pbRange, snapshotReadEntries, withH2,
} from "./raw_client.mjs";
// The console's key syntax, the same code the browser runs (harness.mjs importConsoleModule).
const { formatKey, parseKey } = await importConsoleModule("kv.js");

const str = (value) => ({ type: "string", value });
const raw = (bytes) => ({ type: "raw", value: Buffer.from(bytes).toString("base64url") });
/** A string key part in the tuple encoding (no NULs). */
const strBytes = (s) => Buffer.concat([Buffer.from([0x02]), Buffer.from(s), Buffer.from([0])]);

// An unknown tag (0x99): no part decodes.
const POISON = Buffer.from([0x99, 0x61, 0x62, 0x63]);
const POISON_JSON = [raw(POISON)];
// ["rawkeys"] then a byte that starts no part: the typed part stays typed.
const TAIL = Buffer.concat([strBytes("rawkeys"), Buffer.from([0x99])]);
const TAIL_JSON = [str("rawkeys"), raw([0x99])];
// The integer 5 written in two bytes (Deno writes 15 05): it decodes, but names other bytes.
const NON_MINIMAL = Buffer.from([0x1d, 0x02, 0x00, 0x05]);

describe("keys that are no Deno key", { skip: LOCAL_BACKEND, timeout: 120_000 }, () => {
  let server;

  before(async () => {
    server = await startServer({});
  });
  after(async () => {
    await server?.kill();
    await removeTempDirs();
  });

  async function call(method, path, body) {
    const res = await fetch(`${server.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${server.token}` },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  }
  async function ok(definition, path, body) {
    const r = await call("POST", path, body);
    assert.ok(r.status === 200 || r.status === 201, `POST ${path} -> ${r.status} ${r.text}`);
    const parsed = JSON.parse(r.text);
    validate(definition, parsed);
    return parsed;
  }

  /** One atomic_write of `mutations` (pbMutation fields) into database `db` over KV Connect. */
  async function writeRaw(db, mutations) {
    await withH2(server.url, {}, async (h2) => {
      const m = await metadata(h2, server.token, { reqPath: db === "default" ? "/" : `/databases/${db}/connect` });
      assert.equal(m.status, 200, describeAnswer(m));
      const w = await dataPath(h2, m.json, "atomic_write", Buffer.concat(mutations));
      assert.equal(w.status, 200, `atomic_write: ${describeAnswer(w)}`);
    });
  }

  /** The entry stored at exactly `key` (bytes) in `db`, read over KV Connect, or undefined. */
  async function readRaw(db, key) {
    return await withH2(server.url, {}, async (h2) => {
      const m = await metadata(h2, server.token, { reqPath: db === "default" ? "/" : `/databases/${db}/connect` });
      assert.equal(m.status, 200, describeAnswer(m));
      const r = await dataPath(h2, m.json, "snapshot_read", pbRange(key, Buffer.concat([key, Buffer.from([0])]), 1));
      assert.equal(r.status, 200, `snapshot_read: ${describeAnswer(r)}`);
      return snapshotReadEntries(r.body)[0][0];
    });
  }

  test("is listed, read, watched, exported, imported with the same bytes and deleted", async () => {
    const ctrl = new AbortController();
    try {
      // A watch on the key through the admin API (the console's watch), opened before the write.
      const watch = await fetch(`${server.url}/admin/v1/databases/default/watch`, {
        method: "POST", headers: { authorization: `Bearer ${server.token}` },
        body: JSON.stringify({ keys: [POISON_JSON] }), signal: ctrl.signal,
      });
      assert.equal(watch.status, 200, await (watch.status === 200 ? "" : watch.text()));
      const events = watchEvents(watch.body.getReader());
      const first = (await events.next()).value;
      assert.deepEqual(first.entries, [{ key: POISON_JSON, value: null, versionstamp: null }]);

      await writeRaw("default", [
        pbMutation(POISON, { data: Buffer.from("v") }),
        pbMutation(TAIL, { data: Buffer.from("tail") }),
        pbMutation(NON_MINIMAL, { data: Buffer.from("five") }),
      ]);
      await ok("WriteResponse", "/databases/default/entries/set", {
        key: [str("rawkeys"), str("typed")], value: { type: "string", value: "ok" },
      });

      let changed;
      for (let i = 0; i < 5 && !changed; i++) {
        const e = (await events.next()).value;
        if (e.entries[0].value !== null) changed = e;
      }
      assert.deepEqual(changed?.entries[0].key, POISON_JSON, "the watch saw the write");
      assert.deepEqual(changed.entries[0].value, { type: "Uint8Array", value: "dg" });

      // The root listing (what the console shows first).
      const root = await ok("EntryList", "/databases/default/entries/list", { limit: 100 });
      const byKey = new Map(root.entries.map((e) => [JSON.stringify(e.key), e]));
      assert.deepEqual(byKey.get(JSON.stringify(POISON_JSON))?.value, { type: "Uint8Array", value: "dg" });
      assert.deepEqual(byKey.get(JSON.stringify([raw(NON_MINIMAL)]))?.value, { type: "Uint8Array", value: "Zml2ZQ" });
      // Under a typed prefix, the typed part stays typed (in byte order: 02 "typed" before 99).
      const under = await ok("EntryList", "/databases/default/entries/list", { prefix: [str("rawkeys")] });
      assert.deepEqual(under.entries.map((e) => e.key), [[str("rawkeys"), str("typed")], TAIL_JSON]);

      // Read by its raw form.
      const got = await ok("GetResponse", "/databases/default/entries/get", { key: POISON_JSON, raw: true });
      assert.deepEqual(got.entry.key, POISON_JSON);
      assert.equal(got.entry.raw.bytes, "dg");

      // The console's key syntax.
      assert.equal(formatKey(POISON_JSON), "[raw:mWFiYw]");
      assert.equal(formatKey(TAIL_JSON), '["rawkeys", raw:mQ]');
      assert.deepEqual(parseKey("[raw:mWFiYw]"), POISON_JSON);
      assert.deepEqual(parseKey('["rawkeys", raw:mQ]'), TAIL_JSON);

      // Export, then import into a fresh database: the same key bytes.
      const dump = await call("POST", "/databases/default/export", "");
      assert.equal(dump.status, 200, dump.text);
      const lines = dump.text.trim().split("\n").map((l) => JSON.parse(l));
      const exported = lines.map((l) => JSON.stringify(l.key));
      for (const k of [POISON_JSON, TAIL_JSON, [raw(NON_MINIMAL)]]) {
        assert.ok(exported.includes(JSON.stringify(k)), `the export holds ${JSON.stringify(k)}:\n${dump.text}`);
      }
      await ok("Database", "/databases", { name: "rawcopy" });
      const imported = await ok("ImportResult", "/databases/rawcopy/import", dump.text);
      assert.equal(imported.entries, lines.length);
      for (const [key, value] of [[POISON, "v"], [TAIL, "tail"], [NON_MINIMAL, "five"]]) {
        const e = await readRaw("rawcopy", key);
        assert.ok(e, `the copy holds ${key.toString("hex")}`);
        assert.equal(e.key.toString("hex"), key.toString("hex"));
        assert.equal(e.value.toString(), value);
      }

      // Delete by the raw form (with its versionstamp check).
      const del = await ok("WriteResponse", "/databases/default/entries/delete", {
        key: POISON_JSON, versionstamp: got.entry.versionstamp,
      });
      assert.equal(del.ok, true);
      assert.equal((await ok("GetResponse", "/databases/default/entries/get", { key: POISON_JSON })).entry, null);
      assert.equal(await readRaw("default", POISON), undefined);
    } catch (e) {
      throw annotate(e, server);
    } finally {
      ctrl.abort();
    }
  });

  test("a malformed raw part is a 400 naming the member", async () => {
    const r = await call("POST", "/databases/default/entries/get", { key: [{ type: "raw", value: "@@" }] });
    assert.equal(r.status, 400, r.text);
    assert.match(JSON.parse(r.text).error, /'key':/);
  });
});

/** The WatchEvent objects of an admin watch (Server-Sent Events), validated, one by one. */
async function* watchEvents(reader) {
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    buf += dec.decode(await readFrame(reader, 15_000, "admin watch"), { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block.split("\n").find((l) => l.startsWith("data: "));
      if (!data) continue;
      const event = JSON.parse(data.slice(6));
      validate("WatchEvent", event);
      yield event;
    }
  }
}
