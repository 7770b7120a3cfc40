// Remote only, with an access token whose rate limit is low (token create --rate-limit 2):
// sequential gets and a set all succeed, because the server throttles with 503 + Retry-After
// and Deno retries 5xx answers. Reports how long the calls took. KV_GETS sets the number of
// gets (default 8).
import { assert, IS_REMOTE, main, ns, openKv, step } from "./_lib.ts";

await main("rate_limited", async () => {
  assert(IS_REMOTE, "rate_limited.ts needs a KV Connect URL");
  const gets = Number(Deno.env.get("KV_GETS") ?? "8");
  const kv = await openKv();
  const key = ns("rate_limited");
  const started = performance.now();

  step("set");
  const res = await kv.set(key, "slowly");
  assert(res.ok, "set succeeds");

  for (let i = 0; i < gets; i++) {
    step(`get ${i + 1} of ${gets}`);
    const e = await kv.get(key);
    assert(e.value === "slowly", `get ${i + 1} reads the value`);
  }
  const elapsedMs = Math.round(performance.now() - started);
  kv.close();
  return { message: `1 set and ${gets} gets in ${elapsedMs} ms`, gets, elapsedMs };
});
