// The Deno side of expiry_admin.test.mjs: entries Deno writes with expireIn, for the test to
// find their expiry in the admin API, and Deno's reads of entries the API wrote with one.
// env EXPIRY_STEP:
//   write  under ["expiry_admin", EXPIRY_RUN]: "hour" (expireIn 1 h) and "never" (no expiry);
//          the summary gives Date.now() before and after
//   clear  "clear" (expireIn EXPIRY_CLEAR_MS), for the test to clear its expiry
//   touch  "touched" (expireIn 1 h), for a watch to see
//   read   the values of the keys named in EXPIRY_KEYS (comma-separated), null when absent
import { assert, main, openKv, step } from "./_lib.ts";

const RUN = Deno.env.get("EXPIRY_RUN") ?? "run";
const HOUR = 3_600_000;

await main("expiry_admin", async () => {
  const kv = await openKv();
  const k = (name: string) => ["expiry_admin", RUN, name];
  const which = Deno.env.get("EXPIRY_STEP");
  try {
    if (which === "write") {
      step("write");
      const before = Date.now();
      assert((await kv.set(k("hour"), "an hour", { expireIn: HOUR })).ok, "set hour");
      assert((await kv.set(k("never"), "forever")).ok, "set never");
      return { before, after: Date.now() };
    }
    if (which === "clear") {
      step("clear");
      const clearMs = Number(Deno.env.get("EXPIRY_CLEAR_MS") ?? "4000");
      assert((await kv.set(k("clear"), "to clear", { expireIn: clearMs })).ok, "set clear");
      return {};
    }
    if (which === "touch") {
      step("touch");
      assert((await kv.set(k("touched"), "touched", { expireIn: HOUR })).ok, "set touched");
      return {};
    }
    step("read");
    const names = (Deno.env.get("EXPIRY_KEYS") ?? "").split(",").filter((n) => n !== "");
    const got = await kv.getMany(names.map(k));
    const values: Record<string, unknown> = {};
    names.forEach((n, i) => (values[n] = got[i].versionstamp === null ? null : got[i].value));
    return { values };
  } finally {
    kv.close();
  }
});
