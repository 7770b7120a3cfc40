#!/usr/bin/env bash
# kvconnect developer entry point for a Debian 12 machine.
#   deploy/dev.sh run [serve flags...]  install what building and serving need (BUILD_PACKAGES),
#                                       build the server, start it
#   deploy/dev.sh test                  install those and the test packages (TEST_PACKAGES, Node.js
#                                       and npm), build everything, run every test
#   deploy/dev.sh deps [run|test] | build   the individual steps (deps: test's packages by default)
#   deploy/dev.sh packages run|test     print the Debian packages a command installs, one a line
# Environment: BUILD_DIR (default ./build), KVC_TEST_LABELS (ctest -L regex, default all),
#   KVC_SANITIZERS=1 builds the unit and integration tests with ASan+UBSan and with TSan and runs
#   them there instead of in the plain tree (default: on when CI is set, as in .ci/run; off
#   otherwise, to keep the everyday loop short).
#   KVC_CTEST_JOBS: tests the plain tree's ctest runs at once (default: one more than the cores;
#   the end-to-end tests spend part of their time waiting on client processes).
#   KVC_DEBUG_INFO=full builds with full debug information (default: line tables only).
#   KVC_UNITY_BUILD=1 compiles the plain tree's library in batches (CMake unity build), which a cold
#   build finishes in about 0.6x the time (default: on when CI is set; the sanitizer trees always
#   do, and precompile the tests' shared headers).
#   KVC_FUZZ=1 also builds the libFuzzer targets (in the clang ASan+UBSan tree) and runs each for
#   KVC_FUZZ_SECONDS (default 20) on its seed corpus (default: on when CI is set).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
JOBS=$(nproc 2>/dev/null || echo 2)

# What building and serving need: the compiler, CMake, the libraries' headers (the same list as
# the build stage of deploy/Dockerfile, which builds with nothing else) and the CA certificates
# for HTTPS backup targets and queue push. `run` installs only these.
BUILD_PACKAGES=(g++ cmake make pkg-config libboost-dev libnghttp2-dev protobuf-compiler
  libprotobuf-dev libsqlite3-dev libssl-dev rapidjson-dev libcli11-dev libspdlog-dev libfmt-dev
  prometheus-cpp-dev libcurl4-openssl-dev libpq-dev libjemalloc-dev ca-certificates)
# What only the tests need, on top (`test` installs both lists, and Node.js and npm): GoogleTest,
# clang and its sanitizer runtimes, ccache (CI builds three times), PostgreSQL 15 for the
# PostgreSQL tests, Chromium for the console tests, promtool (prometheus) for the metrics and
# alert-rule checks, the tools the deployment checks drive, and nghttpd (nghttp2-server), the
# no-work HTTP/2 server of the benchmark's ceiling (tests/bench/ceiling.mjs).
TEST_PACKAGES=(libgtest-dev libgmock-dev sqlite3 openssl systemd python3-yaml clang clang-tidy
  libclang-rt-14-dev ccache prometheus curl chromium fonts-dejavu-core postgresql-15
  nghttp2-client nghttp2-server)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# The Debian packages `run` or `test` needs (Node.js and npm come on top for `test`, unless a
# node and npm are already on PATH).
packages() {
  case "${1:-test}" in
    run) printf '%s\n' "${BUILD_PACKAGES[@]}" ;;
    test) printf '%s\n' "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" ;;
    *) echo "usage: deploy/dev.sh packages run|test" >&2; return 2 ;;
  esac
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# What the build's configure step looks for when the tests are on (GoogleTest, the ccache
# launcher, clang-tidy and node for the tests it registers). On a machine without the test
# packages, `test` installs these first and the rest of its list while the main tree builds.
CONFIGURE_TEST_PACKAGES=(libgtest-dev libgmock-dev ccache clang-tidy)

