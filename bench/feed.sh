#!/usr/bin/env bash
# bench/feed.sh: the change feed (GET /runs/events and runs watch), on
# loopback. On demand only; CI never runs it. Needs python3 (stdlib only)
# and Linux /proc. What it measures is described in bench/feed-client.py:
# the delay from a journal append to the event at a feed client (median,
# p99) against a task stream's append-to-frame delay in the same run, 500
# concurrent feed clients with the server's RSS, and the delay from an
# append to the line `runs watch` prints (with and without a server); then
# (bench/feed-big.py) the server's RSS with 100 feed clients when one 8 MB
# journal record is appended (target: peak under 128 MB).
#
# Environment: BENCH_RUNS, BENCH_LINES, BENCH_INTERVAL_MS, BENCH_CLIENTS,
# BENCH_FAN_LINES, BENCH_FAN_INTERVAL_MS, BENCH_WATCH, BENCH_CATCHUP (see feed-client.py);
# BENCH_BIG_CLIENTS, BENCH_BIG_MB (see feed-big.py); BENCH_BIG_ONLY=1 runs the big-record part alone; RUNWIRE_BIN, the
# directory holding runwire-serve and runs (default: cargo build --release).
# Exit status 0 when every check passed and the 5 ms median targets held, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
[ -r /proc/self/status ] || die "needs Linux /proc for the RSS"
bench_bin --bin runwire-serve --bin runs
for b in runwire-serve runs; do
  [ -x "$bin/$b" ] || die "$bin/$b: no such executable"
done
# 500 feed clients are 500 sockets on each side.
ulimit -n 8192 2>/dev/null || true
work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-feed.XXXXXX")
trap 'rm -rf "$work"' EXIT
rc=0
if [ "${BENCH_BIG_ONLY:-0}" != 1 ]; then
  python3 "$root/bench/feed-client.py" "$bin" "$work" || rc=1
fi
python3 "$root/bench/feed-big.py" "$bin" "$work" || rc=1
exit "$rc"
