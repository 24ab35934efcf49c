#!/usr/bin/env bash
# bench/serve.sh: latency and concurrency of runwire-serve, on loopback. On
# demand only; CI never runs it. Needs python3 (stdlib only); node with
# conformance/node_modules is used when present.
#
# (a) latency: runwire-serve --agent claude --agent-cmd bench/latency-agent.py.
#     The stub agent prints BENCH_LINES Claude text_delta lines, one every
#     BENCH_INTERVAL_MS, each carrying the CLOCK_MONOTONIC time it was written;
#     `bench/serve-client.py latency` POSTs /agui and, for every
#     TEXT_MESSAGE_CONTENT frame, takes its arrival time minus that send time.
# (b) concurrency: the demo replay (RUNWIRE_REPLAY_DELAY_MS =
#     BENCH_REPLAY_DELAY_MS); BENCH_STREAMS POST /agui at once (asyncio). Every
#     stream must be 200, all frames JSON, RUN_STARTED first and RUN_FINISHED
#     the only terminal event, last. Reports the wall time from the first
#     connect to the last stream's end, and the server's peak RSS (VmHWM from
#     /proc/<pid>/status, read before it is stopped). Three of the bodies then
#     go through conformance/check.mjs (the official client) when node and its
#     packages are there.
#
# Environment:
#   BENCH_LINES            text lines of the latency run (default 500)
#   BENCH_INTERVAL_MS      pause between them (default 10)
#   BENCH_STREAMS          concurrent streams (default 200; the server takes 256 connections)
#   BENCH_REPLAY_DELAY_MS  demo replay pace (default 5)
#   RUNWIRE_BIN            directory holding runwire-serve (default: cargo build --release)
# Exit status 0 when every stream passed, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lines=${BENCH_LINES:-500}
interval=${BENCH_INTERVAL_MS:-10}
streams=${BENCH_STREAMS:-200}
replay_delay=${BENCH_REPLAY_DELAY_MS:-5}

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

for n in "$lines" "$interval" "$streams" "$replay_delay"; do
  case "$n" in '' | *[!0-9]*) die "BENCH_LINES, BENCH_INTERVAL_MS, BENCH_STREAMS and BENCH_REPLAY_DELAY_MS must be whole numbers" ;; esac
done
if [ "$lines" -lt 1 ] || [ "$streams" -lt 1 ]; then die "BENCH_LINES and BENCH_STREAMS must be at least 1"; fi
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
[ -r /proc/self/status ] || die "needs Linux /proc for the peak RSS"

bench_bin --bin runwire-serve
[ -x "$bin/runwire-serve" ] || die "$bin/runwire-serve: no such executable"

work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-serve.XXXXXX")
srv_pid=""
url=""

stop_server() {
  [ -n "$srv_pid" ] || return 0
  kill -TERM "$srv_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$srv_pid" 2>/dev/null || true
  wait "$srv_pid" 2>/dev/null || true
  srv_pid=""
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT

# start_server [ENV=VALUE...] -- ARGS...: runwire-serve on a free loopback
# port; sets srv_pid and url.
start_server() {
  local envs=()
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  : >"$work/srv.out"
  env "${envs[@]}" "$bin/runwire-serve" --listen 127.0.0.1:0 "$@" >"$work/srv.out" 2>"$work/srv.err" &
  srv_pid=$!
  local base=""
  for _ in $(seq 1 100); do
    base=$(sed -n 's/^listening on //p' "$work/srv.out")
    [ -n "$base" ] && break
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$base" ] || die "runwire-serve did not start: $(cat "$work/srv.err")"
  url="$base/agui"
}

# key=value pairs of the client's first line, as "value" for one key.
field() { printf '%s\n' "$2" | head -n 1 | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# (a) latency
echo "bench: latency: $lines lines, one every $interval ms" >&2
start_server LATENCY_LINES="$lines" LATENCY_INTERVAL_MS="$interval" -- \
  --agent claude --agent-cmd "$root/bench/latency-agent.py"
set +e
lat=$(python3 "$root/bench/serve-client.py" latency "$url")
lat_rc=$?
set -e
stop_server
[ "$lat_rc" -eq 0 ] || die "the latency run failed: $lat"

# (b) concurrency
demo_lines=$(wc -l <"$root/fixtures/claude/bb-turn-tools.partial.jsonl")
echo "bench: concurrency: $streams streams of the demo replay, a line every $replay_delay ms" >&2
mkdir -p "$work/samples"
start_server RUNWIRE_REPLAY_DELAY_MS="$replay_delay" --
set +e
conc=$(python3 "$root/bench/serve-client.py" concurrent "$url" "$streams" "$work/samples" 3)
conc_rc=$?
set -e
hwm_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$srv_pid/status")
stop_server
refused=$(field refused_503 "$conc")

check="skipped (no node or conformance/node_modules)"
shopt -s nullglob
samples=("$work"/samples/*.sse)
if command -v node >/dev/null 2>&1 && [ -d "$root/conformance/node_modules/@ag-ui/client" ] && [ "${#samples[@]}" -gt 0 ]; then
  if node "$root/conformance/check.mjs" "${samples[@]}" >"$work/check.jsonl"; then
    check="${#samples[@]} of ${#samples[@]} pass"
  else
    check="FAILED: $(grep -c '"ok":false' "$work/check.jsonl") of ${#samples[@]}"
    conc_rc=1
  fi
fi

printf '\n%-52s %s\n' "measurement" "value"
printf '%-52s %s\n' "latency, agent line -> SSE frame at client: median" "$(field median_ms "$lat") ms"
printf '%-52s %s\n' "latency p99" "$(field p99_ms "$lat") ms"
printf '%-52s %s\n' "latency max" "$(field max_ms "$lat") ms"
printf '%-52s %s\n' "latency frames timed" "$(field frames "$lat") (of $lines lines, every $interval ms)"
printf '%-52s %s\n' "concurrent demo streams passed" "$(field ok "$conc") of $streams (replay delay $replay_delay ms)"
printf '%-52s %s\n' "wall time, first connect to last stream end" "$(field wall_s "$conc") s (one stream alone: $demo_lines lines x $replay_delay ms = $(awk -v n="$demo_lines" -v d="$replay_delay" 'BEGIN { printf "%.2f", n * d / 1000 }') s)"
printf '%-52s %s\n' "slowest first byte, as the one-thread client saw it" "$(field first_byte_max_s "$conc") s"
printf '%-52s %s\n' "streams refused 503 (connection limit)" "${refused:-?}"
printf '%-52s %s\n' "events received in all" "$(field events "$conc")"
printf '%-52s %s\n' "server peak RSS (VmHWM)" "$hwm_kb kB ($(awk -v k="$hwm_kb" 'BEGIN { printf "%.1f", k / 1024 }') MB)"
printf '%-52s %s\n' "official client (check.mjs) on sampled bodies" "$check"
if [ "$conc_rc" -ne 0 ]; then
  printf '%s\n' "$conc" | sed -n 's/^fail: /FAIL /p'
  exit 1
fi
