#!/usr/bin/env bash
# Regenerates the throwaway TLS fixtures of cluster/tests/it/security.rs: a CA,
# a server certificate for 127.0.0.1 and localhost, and a client
# certificate, valid for 100 years. Test-only keys: never use them anywhere else.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days $days \
  -subj "/CN=runwire test CA" -keyout ca.key -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
for who in server client; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=runwire test $who" \
    -keyout $who.key -out $who.csr 2>/dev/null
  if [ "$who" = server ]; then
    san="IP:127.0.0.1,DNS:localhost" eku=serverAuth
  else
    san="DNS:runwire-test-client" eku=clientAuth
  fi
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=%s\nextendedKeyUsage=%s\n' \
    "$san" "$eku" > "$who.ext"
  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days $days \
    -extfile $who.ext -out $who.pem 2>/dev/null
  rm -f $who.csr $who.ext
done
rm -f ca.srl ca.key
