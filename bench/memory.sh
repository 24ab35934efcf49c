#!/usr/bin/env bash
# bench/memory.sh: peak RSS of the pipeline filters on inputs built to make
# them grow: one huge streamed message, one huge line, a line just under the
# line cap. On demand only; CI never runs it. Inputs are generated on the fly
# and piped in (never stored), so the run needs no disk space.
#
# For each case it prints the filter's peak RSS (from /usr/bin/time -f %M)
# and checks the documented bound (32 MB for each filter); the exit
# status is 1 if a bound is broken.
#
# Environment:
#   BENCH_MEM_MB   size of the huge message and the huge line, in MiB (default 1024)
#   RUNWIRE_BIN    directory holding the binaries (default: cargo build --release)
# The generators below are called through peak's argument list:
# shellcheck disable=SC2317
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
mb=${BENCH_MEM_MB:-1024}
bound_kb=$((32 * 1000))
case "$mb" in '' | *[!0-9]*) echo "bench: BENCH_MEM_MB must be a whole number" >&2; exit 1 ;; esac
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }

bench_bin --bins

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The line cap (pipe::MAX_LINE), read from the source so the two cannot differ.
cap_mib=$(sed -n 's/^pub const MAX_LINE: usize = \([0-9]*\) << 20;.*/\1/p' "$root/src/util/pipe.rs")
[ -n "$cap_mib" ] || { echo "bench: cannot read MAX_LINE from src/util/pipe.rs" >&2; exit 1; }
cap=$((cap_mib << 20))

# n bytes of the letter a.
letters() { head -c "$1" /dev/zero | tr '\0' a; }

# One claude message streamed in 1 KiB text deltas, $mb MiB in all, then the
# assistant line that repeats it whole (over the cap: skipped and reported),
# then the result.
claude_message() {
  local chunk delta n
  chunk=$(letters 1024)
  delta="{\"type\":\"stream_event\",\"event\":{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"$chunk\"}}}"
  n=$((mb * 1024))
  echo '{"type":"system","subtype":"init","session_id":"s","model":"m"}'
  echo '{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}'
  echo '{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}'
  yes "$delta" | head -n "$n"
  echo '{"type":"stream_event","event":{"type":"content_block_stop","index":0}}'
  printf '{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"'
  letters $((mb << 20))
  printf '"}]}}\n'
  echo '{"type":"stream_event","event":{"type":"message_stop"}}'
  echo '{"type":"result","subtype":"success","is_error":false,"result":"done"}'
}

# A codex legacy message in 1 KiB deltas, $mb MiB in all.
codex_deltas() {
  local chunk
  chunk=$(letters 1024)
  echo '{"id":"1","msg":{"type":"task_started"}}'
  yes "{\"id\":\"1\",\"msg\":{\"type\":\"agent_message_delta\",\"delta\":\"$chunk\"}}" | head -n $((mb * 1024))
  echo '{"id":"1","msg":{"type":"task_complete","last_agent_message":""}}'
}

# One claude assistant line of $1 bytes of text.
claude_line() {
  printf '{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"'
  letters "$1"
  printf '"}]}}\n'
  echo '{"type":"result","subtype":"success","is_error":false,"result":"x"}'
}

# A claude assistant line just under the cap whose text is all escapes
# (every other byte a \n): the parser must unescape it into a copy.
claude_escaped_line() {
  local n=$(((cap - 200) / 2))
  printf '{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"'
  head -c "$n" /dev/zero | tr '\0' n | sed 's/n/\\n/g'
  printf '"}]}}\n'
}

# A codex agent message, and a cursor assistant line, of $1 bytes of text.
codex_line() {
  printf '{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"'
  letters "$1"
  printf '"}}\n'
}
cursor_line() {
  printf '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"'
  letters "$1"
  printf '"}]}}\n'
}

