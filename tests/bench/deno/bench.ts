// One benchmark workload through the real Deno KV client (`Deno.openKv`).
//
// The target is a KV Connect server URL (http(s)://...) or a local SQLite file path; the
// same code runs against both, so the runner (../run.mjs) can compare them in one run.
// Every setting comes from a flag or, failing that, an environment variable:
//
//   --target URL|FILE     KV_URL               where to connect (required)
//   --workload NAME       KV_BENCH_WORKLOAD    set | get | getmany | transfer | list (required)
//   --concurrency N       KV_BENCH_CONCURRENCY operations in flight (default 1)
//   --duration S          KV_BENCH_DURATION    timed window in seconds (default 5)
//   --warmup S            KV_BENCH_WARMUP      untimed warm-up before it (default 1)
//   --keys N              KV_BENCH_KEYS        key space of set/get/getmany (default 10000)
//   --accounts N          KV_BENCH_ACCOUNTS    accounts of transfer (default 100)
//   --list-size N         KV_BENCH_LIST_SIZE   entries one list returns (default 100)
//   --getmany-keys N      KV_BENCH_GETMANY_KEYS keys one getMany reads (default 10, at most 10)
//   --verify 0|1          KV_BENCH_VERIFY      0: transfer skips reading the balances back
//                                              (for a server of canned answers, which keeps
//                                              no state; default 1)
//   --marks 0|1           KV_BENCH_MARKS       1: print "# window-start" on stdout when the
//                                              timed window opens and "# window-end" when its
//                                              last operation finished, so that a runner can
//                                              sample the servers' CPU over exactly the window
//   --ns TEXT             KV_BENCH_NS          key namespace (default: a random UUID)
//   DENO_KV_ACCESS_TOKEN                       the server's access token
//
// Workloads (every key lives under ["bench", <ns>, <workload>, ...]; values are strings of
// 100 characters, balances are numbers):
//   set       kv.set of a random key out of --keys.
//   get       kv.get of a random key out of --keys, all written before the warm-up; a miss
//             counts as an error.
//   getmany   kv.getMany of --getmany-keys random keys out of --keys (one read range each),
//             written like get's; a miss counts as an error.
//   transfer  a bank transfer between two different random accounts out of --accounts
//             (each starts with 1000), 1..10 but at most the balance: getMany of both,
//             then atomic().check(both).set(from, -amount).set(to, +amount).commit(),
//             retried with fresh reads on a failed check. One op = one committed transfer, its latency includes the
//             retries. Afterwards every balance is read back: the total must be unchanged
//             and no balance negative.
//   list      kv.list({prefix}) of --list-size entries written before the warm-up, read to
//             the end; any other count is an error.
//
// The workload runs with `concurrency` loops on one Deno.Kv handle, each starting its
// next operation when the last one finishes. Operations started during the warm-up are
// not counted; operations started in the timed window are, and `seconds` runs from the
// window's start until the last of them finished. On success the script prints one JSON
// line on stdout and exits 0:
//   {workload, concurrency, ops, seconds, ops_per_s, p50_ms, p99_ms, p999_ms, errors, extra}
// A failure (setup, lost money, no operation at all, too many errors, operations still
// pending 30 s after the window) exits 1 with the reason on stderr; the JSON line is
// still printed when the loops finished.

type Opts = {
  target: string;
  workload: string;
  concurrency: number;
  duration: number;
  warmup: number;
  keys: number;
  accounts: number;
  listSize: number;
  getManyKeys: number;
  verify: boolean;
  marks: boolean;
  ns: string;
};

const WORKLOADS = ["set", "get", "getmany", "transfer", "list"];
const INITIAL_BALANCE = 1000;
const VALUE = "v".repeat(100);
const MAX_ERROR_SAMPLES = 5;
const STALL_MS = 30_000;

function fail(msg: string): never {
  console.error(`bench: ${msg}`);
  Deno.exit(1);
}

