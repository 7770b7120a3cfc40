#!/usr/bin/env bash
# The Prometheus material in deploy/monitoring/, checked by Prometheus' own promtool (Debian
# package prometheus):
#   rules      alerts.yml passes `promtool check rules` and its unit tests
#              (`promtool test rules alerts.test.yml`: every alert fires on its input series
#              and stays quiet before its `for:` and for series that should not trigger it)
#   config     prometheus*.yml pass `promtool check config --syntax-only` (their token files
#              exist only where they are deployed)
#   k8s        deploy/k8s/kvconnect-rules.yaml is what deploy/monitoring/k8s-rules.sh makes
#              from alerts.yml (no drift between the two)
#   dashboard  kvconnect-dashboard.json is JSON; panel ids are unique; every query names its
#              data source through the $datasource variable
# Whether the metric names exist: tests/monitoring/metric_names.test.mjs (a live server).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MON=$ROOT/deploy/monitoring
passed=0 failed=0
ok() { passed=$((passed + 1)); printf 'ok      %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL    %s\n' "$*"; }
# check DESCRIPTION COMMAND...: passes when the command succeeds; shows its output when not.
check() {
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then ok "$what"; else fail "$what"; sed 's/^/          /' <<<"$out"; fi
}

if ! command -v promtool >/dev/null 2>&1; then
  fail "promtool is missing (apt-get install prometheus; deploy/dev.sh deps installs it)"
  exit 1
fi

echo "== rules: deploy/monitoring/alerts.yml"
check "promtool check rules alerts.yml" promtool check rules "$MON/alerts.yml"
check "promtool test rules alerts.test.yml" promtool test rules "$MON/alerts.test.yml"
# Every alert has a test group that expects it to fire.
for alert in $(sed -n 's/^ *- alert: *//p' "$MON/alerts.yml"); do
  if awk -v a="$alert" '/alertname: / { want = ($0 ~ ("alertname: " a "$")) }
      want && /exp_alerts:/ { found = 1 } /^  - name:/ { want = 0 } END { exit !found }' \
    "$MON/alerts.test.yml"; then
    ok "alerts.test.yml makes $alert fire"
  else
    fail "alerts.test.yml never expects $alert to fire"
  fi
done

echo "== config: deploy/monitoring/prometheus*.yml"
# Debian builds Prometheus without Kubernetes service discovery: where promtool does not know
# kubernetes_sd_configs, the rest of that job (authorization, relabelling) is checked with a
# static target in its place.
kubernetes_sd_as_static() {
  python3 - "$1" "$2" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for job in doc["scrape_configs"]:
    if job.pop("kubernetes_sd_configs", None) is not None:
        job["static_configs"] = [{"targets": ["pod.example:9090"]}]
yaml.safe_dump(doc, open(sys.argv[2], "w"))
PY
}
for f in "$MON"/prometheus*.yml; do
  name=${f#"$ROOT"/}
  if out=$(promtool check config --syntax-only "$f" 2>&1); then
    ok "promtool check config --syntax-only $name"
  elif grep -q 'field kubernetes_sd_configs not found' <<<"$out"; then
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvc-promconf.XXXXXX")
    if kubernetes_sd_as_static "$f" "$tmp/prometheus.yml" &&
      out=$(promtool check config --syntax-only "$tmp/prometheus.yml" 2>&1); then
      ok "promtool check config --syntax-only $name (this promtool lacks Kubernetes discovery: checked with a static target in its place)"
    else
      fail "promtool check config --syntax-only $name"
      sed 's/^/          /' <<<"$out"
    fi
    rm -rf "$tmp"
  else
    fail "promtool check config --syntax-only $name"
    sed 's/^/          /' <<<"$out"
  fi
done

echo "== k8s: deploy/k8s/kvconnect-rules.yaml"
if diff -u "$ROOT/deploy/k8s/kvconnect-rules.yaml" <("$MON/k8s-rules.sh") >"${TMPDIR:-/tmp}/kvc-rules.$$.diff"; then
  ok "kvconnect-rules.yaml is k8s-rules.sh's output for alerts.yml"
else
  fail "kvconnect-rules.yaml differs from alerts.yml: run deploy/monitoring/k8s-rules.sh > deploy/k8s/kvconnect-rules.yaml"
  head -n 20 "${TMPDIR:-/tmp}/kvc-rules.$$.diff" | sed 's/^/          /'
fi
rm -f "${TMPDIR:-/tmp}/kvc-rules.$$.diff"

echo "== dashboard: deploy/monitoring/kvconnect-dashboard.json"
check "the dashboard's panels and queries are well formed" node -e '
  const dash = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const problems = [];
  const ids = new Set();
  let queries = 0;
  const walk = (panels) => {
    for (const p of panels ?? []) {
      if (ids.has(p.id)) problems.push(`panel id ${p.id} twice`);
      ids.add(p.id);
      if (!p.gridPos) problems.push(`panel "${p.title}" has no gridPos`);
      for (const t of p.targets ?? []) {
        queries++;
        if (!t.expr) problems.push(`panel "${p.title}" ${t.refId}: no expr`);
        if (t.datasource?.uid !== "${datasource}") problems.push(`panel "${p.title}" ${t.refId}: data source is not $datasource`);
      }
      walk(p.panels);
    }
  };
  walk(dash.panels);
  if (!dash.templating.list.some((v) => v.name === "datasource" && v.type === "datasource")) problems.push("no $datasource variable");
  if (queries < 30) problems.push(`only ${queries} queries`);
  if (problems.length) { console.error(problems.join("\n")); process.exit(1); }
' "$MON/kvconnect-dashboard.json"

echo
echo "monitoring rules_test: $passed passed, $failed failed"
[ $failed -eq 0 ]
