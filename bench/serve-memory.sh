#!/usr/bin/env bash
# bench/serve-memory.sh: runwire-serve's memory with task-stream clients, on
# loopback. On demand only; CI never runs it. Needs python3 (stdlib only)
# and Linux /proc. What it measures is described in bench/serve-memory.py:
# 10 clients following a 1 GB task log (against 1 client, same run), 4
# clients on one 150 MB message, and a client that reads nothing while the
# log grows. The logs are generated on the fly in a temporary directory and
# removed at the end (about BENCH_LOG_MB of disk while it runs).
#
# Environment: BENCH_PARTS, BENCH_LOG_MB, BENCH_STREAM_CLIENTS, BENCH_RSS_LIMIT_MB, BENCH_HUGE_MB,
# BENCH_HUGE_CLIENTS, BENCH_STALL_MB (see serve-memory.py); RUNWIRE_BIN, the
# directory holding runwire-serve (default: cargo build --release).
# Exit status 0 when every check passed, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
[ -r /proc/self/status ] || die "needs Linux /proc for the peak RSS"
bench_bin --bin runwire-serve
[ -x "$bin/runwire-serve" ] || die "$bin/runwire-serve: no such executable"
work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-serve-memory.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/serve-memory.py" "$bin" "$work"