# One events/v1 token_delta line of $1 bytes of text.
event_line() {
  printf '{"v":"events/v1","seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"token_delta","data":{"text":"'
  letters "$1"
  printf '","channel":"text","message":"m"}}\n'
  echo '{"v":"events/v1","seq":2,"ts":"2026-01-01T00:00:00.000Z","type":"turn_end","data":{"ok":true}}'
}

# kB (as /usr/bin/time reports) to MB with one decimal.
mbytes() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1000 }'; }

failed=0
# peak NAME BOUND_KB GENERATOR... -- COMMAND...: runs GENERATOR | COMMAND, prints the peak RSS.
peak() {
  local name=$1 bound=$2
  shift 2
  local gen=()
  while [ "$1" != "--" ]; do gen+=("$1"); shift; done
  shift
  local start=$SECONDS
  "${gen[@]}" | /usr/bin/time -f %M -o "$tmp/rss" "$@" >/dev/null 2>"$tmp/err" || true
  local kb
  kb=$(tail -n 1 "$tmp/rss")
  local verdict=""
  if [ "$bound" -gt 0 ]; then
    if [ "$kb" -le "$bound" ]; then verdict="ok (<= $((bound / 1000)) MB)"; else verdict="OVER $((bound / 1000)) MB"; failed=1; fi
  fi
  printf '%-62s %8s MB  %4ds  %s\n' "$name" "$(mbytes "$kb")" $((SECONDS - start)) "$verdict"
}

echo "bench: peak RSS, ${mb} MiB inputs, line cap ${cap} bytes, binaries in $bin"
ne="$bin/normalize-events"
peak "normalize-events claude: one ${mb} MiB message in deltas" $bound_kb claude_message -- "$ne" claude
peak "normalize-events claude: one ${mb} MiB line" $bound_kb claude_line $((mb << 20)) -- "$ne" claude
peak "normalize-events claude: a line just under the cap, all escapes" $bound_kb claude_escaped_line -- "$ne" claude
peak "normalize-events claude: a line just under the cap, plain" $bound_kb claude_line $((cap - 200)) -- "$ne" claude
peak "normalize-events codex: one ${mb} MiB legacy message in deltas" $bound_kb codex_deltas -- "$ne" codex
peak "normalize-events codex: a line just under the cap" $bound_kb codex_line $((cap - 200)) -- "$ne" codex
peak "normalize-events cursor: a line just under the cap" $bound_kb cursor_line $((cap - 200)) -- "$ne" cursor
peak "normalize-events cursor: one ${mb} MiB line" $bound_kb cursor_line $((mb << 20)) -- "$ne" cursor
peak "agui-translate: one 100 MiB line" $bound_kb event_line $((100 << 20)) -- "$bin/agui-translate"
peak "agui-translate: one ${mb} MiB line" $bound_kb event_line $((mb << 20)) -- "$bin/agui-translate"
peak "agui-translate: a line just under the cap" $bound_kb event_line $((cap - 200)) -- "$bin/agui-translate"
peak "sse-encode: one 100 MiB line" $bound_kb event_line $((100 << 20)) -- "$bin/sse-encode"
peak "sse-encode: one ${mb} MiB line" $bound_kb event_line $((mb << 20)) -- "$bin/sse-encode"
peak "sse-encode: a line just under the cap" $bound_kb event_line $((cap - 200)) -- "$bin/sse-encode"
# The whole pipeline on the streamed message: each stage's own peak.
claude_message | "$ne" claude | /usr/bin/time -f %M -o "$tmp/agui" "$bin/agui-translate" 2>/dev/null |
  /usr/bin/time -f %M -o "$tmp/sse" "$bin/sse-encode" >/dev/null 2>&1 || true
printf '%-62s %8s MB\n' "agui-translate in the pipeline on the ${mb} MiB message" "$(mbytes "$(tail -n 1 "$tmp/agui")")"
printf '%-62s %8s MB\n' "sse-encode in the pipeline on the ${mb} MiB message" "$(mbytes "$(tail -n 1 "$tmp/sse")")"
exit "$failed"
