// Records a history of concurrent single-key operations against a running kvconnect
// through the real npm client @deno/kv (HTTP/1.1 via Node's fetch), for checker.mjs.
//
// C clients (separate openKv() handles, each with one operation in flight at a time) pick
// one of K keys and an operation with a seeded PRNG: get / set / cas (and optionally delete)
// until T operations in total have been issued. Every written value is unique
// ("c<client>-<n>"). A cas is atomic().check({key, versionstamp: e}).set(key, v) where e is a
// versionstamp (or null = absent) this client saw recently for that key, so some succeed
// and some fail; it mostly targets the key of the client's previous operation. The client library's own retries are switched off (maxRetries: 0): a
// request that fails is recorded as pending (it may or may not have taken effect), never
// silently re-sent. Times are process.hrtime.bigint() just before the call and just after
// it resolved, so each recorded interval contains the server's real processing interval.
// With several URLs (nodes serving one database, e.g. on one PostgreSQL) the clients are
// dealt out over them in turn.
//
// CLI (writes the history as JSON; check it with `node checker.mjs FILE`):
//   node recorder.mjs --url http://127.0.0.1:4512 --token TOKEN [--out history.json]
//   node recorder.mjs --url http://127.0.0.1:4512,http://127.0.0.1:4513 --token TOKEN   (2 nodes)
//   KVCONNECT_BIN=../../build/kvconnect node recorder.mjs [--out history.json]   (own server)
//   options: --ops N (10000) --clients C (8) --keys K (3) --seed S (1) --delete P (0)
import path from "node:path";
import v8 from "node:v8";
import { fileURLToPath } from "node:url";
import { openKv } from "../e2e/node_modules/@deno/kv/esm/npm.js";
import { prng } from "../e2e/prng.mjs";

export { prng };

const codec = { encodeV8: v8.serialize, decodeV8: (b) => v8.deserialize(b) };

/**
 * Runs the workload and returns { history, stats, meta }.
 * Options: url, token (required); or urls [u0, u1, ...]: client c talks to urls[c % n]
 * (several nodes serving one database), its entries carry node: c % n;
 * ops (10000), clients (8), keys (3), seed (1),
 * mix {get, set, cas, delete} weights (default 0.5 / 0.25 / 0.25 / 0),
 * keyPrefix (default ["linearizability", <seed>, <time>]), opTimeoutMs (10000).
 */
