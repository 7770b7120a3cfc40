// Unit tests of kv_connect.ts without a server: the key codec against the protocol's vectors
// and against the key bytes Deno itself writes to a local SQLite database, value encodings
// against Deno's, and the AtomicWrite / AtomicWriteOutput protobuf bytes.
// Run: deno test --unstable-kv -A kv_connect_test.ts   (against kvconnect: tests/e2e/deploy_queue.test.mjs)
import { decodeAtomicWriteOutput, encodeAtomicWrite, encodeKey, encodeValue } from "./kv_connect.ts";

const hex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, "0")).join(" ");

function assertEq(got: unknown, want: unknown, what: string) {
  if (got !== want) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

Deno.test("encodeKey: the protocol's vectors", () => {
  const cases: [unknown[], string][] = [
    [["users", 1], "02 75 73 65 72 73 00 21 bf f0 00 00 00 00 00 00"],
    [[1n], "15 01"],
    [[256n], "16 01 00"],
    [[0n], "14"],
    [[-1n], "13 fe"],
    [[-256n], "12 fe ff"],
    [[2n ** 64n], "1d 09 01 00 00 00 00 00 00 00 00"],
    [[-(2n ** 64n)], "0b f6 fe ff ff ff ff ff ff ff ff"],
    [[0], "21 80 00 00 00 00 00 00 00"],
    [[-0], "21 7f ff ff ff ff ff ff ff"],
    [[-1], "21 40 0f ff ff ff ff ff ff"],
    [[NaN], "21 ff f8 00 00 00 00 00 00"],
    [[new Uint8Array([0, 1])], "01 00 ff 01 00"],
    [[true], "27"],
    [[false], "26"],
  ];
  for (const [key, want] of cases) assertEq(hex(encodeKey(key)), want, Deno.inspect(key));
  let threw = false;
  try {
    encodeKey([{}]);
  } catch (e) {
    threw = e instanceof TypeError;
  }
  assertEq(threw, true, "an object part is refused");
});

/** A seeded PRNG (mulberry32), so a failure can be replayed. */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomPart(rand: () => number): Deno.KvKeyPart {
  const pick = Math.floor(rand() * 8);
  const n = Math.floor(rand() * 2 ** 53) * (rand() < 0.5 ? -1 : 1);
  switch (pick) {
    case 0:
      return Array.from({ length: Math.floor(rand() * 6) }, () => String.fromCharCode(Math.floor(rand() * 0x3000)))
        .join("");
    case 1:
      return Uint8Array.from({ length: Math.floor(rand() * 6) }, () => (rand() < 0.3 ? 0 : Math.floor(rand() * 256)));
    case 2:
      return BigInt(n) ** BigInt(1 + Math.floor(rand() * 4)) * (rand() < 0.5 ? -1n : 1n);
    case 3:
      return n / 2 ** Math.floor(rand() * 60);
    case 4:
      return [NaN, Infinity, -Infinity, 0, -0, Number.MIN_VALUE, -Number.MAX_VALUE][Math.floor(rand() * 7)];
    case 5:
      return rand() < 0.5;
    case 6:
      return BigInt(Math.floor(rand() * 600) - 300);
    default:
      return Math.floor(rand() * 600) - 300;
  }
}

Deno.test({
  name: "encodeKey and encodeValue write the bytes Deno writes to its own SQLite file",
  ignore: typeof Deno.openKv !== "function",
  async fn() {
    const { DatabaseSync } = await import("node:sqlite");
    const dir = await Deno.makeTempDir();
    try {
      const path = `${dir}/kv.sqlite`;
      const kv = await Deno.openKv(path);
      const rand = prng(21);
      const keys: Deno.KvKey[] = [];
      for (let i = 0; i < 300; i++) {
        keys.push(Array.from({ length: 1 + Math.floor(rand() * 4) }, () => randomPart(rand)));
      }
      for (let i = 0; i < keys.length; i += 100) {
        let op = kv.atomic();
        for (const k of keys.slice(i, i + 100)) op = op.set(k, 0);
        if (!(await op.commit()).ok) throw new Error("local write");
      }
      const values: [string, unknown][] = [["bytes", Uint8Array.of(0, 9)], ["u64", new Deno.KvU64(7n)], ["v8", "text"]];
      for (const [name, v] of values) await kv.set(["value", name], v);
      kv.close();
      const db = new DatabaseSync(path);
      const rows = db.prepare("SELECT k, v, v_encoding FROM kv").all() as {
        k: Uint8Array;
        v: Uint8Array;
        v_encoding: number;
      }[];
      db.close();
      const stored = new Set(rows.map((r) => hex(r.k)));
      for (const k of keys) {
        if (!stored.has(hex(encodeKey(k)))) {
          throw new Error(`key ${Deno.inspect(k)}: ${hex(encodeKey(k))} not as Deno wrote it`);
        }
      }
      for (const [name, v] of values) {
        const row = rows.find((r) => hex(r.k) === hex(encodeKey(["value", name])))!;
        const mine = encodeValue(v);
        assertEq(mine.encoding, row.v_encoding, `encoding of ${name}`);
        if (name !== "v8") assertEq(hex(mine.data), hex(row.v), `bytes of ${name}`); // V8 formats 15 vs 16 differ
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("encodeAtomicWrite: checks, mutations, enqueues as protobuf", () => {
  const bytes = encodeAtomicWrite([
    { op: "check", key: ["a"], versionstamp: null },
    { op: "check", key: ["a"], versionstamp: "0000000000000001000a" },
    { op: "delete", key: ["a"] },
    { op: "set", key: ["a"], value: { data: Uint8Array.of(7), encoding: 3 }, expireIn: 24 },
    { op: "set", key: ["p", Symbol("versionstamp")], value: { data: Uint8Array.of(7), encoding: 3 } },
    { op: "enqueue", payload: Uint8Array.of(1, 2), delay: 0.9, keysIfUndelivered: [["a"]], backoffSchedule: [100] },
  ], 1000);
  const want = [
    "0a 05 0a 03 02 61 00", // Check{key}
    "0a 11 0a 03 02 61 00 12 0a 00 00 00 00 00 00 00 01 00 0a", // Check{key, versionstamp}
    "12 07 0a 03 02 61 00 18 02", // Mutation{key, M_DELETE}
    "12 11 0a 03 02 61 00 12 05 0a 01 07 10 03 18 01 20 80 08", // M_SET, VE_BYTES, expire_at_ms 1024
    "12 0e 0a 03 02 70 00 12 05 0a 01 07 10 03 18 09", // M_SET_SUFFIX_VERSIONSTAMPED_KEY
    "1a 0f 0a 02 01 02 10 e8 07 1a 03 02 61 00 22 01 64", // Enqueue{payload, deadline 1000, keys, [100]}
  ].join(" ");
  assertEq(hex(bytes), want, "AtomicWrite bytes");
});

Deno.test("decodeAtomicWriteOutput", () => {
  const ok = decodeAtomicWriteOutput(Uint8Array.of(0x08, 0x01, 0x12, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0x5b, 0, 1, 0x22, 0));
  assertEq(ok.status, 1, "status");
  assertEq(ok.versionstamp, "000000000000005b0001", "versionstamp");
  const failed = decodeAtomicWriteOutput(Uint8Array.of(0x08, 0x02, 0x22, 0x01, 0x00));
  assertEq(failed.status, 2, "check failure");
  assertEq(failed.versionstamp, null, "no versionstamp");
});
