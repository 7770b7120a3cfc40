// The Server page: the selected database's facts (from the database list) and a few numbers
// of the server's /metrics, refreshed every few seconds while signed in.

import { fetchMetrics } from "./api.js";
import { $, clear, el, setText } from "./dom.js";
import { formatBytes } from "./kv.js";

const STATS_EVERY_MS = 10_000;

let shell = null;
let timer = 0;

export function init(s) {
  shell = s;
  $("stats-refresh").addEventListener("click", refresh);
}

export function start() {
  clearInterval(timer);
  timer = setInterval(refresh, STATS_EVERY_MS);
}

export function stop() {
  clearInterval(timer);
  timer = 0;
}

export function renderDatabaseFacts() {
  const facts = clear($("db-facts"));
  const d = shell?.databases.find((x) => x.name === shell.db);
  if (!d) return;
  const rows = [
    ["Database", d.name], ["Id", d.id], ["Serving", d.serving ? "yes" : "no"],
    ["Keys", d.keys ?? "–"], ["Size", formatBytes(d.bytes)],
    ["Last versionstamp", d.versionstamp ?? "–"], ["Open watches", d.watchers ?? "–"],
    ["Created", d.created_at ?? "–"],
  ];
  for (const [k, v] of rows) facts.append(el("dt", { text: k }), el("dd", { text: String(v) }));
}

export async function refresh() {
  if (!shell?.api) return;
  const status = $("stats-status");
  const [, metrics] = await Promise.allSettled([shell.reloadDatabases(), fetchMetrics(shell.api.token)]);
  if (metrics.status === "rejected") {
    setText(status, `/metrics is not available here (${shell.describeError(metrics.reason)}); ` +
      "the numbers above come from the database list.");
    return;
  }
  const samples = metrics.value;
  const sum = (name, where = () => true) => samples
    .filter((s) => s.name === name && where(s.labels)).reduce((a, s) => a + s.value, 0);
  const facts = clear($("server-facts"));
  const rows = [
    ["Requests", sum("kvconnect_http_requests_total")],
    ["Requests failed (5xx)", sum("kvconnect_http_requests_total", (l) => l.code === "5xx")],
    ["Commit groups", sum("kvconnect_commit_groups_total")],
    ["Committed writes", sum("kvconnect_committed_writes_total")],
    ["Watch subscriptions", sum("kvconnect_watch_subscriptions")],
    ["Open connections", sum("kvconnect_connections_open")],
  ];
  for (const [k, v] of rows) {
    facts.append(el("dt", { text: k }), el("dd", { text: v.toLocaleString("en-US") }));
  }
  const body = clear($("stats-body"));
  const names = [...new Set(samples.filter((s) => s.name === "kvconnect_database_keys")
    .map((s) => s.labels.database))].sort();
  for (const name of names) {
    const of = (metric) => sum(metric, (l) => l.database === name);
    body.append(el("tr", {},
      el("td", { text: name }),
      el("td", { text: of("kvconnect_database_keys").toLocaleString("en-US") }),
      el("td", { text: formatBytes(of("kvconnect_database_bytes")) }),
      el("td", { text: of("kvconnect_watch_subscriptions").toLocaleString("en-US") })));
  }
  setText(status, `Updated ${new Date().toLocaleTimeString()} from /metrics.`);
}
