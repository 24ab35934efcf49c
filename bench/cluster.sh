#!/usr/bin/env bash
# bench/cluster.sh: issue 29's figures, on a 3-server NATS JetStream cluster
# on loopback (streams and buckets with 3 replicas, as cluster/tests/it does).
# On demand only; CI never runs it. Needs nats-server and python3 (stdlib).
#
# (a) an agent line on a node -> the frame at a client of the hub, beside
#     the same line's frame at a client of the node's own runwire-serve
#     (same run, same lines): median, p90, p99; then five 2,000-line bursts
#     written with no pause (hub median <= 3x the node's, over all of them);
# (b) BENCH_NODES nodes x BENCH_RUNS_PER_NODE runs mirrored by the hub: GET
#     /runs at the hub vs a plain server over the same number of runs in one
#     home (every run, the studio's request, and ?limit=50);
# (c) the node's publishing rate beside a bare async-nats publisher on the
#     same cluster (cluster/examples/publish-rate.rs);
# (d) a feed client's first frame at the hub vs at the node's own server;
# (e) the memory 50 feed clients add to the hub and its children;
# (f) a command's acknowledgement, hub -> node over the channel and NATS.
# What each measures: bench/cluster-client.py.
#
# Environment:
#   BENCH_LINES            lines of (a) (default 300)
#   BENCH_INTERVAL_MS      pause between them (default 20)
#   BENCH_NODES            nodes of (b) (default 20; 0 skips (b))
#   BENCH_RUNS_PER_NODE    runs per node (default 50)
#   BENCH_LIST_REPEAT      requests per listing and first-frame measure (default 21)
#   BENCH_BURST            lines of each of (a)'s bursts, written with no pause (default 2000)
#   BENCH_BURSTS           how many bursts, 0.5 s apart (default 5)
#   BENCH_ACKS             control requests of (f) (default 200)
#   RUNWIRE_BIN            directory holding runwire-serve, runwire-cluster and
#                          examples/publish-rate (default: cargo build --release)
# Exit status 0 when every part ran, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

for n in "${BENCH_LINES:-300}" "${BENCH_INTERVAL_MS:-20}" "${BENCH_NODES:-20}" "${BENCH_RUNS_PER_NODE:-50}" "${BENCH_LIST_REPEAT:-21}" "${BENCH_BURST:-2000}" "${BENCH_BURSTS:-5}" "${BENCH_ACKS:-200}"; do
  case "$n" in '' | *[!0-9]*) die "BENCH_LINES, BENCH_INTERVAL_MS, BENCH_NODES, BENCH_RUNS_PER_NODE, BENCH_LIST_REPEAT, BENCH_BURST, BENCH_BURSTS and BENCH_ACKS must be whole numbers" ;; esac
done
command -v nats-server >/dev/null 2>&1 || die "nats-server is not installed (apt-get install nats-server)"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"

bench_bin --workspace --bin runwire-serve --bin runwire-cluster --example publish-rate
for b in runwire-serve runwire-cluster examples/publish-rate; do
  [ -x "$bin/$b" ] || die "$bin/$b: no such executable"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-cluster.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/cluster-client.py" "$bin" "$work"
