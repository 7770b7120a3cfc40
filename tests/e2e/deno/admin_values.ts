// The Deno side of the admin API test (admin_api.test.mjs). ADMIN_STEP selects the step:
//   write   stores one value of each kind under ["admin", ADMIN_RUN, "deno", <name>], for the
//           test to read back through the admin API as JSON;
//   verify  reads what the test wrote through the admin API (from JSON) under
//           ["admin", ADMIN_RUN, "api", <name>] and checks Deno decodes each to the expected
//           value.
import { assert, assertEquals, main, openKv, step } from "./_lib.ts";

const RUN = Deno.env.get("ADMIN_RUN") ?? "run";

function samples(): [string, unknown][] {
  return [
    ["string", "héllo €"],
    ["number", 42.5],
    ["bigint", 12345678901234567890n],
    ["boolean", true],
    ["null", null],
    ["undefined", undefined],
    ["date", new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6))],
    ["regexp", /a+b/gi],
    ["map", new Map<unknown, unknown>([["k", 1], [2, "two"]])],
    ["set", new Set([1, "x"])],
    ["bytes", new Uint8Array([1, 2, 3, 250])],
    ["object", { a: 1, nested: { list: [1, "x", null] } }],
    ["array", [1, "two", false]],
    ["u64", new Deno.KvU64(7n)],
    ["float64array", new Float64Array([1.5, -2])],
  ];
}

await main("admin_values", async () => {
  const kv = await openKv();
  const stepName = Deno.env.get("ADMIN_STEP");
  if (stepName === "write") {
    step("write");
    for (const [name, value] of samples()) {
      const res = await kv.set(["admin", RUN, "deno", name], value);
      assert(res.ok, `set ${name}`);
    }
    kv.close();
    return { written: samples().length };
  }
  step("verify");
  const expected = samples();
  for (const [name, value] of expected) {
    const got = await kv.get(["admin", RUN, "api", name]);
    assert(got.versionstamp !== null, `the admin API wrote ${name}`);
    assertEquals(got.value, value, `${name} written from JSON`);
  }
  kv.close();
  return { verified: expected.length };
});
