#!/usr/bin/env bash
# examples/cluster/make-certs.sh: a private CA and a certificate per NATS
# server, for trying the sample configuration (server-N.conf) or a small
# private cluster. Nothing here is committed: the keys are made fresh, in
# DIR, readable by their owner only.
#
#   ./make-certs.sh DIR HOST1 HOST2 HOST3
#
# Writes DIR/ca.pem (give it to runwire: --cluster-tls-ca), DIR/ca-key.pem
# (keep it offline: it signs servers), and for the Nth host DIR/sN.pem and
# DIR/sN-key.pem (server N's certificate, valid for the host name, as server
# and as client, since the servers' routes check each other). Exit codes:
# 0 done, 2 usage, 1 openssl failed. Needs openssl.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "make-certs.sh: usage: make-certs.sh DIR HOST1 [HOST2 ...]" >&2
  exit 2
fi
dir=$1
shift
command -v openssl >/dev/null || { echo "make-certs.sh: openssl is not on PATH" >&2; exit 1; }
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=runwire example CA" \
  -keyout "$dir/ca-key.pem" -out "$dir/ca.pem" 2>/dev/null
n=0
for host in "$@"; do
  n=$((n + 1))
  ext="$dir/s$n.ext"
  printf 'subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' "$host" >"$ext"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$host" -keyout "$dir/s$n-key.pem" -out "$dir/s$n.csr" 2>/dev/null
  openssl x509 -req -in "$dir/s$n.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" -CAcreateserial \
    -days 365 -extfile "$ext" -out "$dir/s$n.pem" 2>/dev/null
  rm -f "$dir/s$n.csr" "$ext"
done
# The CA certificate is public; clients read it.
chmod 644 "$dir/ca.pem"
echo "make-certs.sh: $dir: ca.pem and $n server certificates"
