// The console's Tokens, Queue and Import/Export pages (src/console/tokens.js, queue.js,
// transfer.js) in Debian's Chromium (headless, playwright-core), each module loaded from the
// server's own /console and mounted by the test with a ctx built from the real api.js, so this
// does not depend on the console's shell. Real clients do the rest:
// - Tokens: a token made on the page opens the database in Deno (deno/console_pages.ts); its
//   secret is shown once (gone from the page after Done, never in the token list); after revoke
//   on the page Deno's Deno.openKv is refused (deno/open_rejected.ts); a non-bootstrap admin
//   token is told it cannot manage tokens.
// - Queue: dead letters made by clients/node (a listenQueue handler that throws until the
//   backoff schedule is used up) are listed with attempts and last error; one requeued (and
//   then delivered to a Node consumer), one purged, the rest purged with "Purge all".
// - Import/Export: 2,000 NDJSON lines imported through POST .../import in 4 requests (not one
//   request a line), progress seen in between and at 100%, every value read back equal by Deno;
//   a cancel mid-import leaves exactly the chunks answered (plus at most the one in flight) and
//   sends nothing more; a bad line is reported with its number; export of a prefix downloads the
//   server's dump.
// Screenshots: tests/e2e/artifacts/console-tokens.png, console-queue.png, console-transfer.png.
// Skipped when /usr/bin/chromium is missing (deploy/dev.sh deps installs it).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { openQueue } from "../../clients/node/mod.js";
import {
  annotate, browserSkip, CHROMIUM, E2E_DIR, expectDenoOk, LOCAL_BACKEND, removeTempDirs, runDeno, sleep,
  startServer, until,
} from "./harness.mjs";

const ARTIFACTS = path.join(E2E_DIR, "artifacts");
const skip = browserSkip("console_pages.test.mjs");


// One NDJSON dump line: key [prefix, i] and the value deno/console_pages.ts expects (bulkValue).
function bulkLine(prefix, i) {
  const key = [{ type: "string", value: prefix }, { type: "number", value: i }];
  const values = [
    { type: "string", value: `item ${i}` },
    { type: "number", value: i + 0.5 },
    { type: "bigint", value: String(BigInt(i) * 1_000_000_000_000n) },
    {
      type: "object", value: {
        i: { type: "number", value: i },
        tags: { type: "Array", value: [{ type: "string", value: "a" }, { type: "string", value: "b" }] },
        when: { type: "Date", value: new Date(i * 1000).toISOString() },
      },
    },
  ];
  return JSON.stringify({ key, value: values[i % 4], versionstamp: "00000000000000010000" });
}

function writeDump(name, prefix, n, { bad } = {}) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const lines = [];
  for (let i = 0; i < n; i++) lines.push(i + 1 === bad ? "{not json" : bulkLine(prefix, i));
  const file = path.join(ARTIFACTS, name);
  fs.writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

