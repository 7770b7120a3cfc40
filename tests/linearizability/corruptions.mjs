// Negative controls for recorded histories: a real history, deliberately corrupted three ways,
// must be rejected by the checker (used by linearizability.test.mjs and postgres.test.mjs).
import assert from "node:assert/strict";
import { checkHistory, compareVs } from "./checker.mjs";

/**
 * Corrupts `h` (a recorded history, left unchanged) three ways and asserts the checker answers
 * "not linearizable" to each: (1) a stale read, (2) a lost CAS (skipped, with a note, if no
 * failed CAS shares its expected versionstamp with a successful one), (3) the versionstamps of
 * two sequential writes swapped. Prints one line per corruption through `log`.
 */
export function rejectCorruptions(h, log = console.log) {
  const done = (e) => e.returnTime !== null && e.returnTime !== undefined;
  const isWrite = (e) => done(e) && (e.op === "set" || (e.op === "cas" && e.result.ok));
  const writeValue = (e) => (e.op === "set" ? e.args[0] : e.args[1]);
  const check = (corrupt, what) => {
    const r = checkHistory(corrupt, { timeoutMs: 20_000 });
    log(`  corrupted (${what}): ${r.result}, search visited ${r.stats.states} states in ${r.stats.ms.toFixed(0)} ms`);
    assert.equal(r.result, "not linearizable", `${what} was not rejected`);
    return r;
  };

  // 1. Stale read: a get in the second half now returns the key's first written value,
  //    although a later write (larger versionstamp) completed before the get was invoked.
  let done1 = false;
  for (let i = Math.floor(h.length / 2); i < h.length && !done1; i++) {
    const g = h[i];
    if (g.op !== "get" || !done(g)) continue;
    const writes = h.filter((e) => e.key === g.key && isWrite(e));
    if (writes.length < 2) continue;
    const first = writes.reduce((a, b) => (compareVs(a.result.versionstamp, b.result.versionstamp) < 0 ? a : b));
    const newer = writes.find((e) => compareVs(e.result.versionstamp, first.result.versionstamp) > 0 && e.returnTime < g.invokeTime);
    if (!newer || g.result?.versionstamp === first.result.versionstamp) continue;
    const corrupt = structuredClone(h);
    corrupt[i].result = { value: writeValue(first), versionstamp: first.result.versionstamp };
    const r = check(corrupt, `history[${i}] get reads the first write's ${first.result.versionstamp}`);
    assert.equal(r.failure.key, g.key);
    assert.ok(r.failure.window.includes(i), `the corrupted get is in the reported window:\n${r.failure.text}`);
    log(r.failure.text.split("\n").map((l) => `    ${l}`).join("\n"));
    done1 = true;
  }
  assert.ok(done1, "found a get to corrupt");

  // 2. Lost CAS: a failed CAS now claims success on the same expected versionstamp as a
  //    successful one.
  const used = new Set(h.filter(isWrite).map((e) => e.result.versionstamp));
  const winners = new Map(h.filter((e) => e.op === "cas" && done(e) && e.result.ok && e.args[0]).map((e) => [`${e.key}|${e.args[0]}`, e]));
  const j = h.findIndex((e) => e.op === "cas" && done(e) && !e.result.ok && winners.has(`${e.key}|${e.args[0]}`));
  if (j < 0) {
    log("  (no failed CAS shares an expected versionstamp with a successful one; lost-CAS corruption skipped)");
  } else {
    let stamp = BigInt(`0x${winners.get(`${h[j].key}|${h[j].args[0]}`).result.versionstamp}`);
    let hex;
    do {
      stamp += 1n;
      hex = stamp.toString(16).padStart(20, "0");
    } while (used.has(hex));
    const corrupt = structuredClone(h);
    corrupt[j].result = { ok: true, versionstamp: hex };
    check(corrupt, `history[${j}] failed CAS on ${h[j].args[0]} now succeeds`);
  }

  // 3. Non-monotonic versionstamps: two writes on one key, one completed before the other
  //    was invoked, swap their versionstamps.
  const ws = h.map((e, i) => [e, i]).filter(([e]) => isWrite(e));
  let done3 = false;
  for (let a = Math.floor(ws.length / 3); a < ws.length && !done3; a++) {
    const [w1, i1] = ws[a];
    const next = ws.slice(a + 1).find(([e]) => e.key === w1.key && e.invokeTime > w1.returnTime);
    if (!next) continue;
    const [w2, i2] = next;
    const corrupt = structuredClone(h);
    corrupt[i1].result = { ...w1.result, versionstamp: w2.result.versionstamp };
    corrupt[i2].result = { ...w2.result, versionstamp: w1.result.versionstamp };
    check(corrupt, `history[${i1}] and history[${i2}] swap versionstamps`);
    done3 = true;
  }
  assert.ok(done3, "found two sequential writes to swap");
}
