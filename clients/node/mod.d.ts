// Types of @kvconnect/queue (mod.js).

/** A part of a Deno KV key. */
export type KvKeyPart = string | number | bigint | boolean | Uint8Array;
/** A Deno KV key. */
export type KvKey = readonly KvKeyPart[];

/** Where the queue is: the URL a client gives `Deno.openKv` / `@deno/kv`, and an access token. */
export interface OpenQueueOptions {
  /** `http(s)://HOST:PORT` or `http(s)://HOST:PORT/databases/NAME`. */
  url: string;
  /** Default: the environment variable DENO_KV_ACCESS_TOKEN. */
  accessToken?: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** Options of Queue.enqueue, as for `Deno.Kv.enqueue`. */
export interface EnqueueOptions {
  /** Milliseconds before the message is delivered (at most 30 days). */
  delay?: number;
  /** Keys the message is written to when every delivery attempt failed. */
  keysIfUndelivered?: KvKey[];
  /** Milliseconds between retries (default on the server: [100, 1000, 5000, 30000, 60000]). */
  backoffSchedule?: number[];
}

/** Options of Queue.listenQueue. */
export interface ListenQueueOptions {
  /** Handlers running at once (default 10). */
  concurrency?: number;
  /** Lease of a delivery in ms (default 30000); renewed every third of it while the handler runs. */
  visibilityTimeout?: number;
  /** Long-poll time of one pull in ms, 0..20000 (default 5000): how long close() may take. */
  pullWait?: number;
  /** Aborting it closes this listener as Queue.close does. */
  signal?: AbortSignal;
}

/** A request the server refused (a 4xx other than 429, or a retried error that persisted). */
export class QueueError extends Error {
  constructor(status: number, message: string, code?: string);
  /** HTTP status. */
  readonly status: number;
  /** The server's error code name. */
  readonly code?: string;
}

/** A client of one database's queue. */
export class Queue {
  constructor(options: OpenQueueOptions);
  /**
   * Enqueues `value` (anything V8 can serialize). Retries network errors, 5xx and 429 for about
   * 30 s (a retried request may enqueue the message twice); rejects with a QueueError otherwise.
   */
  enqueue(value: unknown, options?: EnqueueOptions): Promise<{ ok: true; versionstamp: string }>;
  /**
   * Delivers messages to `handler` until close() or `options.signal`; resolves once every running
   * handler finished and was settled; rejects with a QueueError when the server refuses it.
   */
  listenQueue(handler: (value: unknown) => unknown, options?: ListenQueueOptions): Promise<void>;
  /**
   * Closes every listener of this queue. A listener finishes the pull under way (at most
   * `pullWait`), runs and settles the handlers of what it holds, then its promise resolves.
   */
  close(): void;
}

/** Opens the queue of the database at `options.url` (no request is made yet). */
export function openQueue(options: OpenQueueOptions | string): Queue;

/** The KvKeyJSON text of `key` (what the queue API takes in keys_if_undelivered). */
export function keyToJSONText(key: KvKey): string;
