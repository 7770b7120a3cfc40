// `kvconnect migrate --from URL`: Deno reads the source (KV_URL) and a copy (KV_URL_COPY) and
// requires the same keys (under the prefixes export_import.ts writes) with deep-equal values;
// with KV_SAME_VERSIONSTAMPS=1 also the same versionstamps (a storage destination keeps them).
import { assert, assertEquals, collect, fmt, main, step } from "./_lib.ts";

await main("migrate_url", async () => {
  const kv = await Deno.openKv(Deno.env.get("KV_URL")!);
  const copy = await Deno.openKv(Deno.env.get("KV_URL_COPY")!);
  const sameStamps = Deno.env.get("KV_SAME_VERSIONSTAMPS") === "1";
  let compared = 0;
  for (const prefix of [["v"], ["keys"]]) {
    step(`compare ${fmt(prefix)}`);
    const a = await collect(kv.list({ prefix }));
    const b = await collect(copy.list({ prefix }));
    assertEquals(b.map((e) => e.key), a.map((e) => e.key), `keys under ${fmt(prefix)}`);
    for (let i = 0; i < a.length; i++) {
      assertEquals(b[i].value, a[i].value, `value of ${fmt(a[i].key)}`);
      if (sameStamps) assertEquals(b[i].versionstamp, a[i].versionstamp, `versionstamp of ${fmt(a[i].key)}`);
    }
    compared += a.length;
  }
  step("identity and KvU64 in the copy");
  const circ = (await copy.get<Record<string, unknown>>(["v", "circular"])).value!;
  assert(circ.self === circ, "circular reference preserved in the copy");
  const u64 = (await copy.get<Deno.KvU64>(["v", "KvU64 max"])).value!;
  assert(u64 instanceof Deno.KvU64 && u64.value === 2n ** 64n - 1n, "KvU64 stays a KvU64");
  kv.close();
  copy.close();
  return { compared };
});
