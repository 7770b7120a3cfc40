// The web console (/console) in a real browser: Debian's Chromium, headless, driven by
// playwright-core. Data comes from the real clients: Deno seeds it (deno/console_data.ts) and
// reads the results; @deno/kv (Node) changes entries while the page is open. Covers the
// security headers, sign-in (a refused token, then the server's bootstrap token), browsing by
// prefix with paging, viewing a value (decoded and raw), an edit refused because another client
// wrote meanwhile (409 shown, the other value kept) and a fresh edit that Deno then reads,
// creating, deleting, live watches of a key and a prefix, export and import, a key that is no
// Deno key (shown as raw:…, opened and deleted), the server numbers,
// and that the token stays out of localStorage and cookies. No Content-Security-Policy violation
// may be reported. Saves a screenshot to tests/e2e/artifacts/console.png.
// Skipped when /usr/bin/chromium is missing (deploy/dev.sh deps installs it).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import v8 from "node:v8";
import { openKv } from "@deno/kv";
import {
  annotate, E2E_DIR, expectDenoOk, LOCAL_BACKEND, removeTempDirs, runDeno, sleep, startServer,
} from "./harness.mjs";
import { dataPath, describeAnswer, metadata, pbMutation, withH2 } from "./raw_client.mjs";

const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
const ARTIFACTS = path.join(E2E_DIR, "artifacts");
const skip = LOCAL_BACKEND
  ? "needs the server"
  : !fs.existsSync(CHROMIUM)
    ? `Chromium is not installed at ${CHROMIUM} (Debian: apt-get install chromium; ` +
      "deploy/dev.sh deps installs it)"
    : false;
if (skip && !LOCAL_BACKEND) console.log(`# console.test.mjs skipped: ${skip}`);

// Polls `fn` until it returns a truthy value; fails with `what` (and the last value) after `ms`.
async function until(what, fn, ms = 10_000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
    await sleep(100);
  }
}

