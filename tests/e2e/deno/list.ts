// list(): prefix / start / end / reverse / limit / cursor / batchSize, and paging
// through more than 500 entries (the client's maximum page) with cursor resumption.
import { assert, assertEquals, collect, main, ns, openKv, step } from "./_lib.ts";

await main("list", async () => {
  const kv = await openKv();
  const p = ns("list");
  const items = [...p, "items"];
  const N = 20;

  step("populate");
  {
    const a = kv.atomic();
    for (let i = 0; i < N; i++) a.set([...items, i], { i });
    a.set(items, "exact prefix key (never listed by prefix)");
    a.set([...p, "item"], "sibling before");
    a.set([...p, "itemsX", 0], "sibling after");
    a.set([...p, "items\u0000"], "sibling with nul");
    assert((await a.commit()).ok, "populate commit");
  }
  const keysOf = (es: Deno.KvEntry<unknown>[]) => es.map((e) => e.key[e.key.length - 1]);
  const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

  step("prefix");
  const all = await collect(kv.list<{ i: number }>({ prefix: items }));
  assertEquals(keysOf(all), range(0, N), "list({prefix}) keys");
  assert(all.every((e) => e.value.i === e.key[e.key.length - 1]), "list({prefix}) values");
  assert(all.every((e) => /^[0-9a-f]{20}$/.test(e.versionstamp)), "list entries carry versionstamps");
  assert(new Set(all.map((e) => e.versionstamp)).size === 1, "entries written in one atomic share a versionstamp");

  step("prefix reverse / limit");
  assertEquals(keysOf(await collect(kv.list({ prefix: items }, { reverse: true }))), range(0, N).reverse(), "reverse");
  assertEquals(keysOf(await collect(kv.list({ prefix: items }, { limit: 5 }))), range(0, 5), "limit 5");
  assertEquals(keysOf(await collect(kv.list({ prefix: items }, { limit: 5, reverse: true }))), [19, 18, 17, 16, 15], "limit 5 reverse");
  assertEquals(keysOf(await collect(kv.list({ prefix: items }, { limit: 1 }))), [0], "limit 1");
  assertEquals(keysOf(await collect(kv.list({ prefix: items }, { limit: 500 }))), range(0, N), "limit larger than the data");

  step("prefix + start / end");
  assertEquals(keysOf(await collect(kv.list({ prefix: items, start: [...items, 5] }))), range(5, N), "prefix+start (inclusive)");
  assertEquals(keysOf(await collect(kv.list({ prefix: items, start: [...items, 4.5] }))), range(5, N), "prefix+start between keys");
  assertEquals(keysOf(await collect(kv.list({ prefix: items, end: [...items, 15] }))), range(0, 15), "prefix+end (exclusive)");
  assertEquals(keysOf(await collect(kv.list({ prefix: items, end: [...items, 15] }, { reverse: true, limit: 3 }))), [14, 13, 12], "prefix+end reverse limit");
  assertEquals(keysOf(await collect(kv.list({ prefix: items, start: [...items, 18] }, { reverse: true }))), [19, 18], "prefix+start reverse");

  step("start + end");
  assertEquals(keysOf(await collect(kv.list({ start: [...items, 3], end: [...items, 7] }))), range(3, 7), "start/end");
  assertEquals(keysOf(await collect(kv.list({ start: [...items, 3], end: [...items, 7] }, { reverse: true }))), [6, 5, 4, 3], "start/end reverse");
  assertEquals(keysOf(await collect(kv.list({ start: [...items, 7], end: [...items, 7] }))), [], "empty start==end range");
  const wide = await collect(kv.list({ start: [...p, "item"], end: [...p, "itemsY"] }));
  assertEquals(wide.map((e) => e.key.slice(p.length)), [
    ["item"], ["items"], ...range(0, N).map((i) => ["items", i]), ["items\u0000"], ["itemsX", 0],
  ], "start/end spanning siblings and the exact prefix key");

  step("empty prefix");
  assertEquals(await collect(kv.list({ prefix: [...p, "nothing-here"] })), [], "list of an empty prefix");

  step("cursor (forward)");
  {
    const it = kv.list({ prefix: items }, { limit: 7 });
    const first = await collect(it);
    assertEquals(keysOf(first), range(0, 7), "first page");
    const cursor = it.cursor;
    assert(typeof cursor === "string" && cursor.length > 0, `cursor after first page: ${cursor}`);
    const second = await collect(kv.list({ prefix: items }, { limit: 7, cursor }));
    assertEquals(keysOf(second), range(7, 14), "page after cursor");
    const rest = await collect(kv.list({ prefix: items }, { cursor }));
    assertEquals(keysOf(rest), range(7, N), "rest after cursor");
  }

  step("cursor (reverse)");
  {
    const it = kv.list({ prefix: items }, { limit: 6, reverse: true });
    assertEquals(keysOf(await collect(it)), [19, 18, 17, 16, 15, 14], "reverse first page");
    const next = await collect(kv.list({ prefix: items }, { limit: 6, reverse: true, cursor: it.cursor }));
    assertEquals(keysOf(next), [13, 12, 11, 10, 9, 8], "reverse page after cursor");
  }

  step("cursor taken mid-iteration");
  {
    const it = kv.list({ prefix: items }, { batchSize: 4 });
    const seen: unknown[] = [];
    for await (const e of it) {
      seen.push(e.key[e.key.length - 1]);
      if (seen.length === 10) break;
    }
    const resumed = await collect(kv.list({ prefix: items }, { cursor: it.cursor }));
    assertEquals([...seen, ...keysOf(resumed)], range(0, N), "resume after a break");
  }

  step("batchSize");
  for (const batchSize of [1, 3, 19, 20, 21]) {
    assertEquals(keysOf(await collect(kv.list({ prefix: items }, { batchSize }))), range(0, N), `batchSize ${batchSize}`);
    assertEquals(keysOf(await collect(kv.list({ prefix: items }, { batchSize, reverse: true }))), range(0, N).reverse(), `batchSize ${batchSize} reverse`);
  }

  step("populate 1234 entries");
  const big = [...p, "big"];
  const M = 1234;
  for (let start = 0; start < M; start += 250) {
    const a = kv.atomic();
    for (let i = start; i < Math.min(M, start + 250); i++) a.set([...big, i], `v${i}`);
    assert((await a.commit()).ok, `bulk commit from ${start}`);
  }

  step("paging through >500 entries");
  {
    const everything = await collect(kv.list<string>({ prefix: big }));
    assertEquals(everything.length, M, "default list returns every entry");
    assertEquals(keysOf(everything), range(0, M), "default list order");
    assert(everything.every((e) => e.value === `v${e.key[e.key.length - 1]}`), "values of 1234 entries");

    const b500 = await collect(kv.list({ prefix: big }, { batchSize: 500 }));
    assertEquals(keysOf(b500), range(0, M), "batchSize 500");
    const b500r = await collect(kv.list({ prefix: big }, { batchSize: 500, reverse: true }));
    assertEquals(keysOf(b500r), range(0, M).reverse(), "batchSize 500 reverse");
    const b1000 = await collect(kv.list({ prefix: big }, { batchSize: 1000 }));
    assertEquals(keysOf(b1000), range(0, M), "batchSize 1000");
    const limited = await collect(kv.list({ prefix: big }, { limit: 1001 }));
    assertEquals(keysOf(limited), range(0, 1001), "limit 1001 (needs several pages)");
    const evt = await collect(kv.list({ prefix: big }, { consistency: "eventual", batchSize: 300 }));
    assertEquals(evt.length, M, "eventual consistency list");
  }

  step("cursor resumption over 1234 entries");
  {
    const pages: number[][] = [];
    let cursor: string | undefined = undefined;
    for (let guard = 0; guard < 20; guard++) {
      const it: Deno.KvListIterator<string> = kv.list<string>({ prefix: big }, { limit: 300, batchSize: 120, cursor });
      const page = keysOf(await collect(it)) as number[];
      if (page.length === 0) break;
      pages.push(page);
      cursor = it.cursor;
      if (page.length < 300) break;
    }
    assertEquals(pages.map((pg) => pg.length), [300, 300, 300, 300, 34], "page sizes");
    assertEquals(pages.flat(), range(0, M), "cursor-paged keys");

    const rpages: number[][] = [];
    cursor = undefined;
    for (let guard = 0; guard < 20; guard++) {
      const it: Deno.KvListIterator<string> = kv.list<string>({ prefix: big }, { limit: 600, reverse: true, cursor });
      const page = keysOf(await collect(it)) as number[];
      if (page.length === 0) break;
      rpages.push(page);
      cursor = it.cursor;
      if (page.length < 600) break; // exhausted: Deno then reports an empty cursor
    }
    assertEquals(rpages.map((pg) => pg.length), [600, 600, 34], "reverse page sizes");
    assertEquals(rpages.flat(), range(0, M).reverse(), "reverse cursor-paged keys");
  }

  step("range within big set");
  assertEquals(
    keysOf(await collect(kv.list({ start: [...big, 499], end: [...big, 1001] }))),
    range(499, 1001),
    "start/end spanning page boundaries",
  );
  assertEquals(
    keysOf(await collect(kv.list({ start: [...big, 499], end: [...big, 1001] }, { reverse: true, batchSize: 100 }))),
    range(499, 1001).reverse(),
    "reverse start/end spanning page boundaries",
  );

  kv.close();
  return { entries: M + N };
});
