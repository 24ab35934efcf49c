#!/usr/bin/env bash
# bench/supervise.sh: live control through runwire-serve to runwire-supervise,
# on loopback, with the stub engines. On demand only; CI never runs it.
# Needs python3 (stdlib only) and Linux /proc. What it measures is described
# in bench/supervise-client.py: the round trip of a control verb (median),
# and the time from a kill to the task's process group being gone.
#
# Environment: BENCH_VERBS, BENCH_KILLS (see supervise-client.py);
# RUNWIRE_BIN, the directory holding runwire-serve and runwire-supervise
# (default: cargo build --release). Exit status 0 when every check passed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
bench_bin --bin runwire-serve --bin runwire-supervise
for b in runwire-serve runwire-supervise; do
  [ -x "$bin/$b" ] || die "$bin/$b: no such executable"
done
# Short: the control socket path must fit in a unix socket address.
work=$(mktemp -d /tmp/rwsb.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/supervise-client.py" "$bin" "$work" "$root"
