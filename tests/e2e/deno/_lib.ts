// Shared helpers for the kvconnect end-to-end Deno scripts.
//
// Every script reads the database location from the env var KV_URL:
//   * http(s)://...  -> KV Connect (remote) backend, i.e. the kvconnect server
//   * anything else  -> Deno's own local SQLite backend (used to check that the
//                       scripts themselves are correct)
// A script prints exactly one JSON summary line on stdout when every assertion
// held and exits 0; on failure it prints "FAIL [...]" plus details on stderr and
// exits 1 (2 on a watchdog timeout).

export const KV_URL: string = (() => {
  const v = Deno.env.get("KV_URL");
  if (!v) {
    console.error("FAIL: env KV_URL is not set (http://host:port or a file path)");
    Deno.exit(1);
  }
  return v;
})();

export const IS_REMOTE = /^https?:\/\//i.test(KV_URL);

/** Set to 1 by the remote run: expired keys must vanish (and notify watchers) promptly. */
export const EXPECT_PROMPT_EXPIRY = Deno.env.get("KV_EXPECT_PROMPT_EXPIRY") === "1";

export async function openKv(): Promise<Deno.Kv> {
  return await Deno.openKv(KV_URL);
}

/** A fresh key namespace so scripts can share one database without interfering. */
export function ns(name: string): Deno.KvKeyPart[] {
  return ["e2e", name, crypto.randomUUID()];
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------
// Step tracing and watchdog: a hanging call is reported with the step it hung in.

let currentStep = "(start)";
const stepsDone: string[] = [];

export function step(name: string) {
  if (currentStep !== "(start)") stepsDone.push(currentStep);
  currentStep = name;
  if (Deno.env.get("KV_TRACE") === "1") console.error(`[step] ${name}`);
}

// ---------------------------------------------------------------------------
// Assertions

export class AssertionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AssertionError";
  }
}

export function fmt(v: unknown): string {
  try {
    return Deno.inspect(v, { depth: 6, colors: false, strAbbreviateSize: 200, iterableLimit: 20 });
  } catch {
    return String(v);
  }
}

export function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new AssertionError(msg);
}

function sameTypedArray(a: ArrayBufferView, b: ArrayBufferView): boolean {
  if (a.constructor !== b.constructor) return false;
  if (a.byteLength !== b.byteLength) return false;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** Structural equality covering every type Deno KV can store. */
export function deepEqual(a: unknown, b: unknown, seen = new Map<unknown, unknown>()): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== typeof b) return false;
  if (typeof a !== "object" || a === null || b === null) return false;
  if (seen.get(a) === b) return true;
  seen.set(a, b);
  const ta = Object.prototype.toString.call(a);
  const tb = Object.prototype.toString.call(b);
  if (ta !== tb) return false;
  if (a instanceof Deno.KvU64 || b instanceof Deno.KvU64) {
    return a instanceof Deno.KvU64 && b instanceof Deno.KvU64 && a.value === b.value;
  }
  if (a instanceof Date) return Object.is((a as Date).getTime(), (b as Date).getTime());
  if (a instanceof RegExp) {
    return a.source === (b as RegExp).source && a.flags === (b as RegExp).flags;
  }
  if (ArrayBuffer.isView(a)) return ArrayBuffer.isView(b) && sameTypedArray(a, b);
  if (a instanceof ArrayBuffer) {
    return b instanceof ArrayBuffer && sameTypedArray(new Uint8Array(a), new Uint8Array(b));
  }
  if (a instanceof Map) {
    const bm = b as Map<unknown, unknown>;
    if (a.size !== bm.size) return false;
    const ae = [...a.entries()];
    const be = [...bm.entries()];
    return ae.every(([k, v], i) => deepEqual(k, be[i][0], seen) && deepEqual(v, be[i][1], seen));
  }
  if (a instanceof Set) {
    const bs = b as Set<unknown>;
    if (a.size !== bs.size) return false;
    const av = [...a];
    const bv = [...bs];
    return av.every((v, i) => deepEqual(v, bv[i], seen));
  }
  if (a instanceof Error) {
    const be = b as Error;
    if (a.name !== be.name || a.message !== be.message) return false;
  }
  if (Array.isArray(a)) {
    const bArr = b as unknown[];
    if (a.length !== bArr.length) return false;
    for (let i = 0; i < a.length; i++) {
      if ((i in a) !== (i in bArr)) return false; // holes must stay holes
      if (!deepEqual(a[i], bArr[i], seen)) return false;
    }
  }
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, k)) return false;
    if (!deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], seen)) return false;
  }
  // boxed primitives
  if (a instanceof Number || a instanceof String || a instanceof Boolean || a instanceof BigInt) {
    return Object.is(a.valueOf(), (b as { valueOf(): unknown }).valueOf());
  }
  return true;
}

