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
# The listing part compares this build with an old one in the same run:
# BENCH_OLD_REV (a git revision; default c42e5cc, the last with the listing
# before the run index) is built here (`git archive` into the work
# directory, `cargo build --release` with the same target directory, its
# binaries copied out); or BENCH_OLD_BIN names a directory holding an old
# runwire-serve; BENCH_OLD_REV=none skips the comparison.
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
work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-runs.XXXXXX")
trap 'rm -rf "$work"' EXIT
bench_bin --bin runwire-serve --bin runs --example listing-floor
for b in runwire-serve runs; do
  [ -x "$bin/$b" ] || die "$bin/$b: no such executable"
done
old_rev=${BENCH_OLD_REV:-c42e5cc}
if [ -z "${BENCH_OLD_BIN:-}" ] && [ "$old_rev" != none ] && [ "${BENCH_PARTS:-abc}" != m ]; then
  # This build's binaries copied out, then the old build in the same target
  # directory (its dependencies are shared; the crate itself, at another
  # path, is built apart), its binaries copied out too.
  command -v git >/dev/null 2>&1 || die "git is not installed (or set BENCH_OLD_BIN, or BENCH_OLD_REV=none)"
  mkdir -p "$work/new-bin/examples" "$work/old-src" "$work/old-bin"
  cp "$bin/runwire-serve" "$bin/runs" "$work/new-bin/"
  if [ -x "$bin/examples/listing-floor" ]; then cp "$bin/examples/listing-floor" "$work/new-bin/examples/"; fi
  bin="$work/new-bin"
  git -C "$root" archive "$old_rev" | tar -x -C "$work/old-src" || die "git archive $old_rev failed"
  target=${CARGO_TARGET_DIR:-$root/target}
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  echo "bench: cargo build --release (old build, $old_rev)" >&2
  (cd "$work/old-src" && CARGO_TARGET_DIR="$target" cargo build --quiet --release --bin runwire-serve --bin runs) ||
    die "building $old_rev failed"
  cp "$target/release/runwire-serve" "$target/release/runs" "$work/old-bin/"
  export BENCH_OLD_BIN="$work/old-bin"
fi
"$bin/runs" reindex --help >/dev/null 2>&1 || die "$bin/runs is not this build (no reindex)"
# 1,000 streams are 1,000 sockets on each side.
ulimit -n 8192 2>/dev/null || true
python3 "$root/bench/runs-client.py" "$bin" "$work"
