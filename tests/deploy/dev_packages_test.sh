#!/usr/bin/env bash
# First run: `deploy/dev.sh run` installs only what building and serving need.
#   lists     `deploy/dev.sh packages run` is the build stage of deploy/Dockerfile (which builds
#             the server with nothing else) plus ca-certificates; `packages test` is that plus
#             the test packages; none of the test-only packages is in the run list
#   configure the server's build configures with the tests off and GoogleTest unavailable
#             (CMAKE_DISABLE_FIND_PACKAGE_GTest), as on a machine that has only the run list
# Prints the package counts of both commands.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEV=$ROOT/deploy/dev.sh
passed=0 failed=0
ok() { passed=$((passed + 1)); printf 'ok      %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL    %s\n' "$*"; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvc-dev-packages.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

echo "== lists: deploy/dev.sh packages run|test"
run_list=$("$DEV" packages run | sort)
test_list=$("$DEV" packages test | sort)
if [ -z "$run_list" ] || [ -z "$test_list" ]; then
  fail "deploy/dev.sh packages run|test printed nothing"
else
  echo "        deploy/dev.sh run installs $(wc -l <<<"$run_list") packages, deploy/dev.sh test $(wc -l <<<"$test_list") (plus Node.js and npm)"
  extra=$(comm -23 <(echo "$run_list") <(echo "$test_list"))
  if [ -z "$extra" ]; then ok "test installs everything run installs"; else fail "only in run: $extra"; fi
  dups=$("$DEV" packages test | sort | uniq -d)
  if [ -z "$dups" ]; then ok "no package is listed twice"; else fail "listed twice: $dups"; fi
  # The quick start in README.md states both counts.
  run_n=$(wc -l <<<"$run_list")
  test_only_n=$(($(wc -l <<<"$test_list") - run_n))
  if grep -q "only what building and serving need ($run_n Debian packages" "$ROOT/README.md" &&
    grep -q "also the $test_only_n the tests" "$ROOT/README.md"; then
    ok "README.md's quick start states the counts ($run_n for run, $test_only_n more for test)"
  else
    fail "README.md's quick start does not say '($run_n Debian packages' and 'also the $test_only_n the tests'"
  fi
  # Packages only the tests use: none of them may be in the run list.
  bad=()
  for p in libgtest-dev libgmock-dev clang clang-tidy libclang-rt-14-dev ccache prometheus \
    chromium fonts-dejavu-core postgresql-15 nghttp2-client nghttp2-server systemd python3-yaml sqlite3 curl; do
    grep -qx -- "$p" <<<"$run_list" && bad+=("$p")
    grep -qx -- "$p" <<<"$test_list" || fail "the test list lacks $p"
  done
  if [ ${#bad[@]} -eq 0 ]; then ok "the run list holds no test-only package"; else fail "run installs test-only packages: ${bad[*]}"; fi
  # The Dockerfile's build stage: the apt-get install line before the second FROM.
  docker_list=$(awk '/^FROM/ { n++ } n == 1 { printf "%s ", $0 }' "$ROOT/deploy/Dockerfile" | sed 's/\\//g' |
    grep -o -- '--no-install-recommends[^&]*' | head -1 | tr ' ' '\n' | grep -v -- '^-' |
    grep -v '^$' | sort)
  if [ -z "$docker_list" ]; then
    fail "found no apt-get install line in the Dockerfile's build stage"
  else
    only_run=$(comm -23 <(echo "$run_list") <(echo "$docker_list") | tr '\n' ' ')
    only_docker=$(comm -13 <(echo "$run_list") <(echo "$docker_list") | tr '\n' ' ')
    if [ -z "$only_docker" ] && [ "$only_run" = "ca-certificates " ]; then
      ok "the run list is the Dockerfile's build stage ($(wc -l <<<"$docker_list") packages) plus ca-certificates"
    else
      fail "run list vs Dockerfile build stage: only in run: '$only_run', only in the Dockerfile: '$only_docker'"
    fi
  fi
fi

echo "== configure: the server without the test packages"
if cmake -S "$ROOT" -B "$TMP/build" -DKVC_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  >"$TMP/configure.log" 2>&1; then
  if grep -q 'kvconnect' "$TMP/build/Makefile" 2>/dev/null && [ ! -e "$TMP/build/tests" ]; then
    ok "cmake configures the kvconnect target with the tests off and no GoogleTest"
  else
    fail "the configured tree lacks kvconnect or has the tests"
  fi
else
  fail "cmake -DKVC_BUILD_TESTS=OFF fails without GoogleTest:"
  tail -n 20 "$TMP/configure.log" | sed 's/^/          /'
fi
# The control: with the tests on, the same configure needs GoogleTest (so the check above
# would notice a test dependency creeping into the server's build).
if cmake -S "$ROOT" -B "$TMP/build-tests" -DKVC_BUILD_TESTS=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  >"$TMP/configure-tests.log" 2>&1; then
  fail "control: configuring the tests without GoogleTest succeeded; the check above proves nothing"
elif grep -q 'GTest' "$TMP/configure-tests.log"; then
  ok "control: the tests' configure does need GoogleTest"
else
  fail "control: the tests' configure failed, but not for GoogleTest:"
  tail -n 20 "$TMP/configure-tests.log" | sed 's/^/          /'
fi
# The run path picks KVC_BUILD_TESTS=OFF when GoogleTest is not installed.
if grep -q 'installed libgtest-dev && installed libgmock-dev || tests=OFF' "$DEV"; then
  ok "deploy/dev.sh configures without the tests when GoogleTest is missing"
else
  fail "deploy/dev.sh no longer turns the tests off when GoogleTest is missing"
fi

echo
echo "dev_packages_test: $passed passed, $failed failed"
[ $failed -eq 0 ]