export function assertEquals(actual: unknown, expected: unknown, msg: string) {
  if (!deepEqual(actual, expected)) {
    throw new AssertionError(`${msg}\n  expected: ${fmt(expected)}\n  actual:   ${fmt(actual)}`);
  }
}

export function assertVersionstamp(vs: unknown, msg: string): asserts vs is string {
  assert(
    typeof vs === "string" && /^[0-9a-f]{20}$/.test(vs),
    `${msg}: expected a 20-digit lowercase hex versionstamp, got ${fmt(vs)}`,
  );
}

export function errMessage(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

/** Expects `fn` to throw/reject; every string in `includes` must occur in the message. */
export async function assertRejects(
  fn: () => unknown,
  includes: (string | RegExp)[],
  msg: string,
): Promise<Error> {
  let result: unknown;
  try {
    result = await fn();
  } catch (e) {
    const m = errMessage(e);
    for (const inc of includes) {
      const ok = typeof inc === "string" ? m.includes(inc) : inc.test(m);
      assert(ok, `${msg}: error message should contain ${fmt(inc)}, got: ${m}`);
    }
    return e as Error;
  }
  throw new AssertionError(`${msg}: expected a rejection, but it resolved to ${fmt(result)}`);
}

/** Encoded size of a key in the FoundationDB-style tuple codec (§4 of the reference). */
export function encodedKeySize(key: Deno.KvKey): number {
  let n = 0;
  const enc = new TextEncoder();
  for (const part of key) {
    if (typeof part === "string" || part instanceof Uint8Array) {
      const bytes = typeof part === "string" ? enc.encode(part) : part;
      n += 2 + bytes.length + bytes.filter((b) => b === 0).length;
    } else if (typeof part === "number") {
      n += 9;
    } else if (typeof part === "boolean") {
      n += 1;
    } else if (typeof part === "bigint") {
      let mag = part < 0n ? -part : part;
      let len = 0;
      while (mag > 0n) {
        len++;
        mag >>= 8n;
      }
      n += len === 0 ? 1 : len <= 8 ? 1 + len : 2 + len;
    } else {
      throw new Error(`unsupported key part ${fmt(part)}`);
    }
  }
  return n;
}

export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Reads one watch frame, failing with `msg` after `ms` milliseconds. */
export async function readFrame<T>(
  reader: ReadableStreamDefaultReader<T>,
  ms: number,
  msg: string,
): Promise<T> {
  let timer: number | undefined;
  const timeout = new Promise<never>((_, rej) => {
    timer = setTimeout(() => rej(new AssertionError(`${msg}: no watch frame within ${ms} ms`)), ms);
  });
  try {
    const r = await Promise.race([reader.read(), timeout]);
    assert(!r.done, `${msg}: watch stream ended unexpectedly`);
    return r.value as T;
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves to "timeout" if no frame arrives within `ms`, else the frame. */
export async function maybeReadFrame<T>(
  pending: Promise<ReadableStreamReadResult<T>>,
  ms: number,
): Promise<ReadableStreamReadResult<T> | "timeout"> {
  let timer: number | undefined;
  const timeout = new Promise<"timeout">((res) => {
    timer = setTimeout(() => res("timeout"), ms);
  });
  try {
    return await Promise.race([pending, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------
// Script runner

export async function main(name: string, body: () => Promise<Record<string, unknown> | void>) {
  const timeoutMs = Number(Deno.env.get("KV_SCRIPT_TIMEOUT_MS") ?? "90000");
  const started = Date.now();
  const watchdog = setTimeout(() => {
    console.error(
      `FAIL [${name}] watchdog: still running after ${timeoutMs} ms, stuck in step "${currentStep}" ` +
        `(KV_URL=${KV_URL}; completed steps: ${stepsDone.join(", ") || "none"})`,
    );
    Deno.exit(2);
  }, timeoutMs);
  try {
    const extra = (await body()) ?? {};
    clearTimeout(watchdog);
    console.log(JSON.stringify({
      script: name,
      ok: true,
      backend: IS_REMOTE ? "remote" : "local",
      promptExpiry: EXPECT_PROMPT_EXPIRY,
      steps: stepsDone.length + (currentStep === "(start)" ? 0 : 1),
      ms: Date.now() - started,
      ...extra,
    }, (_k, v) => typeof v === "bigint" ? v.toString() : v));
    Deno.exit(0);
  } catch (e) {
    clearTimeout(watchdog);
    console.error(`FAIL [${name}] in step "${currentStep}" (KV_URL=${KV_URL}):`);
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    Deno.exit(1);
  }
}

/**
 * Deno's local SQLite backend answers concurrent writers on the same file from
 * several handles/processes with "database is locked" (SQLITE_BUSY, nothing
 * committed). Only for the local self-check run we retry those; against a server
 * every error is real.
 */
export async function retryLocalBusy<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0;; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (IS_REMOTE || attempt >= 200 || !/database is locked/i.test(errMessage(e))) throw e;
      await sleep(5 + Math.random() * 20);
    }
  }
}