function parseOptions(args: string[]): Opts {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (!a.startsWith("--")) fail(`unexpected argument ${a}`);
    const eq = a.indexOf("=");
    if (eq > 0) {
      flags.set(a.slice(2, eq), a.slice(eq + 1));
    } else {
      if (i + 1 >= args.length) fail(`${a} needs a value`);
      flags.set(a.slice(2), args[++i]);
    }
  }
  const known = [
    "target", "workload", "concurrency", "duration", "warmup", "keys", "accounts", "list-size", "getmany-keys",
    "verify", "marks", "ns",
  ];
  for (const k of flags.keys()) if (!known.includes(k)) fail(`unknown flag --${k}`);
  const get = (flag: string, env: string) => flags.get(flag) ?? Deno.env.get(env) ?? undefined;
  const num = (flag: string, env: string, def: number, min: number, integer = true) => {
    const raw = get(flag, env);
    if (raw === undefined || raw === "") return def;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
      fail(`--${flag} (${env}) must be ${integer ? "an integer" : "a number"} >= ${min}, got ${raw}`);
    }
    return n;
  };
  const target = get("target", "KV_URL");
  if (!target) fail("no target: pass --target URL|FILE or set KV_URL");
  const workload = get("workload", "KV_BENCH_WORKLOAD") ?? "";
  if (!WORKLOADS.includes(workload)) fail(`--workload must be one of ${WORKLOADS.join(", ")}, got "${workload}"`);
  const getManyKeys = num("getmany-keys", "KV_BENCH_GETMANY_KEYS", 10, 1);
  // Deno's client sends at most 10 read ranges in one snapshot read.
  if (getManyKeys > 10) fail(`--getmany-keys (KV_BENCH_GETMANY_KEYS) must be at most 10, got ${getManyKeys}`);
  return {
    target,
    workload,
    concurrency: num("concurrency", "KV_BENCH_CONCURRENCY", 1, 1),
    duration: num("duration", "KV_BENCH_DURATION", 5, 0.1, false),
    warmup: num("warmup", "KV_BENCH_WARMUP", 1, 0, false),
    keys: num("keys", "KV_BENCH_KEYS", 10000, 1),
    accounts: num("accounts", "KV_BENCH_ACCOUNTS", 100, 2),
    listSize: num("list-size", "KV_BENCH_LIST_SIZE", 100, 1),
    getManyKeys,
    verify: num("verify", "KV_BENCH_VERIFY", 1, 0) !== 0,
    marks: num("marks", "KV_BENCH_MARKS", 0, 0) !== 0,
    ns: get("ns", "KV_BENCH_NS") || crypto.randomUUID(),
  };
}

const randInt = (n: number) => Math.floor(Math.random() * n);

/** Nearest-rank percentile of an ascending array, in the array's unit. */
function percentile(sorted: Float64Array, p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

const round3 = (x: number | null) => (x === null ? null : Math.round(x * 1000) / 1000);

/** Writes `entries` in atomic batches, `inFlight` batches at a time. */
async function preload(kv: Deno.Kv, entries: [Deno.KvKey, unknown][], inFlight = 8) {
  const BATCH = 100;
  let next = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < entries.length) {
      const batch = entries.slice(next, next + BATCH);
      next += BATCH;
      const op = kv.atomic();
      for (const [key, value] of batch) op.set(key, value);
      const r = await op.commit();
      if (!r.ok) throw new Error("preload commit was refused");
    }
  }));
}

/** An operation of a workload; returns normally on success, throws on failure. */
type Op = () => Promise<void>;

type Workload = {
  setup: () => Promise<void>;
  op: Op;
  /** Runs after the timed window; returns extra fields and an error text if a check failed. */
  finish: () => Promise<{ extra: Record<string, unknown>; failure?: string }>;
};