missing_packages() {
  local p
  for p in "$@"; do installed "$p" || echo "$p"; done
}
apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# deps run|test: installs what that command needs and is missing, and says what.
deps() {
  case "${1:-test}" in
    test) test_deps && wait_late_deps; return ;;
    run) ;;
    *) echo "usage: deploy/dev.sh deps run|test" >&2; return 2 ;;
  esac
  local missing=()
  mapfile -t missing < <(missing_packages "${BUILD_PACKAGES[@]}")
  log "deploy/dev.sh run needs ${#BUILD_PACKAGES[@]} Debian packages, for building and serving only (the ${#TEST_PACKAGES[@]} test packages come with deploy/dev.sh test)"
  if [ ${#missing[@]} -eq 0 ]; then
    log "All of them are installed"
    return
  fi
  log "Installing the ${#missing[@]} missing: ${missing[*]}"
  as_root apt-get update -qq
  apt_install "${missing[@]}"
}

# For `test`: installs first what building and configuring need (BUILD_PACKAGES,
# CONFIGURE_TEST_PACKAGES, Node.js), then starts installing the rest of the test packages in the
# background (log: LATE_DEPS_LOG), so that their download and unpacking overlap the main build.
LATE_DEPS_PID=""
LATE_DEPS=()
LATE_DEPS_LOG=$BUILD_DIR/test-packages.log
test_deps() {
  local early=() p
  mkdir -p "$BUILD_DIR"
  log "deploy/dev.sh test needs $(packages test | wc -l) Debian packages (and Node.js and npm): what building and serving need (${#BUILD_PACKAGES[@]}) and the tests' (${#TEST_PACKAGES[@]})"
  mapfile -t early < <(missing_packages "${BUILD_PACKAGES[@]}" "${CONFIGURE_TEST_PACKAGES[@]}")
  if ! command -v node >/dev/null 2>&1; then early+=(nodejs); fi
  for p in "${TEST_PACKAGES[@]}"; do
    [[ " ${CONFIGURE_TEST_PACKAGES[*]} " == *" $p "* ]] || installed "$p" || LATE_DEPS+=("$p")
  done
  if ! command -v npm >/dev/null 2>&1; then LATE_DEPS+=(npm); fi
  if [ ${#early[@]} -eq 0 ] && [ ${#LATE_DEPS[@]} -eq 0 ]; then
    log "All of them are installed"
    return
  fi
  as_root apt-get update -qq
  if [ ${#early[@]} -gt 0 ]; then
    log "Installing the ${#early[@]} missing that the build needs: ${early[*]}"
    apt_install "${early[@]}"
  fi
  if [ ${#LATE_DEPS[@]} -gt 0 ]; then
    log "Installing the other ${#LATE_DEPS[@]} missing while the build runs: ${LATE_DEPS[*]} (log: $LATE_DEPS_LOG)"
    apt_install "${LATE_DEPS[@]}" >"$LATE_DEPS_LOG" 2>&1 &
    LATE_DEPS_PID=$!
  fi
}
wait_late_deps() {
  [ -n "$LATE_DEPS_PID" ] || return 0
  local rc=0
  wait "$LATE_DEPS_PID" || rc=$?
  LATE_DEPS_PID=""
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$LATE_DEPS_LOG" >&2
    log "Installing ${LATE_DEPS[*]} failed (exit $rc)"
    return "$rc"
  fi
  log "Installed ${LATE_DEPS[*]}"
}

# ccache (Debian) keeps repeated builds cheap: CI builds the library three times (plain g++, TSan
# g++, and ASan+UBSan with clang, which also builds the fuzzers).
# Paths are hashed relative to the checkout, so a fresh clone elsewhere (CI) still hits.
# Checked when each tree is configured: on a fresh machine `test` installs ccache first.
CMAKE_LAUNCHER=()
use_ccache() {
  if command -v ccache >/dev/null 2>&1; then
    CMAKE_LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
  fi
}

# Debug information: line tables (-g1) by default, enough for stack traces with file and line,
# at about 0.73x the compile time of full -g (measured on net/http2_session.cc: 27.2 s at -O2 -g,
# 19.9 s at -O2 -g1; client/http1_connection.cc: 38.0 s and 28.7 s). KVC_DEBUG_INFO=full keeps
# full debug information (variables in gdb).
if [ "${KVC_DEBUG_INFO:-lines}" = full ]; then
  MAIN_FLAGS=()
else
  MAIN_FLAGS=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
fi

# Configures $BUILD_DIR and builds the given targets (all when none are given). The tests'
# targets are configured (KVC_BUILD_TESTS) when their packages are there: `run` without them
# configures the server alone, and a later `test` turns them on. PLAIN_GTEST_SUITES=OFF leaves
# out the unit and integration test binaries (`test` does that when the sanitizer trees run them).
PLAIN_GTEST_SUITES=ON
unity_on() { [ "${KVC_UNITY_BUILD:-${CI:+1}}" = "1" ]; }
build() {
  log "Building ${*:-everything} into $BUILD_DIR"
  local tests=ON
  installed libgtest-dev && installed libgmock-dev || tests=OFF
  local unity=OFF
  if unity_on; then unity=ON; fi
  use_ccache
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVC_BUILD_TESTS=$tests \
    -DKVC_GTEST_SUITES=$PLAIN_GTEST_SUITES -DKVC_UNITY_BUILD=$unity "${MAIN_FLAGS[@]}" \
    "${CMAKE_LAUNCHER[@]}" >/dev/null
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
}

# Per-stage wall-clock times, printed at the end of `test`.
STAGES=()
stage() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  STAGES+=("$(printf '%-32s %4dm%02ds' "$name" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
}
print_stages() {
  log "Stage times"
  printf '  %s\n' "${STAGES[@]}" >&2
}

# Runs the unit and integration tests of a sanitized build; any report fails.
sanitized_ctest() {
  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$ROOT/tests/ubsan.supp \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$1" --output-on-failure -j "$JOBS" --timeout 900 -L "unit|integration"
}

# One clang build serves the ASan+UBSan tests and the fuzzers: the library is compiled once,
# with the sanitizers and libFuzzer's coverage counters (which the tests carry harmlessly).
# Being clang, it also checks every lock annotation (-Wthread-safety is an error).
# The sanitizer trees compile with -O1 and line tables only (what OSS-Fuzz uses): reports still
# name file and line, and each file compiles in about 0.63x the CPU time of -O2 -g (measured on
# net/http2_session.cc: 27.2 s at -O2 -g, 19.9 s at -O2 -g1, 17.3 s at -O1 -g1).
# Both trees are built cold in CI, so they compile the library as a unity build (batches of 8
# sources: 332 s instead of 517 s for the ASan+UBSan library, measured cold on 2 cores) and
# precompile the headers the test files share (KVC_UNITY_BUILD, KVC_PRECOMPILED_TEST_HEADERS).
# The TSan tree (g++) builds the unit tests that start threads and the integration tests; the
# single-threaded unit tests (KVC_SINGLE_THREADED_UNIT_TESTS) give ThreadSanitizer nothing to find.
ASAN_DIR=$BUILD_DIR-clang-asan
TSAN_DIR=$BUILD_DIR-tsan
SANITIZER_TREE_FLAGS=(-DKVC_UNITY_BUILD=ON -DKVC_PRECOMPILED_TEST_HEADERS=ON)
sanitizers_on() { [ "${KVC_SANITIZERS:-${CI:+1}}" = "1" ]; }
fuzz_on() { [ "${KVC_FUZZ:-${CI:+1}}" = "1" ]; }
asan_configure() {
  use_ccache
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DKVC_SANITIZE="address;undefined" -DKVC_BUILD_FUZZERS=ON "${SANITIZER_TREE_FLAGS[@]}" \
    "${CMAKE_LAUNCHER[@]}" >/dev/null
}
tsan_configure() {
  use_ccache
  cmake -S "$ROOT" -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVC_SANITIZE=thread \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DKVC_SINGLE_THREADED_UNIT_TESTS=OFF \
    "${SANITIZER_TREE_FLAGS[@]}" "${CMAKE_LAUNCHER[@]}" >/dev/null
}
# Everything the sanitizer and fuzz stages run: the ASan+UBSan tests and the fuzzers (one clang
# tree), and the TSan tests.
sanitizer_builds() {
  local asan_targets=()
  if sanitizers_on; then
    asan_targets+=(--target unit_tests unit_thread_tests integration_tests http_client_selftest)
  fi
  if fuzz_on; then asan_targets+=(--target fuzzers); fi
  log "Building the ASan+UBSan tree (clang): tests and fuzzers ($ASAN_DIR)"
  asan_configure
  cmake --build "$ASAN_DIR" -j "$JOBS" "${asan_targets[@]}"
  if sanitizers_on; then
    log "Building the threaded unit tests and the integration tests with TSan (g++) ($TSAN_DIR)"
    tsan_configure
    cmake --build "$TSAN_DIR" -j "$JOBS" --target unit_thread_tests integration_tests \
      http_client_selftest
  fi
}

on_exit() {
  # An apt-get cut off mid-install leaves dpkg half done: let it finish.
  if [ -n "$LATE_DEPS_PID" ]; then wait "$LATE_DEPS_PID" 2>/dev/null || true; fi
  print_stages
}

e2e_deps() {
  log "Installing the pinned Deno CLI and @deno/kv for the end-to-end tests (npm ci)"
  (cd "$ROOT/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
}

cmd=${1:-}
shift || true
case "$cmd" in
  deps) deps "${1:-test}" ;;
  packages) packages "${1:-test}" ;;
  build) deps test; build ;;
  run)
    deps run
    build kvconnect  # only what serve needs: a first start does not wait for the tests
    log "Starting kvconnect (Ctrl-C to stop)"
    exec "$BUILD_DIR/kvconnect" serve "$@"
    ;;
  test)
    trap on_exit EXIT
    # With the sanitizers on (CI), the unit and integration suites are compiled and run in the
    # ASan+UBSan and TSan trees; the plain -O2 tree builds the server and what the end-to-end,
    # crash, soak, linearizability and deploy tests drive, and runs those.
    if sanitizers_on; then PLAIN_GTEST_SUITES=OFF; fi
    stage deps test_deps
    stage build build
    if [ -n "$LATE_DEPS_PID" ]; then stage "test packages (rest, after build)" wait_late_deps; fi
    stage "npm ci (e2e)" e2e_deps
    log "Running tests"
    stage ctest ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${KVC_CTEST_JOBS:-$((JOBS + 1))}" \
      --timeout 900 \
      ${KVC_TEST_LABELS:+-L "$KVC_TEST_LABELS"}
    if sanitizers_on || fuzz_on; then stage "sanitizer and fuzzer builds" sanitizer_builds; fi
    if sanitizers_on; then
      log "Unit and integration tests under ASan+UBSan (clang) ($ASAN_DIR)"
      stage "asan+ubsan tests (clang)" sanitized_ctest "$ASAN_DIR"
      log "Threaded unit tests and integration tests under TSan (g++) ($TSAN_DIR)"
      stage "tsan tests (g++)" sanitized_ctest "$TSAN_DIR"
    fi
    if fuzz_on; then
      log "Fuzzers (clang, ASan+UBSan), ${KVC_FUZZ_SECONDS:-20} s each ($ASAN_DIR)"
      stage "fuzzers (run)" "$ROOT/tests/fuzz/run.sh" "$ASAN_DIR" "${KVC_FUZZ_SECONDS:-20}"
    fi
    ;;
  *)
    echo "usage: deploy/dev.sh run [serve flags...] | test | deps [run|test] | build | packages run|test" >&2
    exit 2
    ;;
esac
