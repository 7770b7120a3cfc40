#!/usr/bin/env bash
# Runs every fuzzer for SECONDS each on a copy of its checked-in seed corpus.
# usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
secs=${2:-30}
for f in datapath v8_value key_codec metadata_json; do
  work=$(mktemp -d)
  cp -r "$here/corpus/$f/." "$work/"
  echo "== $f (${secs}s)"
  "$build/tests/fuzz/${f}_fuzzer" -max_total_time="$secs" -max_len=65536 "$work" 2>&1 | tail -3
  rm -rf "$work"
done
