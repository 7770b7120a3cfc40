// Remote only: run with a wrong (or missing) DENO_KV_ACCESS_TOKEN. Deno 2.9 validates
// the metadata exchange inside Deno.openKv, so opening must reject, with a message
// that names the failure. Exits 0 (with a summary) only if the open was refused.
import { assert, errMessage, IS_REMOTE, main, step } from "./_lib.ts";
import { KV_URL } from "./_lib.ts";

await main("open_rejected", async () => {
  assert(IS_REMOTE, "open_rejected.ts only makes sense against a KV Connect URL");
  step("Deno.openKv with a bad token");
  let kv: Deno.Kv | undefined;
  let message = "";
  try {
    kv = await Deno.openKv(KV_URL);
  } catch (e) {
    message = errMessage(e);
  }
  if (kv) {
    // Should not happen on Deno >= 2.9; make sure data calls fail at least.
    let dataError = "";
    try {
      await kv.get(["x"]);
    } catch (e) {
      dataError = errMessage(e);
    }
    kv.close();
    throw new Error(`Deno.openKv succeeded with a bad access token (a get then ${dataError ? "failed: " + dataError : "succeeded"})`);
  }
  // Deno 2.9.6 says: "Could not open Deno KV database: the metadata endpoint at '<url>'
  // responded with status 401 Unauthorized: <server text>".
  assert(message.includes("Could not open Deno KV database"), `unexpected openKv error: ${message}`);
  assert(!/tcp connect error|connection refused/i.test(message), `server was not reachable: ${message}`);
  assert(/\b401\b|token|authoriz/i.test(message), `openKv error should mention the status 401 or the token: ${message}`);
  return { message };
});
