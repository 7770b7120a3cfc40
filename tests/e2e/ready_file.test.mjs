// `kvconnect serve --ready-file`: with port 0 in --addr, --tls-addr and --metrics-addr the
// kernel picks every port, and the server reports them (the file, written atomically with mode
// 0600, and the "ready {...}" log line) once every listener is bound. Everything it prints or
// answers then names the bound ports: the banner, the listening log line, the endpoint URL of
// a metadata answer. The config-file key ready_file does the same; an unwritable path stops
// the server. This is what the harness (startServer) relies on instead of picking ports.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import {
  annotate, kvconnectBin, LOCAL_BACKEND, makeCerts, makeTempDir, randomToken, removeTempDirs, runKvconnect, Server,
  sleep, waitFor,
} from "./harness.mjs";
import { metadata, withH2 } from "./raw_client.mjs";

after(removeTempDirs);

const skip = LOCAL_BACKEND && "needs the kvconnect server";

/** Starts `kvconnect serve ARGS` (tracked by the harness) without reading the ready file. */
function spawnServe(args, cwd, token) {
  return new Server({ bin: kvconnectBin(), args: ["serve", ...args], readyFile: undefined, tls: false, token, dataDir: cwd, opts: {} });
}

/** Polls for `file` until it has content; fails with the server's output if it exits first. */
async function waitForFile(file, server, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await fsp.readFile(file, "utf8").catch(() => "");
    if (text) return text;
    if (!server.running || Date.now() > deadline) {
      throw new Error(`no ready file ${file} (server ${server.running ? "still running" : "exited"}):\n${server.logTail()}`);
    }
    await sleep(25);
  }
}

