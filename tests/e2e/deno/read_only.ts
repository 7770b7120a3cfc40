// Remote only, with a read-scope access token: reads work, every kind of write is
// refused with the server's 403 text, and reads still work afterwards.
import { assert, assertRejects, IS_REMOTE, main, openKv, step } from "./_lib.ts";

await main("read_only", async () => {
  assert(IS_REMOTE, "read_only.ts needs a KV Connect URL");
  const kv = await openKv();
  const key = ["e2e", "read_only", crypto.randomUUID()];

  step("get works");
  const e = await kv.get(key);
  assert(e.value === null && e.versionstamp === null, "missing key");
  await kv.getMany([key, [...key, "x"]]);

  step("set is refused");
  const err = await assertRejects(() => kv.set(key, "nope"), ["status=403", "read-only"], "set with a read token");

  step("atomic and delete are refused");
  await assertRejects(() => kv.atomic().sum(key, 1n).commit(), ["status=403"], "atomic with a read token");
  await assertRejects(() => kv.delete(key), ["status=403"], "delete with a read token");

  step("reads still work");
  assert((await kv.get(key)).value === null, "get after refused writes");
  kv.close();
  return { message: err.message };
});
