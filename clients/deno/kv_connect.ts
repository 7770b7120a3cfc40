// A minimal KV Connect client for one call: atomic_write with enqueues, which Deno's own remote
// client refuses ("Enqueue operations are not supported in KV Connect") although the protocol
// carries them and kvconnect stores them in its queue. deploy.ts uses it for
// `kv.atomic()...enqueue(...).commit()` on a KV Connect database, so that the checks, the
// mutations and the enqueues commit as one write.
//
// Written from the protocol's documented wire layout (kvconnect's proto/datapath.proto and the
// KV Connect specification): the metadata exchange (protocol 2 or 3), the tuple key codec, and
// protobuf by hand (varints and length-delimited fields only).

import { serialize } from "./v8.ts";

/** A key part as Deno KV keys hold them. */
export type KeyPart = string | number | bigint | boolean | Uint8Array;

const utf8 = new TextEncoder();

/** Pushes `bytes` with every 0x00 written as 0x00 0xFF, then the terminator 0x00. */
function pushEscaped(out: number[], bytes: Uint8Array) {
  for (const b of bytes) {
    out.push(b);
    if (b === 0) out.push(0xff);
  }
  out.push(0);
}

/** Big-endian magnitude of a non-negative bigint, minimal (no bytes for 0). */
function magnitude(n: bigint): number[] {
  const bytes: number[] = [];
  while (n > 0n) {
    bytes.unshift(Number(n & 0xffn));
    n >>= 8n;
  }
  return bytes;
}

/** The bytes of a Deno KV key (the tuple codec Deno and KV Connect use). Throws TypeError for
 * a part of another type. */
export function encodeKey(key: readonly unknown[]): Uint8Array {
  const out: number[] = [];
  for (const part of key) {
    if (part instanceof Uint8Array) {
      out.push(0x01);
      pushEscaped(out, part);
    } else if (typeof part === "string") {
      out.push(0x02);
      pushEscaped(out, utf8.encode(part));
    } else if (typeof part === "bigint") {
      const mag = magnitude(part < 0n ? -part : part);
      if (mag.length > 255) throw new RangeError("bigint key part is too large");
      if (part >= 0n) {
        if (mag.length <= 8) out.push(0x14 + mag.length, ...mag);
        else out.push(0x1d, mag.length, ...mag);
      } else {
        const inv = mag.map((b) => b ^ 0xff);
        if (mag.length <= 8) out.push(0x14 - mag.length, ...inv);
        else out.push(0x0b, mag.length ^ 0xff, ...inv);
      }
    } else if (typeof part === "number") {
      const view = new DataView(new ArrayBuffer(8));
      view.setFloat64(0, part);
      let bits = view.getBigUint64(0);
      if (Number.isNaN(part)) bits = (bits >> 63n) ? 0xfff8000000000000n : 0x7ff8000000000000n;
      bits = (bits >> 63n) ? bits ^ 0xffffffffffffffffn : bits ^ 0x8000000000000000n;
      view.setBigUint64(0, bits);
      out.push(0x21, ...new Uint8Array(view.buffer));
    } else if (typeof part === "boolean") {
      out.push(part ? 0x27 : 0x26);
    } else {
      throw new TypeError(`Invalid key part: ${typeof part}`);
    }
  }
  return Uint8Array.from(out);
}

/** A protobuf message under construction (fields appended in the order written). */
class Proto {
  readonly bytes: number[] = [];

  #varint(n: bigint) {
    if (n < 0n) n += 1n << 64n; // int64: two's complement in 10 bytes
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n > 0n) b |= 0x80;
      this.bytes.push(b);
    } while (n > 0n);
  }

  varint(field: number, n: number | bigint): this {
    if (n === 0 || n === 0n) return this; // proto3 default: omitted
    this.#varint(BigInt(field << 3));
    this.#varint(BigInt(n));
    return this;
  }

  bytesField(field: number, data: Uint8Array | number[], always = false): this {
    if (data.length === 0 && !always) return this;
    this.#varint(BigInt((field << 3) | 2));
    this.#varint(BigInt(data.length));
    for (const b of data) this.bytes.push(b);
    return this;
  }

  message(field: number, m: Proto): this {
    return this.bytesField(field, m.bytes, true);
  }

  /** A packed repeated uint32 field. */
  packed(field: number, values: number[]): this {
    if (values.length === 0) return this;
    const inner = new Proto();
    for (const v of values) inner.#varint(BigInt(v));
    return this.bytesField(field, inner.bytes);
  }
}