export async function recordHistory(opts) {
  const {
    url,
    urls = [url],
    token,
    ops: total = 10_000,
    clients: nClients = 8,
    keys: nKeys = 3,
    seed = 1,
    opTimeoutMs = 10_000,
  } = opts;
  const mix = { get: 0.5, set: 0.25, cas: 0.25, delete: 0, ...(opts.mix ?? {}) };
  const weights = Object.entries(mix).filter(([, w]) => w > 0);
  const wsum = weights.reduce((s, [, w]) => s + w, 0);
  const keyPrefix = opts.keyPrefix ?? ["linearizability", seed, Date.now()];
  const keys = Array.from({ length: nKeys }, (_, i) => [...keyPrefix, `k${i}`]);
  const labels = keys.map((_, i) => `k${i}`);

  const handles = [];
  for (let c = 0; c < nClients; c++) {
    handles.push(await openKv(urls[c % urls.length], { accessToken: token, maxRetries: 0, ...codec }));
  }

  const history = [];
  const errors = [];
  let issued = 0;
  const started = performance.now();

  const withTimeout = (p) => {
    let timer;
    const t = new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`no answer within ${opTimeoutMs} ms`)), opTimeoutMs);
    });
    return Promise.race([p, t]).finally(() => clearTimeout(timer));
  };

  async function client(c) {
    const kv = handles[c];
    const rnd = prng((seed * 7919 + c * 104729 + 1) >>> 0);
    // recent[k]: versionstamps (null = absent) this client saw for key k, newest last
    const recent = keys.map(() => [null]);
    const saw = (k, vs) => {
      const r = recent[k];
      if (r[r.length - 1] !== vs) r.push(vs);
      if (r.length > 4) r.shift();
    };
    let n = 0;
    let lastKey = 0;
    while (issued < total) {
      issued++;
      let x = rnd() * wsum;
      let op = weights[weights.length - 1][0];
      for (const [name, w] of weights) {
        if (x < w) {
          op = name;
          break;
        }
        x -= w;
      }
      // A cas mostly goes to the key this client touched last (read-modify-write), so that
      // its expected versionstamp is fresh often enough to succeed now and then.
      const k = op === "cas" && rnd() < 0.7 ? lastKey : Math.floor(rnd() * nKeys);
      lastKey = k;
      const entry = { client: c, key: labels[k], op, args: [], invokeTime: 0n, returnTime: null, result: null };
      if (urls.length > 1) entry.node = c % urls.length;
      let run;
      switch (op) {
        case "get":
          run = async () => {
            const e = await kv.get(keys[k]);
            return e.versionstamp === null ? null : { value: e.value, versionstamp: e.versionstamp };
          };
          break;
        case "set": {
          const value = `c${c}-${n++}`;
          entry.args = [value];
          run = async () => {
            const r = await kv.set(keys[k], value);
            return { ok: r.ok, versionstamp: r.versionstamp };
          };
          break;
        }
        case "cas": {
          const value = `c${c}-${n++}`;
          const r = recent[k];
          const p = rnd();
          // mostly the newest stamp seen, sometimes an older one or "absent"
          const expected = p < 0.8 ? r[r.length - 1] : p < 0.9 ? r[Math.floor(rnd() * r.length)] : null;
          entry.args = [expected, value];
          run = async () => {
            const res = await kv.atomic().check({ key: keys[k], versionstamp: expected }).set(keys[k], value).commit();
            return res.ok ? { ok: true, versionstamp: res.versionstamp } : { ok: false };
          };
          break;
        }
        case "delete":
          run = async () => {
            const res = await kv.atomic().delete(keys[k]).commit();
            return { ok: res.ok, versionstamp: res.versionstamp };
          };
          break;
        default:
          throw new Error(`unknown op ${op}`);
      }
      entry.invokeTime = process.hrtime.bigint();
      try {
        const result = await withTimeout(run());
        entry.returnTime = process.hrtime.bigint();
        entry.result = result;
        if (op === "get") saw(k, result ? result.versionstamp : null);
        else if (result.ok) saw(k, op === "delete" ? null : result.versionstamp);
      } catch (e) {
        entry.returnTime = null; // pending: may or may not have taken effect
        entry.error = String(e?.message ?? e).slice(0, 300);
        errors.push({ client: c, op, error: entry.error });
      }
      history.push(entry);
    }
  }

  try {
    await Promise.all(handles.map((_, c) => client(c)));
  } finally {
    for (const kv of handles) {
      try {
        kv.close();
      } catch {
        // already closed
      }
    }
  }
  const durationMs = performance.now() - started;
  const meta = { seed, clients: nClients, keys: nKeys, ops: total, nodes: urls.length, durationMs, errors };
  return { history, stats: summarize(history), meta };
}

/** Counts per operation kind and outcome. */
export function summarize(history) {
  const s = { ops: history.length, get: 0, set: 0, cas: 0, casOk: 0, casFailed: 0, delete: 0, pending: 0, keys: new Set(), clients: new Set() };
  for (const e of history) {
    s[e.op] = (s[e.op] ?? 0) + 1;
    s.keys.add(typeof e.key === "string" ? e.key : JSON.stringify(e.key));
    s.clients.add(e.client);
    if (e.returnTime === null || e.returnTime === undefined) s.pending++;
    else if (e.op === "cas") {
      if (e.result.ok) s.casOk++;
      else s.casFailed++;
    }
  }
  return { ...s, keys: s.keys.size, clients: s.clients.size };
}

// ---------------------------------------------------------------------------
// CLI

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : dflt;
  };
  const num = (name, dflt) => Number(opt(name, dflt));
  let url = opt("--url");
  let token = opt("--token", process.env.DENO_KV_ACCESS_TOKEN);
  let server;
  let harness;
  if (!url) {
    harness = await import("../e2e/harness.mjs");
    server = await harness.startServer();
    url = server.url;
    token = server.token;
  }
  try {
    const { history, stats, meta } = await recordHistory({
      urls: url.split(","),
      token,
      ops: num("--ops", 10_000),
      clients: num("--clients", 8),
      keys: num("--keys", 3),
      seed: num("--seed", 1),
      mix: { delete: num("--delete", 0) },
    });
    const { historyToJson, checkHistory } = await import("./checker.mjs");
    const out = opt("--out");
    if (out) {
      const { writeFileSync } = await import("node:fs");
      writeFileSync(out, historyToJson({ meta, history }));
      console.log(`wrote ${history.length} ops to ${out}`);
    }
    console.log(JSON.stringify({ ...stats, durationMs: Math.round(meta.durationMs), errors: meta.errors.slice(0, 5) }));
    const res = checkHistory(history);
    console.log(`${res.result} (search visited ${res.stats.states} states in ${res.stats.ms.toFixed(0)} ms)`);
    if (res.failure) console.log(res.failure.text);
    process.exitCode = res.ok ? 0 : 1;
  } finally {
    if (server) await server.kill();
    if (harness) await harness.removeTempDirs();
  }
}