describe("web console in Chromium", { skip }, () => {
  let server;
  let browser;
  let page;
  let node;  // @deno/kv, the other client
  const cspViolations = [];
  const pageErrors = [];

  before(async () => {
    // --access-token: the bootstrap token, admin everywhere. Key counts refreshed every 200 ms.
    server = await startServer({ extraArgs: ["--metrics-stats-interval-ms", "200"] });
    const seeded = await runDeno("console_data.ts", {
      kvUrl: server.url, token: server.token, env: { KV_MODE: "seed" },
    });
    expectDenoOk(seeded, server);
    node = await openKv(server.url, {
      accessToken: server.token, encodeV8: v8.serialize, decodeV8: v8.deserialize,
    });
    const { chromium } = await import("playwright-core");
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"], headless: true });
    const context = await browser.newContext({ viewport: { width: 1440, height: 1100 }, acceptDownloads: true });
    page = await context.newPage();
    page.on("console", (msg) => {
      if (/Content Security Policy|Refused to/i.test(msg.text())) cspViolations.push(msg.text());
    });
    page.on("pageerror", (e) => pageErrors.push(String(e)));
  });

  after(async () => {
    await browser?.close();
    node?.close();
    await server?.kill();
    await removeTempDirs();
  });

  // Runs a step; a failure carries the server's output and what the page reported.
  async function step(fn) {
    try {
      await fn();
    } catch (e) {
      e.message += `\n--- page errors ---\n${pageErrors.join("\n")}\n--- CSP ---\n${cspViolations.join("\n")}`;
      throw annotate(e, server);
    }
  }

  const text = async (selector) => (await page.locator(selector).textContent()) ?? "";
  const row = (key) => page.locator(`#entries-body tr[data-key='${key}']`);
  const waitText = (selector, re, ms) =>
    until(`${selector} to match ${re}`, async () => re.test(await text(selector)) && (await text(selector)), ms);

  async function denoRead(keys) {
    const res = await runDeno("console_data.ts", {
      kvUrl: server.url, token: server.token, env: { KV_MODE: "read", KV_KEYS: JSON.stringify(keys) },
    });
    return expectDenoOk(res, server).entries;
  }

  test("answers with the security headers", async () => {
    for (const p of ["/console", "/console/app.js", "/console/nope"]) {
      const res = await fetch(`${server.url}${p}`);
      assert.equal(res.status, p.endsWith("nope") ? 404 : 200, p);
      assert.match(res.headers.get("content-security-policy"), /default-src 'none'; script-src 'self'/);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff");
      assert.equal(res.headers.get("referrer-policy"), "no-referrer");
      await res.arrayBuffer();
    }
    const post = await fetch(`${server.url}/console`, { method: "POST", body: "x" });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get("allow"), "GET, HEAD");
    await post.arrayBuffer();
  });

  test("sign in: a wrong token is refused, the bootstrap token works", () => step(async () => {
    await page.goto(`${server.url}/console`);
    await page.locator("#token-input").fill("not-the-token-1234");
    await page.locator("#signin-button").click();
    await waitText("#signin-message", /refused/);
    assert.ok(await page.locator("#app-view").isHidden());
    await page.locator("#token-input").fill(server.token);
    await page.locator("#signin-button").click();
    await page.locator("#app-view").waitFor({ state: "visible" });
    assert.equal(await page.locator("#db-select").inputValue(), "default");
    const storage = await page.evaluate(() => ({
      local: JSON.stringify(localStorage), session: JSON.stringify(sessionStorage), cookie: document.cookie,
    }));
    assert.ok(!storage.local.includes(server.token), "not in localStorage");
    assert.ok(!storage.session.includes(server.token), "not in sessionStorage unless asked");
    assert.equal(storage.cookie, "");
  }));

  test("browse: pages of the root, descend by key parts, page with the cursor", () => step(async () => {
    await waitText("#list-status", /^50 entries \(more below\)$/);
    assert.equal(await page.locator("#entries-body tr").count(), 50);
    // Every seeded key is under "console"; a row's parts past the prefix descend when clicked.
    await page.locator("#entries-body tr").first().locator("button.part", { hasText: '"console"' }).click();
    await until("the breadcrumb", async () => (await text("#breadcrumb")).includes('"console"'));
    await row('["console", "blob"]').waitFor();
    await row('["console", "many", 0]').locator("button.part", { hasText: '"many"' }).click();
    await waitText("#list-status", /^50 entries \(more below\)$/);
    assert.equal(await page.locator("#entries-body tr").first().getAttribute("data-key"), '["console", "many", 0]');
    await page.locator("#list-more").click();
    await waitText("#list-status", /^100 entries \(more below\)$/);
    await page.locator("#list-more").click();
    await waitText("#list-status", /^120 entries$/);
    assert.ok(await page.locator("#list-more").isHidden());
    assert.equal(await page.locator("#entries-body tr").last().getAttribute("data-key"), '["console", "many", 119]');
    // Up through the breadcrumb, then a prefix typed in the key syntax.
    await page.locator("#breadcrumb button", { hasText: '"console"' }).click();
    await row('["console", "blob"]').waitFor();
    await page.locator("#prefix-input").fill('["console", "users"]');
    await page.locator("#prefix-form button").click();
    await waitText("#list-status", /^3 entries$/);
    assert.deepEqual(await page.locator("#entries-body tr").evaluateAll((rows) => rows.map((r) => r.dataset.key)), [
      '["console", "users", "ada"]', '["console", "users", "grace"]', '["console", "users", "linus"]',
    ]);
    await page.locator("#prefix-input").fill("[\"console\", 42n]");
    await page.locator("#prefix-form button").click();
    await waitText("#list-status", /^1 entry$/);
    await row('["console", 42n, true]').waitFor();
  }));

  // Lists the key itself as a prefix (its own entry comes first, marked) and opens it.
  async function openKey(key) {
    await page.locator("#prefix-input").fill(key);
    await page.locator("#prefix-form button").click();
    await page.locator(`#entries-body tr[data-key='${key}'] .badge`).waitFor();
    await row(key).locator("button.open").click();
    await until(`the entry ${key}`, async () => (await text("#detail-key")) === key);
  }

  test("view a value decoded, as KvValueJSON and as raw bytes", () => step(async () => {
    await openKey('["console", "users", "ada"]');
    assert.equal(await text("#detail-preview"), '{ name: "Ada", langs: ["en", "fr"], born: 1815 }');
    const json = JSON.parse(await text("#detail-json"));
    assert.deepEqual(json.value.langs, { type: "Array", value: [{ type: "string", value: "en" }, { type: "string", value: "fr" }] });
    assert.equal(await page.locator("#edit-format").inputValue(), "plain");
    assert.deepEqual(JSON.parse(await page.locator("#edit-value").inputValue()), { name: "Ada", langs: ["en", "fr"], born: 1815 });
    await page.locator("#detail-raw-button").click();
    await waitText("#detail-raw", /^encoding: v8, \d+ bytes/);
    assert.match(await text("#detail-raw"), /00000000  ff (0d|0e|0f|10) /, "a V8 header (format 13 to 16) in the hex dump");
    // Types plain JSON lacks: the typed editor.
    await openKey('["console", "settings"]');
    assert.equal(await text("#detail-preview"), 'Map(1) { "theme" => "dark" }');
    assert.equal(await page.locator("#edit-format").inputValue(), "typed");
    await openKey('["console", "counter"]');
    assert.equal(await text("#detail-preview"), "KvU64(7n)");
    await page.locator("#detail-raw-button").click();
    await waitText("#detail-raw", /^encoding: le64, 8 bytes/);
    await openKey('["console", "blob"]');
    assert.equal(await text("#detail-preview"), "Uint8Array(3) [1, 2, 3]");
  }));

  test("edit: a stale save is refused with a clear conflict, a fresh one lands", () => step(async () => {
    await openKey('["console", "conflict"]');
    const readStamp = await text("#detail-versionstamp");
    await page.locator("#edit-value").fill('{"n": 2, "by": "console"}');
    // Meanwhile another client writes the entry.
    await node.set(["console", "conflict"], { n: 100, by: "node" });
    await page.locator("#edit-save").click();
    const msg = await waitText("#detail-message", /Conflict: not saved/);
    assert.match(msg, new RegExp(`versionstamp ${readStamp}`));
    assert.equal(await page.locator("#detail-message").getAttribute("class"), "message conflict");
    assert.equal(await page.locator("#edit-value").inputValue(), '{"n": 2, "by": "console"}', "the edit is kept");
    assert.deepEqual((await node.get(["console", "conflict"])).value, { n: 100, by: "node" }, "not overwritten");
    // Reload, edit again, save.
    await page.locator("#detail-reload").click();
    await until("the other client's value", async () =>
      JSON.parse(await page.locator("#edit-value").inputValue()).by === "node");
    await page.locator("#edit-value").fill('{"n": 3, "by": "console"}');
    await page.locator("#edit-save").click();
    await waitText("#detail-message", /^Saved\. New versionstamp [0-9a-f]{20}\.$/);
    const [entry] = await denoRead([["console", "conflict"]]);
    assert.deepEqual(entry.value, { n: 3, by: "console" }, "Deno reads the console's edit");
    assert.equal(await text("#detail-versionstamp"), entry.versionstamp);
  }));

  test("create and delete (with the versionstamp check)", () => step(async () => {
    await page.locator("#new-entry").click();
    await page.locator("#create-key").fill('["console", "made", 1n]');
    await page.locator("#create-value").fill('{"hello": "from the console", "list": [1, 2]}');
    await page.locator("#create-save").click();
    await waitText("#detail-message", /^Created\.$/);
    // Creating it again is refused: "only if absent" is on by default.
    await page.locator("#new-entry").click();
    await page.locator("#create-key").fill('["console", "made", 1n]');
    await page.locator("#create-value").fill('"again"');
    await page.locator("#create-save").click();
    await waitText("#create-message", /already exists/);
    await page.locator("#create-cancel").click();

    await openKey('["console", "doomed"]');
    assert.equal(await text("#detail-preview"), '"delete me"');
    await page.locator("#edit-delete").click();
    await waitText("#edit-delete", /Click again/);
    await page.locator("#edit-delete").click();
    await waitText("#list-message", /^Deleted \["console", "doomed"\]\.$/);
    await until("the row to go", async () => (await row('["console", "doomed"]').count()) === 0);
    const [doomed] = await denoRead([["console", "doomed"]]);
    assert.equal(doomed.value, null, "Deno sees it deleted");
    // (KV_KEYS holds no bigints: the created entry is read through @deno/kv.)
    assert.deepEqual((await node.get(["console", "made", 1n])).value, { hello: "from the console", list: [1, 2] });
  }));

  test("watch a key and a prefix: other clients' writes appear without a reload", () => step(async () => {
    await page.locator("#watch-key").fill('["console", "live"]');
    await page.locator("#watch-mode").selectOption("key");
    await page.locator("#watch-start").click();
    await waitText("#watch-status", /^Watching key \["console", "live"\]/);
    // The first event has the key's state: no entry yet.
    await until("the first event", async () => (await text("#watch-body")).includes("(no entry)"));
    await node.set(["console", "live"], "hello from node");
    await until("node's value in the watch table", async () =>
      (await text("#watch-body tr[data-key='[\"console\", \"live\"]'] td.preview")) === '"hello from node"');
    await node.set(["console", "live"], { step: 2 });
    await until("the next value", async () =>
      (await text("#watch-body tr[data-key='[\"console\", \"live\"]'] td.preview")) === "{ step: 2 }");

    await page.locator("#prefix-input").fill('["console", "users"]');
    await page.locator("#prefix-form button").click();
    await waitText("#list-status", /^3 entries$/);
    await page.locator("#watch-prefix").click();
    await waitText("#watch-status", /^Watching keys under \["console", "users"\]/);
    await node.set(["console", "users", "margaret"], { name: "Margaret", born: 1936 });
    await until("the prefix event", async () =>
      (await text("#watch-body")).includes('{ name: "Margaret", born: 1936 }'));
    // The listing follows too.
    await until("the new row", async () => (await row('["console", "users", "margaret"]').count()) === 1);
  }));

  test("export the prefix as NDJSON and import it back", () => step(async () => {
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.locator("#export-button").click(),
    ]);
    const file = path.join(ARTIFACTS, "console-export.ndjson");
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await download.saveAs(file);
    const lines = fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(lines.length, 4, "ada, grace, linus, margaret");
    for (const l of lines) {
      assert.match(l.versionstamp, /^[0-9a-f]{20}$/);
      assert.equal(l.key[1].value, "users");
    }
    await waitText("#transfer-message", /^Exported 4 entries under \["console", "users"\]/);

    // Import the same lines under another name.
    const moved = lines.map((l) => JSON.stringify({ ...l, key: [{ type: "string", value: "imported" }, ...l.key.slice(2)] }));
    const importFile = path.join(ARTIFACTS, "console-import.ndjson");
    fs.writeFileSync(importFile, `${moved.join("\n")}\n`);
    await page.locator("#import-file").setInputFiles(importFile);
    await page.locator("#import-button").click();
    await waitText("#transfer-message", /4 written, 0 skipped, 0 failed/);
    const got = await denoRead([["imported", "ada"], ["imported", "margaret"]]);
    assert.deepEqual(got.map((e) => e.value), [
      { name: "Ada", langs: ["en", "fr"], born: 1815 }, { name: "Margaret", born: 1936 },
    ]);
  }));

  test("a key that is no Deno key: the root listing shows it as raw:…, it opens and is deleted", () => step(async () => {
    // The bytes 00 6b 76 (an unknown tag), stored with a hand-made KV Connect write: they sort
    // before every Deno key, so they are on the root listing's first page.
    await withH2(server.url, {}, async (h2) => {
      const m = await metadata(h2, server.token);
      assert.equal(m.status, 200, describeAnswer(m));
      const body = pbMutation(Buffer.from([0x00, 0x6b, 0x76]), { data: Buffer.from("odd") });
      const w = await dataPath(h2, m.json, "atomic_write", body);
      assert.equal(w.status, 200, describeAnswer(w));
    });
    const key = "[raw:AGt2]";
    await page.locator("#prefix-input").fill("");
    await page.locator("#prefix-form button").click();
    await row(key).waitFor();
    assert.equal(await page.locator("#entries-body tr").first().getAttribute("data-key"), key);
    await row(key).locator("button.open").click();
    await until(`the entry ${key}`, async () => (await text("#detail-key")) === key);
    assert.equal(await text("#detail-preview"), "Uint8Array(3) [111, 100, 100]");
    await page.locator("#edit-delete").click();
    await waitText("#edit-delete", /Click again/);
    await page.locator("#edit-delete").click();
    await waitText("#list-message", /^Deleted \[raw:AGt2\]\.$/);
    await until("the row to go", async () => (await row(key).count()) === 0);
  }));

  test("server numbers from /metrics and a screenshot", () => step(async () => {
    await page.locator("#prefix-input").fill('["console", "users"]');
    await page.locator("#prefix-form button").click();
    await row('["console", "users", "ada"]').locator("button.open").click();
    await waitText("#detail-key", /"ada"/);
    await page.locator("#stats-refresh").click();
    await waitText("#stats-status", /from \/metrics/);
    const facts = await text("#server-facts");
    assert.match(facts, /Commit groups[1-9]/);
    assert.match(facts, /Watch subscriptions/);
    const perDb = await page.locator("#stats-body tr").first().locator("td").allTextContents();
    assert.equal(perDb[0], "default");
    assert.ok(Number(perDb[1].replace(/,/g, "")) >= 130, `keys counted: ${perDb}`);  // at least the seed
    assert.match(perDb[2], /KiB|MiB/);
    assert.match(await text("#db-facts"), /Keys[1-9]/);

    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const shot = path.join(ARTIFACTS, "console.png");
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(fs.statSync(shot).size > 10_000);
    console.log(`# console screenshot: ${shot}`);

    assert.deepEqual(pageErrors, [], "no uncaught errors in the page");
    assert.deepEqual(cspViolations, [], "no Content-Security-Policy violations");
  }));

  test("sign out forgets the token", () => step(async () => {
    await page.locator("#sign-out").click();
    await page.locator("#signin-view").waitFor({ state: "visible" });
    await page.reload();
    await page.locator("#signin-view").waitFor({ state: "visible" });
    assert.ok(await page.locator("#app-view").isHidden());
  }));
});
