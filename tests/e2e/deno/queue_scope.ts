// Remote only, with a queue-scope access token: every KV read and write is refused with the
// server's 403 text (the token is for the queue API only).
import { assert, assertRejects, IS_REMOTE, main, openKv, step } from "./_lib.ts";

await main("queue_scope", async () => {
  assert(IS_REMOTE, "queue_scope.ts needs a KV Connect URL");
  const kv = await openKv();
  step("get is refused");
  const err = await assertRejects(() => kv.get(["e2e", "queue_scope"]), ["status=403", "queue API only"], "get with a queue token");
  step("set is refused");
  await assertRejects(() => kv.set(["e2e", "queue_scope"], 1), ["status=403"], "set with a queue token");
  kv.close();
  return { message: err.message };
});