// Wire enums (proto/datapath.proto): do not renumber.
const M_SET = 1, M_DELETE = 2, M_SUM = 3, M_MAX = 4, M_MIN = 5, M_SET_SUFFIX_VERSIONSTAMPED_KEY = 9;
const VE_V8 = 1, VE_LE64 = 2, VE_BYTES = 3;
const AW_SUCCESS = 1, AW_CHECK_FAILURE = 2, AW_WRITE_DISABLED = 5;

/** A value as Deno stores it: Uint8Array as bytes, Deno.KvU64 as 8 bytes LE, else V8. */
export function encodeValue(value: unknown): EncodedValue {
  if (value instanceof Uint8Array) return { data: value, encoding: VE_BYTES };
  if (typeof Deno !== "undefined" && typeof Deno.KvU64 === "function" && value instanceof Deno.KvU64) {
    const data = new Uint8Array(8);
    new DataView(data.buffer).setBigUint64(0, value.value, true);
    return { data, encoding: VE_LE64 };
  }
  return { data: serialize(value), encoding: VE_V8 };
}

/** A value in its stored form (see {@linkcode encodeValue}). */
export interface EncodedValue {
  data: Uint8Array;
  encoding: number;
}

/** One recorded part of an atomic operation, in Deno's terms, values already serialized (as
 * Deno serializes them when the method is called, not at commit). */
export type WriteOp =
  | { op: "check"; key: readonly unknown[]; versionstamp: string | null }
  | { op: "set"; key: readonly unknown[]; value: EncodedValue; expireIn?: number }
  | { op: "delete"; key: readonly unknown[] }
  | { op: "sum" | "min" | "max"; key: readonly unknown[]; value: EncodedValue }
  | {
    op: "enqueue";
    payload: Uint8Array;
    delay: number;
    keysIfUndelivered: readonly (readonly unknown[])[];
    backoffSchedule?: readonly number[];
  };

function hexBytes(hex: string): Uint8Array {
  if (!/^[0-9a-f]{20}$/.test(hex)) throw new TypeError("invalid versionstamp");
  return Uint8Array.from(hex.match(/../g)!.map((h) => parseInt(h, 16)));
}

/** The AtomicWrite protobuf of `ops` at time `now` (ms), as Deno would send it. */
export function encodeAtomicWrite(ops: readonly WriteOp[], now: number): Uint8Array<ArrayBuffer> {
  const w = new Proto();
  for (const o of ops) {
    if (o.op === "check") {
      w.message(
        1,
        new Proto().bytesField(1, encodeKey(o.key))
          .bytesField(2, o.versionstamp === null ? [] : hexBytes(o.versionstamp)),
      );
    }
  }
  for (const o of ops) {
    if (o.op === "set" || o.op === "sum" || o.op === "min" || o.op === "max" || o.op === "delete") {
      const m = new Proto();
      let key = o.key;
      let type = { set: M_SET, delete: M_DELETE, sum: M_SUM, min: M_MIN, max: M_MAX }[o.op];
      if (o.op === "set" && key.length > 0 && typeof key[key.length - 1] === "symbol") {
        key = key.slice(0, -1); // kv.commitVersionstamp() as the last part
        type = M_SET_SUFFIX_VERSIONSTAMPED_KEY;
      }
      m.bytesField(1, encodeKey(key));
      if (o.op !== "delete") m.message(2, new Proto().bytesField(1, o.value.data).varint(2, o.value.encoding));
      m.varint(3, type);
      if (o.op === "set" && o.expireIn !== undefined) m.varint(4, Math.max(now + o.expireIn, 1));
      w.message(2, m);
    }
  }
  for (const o of ops) {
    if (o.op === "enqueue") {
      const e = new Proto().bytesField(1, o.payload).varint(2, now + Math.trunc(o.delay));
      for (const k of o.keysIfUndelivered) e.bytesField(3, encodeKey(k), true);
      if (o.backoffSchedule) e.packed(4, o.backoffSchedule.map((n) => Math.trunc(n)));
      w.message(3, e);
    }
  }
  return Uint8Array.from(w.bytes);
}

/** Reads a varint at `at`; returns [value, next offset]. */
function readVarint(b: Uint8Array, at: number): [bigint, number] {
  let n = 0n;
  for (let shift = 0n; at < b.length; shift += 7n) {
    const byte = b[at++];
    n |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [n, at];
  }
  throw new Error("truncated varint in AtomicWriteOutput");
}