function makeWorkload(kv: Deno.Kv, o: Opts): Workload {
  const base: Deno.KvKey = ["bench", o.ns, o.workload];
  const key = (...parts: Deno.KvKeyPart[]) => [...base, ...parts];
  const none = async () => ({ extra: {} });
  switch (o.workload) {
    case "set":
      return {
        setup: async () => {},
        op: async () => {
          await kv.set(key(randInt(o.keys)), VALUE);
        },
        finish: none,
      };
    case "get":
      return {
        setup: () => preload(kv, Array.from({ length: o.keys }, (_, i) => [key(i), VALUE] as [Deno.KvKey, unknown])),
        op: async () => {
          const e = await kv.get(key(randInt(o.keys)));
          if (e.versionstamp === null) throw new Error(`get ${Deno.inspect(e.key)}: missing`);
        },
        finish: async () => ({ extra: { keys: o.keys } }),
      };
    case "getmany":
      return {
        setup: () => preload(kv, Array.from({ length: o.keys }, (_, i) => [key(i), VALUE] as [Deno.KvKey, unknown])),
        op: async () => {
          const keys = Array.from({ length: o.getManyKeys }, () => key(randInt(o.keys)));
          for (const e of await kv.getMany(keys)) {
            if (e.versionstamp === null) throw new Error(`getMany ${Deno.inspect(e.key)}: missing`);
          }
        },
        finish: async () => ({ extra: { keys: o.keys, keys_per_op: o.getManyKeys } }),
      };
    case "list":
      return {
        setup: () => preload(kv, Array.from({ length: o.listSize }, (_, i) => [key(i), VALUE] as [Deno.KvKey, unknown])),
        op: async () => {
          let n = 0;
          for await (const _ of kv.list({ prefix: base })) n++;
          if (n !== o.listSize) throw new Error(`list returned ${n} entries, expected ${o.listSize}`);
        },
        finish: async () => ({ extra: { entries: o.listSize } }),
      };
    case "transfer": {
      const acct = (i: number) => key("acct", i);
      let conflicts = 0;
      return {
        setup: () =>
          preload(kv, Array.from({ length: o.accounts }, (_, i) => [acct(i), INITIAL_BALANCE] as [Deno.KvKey, unknown])),
        op: async () => {
          const from = randInt(o.accounts);
          let to = randInt(o.accounts - 1);
          if (to >= from) to++;
          const want = 1 + randInt(10);
          for (;;) {
            const [a, b] = await kv.getMany<[number, number]>([acct(from), acct(to)]);
            if (a.versionstamp === null || b.versionstamp === null) throw new Error("an account is missing");
            const amount = Math.min(want, a.value);
            const r = await kv.atomic()
              .check(a)
              .check(b)
              .set(acct(from), a.value - amount)
              .set(acct(to), b.value + amount)
              .commit();
            if (r.ok) return;
            conflicts++;
          }
        },
        finish: async () => {
          if (!o.verify) return { extra: { accounts: o.accounts, conflicts, total_check: "skipped (--verify 0)" } };
          const keys = Array.from({ length: o.accounts }, (_, i) => acct(i));
          let total = 0;
          let negative = 0;
          let missing = 0;
          for (let i = 0; i < keys.length; i += 10) {
            for (const e of await kv.getMany<number[]>(keys.slice(i, i + 10))) {
              if (e.versionstamp === null) missing++;
              else {
                total += e.value;
                if (e.value < 0) negative++;
              }
            }
          }
          const expected = o.accounts * INITIAL_BALANCE;
          const preserved = total === expected && negative === 0 && missing === 0;
          return {
            extra: {
              accounts: o.accounts,
              conflicts,
              total_expected: expected,
              total_after: total,
              negative_balances: negative,
              missing_accounts: missing,
              preserved,
            },
            failure: preserved
              ? undefined
              : `total balance not preserved: ${total} of ${expected}, ${negative} negative, ${missing} missing`,
          };
        },
      };
    }
    default:
      fail(`unknown workload ${o.workload}`);
  }
}

