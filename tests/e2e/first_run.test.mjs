// What a new user meets first: the serve banner names the console (with the token to sign in)
// and the binary that runs; a browser opening the server's root URL lands in the console
// (302 to /console), while the metadata exchange (POST /) and non-browser GETs of `/` keep
// their answers (200 and 405).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { kvconnectBin, removeTempDirs, startServer, waitFor } from "./harness.mjs";

// What Chromium sends when it navigates to a URL.
const BROWSER_ACCEPT =
  "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

describe("first run", () => {
  let bootstrap;
  let configured;

  before(async () => {
    bootstrap = await startServer({ token: null });  // the server makes and prints its token
    configured = await startServer();  // --access-token given: never printed
  });
  after(async () => {
    await bootstrap?.kill();
    await configured?.kill();
    await removeTempDirs();
  });

  /** The banner (stdout), once its last line is out: it follows the ready file. */
  async function banner(server) {
    return await waitFor(() => /^Binary: /m.test(server.logTail(200)) && server.logTail(200),
      { timeoutMs: 10_000, what: "the serve banner" });
  }

  test("the banner names the console and the binary", async () => {
    const text = await banner(bootstrap);
    assert.ok(text.includes(`\n  ${bootstrap.token}\n`), "the bootstrap token is shown");
    assert.ok(text.includes(`Console: ${bootstrap.url}/console (sign in with the token above)`), text);
    const exe = fs.realpathSync(kvconnectBin());
    const m = /^Binary: (\S+) \(version (\S+), commit (\S+), allocator (\S+)\)$/m.exec(text);
    assert.ok(m, `a Binary: line in\n${text}`);
    assert.equal(m[1], exe);
    assert.match(m[3], /^([0-9a-f]{12}|unknown)$/);
    assert.match(m[4], /^(jemalloc|libc)$/);

    const other = await banner(configured);
    assert.ok(!other.includes(configured.token), "a configured token is never printed");
    assert.ok(other.includes(`Console: ${configured.url}/console (sign in with that access token)`), other);
  });

  test("a browser at / is sent to the console", async () => {
    for (const method of ["GET", "HEAD"]) {
      const res = await fetch(`${bootstrap.url}/`, { method, headers: { accept: BROWSER_ACCEPT }, redirect: "manual" });
      assert.equal(res.status, 302, method);
      assert.equal(res.headers.get("location"), "/console", method);
    }
    // Followed, it is the console's page.
    const page = await fetch(`${bootstrap.url}/`, { headers: { accept: BROWSER_ACCEPT } });
    assert.equal(page.status, 200);
    assert.equal(new URL(page.url).pathname, "/console");
    assert.match(page.headers.get("content-type"), /^text\/html/);
  });

  test("the metadata exchange and other GETs of / are unchanged", async () => {
    const meta = await fetch(`${bootstrap.url}/`, {
      method: "POST",
      headers: { authorization: `Bearer ${bootstrap.token}`, "content-type": "application/json", accept: BROWSER_ACCEPT },
      body: JSON.stringify({ supportedVersions: [1, 2, 3] }),
      redirect: "manual",
    });
    assert.equal(meta.status, 200, await meta.clone().text());
    assert.ok((await meta.json()).endpoints.length >= 1);
    for (const accept of ["*/*", "application/json", "text/html;q=0", undefined]) {
      const res = await fetch(`${bootstrap.url}/`, { headers: accept ? { accept } : {}, redirect: "manual" });
      assert.equal(res.status, 405, `Accept: ${accept}`);
      assert.match(await res.text(), /KV Connect uses POST/);
    }
  });

  test("--console=false: no console, no banner line, no redirect; the admin API stays", async () => {
    const off = await startServer({ extraArgs: ["--console=false"] });
    try {
      const text = await banner(off);
      assert.ok(!/^Console: /m.test(text), text);
      const page = await fetch(`${off.url}/console`);
      assert.equal(page.status, 404, await page.text());
      const root = await fetch(`${off.url}/`, { headers: { accept: BROWSER_ACCEPT }, redirect: "manual" });
      assert.equal(root.status, 405);
      const dbs = await fetch(`${off.url}/admin/v1/databases`, { headers: { authorization: `Bearer ${off.token}` } });
      assert.equal(dbs.status, 200, await dbs.text());
    } finally {
      await off.kill();
    }
  });
});
