// Durability: a Deno writer process performs sequential and concurrent writes and
// prints every key + versionstamp as soon as the client's promise resolves
// (= acknowledged). The server is then SIGKILLed mid-stream, restarted on the same
// data dir, and every acknowledged key must be there with its versionstamp
// (3 cycles on one data dir; each verification covers all earlier cycles).
// A second test does the same with SIGTERM (graceful shutdown under load, with an
// open watch stream) and checks the shutdown is prompt and clean.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs/promises";
import path from "node:path";
import {
  annotate, describeRun, expectDenoOk, LOCAL_BACKEND, makeTempDir, randomToken, removeTempDirs, runDeno, sleep,
  spawnDeno, startServer, withTimeout,
} from "./harness.mjs";

after(removeTempDirs);

const skip = LOCAL_BACKEND && "needs the kvconnect server";
const TARGET_ACKS = 400; // stop the server after this many acks ...
const ACK_WINDOW_MS = 2000; // ... or this long after the first ack

/**
 * Runs the writer against `server` until enough acks arrived, then calls
 * `stopServer()` while writes are in flight, then kills the writer.
 * Returns every acknowledged {k, vs}.
 */
async function writeUntilStopped(server, ns, stopServer, extraEnv = {}) {
  const acks = [];
  let signalEnough;
  const enough = new Promise((r) => {
    signalEnough = r;
  });
  let windowTimer;
  const writer = spawnDeno("durability_writer.ts", {
    kvUrl: server.url,
    token: server.token,
    env: { DUR_NS: ns, DUR_MAX_MS: "60000", ...extraEnv },
    timeoutMs: 120_000,
    onStdoutLine: (line) => {
      if (!line.startsWith("ACK ")) return;
      acks.push(JSON.parse(line.slice(4)));
      if (acks.length === 1) windowTimer = setTimeout(() => signalEnough("window"), ACK_WINDOW_MS);
      if (acks.length >= TARGET_ACKS) signalEnough("count");
    },
  });
  const outcome = await withTimeout(
    Promise.race([enough, writer.done.then((res) => ({ exited: res }))]),
    30_000,
    "timeout",
  );
  clearTimeout(windowTimer);
  if (outcome === "timeout" || typeof outcome === "object") {
    writer.proc.kill("SIGKILL");
    const res = typeof outcome === "object" ? outcome.exited : await writer.done;
    throw new Error(
      `durability writer ${ns}: ${outcome === "timeout" ? `only ${acks.length} acks in 30 s` : "exited early"}\n${describeRun(res)}`,
    );
  }
  const stopResult = await stopServer();
  // Responses that were already on their way still count: give them a moment.
  await sleep(300);
  writer.proc.kill("SIGKILL");
  await writer.done;
  return { acks, stopResult };
}

async function verify(server, dir, allAcks, label) {
  const file = path.join(dir, `acks-${label}.json`);
  await fs.writeFile(file, JSON.stringify(allAcks));
  const res = await runDeno("durability_verify.ts", {
    kvUrl: server.url,
    token: server.token,
    env: { DUR_ACKS_FILE: file },
    timeoutMs: 60_000,
  });
  const summary = expectDenoOk(res, server);
  assert.equal(summary.acks, allAcks.length);
  return summary;
}

test("acknowledged writes survive SIGKILL (3 cycles)", { timeout: 200_000, skip }, async () => {
  const dataDir = await makeTempDir();
  const token = randomToken();
  const allAcks = [];
  let server = await startServer({ dataDir, token });
  try {
    for (let cycle = 1; cycle <= 3; cycle++) {
      const ns = `kill${cycle}`;
      const { acks, stopResult } = await writeUntilStopped(server, ns, () => server.kill());
      assert.equal(stopResult.signal, "SIGKILL", "server was killed");
      assert.ok(acks.length > 0, `cycle ${cycle}: no write was acknowledged`);
      allAcks.push(...acks);
      server = await startServer({ dataDir, token });
      const summary = await verify(server, dataDir, allAcks, `kill${cycle}`);
      console.log(`durability cycle ${cycle}: ${acks.length} acks this cycle, ${summary.acks} verified in total`);
    }
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("graceful SIGTERM under load: prompt exit, acknowledged writes kept", { timeout: 120_000, skip }, async () => {
  const dataDir = await makeTempDir();
  const token = randomToken();
  let server = await startServer({ dataDir, token });
  try {
    let took = -1;
    const { acks, stopResult } = await writeUntilStopped(server, "term", async () => {
      const t0 = Date.now();
      const res = await server.stop("SIGTERM", 10_000);
      took = Date.now() - t0;
      return res;
    }, { DUR_WATCH: "1" });
    assert.equal(stopResult.forced, false, `server needed SIGKILL: no exit within 10 s of SIGTERM (open watch + writes)`);
    assert.equal(stopResult.code, 0, `exit after SIGTERM: code=${stopResult.code} signal=${stopResult.signal}`);
    assert.ok(acks.length > 0, "no write was acknowledged");
    console.log(`graceful shutdown took ${took} ms with ${acks.length} acks`);
    server = await startServer({ dataDir, token });
    await verify(server, dataDir, acks, "term");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});
