// get / set / delete / getMany, key encodings and ordering, key-size boundary,
// versionstamps strictly increasing across writes.
import {
  assert, assertEquals, assertRejects, assertVersionstamp, collect, encodedKeySize, main, ns, openKv, step,
} from "./_lib.ts";

await main("basic", async () => {
  const kv = await openKv();
  const p = ns("basic");

  step("get missing key");
  const missing = await kv.get([...p, "missing"]);
  assertEquals(missing, { key: [...p, "missing"], value: null, versionstamp: null }, "get of a missing key");

  step("set + get");
  const r1 = await kv.set([...p, "a"], "one");
  assert(r1.ok === true, "set must resolve {ok:true}");
  assertVersionstamp(r1.versionstamp, "set result");
  const g1 = await kv.get([...p, "a"]);
  assertEquals(g1, { key: [...p, "a"], value: "one", versionstamp: r1.versionstamp }, "get after set");
  const g1e = await kv.get([...p, "a"], { consistency: "eventual" });
  assertEquals(g1e.value, "one", "eventual-consistency get");

  step("overwrite gives a larger versionstamp");
  const r2 = await kv.set([...p, "a"], { n: 2 });
  assert(r2.versionstamp > r1.versionstamp, `overwrite versionstamp ${r2.versionstamp} must be > ${r1.versionstamp}`);
  assertEquals((await kv.get([...p, "a"])).value, { n: 2 }, "value after overwrite");

  step("versionstamps strictly increase across 60 sequential writes");
  let prev = r2.versionstamp;
  for (let i = 0; i < 60; i++) {
    const k = i % 3 === 0 ? [...p, "a"] : [...p, "seq", i];
    const r = i % 5 === 4 ? await kv.delete([...p, "seq", i - 1]).then(() => kv.set(k, i)) : await kv.set(k, i);
    assertVersionstamp(r.versionstamp, `write #${i}`);
    assert(r.versionstamp > prev, `write #${i}: versionstamp ${r.versionstamp} not > previous ${prev}`);
    prev = r.versionstamp;
  }

  step("delete");
  await kv.set([...p, "del"], "x");
  const delRes = await kv.delete([...p, "del"]);
  assert(delRes === undefined, "kv.delete resolves to undefined");
  assertEquals(await kv.get([...p, "del"]), { key: [...p, "del"], value: null, versionstamp: null }, "get after delete");
  await kv.delete([...p, "never-existed"]); // must not throw
  const afterDel = await kv.set([...p, "del"], "back");
  assert(afterDel.versionstamp > prev, "re-set after delete gets a newer versionstamp");
  prev = afterDel.versionstamp;

  step("key part types round-trip");
  const keyParts: Deno.KvKeyPart[] = [
    "plain", "", "with\u0000nul", "unicodé ✓ 🌍", 0, -0.5, 1.5, 42, -1e300, Infinity, -Infinity, NaN,
    0n, 1n, -1n, 255n, 256n, -256n, 2n ** 64n, -(2n ** 64n), 2n ** 63n - 1n, true, false,
    new Uint8Array([]), new Uint8Array([0]), new Uint8Array([0, 255, 0, 1]), new Uint8Array([1, 2, 3]),
  ];
  for (const [i, part] of keyParts.entries()) {
    const key = [...p, "kp", part, "tail"];
    const r = await kv.set(key, i);
    const got = await kv.get(key);
    assertEquals(got.value, i, `value stored under key part ${Deno.inspect(part)}`);
    assertEquals(got.key, key, `key returned for key part ${Deno.inspect(part)}`);
    assertEquals(got.versionstamp, r.versionstamp, `versionstamp for key part ${Deno.inspect(part)}`);
  }

  step("key ordering across types (bytes < string < int < float < false < true)");
  const ordered: Deno.KvKeyPart[] = [
    new Uint8Array([]), new Uint8Array([0]), new Uint8Array([0, 0]), new Uint8Array([1]), new Uint8Array([255]),
    "", "\u0000", "A", "a", "ab", "b", "é",
    -(2n ** 70n), -(2n ** 64n), -256n, -255n, -1n, 0n, 1n, 255n, 256n, 2n ** 64n, 2n ** 70n,
    -Infinity, -1e300, -1.5, -1, -Number.MIN_VALUE, 0, Number.MIN_VALUE, 1, 1.5, 1e300, Infinity,
    false, true,
  ];
  const shuffled = [...ordered].sort(() => Math.random() - 0.5);
  const ord = [...p, "order"];
  {
    const atomic = kv.atomic();
    for (const [i, part] of shuffled.entries()) atomic.set([...ord, part], i);
    const res = await atomic.commit();
    assert(res.ok, "ordering batch commit");
  }
  const listed = await collect(kv.list({ prefix: ord }));
  assertEquals(listed.map((e) => e.key[e.key.length - 1]), ordered, "list order of mixed key parts");
  const listedRev = await collect(kv.list({ prefix: ord }, { reverse: true }));
  assertEquals(listedRev.map((e) => e.key[e.key.length - 1]), [...ordered].reverse(), "reverse list order");

  step("getMany");
  const gmKeys: Deno.KvKey[] = [];
  const expected: unknown[] = [];
  for (let i = 0; i < 10; i++) {
    const k = [...p, "gm", i];
    gmKeys.push(k);
    if (i % 3 === 1) {
      expected.push({ key: k, value: null, versionstamp: null });
    } else {
      const r = await kv.set(k, { i, s: "v" + i });
      expected.push({ key: k, value: { i, s: "v" + i }, versionstamp: r.versionstamp });
    }
  }
  // reverse order and duplicates must be answered in request order
  const gm = await kv.getMany(gmKeys);
  assertEquals(gm, expected, "getMany of 10 keys (some missing)");
  const gmRev = await kv.getMany([...gmKeys].reverse());
  assertEquals(gmRev, [...expected].reverse(), "getMany in reverse key order");
  const gmDup = await kv.getMany([gmKeys[0], gmKeys[0], gmKeys[1]]);
  assertEquals(gmDup, [expected[0], expected[0], expected[1]], "getMany with a duplicated key");
  const gmOne = await kv.getMany([gmKeys[2]], { consistency: "eventual" });
  assertEquals(gmOne, [expected[2]], "getMany of one key, eventual");
  await assertRejects(
    () => kv.getMany(Array.from({ length: 11 }, (_, i) => [...p, "gm", i])),
    [],
    "getMany of 11 keys must be refused",
  );

  step("key size boundary (2048 bytes for writes)");
  const base = [...p, "bigkey"];
  const pad = 2048 - encodedKeySize([...base, ""]);
  const maxKey = [...base, "k".repeat(pad)];
  assertEquals(encodedKeySize(maxKey), 2048, "computed key size");
  const rMax = await kv.set(maxKey, "max-size key");
  assertEquals(await kv.get(maxKey), { key: maxKey, value: "max-size key", versionstamp: rMax.versionstamp }, "2048-byte key round-trip");
  const listedMax = await collect(kv.list({ prefix: base }));
  assertEquals(listedMax.map((e) => e.key), [maxKey], "list returns the 2048-byte key");
  await kv.delete(maxKey);
  assertEquals((await kv.get(maxKey)).versionstamp, null, "2048-byte key deleted");
  const tooLong = [...base, "k".repeat(pad + 1)];
  await assertRejects(() => kv.set(tooLong, 1), [/too large/i], "2049-byte key write must be refused");
  await assertRejects(() => kv.set([], 1), [], "empty key write must be refused");

  kv.close();
  return { keyPartsChecked: keyParts.length, ordered: ordered.length, lastVersionstamp: prev };
});
