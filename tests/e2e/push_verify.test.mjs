// The push receiver (push_verify.mjs) accepts what standardwebhooks signs and refuses the rest;
// the C++ integration test (tests/integration/push_test.cc) posts real deliveries to it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Webhook } from "standardwebhooks";
import { startPushReceiver } from "./push_verify.mjs";

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const other = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const id = "0b1c6f0e-6a53-4a57-9d1e-0d5b8b0c2f41";
const body = JSON.stringify({
  type: "kvconnect.queue.message",
  timestamp: new Date().toISOString(),
  data: { id, attempt: 1, value: { type: "string", value: "hi" } },
});

function post(url, headers, payload = body) {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers },
                      body: payload });
}

function signed(key, payload = body, msgId = id) {
  const now = new Date();
  return {
    "webhook-id": msgId,
    "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
    "webhook-signature": new Webhook(key).sign(msgId, now, payload),
  };
}

test("push receiver verifies with standardwebhooks", async () => {
  const receiver = await startPushReceiver({ secrets: [secret] });
  try {
    assert.equal((await post(receiver.url, signed(secret))).status, 204);
    assert.equal((await post(receiver.url, signed(other))).status, 401);
    assert.equal((await post(receiver.url, signed(secret), body + " ")).status, 401);
    assert.equal((await post(receiver.url, {})).status, 401);
    // Rotation: one signature per secret, space-separated; one match is enough.
    const a = signed(other);
    const b = signed(secret);
    const both = { ...b, "webhook-signature": `${a["webhook-signature"]} ${b["webhook-signature"]}` };
    assert.equal((await post(receiver.url, both)).status, 204);
    // The webhook-id must be the message's id.
    assert.equal((await post(receiver.url, signed(secret, body, "another-id"))).status, 401);
    assert.deepEqual(receiver.received.map((r) => r.ok), [true, false, false, false, true, false]);
    assert.deepEqual(receiver.received[0].value, { type: "string", value: "hi" });
  } finally {
    await receiver.close();
  }
});
