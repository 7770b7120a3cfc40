#!/usr/bin/env bash
# Checks the deployment material in deploy/:
#   certs    deploy/make-certs.sh makes a CA and a leaf that TLS clients such as Deno accept
#   systemd  deploy/kvconnect.service passes `systemd-analyze verify` without warnings and
#            keeps its sandbox (`systemd-analyze security` exposure at most $KVC_MAX_EXPOSURE)
#   config   deploy/config.example.json is JSON the built server accepts; the server then
#            serves TLS (h2 and http/1.1) with the generated certificate and reloads it on SIGHUP
#   image    every shared library the binary needs is in the Dockerfile's runtime stage
#   health   the Dockerfile's HEALTHCHECK command passes against the built server's metrics
#            listener (and fails once it is gone); the Kubernetes probes' paths answer 200
#   yaml     the Compose and Kubernetes files parse (when PyYAML is there)
#   scripts  deploy/postgres/*.sh pass `bash -n`; deploy/haproxy.cfg passes `haproxy -c` (when
#            haproxy is installed)
#
# Environment:
#   KVCONNECT_BIN               the server binary (default: build/kvconnect in the repository)
#   KVC_ALLOW_MISSING_SYSTEMD=1 skip the systemd checks when systemd-analyze is missing
#                               (otherwise that is a failure: CI installs the systemd package)
#   KVC_MAX_EXPOSURE            highest accepted `systemd-analyze security` score (default 2.0)
#   KVC_KEEP_TMP=1              keep the temporary directory
# Exit status 0 when every check passed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPLOY=$ROOT/deploy
BIN=${KVCONNECT_BIN:-$ROOT/build/kvconnect}
case "$BIN" in /*) ;; *) BIN=$PWD/$BIN ;; esac
MAX_EXPOSURE=${KVC_MAX_EXPOSURE:-2.0}

passed=0 failed=0 skipped=0
ok() { passed=$((passed + 1)); printf 'ok      %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL    %s\n' "$*"; }
skip() { skipped=$((skipped + 1)); printf 'skip    %s\n' "$*"; }
note() { printf '        %s\n' "$*"; }
# Prints its arguments' lines indented under a result line.
indented() { printf '%s\n' "$@" | sed 's/^/          /'; }
# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}
# quiet COMMAND...: runs it without output.
quiet() { "$@" >/dev/null 2>&1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvc-deploy-test.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  if [ "${KVC_KEEP_TMP:-}" = "1" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

# ---------------------------------------------------------------------------------------------
# certs
# ---------------------------------------------------------------------------------------------
# ext_has TEXT EXTENSION VALUE: the `openssl x509 -text` output TEXT has EXTENSION with VALUE.
ext_has() { grep -A1 "X509v3 $2:" <<<"$1" | grep -q -- "$3"; }

certs_test() {
  echo "== certs: deploy/make-certs.sh"
  if ! command -v openssl >/dev/null 2>&1; then
    fail "openssl is not installed (apt-get install openssl)"
    return
  fi
  local d=$TMP/certs
  if ! "$DEPLOY/make-certs.sh" "$d" 2>"$TMP/make-certs.log"; then
    fail "make-certs.sh $d exited with an error:"
    indented "$(cat "$TMP/make-certs.log")"
    return
  fi
  ok "make-certs.sh wrote a CA and a server certificate"
  local f
  for f in ca.pem ca-key.pem server.pem server-key.pem; do
    check "$f exists" test -s "$d/$f"
  done
  for f in ca-key.pem server-key.pem; do
    check "$f has mode 0600" test "$(stat -c %a "$d/$f")" = 600
  done

  # The first certificate of server.pem is the leaf, the second the CA.
  awk -v out="$TMP/part" '/BEGIN CERTIFICATE/ { n++ } n { print > (out n ".pem") }' "$d/server.pem"
  check "server.pem holds two certificates" test -s "$TMP/part2.pem" -a ! -e "$TMP/part3.pem"
  check "the second certificate in server.pem is ca.pem" cmp -s "$TMP/part2.pem" "$d/ca.pem"
  local leaf=$TMP/part1.pem
  check "the leaf verifies against ca.pem for TLS servers" \
    quiet openssl verify -CAfile "$d/ca.pem" -purpose sslserver "$leaf"
  local text
  text=$(openssl x509 -in "$leaf" -noout -text)
  check "the leaf is X.509 v3" grep -q 'Version: 3' <<<"$text"
  check "the leaf is not a CA (CA:FALSE)" ext_has "$text" 'Basic Constraints' 'CA:FALSE'
  check "the leaf has keyUsage digitalSignature" ext_has "$text" 'Key Usage' 'Digital Signature'
  check "the leaf has extendedKeyUsage serverAuth" \
    ext_has "$text" 'Extended Key Usage' 'TLS Web Server Authentication'
  check "the leaf key is EC P-256" grep -q 'NIST CURVE: P-256' <<<"$text"
  local san
  san=$(grep -A1 'X509v3 Subject Alternative Name' <<<"$text" | tail -1 | sed 's/^ *//')
  check "the leaf's SAN has DNS:localhost, 127.0.0.1 and ::1 ($san)" \
    grep -q 'DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1' <<<"$san"
  check "server-key.pem belongs to the leaf" \
    test "$(openssl x509 -in "$leaf" -noout -pubkey)" = "$(openssl pkey -in "$d/server-key.pem" -pubout)"
  text=$(openssl x509 -in "$d/ca.pem" -noout -text)
  check "ca.pem is a CA (CA:TRUE)" ext_has "$text" 'Basic Constraints' 'CA:TRUE'
  check "ca.pem may sign certificates (keyCertSign)" ext_has "$text" 'Key Usage' 'Certificate Sign'

  # A second run keeps the CA and issues a leaf for the new names.
  local ca_before serial_before
  ca_before=$(cat "$d/ca.pem" "$d/ca-key.pem")
  serial_before=$(openssl x509 -in "$d/server.pem" -noout -serial)
  if "$DEPLOY/make-certs.sh" "$d" kv.example.test 192.0.2.7 2>"$TMP/make-certs.log"; then
    check "a rerun keeps ca.pem and ca-key.pem" test "$ca_before" = "$(cat "$d/ca.pem" "$d/ca-key.pem")"
    check "a rerun issues a new leaf" \
      test "$serial_before" != "$(openssl x509 -in "$d/server.pem" -noout -serial)"
    check "the new leaf names kv.example.test and 192.0.2.7" \
      ext_has "$(openssl x509 -in "$d/server.pem" -noout -text)" 'Subject Alternative Name' \
      'DNS:kv.example.test, IP Address:192.0.2.7'
    check "the new leaf verifies against the kept CA" \
      quiet openssl verify -CAfile "$d/ca.pem" -purpose sslserver "$d/server.pem"
  else
    fail "make-certs.sh rerun exited with an error"
    indented "$(cat "$TMP/make-certs.log")"
  fi
  if "$DEPLOY/make-certs.sh" --force "$d" 2>"$TMP/make-certs.log"; then
    check "--force makes a new CA" test "$ca_before" != "$(cat "$d/ca.pem" "$d/ca-key.pem")"
  else
    fail "make-certs.sh --force exited with an error"
  fi
  if "$DEPLOY/make-certs.sh" "$TMP/certs-bad" "not a name" 2>/dev/null; then
    fail "make-certs.sh accepted 'not a name' as a NAME"
  else
    ok "a name that is neither DNS name nor IP is refused"
  fi
}

