// Driven by ../cross_runtime.test.mjs: Deno's half of the value exchange with Node (@deno/kv).
// Writes every value of ../cross_runtime_values.mjs at [XR_PREFIX, "deno", name] and, with
// XR_READ=1, reads each value Node wrote at [XR_PREFIX, "node", name], one get per value so one
// unreadable value does not hide the others. The summary's `reads` maps each name to "OK",
// "differs" or "error: <message>".
// env: XR_PREFIX, XR_READ
import { main, openKv, step } from "./_lib.ts";
import { crossValues, describeRead, sameValue } from "../cross_runtime_values.mjs";

await main("cross_runtime", async () => {
  const prefix = Deno.env.get("XR_PREFIX") ?? "xr";
  const kv = await openKv();

  step("write every value");
  for (const [name, make] of crossValues) {
    await kv.set([prefix, "deno", name], make(Deno.KvU64));
  }

  const reads: Record<string, string> = {};
  if (Deno.env.get("XR_READ") === "1") {
    step("read what Node wrote");
    for (const [name, make] of crossValues) {
      try {
        const entry = await kv.get([prefix, "node", name]);
        if (entry.versionstamp === null) {
          reads[name] = "error: missing";
          continue;
        }
        reads[name] = describeRead({ same: sameValue(entry.value, make(Deno.KvU64)) });
      } catch (e) {
        reads[name] = describeRead({ error: e instanceof Error ? e.message : String(e) });
      }
    }
  }
  kv.close();
  return { reads };
});
