#!/usr/bin/env bash
# bench/runs.sh: the durable tier of runwire-serve, on loopback. On demand
# only; CI never runs it. Needs python3 (stdlib only) and Linux /proc.
# What it measures is described in bench/runs-client.py: GET /runs over
# 10,000 registered runs, append-to-frame delay on a followed task stream,
# and 1,000 concurrent stream clients on one live task (the server is
# started with --max-connections above that: its default, 256, would
# answer the rest 503), with the server's peak RSS. The listing part also
# times pages (first page of 50, a filtered and counted page, the full
# listing) on a fresh server against floors measured in the same run.
# BENCH_PARTS=m instead measures peak RSS of `runs list` and GET /runs over
# one run with a BENCH_BIG_MB (default 300) MB task log.
#
# Environment: BENCH_PARTS (a: the listing only; m: the big-log memory part only), BENCH_RUNS, BENCH_PAGE_REPEAT, BENCH_BIG_MB, BENCH_LIST_REPEAT, BENCH_LINES, BENCH_INTERVAL_MS,
# BENCH_CLIENTS, BENCH_FAN_LINES (see runs-client.py); RUNWIRE_BIN, the
# directory holding runwire-serve and runs, and examples/listing-floor for the
# listing's baseline (default: cargo build --release; without the example the
# baseline is skipped).
# Exit status 0 when every check passed, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
[ -r /proc/self/status ] || die "needs Linux /proc for the peak RSS"
bench_bin --bin runwire-serve --bin runs --example listing-floor
for b in runwire-serve runs; do
  [ -x "$bin/$b" ] || die "$bin/$b: no such executable"
done
# 1,000 streams are 1,000 sockets on each side.
ulimit -n 8192 2>/dev/null || true
work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-runs.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/runs-client.py" "$bin" "$work"
