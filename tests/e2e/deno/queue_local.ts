// Deno's local queue on a file (KV_URL is a path), for queue_interop.test.mjs.
// QUEUE_MODE=enqueue: enqueues the messages the test expects (several value types, a delay,
//   one without retries that names a keysIfUndelivered key), prints {"enqueued": n}.
// QUEUE_MODE=listen: runs listenQueue on the file until QUEUE_LISTEN_MS pass without a
//   message, prints {"got": [values as JSON-able tags]}.
const kv = await Deno.openKv(Deno.env.get("KV_URL")!);
const mode = Deno.env.get("QUEUE_MODE");
if (mode === "enqueue") {
  const values: unknown[] = [
    "text",
    42,
    12345678901234567890n,
    new Date(Date.UTC(2026, 0, 2, 3, 4, 5)),
    new Uint8Array([1, 2, 3]),
    new Map([["k", 1]]),
    new Set(["a"]),
    { nested: { list: [1, "two", null] } },
  ];
  for (const v of values) await kv.enqueue(v);
  await kv.enqueue({ delayed: true }, { delay: 1500 });
  await kv.enqueue({ doomed: true }, { backoffSchedule: [], keysIfUndelivered: [["failed", "doomed"]] });
  console.log(JSON.stringify({ ok: true, enqueued: values.length + 2 }));
  kv.close();
} else if (mode === "listen") {
  const idleMs = Number(Deno.env.get("QUEUE_LISTEN_MS") ?? "3000");
  const got: string[] = [];
  let last = Date.now();
  const listening = kv.listenQueue((msg) => {
    got.push(JSON.stringify(msg));
    last = Date.now();
  });
  while (Date.now() - last < idleMs) await new Promise((r) => setTimeout(r, 200));
  kv.close();
  await listening.catch(() => {});
  console.log(JSON.stringify({ ok: true, got }));
} else {
  throw new Error(`QUEUE_MODE must be enqueue or listen, not ${mode}`);
}
