// Queues for apps written for Deno Deploy, with one added line:
//
//   import "jsr:@kvconnect/queue/deploy";        // or "./clients/deno/deploy.ts"
//   const kv = await Deno.openKv();              // DENO_KV_DEFAULT_PATH=https://kv.example.com
//   kv.listenQueue(async (msg) => { ... });      // now delivered by kvconnect's queue API
//   await kv.enqueue({ job: 1 }, { delay: 1000 });
//
// Deno's own client refuses `kv.enqueue` on a KV Connect database ("Enqueue operations are not
// supported in KV Connect") and its `kv.listenQueue` never fires (nor resolves after close).
// Importing this module wraps `Deno.openKv` to remember which database each `Deno.Kv` is (the
// path resolved exactly as Deno resolves it: DENO_KV_DEFAULT_PATH, DENO_KV_PATH_PREFIX) and
// replaces `enqueue`, `listenQueue` and `close` of `Deno.Kv.prototype`: for a database opened on
// an http(s) URL they go to kvconnect's queue API (docs/queues.md) through `openQueue` of
// mod.ts, with the token Deno used (DENO_KV_ACCESS_TOKEN at the time of `openKv`); for every
// other database (a file, ":memory:", no path) they are Deno's own methods, untouched.
//
// `kv.atomic()` of such a database records what it is given (after Deno's own checks) and,
// when it holds an enqueue, commits checks, mutations and enqueues as one KV Connect
// atomic_write (kv_connect.ts), which kvconnect stores in the same transaction; without an
// enqueue Deno's own commit runs. A `Deno.Kv` opened before this module was evaluated is not
// known to it and keeps Deno's methods.

import { encodeValue, KvConnectWriter, type WriteOp } from "./kv_connect.ts";
import { type EnqueueOptions, openQueue, type Queue } from "./mod.ts";
import { serialize } from "./v8.ts";

/** How `listenQueue` of a KV Connect database pulls (see `ListenQueueOptions` of mod.ts). */
export interface DeployQueueOptions {
  /** Handlers running at once per `listenQueue` (default 10). */
  concurrency?: number;
  /** Lease of a delivery in ms (default 30000), renewed while the handler runs. */
  visibilityTimeout?: number;
  /** Long-poll time of one pull in ms, 0..20000 (default 5000): how long close() may take. */
  pullWait?: number;
}

/** What this module knows of a `Deno.Kv` opened on a KV Connect URL. */
interface RemoteKv {
  /** The URL Deno opened (after DENO_KV_DEFAULT_PATH and DENO_KV_PATH_PREFIX). */
  url: string;
  /** BASE of the queue API for that URL. */
  base: string;
  token: string | undefined;
  queue?: Queue;
  /** KV Connect data path for atomic writes that carry enqueues. */
  writer?: KvConnectWriter;
  listeners: Set<Promise<void>>;
  closed: boolean;
}

/** The environment variables Deno reads in `Deno.openKv`. */
export interface KvEnv {
  DENO_KV_DEFAULT_PATH?: string;
  DENO_KV_PATH_PREFIX?: string;
}

/**
 * The path `Deno.openKv(path)` opens, as Deno 2.9 resolves it (ext/kv/dynamic.rs): without a
 * path, a non-empty DENO_KV_DEFAULT_PATH becomes the path; then, when there is a path and
 * DENO_KV_PATH_PREFIX is set, the prefix is put in front of it (of a name, of the default path
 * and of a full URL alike). `undefined`: no path (Deno then opens its default local database).
 */
export function resolveKvPath(path: string | undefined, env: KvEnv): string | undefined {
  let resolved = path;
  if (resolved === undefined && env.DENO_KV_DEFAULT_PATH) resolved = env.DENO_KV_DEFAULT_PATH;
  if (resolved !== undefined && env.DENO_KV_PATH_PREFIX !== undefined) {
    resolved = env.DENO_KV_PATH_PREFIX + resolved;
  }
  return resolved;
}

