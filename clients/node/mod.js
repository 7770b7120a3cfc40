// @kvconnect/queue for Node: enqueue to and listen on kvconnect's queue API
// (docs/queues.md in the kvconnect repository) with the shape of Deno.Kv's queue methods.
//
//   const q = openQueue({ url: "http://127.0.0.1:4512" });   // token: DENO_KV_ACCESS_TOKEN
//   await q.enqueue({ order: 7 }, { delay: 1000 });
//   await q.listenQueue(async (msg) => { ... });               // until q.close()
//
// Delivery is at least once: a handler that returns acks its message, one that throws nacks
// it (the message comes back after the next step of its backoff schedule, and after the last
// step is written to its keysIfUndelivered keys). While a handler runs its lease is extended.
// Types: mod.d.ts.

import { fromBase64Url, keyToJSONText, toBase64Url } from "./keys.js";
import { deserialize, serialize } from "./v8.js";

export { keyToJSONText } from "./keys.js";

const MAX_LEASES_PER_REQUEST = 100;
const MAX_ERROR_TEXT = 4096;

/** A request the server refused (a 4xx other than 429, or a retried error that persisted). */
export class QueueError extends Error {
  /**
   * @param {number} status HTTP status
   * @param {string} message the server's error text
   * @param {string} [code] the server's error code name
   */
  constructor(status, message, code) {
    super(message);
    this.name = "QueueError";
    this.status = status;
    this.code = code;
  }
}

/**
 * Opens the queue of the database at `options.url` (no request is made yet).
 * @param {import("./mod.d.ts").OpenQueueOptions | string} options
 * @returns {Queue}
 */
export function openQueue(options) {
  return new Queue(typeof options === "string" ? { url: options } : options);
}

/** A client of one database's queue. */
export class Queue {
  #base;
  #token;
  #fetch;
  /** @type {Set<AbortController>} */
  #listeners = new Set();
  #closed = false;

  /** @param {import("./mod.d.ts").OpenQueueOptions} options */
  constructor(options) {
    if (!options?.url) throw new TypeError("openQueue: a url is required");
    this.#base = options.url.replace(/\/+$/, "");
    this.#token = options.accessToken ?? process.env.DENO_KV_ACCESS_TOKEN;
    const f = options.fetch ?? globalThis.fetch;
    this.#fetch = (/** @type {string} */ url, /** @type {RequestInit} */ init) => f(url, init);
  }

  /**
   * Enqueues `value` (anything V8 can serialize). Resolves to `{ ok: true, versionstamp }`.
   * Retries network errors, 5xx and 429 (a full queue) for about 30 s; a retried request may
   * enqueue the message twice. Rejects with a QueueError for other refusals.
   * @param {unknown} value
   * @param {import("./mod.d.ts").EnqueueOptions} [options]
   */
  async enqueue(value, options = {}) {
    if (this.#closed) throw new Error("already closed");
    const parts = [`"value":${JSON.stringify(v8Value(value))}`];
    if (options.delay !== undefined) {
      if (typeof options.delay !== "number" || !Number.isFinite(options.delay)) {
        throw new TypeError(`Delay must be a finite number: received ${options.delay}`);
      }
      parts.push(`"delay":${Math.trunc(options.delay)}`);
    }
    if (options.backoffSchedule !== undefined) {
      if (!Array.isArray(options.backoffSchedule) ||
        !options.backoffSchedule.every((n) => typeof n === "number" && Number.isFinite(n))) {
        throw new TypeError("Invalid backoffSchedule: an array of finite numbers is expected");
      }
      parts.push(`"backoff_schedule":${JSON.stringify(options.backoffSchedule)}`);
    }
    if (options.keysIfUndelivered !== undefined) {
      parts.push(`"keys_if_undelivered":[${options.keysIfUndelivered.map(keyToJSONText).join(",")}]`);
    }
    const body = `{"messages":[{${parts.join(",")}}]}`;
    const res = /** @type {{versionstamp: string}} */ (await this.#post("enqueue", body, { attempts: 10 }));
    return { ok: /** @type {const} */ (true), versionstamp: res.versionstamp };
  }

  /**
   * Delivers messages to `handler` until close() or `options.signal`. Resolves once the
   * listener stopped pulling and every running handler finished and was settled. Rejects with
   * a QueueError when the server refuses the listener (bad token, no such database); network
   * errors, 5xx and 429 are retried for as long as the listener is open.
   * @param {(value: unknown) => unknown} handler
   * @param {import("./mod.d.ts").ListenQueueOptions} [options]
   * @returns {Promise<void>}
   */
  listenQueue(handler, options = {}) {
    if (this.#closed) return Promise.reject(new Error("already closed"));
    const concurrency = options.concurrency ?? 10;
    const visibilityTimeout = options.visibilityTimeout ?? 30_000;
    const pullWait = options.pullWait ?? 5_000;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      return Promise.reject(new TypeError("concurrency must be a positive integer"));
    }
    if (!Number.isInteger(pullWait) || pullWait < 0 || pullWait > 20_000) {
      return Promise.reject(new TypeError("pullWait must be an integer from 0 to 20000"));
    }
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    if (options.signal?.aborted) stop.abort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    this.#listeners.add(stop);
    return this.#listen(handler, concurrency, visibilityTimeout, pullWait, stop).finally(() => {
      options.signal?.removeEventListener("abort", onAbort);
      this.#listeners.delete(stop);
    });
  }

