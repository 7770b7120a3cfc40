// SQLite file compatibility with Deno's local backend (`kvconnect serve --sqlite-path`):
//  (a) a file written by Deno.openKv(file) is served by kvconnect with the same keys,
//      values and versionstamps; kvconnect's own writes continue the versionstamp
//      sequence, and after SIGTERM Deno reads them locally;
//  (b) a file created by kvconnect through the remote protocol, after SIGTERM, opens in
//      Deno locally with the same versionstamps, and Deno's local writes are then
//      served by kvconnect again.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs/promises";
import path from "node:path";
import {
  annotate, expectDenoOk, LOCAL_BACKEND, makeTempDir, removeTempDirs, runDeno, startServer,
} from "./harness.mjs";

after(removeTempDirs);

const skip = LOCAL_BACKEND && "needs the kvconnect server";

async function saveSummary(dir, name, summary) {
  const file = path.join(dir, `${name}.json`);
  await fs.writeFile(file, JSON.stringify(summary));
  return file;
}

async function stopGracefully(server) {
  const res = await server.stop("SIGTERM", 10_000);
  assert.equal(res.forced, false, `server did not exit within 10 s of SIGTERM\n${server.logTail()}`);
  assert.equal(res.code, 0, `server exit after SIGTERM: code=${res.code} signal=${res.signal}\n${server.logTail()}`);
}

async function compat(kvUrl, token, env, server) {
  const res = await runDeno("compat.ts", { kvUrl, token, env, timeoutMs: 45_000 });
  return expectDenoOk(res, server);
}

test("(a) a file written by Deno locally is served by kvconnect, and back", { timeout: 150_000, skip }, async () => {
  const dir = await makeTempDir();
  const file = path.join(dir, "deno-local.sqlite");

  const written = await compat(file, undefined, { COMPAT_MODE: "write" });
  assert.equal(written.backend, "local");
  const expect1 = await saveSummary(dir, "written", written);

  const server = await startServer({ sqlitePath: file });
  let served;
  try {
    served = await compat(server.url, server.token, { COMPAT_EXPECT_FILE: expect1, COMPAT_ADD: "kvconnect" }, server);
    assert.equal(served.backend, "remote");
    assert.ok(served.added > written.maxVersionstamp, "kvconnect continues the file's versionstamp sequence");
    await stopGracefully(server);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }

  const expect2 = await saveSummary(dir, "served", served);
  const reread = await compat(file, undefined, { COMPAT_EXPECT_FILE: expect2, COMPAT_EXPECT_ADDED: "kvconnect" });
  assert.equal(reread.entries, served.entries, "Deno sees exactly the entries kvconnect listed");
});

test("(b) a file written by kvconnect opens in Deno locally, and back", { timeout: 150_000, skip }, async () => {
  const dir = await makeTempDir();
  const file = path.join(dir, "kvconnect-made.sqlite");

  let server = await startServer({ sqlitePath: file });
  let written;
  try {
    written = await compat(server.url, server.token, { COMPAT_MODE: "write" }, server);
    assert.equal(written.backend, "remote");
    await stopGracefully(server);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
  await fs.access(file).catch(() => assert.fail(`kvconnect did not create ${file}`));

  const expect1 = await saveSummary(dir, "written", written);
  const local = await compat(file, undefined, { COMPAT_EXPECT_FILE: expect1, COMPAT_ADD: "deno-local" });
  assert.equal(local.backend, "local");
  assert.ok(local.added > written.maxVersionstamp, "Deno continues kvconnect's versionstamp sequence");

  const expect2 = await saveSummary(dir, "local", local);
  server = await startServer({ sqlitePath: file });
  try {
    const again = await compat(server.url, server.token, {
      COMPAT_EXPECT_FILE: expect2,
      COMPAT_EXPECT_ADDED: "deno-local",
      COMPAT_ADD: "kvconnect-again",
    }, server);
    assert.ok(again.added > local.added, "versionstamps keep increasing across backends");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});
