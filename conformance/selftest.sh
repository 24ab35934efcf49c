#!/usr/bin/env bash
# selftest.sh: proves check.mjs can pass and can fail.
#
# Every samples/*.sse starts with a comment line ": expect: WHAT". WHAT is
# "ok" for a stream that must pass; otherwise the stream must fail and the
# checker's error must contain WHAT. Also checks standard input ("-") and the
# exit status of a mixed run. Needs `npm ci` (or `npm install`) first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

pass=0
fail=0
ok() { pass=$((pass + 1)); printf 'ok    %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf 'FAIL  %s\n' "$1"; }

for f in samples/*.sse; do
  expect=$(head -n 1 "$f" | tr -d '\r' | sed -n 's/^: expect: //p')
  if [ -z "$expect" ]; then
    case "$f" in
      samples/bad-empty.sse) expect="terminal:" ;;
      *) bad "$f: no ': expect:' line"; continue ;;
    esac
  fi
  set +e
  line=$(node check.mjs "$f")
  rc=$?
  set -e
  if [ "$expect" = ok ]; then
    if [ "$rc" -eq 0 ] && printf '%s' "$line" | grep -q '"ok":true'; then ok "$f passes"; else bad "$f should pass: rc=$rc $line"; fi
  else
    if [ "$rc" -eq 1 ] && printf '%s' "$line" | grep -q '"ok":false' && printf '%s' "$line" | grep -qF -- "$expect"; then
      ok "$f fails with '$expect'"
    else
      bad "$f should fail with '$expect': rc=$rc $line"
    fi
  fi
done

# Standard input.
if line=$(node check.mjs - < samples/good-tools.sse) && printf '%s' "$line" | grep -q '"file":"-","ok":true'; then
  ok "stdin passes"
else
  bad "stdin: $line"
fi

# One bad file among good ones fails the whole run, and every file is reported.
set +e
out=$(node check.mjs samples/good-text.sse samples/bad-unterminated.sse samples/good-run-error.sse)
rc=$?
set -e
if [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 3 ]; then ok "mixed run exits 1 with 3 lines"; else bad "mixed run: rc=$rc $out"; fi

# Usage error.
set +e
node check.mjs >/dev/null 2>&1
rc=$?
set -e
if [ "$rc" -eq 2 ]; then ok "no arguments exits 2"; else bad "no arguments: rc=$rc"; fi

echo "selftest: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