# ---------------------------------------------------------------------------------------------
# systemd
# ---------------------------------------------------------------------------------------------
systemd_test() {
  echo "== systemd: deploy/kvconnect.service"
  if ! command -v systemd-analyze >/dev/null 2>&1; then
    if [ "${KVC_ALLOW_MISSING_SYSTEMD:-}" = "1" ]; then
      skip "systemd-analyze is missing (KVC_ALLOW_MISSING_SYSTEMD=1)"
    else
      fail "systemd-analyze is missing: apt-get install systemd (or set KVC_ALLOW_MISSING_SYSTEMD=1)"
    fi
    return
  fi
  if [ ! -x "$BIN" ]; then
    fail "no server binary at $BIN (build it, or set KVCONNECT_BIN)"
    return
  fi
  # The copy's ExecStart names the built binary: verify checks that the program exists.
  local dir=$TMP/systemd unit=$TMP/systemd/kvconnect.service
  mkdir -p "$dir"
  sed "s#^ExecStart=/usr/local/bin/kvconnect #ExecStart=$BIN #" "$DEPLOY/kvconnect.service" >"$unit"
  if ! grep -q "^ExecStart=$BIN serve " "$unit"; then
    fail "deploy/kvconnect.service has no 'ExecStart=/usr/local/bin/kvconnect serve ...' line"
    return
  fi
  local out rc
  out=$(systemd-analyze verify "$unit" 2>&1)
  rc=$?
  # Lines naming our unit are about the file (unknown keys, bad values, missing programs).
  # Other lines are about the machine (e.g. no running systemd, other units) and only shown.
  local about_us
  about_us=$(grep -F 'kvconnect.service' <<<"$out")
  if [ $rc -eq 0 ] && [ -z "$about_us" ]; then
    ok "systemd-analyze verify reports nothing about kvconnect.service"
  else
    fail "systemd-analyze verify (exit $rc) complains about kvconnect.service:"
    indented "$out"
  fi
  if [ -n "$out" ] && [ -z "$about_us" ]; then
    note "systemd-analyze verify also said (not about the unit):"
    indented "$out"
  fi
  out=$(systemd-analyze security --offline=yes --no-pager "$unit" 2>&1)
  local score
  score=$(sed -n 's/.*Overall exposure level for kvconnect.service: \([0-9.]*\).*/\1/p' <<<"$out")
  if [ -z "$score" ]; then
    fail "systemd-analyze security --offline=yes printed no exposure level:"
    indented "$out" | tail -5
  elif awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }'; then
    ok "sandbox exposure level $score (at most $MAX_EXPOSURE)"
  else
    fail "sandbox exposure level $score is above $MAX_EXPOSURE; was a protection removed?"
    grep '✗' <<<"$out" | sed 's/^/          /'
  fi
}

