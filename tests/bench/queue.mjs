#!/usr/bin/env node
// Queue benchmark: kvconnect's queue API (docs/queues.md) beside Deno's local backend doing the
// same work with kv.enqueue and kv.listenQueue, in one run.
//
//   KVCONNECT_BIN=build/kvconnect node tests/bench/queue.mjs [--messages 20000]
//       [--latency-messages 200] [--consumers 1,16] [--max-messages 100] [--json FILE] [--smoke]
//
// kvconnect (`kvconnect serve --sync full --rate-limit-rps 0`, a fresh data dir), driven from
// this Node process with fetch:
// * throughput, for each consumer count C: K messages enqueued through POST /queue/v1/enqueue
//   in batches of 1000 (timed: enqueue messages/s), then C consumer loops pull (max_messages M,
//   wait 1 s, visibility 30 s) and ack each batch until all K are acked: messages/s from the
//   first pull to the last ack's answer (the enqueue row shows the median over the runs). Every message must arrive (duplicates are counted) and
//   the admin counts must be zero afterwards.
// * latency, the queue idle: one consumer long-polls (max_messages 1, wait 20 s); messages are
//   enqueued one at a time with performance.now() in the payload, the next one only after the
//   previous one was acked and the consumer's next pull is waiting (plus 10 ms). Latency is
//   from before the enqueue request to the pull's answer in the consumer; 5 warm-up messages
//   are not counted.
// Deno's local backend (deno/queue_bench.ts, pinned Deno with --unstable-kv, a fresh SQLite file
// with Deno's defaults): the same K enqueued in atomic batches of 1000, then one listenQueue
// handler counts them (Deno has one listener per process and dispatches with its own
// concurrency), and the same idle latency measurement with kv.enqueue.
//
// Prints the machine and a markdown table side by side, with the issue's goals (delivery
// throughput at least the local backend's; idle p99 under 50 ms) and whether this run met
// them. No figure fails the run: the exit code is 1 only when something could not run or a
// message was lost. --smoke (tiny K) is the ctest `bench_queue_smoke`: it checks that both
// sides run and deliver every message, never the timings.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { makeTempDir, removeTempDirs, sleep, spawnDeno, startServer } from "../e2e/harness.mjs";
import {
  commandLine, fmtInt, fmtMs, log, machineInfo, median, numberOption, optionValues, printMachine,
} from "./lib.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DENO_SCRIPT = path.join(HERE, "deno", "queue_bench.ts");
const SERVER_ARGS = ["--sync", "full", "--rate-limit-rps", "0"];
const ENQUEUE_BATCH = 1000;       // Deno's and kvconnect's limit per atomic write / request
const THROUGHPUT_VISIBILITY_MS = 30_000;
const THROUGHPUT_WAIT_MS = 1000;
const LATENCY_WAIT_MS = 20_000;
const LATENCY_WARMUP = 5;
const LATENCY_GAP_MS = 10;
const P99_GOAL_MS = 50;
const REQUEST_TIMEOUT_MS = 60_000;

const USAGE = `usage: KVCONNECT_BIN=build/kvconnect node tests/bench/queue.mjs [options]

  --messages K          messages per throughput run (default 20000)
  --latency-messages L  messages of the idle latency measurement (default 200)
  --consumers LIST      kvconnect consumer counts, comma-separated (default 1,16)
  --max-messages M      max_messages of each pull in the throughput runs, 1..100 (default 100)
  --json FILE           also write the machine, every figure and the table to FILE
  --smoke               K=300, L=10, M=10: only checks that everything runs and arrives
  -h, --help            this text

Needs \`npm ci\` in tests/e2e first (the Deno binary and the harness come from there).`;