  /** Closes every listener of this queue. A listener finishes the pull under way (at most
   * `pullWait`), runs and settles the handlers of what it holds, then its promise resolves. */
  close() {
    this.#closed = true;
    for (const stop of this.#listeners) stop.abort();
  }

  /**
   * @param {(value: unknown) => unknown} handler
   * @param {number} concurrency
   * @param {number} visibilityTimeout
   * @param {number} pullWait
   * @param {AbortController} stop
   */
  async #listen(handler, concurrency, visibilityTimeout, pullWait, stop) {
    /** @type {Map<string, Promise<void>>} lease -> handler and settle */
    const running = new Map();
    /** @type {(() => void) | undefined} */
    let wake;
    const wakeUp = () => {
      wake?.();
      wake = undefined;
    };
    stop.signal.addEventListener("abort", wakeUp, { once: true });
    /** @type {unknown} */
    let fatal;
    const failWith = (/** @type {unknown} */ e) => {
      fatal ??= e;
      stop.abort();
    };

    let extending = false;
    const ticker = setInterval(async () => {
      if (extending || running.size === 0) return;
      extending = true;
      try {
        const body = { visibility_timeout: visibilityTimeout };
        await this.#settle("extend", [...running.keys()], body).catch(() => {});
      } finally {
        extending = false;
      }
    }, Math.max(100, Math.floor(visibilityTimeout / 3)));

    const deliver = (/** @type {PulledMessage} */ m) => {
      const task = (async () => {
        /** @type {string | undefined} */
        let error;
        try {
          await handler(fromWire(m.value));
        } catch (e) {
          error = describeError(e);
        }
        try {
          if (error === undefined) await this.#settle("ack", [m.lease], {});
          else await this.#settle("nack", [m.lease], { error });
        } catch (e) {
          // An unsettled message comes back when its lease expires; a refusal is fatal.
          if (e instanceof QueueError && !isTemporary(e.status)) failWith(e);
        }
      })().finally(() => {
        running.delete(m.lease);
        wakeUp();
      });
      running.set(m.lease, task);
    };

    try {
      while (!stop.signal.aborted) {
        if (running.size >= concurrency) {
          await new Promise((resolve) => (wake = () => resolve(undefined)));
          continue;
        }
        const body = JSON.stringify({
          max_messages: Math.min(concurrency - running.size, MAX_LEASES_PER_REQUEST),
          visibility_timeout: visibilityTimeout,
          wait: pullWait,
          format: "v8",
        });
        /** @type {PulledMessage[]} */
        let messages;
        try {
          const res = await this.#post("pull", body, { signal: stop.signal, attempts: Infinity });
          messages = /** @type {{messages: PulledMessage[]}} */ (res).messages;
        } catch (e) {
          if (!stop.signal.aborted) failWith(e);
          break;
        }
        // Leased to this listener: handled even when it was closed meanwhile.
        for (const m of messages) deliver(m);
      }
    } finally {
      while (running.size > 0) await Promise.all(running.values());
      clearInterval(ticker);
    }
    if (fatal !== undefined) throw fatal;
  }

