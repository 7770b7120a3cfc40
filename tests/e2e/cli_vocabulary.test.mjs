// The CLI speaks one language (issue 22, "One CLI vocabulary"), driven through the built binary:
// * the same flags (--db, --url, --token, --ca-file, --json) in every command that reaches a
//   server, bench's old spellings (--database, --ca) kept as hidden aliases;
// * a token from --token, then KVCONNECT_ACCESS_TOKEN, then DENO_KV_ACCESS_TOKEN, then the data
//   directory's access-token file for a server on this machine (queue included);
// * a missing data directory refused by every command but `db create` (naming the absolute path,
//   creating nothing), and a missing backup directory by `backup list`;
// * keys and prefixes in the console's syntax ('["users", 1n]') as well as typed KvKeyJSON;
// * tables for people by default, --json for scripts (queue stats, dead list);
// * bench in a scratch database it creates and deletes (--keep keeps it), saying what it writes;
// * plurals ("1 entry", "1 atomic write", "1 connection"), and hints that say what to do next.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import {
  LOCAL_BACKEND, SERVER_BACKEND, expectCliOk, makeTempDir, removeTempDirs, runKvconnect, startServer,
} from "./harness.mjs";

const skip = (LOCAL_BACKEND || SERVER_BACKEND !== "sqlite") && "needs a kvconnect server on a data directory";

// Environment with no token variables set (empty counts as unset).
const NO_TOKEN_ENV = { KVCONNECT_ACCESS_TOKEN: "", DENO_KV_ACCESS_TOKEN: "" };

function show(res) {
  return `\`${res.command}\`: code=${res.code}\n--- stdout ---\n${res.stdout.slice(-3000)}\n--- stderr ---\n${res.stderr.slice(-3000)}`;
}

// Runs kvconnect in `cwd` (a scratch directory, so no ./kvconnect-data is found by accident).
async function kvc(args, { cwd, env = {} } = {}) {
  return await runKvconnect(args, { cwd, env: { ...NO_TOKEN_ENV, ...env }, timeoutMs: 60_000 });
}

function line(key, value) {
  return JSON.stringify({ key, value: { type: "string", value }, versionstamp: "00000000000000010000" });
}

const USERS_1 = [{ type: "string", value: "users" }, { type: "bigint", value: "1" }];
const USERS_2 = [{ type: "string", value: "users" }, { type: "bigint", value: "2" }];
const POSTS_1 = [{ type: "string", value: "posts" }, { type: "number", value: 1 }];

after(removeTempDirs);

