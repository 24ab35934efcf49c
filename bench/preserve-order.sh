#!/usr/bin/env bash
# bench/preserve-order.sh: what serde_json's `preserve_order` feature would cost.
# On demand only; CI never runs it.
#
# The official ACP types (the agent-client-protocol-schema crate) turn that
# feature on for the whole build, so every serde_json::Value map becomes an
# IndexMap. This builds normalize-events twice in the same run (as it is, and
# with --features serde_json/preserve_order, in their own target directories),
# normalizes the same large logs with both, and prints the best CPU time of
# BENCH_REPEAT runs each and the ratio, plus whether the output differs (key
# order of the tool arguments passed through).
#
# Logs: the interactive fixtures (codex app-server, ACP) and the claude
# fixtures, each repeated to about BENCH_SIZE_MB (default 32).
#
# Environment: BENCH_SIZE_MB (default 32), BENCH_REPEAT (default 9).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${BENCH_SIZE_MB:-32}
repeat=${BENCH_REPEAT:-9}
out="$root/bench/out/preserve-order"
for n in "$size_mb" "$repeat"; do
  case "$n" in '' | *[!0-9]*) echo "bench: BENCH_SIZE_MB and BENCH_REPEAT must be whole numbers" >&2; exit 1 ;; esac
done
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
mkdir -p "$out"

echo "bench: building normalize-events twice (release)" >&2
(cd "$root" && CARGO_TARGET_DIR="$out/target-base" cargo build --quiet --release --bin normalize-events)
(cd "$root" && CARGO_TARGET_DIR="$out/target-po" cargo build --quiet --release --bin normalize-events \
  --features serde_json/preserve_order)

# make_log NAME GLOB...: the files repeated to size_mb.
make_log() {
  local name=$1
  shift
  local f="$out/$name.jsonl"
  : >"$f"
  while [ "$(stat -c %s "$f")" -lt $((size_mb * 1000000)) ]; do
    cat "$@" >>"$f"
  done
  echo "$f"
}

shopt -s nullglob
codex_log=$(make_log codex-app-server "$root"/fixtures/codex/bb-app-server.*.jsonl)
acp_log=$(make_log acp "$root"/fixtures/cursor/bb-acp.*.jsonl)
claude_log=$(make_log claude "$root"/fixtures/claude/*.jsonl)

# best BIN ADAPTER FILE: the least user+sys seconds of $repeat runs.
best() {
  local i t b=
  for ((i = 0; i < repeat; i++)); do
    t=$(/usr/bin/time -f '%U %S' "$1" "$2" --input "$3" 2>&1 >/dev/null | awk '{print $1 + $2}')
    if [ -z "$b" ] || awk -v t="$t" -v b="$b" 'BEGIN { exit !(t < b) }'; then b=$t; fi
  done
  echo "$b"
}

export SOURCE_DATE_EPOCH=1788000000
printf '\n%-28s %10s %10s %8s  %s\n' "log (adapter)" "base CPU s" "po CPU s" "po/base" "output"
for spec in "codex:$codex_log" "cursor:$acp_log" "claude:$claude_log"; do
  adapter=${spec%%:*}
  file=${spec#*:}
  base=$(best "$out/target-base/release/normalize-events" "$adapter" "$file")
  po=$(best "$out/target-po/release/normalize-events" "$adapter" "$file")
  if cmp -s <("$out/target-base/release/normalize-events" "$adapter" --input "$file") \
    <("$out/target-po/release/normalize-events" "$adapter" --input "$file"); then
    same=identical
  else
    same=differs
  fi
  ratio=$(awk -v p="$po" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f", p / b; else print "n/a" }')
  printf '%-28s %10s %10s %8s  %s\n' "$(basename "$file") ($adapter)" "$base" "$po" "$ratio" "$same"
done
