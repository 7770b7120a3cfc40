// Versionstamped keys (kv.commitVersionstamp() as the last key part) and
// versionstamp monotonicity across many writes and clients.
import { assert, assertEquals, assertVersionstamp, collect, main, ns, openKv, step } from "./_lib.ts";

await main("versionstamp", async () => {
  const kv = await openKv();
  const p = ns("vs");
  const log = [...p, "log"];

  step("kv.set with commitVersionstamp()");
  const r1 = await kv.set([...log, kv.commitVersionstamp()], "first");
  assert(r1.ok, "set with a versionstamped key");
  assertVersionstamp(r1.versionstamp, "commit");
  let entries = await collect(kv.list({ prefix: log }));
  assertEquals(entries, [{ key: [...log, r1.versionstamp], value: "first", versionstamp: r1.versionstamp }],
    "the key's last part is the commit versionstamp as a 20-hex string");
  const direct = await kv.get([...log, r1.versionstamp]);
  assertEquals(direct.value, "first", "versionstamped key readable with get()");

  step("atomic with several versionstamped keys");
  const r2 = await kv.atomic()
    .set([...log, kv.commitVersionstamp()], "second")
    .set([...p, "other", kv.commitVersionstamp()], { other: true })
    .set([...p, "plain"], "plain")
    .commit();
  assert(r2.ok && r2.versionstamp > r1.versionstamp, "second commit");
  entries = await collect(kv.list({ prefix: log }));
  assertEquals(entries.map((e) => e.key[e.key.length - 1]), [r1.versionstamp, r2.versionstamp], "log ordered by commit");
  assertEquals(entries.map((e) => e.value), ["first", "second"], "log values");
  const other = await collect(kv.list({ prefix: [...p, "other"] }));
  assertEquals(other.map((e) => [e.key[e.key.length - 1], e.versionstamp]), [[r2.versionstamp, r2.versionstamp]],
    "all versionstamped keys of one commit use the same stamp");
  assertEquals((await kv.get([...p, "plain"])).versionstamp, r2.versionstamp, "plain key of the same commit");

  step("append-only log of 30 writes stays ordered");
  const stamps: string[] = [r1.versionstamp, r2.versionstamp];
  for (let i = 0; i < 30; i++) {
    const r = await kv.set([...log, kv.commitVersionstamp()], i);
    stamps.push(r.versionstamp);
  }
  entries = await collect(kv.list({ prefix: log }));
  assertEquals(entries.map((e) => e.key[e.key.length - 1]), stamps, "log keys in commit order");
  assertEquals(entries.map((e) => e.versionstamp), stamps, "log entry versionstamps");
  const reversed = await collect(kv.list({ prefix: log }, { reverse: true, limit: 1 }));
  assertEquals(reversed[0].value, 29, "last log entry via reverse list");

  step("versionstamps strictly increase across concurrent writers");
  const kv2 = await openKv();
  const results = await Promise.all(
    Array.from({ length: 60 }, (_, i) => (i % 2 ? kv : kv2).set([...p, "conc", i], i)),
  );
  const vs = results.map((r) => r.versionstamp);
  assertEquals(new Set(vs).size, vs.length, "60 concurrent commits get 60 distinct versionstamps");
  assert(vs.every((v) => v > stamps[stamps.length - 1]), "all newer than earlier commits");
  const seq1 = await kv.set([...p, "after"], 1);
  const seq2 = await kv2.set([...p, "after"], 2);
  assert(seq1.versionstamp > vs.reduce((a, b) => (a > b ? a : b)), "write after the concurrent batch is newer");
  assert(seq2.versionstamp > seq1.versionstamp, "write on another handle is newer still");
  kv2.close();

  kv.close();
  return { logEntries: stamps.length };
});