describe("console pages (tokens, queue, import/export) in Chromium", { skip }, () => {
  let server;
  let browser;
  let page;
  const cspViolations = [];
  const pageErrors = [];
  const requests = [];  // [method, path] of every admin API call the page made

  before(async () => {
    server = await startServer();
    const { chromium } = await import("playwright-core");
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"], headless: true });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
    page = await context.newPage();
    page.on("console", (msg) => {
      if (/Content Security Policy|Refused to/i.test(msg.text())) cspViolations.push(msg.text());
    });
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith("/admin/")) requests.push([r.method(), u.pathname]);
    });
    // The console's page, signed out; the test mounts each module in an element of its own at
    // the end of <body> (the shell's own <main> stays hidden until sign-in).
    await page.goto(`${server.url}/console`);
    await page.locator("#signin-view").waitFor({ state: "visible" });
  });

  after(async () => {
    await browser?.close();
    await server?.kill();
    await removeTempDirs();
  });

  async function step(fn) {
    try {
      await fn();
    } catch (e) {
      e.message += `\n--- page errors ---\n${pageErrors.join("\n")}\n--- CSP ---\n${cspViolations.join("\n")}`;
      throw annotate(e, server);
    }
  }

  // Mounts /console/<module>.js in a fresh element as the shell would: ctx.api is api.js's
  // AdminClient with `token`; leaving the previous page runs its onLeave functions.
  async function mount(module, { token = server.token, db = "default" } = {}) {
    await page.evaluate(async ({ module, token, db }) => {
      const { AdminClient } = await import("/console/api.js");
      const m = await import(`/console/${module}.js`);
      for (const fn of window.testLeave ?? []) fn();
      window.testLeave = [];
      window.testMessages = [];
      document.getElementById("signin-view").hidden = true;
      document.getElementById("page-host")?.remove();
      const host = document.createElement("div");
      host.id = "page-host";
      document.body.append(host);
      m.mount(host, {
        api: new AdminClient(token), db,
        navigate: (hash) => { location.hash = hash; },
        setMessage: (text, kind) => window.testMessages.push([text, kind]),
        onLeave: (fn) => window.testLeave.push(fn),
      });
    }, { module, token, db });
  }

  const text = async (selector) => (await page.locator(selector).first().textContent()) ?? "";
  const waitText = (selector, re, ms) =>
    until(`${selector} to match ${re}`, async () => re.test(await text(selector)) && (await text(selector)), ms);

  async function admin(method, p, body) {
    const res = await fetch(`${server.url}/admin/v1${p}`, {
      method, headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const t = await res.text();
    assert.ok(res.ok, `${method} ${p}: ${res.status} ${t}`);
    return JSON.parse(t);
  }
  const countUnder = async (prefix) =>
    (await admin("POST", "/databases/default/entries/count", { prefix: [{ type: "string", value: prefix }] })).count;

  async function shot(name) {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const file = path.join(ARTIFACTS, name);
    await page.screenshot({ path: file, fullPage: true });
    console.log(`# console page screenshot: ${file}`);
  }

  test("modules are served with the console's headers", async () => {
    for (const f of ["tokens.js", "queue.js", "transfer.js", "page_kit.js", "pages.css"]) {
      const res = await fetch(`${server.url}/console/${f}`);
      assert.equal(res.status, 200, f);
      assert.match(res.headers.get("content-type"), f.endsWith(".css") ? /^text\/css/ : /^text\/javascript/);
      assert.match(res.headers.get("content-security-policy"), /script-src 'self'/);
      await res.arrayBuffer();
    }
  });

  test("tokens: create shows the secret once and Deno opens the database with it; revoke locks Deno out", () => step(async () => {
    await mount("tokens");
    await waitText("#tokens-title", /Tokens/);
    await until("the database choices", async () => (await page.locator("#token-db-list input").count()) > 0);
    assert.ok(await page.locator("#token-db-list input[value='default']").isChecked(), "the current database is preselected");
    await page.locator("#token-name").fill("deno-app");
    await page.locator("#token-scope").selectOption("write");
    await page.locator("#token-expires").selectOption("30d");
    await page.locator("#token-create").click();
    const secret = (await waitText("#token-secret", /\S{16,}/)).trim();
    assert.match(await text("#token-secret-box"), /shown only once/);
    assert.match(await text("#token-secret-box"), /DENO_KV_ACCESS_TOKEN/);
    // The list has it, active, expiring in about 30 days; the list never carries a secret.
    const row = page.locator("#tokens-body tr.token-row", { hasText: "deno-app" });
    await row.waitFor();
    assert.equal(await row.getAttribute("data-status"), "active");
    assert.match(await row.locator("td").nth(4).textContent(), /^.+ \(in 30 days\)$/);
    assert.match(await row.locator("td").nth(3).textContent(), /just now|seconds? ago/);
    assert.equal(await row.locator("td.dbs").textContent(), "default");
    const listed = JSON.stringify(await admin("GET", "/tokens"));
    assert.ok(!listed.includes(secret), "no secret in the token list");
    // Copy: to the clipboard where the browser allows it, else the text is selected.
    await page.locator("#token-copy").click();
    const copied = await waitText("#token-secret-box .row [role=status]", /Copied|Selected/);
    if (/Copied/.test(copied)) {
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
    }

    // Deno opens the database with it, writes and reads.
    const used = await runDeno("console_pages.ts", { kvUrl: server.url, token: secret, env: { KV_MODE: "use" } });
    expectDenoOk(used, server);

    // Done hides it for good: not in the page any more, and a fresh mount cannot show it.
    await page.locator("#token-done").click();
    assert.equal(await page.locator("#token-secret").count(), 0);
    assert.ok(!(await page.content()).includes(secret), "the secret left the page");

    // A second token for every database, read-only, never expiring.
    await page.locator("#token-name").fill("reader-all");
    await page.locator("#token-scope").selectOption("read");
    await page.locator("#token-all-dbs").check();
    await page.locator("#token-expires").selectOption("never");
    await page.locator("#token-create").click();
    await waitText("#token-secret", /\S{16,}/);
    await page.locator("#token-done").click();
    const reader = page.locator("#tokens-body tr.token-row", { hasText: "reader-all" });
    await reader.waitFor();
    assert.equal(await reader.locator("td.dbs").textContent(), "all databases");
    assert.equal(await reader.locator("td").nth(4).textContent(), "never");

    // Revoke asks once more, then the row says revoked and Deno is refused.
    const revoke = row.locator("button.revoke");
    await revoke.click();
    assert.equal(await revoke.textContent(), "Click again to revoke");
    assert.equal((await admin("GET", "/tokens")).tokens.find((t) => t.name === "deno-app").status, "active",
      "one click revokes nothing");
    await revoke.click();
    await waitText(".page-tokens .message", /Revoked "deno-app"/);
    await until("the row to say revoked", async () => (await row.getAttribute("data-status")) === "revoked");
    assert.equal(await row.locator("button.revoke").count(), 0, "a revoked token has no revoke button");
    assert.equal((await admin("GET", "/tokens")).tokens.find((t) => t.name === "deno-app").status, "revoked");
    const refused = await runDeno("open_rejected.ts", { kvUrl: server.url, token: secret });
    expectDenoOk(refused, server);
    await shot("console-tokens.png");

    // Hiding revoked and expired tokens.
    await page.locator("#tokens-show-all").uncheck();
    assert.equal(await page.locator("#tokens-body tr.token-row", { hasText: "deno-app" }).count(), 0);
    assert.equal(await page.locator("#tokens-body tr.token-row", { hasText: "reader-all" }).count(), 1);

    // A database admin token may not manage tokens: the page says so instead of a bare 403.
    const dbAdmin = (await admin("POST", "/tokens", { scope: "admin", database: "default" })).token;
    await mount("tokens", { token: dbAdmin });
    await waitText(".page-tokens .message", /Only the server's bootstrap token manages tokens/);
    assert.ok(await page.locator("#token-form").isHidden());
  }));

  test("queue: dead letters with their last error and attempts; requeue one, purge one, purge all", { timeout: 120_000 }, () => step(async () => {
    const countIs = (name, value) => until(`the ${name} count at ${value}`,
      async () => (await text(`#queue-counts [data-count=${name}] dd`)) === value);
    // Three messages whose handler always throws; backoff [1]: 1 attempt + 1 retry, then dead.
    const q = openQueue({ url: server.url, accessToken: server.token });
    for (let n = 1; n <= 3; n++) await q.enqueue({ kind: "poison", n }, { backoffSchedule: [1] });
    const listening = q.listenQueue((v) => {
      throw new TypeError(`poison message ${v.n} refused`);
    });
    await until("three dead letters", async () => (await admin("GET", "/databases/default/queue")).dead === 3, 30_000);
    q.close();
    await listening;

    await mount("queue");
    await until("three dead rows", async () => (await page.locator("#dead-body tr.dead-row").count()) === 3);
    // The counts and the list load side by side: wait for each rather than read one too soon.
    await countIs("dead", "3");
    await countIs("ready", "0");
    const rows = page.locator("#dead-body tr.dead-row");
    for (let i = 0; i < 3; i++) {
      const r = rows.nth(i);
      assert.equal(await r.locator("td.attempts").textContent(), "2");
      assert.match(await r.locator("td.error-text").textContent(), /poison message \d refused/);
      assert.match(await r.locator("td.preview").textContent(), /kind: "poison"/);
      assert.match(await r.locator("td").nth(4).textContent(), /just now|seconds? ago/);
    }
    assert.equal(await text("#dead-status"), "3 dead letters shown");
    await shot("console-queue.png");

    // Requeue the letter of message 2: it leaves the dead letters and a consumer gets it again.
    const second = rows.filter({ hasText: "poison message 2 refused" });
    await second.locator("button.requeue").click();
    await waitText(".page-queue .message", /Requeued 1 dead letter/);
    await until("two dead rows", async () => (await page.locator("#dead-body tr.dead-row").count()) === 2);
    await countIs("dead", "2");
    const c = await admin("GET", "/databases/default/queue");
    assert.equal(c.ready + c.delayed + c.leased, 1, `the requeued message is back: ${JSON.stringify(c)}`);
    const got = [];
    const consumer = openQueue({ url: server.url, accessToken: server.token });
    const consuming = consumer.listenQueue((v) => { got.push(v); });
    await until("the requeued message delivered", () => got.length === 1);
    consumer.close();
    await consuming;
    assert.deepEqual(got[0], { kind: "poison", n: 2 });

    // Purge one (asked twice), then all.
    const first = page.locator("#dead-body tr.dead-row", { hasText: "poison message 1 refused" });
    await first.locator("button.purge").click();
    assert.equal(await page.locator("#dead-body tr.dead-row").count(), 2, "one click purges nothing");
    await first.locator("button.purge").click();
    await waitText(".page-queue .message", /Purged 1 dead letter/);
    await until("one dead row", async () => (await page.locator("#dead-body tr.dead-row").count()) === 1);
    await page.locator("#dead-purge-all").click();
    await page.locator("#dead-purge-all").click();
    await waitText(".page-queue .message", /Purged 1 dead letter/);
    await waitText("#dead-status", /^No dead letters\.$/);
    await countIs("dead", "0");
    assert.deepEqual((await admin("POST", "/databases/default/queue/dead/list", { limit: 10 })).dead_letters, []);
    const left = await admin("GET", "/databases/default/queue");
    assert.equal(left.ready + left.delayed + left.leased + left.dead, 0, JSON.stringify(left));
  }));

  test("import: 2,000 lines through the bulk endpoint in chunks, progress to 100%, Deno reads them back", () => step(async () => {
    const file = writeDump("console-pages-bulk.ndjson", "bulk", 2000);
    await mount("transfer");
    // Watch every progress text the page shows; slow each request a little so there is an
    // in-between to see.
    await page.evaluate(() => {
      window.testProgress = [];
      const node = document.getElementById("import-progress-text");
      new MutationObserver(() => window.testProgress.push(node.textContent))
        .observe(node, { childList: true, characterData: true, subtree: true });
    });
    const isImport = (url) => url.pathname.endsWith("/databases/default/import");
    await page.route(isImport, async (route) => {
      await sleep(150);
      await route.continue();
    });
    const before = requests.length;
    try {
      await page.locator("#import-file-input").setInputFiles(file);
      await page.locator("#import-start").click();
      await waitText("#import-message", /^Imported console-pages-bulk\.ndjson into default: 2,000 entries written/, 30_000);
    } finally {
      await page.unroute(isImport);
    }
    assert.match(await text("#import-progress-text"), /^2,000 of 2,000 lines \(100%\) · .* · 2,000 entries written$/);
    const bar = await page.locator("#import-progress").evaluate((b) => [b.value, b.max]);
    assert.equal(bar[0], bar[1], "the bar is full");
    assert.equal(bar[1], fs.statSync(file).size);
    const progress = await page.evaluate(() => window.testProgress);
    const between = progress.filter((p) => /\((\d|[1-9]\d)%\)/.test(p) && !/^0 of/.test(p));
    assert.ok(between.length >= 2, `progress in between: ${JSON.stringify(progress)}`);
    const made = requests.slice(before);
    assert.equal(made.filter(([m, p]) => m === "POST" && p.endsWith("/import")).length, 4, "500 lines a request");
    assert.equal(made.filter(([, p]) => p.endsWith("/entries/set")).length, 0, "no request per line");

    const read = await runDeno("console_pages.ts", {
      kvUrl: server.url, token: server.token, env: { KV_MODE: "bulk", KV_PREFIX: "bulk", KV_COUNT: "2000" },
    });
    assert.equal(expectDenoOk(read, server).count, 2000);
    await shot("console-transfer.png");

    // The same file again at full speed (no slowed requests), for the record: click to message.
    await mount("transfer");
    await page.locator("#import-file-input").setInputFiles(file);
    const started = Date.now();
    await page.locator("#import-start").click();
    await waitText("#import-message", /^Imported .*: 2,000 entries written/, 30_000);
    console.log(`# console import of 2,000 lines through the bulk endpoint: ${Date.now() - started} ms ` +
      "(click to message, 4 requests)");
  }));

  test("import: cancel mid-import keeps the chunks written and sends nothing more", () => step(async () => {
    const file = writeDump("console-pages-cancel.ndjson", "cancel", 2000);
    await mount("transfer");
    const isImport = (url) => url.pathname.endsWith("/databases/default/import");
    await page.route(isImport, async (route) => {
      await sleep(400);
      await route.continue().catch(() => {});  // the page may have cancelled it meanwhile
    });
    let sent;
    let message;
    try {
      await page.locator("#import-file-input").setInputFiles(file);
      const before = requests.length;
      await page.locator("#import-start").click();
      await waitText("#import-progress-text", /^(500|1,000|1,500) of 2,000 lines/);
      await page.locator("#import-cancel").click();
      message = await waitText("#import-message", /cancelled/);
      sent = requests.length - before;
      await sleep(1500);  // a request sent after the cancel would show up by now
      assert.equal(requests.length - before, sent, "nothing sent after the cancel");
    } finally {
      await page.unroute(isImport);
    }
    const m = /lines 1-(\d+) \(([\d,]+) entries\) were written and stay written/.exec(message);
    assert.ok(m, `the message says what stays written: ${message}`);
    const confirmed = Number(m[2].replace(/,/g, ""));
    assert.ok(confirmed >= 500 && confirmed < 2000, message);
    assert.match(message, /Lines \d+-\d+ were on their way/);
    const stored = await countUnder("cancel");
    assert.ok(stored >= confirmed && stored <= confirmed + 500 && stored < 2000,
      `stored ${stored}, confirmed ${confirmed}: ${message}`);
    assert.ok(await page.locator("#import-start").isEnabled());
    assert.ok(await page.locator("#import-cancel").isDisabled());
  }));

  test("import: a bad line stops the import, named, after the chunks before it", () => step(async () => {
    const file = writeDump("console-pages-bad.ndjson", "badline", 1000, { bad: 700 });
    await mount("transfer");
    await page.locator("#import-file-input").setInputFiles(file);
    await page.locator("#import-start").click();
    const message = await waitText("#import-message", /stopped/);
    assert.match(message, /line 700/);
    assert.match(message, /In all 500 entries were written/);
    assert.equal(await countUnder("badline"), 500);
  }));

  test("import: replace under a prefix deletes there first (once, not per chunk), keeps the rest", () => step(async () => {
    const stale = [{ type: "string", value: "rep" }, { type: "number", value: 99_999 }];
    const outside = [{ type: "string", value: "keep" }];
    for (const key of [stale, outside]) {
      await admin("POST", "/databases/default/entries/set", { key, value: { type: "string", value: "old" } });
    }
    const file = writeDump("console-pages-replace.ndjson", "rep", 1200);
    await mount("transfer");
    await page.locator("#import-file-input").setInputFiles(file);
    await page.locator("#import-mode").selectOption("replace");
    await page.locator("#import-prefix").fill('["rep"]');
    await page.locator("#import-start").click();
    await waitText("#import-message",
      /^Imported console-pages-replace\.ndjson into default: 1,200 entries written in 3 batches, 1 entry deleted first\.$/);
    assert.equal(await countUnder("rep"), 1200, "every line, the stale key gone");
    assert.equal((await admin("POST", "/databases/default/entries/get", { key: stale })).entry, null);
    assert.notEqual((await admin("POST", "/databases/default/entries/get", { key: outside })).entry, null,
      "a key outside the prefix stays");
    // A line outside the prefix is refused by the server, named.
    const wrong = writeDump("console-pages-outside.ndjson", "elsewhere", 3);
    await page.locator("#import-file-input").setInputFiles(wrong);
    await page.locator("#import-mode").selectOption("merge");
    await page.locator("#import-start").click();
    await waitText("#import-message", /stopped: line 1: .*In all 0 entries were written/);
  }));

  test("export: a prefix downloads the server's dump", () => step(async () => {
    await mount("transfer");
    await page.locator("#export-prefix").fill('["bulk"]');
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.locator("#export-start").click(),
    ]);
    assert.match(download.suggestedFilename(), /^kvconnect-default-\d{8}T\d{6}\.ndjson$/);
    const file = path.join(ARTIFACTS, "console-pages-export.ndjson");
    await download.saveAs(file);
    const lines = fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(lines.length, 2000);
    assert.ok(lines.every((l) => l.key[0].value === "bulk"));
    assert.deepEqual(lines.find((l) => l.key[1].value === 8).value, { type: "string", value: "item 8" });
    await waitText("#export-message", /^Exported 2,000 entries under \["bulk"\] \(.*\) as kvconnect-default-.*, at versionstamp [0-9a-f]{20}\.$/);
    assert.deepEqual(cspViolations, []);
    assert.deepEqual(pageErrors, []);
  }));
});
