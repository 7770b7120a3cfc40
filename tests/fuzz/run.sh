#!/usr/bin/env bash
# Runs every fuzzer for SECONDS each on a copy of its checked-in seed corpus.
# usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]   (KVC_FUZZERS="a b" picks fuzzers; crash
# inputs go to FUZZ_ARTIFACTS, default BUILD_DIR/fuzz-artifacts)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
secs=${2:-30}
artifacts=${FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
mkdir -p "$artifacts"
# Undefined behaviour stops a fuzzer like a crash (clang's UBSan only reports it by default);
# third-party reports are suppressed in tests/ubsan.supp.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$here/../ubsan.supp}
for f in ${KVC_FUZZERS:-datapath v8_value key_codec metadata_json admin_json dump_import http1_session http2_session differential client_codec v8_tree backup_segment s3_listing}; do
  work=$(mktemp -d)
  cp -r "$here/corpus/$f/." "$work/"
  echo "== $f (${secs}s)"
  # Inputs up to 1 MiB: every endpoint takes bodies that large (--max-body-bytes is 4 MiB), and
  # the corpora hold deeply nested seeds of 200 KB and more (a stack overflow needs about 130,000
  # levels). The engine model of the differential fuzzer needs no more than 64 KiB.
  max_len=1048576
  if [ "$f" = differential ]; then max_len=65536; fi
  # A crash fails the script (pipefail) and leaves the input in $artifacts.
  "$build/tests/fuzz/${f}_fuzzer" -max_total_time="$secs" -max_len="$max_len" \
    -artifact_prefix="$artifacts/$f-" "$work" 2>&1 | tail -3
  rm -rf "$work"
done
