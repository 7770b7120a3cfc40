// Remote only: opens the database, prints "READY", then reads a key every 200 ms
// until a call fails (the test revokes the access token meanwhile). Exits 0 with
// the error text in the summary; the test checks what the error says.
import { assert, errMessage, IS_REMOTE, main, openKv, sleep, step } from "./_lib.ts";

await main("hold_token", async () => {
  assert(IS_REMOTE, "hold_token.ts needs a KV Connect URL");
  const kv = await openKv();
  const key = ["e2e", "hold_token", crypto.randomUUID()];
  step("calls work before the revocation");
  await kv.set(key, 0);
  assert((await kv.get(key)).value === 0, "get before the revocation");
  console.log("READY");
  step("polling until a call fails");
  let okCalls = 0;
  for (;;) {
    try {
      await kv.get(key);
      okCalls++;
    } catch (e) {
      const message = errMessage(e);
      console.log(`FAILED after ${okCalls} more calls: ${message}`);
      kv.close();
      return { okCalls, message };
    }
    await sleep(200);
  }
});
