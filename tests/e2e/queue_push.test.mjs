// Push delivery through the built server (`serve --queue-push`): every message is POSTed to a
// receiver that checks the Standard Webhooks signature with the npm package `standardwebhooks`
// (not our code), a receiver's 500 is retried per the message's backoff schedule and finally
// dead-letters it (with its keysIfUndelivered written), a secret rotation signs with both
// secrets, and a loopback destination is refused unless allow-listed.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { annotate, LOCAL_BACKEND, removeTempDirs, sleep, startServer } from "./harness.mjs";
import { startPushReceiver } from "./push_verify.mjs";

after(removeTempDirs);

const skip = LOCAL_BACKEND && "needs the kvconnect server";
const OLD_SECRET = "whsec_" + Buffer.from("kvconnect-e2e-old-push-secret-0123").toString("base64");
const NEW_SECRET = "whsec_" + Buffer.from("kvconnect-e2e-new-push-secret-4567").toString("base64");

async function call(server, path, body) {
  const res = await fetch(`${server.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${server.token}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

async function until(what, fn, ms = 20_000) {
  const start = Date.now();
  while (Date.now() - start < ms) {
    const v = await fn();
    if (v) return v;
    await sleep(50);
  }
  assert.fail(`timed out waiting for ${what}`);
}

test("push: signed deliveries, retries per the backoff schedule, dead letter, key rotation", { timeout: 60_000, skip }, async () => {
  // The receiver knows only the new secret: the server signs with both during the rotation.
  const receiver = await startPushReceiver({
    secrets: [NEW_SECRET],
    status: (m) => (m.data.value?.value?.fail ? 500 : 204),
  });
  const server = await startServer({
    extraArgs: [
      "--queue-push", `default=${receiver.url}`,
      "--queue-push-secret", `default=${OLD_SECRET}`, "--queue-push-secret", `default=${NEW_SECRET}`,
      "--queue-push-allow", "127.0.0.1",
    ],
  });
  try {
    const messages = [];
    for (let i = 0; i < 20; i++) messages.push({ value: { type: "object", value: { n: { type: "number", value: i } } } });
    messages.push({
      value: { type: "object", value: { fail: { type: "boolean", value: true } } },
      backoff_schedule: [100, 200],
      keys_if_undelivered: [[{ type: "string", value: "push" }, { type: "string", value: "failed" }]],
    });
    await call(server, "/queue/v1/enqueue", { messages });
    await until("every message settled", async () => {
      const c = await call(server, "/admin/v1/databases/default/queue");
      return c.ready + c.delayed + c.leased === 0 && c.dead === 1;
    });
    const bad = receiver.received.filter((r) => !r.ok);
    assert.deepEqual(bad, [], "every request verified with standardwebhooks");
    const ok = receiver.received.filter((r) => !r.value?.value?.fail);
    assert.deepEqual(ok.map((r) => r.value.value.n.value).sort((a, b) => a - b), [...Array(20).keys()]);
    assert.ok(ok.every((r) => r.attempt === 1), "2xx acks: one attempt each");
    const failing = receiver.received.filter((r) => r.value?.value?.fail);
    assert.deepEqual(failing.map((r) => r.attempt), [1, 2, 3], "tried once, then once per backoff step");
    assert.equal(new Set(failing.map((r) => r.id)).size, 1, "one webhook-id across retries");
    assert.equal(failing[0].headers["webhook-signature"].split(" ").length, 2, "signed with both secrets");
    const dead = await call(server, "/admin/v1/databases/default/queue/dead/list", {});
    assert.equal(dead.dead_letters.length, 1);
    assert.equal(dead.dead_letters[0].last_error, "HTTP 500");
    assert.equal(dead.dead_letters[0].attempts, 3);
    const entry = await call(server, "/admin/v1/databases/default/entries/get", {
      key: [{ type: "string", value: "push" }, { type: "string", value: "failed" }],
    });
    assert.deepEqual(entry.entry.value, { type: "object", value: { fail: { type: "boolean", value: true } } });
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
    await receiver.close();
  }
});

test("push: a loopback destination is refused unless allow-listed; nothing reaches it", { timeout: 60_000, skip }, async () => {
  const receiver = await startPushReceiver({ secrets: [NEW_SECRET] });
  const server = await startServer({
    extraArgs: ["--queue-push", `default=${receiver.url}`, "--queue-push-secret", `default=${NEW_SECRET}`],
  });
  try {
    await call(server, "/queue/v1/enqueue", {
      messages: [{ value: { type: "string", value: "x" }, backoff_schedule: [] }],
    });
    const dead = await until("the message dead-lettered", async () => {
      const d = await call(server, "/admin/v1/databases/default/queue/dead/list", {});
      return d.dead_letters.length === 1 && d.dead_letters[0];
    });
    assert.match(dead.last_error, /not allowed/);
    assert.equal(receiver.received.length, 0, "no request arrived");
  } catch (e) {
    throw annotate(e, server);
  } finally {
    await server.kill();
    await receiver.close();
  }
});

test("push: bad push configuration stops the server at start with a clear error", { timeout: 30_000, skip }, async () => {
  await assert.rejects(
    startServer({ extraArgs: ["--queue-push", "default=http://127.0.0.1:1/hook", "--queue-push-secret", "default=nope"] }),
    /whsec_/,
  );
});
