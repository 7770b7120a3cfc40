// sum/min/max on Deno.KvU64 (LE64) and V8 sums via atomic().mutate({type:"sum"})
// on bigint and number values, including the type-mismatch errors.
import { assert, assertEquals, assertRejects, IS_REMOTE, main, ns, openKv, step } from "./_lib.ts";

await main("sum", async () => {
  const kv = await openKv();
  const p = ns("sum");
  const k = (...parts: Deno.KvKeyPart[]) => [...p, ...parts];
  const U = (n: bigint) => new Deno.KvU64(n);
  const val = async (key: Deno.KvKey) => (await kv.get(key)).value;
  /** On the remote backend a server-side error must reach user code with the server's text. */
  const serverError = (text: string) => (IS_REMOTE ? [text, "400"] : [text]);

  step("KvU64 sum");
  assert((await kv.atomic().sum(k("u"), 5n).commit()).ok, "sum on a missing key");
  let v = await kv.get(k("u"));
  assert(v.value instanceof Deno.KvU64, `sum result must be a Deno.KvU64, got ${Deno.inspect(v.value)}`);
  assertEquals(v.value, U(5n), "sum on missing key stores the operand");
  const s2 = await kv.atomic().sum(k("u"), 10n).commit();
  v = await kv.get(k("u"));
  assertEquals(v.value, U(15n), "5 + 10");
  assertEquals(v.versionstamp, (s2 as Deno.KvCommitResult).versionstamp, "sum writes the commit versionstamp");
  await kv.atomic().sum(k("u"), 1n).sum(k("u"), 2n).sum(k("u"), 3n).commit();
  assertEquals(await val(k("u")), U(21n), "three sums in one atomic");

  step("KvU64 wraps modulo 2^64");
  await kv.set(k("wrap"), U(2n ** 64n - 1n));
  await kv.atomic().sum(k("wrap"), 2n).commit();
  assertEquals(await val(k("wrap")), U(1n), "(2^64-1) + 2 wraps to 1");
  await kv.atomic().sum(k("wrap"), 2n ** 64n - 1n).commit();
  assertEquals(await val(k("wrap")), U(0n), "1 + (2^64-1) wraps to 0");

  step("KvU64 min / max");
  await kv.set(k("mm"), U(15n));
  await kv.atomic().min(k("mm"), 20n).commit();
  assertEquals(await val(k("mm")), U(15n), "min(15, 20)");
  await kv.atomic().min(k("mm"), 3n).commit();
  assertEquals(await val(k("mm")), U(3n), "min(15, 3)");
  await kv.atomic().max(k("mm"), 2n).commit();
  assertEquals(await val(k("mm")), U(3n), "max(3, 2)");
  await kv.atomic().max(k("mm"), 2n ** 64n - 1n).commit();
  assertEquals(await val(k("mm")), U(2n ** 64n - 1n), "max is unsigned");
  await kv.atomic().min(k("min-missing"), 9n).max(k("max-missing"), 7n).commit();
  assertEquals([await val(k("min-missing")), await val(k("max-missing"))], [U(9n), U(7n)], "min/max on missing keys store the operand");

  step("KvU64 sum onto a non-U64 value is rejected");
  await kv.set(k("str"), "text");
  await assertRejects(() => kv.atomic().sum(k("str"), 1n).commit(), serverError("non-U64"), "sum onto a string");
  await assertRejects(() => kv.atomic().max(k("str"), 1n).commit(), serverError("non-U64"), "max onto a string");
  assertEquals(await val(k("str")), "text", "value untouched");
  await assertRejects(
    () => kv.atomic().mutate({ type: "min", key: k("mm"), value: 5n }).commit(),
    serverError("non-U64 operand"),
    "min with a V8 (non-KvU64) operand",
  );

  step("V8 bigint sum");
  await kv.atomic().mutate({ type: "sum", key: k("big"), value: 5n }).commit();
  assertEquals(await val(k("big")), 5n, "V8 sum on a missing key stores the bigint");
  await kv.atomic().mutate({ type: "sum", key: k("big"), value: 10n }).commit();
  assertEquals(await val(k("big")), 15n, "5n + 10n");
  await kv.atomic().mutate({ type: "sum", key: k("big"), value: -20n }).commit();
  assertEquals(await val(k("big")), -5n, "15n + -20n is negative (no wrapping)");
  await kv.atomic().mutate({ type: "sum", key: k("big"), value: 2n ** 100n }).commit();
  assertEquals(await val(k("big")), 2n ** 100n - 5n, "arbitrary precision");
  await kv.set(k("big2"), 2n ** 64n);
  await kv.atomic().mutate({ type: "sum", key: k("big2"), value: 2n ** 64n }).commit();
  assertEquals(await val(k("big2")), 2n ** 65n, "sum onto a bigint set with kv.set");

  step("V8 number sum");
  await kv.atomic().mutate({ type: "sum", key: k("num"), value: 1.5 }).commit();
  assertEquals(await val(k("num")), 1.5, "number sum on a missing key");
  await kv.atomic().mutate({ type: "sum", key: k("num"), value: 2.25 }).commit();
  assertEquals(await val(k("num")), 3.75, "1.5 + 2.25");
  await kv.set(k("num2"), 10);
  await kv.atomic().mutate({ type: "sum", key: k("num2"), value: 5 }).commit();
  assertEquals(await val(k("num2")), 15, "10 + 5 (small integers)");
  await kv.atomic().mutate({ type: "sum", key: k("num2"), value: -0.5 }).commit();
  assertEquals(await val(k("num2")), 14.5, "15 + -0.5");
  await kv.set(k("num3"), 2 ** 40);
  await kv.atomic().mutate({ type: "sum", key: k("num3"), value: 2 ** 40 }).commit();
  assertEquals(await val(k("num3")), 2 ** 41, "large doubles");
  await kv.atomic().mutate({ type: "sum", key: k("num4"), value: 1 }).mutate({ type: "sum", key: k("num4"), value: 2 }).commit();
  assertEquals(await val(k("num4")), 3, "two number sums in one atomic");

  step("KvU64 + V8 bigint compatibility");
  await kv.set(k("compat"), U(10n));
  await kv.atomic().mutate({ type: "sum", key: k("compat"), value: 5n }).commit();
  assertEquals(await val(k("compat")), U(15n), "KvU64 + bigint operand stays a KvU64");

  step("mismatched V8 sums are rejected with 'Cannot sum'");
  await assertRejects(
    () => kv.atomic().mutate({ type: "sum", key: k("big"), value: 1 }).commit(),
    serverError("Cannot sum BigInt with Number"),
    "number onto bigint",
  );
  await assertRejects(
    () => kv.atomic().mutate({ type: "sum", key: k("num"), value: 1n }).commit(),
    serverError("Cannot sum Number with BigInt"),
    "bigint onto number",
  );
  await assertRejects(
    () => kv.atomic().mutate({ type: "sum", key: k("compat"), value: 1 }).commit(),
    serverError("Cannot sum KvU64 with Number"),
    "number onto KvU64",
  );
  await assertRejects(
    () => kv.atomic().mutate({ type: "sum", key: k("str"), value: 1 }).commit(),
    IS_REMOTE ? ["400"] : [],
    "number onto a string",
  );
  assertEquals([await val(k("big")), await val(k("num")), await val(k("compat")), await val(k("str"))],
    [2n ** 100n - 5n, 3.75, U(15n), "text"], "values unchanged after rejected sums");

  step("sum result is readable through list and getMany");
  const many = await kv.getMany([k("u"), k("big"), k("num")]);
  assertEquals(many.map((e) => e.value), [U(21n), 2n ** 100n - 5n, 3.75], "getMany of summed values");

  step("200 concurrent KvU64 sums on one key");
  await Promise.all(Array.from({ length: 200 }, () => kv.atomic().sum(k("hot"), 1n).commit()));
  assertEquals(await val(k("hot")), U(200n), "200 concurrent sums");

  kv.close();
  return {};
});
