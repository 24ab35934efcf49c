#!/usr/bin/env bash
# bench/interrupts.sh: the latency from an answer's POST to the resumed
# stream, on runwire-serve --agent claude --interactive. On demand only; CI
# never runs it. Needs python3 (stdlib only).
#
# The agent is bench/interrupt-agent.py (a minimal Claude stand-in with no
# delays: one Bash call per message, asked for with can_use_tool, answered
# by runwire). bench/interrupts-client.py, BENCH_RUNS times on a fresh
# thread: a message whose run ends with the interrupt, then the resume that
# approves it, timed from just before its connect to (a) the first event of
# the resumed stream, (b) the approved call's TOOL_CALL_RESULT, (c) the end.
# Same-run baseline: a GET /healthz round trip before each answer.
#
# Environment:
#   BENCH_RUNS   interrupt/answer pairs (default 200)
#   RUNWIRE_BIN  directory holding runwire-serve (default: cargo build --release)
# Exit status 0 when every resumed run finished, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
runs=${BENCH_RUNS:-200}

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

case "$runs" in '' | *[!0-9]*) die "BENCH_RUNS must be a whole number" ;; esac
[ "$runs" -ge 1 ] || die "BENCH_RUNS must be at least 1"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"

bench_bin --bin runwire-serve
[ -x "$bin/runwire-serve" ] || die "$bin/runwire-serve: no such executable"

work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-interrupts.XXXXXX")
srv_pid=""
cleanup() {
  if [ -n "$srv_pid" ]; then
    kill -TERM "$srv_pid" 2>/dev/null || true
    wait "$srv_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

HARNESS_HOME="$work/home" "$bin/runwire-serve" --listen 127.0.0.1:0 --agent claude --interactive \
  --agent-cmd "$root/bench/interrupt-agent.py" --no-record >"$work/out" 2>"$work/err" &
srv_pid=$!
url=""
for _ in $(seq 1 200); do
  url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$work/out")
  [ -n "$url" ] && break
  kill -0 "$srv_pid" 2>/dev/null || die "runwire-serve exited: $(cat "$work/err")"
  sleep 0.05
done
[ -n "$url" ] || die "runwire-serve printed no address"

echo "bench: $runs interrupt/answer pairs against $url/agui (runwire-serve from $bin)"
python3 "$root/bench/interrupts-client.py" "$url/agui" "$runs"
