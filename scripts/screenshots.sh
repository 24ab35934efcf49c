#!/bin/sh
# Regenerates the studio's screenshots in docs/screenshots/ (the ones
# docs/REFERENCE.md shows): the browser tests take them (studio/e2e, Chromium
# through playwright-core against the real runwire-serve and the stub
# engines), this copies the shown ones over the old. Needs node, Chromium
# (STUDIO_CHROMIUM, default /usr/bin/chromium) and built binaries:
#
#   cargo build && scripts/screenshots.sh
#
# RUNWIRE_SERVE / RUNWIRE_SUPERVISE name other binaries (default target/debug).
# Exit 0: every shown screenshot regenerated; 1: a test failed or one is missing.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
export RUNWIRE_SERVE="${RUNWIRE_SERVE:-$target/debug/runwire-serve}"
export RUNWIRE_SUPERVISE="${RUNWIRE_SUPERVISE:-$target/debug/runwire-supervise}"
for b in "$RUNWIRE_SERVE" "$RUNWIRE_SUPERVISE"; do
  [ -x "$b" ] || { echo "screenshots.sh: $b: not built (run cargo build)" >&2; exit 1; }
done
shots=$(mktemp -d "${TMPDIR:-/tmp}/runwire-screenshots-XXXXXX")
trap 'rm -rf "$shots"' EXIT
export STUDIO_SCREENSHOTS="$shots"
cd "$root/studio"
[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund >&2
# The views (runs, task, chat, compare) and the approval cards.
node --test --test-concurrency=1 e2e/studio.test.mjs e2e/interrupts.test.mjs >&2 || {
  echo "screenshots.sh: the browser tests failed: no screenshot replaced" >&2
  exit 1
}
cd "$root"
missing=0
for name in $(grep -o 'screenshots/[a-z0-9-]*\.png' docs/REFERENCE.md | sort -u | sed 's|screenshots/||'); do
  if [ -s "$shots/$name" ]; then
    cp "$shots/$name" "docs/screenshots/$name"
    echo "docs/screenshots/$name $(wc -c <"docs/screenshots/$name") bytes"
  else
    echo "screenshots.sh: $name: not taken by the tests" >&2
    missing=1
  fi
done
exit $missing
