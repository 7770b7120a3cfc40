// Verifies kvconnect's push deliveries (src/queue/push.h) the way a receiver would, with the
// npm package `standardwebhooks` (the Standard Webhooks reference implementation, independent of
// ours).
//
//   verifyPush(secrets, body, headers): the parsed body if one of `secrets` ("whsec_...")
//     verifies the request, and its webhook-id is the message id in the body; throws otherwise.
//   startPushReceiver({secrets, port, status}): an HTTP server on 127.0.0.1 that verifies every
//     POST, answers 204 (`status` to override: a number, or a function of the verified message
//     returning one) or 401, and records what it saw:
//     {port, url, received: [{ok, id, attempt, value, error, headers}], close()}.
import http from "node:http";
import { Webhook } from "standardwebhooks";

export function verifyPush(secrets, body, headers) {
  let lastError = new Error("no secret given");
  for (const secret of secrets) {
    let message;
    try {
      message = new Webhook(secret).verify(body, headers);
    } catch (e) {
      lastError = e;
      continue;
    }
    if (message?.type !== "kvconnect.queue.message") {
      throw new Error(`unexpected body type ${JSON.stringify(message?.type)}`);
    }
    if (message.data?.id !== headers["webhook-id"]) {
      throw new Error(`webhook-id ${headers["webhook-id"]} is not the message id ${message.data?.id}`);
    }
    return message;
  }
  throw lastError;
}

export function startPushReceiver({ secrets, port = 0, status = 204 }) {
  const received = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const headers = {
        "webhook-id": req.headers["webhook-id"],
        "webhook-timestamp": req.headers["webhook-timestamp"],
        "webhook-signature": req.headers["webhook-signature"],
      };
      try {
        if (req.method !== "POST") throw new Error(`method ${req.method}`);
        const message = verifyPush(secrets, body, headers);
        received.push({ ok: true, id: message.data.id, attempt: message.data.attempt,
                        value: message.data.value, headers });
        res.writeHead(typeof status === "function" ? status(message) : status).end();
      } catch (e) {
        received.push({ ok: false, error: String(e?.message ?? e), headers });
        res.writeHead(401, { "content-type": "text/plain" }).end(String(e?.message ?? e));
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const actual = server.address().port;
      resolve({
        port: actual,
        url: `http://127.0.0.1:${actual}/hook`,
        received,
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}
