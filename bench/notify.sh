#!/usr/bin/env bash
# bench/notify.sh: `runs notify` on loopback. On demand only; CI never runs
# it. Needs python3 (stdlib only). What it measures is described in
# bench/notify-client.py: the delay from a journal's input request (the
# interrupt raised) to the signed webhook delivery (median and p99; targets
# 5 ms and 50 ms), then 1,000 events appended while the receiver is down,
# all delivered once it is up, none twice.
#
# Environment: BENCH_NOTIFY, BENCH_INTERVAL_MS, BENCH_BACKLOG, BENCH_DOWN_S
# (see notify-client.py); RUNWIRE_BIN, the directory holding runs (default:
# cargo build --release).
# Exit status 0 when every check passed and the targets held, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
bench_bin --bin runs
[ -x "$bin/runs" ] || die "$bin/runs: no such executable"
work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-notify.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/notify-client.py" "$bin" "$work"
