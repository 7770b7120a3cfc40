#!/usr/bin/env bash
# Runs every fuzzer for SECONDS each on a copy of its checked-in seed corpus.
# usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]   (KVC_FUZZERS="a b" picks fuzzers; crash
# inputs go to FUZZ_ARTIFACTS, default BUILD_DIR/fuzz-artifacts; KVC_FUZZ_JOBS fuzzers run at
# once, default one per core: each fuzzer is one process on one core, so two cores finish the
# same fuzzing time in half the wall-clock time)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
secs=${2:-30}
artifacts=${FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
jobs=${KVC_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
mkdir -p "$artifacts"
# Undefined behaviour stops a fuzzer like a crash (clang's UBSan only reports it by default);
# third-party reports are suppressed in tests/ubsan.supp.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$here/../ubsan.supp}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# One fuzzer on a scratch copy of its corpus; its last lines go to $logs/NAME.log and its exit
# status to $logs/NAME.rc.
run_one() {
  local f=$1 work max_len=1048576 rc=0
  work=$(mktemp -d)
  cp -r "$here/corpus/$f/." "$work/"
  # Inputs up to 1 MiB: every endpoint takes bodies that large (--max-body-bytes is 4 MiB), and
  # the corpora hold deeply nested seeds of 200 KB and more (a stack overflow needs about 130,000
  # levels). The engine model of the differential fuzzer needs no more than 64 KiB.
  if [ "$f" = differential ]; then max_len=65536; fi
  # A crash leaves the input in $artifacts.
  "$build/tests/fuzz/${f}_fuzzer" -max_total_time="$secs" -max_len="$max_len" \
    -artifact_prefix="$artifacts/$f-" "$work" >"$logs/$f.out" 2>&1 || rc=$?
  { echo "== $f (${secs}s)"; tail -3 "$logs/$f.out"; } >"$logs/$f.log"
  echo "$rc" >"$logs/$f.rc"
  rm -rf "$work"
}

names=(${KVC_FUZZERS:-datapath v8_value key_codec metadata_json admin_json dump_import http1_session http2_session differential client_codec v8_tree backup_segment s3_listing})
running=0
for f in "${names[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$f" &
  running=$((running + 1))
done
wait || true

failed=()
for f in "${names[@]}"; do
  cat "$logs/$f.log" 2>/dev/null || echo "== $f: did not run"
  if [ "$(cat "$logs/$f.rc" 2>/dev/null || echo 1)" != 0 ]; then
    failed+=("$f")
    # The whole report of a failing fuzzer (the crash, its stack and the input's path).
    tail -60 "$logs/$f.out" 2>/dev/null || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzers that failed: ${failed[*]} (inputs in $artifacts)" >&2
  exit 1
fi