test("port 0 on every listener: the ready file names the bound ports, and so does everything served", { timeout: 60_000, skip }, async () => {
  const dir = await makeTempDir();
  const certs = await makeCerts(await makeTempDir("kvconnect-e2e-certs-"));
  const caPem = fs.readFileSync(certs.ca, "utf8");
  const readyFile = path.join(dir, "run", "ready.json");
  await fsp.mkdir(path.dirname(readyFile));
  const token = randomToken();
  const server = spawnServe([
    "--addr", "127.0.0.1:0", "--tls-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
    "--tls-cert", certs.cert, "--tls-key", certs.key,
    "--data-dir", path.join(dir, "data"), "--access-token", token, "--ready-file", readyFile,
  ], dir, token);
  try {
    const text = await waitForFile(readyFile, server);
    assert.ok(text.endsWith("}\n"), `one JSON object and a newline: ${JSON.stringify(text)}`);
    const ready = JSON.parse(text);
    assert.equal((fs.statSync(readyFile).mode & 0o777).toString(8), "600");
    assert.deepEqual(Object.keys(ready), [
      "pid", "addr", "port", "url", "tls_addr", "tls_port", "tls_url", "metrics_addr", "metrics_port", "metrics_url",
    ]);
    assert.equal(ready.pid, server.proc.pid);
    const ports = [ready.port, ready.tls_port, ready.metrics_port];
    for (const p of ports) assert.ok(Number.isInteger(p) && p > 0 && p < 65536, `bound port ${p}`);
    assert.equal(new Set(ports).size, 3, `three listeners, three ports: ${ports}`);
    assert.equal(ready.addr, `127.0.0.1:${ready.port}`);
    assert.equal(ready.url, `http://127.0.0.1:${ready.port}`);
    assert.equal(ready.tls_addr, `127.0.0.1:${ready.tls_port}`);
    assert.equal(ready.tls_url, `https://127.0.0.1:${ready.tls_port}`);
    assert.equal(ready.metrics_addr, `127.0.0.1:${ready.metrics_port}`);
    assert.equal(ready.metrics_url, `http://127.0.0.1:${ready.metrics_port}`);
    // No temporary file is left beside it.
    assert.deepEqual(fs.readdirSync(path.dirname(readyFile)), ["ready.json"]);

    // The same object on one log line, and the bound ports (never :0) in the other output. The
    // banner comes after the ready file is written: wait for it rather than read too soon.
    await waitFor(() => server.logTail(200).includes(`Deno.openKv("${ready.url}")`),
      { what: "the banner naming the bound URL" });
    const log = server.logTail(200);
    const line = /\bready (\{.*\})$/m.exec(log);
    assert.ok(line, `no "ready {...}" log line:\n${log}`);
    assert.deepEqual(JSON.parse(line[1]), ready);
    assert.match(log, new RegExp(`listening on ${ready.url} and ${ready.tls_url};`));
    assert.match(log, new RegExp(`metrics and health on ${ready.metrics_url}`));
    assert.ok(log.includes(`Deno.openKv("${ready.url}")`), `the banner names the bound URL:\n${log}`);
    assert.doesNotMatch(log, /127\.0\.0\.1:0\b/);

    // Every listener answers on its port; metadata answers point at the port asked.
    await withH2(ready.url, {}, async (h2) => {
      const m = await metadata(h2, token);
      assert.equal(m.status, 200, m.text);
      assert.equal(m.json.endpoints[0].url, `${ready.url}/v2`);
    });
    await withH2(ready.tls_url, { ca: caPem }, async (h2) => {
      const m = await metadata(h2, token);
      assert.equal(m.status, 200, m.text);
      assert.equal(m.json.endpoints[0].url, `${ready.tls_url}/v2`);
    });
    assert.equal((await fetch(`${ready.metrics_url}/healthz`)).status, 200);

    // A clean shutdown removes the file, so nobody takes it for a running server.
    const res = await server.stop();
    assert.equal(res.code, 0, server.logTail());
    assert.equal(fs.existsSync(readyFile), false, "the ready file outlived the server");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("ready_file in a --config file; a stale file is replaced, not taken for this run's", { timeout: 60_000, skip }, async () => {
  const dir = await makeTempDir();
  const readyFile = path.join(dir, "ready.json");
  // What an earlier run (killed, so it could not remove it) left behind.
  fs.writeFileSync(readyFile, JSON.stringify({ pid: 1, addr: "127.0.0.1:1", port: 1, url: "http://127.0.0.1:1" }) + "\n");
  const config = path.join(dir, "config.json");
  fs.writeFileSync(config, JSON.stringify({ addr: "127.0.0.1:0", ready_file: readyFile }));
  const token = randomToken();
  const server = spawnServe(["--config", config, "--data-dir", path.join(dir, "data"), "--access-token", token], dir, token);
  try {
    // The server removes the stale file before it opens its storage, and writes its own
    // once bound: wait for one with this pid.
    const deadline = Date.now() + 20_000;
    let ready;
    for (;;) {
      const text = await fsp.readFile(readyFile, "utf8").catch(() => "");
      if (text) ready = JSON.parse(text);
      if (ready?.pid === server.proc.pid) break;
      if (!server.running || Date.now() > deadline) {
        throw new Error(`no ready file of pid ${server.proc.pid} (last seen: ${JSON.stringify(ready)}):\n${server.logTail()}`);
      }
      await sleep(25);
    }
    assert.ok(ready.port > 1);
    assert.equal(ready.tls_port, undefined, "no --tls-addr: no tls_* keys");
    assert.equal(ready.metrics_port, undefined, "no --metrics-addr: no metrics_* keys");
    assert.equal((await fetch(`${ready.url}/healthz`)).status, 200);
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
  }
});

test("a ready file that cannot be written stops the server", { timeout: 60_000, skip }, async () => {
  const dir = await makeTempDir();
  const res = await runKvconnect([
    "serve", "--addr", "127.0.0.1:0", "--data-dir", path.join(dir, "data"), "--access-token", randomToken(),
    "--ready-file", path.join(dir, "no-such-dir", "ready.json"),
  ], { cwd: dir });
  assert.equal(res.code, 1, `${res.command} exited ${res.code}\n${res.stderr}`);
  assert.match(res.stderr, /--ready-file: cannot create .*no-such-dir/, res.stderr);
});