async function run(o: Opts) {
  const remote = /^https?:\/\//i.test(o.target);
  let kv: Deno.Kv;
  try {
    kv = await Deno.openKv(o.target);
  } catch (e) {
    fail(`Deno.openKv(${o.target}) failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  const w = makeWorkload(kv, o);
  try {
    await w.setup();
  } catch (e) {
    fail(`setup of ${o.workload} failed: ${e instanceof Error ? e.stack ?? e.message : String(e)}`);
  }

  const t0 = performance.now();
  const windowStart = t0 + o.warmup * 1000;
  const windowEnd = windowStart + o.duration * 1000;
  let latencies = new Float64Array(1 << 16);
  let ops = 0;
  let warmupOps = 0;
  let errors = 0;
  let lastEnd = windowStart;
  const samples: string[] = [];

  const loop = async () => {
    for (;;) {
      const start = performance.now();
      if (start >= windowEnd) return;
      const timed = start >= windowStart;
      let ok = true;
      try {
        await w.op();
      } catch (e) {
        ok = false;
        errors++;
        const m = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        if (samples.length < MAX_ERROR_SAMPLES && !samples.includes(m)) samples.push(m);
        // a dead target would otherwise spin through the window as fast as it fails
        if (errors > 1000 && errors > 10 * (ops + warmupOps)) throw new Error(`too many errors, e.g. ${samples[0]}`);
      }
      const end = performance.now();
      if (!timed) {
        if (ok) warmupOps++;
        continue;
      }
      if (end > lastEnd) lastEnd = end;
      if (!ok) continue;
      if (ops === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2);
        bigger.set(latencies);
        latencies = bigger;
      }
      latencies[ops++] = end - start;
    }
  };
  const startMark = o.marks
    ? setTimeout(() => console.log("# window-start"), Math.max(0, windowStart - performance.now()))
    : undefined;
  // Deno's KV Connect client retries a request to an unreachable server without end, so a
  // server that died mid-run would leave the loops waiting forever.
  const stall = setTimeout(() => {
    fail(`operations still pending ${STALL_MS / 1000} s after the timed window closed ` +
      `(${ops} done, ${errors} errors; is the target still up?)`);
  }, windowEnd - performance.now() + STALL_MS);
  let loopFailure: string | undefined;
  try {
    await Promise.all(Array.from({ length: o.concurrency }, loop));
  } catch (e) {
    loopFailure = e instanceof Error ? e.message : String(e);
  }
  clearTimeout(stall);
  clearTimeout(startMark);
  if (o.marks) console.log("# window-end");

  const seconds = (lastEnd - windowStart) / 1000;
  const sorted = latencies.slice(0, ops).sort();
  const fin = loopFailure ? { extra: {} } : await w.finish();
  kv.close();
  const result = {
    workload: o.workload,
    concurrency: o.concurrency,
    ops,
    seconds: round3(seconds),
    ops_per_s: seconds > 0 ? Math.round((ops / seconds) * 10) / 10 : 0,
    p50_ms: round3(percentile(sorted, 50)),
    p99_ms: round3(percentile(sorted, 99)),
    p999_ms: round3(percentile(sorted, 99.9)),
    errors,
    extra: {
      backend: remote ? "remote" : "local",
      warmup_s: o.warmup,
      warmup_ops: warmupOps,
      ...(samples.length ? { error_samples: samples } : {}),
      ...fin.extra,
    },
  };
  console.log(JSON.stringify(result));
  const failure = loopFailure ?? fin.failure ?? (ops === 0 ? "no operation completed in the timed window" : undefined);
  if (failure) fail(`${o.workload} at ${o.concurrency} in flight: ${failure}`);
}

const opts = parseOptions(Deno.args);
const watchdogMs = Number(Deno.env.get("KV_SCRIPT_TIMEOUT_MS") ?? "0");
if (watchdogMs > 0) {
  setTimeout(() => fail(`watchdog: still running after ${watchdogMs} ms`), watchdogMs);
}
await run(opts);
Deno.exit(0);
