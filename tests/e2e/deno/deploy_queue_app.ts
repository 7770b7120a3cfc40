// An app written as for Deno Deploy (no URL in its code: the database comes from
// DENO_KV_DEFAULT_PATH or DENO_KV_PATH_PREFIX, the token from DENO_KV_ACCESS_TOKEN) that uses
// Deno KV queues, plus the one line that routes them to kvconnect. Driven by
// deploy_queue.test.mjs, which also runs a copy without that line (Deno's own remote client
// refuses the first enqueue: the run fails).
//   APP_DB     the name given to Deno.openKv(name); unset: Deno.openKv()
//   APP_LOCAL  "1": also check that Deno.openKv(":memory:") in the same process keeps Deno's
//              own local queue (not with DENO_KV_PATH_PREFIX: Deno puts the prefix in front of
//              ":memory:" too)
// It checks enqueue with delay, retries along a backoffSchedule, keysIfUndelivered (and
// backoffSchedule []), kv.atomic() with an enqueue (one write, or nothing when a check fails),
// Deno's option texts, and that listenQueue resolves after kv.close().
// Prints one JSON line {"script":"deploy_app","ok":true,...} and exits 0, or FAIL ... and 1.
// Self-contained on purpose (no relative imports but the line below), so the test can copy it.
import "../../../clients/deno/deploy.ts";

const t0 = Date.now();
let step = "start";
const fail = (msg: string): never => {
  throw new Error(msg);
};
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const watchdog = setTimeout(() => {
  console.error(`FAIL [deploy_app] watchdog fired in step "${step}"`);
  Deno.exit(2);
}, Number(Deno.env.get("KV_SCRIPT_TIMEOUT_MS") ?? "60000"));

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) fail(`${what}: not within ${ms} ms`);
    await sleep(20);
  }
}