# ---------------------------------------------------------------------------------------------
# config + TLS with the real server
# ---------------------------------------------------------------------------------------------
json_valid() {
  if command -v node >/dev/null 2>&1; then
    node -e 'try { JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")) }
             catch (e) { console.error("        " + e.message); process.exit(1) }' "$1"
  elif command -v python3 >/dev/null 2>&1; then
    python3 -m json.tool "$1" >/dev/null
  else
    echo "neither node nor python3 is installed" >&2
    return 1
  fi
}

# wait_ready FILE PID: waits (up to 20 s) until the server PID has written its --ready-file
# FILE, which it does once every listener is bound; fails at once if the server exits.
# The servers here listen on port 0 (the kernel picks a port nobody else holds) and the tests
# read the ports from that file.
wait_ready() {
  local i
  for i in $(seq 1 200); do
    [ -s "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# ready_port FILE KEY: the number KEY (port, tls_port, metrics_port) of a ready file.
ready_port() {
  sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"
}

# Prints the serial of the certificate the server at 127.0.0.1:$1 presents.
served_serial() {
  openssl s_client -connect "127.0.0.1:$1" -servername localhost </dev/null 2>/dev/null |
    openssl x509 -noout -serial 2>/dev/null
}

config_test() {
  echo "== config: deploy/config.example.json"
  local cfg=$DEPLOY/config.example.json
  if json_valid "$cfg"; then
    ok "config.example.json is valid JSON"
  else
    fail "config.example.json is not valid JSON"
    return
  fi
  if [ ! -x "$BIN" ]; then
    fail "no server binary at $BIN (build it, or set KVCONNECT_BIN)"
    return
  fi
  local d=$TMP/certs-serve
  "$DEPLOY/make-certs.sh" "$d" 2>/dev/null || { fail "make-certs.sh failed"; return; }
  local port ready=$TMP/serve.ready
  # The example's addr and certificate paths are for production; flags override them.
  "$BIN" serve --config "$cfg" --addr 127.0.0.1:0 --ready-file "$ready" --data-dir "$TMP/data" \
    --tls-cert "$d/server.pem" --tls-key "$d/server-key.pem" >"$TMP/serve.out" 2>"$TMP/serve.err" &
  server_pid=$!
  if ! wait_ready "$ready" "$server_pid"; then
    fail "kvconnect serve --config deploy/config.example.json with TLS did not start listening"
    note "stderr:"; tail -n 20 "$TMP/serve.err" | sed 's/^/          /'
    return
  fi
  port=$(ready_port "$ready" port)
  if [ -z "$port" ] || [ "$port" -eq 0 ]; then
    fail "the ready file names no port: $(cat "$ready")"
    return
  fi
  ok "kvconnect serve accepts config.example.json (command-line flags override it)"

  local alpn out
  for alpn in h2 http/1.1; do
    out=$(openssl s_client -connect "127.0.0.1:$port" -servername localhost -alpn "$alpn" \
      -CAfile "$d/ca.pem" -verify_return_error -verify_hostname localhost </dev/null 2>&1)
    if grep -q 'Verify return code: 0 (ok)' <<<"$out" && grep -q "ALPN protocol: $alpn" <<<"$out"; then
      ok "TLS with ALPN $alpn; the chain verifies against ca.pem for 'localhost'"
    else
      fail "TLS with ALPN $alpn to 127.0.0.1:$port did not verify or negotiate:"
      grep -E 'Verify return|ALPN|error' <<<"$out" | head -5 | sed 's/^/          /'
    fi
  done
  out=$(openssl s_client -connect "127.0.0.1:$port" -CAfile "$d/ca.pem" -verify_return_error \
    -verify_ip 127.0.0.1 </dev/null 2>&1)
  check "the certificate is valid for the IP address 127.0.0.1" \
    grep -q 'Verify return code: 0 (ok)' <<<"$out"

  # Reload: a new leaf on disk, SIGHUP, and new connections get it.
  local before after=""
  before=$(served_serial "$port")
  "$DEPLOY/make-certs.sh" "$d" 2>/dev/null
  local expected
  expected=$(openssl x509 -in "$d/server.pem" -noout -serial)
  kill -HUP "$server_pid"
  for _ in $(seq 1 50); do
    after=$(served_serial "$port")
    [ "$after" = "$expected" ] && break
    sleep 0.1
  done
  if [ -n "$before" ] && [ "$before" != "$expected" ] && [ "$after" = "$expected" ]; then
    ok "SIGHUP reloads the certificate (what systemctl reload does)"
  else
    fail "after SIGHUP the server presents '$after', expected the new '$expected' (was '$before')"
  fi
  check "the server still runs after SIGHUP" kill -0 "$server_pid"

  kill -TERM "$server_pid"
  local stopped=0
  for _ in $(seq 1 150); do
    kill -0 "$server_pid" 2>/dev/null || { stopped=1; break; }
    sleep 0.1
  done
  if [ $stopped -eq 1 ]; then
    wait "$server_pid"
    local rc=$?
    server_pid=
    check "SIGTERM stops the server with exit status 0 (was $rc)" test $rc -eq 0
  else
    fail "the server did not stop within 15 s of SIGTERM"
  fi
}

# ---------------------------------------------------------------------------------------------
# image: the Dockerfile's runtime packages cover the binary's shared libraries
# ---------------------------------------------------------------------------------------------
image_test() {
  echo "== image: deploy/Dockerfile runtime packages"
  if ! command -v dpkg >/dev/null 2>&1 || ! command -v ldd >/dev/null 2>&1; then
    skip "needs dpkg and ldd (a Debian machine)"
    return
  fi
  if [ ! -x "$BIN" ]; then
    fail "no server binary at $BIN (build it, or set KVCONNECT_BIN)"
    return
  fi
  # Packages of the runtime stage: the apt-get install line after the last FROM.
  local listed
  listed=$(awk '/^FROM/ { s = "" } { s = s " " $0 } END { print s }' "$DEPLOY/Dockerfile" |
    sed 's/\\//g' | grep -o -- '--no-install-recommends[^&]*' | head -1)
  # Only the libraries the binary itself needs (its NEEDED entries): apt installs what those
  # packages depend on. In debian:12-slim already, or sanitizer runtimes that a release build
  # does not use:
  local base=" libc6 libstdc++6 libgcc-s1 zlib1g libasan8 libubsan1 libtsan2 "
  local lib pkg missing=()
  while read -r lib; do
    pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1)
    [ -n "$pkg" ] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1)
    if [ -z "$pkg" ]; then
      missing+=("$lib (no package owns it)")
    elif [[ $base != *" $pkg "* && " $listed " != *" $pkg "* ]]; then
      missing+=("$pkg (for $lib)")
    fi
  done < <(ldd "$BIN" 2>/dev/null | awk -v needed=" $(readelf -d "$BIN" 2>/dev/null |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ') " \
    '$2 == "=>" && $3 ~ /^\// && index(needed, " " $1 " ") { print $3 }')
  if [ ${#missing[@]} -eq 0 ]; then
    ok "the runtime stage installs every library package the binary needs"
  else
    fail "the Dockerfile's runtime stage lacks: ${missing[*]}"
  fi
}

# ---------------------------------------------------------------------------------------------
# health: the image's HEALTHCHECK and the Kubernetes probes against the built server
# ---------------------------------------------------------------------------------------------
health_test() {
  echo "== health: Dockerfile HEALTHCHECK, Kubernetes probe paths"
  if ! command -v python3 >/dev/null 2>&1; then
    skip "needs python3 to read the HEALTHCHECK command"
    return
  fi
  local cmd port data
  # The shell command of `HEALTHCHECK ... CMD ["bash", "-c", "<command>"]`.
  cmd=$(python3 - "$DEPLOY/Dockerfile" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read().replace("\\\n", " ")
m = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])\s*$", text, re.M)
print(json.loads(m.group(1))[2] if m else "")
PY
)
  if [ -z "$cmd" ]; then
    fail "no HEALTHCHECK CMD [\"bash\", \"-c\", ...] in deploy/Dockerfile"
    return
  fi
  data=$TMP/health-data
  mkdir -p "$data"
  local ready=$TMP/health.ready
  "$BIN" serve --addr 127.0.0.1:0 --data-dir "$data" --metrics-addr 127.0.0.1:0 \
    --ready-file "$ready" >"$TMP/health.log" 2>&1 &
  server_pid=$!
  if ! wait_ready "$ready" "$server_pid"; then
    fail "kvconnect serve with --metrics-addr did not start listening"
    indented "$(tail -n 20 "$TMP/health.log")"
    return
  fi
  port=$(ready_port "$ready" metrics_port)
  check "HEALTHCHECK passes against a running server" bash -c "${cmd//9090/$port}"
  local path
  # The probes' paths (httpGet), not the PodMonitors' /metrics, which wants a token.
  for path in $(grep -h -A1 'httpGet:' "$DEPLOY"/k8s/*.yaml | grep -o 'path: /[a-z]*' |
    cut -d' ' -f2 | sort -u); do
    check "Kubernetes probe path $path answers 200 on the metrics listener" \
      quiet curl -sf "http://127.0.0.1:$port$path"
  done
  kill -TERM "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=
  if bash -c "${cmd//9090/$port}" 2>/dev/null; then
    fail "HEALTHCHECK still passes after the server stopped"
  else
    ok "HEALTHCHECK fails once the server is gone"
  fi
}

# ---------------------------------------------------------------------------------------------
# yaml
# ---------------------------------------------------------------------------------------------
yaml_test() {
  echo "== yaml: deploy/compose*.yaml, deploy/k8s/*.yaml"
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import yaml' 2>/dev/null; then
    skip "python3 with PyYAML is not installed (apt-get install python3-yaml)"
    return
  fi
  local f
  for f in "$DEPLOY"/compose*.yaml "$DEPLOY"/k8s/*.yaml; do
    check "${f#"$ROOT"/} parses as YAML" \
      python3 -c 'import sys, yaml; list(yaml.safe_load_all(open(sys.argv[1])))' "$f"
  done
}

# ---------------------------------------------------------------------------------------------
# scripts: the PostgreSQL containers' scripts and the haproxy configuration
# ---------------------------------------------------------------------------------------------
scripts_test() {
  echo "== scripts: deploy/postgres/*.sh, deploy/haproxy.cfg"
  local f
  for f in "$DEPLOY"/postgres/*.sh; do
    check "${f#"$ROOT"/} passes bash -n" bash -n "$f"
  done
  if ! command -v haproxy >/dev/null 2>&1; then
    skip "haproxy is not installed (apt-get install haproxy)"
    return
  fi
  # The node names resolve only inside Compose; haproxy then starts with them disabled.
  local out
  if out=$(haproxy -c -f "$DEPLOY/haproxy.cfg" 2>&1); then
    ok "deploy/haproxy.cfg passes haproxy -c"
  else
    fail "deploy/haproxy.cfg fails haproxy -c"
    indented "$out"
  fi
}

certs_test
systemd_test
config_test
image_test
health_test
yaml_test
scripts_test

echo
echo "deploy_test: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
