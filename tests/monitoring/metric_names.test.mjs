// deploy/monitoring/ against the built server: every metric name that the alert rules
// (alerts.yml) and the Grafana dashboard (kvconnect-dashboard.json) query must be a series a
// live /metrics exports, so no panel stays empty and no alert is silently dead because of a
// typo or a metric that was never built.
//
// Two servers make every series appear: one on a data directory with continuous backup
// (--backup-to) and queue traffic (a message dead-lettered, so kvconnect_queue_* and
// kvconnect_backup_* exist), a refused token (auth failures) and a rate-limited token; and one
// on PostgreSQL reading from a streaming standby (--postgres-read), the only place the node
// registry's kvconnect_nodes_live and kvconnect_replica_lag_seconds exist. Only `up` is exempt:
// Prometheus makes it. Names are read off sample lines, not `# TYPE` lines, so a declared but
// never exported family does not count.
//
// Also checked: the process_* metrics and kvconnect_build_info hold sane values, the
// dead-letter gauge follows a dead letter and its requeue, the dashboard shows what the
// issue asked for, and the name extractor itself (a negative control: a made-up name is
// reported missing).
//
// Run: KVCONNECT_BIN=build/kvconnect node --test tests/monitoring/metric_names.test.mjs
// (ctest monitoring_metrics). Needs python3 with PyYAML and PostgreSQL 15 (the test packages).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  kvconnectBin, makeTempDir, metricValue, removeTempDirs, startServer, waitFor,
} from "../e2e/harness.mjs";
import { dataPath, fixture, metadata, withH2 } from "../e2e/raw_client.mjs";
import { cleanupPg, startPg } from "../e2e/pg.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MONITORING = path.join(ROOT, "deploy/monitoring");
// Series Prometheus itself makes for every target.
const PROMETHEUS_OWN = new Set(["up"]);

// ---------------------------------------------------------------------------
// Metric names in PromQL

const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "bool",
  "and", "or", "unless", "offset", "inf", "nan", "atan2"]);
// Aggregation operators, which may come before `by (...)` instead of their `(`.
const AGGREGATIONS = new Set(["sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
  "count_values", "bottomk", "topk", "quantile"]);
// Keywords followed by a parenthesized list of label names.
const LABEL_LISTS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right"]);

/**
 * The metric names a PromQL expression selects. Strings, label matchers `{...}` and ranges
 * `[...]` are skipped; an identifier followed by `(` is a function or aggregation; label lists
 * after by/without/on/ignoring/group_* are skipped. Grafana's `label_values(SELECTOR, LABEL)`
 * counts as SELECTOR. Handles what our files use, not every corner of PromQL (no
 * `{__name__=...}` selectors).
 */
export function metricNames(expr) {
  const lv = /^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/s.exec(expr);
  if (lv) expr = lv[1];
  else if (/^\s*label_values\(/.test(expr)) return [];
  const names = new Set();
  let i = 0;
  const n = expr.length;
  const skipSpace = (j) => {
    while (j < n && /\s/.test(expr[j])) j++;
    return j;
  };
  const skipQuoted = (j) => {
    const q = expr[j];
    for (j++; j < n && expr[j] !== q; j++) if (expr[j] === "\\") j++;
    return j + 1;
  };
  const skipBalanced = (j, open, close) => {
    let depth = 0;
    for (; j < n; j++) {
      if (expr[j] === '"' || expr[j] === "'" || expr[j] === "`") {
        j = skipQuoted(j) - 1;
      } else if (expr[j] === open) {
        depth++;
      } else if (expr[j] === close && --depth === 0) {
        return j + 1;
      }
    }
    return n;
  };
  while (i < n) {
    const c = expr[i];
    if (c === '"' || c === "'" || c === "`") {
      i = skipQuoted(i);
    } else if (c === "{") {
      i = skipBalanced(i, "{", "}");
    } else if (c === "[") {
      i = skipBalanced(i, "[", "]");
    } else if (/[0-9.]/.test(c)) {
      // A number or a duration (0.99, 5m, 1e3): not a name.
      while (i < n && /[0-9a-zA-Z_.]/.test(expr[i])) i++;
    } else if (/[a-zA-Z_:]/.test(c)) {
      let j = i;
      while (j < n && /[a-zA-Z0-9_:]/.test(expr[j])) j++;
      const word = expr.slice(i, j);
      const next = skipSpace(j);
      if (LABEL_LISTS.has(word.toLowerCase()) && expr[next] === "(") {
        i = skipBalanced(next, "(", ")");
      } else if (KEYWORDS.has(word.toLowerCase()) || AGGREGATIONS.has(word) || expr[next] === "(") {
        i = j;
      } else {
        names.add(word);
        i = j;
      }
    } else {
      i++;
    }
  }
  return [...names];
}

/** Every `expr` of the rule files' rules, as {where, expr}. */
function ruleExprs(file) {
  const r = spawnSync("python3", ["-c",
    "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)", file],
  { encoding: "utf8" });
  if (r.status !== 0) {
    throw new Error(`python3 with PyYAML is needed (Debian: python3-yaml) to read ${file}: ${r.stderr || r.error}`);
  }
  const doc = JSON.parse(r.stdout);
  const out = [];
  for (const g of doc.groups) {
    for (const rule of g.rules) out.push({ where: `${path.basename(file)}: ${rule.alert ?? rule.record}`, expr: rule.expr });
  }
  return out;
}

/** Every query of the dashboard: panel targets and templating variables. */
function dashboardExprs(dash) {
  const out = [];
  const walk = (panels) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) {
        if (t.expr) out.push({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr });
      }
      walk(p.panels);
    }
  };
  walk(dash.panels);
  for (const v of dash.templating?.list ?? []) {
    if (v.type !== "query") continue;
    const q = typeof v.query === "string" ? v.query : v.query?.query;
    if (q) out.push({ where: `variable $${v.name}`, expr: q });
  }
  return out;
}

