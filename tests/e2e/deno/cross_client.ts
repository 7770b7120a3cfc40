// Values written by the Node @deno/kv client (Node's V8 serializer, format 15) are
// read by Deno, and Deno writes values for the Node client to read back. The summary has the
// versionstamps Deno read (`read`, by name) and got for its writes (`wrote`).
// env: CROSS_NS
import { assert, assertEquals, main, openKv, step } from "./_lib.ts";

await main("cross_client", async () => {
  const P = ["cross", Deno.env.get("CROSS_NS") ?? "default"];
  const kv = await openKv();

  step("read what Node wrote");
  const fromNode = await kv.getMany([
    [...P, "node", "str"], [...P, "node", "obj"], [...P, "node", "bytes"], [...P, "node", "u64"], [...P, "node", "big"],
  ]);
  assertEquals(fromNode[0].value, "written by node ✓", "string from Node");
  assertEquals(fromNode[1].value, { a: [1, 2.5, "x"], d: new Date(1234567890123), m: new Map([["k", new Set([1n])]]) }, "object from Node");
  assertEquals(fromNode[2].value, new Uint8Array([1, 2, 3, 0, 255]), "bytes from Node");
  assertEquals(fromNode[3].value, new Deno.KvU64(42n), "KvU64 from Node");
  assertEquals(fromNode[4].value, -(2n ** 70n), "bigint from Node");
  assert(fromNode.every((e) => /^[0-9a-f]{20}$/.test(e.versionstamp ?? "")), "versionstamps of Node writes");

  step("write for Node");
  const wrote = {
    str: (await kv.set([...P, "deno", "str"], "written by deno ✓")).versionstamp,
    obj: (await kv.set([...P, "deno", "obj"], { list: [1, "two", null], when: new Date(42), nested: { t: true } })).versionstamp,
    bytes: (await kv.set([...P, "deno", "bytes"], new Uint8Array([9, 8, 7]))).versionstamp,
    u64: (await kv.set([...P, "deno", "u64"], new Deno.KvU64(2n ** 64n - 1n))).versionstamp,
    sum: ((await kv.atomic().sum([...P, "node", "u64"], 8n).commit()) as Deno.KvCommitResult).versionstamp,
  };
  kv.close();
  const names = ["str", "obj", "bytes", "u64", "big"];
  return { read: Object.fromEntries(fromNode.map((e, i) => [names[i], e.versionstamp])), wrote };
});
