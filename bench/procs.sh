#!/usr/bin/env bash
# bench/procs.sh: how fast runwire-serve ends runs and their processes, with
# fixtures/escape-wrapper (a wrapper that ignores SIGTERM, forks a child that
# ignores it, and leaves a setsid orphan that ignores it and holds stdout).
# On demand only; CI never runs it (tests/it/procs.rs checks the same bounds).
#   1. A wrapper that lives 0.3 s, then exits 1 without a status line while
#      the orphan holds its stdout: when the POST /agui response ends.
#   2. kill -9 of runwire-serve mid-run: when the last of the three processes
#      is gone (they ignore SIGTERM, so SIGKILL after the 2 s kill grace).
# Environment: BENCH_ROUNDS (default 3); RUNWIRE_BIN, the directory holding
# runwire-serve and runwire-reaper (default: cargo build --release).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${BENCH_ROUNDS:-3}
if [ -z "${RUNWIRE_BIN:-}" ]; then
  (cd "$root" && cargo build --release --quiet --bin runwire-serve --bin runwire-reaper)
  RUNWIRE_BIN=$root/target/release
fi
wrapper=$root/fixtures/escape-wrapper/claude.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

ms() { echo $(($(date +%s%N) / 1000000)); }

# True while any pid listed in $1 runs (a zombie does not count).
alive() {
  local p
  while read -r p; do
    if [ -r "/proc/$p/stat" ] && ! grep -q ') Z ' "/proc/$p/stat"; then
      return 0
    fi
  done <"$1"
  return 1
}

# Starts the server for mode $1; sets srv and port.
start() {
  : >"$dir/pids"
  ESCAPE_PIDS=$dir/pids ESCAPE_MODE=$1 HARNESS_HOME=$dir/home \
    "$RUNWIRE_BIN/runwire-serve" --listen 127.0.0.1:0 --agent claude --agent-cmd "$wrapper" >"$dir/out" 2>/dev/null &
  srv=$!
  for _ in $(seq 100); do
    grep -q listening "$dir/out" && break
    sleep 0.05
  done
  port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/out" | head -1)
}

body='{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}]}'
for round in $(seq "$rounds"); do
  start exit
  t0=$(ms)
  curl -s -o "$dir/resp" -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/agui"
  t1=$(ms)
  grep -q RUN_ERROR "$dir/resp" || echo "round $round: no RUN_ERROR" >&2
  sleep 0.5
  left=none
  if alive "$dir/pids"; then left=SOME; fi
  echo "round $round: wrapper exits at 0.3 s, orphan holds stdout: response ended after $((t1 - t0)) ms; processes left 0.5 s later: $left"
  kill "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true

  start hang
  curl -s -o /dev/null -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/agui" &
  client=$!
  for _ in $(seq 200); do
    [ "$(wc -l <"$dir/pids")" -ge 3 ] && break
    sleep 0.05
  done
  sleep 0.2
  t0=$(ms)
  kill -9 "$srv"
  wait "$srv" 2>/dev/null || true
  while alive "$dir/pids"; do sleep 0.01; done
  t1=$(ms)
  echo "round $round: kill -9 of runwire-serve: all 3 processes gone after $((t1 - t0)) ms (kill grace 2000 ms)"
  kill "$client" 2>/dev/null || true
  wait "$client" 2>/dev/null || true
done
