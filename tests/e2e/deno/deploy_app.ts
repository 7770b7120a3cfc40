// An app written as for Deno Deploy (no URL in its code: the database comes from
// DENO_KV_DEFAULT_PATH or DENO_KV_PATH_PREFIX, the token from DENO_KV_ACCESS_TOKEN) that uses
// Deno KV queues, plus the one line that routes them to kvconnect. Driven by
// deploy_queue.test.mjs, which also runs a copy without that line (Deno's own remote client
// refuses the first enqueue: the run fails).
//   APP_DB     the name given to Deno.openKv(name); unset: Deno.openKv()
//   APP_LOCAL  "1": also check that Deno.openKv(":memory:") in the same process keeps Deno's
//              own local queue
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
      case "plain":
        plain = m.value;
        break;
      default:
        errors.push(`unexpected message ${JSON.stringify(m)}`);
    }
  });
  let listenSettled = false;
  listening.then(() => (listenSettled = true), (e) => errors.push(`listenQueue rejected: ${e}`));

  step = "enqueue";
  const value = { when: new Date(1700000000000), big: 2n ** 70n, map: new Map([["a", [1, 2]]]), bytes: Uint8Array.of(1, 2) };
  const r = await kv.enqueue({ kind: "plain", run, value });
  if (r.ok !== true || !/^[0-9a-f]{20}$/.test(r.versionstamp)) fail(`enqueue answer ${JSON.stringify(r)}`);
  const sentAt = Date.now();
  await kv.enqueue({ kind: "delayed", run, sentAt }, { delay: 1500 });
  await kv.enqueue({ kind: "flaky", run }, { backoffSchedule: [200, 200, 200] });
  const undeliveredKey = ["deploy_app", run, "undelivered"];
  await kv.enqueue({ kind: "doomed", run }, { backoffSchedule: [100], keysIfUndelivered: [undeliveredKey] });

  // Deno's own option checks and texts still apply.
  step = "option checks";
  for (const [opts, text] of [
    [{ delay: -1 }, "Delay must be >= 0: received -1"],
    [{ backoffSchedule: [1, 2, 3, 4, 5, 6] }, "Invalid backoffSchedule, max 5 intervals allowed"],
  ] as const) {
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
  await until("flaky message handled on its third attempt", async () =>
    (await kv.get(["deploy_app", run, "flaky"])).value === 3);
  const gaps = flakyAttempts.slice(1).map((t, i) => t - flakyAttempts[i]);
  if (gaps.some((g) => g < 150)) fail(`retries came sooner than the 200 ms backoff: ${gaps}`);
  await until("keysIfUndelivered written after the last retry", async () =>
    (await kv.get(undeliveredKey)).value !== null);
  const dead = (await kv.get(undeliveredKey)).value as { kind: string; run: string };
  if (dead.kind !== "doomed" || dead.run !== run) fail(`undelivered key holds ${JSON.stringify(dead)}`);
  if (doomedAttempts.length !== 2) fail(`doomed message attempts: ${doomedAttempts.length}, want 2`);
  await until("delayed message", () => delayed !== undefined);
  if (delayed!.at - delayed!.sentAt < 1490) fail(`delayed message came after ${delayed!.at - delayed!.sentAt} ms`);

  step = "atomic enqueue keeps Deno's behaviour";
  let atomicError = "";
  try {
    await kv.atomic().set(["deploy_app", run, "atomic"], 1).enqueue({ kind: "never", run }).commit();
  } catch (e) {
    atomicError = String((e as Error).message);
  }
  if (!atomicError.includes("not supported in KV Connect")) fail(`atomic().enqueue: "${atomicError}"`);

  let local: Record<string, unknown> | undefined;
  if (Deno.env.get("APP_LOCAL") === "1") {
    step = "local :memory: database";
    const mem = await Deno.openKv(":memory:");
    const localGot: unknown[] = [];
    const localListening = mem.listenQueue((m) => {
      localGot.push(m);
    });
    await mem.enqueue({ kind: "local", run });
    await until("local message from Deno's own queue", () => localGot.length === 1, 10_000);
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
