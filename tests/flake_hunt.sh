#!/usr/bin/env bash
# Runs the ctest suite (or some labels of it) several times in a row and tallies what failed, to
# find flaky tests. Each round's full output is kept; nothing is retried.
#   tests/flake_hunt.sh [--rounds N] [--labels REGEX] [--load] [--out DIR]
#     --rounds N      how many rounds (default 5)
#     --labels REGEX  ctest -L regex (default: every test)
#     --load          run `stress-ng --cpu JOBS` for the whole hunt (installed from Debian when
#                     missing), so timing assumptions meet a busy machine
#     --out DIR       where round logs go (default $BUILD_DIR/flake-hunt)
# Environment: BUILD_DIR (default ./build, already built: run `deploy/dev.sh build` and
#   `(cd tests/e2e && npm ci)` first, or one `deploy/dev.sh test`).
# Exit status: 0 when every round passed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
JOBS=$(nproc 2>/dev/null || echo 2)
ROUNDS=5
LABELS=""
LOAD=0
OUT=""

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --labels) LABELS=$2; shift 2 ;;
    --load) LOAD=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "flake_hunt: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$BUILD_DIR/flake-hunt}
mkdir -p "$OUT"

if [ ! -f "$BUILD_DIR/CTestTestfile.cmake" ]; then
  echo "flake_hunt: $BUILD_DIR is not a configured build tree; run deploy/dev.sh build first" >&2
  exit 2
fi

STRESS_PID=""
stop_load() {
  if [ -n "$STRESS_PID" ]; then
    kill "$STRESS_PID" 2>/dev/null || true
    wait "$STRESS_PID" 2>/dev/null || true
  fi
}
trap stop_load EXIT

if [ "$LOAD" -eq 1 ]; then
  if ! command -v stress-ng >/dev/null 2>&1; then
    echo "==> installing stress-ng (Debian)" >&2
    if [ "$(id -u)" -eq 0 ]; then
      apt-get install -y -qq --no-install-recommends stress-ng >/dev/null
    else
      sudo apt-get install -y -qq --no-install-recommends stress-ng >/dev/null
    fi
  fi
  stress-ng --cpu "$JOBS" --quiet &
  STRESS_PID=$!
fi

label_args=()
[ -n "$LABELS" ] && label_args=(-L "$LABELS")

summary="$OUT/summary.txt"
: >"$summary"
failed_rounds=0
for round in $(seq 1 "$ROUNDS"); do
  log="$OUT/round-$round.log"
  start=$(date +%s)
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  set +e
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 900 \
    "${label_args[@]}" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  result=$(grep -E "tests passed, [0-9]+ tests failed out of" "$log" | tail -1 || true)
  failed=$(sed -n '/The following tests FAILED:/,$p' "$log" | grep -E '^\s+[0-9]+ - ' |
    sed -E 's/^\s+[0-9]+ - //' | tr '\n' ';' || true)
  line="round $round: rc=$rc ${secs}s load(before) $load_before load(after) $load_after: ${result:-no result line} ${failed:+FAILED: $failed}"
  echo "$line" | tee -a "$summary"
  [ "$rc" -eq 0 ] || failed_rounds=$((failed_rounds + 1))
done

echo "flake_hunt: $failed_rounds of $ROUNDS rounds had failures; logs in $OUT" | tee -a "$summary"
[ "$failed_rounds" -eq 0 ]
