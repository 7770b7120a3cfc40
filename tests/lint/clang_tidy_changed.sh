#!/usr/bin/env bash
# Runs clang-tidy (the repository's .clang-tidy) on the C++ files under src/ changed since a base
# revision, and fails on any warning.
#
#   tests/lint/clang_tidy_changed.sh [BASE]   files changed between BASE and the work tree
#   tests/lint/clang_tidy_changed.sh --all    every file under src/
#
# BASE defaults to the merge-base of HEAD with origin/main (or with main), or HEAD~1 when that
# is HEAD itself or neither exists. A changed header is checked through its own .cc, or else
# through one file that includes it.
# Environment: BUILD_DIR (default: build) must hold compile_commands.json
# (CMAKE_EXPORT_COMPILE_COMMANDS) and the generated headers (build the kvc target first);
# CLANG_TIDY (default: clang-tidy-14, else clang-tidy); JOBS (default: 2).
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
build=${BUILD_DIR:-build}
jobs=${JOBS:-2}
tidy=${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || true)}
if [[ -z "$tidy" ]]; then
  echo "clang_tidy_changed: clang-tidy not found" >&2
  exit 2
fi
if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "clang_tidy_changed: $build/compile_commands.json missing: configure with CMake first" >&2
  exit 2
fi

# The source files clang-tidy can check: those in the compilation database, relative to root.
mapfile -t known < <(python3 - "$build/compile_commands.json" "$root" <<'PY'
import json, os, sys
root = os.path.realpath(sys.argv[2])
for entry in json.load(open(sys.argv[1])):
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    if path.startswith(root + os.sep):
        print(os.path.relpath(path, root))
PY
)
is_known() {
  local f
  for f in "${known[@]}"; do [[ "$f" == "$1" ]] && return 0; done
  return 1
}

if [[ "${1:-}" == "--all" ]]; then
  mapfile -t changed < <(git ls-files 'src/*.cc' 'src/*.h')
else
  base=${1:-}
  if [[ -z "$base" ]]; then
    for main in origin/main main; do
      if git rev-parse -q --verify "$main^{commit}" >/dev/null; then
        base=$(git merge-base HEAD "$main")
        break
      fi
    done
    if [[ -z "$base" || "$(git rev-parse "$base")" == "$(git rev-parse HEAD)" ]]; then
      base=HEAD~1
    fi
  fi
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    # No such revision (e.g. the first commit): compare with the empty tree.
    base=$(git hash-object -t tree /dev/null)
  fi
  mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- 'src/*.cc' 'src/*.h')
fi

declare -A targets=()
for f in "${changed[@]}"; do
  case "$f" in
    *.cc)
      if is_known "$f"; then targets["$f"]=1; fi
      ;;
    *.h)
      own="${f%.h}.cc"
      if is_known "$own"; then
        targets["$own"]=1
        continue
      fi
      header="${f#src/}"
      for g in "${known[@]}"; do
        if [[ "$g" == src/* ]] && grep -q "#include \"$header\"" "$g"; then
          targets["$g"]=1
          break
        fi
      done
      ;;
  esac
done

if [[ ${#targets[@]} -eq 0 ]]; then
  echo "clang_tidy_changed: no C++ files under src/ changed"
  exit 0
fi
echo "clang_tidy_changed: checking ${#targets[@]} file(s) with $tidy"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
printf '%s\n' "${!targets[@]}" | sort |
  xargs -P "$jobs" -n 1 "$tidy" -p "$build" --quiet >"$log" 2>&1 || status=$?
# clang-tidy prints "N warnings generated." for the ones it suppressed; keep what it reports.
grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' "$log" || true
if [[ $status -ne 0 ]] || grep -q -E ': (warning|error):' "$log"; then
  echo "clang_tidy_changed: FAILED" >&2
  exit 1
fi
echo "clang_tidy_changed: clean"
