// An app written as for Deno Deploy: there is no URL in its code. It calls Deno.openKv() or,
// with KV_APP_DB set, Deno.openKv(KV_APP_DB); Deno resolves where that goes from
// DENO_KV_DEFAULT_PATH and DENO_KV_PATH_PREFIX, which the test sets. (KV_URL, which _lib.ts
// wants, is only used in failure messages here.)
//
// Prints the line "opened" as soon as openKv resolved. Then, with KV_APP_SET, sets
// ["deploy", "shared"] to that string; does KV_GETS (default 0) more reads; and reports the value
// of ["deploy", "shared"] in its summary ({value}).
import { assert, main, step } from "./_lib.ts";

await main("deploy_app", async () => {
  const name = Deno.env.get("KV_APP_DB");
  const toSet = Deno.env.get("KV_APP_SET");
  const gets = Number(Deno.env.get("KV_GETS") ?? "0");

  step(name === undefined ? "Deno.openKv()" : `Deno.openKv(${JSON.stringify(name)})`);
  const kv = name === undefined ? await Deno.openKv() : await Deno.openKv(name);
  console.log("opened");

  if (toSet !== undefined) {
    step("set");
    const res = await kv.set(["deploy", "shared"], toSet);
    assert(res.ok, "set succeeds");
  }
  for (let i = 0; i < gets; i++) {
    step(`get ${i + 1} of ${gets}`);
    await kv.get(["deploy", "shared"]);
  }
  step("read");
  const entry = await kv.get<string>(["deploy", "shared"]);
  if (toSet !== undefined) assert(entry.value === toSet, `reads back what it set: ${entry.value}`);
  kv.close();
  return { value: entry.value ?? null };
});