try {
  step = "open";
  const name = Deno.env.get("APP_DB");
  const kv = name === undefined ? await Deno.openKv() : await Deno.openKv(name);
  const run = crypto.randomUUID();
  await kv.set(["deploy_app", run, "hello"], "world");
  if ((await kv.get(["deploy_app", run, "hello"])).value !== "world") fail("set/get over KV Connect");

  // One handler for every kind of message, as an app has.
  const flakyAttempts: number[] = [];
  const doomedAttempts: number[] = [];
  let delayed: { sentAt: number; at: number } | undefined;
  let plain: unknown;
  let atomicAt: number | undefined;
  let noRetryAttempts = 0;
  const errors: string[] = [];
  step = "listenQueue";
  const listening = kv.listenQueue(async (msg) => {
    const m = msg as { kind: string; run: string; sentAt?: number; value?: unknown };
    if (m.run !== run) return; // another run's leftovers
    switch (m.kind) {
      case "delayed":
        delayed = { sentAt: m.sentAt!, at: Date.now() };
        break;
      case "flaky":
        flakyAttempts.push(Date.now());
        if (flakyAttempts.length <= 2) throw new Error(`flaky attempt ${flakyAttempts.length}`);
        await kv.set(["deploy_app", run, "flaky"], flakyAttempts.length);
        break;
      case "doomed":
        doomedAttempts.push(Date.now());
        throw new Error("doomed always fails");
      case "noRetry":
        noRetryAttempts++;
        throw new Error("no retry either");
      case "plain":
        plain = m.value;
        break;
      case "atomic":
        atomicAt = Date.now();
        break;
      case "refused":
        errors.push("the message of a refused atomic write was delivered");
        break;
      default:
        errors.push(`unexpected message ${JSON.stringify(m)}`);
    }
  });
  let listenSettled = false;
  listening.then(() => (listenSettled = true), (e) => errors.push(`listenQueue rejected: ${e}`));

  step = "enqueue";
  const value = {
    when: new Date(1700000000000),
    big: 2n ** 70n,
    map: new Map([["a", [1, 2]]]),
    bytes: Uint8Array.of(1, 2),
  };
  const r = await kv.enqueue({ kind: "plain", run, value });
  if (r.ok !== true || !/^[0-9a-f]{20}$/.test(r.versionstamp)) fail(`enqueue answer ${JSON.stringify(r)}`);
  const sentAt = Date.now();
  await kv.enqueue({ kind: "delayed", run, sentAt }, { delay: 1500 });
  await kv.enqueue({ kind: "flaky", run }, { backoffSchedule: [200, 200, 200] });
  const undeliveredKey = ["deploy_app", run, "undelivered"];
  await kv.enqueue({ kind: "doomed", run }, { backoffSchedule: [100], keysIfUndelivered: [undeliveredKey] });
  // backoffSchedule: [] means no retry at all in Deno: one attempt, then the key
  const noRetryKey = ["deploy_app", run, "noRetry"];
  await kv.enqueue({ kind: "noRetry", run }, { backoffSchedule: [], keysIfUndelivered: [noRetryKey] });

  // Deno's own option checks and texts still apply.
  step = "option checks";
  for (
    const [opts, text] of [
      [{ delay: -1 }, "Delay must be >= 0: received -1"],
      [{ backoffSchedule: [1, 2, 3, 4, 5, 6] }, "Invalid backoffSchedule, max 5 intervals allowed"],
    ] as const
  ) {
    let got = "";
    try {
      await kv.enqueue({ kind: "never", run }, opts);
    } catch (e) {
      got = String((e as Error).message);
    }
    if (got !== text) fail(`enqueue(${JSON.stringify(opts)}) rejected with "${got}", not "${text}"`);
  }

  step = "deliveries";
  await until("plain message", () => plain !== undefined);
  const shown = Deno.inspect(plain, { depth: 5 });
  if (shown !== Deno.inspect(value, { depth: 5 })) fail(`plain value came back as ${shown}`);
  await until(
    "flaky message handled on its third attempt",
    async () => (await kv.get(["deploy_app", run, "flaky"])).value === 3,
  );
  const gaps = flakyAttempts.slice(1).map((t, i) => t - flakyAttempts[i]);
  if (gaps.some((g) => g < 150)) fail(`retries came sooner than the 200 ms backoff: ${gaps}`);
  await until(
    "keysIfUndelivered written after the last retry",
    async () => (await kv.get(undeliveredKey)).value !== null,
  );
  const dead = (await kv.get(undeliveredKey)).value as { kind: string; run: string };
  if (dead.kind !== "doomed" || dead.run !== run) fail(`undelivered key holds ${JSON.stringify(dead)}`);
  if (doomedAttempts.length !== 2) fail(`doomed message attempts: ${doomedAttempts.length}, want 2`);
  await until("keysIfUndelivered of the message without retries", async () =>
    (await kv.get(noRetryKey)).value !== null);
  if (noRetryAttempts !== 1) fail(`message with backoffSchedule [] had ${noRetryAttempts} attempts, want 1`);
  await until("delayed message", () => delayed !== undefined);
  if (delayed!.at - delayed!.sentAt < 1490) fail(`delayed message came after ${delayed!.at - delayed!.sentAt} ms`);

  // kv.atomic() with an enqueue commits as one KV Connect write: all of it or nothing.
  step = "atomic enqueue";
  const keyParts = [
    1.5,
    -0,
    -1,
    NaN,
    -Infinity,
    0n,
    255n,
    -256n,
    2n ** 64n,
    -(2n ** 70n),
    true,
    false,
    Uint8Array.of(0, 1, 0xff, 0),
    "x\u0000y€",
  ];
  let op = kv.atomic().check({ key: ["deploy_app", run, "atomic"], versionstamp: null })
    .set(["deploy_app", run, "atomic"], "written")
    .sum(["deploy_app", run, "counter"], 5n)
    .set(["deploy_app", run, "bytes"], Uint8Array.of(9, 0, 8), { expireIn: 600_000 });
  keyParts.forEach((part, i) => (op = op.set(["deploy_app", run, "part", part], i)));
  const committed = await op.enqueue({ kind: "atomic", run }, { backoffSchedule: [100] }).commit();
  if (!committed.ok) fail("atomic write with an enqueue was refused");
  for (const [i, part] of keyParts.entries()) {
    const e = await kv.get(["deploy_app", run, "part", part]);
    if (e.value !== i || e.versionstamp !== committed.versionstamp) {
      fail(`key part ${Deno.inspect(part)}: ${Deno.inspect(e)}`);
    }
  }
  const counter = await kv.get<Deno.KvU64>(["deploy_app", run, "counter"]);
  if (!(counter.value instanceof Deno.KvU64) || counter.value.value !== 5n) fail(`counter: ${Deno.inspect(counter)}`);
  if (Deno.inspect((await kv.get(["deploy_app", run, "bytes"])).value) !== Deno.inspect(Uint8Array.of(9, 0, 8))) {
    fail("bytes value");
  }
  // a failed check: no mutation and no message
  const refused = await kv.atomic().check({ key: ["deploy_app", run, "atomic"], versionstamp: null })
    .set(["deploy_app", run, "refused"], 1).enqueue({ kind: "refused", run }).commit();
  if (refused.ok) fail("an atomic write whose check failed was committed");
  if ((await kv.get(["deploy_app", run, "refused"])).versionstamp !== null) fail("a refused write left a key");
  await until("message of the atomic write", () => atomicAt !== undefined);

  let local: Record<string, unknown> | undefined;
  if (Deno.env.get("APP_LOCAL") === "1") {
    step = "local :memory: database";
    const mem = await Deno.openKv(":memory:");
    const localGot: unknown[] = [];
    const localListening = mem.listenQueue((m) => {
      localGot.push(m);
    });
    await mem.enqueue({ kind: "local", run });
    const localAtomic = await mem.atomic().set(["k"], 1).enqueue({ kind: "local-atomic", run }).commit();
    if (!localAtomic.ok) fail("local atomic enqueue");
    await until("local messages from Deno's own queue", () => localGot.length === 2, 10_000);
    mem.close();
    await localListening;
    local = { got: localGot.length };
  }

  step = "close";
  const closeAt = Date.now();
  kv.close();
  await until("listenQueue resolves after kv.close()", () => listenSettled, 20_000);
  const closeMs = Date.now() - closeAt;
  let afterClose = "";
  try {
    await kv.enqueue({ kind: "never", run });
  } catch (e) {
    afterClose = (e as Error).name;
  }
  if (afterClose !== "BadResource") fail(`enqueue after close: "${afterClose}"`);
  let listenAfterClose = "";
  await kv.listenQueue(() => {}).catch((e) => (listenAfterClose = String(e.message)));
  if (listenAfterClose !== "Queue already closed") fail(`listenQueue after close: "${listenAfterClose}"`);
  if (errors.length > 0) fail(errors.join("; "));

  clearTimeout(watchdog);
  console.log(JSON.stringify({
    script: "deploy_app",
    ok: true,
    run,
    flakyAttempts: flakyAttempts.length,
    retryGapsMs: gaps,
    doomedAttempts: doomedAttempts.length,
    delayedAfterMs: delayed!.at - delayed!.sentAt,
    closeMs,
    local,
    totalMs: Date.now() - t0,
  }));
} catch (e) {
  console.error(`FAIL [deploy_app] in step "${step}": ${e instanceof Error ? e.stack : e}`);
  Deno.exit(1);
}