/** Whether Deno opens `path` over KV Connect (it tests these two prefixes, case-sensitively). */
export function isKvConnectPath(path: string | undefined): path is string {
  return path !== undefined && (path.startsWith("https://") || path.startsWith("http://"));
}

/**
 * The queue API's BASE (docs/queues.md) for a KV Connect URL given to `Deno.openKv`:
 *   http(s)://host                            -> http(s)://host (database "default")
 *   .../databases/NAME/connect, .../databases/NAME -> .../databases/NAME
 *   .../v2/databases/NAME/connect (Deno Deploy's shape), .../v2/databases/NAME -> .../databases/NAME
 * Any other path is taken as BASE itself. Query and fragment are dropped. Throws TypeError for
 * a string that is not an http(s) URL.
 */
export function queueBaseFor(kvUrl: string): string {
  const u = new URL(kvUrl);
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`not a KV Connect URL: ${kvUrl}`);
  }
  let path = u.pathname.replace(/\/+$/, "");
  const m = /^(.*?)(?:\/v2)?\/databases\/([^/]+)(?:\/connect)?$/.exec(path);
  if (m) path = `${m[1]}/databases/${m[2]}`;
  return `${u.origin}${path}`;
}

const INSTALLED = Symbol.for("kvconnect.deploy.installed");
const remotes = new WeakMap<Deno.Kv, RemoteKv>();
/** What `kv.atomic()` of a KV Connect database was given so far, in order. */
const atomics = new WeakMap<object, { remote: RemoteKv; ops: WriteOp[] }>();
let listenOptions: DeployQueueOptions = {};

/** Sets how `listenQueue` on KV Connect databases pulls from now on. */
export function configureQueues(options: DeployQueueOptions): void {
  listenOptions = { ...options };
}

/** The queue API BASE of `kv` when this module routes its queue calls, else undefined. */
export function queueBaseOf(kv: Deno.Kv): string | undefined {
  return remotes.get(kv)?.base;
}