function parseOptions(argv) {
  const values = optionValues(argv, {
    messages: { type: "string" },
    "latency-messages": { type: "string" },
    consumers: { type: "string" },
    "max-messages": { type: "string" },
    json: { type: "string" },
    smoke: { type: "boolean" },
  });
  if (values.help) return { help: true };
  const smoke = Boolean(values.smoke);
  const consumers = (values.consumers ?? "1,16").split(",").map((s) => Number(s.trim()));
  if (!consumers.length || consumers.some((c) => !Number.isInteger(c) || c < 1)) {
    throw new Error(`--consumers must be positive integers, got ${values.consumers}`);
  }
  const maxMessages = numberOption(values, "max-messages", smoke ? 10 : 100, 1, true);
  if (maxMessages > 100) throw new Error("--max-messages must be at most 100");
  return {
    smoke,
    messages: numberOption(values, "messages", smoke ? 300 : 20000, 1, true),
    latencyMessages: numberOption(values, "latency-messages", smoke ? 10 : 200, 1, true),
    consumers,
    maxMessages,
    json: values.json,
  };
}

// ---------------------------------------------------------------------------
// kvconnect over HTTP

async function call(server, op, body, timeoutMs = REQUEST_TIMEOUT_MS) {
  const res = await fetch(`${server.url}${op}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${op}: ${res.status} ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

const value = (s) => ({ type: "string", value: s });

/** Nearest-rank percentile of an ascending array. */
function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
}

function latencyStats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { count: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: percentile(s, 100) };
}

/** Enqueues messages run:0 .. run:K-1 in batches; resolves the seconds it took. */
async function enqueueAll(server, run, k) {
  const t0 = performance.now();
  for (let i = 0; i < k; i += ENQUEUE_BATCH) {
    const messages = [];
    for (let j = i; j < Math.min(k, i + ENQUEUE_BATCH); j++) messages.push({ value: value(`${run}:${j}`) });
    const r = await call(server, "/queue/v1/enqueue", { messages });
    if (r.ok !== true) throw new Error(`enqueue answered ${JSON.stringify(r)}`);
  }
  return (performance.now() - t0) / 1000;
}

async function counts(server) {
  return await call(server, "/admin/v1/databases/default/queue");
}

async function throughputRun(server, opts, consumers, run) {
  const k = opts.messages;
  const enqueueS = await enqueueAll(server, run, k);
  const seen = new Uint8Array(k);
  let acked = 0;
  let duplicates = 0;
  let pulls = 0;
  let staleAcks = 0;
  let done = false;
  let lastAck = 0;
  const t0 = performance.now();
  const loop = async () => {
    while (!done) {
      const r = await call(server, "/queue/v1/pull", {
        max_messages: opts.maxMessages, visibility_timeout: THROUGHPUT_VISIBILITY_MS, wait: THROUGHPUT_WAIT_MS, format: "json",
      });
      pulls++;
      if (!r.messages.length) continue;
      const leases = [];
      for (const m of r.messages) {
        const [mrun, is] = m.value.value.split(":");
        const i = Number(is);
        if (mrun !== run) throw new Error(`a message of another run: ${m.value.value}`);
        if (seen[i]) duplicates++;
        seen[i] = 1;
        leases.push(m.lease);
      }
      const a = await call(server, "/queue/v1/ack", { leases });
      for (const res of a.results) {
        if (res.status === "ok") acked++;
        else staleAcks++;
      }
      if (acked >= k) {
        lastAck = performance.now();
        done = true;
      }
    }
  };
  await Promise.all(Array.from({ length: consumers }, loop));
  const seconds = (lastAck - t0) / 1000;
  const missing = seen.reduce((n, s) => n + (s ? 0 : 1), 0);
  const c = await counts(server);
  const left = c.ready + c.delayed + c.leased;
  return {
    consumers, messages: k, enqueue_s: enqueueS, enqueue_per_s: k / enqueueS, seconds,
    per_s: k / seconds, pulls, duplicates, stale_acks: staleAcks, missing, left,
    ok: missing === 0 && left === 0 && staleAcks === 0,
  };
}

async function latencyRun(server, opts) {
  const total = LATENCY_WARMUP + opts.latencyMessages;
  let waiting = null;  // resolves with the latency of the message in flight
  let pulling = null;  // resolves when the consumer's next pull was sent
  let stop = false;
  let pullSent;
  const consumer = (async () => {
    while (!stop) {
      const sent = new Promise((r) => (pullSent = r));
      pulling = sent;
      const p = call(server, "/queue/v1/pull", { max_messages: 1, wait: LATENCY_WAIT_MS, format: "json" }, LATENCY_WAIT_MS + REQUEST_TIMEOUT_MS);
      pullSent();
      const r = await p;
      const now = performance.now();
      if (!r.messages.length) continue;
      const m = r.messages[0];
      const ms = now - Number(m.value.value);
      await call(server, "/queue/v1/ack", { leases: [m.lease] });
      const w = waiting;
      waiting = null;
      w?.(ms);
    }
  })();
  const lat = [];
  const enq = [];
  for (let n = 0; n < total; n++) {
    await pulling;
    await sleep(LATENCY_GAP_MS);  // the pull is parked on the server
    const got = new Promise((r) => (waiting = r));
    const t0 = performance.now();
    await call(server, "/queue/v1/enqueue", { messages: [{ value: value(String(t0)) }] });
    const te = performance.now() - t0;
    const ms = await got;
    if (n >= LATENCY_WARMUP) {
      lat.push(ms);
      enq.push(te);
    }
  }
  stop = true;
  // The consumer's last pull ends with an empty answer when its wait runs out; enqueue one
  // more message to end it at once.
  waiting = () => {};
  await call(server, "/queue/v1/enqueue", { messages: [{ value: value(String(performance.now())) }] });
  await consumer;
  return { latency: latencyStats(lat), enqueue_ms: latencyStats(enq) };
}

async function measureKvconnect(opts) {
  const server = await startServer({ extraArgs: SERVER_ARGS });
  try {
    // Warm-up: the connections and the server's first queue transaction.
    await call(server, "/queue/v1/enqueue", { messages: [{ value: value("warm-up") }] });
    const w = await call(server, "/queue/v1/pull", { max_messages: 1, wait: 5000 });
    if (w.messages.length) await call(server, "/queue/v1/ack", { leases: [w.messages[0].lease] });
    const throughput = [];
    for (const c of opts.consumers) {
      log(`[kvconnect] ${opts.messages} messages, ${c} consumer(s), pull ${opts.maxMessages} + ack`);
      const r = await throughputRun(server, opts, c, `t${c}`);
      log(`[kvconnect]   enqueue ${fmtInt(r.enqueue_per_s)}/s, delivery ${fmtInt(r.per_s)}/s` +
        ` (${r.pulls} pulls, ${r.duplicates} duplicates, ${r.missing} missing)`);
      throughput.push(r);
    }
    log(`[kvconnect] idle latency, ${opts.latencyMessages} messages`);
    const latency = await latencyRun(server, opts);
    log(`[kvconnect]   p50 ${fmtMs(latency.latency.p50)} ms, p99 ${fmtMs(latency.latency.p99)} ms`);
    return { ok: throughput.every((r) => r.ok), throughput, ...latency };
  } catch (e) {
    log(`[kvconnect] FAILED: ${e.stack ?? e}\n--- server output ---\n${server.logTail(40)}`);
    return { ok: false, error: String(e.message ?? e) };
  } finally {
    await server.kill();
  }
}

async function measureDeno(opts) {
  const dir = await makeTempDir("kvconnect-bench-queue-");
  log(`[deno local] ${opts.messages} messages through listenQueue, then idle latency`);
  const timeoutMs = 600_000;
  const res = await spawnDeno(DENO_SCRIPT, {
    kvUrl: path.join(dir, "queue.sqlite"),
    env: {
      QB_MESSAGES: String(opts.messages),
      QB_LATENCY_MESSAGES: String(opts.latencyMessages),
      QB_LATENCY_WARMUP: String(LATENCY_WARMUP),
      QB_GAP_MS: String(LATENCY_GAP_MS),
      QB_ENQUEUE_BATCH: String(ENQUEUE_BATCH),
    },
    timeoutMs,
  }).done;
  const s = res.summary;
  if (res.code !== 0 || !s || s.ok !== true) {
    log(`[deno local] FAILED (exit ${res.code}${res.signal ? `, ${res.signal}` : ""})\n${res.stderr.slice(-3000)}`);
    return { ok: false, error: `exit ${res.code}`, summary: s };
  }
  log(`[deno local]   enqueue ${fmtInt(s.enqueue_per_s)}/s, delivery ${fmtInt(s.deliver_per_s)}/s, ` +
    `p50 ${fmtMs(s.latency.p50)} ms, p99 ${fmtMs(s.latency.p99)} ms`);
  return { ok: true, ...s };
}

// ---------------------------------------------------------------------------
// Table

function ratio(a, b) {
  return a && b ? `${(a / b).toFixed(2)}x` : "—";
}

function table(opts, kvc, deno) {
  const rows = [];
  const d = deno.ok ? deno : null;
  // kvconnect enqueued K messages before each consumer count: the median of those runs.
  const enq = median((kvc.throughput ?? []).map((r) => r.enqueue_per_s));
  rows.push([`enqueue, ${fmtInt(opts.messages)} messages in batches of ${ENQUEUE_BATCH} (messages/s)`,
    fmtInt(enq), fmtInt(d?.enqueue_per_s), ratio(enq, d?.enqueue_per_s), "—"]);
  for (const r of kvc.throughput ?? []) {
    const met = d ? (r.per_s >= d.deliver_per_s ? "met" : "not met") : "no baseline";
    rows.push([`delivery, ${r.consumers} consumer${r.consumers > 1 ? "s" : ""} (pull ${opts.maxMessages} + ack) vs. one listenQueue (messages/s)`,
      fmtInt(r.per_s), fmtInt(d?.deliver_per_s), ratio(r.per_s, d?.deliver_per_s), `≥ 1x (${met})`]);
  }
  const l = kvc.latency;
  rows.push(["idle enqueue → delivery p50 (ms)", fmtMs(l?.p50), fmtMs(d?.latency.p50), "—", "—"]);
  rows.push(["idle enqueue → delivery p99 (ms)", fmtMs(l?.p99), fmtMs(d?.latency.p99), "—",
    `≤ ${P99_GOAL_MS} ms (${l ? (l.p99 <= P99_GOAL_MS ? "met" : "not met") : "—"})`]);
  rows.push(["idle enqueue → delivery max (ms)", fmtMs(l?.max), fmtMs(d?.latency.max), "—", "—"]);
  rows.push(["enqueue of one message, round trip p50 (ms)", fmtMs(kvc.enqueue_ms?.p50), fmtMs(d?.enqueue_ms.p50), "—", "—"]);
  console.log("| measurement | kvconnect | Deno local | ratio | goal |");
  console.log("|---|---:|---:|---:|---|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
  console.log("");
  return rows;
}

async function main() {
  const { opts, exitCode } = commandLine(parseOptions, USAGE);
  if (!opts) return exitCode;
  const machine = machineInfo();
  printMachine(machine, "kvconnect queue benchmark");
  console.log(`- kvconnect: \`serve ${SERVER_ARGS.join(" ")}\`; Deno local: \`Deno.openKv(file)\` with Deno's defaults`);
  console.log(`- ${fmtInt(opts.messages)} messages per throughput run; ${opts.latencyMessages} idle latency samples ` +
    `(after ${LATENCY_WARMUP} warm-up messages)${opts.smoke ? "; **smoke run: the figures mean nothing**" : ""}\n`);
  let kvc;
  let deno;
  try {
    kvc = await measureKvconnect(opts);
    deno = await measureDeno(opts);
  } finally {
    await removeTempDirs();
  }
  const rows = table(opts, kvc, deno);
  const problems = [];
  if (!kvc.ok) problems.push(`kvconnect: ${kvc.error ?? JSON.stringify(kvc.throughput?.filter((r) => !r.ok))}`);
  if (!deno.ok) problems.push(`Deno local: ${deno.error}`);
  for (const r of kvc.throughput ?? []) {
    if (r.duplicates) console.log(`- note: kvconnect delivered ${r.duplicates} messages twice with ${r.consumers} consumers`);
  }
  if (deno.ok && deno.duplicates) console.log(`- note: Deno delivered ${deno.duplicates} messages twice`);
  if (opts.json) {
    fs.writeFileSync(opts.json, `${JSON.stringify({ machine, options: opts, kvconnect: kvc, deno_local: deno, rows }, null, 2)}\n`);
  }
  if (problems.length) {
    console.error(`queue benchmark failed:\n${problems.join("\n")}`);
    return 1;
  }
  return 0;
}

process.exitCode = await main();
