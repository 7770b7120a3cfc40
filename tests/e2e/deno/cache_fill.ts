// Writes or reads back many keys of one label, for the read cache budget test.
// env: KV_MODE = "write" | "verify", KV_LABEL (the key prefix and part of each value),
// KV_KEYS (how many keys). "write" sets KV_KEYS keys of about 300 bytes, ten per atomic;
// "verify" reads every one back (getMany of ten) and checks each value, whatever the cache
// holds or has evicted meanwhile.
import { assert, assertEquals, main, step } from "./_lib.ts";

const mode = Deno.env.get("KV_MODE") ?? "";
const label = Deno.env.get("KV_LABEL") ?? "";
const count = Number(Deno.env.get("KV_KEYS") ?? "0");
const key = (i: number) => ["cache_fill", label, i];
const value = (i: number) => `${label}:${i}:`.padEnd(300, "x");

await main("cache_fill", async () => {
  assert(mode === "write" || mode === "verify", `KV_MODE must be write or verify, not ${mode}`);
  assert(label !== "" && count > 0, "KV_LABEL and KV_KEYS are needed");
  const kv = await Deno.openKv(Deno.env.get("KV_URL")!);
  let checked = 0;
  for (let i = 0; i < count; i += 10) {
    const ids = Array.from({ length: Math.min(10, count - i) }, (_, j) => i + j);
    if (mode === "write") {
      step(`write ${i}`);
      const op = kv.atomic();
      for (const id of ids) op.set(key(id), value(id));
      assert((await op.commit()).ok, `commit of keys ${i}..`);
    } else {
      step(`verify ${i}`);
      const got = await kv.getMany<string[]>(ids.map(key));
      for (let j = 0; j < ids.length; j++) {
        assertEquals(got[j].value, value(ids[j]), `value of ${JSON.stringify(key(ids[j]))}`);
        checked++;
      }
    }
  }
  kv.close();
  return { mode, label, keys: count, checked };
});