  /**
   * ack / nack / extend of `leases`, at most 100 per request; `extra` joins the body.
   * @param {string} op
   * @param {string[]} leases
   * @param {Record<string, unknown>} extra
   */
  async #settle(op, leases, extra) {
    for (let i = 0; i < leases.length; i += MAX_LEASES_PER_REQUEST) {
      const body = JSON.stringify({ leases: leases.slice(i, i + MAX_LEASES_PER_REQUEST), ...extra });
      await this.#post(op, body, { attempts: 5 });
    }
  }

  /**
   * POSTs `body` to BASE/queue/v1/`op`; retries what is temporary; returns the parsed answer.
   * @param {string} op
   * @param {string} body
   * @param {{signal?: AbortSignal, attempts: number}} options
   * @returns {Promise<unknown>}
   */
  async #post(op, body, { signal, attempts }) {
    /** @type {Record<string, string>} */
    const headers = { "content-type": "application/json" };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    for (let attempt = 1; ; attempt++) {
      let delay = backoff(attempt);
      try {
        // No signal on the fetch itself: a pull cut off after the server leased messages
        // would strand them until their leases expire (and cost each a backoff step).
        const res = await this.#fetch(`${this.#base}/queue/v1/${op}`, { method: "POST", headers, body });
        const text = await res.text();
        if (res.ok) return JSON.parse(text);
        const err = errorOf(res.status, text, op);
        if (!isTemporary(res.status) || attempt >= attempts) throw err;
        const after = Number(res.headers.get("retry-after"));
        if (after > 0) delay = Math.min(after * 1000, 30_000);
      } catch (e) {
        if (e instanceof QueueError || signal?.aborted || attempt >= attempts) throw e;
      }
      await sleep(delay, signal);
      if (signal?.aborted) throw new Error(`queue ${op}: closed while retrying`);
    }
  }
}

/** @typedef {{id: string, lease: string, value: {type: string, value: unknown}, attempt: number}} PulledMessage */

function v8Value(/** @type {unknown} */ value) {
  return { type: "v8", value: toBase64Url(serialize(value)) };
}

function fromWire(/** @type {{type: string, value: unknown}} */ v) {
  if (v?.type !== "v8" || typeof v.value !== "string") {
    throw new TypeError(`expected a {"type":"v8"} value from the server, got type ${v?.type}`);
  }
  return deserialize(fromBase64Url(v.value));
}

function describeError(/** @type {unknown} */ e) {
  const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return text.length > MAX_ERROR_TEXT ? text.slice(0, MAX_ERROR_TEXT) : text;
}

const isTemporary = (/** @type {number} */ status) => status === 429 || status >= 500;

/** @returns {QueueError} */
function errorOf(/** @type {number} */ status, /** @type {string} */ text, /** @type {string} */ op) {
  try {
    const body = JSON.parse(text);
    if (typeof body?.error === "string") return new QueueError(status, body.error, body.code);
  } catch {
    // not JSON
  }
  return new QueueError(status, `queue ${op}: HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ""}`);
}

/** 100 ms doubling to 5 s, with jitter. */
function backoff(/** @type {number} */ attempt) {
  const base = Math.min(100 * 2 ** (attempt - 1), 5_000);
  return base / 2 + (Math.random() * base) / 2;
}

/**
 * Resolves after `ms`, or at once when `signal` aborts.
 * @param {number} ms
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