/** The names of the series a /metrics text holds (sample lines only). */
function exportedNames(text) {
  const names = new Set();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (m) names.add(m[1]);
  }
  return names;
}

/** Which names of `exprs` are not in `exported`: ["where: name", ...]. */
function missingNames(exprs, exported) {
  const missing = [];
  for (const { where, expr } of exprs) {
    const names = metricNames(expr);
    if (names.length === 0) missing.push(`${where}: no metric name found in ${JSON.stringify(expr)}`);
    for (const name of names) {
      if (!exported.has(name) && !PROMETHEUS_OWN.has(name)) missing.push(`${where}: ${name}`);
    }
  }
  return missing;
}

// ---------------------------------------------------------------------------
// Live servers

async function scrape(server) {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } });
  const text = await res.text();
  assert.equal(res.status, 200, text.slice(0, 200));
  return text;
}

async function post(server, urlPath, body, token = server.token) {
  const res = await fetch(`${server.url}${urlPath}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: text.startsWith("{") ? JSON.parse(text) : undefined };
}

/** Enqueues one message without retries, leases it and fails it: one dead letter. */
async function makeDeadLetter(server) {
  const enq = await post(server, "/queue/v1/enqueue",
    { messages: [{ value: { type: "string", value: "doomed" }, backoff_schedule: [] }] });
  assert.equal(enq.status, 200, enq.text);
  const pulled = await post(server, "/queue/v1/pull", { max_messages: 1, wait: 5000 });
  assert.equal(pulled.status, 200, pulled.text);
  assert.equal(pulled.json.messages.length, 1, pulled.text);
  const nack = await post(server, "/queue/v1/nack", { leases: [pulled.json.messages[0].lease], error: "test" });
  assert.equal(nack.status, 200, nack.text);
  assert.equal(nack.json.results[0].status, "dead", nack.text);
}

describe("deploy/monitoring against a live /metrics", () => {
  let sqlite;
  let pg;
  let pgServer;
  let exported;
  let sqliteText;

  before(async () => {
    const backupDir = await makeTempDir("kvconnect-monitoring-backup-");
    sqlite = await startServer({
      extraArgs: ["--backup-to", backupDir, "--backup-interval-ms", "100",
        "--metrics-stats-interval-ms", "200"],
    });
    // Writes (commit histograms, backup shipping), a dead letter, a refused token, and a token
    // of 1 request per second asked 20 times at once.
    const set = await post(sqlite, "/admin/v1/databases/default/entries/set",
      { key: [{ type: "string", value: "monitoring" }], value: { type: "string", value: "x" } });
    assert.ok(set.status === 200 || set.status === 201, set.text);
    await makeDeadLetter(sqlite);
    const refused = await post(sqlite, "/", { supportedVersions: [1, 2, 3] }, "not-a-valid-token-at-all");
    assert.equal(refused.status, 401, refused.text);
    const created = await post(sqlite, "/admin/v1/tokens", { database: "default", scope: "read", rate_limit: 1 });
    assert.ok(created.status === 200 || created.status === 201, created.text);
    const limited = created.json.token;
    await withH2(sqlite.url, {}, async (h2) => {
      const m = await waitFor(async () => {
        const r = await metadata(h2, limited);
        return r.status === 200 && r;
      }, { timeoutMs: 10_000, intervalMs: 150, what: "the new token to be accepted" });
      const answers = await Promise.all(Array.from({ length: 20 },
        () => dataPath(h2, m.json, "snapshot_read", fixture("snapshot_read_get"))));
      assert.ok(answers.some((a) => a.status === 503), "some requests were rate-limited");
    });
    // The backup shipped, the sizes were counted: every series is there.
    sqliteText = await waitFor(async () => {
      const text = await scrape(sqlite);
      const names = exportedNames(text);
      for (const want of ["kvconnect_backup_lag_seconds", "kvconnect_database_keys",
        "kvconnect_backup_last_snapshot_timestamp_seconds", "kvconnect_rate_limited_total"]) {
        if (!names.has(want)) return false;
      }
      return text;
    }, { timeoutMs: 20_000, intervalMs: 200, what: "backup and size series in /metrics" });

    // Two nodes' worth of registry on PostgreSQL: one node reading from a standby.
    pg = await startPg({ standby: true, fsync: false });
    pgServer = await startServer({
      extraArgs: ["--postgres", pg.conninfo, "--postgres-read", pg.standby.conninfo,
        "--node-heartbeat-ms", "200"],
    });
    const pgText = await waitFor(async () => {
      const text = await scrape(pgServer);
      const names = exportedNames(text);
      return names.has("kvconnect_nodes_live") && names.has("kvconnect_replica_lag_seconds") && text;
    }, { timeoutMs: 30_000, intervalMs: 200, what: "node registry series on the PostgreSQL node" });
    exported = new Set([...exportedNames(sqliteText), ...exportedNames(pgText)]);
  });

  after(async () => {
    await sqlite?.kill();
    await pgServer?.kill();
    await cleanupPg();
    await removeTempDirs();
  });

  test("the name extractor finds names and reports a made-up one (negative control)", () => {
    assert.deepEqual(metricNames(
      'histogram_quantile(0.99, sum by (route, le) (rate(kvconnect_http_request_duration_seconds_bucket{job="$job", code=~"5.."}[$__rate_interval])))'),
    ["kvconnect_http_request_duration_seconds_bucket"]);
    assert.deepEqual(metricNames("(process_open_fds / process_max_fds > 0.8) and on (job, instance) kvconnect_build_info").sort(),
      ["kvconnect_build_info", "process_max_fds", "process_open_fds"]);
    assert.deepEqual(metricNames('time() - max by (database) (x_seconds offset 5m) > 1e3'), ["x_seconds"]);
    assert.deepEqual(metricNames("sum(rate(a_total[5m])) by (job) / ignoring (code) group_left b"), ["a_total", "b"]);
    assert.deepEqual(metricNames('label_values(kvconnect_build_info{job="$job"}, instance)'), ["kvconnect_build_info"]);
    assert.deepEqual(missingNames([{ where: "control", expr: "rate(kvconnect_no_such_metric_total[5m])" }], exported),
      ["control: kvconnect_no_such_metric_total"]);
  });

  test("every metric the alert rules use is exported", () => {
    const exprs = ruleExprs(path.join(MONITORING, "alerts.yml"));
    assert.ok(exprs.length >= 10, `only ${exprs.length} rules`);
    assert.deepEqual(missingNames(exprs, exported), []);
  });

  test("every metric the dashboard queries is exported", () => {
    const dash = JSON.parse(fs.readFileSync(path.join(MONITORING, "kvconnect-dashboard.json"), "utf8"));
    const exprs = dashboardExprs(dash);
    assert.ok(exprs.length >= 30, `only ${exprs.length} queries`);
    assert.deepEqual(missingNames(exprs, exported), []);
  });

  test("the dashboard and the rules cover what operators asked for", () => {
    const dash = JSON.parse(fs.readFileSync(path.join(MONITORING, "kvconnect-dashboard.json"), "utf8"));
    const used = new Set(dashboardExprs(dash).flatMap((e) => metricNames(e.expr)));
    for (const name of [
      "kvconnect_http_requests_total", "kvconnect_http_request_duration_seconds_bucket",
      "kvconnect_commit_transaction_seconds_bucket", "kvconnect_commit_sync_seconds_bucket",
      "kvconnect_database_keys", "kvconnect_database_bytes", "kvconnect_watch_subscriptions",
      "kvconnect_queue_undelivered", "kvconnect_queue_dead_letters", "kvconnect_backup_lag_seconds",
      "kvconnect_nodes_live", "process_resident_memory_bytes", "process_cpu_seconds_total",
    ]) {
      assert.ok(used.has(name), `the dashboard shows ${name}`);
    }
    const rules = new Set(ruleExprs(path.join(MONITORING, "alerts.yml")).flatMap((e) => metricNames(e.expr)));
    for (const name of [
      "kvconnect_database_writable", "kvconnect_backup_lag_seconds", "kvconnect_http_requests_total",
      "kvconnect_commit_transaction_seconds_bucket", "kvconnect_queue_dead_letters",
      "kvconnect_rate_limited_total", "kvconnect_replica_lag_seconds", "kvconnect_nodes_live",
    ]) {
      assert.ok(rules.has(name), `an alert watches ${name}`);
    }
  });

  test("process_* and kvconnect_build_info hold this process's figures", async () => {
    const text = await scrape(sqlite);
    const value = (name) => {
      const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
      assert.ok(m, `${name} in /metrics`);
      return Number(m[1]);
    };
    const now = Date.now() / 1000;
    const start = value("process_start_time_seconds");
    assert.ok(start <= now + 1 && start > now - 3600, `process_start_time_seconds ${start} is this run's start (now ${now})`);
    assert.ok(value("process_cpu_seconds_total") > 0);
    assert.ok(value("process_resident_memory_bytes") > 1 << 20, "more than 1 MiB resident");
    assert.ok(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    const open = value("process_open_fds");
    assert.ok(open >= 3 && open <= value("process_max_fds"), `open fds ${open}`);
    // The same descriptors the kernel lists for the server's pid.
    const listed = fs.readdirSync(`/proc/${sqlite.proc.pid}/fd`).length;
    assert.ok(Math.abs(open - listed) <= 10, `process_open_fds ${open} vs /proc/${sqlite.proc.pid}/fd ${listed}`);
    const build = /^kvconnect_build_info\{([^}]*)\} 1$/m.exec(text);
    assert.ok(build, "kvconnect_build_info{...} 1");
    const version = /version="([^"]*)"/.exec(build[1])?.[1];
    const commit = /commit="([^"]*)"/.exec(build[1])?.[1];
    assert.match(commit, /^([0-9a-f]{12}|unknown)$/);
    // The allocator the label names is the one mapped into the server's process.
    const allocator = /allocator="([^"]*)"/.exec(build[1])?.[1];
    const mapped = /libjemalloc/.test(fs.readFileSync(`/proc/${sqlite.proc.pid}/maps`, "utf8"));
    assert.equal(allocator, mapped ? "jemalloc" : "libc");
    const v = spawnSync(kvconnectBin(), ["--version"], { encoding: "utf8" });
    // With jemalloc, also the transparent huge page mode src/main.cc asks it for.
    const thp = allocator === "jemalloc" ? ", thp always" : "";
    assert.equal(v.stdout.trim(), `kvconnect ${version} (commit ${commit}, allocator ${allocator}${thp})`);
  });

  test("kvconnect_queue_dead_letters follows a dead letter and its requeue", async () => {
    const labels = { database: "default" };
    const before = await metricValue(sqlite, "kvconnect_queue_dead_letters", labels);
    assert.ok(before >= 1, `the dead letter made before: ${before}`);
    await makeDeadLetter(sqlite);
    assert.equal(await metricValue(sqlite, "kvconnect_queue_dead_letters", labels), before + 1);
    const requeued = await post(sqlite, "/admin/v1/databases/default/queue/dead/requeue", { all: true });
    assert.equal(requeued.status, 200, requeued.text);
    assert.equal(await metricValue(sqlite, "kvconnect_queue_dead_letters", labels), 0);
  });
});
