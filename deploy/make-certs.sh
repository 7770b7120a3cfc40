#!/usr/bin/env bash
# Makes a private certificate authority and a TLS server certificate for kvconnect.
#
#   deploy/make-certs.sh [--force] OUT_DIR [NAME ...]
#
# NAMEs are the DNS names and IP addresses clients use to reach the server; they go into the
# certificate's subjectAltName (default: localhost 127.0.0.1 ::1).
#
# Writes into OUT_DIR (created if missing):
#   ca.pem          CA certificate: give it to clients (DENO_CERT, NODE_EXTRA_CA_CERTS)
#   ca-key.pem      CA private key (0600): keep it offline if you can
#   server.pem      server certificate followed by the CA certificate (--tls-cert)
#   server-key.pem  server private key (0600) (--tls-key)
#
# Running it again keeps the CA (clients keep trusting it) and issues a new server certificate,
# e.g. with other NAMEs or before the old one expires; --force makes a new CA as well.
# Deno's TLS stack (rustls/webpki) insists on an X.509 v3 leaf that is not itself a CA and
# names the host in subjectAltName, so the leaf is always signed by the separate CA.
# Needs only the openssl command-line tool.
set -euo pipefail

readonly CA_DAYS=3650    # ten years
readonly LEAF_DAYS=397   # about a year; rerun the script to renew

usage() {
  echo "usage: $0 [--force] OUT_DIR [NAME ...]   (NAME: DNS name or IP; default localhost 127.0.0.1 ::1)" >&2
  exit 2
}

say() { printf 'make-certs: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

force=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    -h | --help) usage ;;
    --) shift; args+=("$@"); break ;;
    -*) say "unknown option $1"; usage ;;
    *) args+=("$1") ;;
  esac
  shift
done
[ ${#args[@]} -ge 1 ] || usage
out=${args[0]}
names=("${args[@]:1}")
[ ${#names[@]} -gt 0 ] || names=(localhost 127.0.0.1 ::1)

command -v openssl >/dev/null 2>&1 || die "the openssl command-line tool is not installed"

# Builds the subjectAltName list: IP entries for addresses, DNS entries for names.
san=()
dns_count=0 ip_count=0
for n in "${names[@]}"; do
  if [[ $n =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ || ( $n == *:* && $n =~ ^[0-9A-Fa-f:.]+$ ) ]]; then
    if [[ $n != *:* ]]; then
      IFS=. read -r -a octets <<<"$n"
      for o in "${octets[@]}"; do [ $((10#$o)) -le 255 ] || die "'$n' is not an IPv4 address"; done
    fi
    ip_count=$((ip_count + 1))
    san+=("IP.$ip_count = $n")
  elif [[ $n =~ ^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$ ]] &&
    [ ${#n} -le 253 ]; then
    dns_count=$((dns_count + 1))
    san+=("DNS.$dns_count = $n")
  else
    die "'$n' is neither a DNS name nor an IP address"
  fi
done

mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/make-certs.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 077

# Our own OpenSSL configuration, so the distribution's openssl.cnf adds nothing unexpected.
cnf=$work/openssl.cnf
{
  echo "[req]"
  echo "distinguished_name = dn"
  echo "prompt = no"
  echo "[dn]"
  echo "[ca_ext]"
  echo "basicConstraints = critical, CA:TRUE"
  echo "keyUsage = critical, keyCertSign, cRLSign"
  echo "subjectKeyIdentifier = hash"
  echo "[leaf_ext]"
  echo "basicConstraints = critical, CA:FALSE"
  echo "keyUsage = critical, digitalSignature"
  echo "extendedKeyUsage = serverAuth"
  echo "subjectKeyIdentifier = hash"
  echo "authorityKeyIdentifier = keyid:always"
  echo "subjectAltName = @san"
  echo "[san]"
  printf '%s\n' "${san[@]}"
} >"$cnf"

# Runs openssl quietly; on failure shows what it said.
ossl() {
  openssl "$@" 2>"$work/openssl.err" || { cat "$work/openssl.err" >&2; die "openssl $1 failed"; }
}
new_ec_key() { ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
serial() { echo "0x$(openssl rand -hex 16)"; }
pubkey_of_cert() { openssl x509 -in "$1" -noout -pubkey; }
pubkey_of_key() { openssl pkey -in "$1" -pubout; }

ca=$out/ca.pem ca_key=$out/ca-key.pem
if [ $force -eq 0 ] && [ -e "$ca" ] && [ -e "$ca_key" ]; then
  [ "$(pubkey_of_cert "$ca")" = "$(pubkey_of_key "$ca_key")" ] ||
    die "$ca and $ca_key do not belong together; use --force to make a new CA"
  openssl x509 -in "$ca" -noout -checkend 86400 >/dev/null ||
    die "$ca expires within a day; use --force to make a new CA (clients must then trust the new ca.pem)"
  say "keeping the existing CA $ca"
else
  if [ $force -eq 0 ] && { [ -e "$ca" ] || [ -e "$ca_key" ]; }; then
    die "only one of $ca and $ca_key exists; use --force to make a new CA"
  fi
  new_ec_key "$work/ca-key.pem"
  # A random suffix keeps several kvconnect CAs apart in one trust store.
  ossl req -new -x509 -config "$cnf" -extensions ca_ext -key "$work/ca-key.pem" \
    -subj "/O=kvconnect/CN=kvconnect private CA $(openssl rand -hex 4)" \
    -days "$CA_DAYS" -sha256 -set_serial "$(serial)" -out "$work/ca.pem"
  chmod 0600 "$work/ca-key.pem"
  chmod 0644 "$work/ca.pem"
  mv -f "$work/ca-key.pem" "$ca_key"
  mv -f "$work/ca.pem" "$ca"
  say "wrote $ca_key (new CA private key, mode 0600)"
  say "wrote $ca (new CA certificate: clients trust this file)"
fi

# The subject CN is informational (clients check subjectAltName); it is limited to 64 bytes.
cn=${names[0]}
[ ${#cn} -le 64 ] || cn="kvconnect server"
new_ec_key "$work/server-key.pem"
ossl req -new -config "$cnf" -key "$work/server-key.pem" -subj "/O=kvconnect/CN=$cn" \
  -out "$work/server.csr"
ossl x509 -req -in "$work/server.csr" -CA "$ca" -CAkey "$ca_key" -set_serial "$(serial)" \
  -days "$LEAF_DAYS" -sha256 -extfile "$cnf" -extensions leaf_ext -out "$work/leaf.pem"
openssl verify -CAfile "$ca" -purpose sslserver "$work/leaf.pem" >/dev/null ||
  die "the new server certificate does not verify against $ca"
cat "$work/leaf.pem" "$ca" >"$work/server.pem"
chmod 0600 "$work/server-key.pem"
chmod 0644 "$work/server.pem"
# Each file is replaced by a rename, so a server reading it (SIGHUP) never sees half a file.
mv -f "$work/server-key.pem" "$out/server-key.pem"
mv -f "$work/server.pem" "$out/server.pem"
say "wrote $out/server-key.pem (server private key, mode 0600)"
say "wrote $out/server.pem (server certificate for ${names[*]}, valid $LEAF_DAYS days, then the CA)"
