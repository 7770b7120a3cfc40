// One DENO_KV_ACCESS_TOKEN (set once, by the test) for several databases of one server.
// env: KV_OPEN = JSON [{ "label", "url", "expect": "ok" | "refused" }]. Every "ok" database
// opens, gets KEY set to its label, and must then read back its own label (each its own
// data); every "refused" one must make Deno.openKv reject. The summary carries the rejection
// messages by label. KV_URL must be set too (to any of the URLs) for _lib.ts.
import { assert, assertEquals, errMessage, fmt, main, step } from "./_lib.ts";

type Target = { label: string; url: string; expect: "ok" | "refused" };
const KEY = ["one_token", "label"];

await main("one_token_databases", async () => {
  const targets: Target[] = JSON.parse(Deno.env.get("KV_OPEN") ?? "[]");
  assert(targets.length > 0, "KV_OPEN is empty");
  const opened: { target: Target; kv: Deno.Kv }[] = [];
  const refused: Record<string, string> = {};
  for (const target of targets) {
    step(`open ${target.label}`);
    let kv: Deno.Kv | undefined;
    let message = "";
    try {
      kv = await Deno.openKv(target.url);
    } catch (e) {
      message = errMessage(e);
    }
    if (target.expect === "ok") {
      assert(kv !== undefined, `Deno.openKv(${target.url}) failed: ${message}`);
      opened.push({ target, kv: kv! });
    } else {
      if (kv) kv.close();
      assert(kv === undefined, `Deno.openKv(${target.url}) succeeded; it must be refused`);
      refused[target.label] = message;
      console.log(`${target.label} ${target.url}: refused: ${message}`);
    }
  }
  for (const { target, kv } of opened) {
    step(`write ${target.label}`);
    const r = await kv.set(KEY, target.label);
    assert(r.ok, `set on ${target.label}`);
  }
  for (const { target, kv } of opened) {
    step(`read ${target.label}`);
    const e = await kv.get<string>(KEY);
    console.log(`${target.label} ${target.url}: get ${fmt(KEY)} -> ${fmt(e.value)}`);
    assertEquals(e.value, target.label, `value of ${fmt(KEY)} in ${target.label}`);
  }
  for (const { kv } of opened) kv.close();
  return { opened: opened.map((o) => o.target.label), refused };
});
