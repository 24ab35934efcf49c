#!/usr/bin/env bash
# conformance/newer.sh: the conformance check (run.sh) against the newest
# published @ag-ui/client and @ag-ui/core too, when they are newer than the
# versions pinned in package.json (which stay the contract: the lock file keeps
# them exact). The newer pair is installed into a scratch copy of this
# directory and run.sh checks every fixture with it, as with the pinned pair.
#
# Usage: newer.sh [--version V]   (V: check against V instead of the newest
# published one, e.g. to try the mechanism with the pinned version itself)
#
# Exit: 0 when the newest is the pinned one, or the newer one accepts every
# stream; 1 when it does not; 0 with a "skipped" line when the registry cannot
# be asked (the pinned check is the one that gates).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
conf="$root/conformance"
want=
if [ "${1:-}" = --version ]; then
  want=${2:?--version takes a version}
fi

pinned=$(node -p "require('$conf/package.json').dependencies['@ag-ui/client']")
if [ -z "$want" ]; then
  if ! want=$(timeout 60 npm view @ag-ui/client version 2>/dev/null) || [ -z "$want" ]; then
    echo "conformance-newer: skipped: the npm registry did not say which @ag-ui/client is newest"
    exit 0
  fi
  if [ "$want" = "$pinned" ]; then
    echo "conformance-newer: @ag-ui/client $pinned (pinned) is the newest published: nothing more to check"
    exit 0
  fi
fi

top=$(mktemp -d "${TMPDIR:-/tmp}/runwire-conformance-newer.XXXXXX")
trap 'rm -rf "$top"' EXIT
# The checkers find ../spec beside their own directory.
scratch=$top/conformance
mkdir "$scratch"
ln -s "$root/spec" "$top/spec"
cp "$conf"/*.mjs "$scratch"/
node -e '
  const fs = require("fs");
  const p = JSON.parse(fs.readFileSync(process.argv[1] + "/package.json"));
  p.dependencies["@ag-ui/client"] = process.argv[3];
  p.dependencies["@ag-ui/core"] = process.argv[3];
  fs.writeFileSync(process.argv[2] + "/package.json", JSON.stringify(p, null, 2));
' "$conf" "$scratch" "$want"
echo "conformance-newer: installing @ag-ui/client and @ag-ui/core $want (pinned: $pinned)"
(cd "$scratch" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
got=$(node -p "require('$scratch/node_modules/@ag-ui/client/package.json').version")
echo "conformance-newer: checking with @ag-ui/client $got"
RUNWIRE_CONFORMANCE_DIR=$scratch bash "$conf/run.sh"