/** Reads an environment variable without prompting: unset when env access is not granted. */
function readEnv(name: string): string | undefined {
  try {
    const state = Deno.permissions.querySync?.({ name: "env", variable: name }).state;
    if (state !== undefined && state !== "granted") return undefined;
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

/** Deno's checks of enqueue options (ext/kv/01_db.ts), with its texts. */
function validateEnqueueOptions(opts: EnqueueOptions | undefined): void {
  const delay = opts?.delay;
  if (delay !== undefined) {
    if (delay < 0) throw new TypeError(`Delay must be >= 0: received ${delay}`);
    if (delay > 30 * 24 * 60 * 60 * 1000) {
      throw new TypeError(`Delay cannot be greater than 30 days: received ${delay}`);
    }
    if (Number.isNaN(delay)) throw new TypeError("Delay cannot be NaN");
  }
  const schedule = opts?.backoffSchedule;
  if (schedule !== undefined) {
    if (schedule.length > 5) {
      throw new TypeError("Invalid backoffSchedule, max 5 intervals allowed");
    }
    for (let i = 0; i < schedule.length; i++) {
      const interval = schedule[i];
      if (interval < 0 || interval > 60 * 60 * 1000 || Number.isNaN(interval)) {
        throw new TypeError(`Invalid backoffSchedule, interval at index ${i} is invalid`);
      }
    }
  }
}

function queueOf(remote: RemoteKv): Queue {
  remote.queue ??= openQueue({ url: remote.base, accessToken: remote.token });
  return remote.queue;
}

function install(): void {
  const g = globalThis as Record<symbol, unknown>;
  if (g[INSTALLED]) return; // another copy of this module (another specifier) did it
  if (typeof Deno?.openKv !== "function" || typeof Deno.Kv !== "function") {
    // No Deno KV in this runtime (no --unstable-kv): nothing to route.
    return;
  }
  g[INSTALLED] = true;

  const originalOpenKv = Deno.openKv;
  const proto = Deno.Kv.prototype;
  const originalEnqueue = proto.enqueue;
  const originalListenQueue = proto.listenQueue;
  const originalClose = proto.close;
  const originalDispose = (proto as unknown as Record<symbol, () => void>)[Symbol.dispose];

  async function openKv(...args: [path?: string]): Promise<Deno.Kv> {
    const path = args[0];
    // Read before Deno does, so the token is the one Deno's own open used.
    const resolved = resolveKvPath(path, {
      DENO_KV_DEFAULT_PATH: readEnv("DENO_KV_DEFAULT_PATH"),
      DENO_KV_PATH_PREFIX: readEnv("DENO_KV_PATH_PREFIX"),
    });
    const token = readEnv("DENO_KV_ACCESS_TOKEN");
    const kv: Deno.Kv = await Reflect.apply(originalOpenKv, Deno, args);
    if (isKvConnectPath(resolved)) {
      remotes.set(kv, {
        url: resolved,
        base: queueBaseFor(resolved),
        token,
        listeners: new Set(),
        closed: false,
      });
    }
    return kv;
  }
  // Deno.openKv is a configurable getter (an unstable API): replace it with a plain value.
  Object.defineProperty(Deno, "openKv", {
    value: openKv,
    writable: true,
    enumerable: true,
    configurable: true,
  });

  Object.defineProperty(proto, "enqueue", {
    value: async function enqueue(this: Deno.Kv, ...args: [message: unknown, opts?: EnqueueOptions]) {
      const remote = remotes.get(this);
      if (!remote) return await Reflect.apply(originalEnqueue, this, args);
      const [message, opts] = args;
      if (remote.closed) throw new Deno.errors.BadResource("Bad resource ID");
      validateEnqueueOptions(opts);
      return await queueOf(remote).enqueue(message, {
        delay: opts?.delay,
        keysIfUndelivered: opts?.keysIfUndelivered,
        backoffSchedule: opts?.backoffSchedule,
      });
    },
    writable: true,
    configurable: true,
  });

  Object.defineProperty(proto, "listenQueue", {
    value: async function listenQueue(
      this: Deno.Kv,
      handler: (message: unknown) => Promise<void> | void,
    ): Promise<void> {
      const remote = remotes.get(this);
      if (!remote) return await Reflect.apply(originalListenQueue, this, [handler]);
      if (remote.closed) throw new Error("Queue already closed");
      const listening = queueOf(remote).listenQueue(async (message) => {
        try {
          await handler(message);
        } catch (e) {
          // Deno logs a failed handler this way; the message is retried per its backoff.
          console.error("Exception in queue handler", e);
          throw e;
        }
      }, { ...listenOptions });
      remote.listeners.add(listening);
      try {
        await listening;
      } finally {
        remote.listeners.delete(listening);
      }
    },
    writable: true,
    configurable: true,
  });

  installAtomic(proto);

  const stopQueue = (kv: Deno.Kv) => {
    const remote = remotes.get(kv);
    if (!remote || remote.closed) return;
    remote.closed = true;
    remote.queue?.close(); // each listenQueue resolves once its handlers settled
  };
  Object.defineProperty(proto, "close", {
    value: function close(this: Deno.Kv) {
      try {
        return Reflect.apply(originalClose, this, []);
      } finally {
        stopQueue(this);
      }
    },
    writable: true,
    configurable: true,
  });
  if (typeof originalDispose === "function") {
    Object.defineProperty(proto, Symbol.dispose, {
      value: function dispose(this: Deno.Kv) {
        try {
          return Reflect.apply(originalDispose, this, []);
        } finally {
          stopQueue(this);
        }
      },
      writable: true,
      configurable: true,
    });
  }
}

/**
 * Makes `kv.atomic()` of a KV Connect database record what it is given (after Deno's own method
 * checked it) and commit through kv_connect.ts when it holds an enqueue, so the checks, the
 * mutations and the enqueues are one KV Connect atomic write. Without an enqueue, Deno's own
 * commit runs.
 */
function installAtomic(kvProto: Deno.Kv): void {
  const AtomicOperation = (Deno as unknown as { AtomicOperation?: unknown }).AtomicOperation;
  if (typeof AtomicOperation !== "function") return;
  const opProto = AtomicOperation.prototype as Record<string, unknown>;
  const originalAtomic = kvProto.atomic;
  Object.defineProperty(kvProto, "atomic", {
    value: function atomic(this: Deno.Kv) {
      const op = Reflect.apply(originalAtomic, this, []);
      const remote = remotes.get(this);
      if (remote) atomics.set(op, { remote, ops: [] });
      return op;
    },
    writable: true,
    configurable: true,
  });

  type Key = readonly unknown[];
  const recorders: Record<string, (ops: WriteOp[], args: unknown[]) => void> = {
    check(ops, checks) {
      for (const c of checks as { key: Key; versionstamp: string | null }[]) {
        ops.push({ op: "check", key: [...c.key], versionstamp: c.versionstamp });
      }
    },
    mutate(ops, mutations) {
      for (const m of mutations as { type: string; key: Key; value?: unknown; expireIn?: number }[]) {
        if (m.type === "delete") ops.push({ op: "delete", key: [...m.key] });
        else if (m.type === "set") {
          const expireIn = typeof m.expireIn === "number" ? m.expireIn : undefined;
          ops.push({ op: "set", key: [...m.key], value: encodeValue(m.value), expireIn });
        } else {
          ops.push({ op: m.type as "sum" | "min" | "max", key: [...m.key], value: encodeValue(m.value) });
        }
      }
    },
    sum: (ops, [key, n]) =>
      ops.push({ op: "sum", key: [...(key as Key)], value: encodeValue(new Deno.KvU64(n as bigint)) }),
    min: (ops, [key, n]) =>
      ops.push({ op: "min", key: [...(key as Key)], value: encodeValue(new Deno.KvU64(n as bigint)) }),
    max: (ops, [key, n]) =>
      ops.push({ op: "max", key: [...(key as Key)], value: encodeValue(new Deno.KvU64(n as bigint)) }),
    set(ops, [key, value, options]) {
      const expireIn = (options as { expireIn?: number } | undefined)?.expireIn;
      ops.push({ op: "set", key: [...(key as Key)], value: encodeValue(value), expireIn });
    },
    delete: (ops, [key]) => ops.push({ op: "delete", key: [...(key as Key)] }),
    enqueue(ops, [message, opts]) {
      const o = opts as EnqueueOptions | undefined;
      ops.push({
        op: "enqueue",
        payload: serialize(message),
        delay: o?.delay ?? 0,
        keysIfUndelivered: (o?.keysIfUndelivered ?? []).map((k) => [...k]),
        backoffSchedule: o?.backoffSchedule ? [...o.backoffSchedule] : undefined,
      });
    },
  };
  for (const [name, record] of Object.entries(recorders)) {
    const original = opProto[name] as (...args: unknown[]) => unknown;
    if (typeof original !== "function") continue;
    Object.defineProperty(opProto, name, {
      value: function (this: object, ...args: unknown[]) {
        const result = Reflect.apply(original, this, args); // Deno's checks and texts first
        const rec = atomics.get(this);
        if (rec) record(rec.ops, args);
        return result;
      },
      writable: true,
      configurable: true,
    });
  }

  const originalCommit = opProto.commit as () => Promise<Deno.KvCommitResult | Deno.KvCommitError>;
  Object.defineProperty(opProto, "commit", {
    value: async function commit(this: object) {
      const rec = atomics.get(this);
      if (!rec || !rec.ops.some((o) => o.op === "enqueue")) return await Reflect.apply(originalCommit, this, []);
      if (rec.remote.closed) throw new Deno.errors.BadResource("Bad resource ID");
      rec.remote.writer ??= new KvConnectWriter(rec.remote.url, rec.remote.token);
      return await rec.remote.writer.atomicWrite(rec.ops);
    },
    writable: true,
    configurable: true,
  });
}

install();