/** `{status, versionstamp}` of an AtomicWriteOutput (versionstamp as 20 hex digits). */
export function decodeAtomicWriteOutput(b: Uint8Array): { status: number; versionstamp: string | null } {
  let status = 0;
  let versionstamp: string | null = null;
  for (let at = 0; at < b.length;) {
    let tag: bigint, len: bigint;
    [tag, at] = readVarint(b, at);
    const wire = Number(tag & 7n), field = Number(tag >> 3n);
    if (wire === 0) {
      let v: bigint;
      [v, at] = readVarint(b, at);
      if (field === 1) status = Number(v);
    } else if (wire === 2) {
      [len, at] = readVarint(b, at);
      const data = b.subarray(at, at + Number(len));
      at += Number(len);
      if (field === 2) versionstamp = [...data].map((x) => x.toString(16).padStart(2, "0")).join("");
    } else if (wire === 5) {
      at += 4;
    } else if (wire === 1) {
      at += 8;
    } else {
      throw new Error(`unexpected wire type ${wire} in AtomicWriteOutput`);
    }
  }
  return { status, versionstamp };
}

interface Metadata {
  version: number;
  databaseId: string;
  endpoint: string;
  token: string;
  expiresAt: number;
}

const RETRIES = 5;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The data path of one KV Connect database, opened lazily. Safe to share within an isolate. */
export class KvConnectWriter {
  readonly #url: string;
  readonly #token: string | undefined;
  #metadata?: Promise<Metadata>;

  constructor(url: string, accessToken: string | undefined) {
    this.#url = url;
    this.#token = accessToken;
  }

  /**
   * Commits `ops` as one atomic write. Resolves to `{ok: true, versionstamp}`, or `{ok: false}`
   * when a check failed. Rejects as Deno does for a refusal (`KV Connect failed to call ...`).
   * Like Deno's client, network errors and 5xx are retried (so a write may apply twice when an
   * answer is lost).
   */
  async atomicWrite(ops: readonly WriteOp[]): Promise<Deno.KvCommitResult | Deno.KvCommitError> {
    const body = encodeAtomicWrite(ops, Date.now());
    let refreshed = false;
    for (let attempt = 1;; attempt++) {
      const md = await this.#currentMetadata();
      const url = `${md.endpoint}/atomic_write`;
      let res: Response;
      try {
        res = await fetch(url, {
          method: "POST",
          headers: {
            authorization: `Bearer ${md.token}`,
            "x-denokv-database-id": md.databaseId,
            "x-denokv-version": String(md.version),
            "content-type": "application/x-protobuf",
          },
          body,
        });
      } catch (e) {
        if (attempt >= RETRIES) throw e;
        await sleep(100 * 2 ** attempt);
        continue;
      }
      if (res.ok) {
        const out = decodeAtomicWriteOutput(new Uint8Array(await res.arrayBuffer()));
        if (out.status === AW_SUCCESS && out.versionstamp) return { ok: true, versionstamp: out.versionstamp };
        if (out.status === AW_CHECK_FAILURE) return { ok: false };
        if (out.status === AW_WRITE_DISABLED) throw new Error("Writes are disabled for this database");
        throw new Error("Unspecified write error");
      }
      const text = await res.text();
      if ((res.status === 401 || res.status === 403) && !refreshed) {
        refreshed = true; // as Deno: one new metadata exchange, then one retry
        this.#metadata = undefined;
        continue;
      }
      if (res.status >= 500 && attempt < RETRIES) {
        await sleep(100 * 2 ** attempt);
        continue;
      }
      throw new Error(`KV Connect failed to call '${url}' (status=${res.status} ${res.statusText}): ${text}`);
    }
  }

  #currentMetadata(): Promise<Metadata> {
    const now = Date.now();
    if (this.#metadata) {
      const cached = this.#metadata;
      return cached.then((md) => (md.expiresAt - 10_000 > now ? md : this.#exchange()), () => this.#exchange());
    }
    return this.#exchange();
  }

  #exchange(): Promise<Metadata> {
    this.#metadata = (async () => {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (this.#token) headers.authorization = `Bearer ${this.#token}`;
      const res = await fetch(this.#url, {
        method: "POST",
        headers,
        body: JSON.stringify({ supportedVersions: [2, 3] }),
      });
      const text = await res.text();
      if (res.status !== 200) {
        throw new Error(`Failed to fetch metadata (status=${res.status} ${res.statusText}): ${text}`);
      }
      const md = JSON.parse(text) as {
        version: number;
        databaseId: string;
        endpoints: { url: string; consistency: string }[];
        token: string;
        expiresAt: string;
      };
      const strong = md.endpoints?.find((e) => e.consistency === "strong");
      if (!strong) throw new Error("No strong consistency endpoint in the metadata");
      return {
        version: md.version,
        databaseId: md.databaseId,
        endpoint: new URL(strong.url, this.#url).href.replace(/\/+$/, ""),
        token: md.token,
        expiresAt: Date.parse(md.expiresAt),
      };
    })();
    return this.#metadata;
  }
}