describe("one CLI vocabulary", { skip, timeout: 300_000 }, () => {
  let server;
  let work;  // the working directory of every command (holds no kvconnect-data)
  let dump;

  before(async () => {
    server = await startServer({ token: null });  // the bootstrap token lands in <data-dir>/access-token
    work = fs.realpathSync(await makeTempDir("kvconnect-cli-"));  // as getcwd() names it
    dump = path.join(work, "three.ndjson");
    await fsp.writeFile(dump, [line(USERS_1, "ann"), line(USERS_2, "bob"), line(POSTS_1, "hi")].join("\n") + "\n");
    const res = await kvc(["import", "--url", server.url, "--token", server.token, "-i", dump], { cwd: work });
    expectCliOk(res, server);
  });

  after(async () => {
    await server?.kill();
  });

  test("the same flags in every command that reaches a server; old bench spellings still work", async () => {
    const commands = [["export"], ["import"], ["queue", "stats"], ["queue", "dead", "list"],
      ["queue", "dead", "requeue"], ["queue", "dead", "purge"], ["bench"]];
    for (const cmd of commands) {
      const res = await kvc([...cmd, "--help"], { cwd: work });
      assert.equal(res.code, 0, show(res));
      for (const flag of ["--db", "--url", "--token", "--ca-file"]) {
        assert.match(res.stdout, new RegExp(`${flag}\\b`), `${cmd.join(" ")} has no ${flag}\n${res.stdout}`);
      }
      // The old spellings are aliases, not advertised.
      assert.doesNotMatch(res.stdout, /--database\b|--ca\b(?!-)/, `${cmd.join(" ")} --help`);
    }
    for (const cmd of [["queue", "stats"], ["queue", "dead", "list"], ["db", "list"], ["token", "list"], ["backup", "list"]]) {
      const res = await kvc([...cmd, "--help"], { cwd: work });
      assert.match(res.stdout, /--json\b/, `${cmd.join(" ")} has no --json`);
    }
    // bench --database (old) and --db (new) name the same existing database.
    expectCliOk(await server.dbCmd("create", "benchold"), server);
    for (const flag of ["--database", "--db"]) {
      const res = await kvc(["bench", "--url", server.url, "--token", server.token, flag, "benchold",
        "--workload", "sum", "--duration", "0.2", "--warmup", "0", "--json"], { cwd: work });
      assert.equal(res.code, 0, show(res));
      assert.match(JSON.parse(res.stdout).url, /\/databases\/benchold\/connect$/);
    }
  });

  test("a token: --token, then KVCONNECT_ACCESS_TOKEN, then DENO_KV_ACCESS_TOKEN, then the local access-token file", async () => {
    const stats = (extra, env) => kvc(["queue", "stats", "--url", server.url, "--json", ...extra], { cwd: work, env });
    const wrong = "wrong-token-0123456789";
    const dataDir = ["--data-dir", server.dataDir];
    // The data directory's file alone (queue included).
    let res = await stats(dataDir, {});
    assert.equal(res.code, 0, show(res));
    assert.equal(JSON.parse(res.stdout).dead, 0);
    // Without it (and no variable): refused, saying where it looked.
    res = await stats([], {});
    assert.notEqual(res.code, 0, show(res));
    assert.match(res.stderr, /KVCONNECT_ACCESS_TOKEN/);
    assert.match(res.stderr, /access-token/);
    // DENO_KV_ACCESS_TOKEN beats the file, KVCONNECT_ACCESS_TOKEN beats DENO_KV_ACCESS_TOKEN, --token beats both.
    res = await stats(dataDir, { DENO_KV_ACCESS_TOKEN: wrong });
    assert.notEqual(res.code, 0, `a wrong DENO_KV_ACCESS_TOKEN must win over the file\n${show(res)}`);
    res = await stats([], { DENO_KV_ACCESS_TOKEN: server.token });
    assert.equal(res.code, 0, show(res));
    res = await stats([], { KVCONNECT_ACCESS_TOKEN: wrong, DENO_KV_ACCESS_TOKEN: server.token });
    assert.notEqual(res.code, 0, `KVCONNECT_ACCESS_TOKEN comes first\n${show(res)}`);
    res = await stats([], { KVCONNECT_ACCESS_TOKEN: server.token, DENO_KV_ACCESS_TOKEN: wrong });
    assert.equal(res.code, 0, show(res));
    res = await stats(["--token", server.token], { KVCONNECT_ACCESS_TOKEN: wrong, DENO_KV_ACCESS_TOKEN: wrong });
    assert.equal(res.code, 0, show(res));
    // The same resolution in export --url and bench.
    res = await kvc(["export", "--url", server.url, "--prefix", '["posts"]'], { cwd: work, env: { DENO_KV_ACCESS_TOKEN: server.token } });
    assert.equal(res.code, 0, show(res));
    assert.equal(res.stdout.trim().split("\n").length, 1);
    res = await kvc(["export", "--url", server.url, ...dataDir, "--prefix", '["posts"]'], { cwd: work });
    assert.equal(res.code, 0, show(res));
    res = await kvc(["bench", "--url", server.url, "--workload", "sum", "--duration", "0.2", "--warmup", "0", "--json"],
      { cwd: work, env: { KVCONNECT_ACCESS_TOKEN: server.token } });
    assert.equal(res.code, 0, show(res));
  });

  test("a missing data directory is refused by its absolute path and never created", async () => {
    const backups = path.join(work, "backups-none");
    const cases = [
      ["db", "list"], ["db", "rename", "a", "b"], ["db", "delete", "a", "--yes"],
      ["token", "create", "--db", "default", "--scope", "read"], ["token", "list"], ["token", "revoke", "abc"],
      ["export"], ["import", "-i", dump], ["backup", "--all", "--to", path.join(work, "bk")],
    ];
    for (const args of cases) {
      const res = await kvc([...args, "--data-dir", "typo-data"], { cwd: work });
      assert.notEqual(res.code, 0, show(res));
      assert.ok(res.stderr.includes(path.join(work, "typo-data")), `the absolute path is named\n${show(res)}`);
      assert.ok(!fs.existsSync(path.join(work, "typo-data")), `\`${args.join(" ")}\` created the data directory`);
    }
    // backup list and restore on a missing backup directory: an error, nothing created.
    for (const args of [["backup", "list", "--from", backups], ["restore", "--from", backups, "--db", "x", "--data-dir", server.dataDir]]) {
      const res = await kvc(args, { cwd: work });
      assert.notEqual(res.code, 0, show(res));
      assert.ok(res.stderr.includes(backups), show(res));
      assert.ok(!fs.existsSync(backups), `\`${args.join(" ")}\` created ${backups}`);
    }
    // db create is the one command (with serve) that makes one.
    const made = await kvc(["db", "create", "fresh", "--data-dir", "new-data"], { cwd: work });
    assert.equal(made.code, 0, show(made));
    assert.ok(fs.existsSync(path.join(work, "new-data")));
    const listed = await kvc(["db", "list", "--json", "--data-dir", "new-data"], { cwd: work });
    assert.deepEqual(JSON.parse(listed.stdout).map((d) => d.name).sort(), ["default", "fresh"]);
  });

  test("errors say what to do next: import into a missing database", async () => {
    let res = await kvc(["import", "--db", "copy", "--url", server.url, "--token", server.token, "-i", dump], { cwd: work });
    assert.notEqual(res.code, 0, show(res));
    assert.match(res.stderr, /Create it with `kvconnect db create copy`/);
    const dir = path.join(work, "offline");
    expectCliOk(await kvc(["db", "create", "other", "--data-dir", dir], { cwd: work }));
    res = await kvc(["import", "--db", "copy", "--data-dir", dir, "-i", dump], { cwd: work });
    assert.notEqual(res.code, 0, show(res));
    assert.match(res.stderr, /create it with `kvconnect db create copy --data-dir /);
  });

  test("keys in the console's syntax, typed KvKeyJSON still accepted", async () => {
    const keysOf = (res) => res.stdout.trim().split("\n").filter(Boolean).map((l) => JSON.stringify(JSON.parse(l).key));
    const exportPrefix = (prefix, viaUrl) => kvc(["export", "--prefix", prefix,
      ...(viaUrl ? ["--url", server.url, "--token", server.token] : ["--data-dir", server.dataDir])], { cwd: work });
    for (const viaUrl of [false, true]) {
      let res = await exportPrefix('["users"]', viaUrl);
      assert.equal(res.code, 0, show(res));
      assert.deepEqual(keysOf(res), [JSON.stringify(USERS_1), JSON.stringify(USERS_2)]);
      res = await exportPrefix('["users", 1n]', viaUrl);
      assert.equal(res.code, 0, show(res));
      assert.deepEqual(keysOf(res), []);  // keys strictly under ["users", 1n]: none
      res = await exportPrefix(' [ "posts" , ] ', viaUrl);
      assert.deepEqual(keysOf(res), [JSON.stringify(POSTS_1)]);
      res = await exportPrefix(JSON.stringify([{ type: "string", value: "users" }]), viaUrl);
      assert.equal(res.code, 0, show(res));
      assert.equal(keysOf(res).length, 2);
      res = await exportPrefix("['users']", viaUrl);
      assert.equal(res.code, 2, show(res));
      assert.match(res.stderr, /--prefix: strings need double quotes at position 2/);
    }
    // import --prefix too: a key outside the prefix is refused.
    const res = await kvc(["import", "--url", server.url, "--token", server.token, "--db", "benchold",
      "--prefix", '["users"]', "-i", dump], { cwd: work });
    assert.notEqual(res.code, 0, show(res));
    assert.match(res.stderr, /line 3: the key is not under the prefix/);
  });

  test("queue stats and dead list: a table by default, --json for scripts", async () => {
    const call = async (what, body) => {
      const r = await fetch(`${server.url}/queue/v1/${what}`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assert.equal(r.status, 200, await r.clone().text());
      return await r.json();
    };
    await call("enqueue", { messages: [{ value: { type: "string", value: "doomed" }, backoff_schedule: [] }] });
    const { messages } = await call("pull", { max_messages: 1, wait: 5000 });
    assert.equal(messages.length, 1);
    const nack = await call("nack", { leases: [messages[0].lease], error: "refused by the test" });
    assert.equal(nack.results[0].status, "dead");

    const base = ["--url", server.url, "--token", server.token];
    let res = await kvc(["queue", "stats", ...base], { cwd: work });
    assert.equal(res.code, 0, show(res));
    assert.throws(() => JSON.parse(res.stdout), undefined, "human output is no JSON");
    assert.match(res.stdout, /ready\s+0 messages/);
    assert.match(res.stdout, /dead\s+1 dead letter\n/);
    res = await kvc(["queue", "stats", ...base, "--json"], { cwd: work });
    const counts = JSON.parse(res.stdout);
    assert.deepEqual([counts.ready, counts.delayed, counts.leased, counts.dead], [0, 0, 0, 1], res.stdout);

    res = await kvc(["queue", "dead", "list", ...base], { cwd: work });
    assert.equal(res.code, 0, show(res));
    assert.match(res.stdout, /^ID\s+DEAD SINCE\s+ATTEMPTS\s+LAST ERROR\s+VALUE/);
    assert.match(res.stdout, /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((just now|\d+ s ago)\)/);
    assert.match(res.stdout, /refused by the test/);
    assert.match(res.stdout, /^1 dead letter\.$/m);
    res = await kvc(["queue", "dead", "list", ...base, "--json"], { cwd: work });
    const page = JSON.parse(res.stdout);
    assert.equal(page.dead_letters.length, 1);
    assert.equal(typeof page.dead_letters[0].dead_at, "number");

    res = await kvc(["queue", "dead", "requeue", "--all", ...base], { cwd: work });
    assert.equal(res.code, 0, show(res));
    assert.match(res.stdout, /^Requeued 1 dead letter \(due now\)\.$/m);
    res = await kvc(["queue", "dead", "purge", ...base], { cwd: work });
    assert.equal(res.code, 2, `purge names --id or --all\n${show(res)}`);
  });

  test("bench works in a scratch database it deletes (--keep keeps it) and says what it writes", async () => {
    const dbNames = async () => JSON.parse(expectCliOk(await server.dbCmd("list", "--json"), server).stdout).map((d) => d.name);
    const before = await dbNames();
    const args = ["bench", "--url", server.url, "--token", server.token, "--workload", "get", "--keys", "1",
      "--duration", "0.2", "--warmup", "0"];
    let res = await kvc(args, { cwd: work });
    assert.equal(res.code, 0, show(res));
    const made = /scratch database '(bench-[0-9a-f]+)'/.exec(res.stderr);
    assert.ok(made, `bench names its scratch database\n${show(res)}`);
    assert.match(res.stderr, /writes 1 key \["bench", "kv", 0\]/);
    assert.match(res.stderr, new RegExp(`deleted the scratch database '${made[1]}'`));
    assert.match(res.stdout, /get over h2, 1 connection x /);  // not "1 connection(s)"
    assert.deepEqual(await dbNames(), before, "the scratch database is gone");
    // Nothing was written to the default database.
    res = await kvc(["export", "--data-dir", server.dataDir, "--prefix", '["bench"]'], { cwd: work });
    assert.equal(res.code, 0, show(res));
    assert.equal(res.stdout, "", "bench wrote into the default database");
    assert.match(res.stderr, /Exported 0 entries/);

    res = await kvc([...args, "--keep"], { cwd: work });
    assert.equal(res.code, 0, show(res));
    const kept = /scratch database '(bench-[0-9a-f]+)'/.exec(res.stderr)[1];
    assert.match(res.stderr, /kvconnect db delete bench-[0-9a-f]+ --yes/);
    assert.ok((await dbNames()).includes(kept), "--keep keeps it");
    expectCliOk(await server.dbCmd("delete", kept, "--yes"), server);
  });

  test("plurals: 1 entry, 1 atomic write", async () => {
    const one = path.join(work, "one.ndjson");
    await fsp.writeFile(one, line(POSTS_1, "once") + "\n");
    const res = await kvc(["import", "--url", server.url, "--token", server.token, "-i", one], { cwd: work });
    assert.equal(res.code, 0, show(res));
    assert.match(res.stderr, /Imported 1 entry \(\d+ bytes of dump\) into 'default' in 1 atomic write in /);
    const ex = await kvc(["export", "--data-dir", server.dataDir, "--prefix", '["posts"]'], { cwd: work });
    assert.match(ex.stderr, /Exported 1 entry \(\d+ bytes\)/);
  });
});
