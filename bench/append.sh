#!/usr/bin/env bash
# bench/append.sh: the journal's write path (issue 35). On demand only; CI
# never runs it. Through examples/append-rate.rs (which calls
# runs::journal::append, the one function every journal writer uses), in a
# registered run of a home whose run index holds BENCH_RUNS (default 1,000)
# other runs:
#   1. one writer appends BENCH_RECORDS (default 100,000) records to one
#      journal: the median cost of the 100 records ending at #100 and of the
#      100 ending at the last (target: last <= 1.5x first, same run);
#   2. one writer, then 8 writers of 8 runs at once (8 processes), each
#      BENCH_EACH (default 20,000) records: aggregate records/s of the 8
#      over the one's (target >= 1.6x on 2 cores), BENCH_ROUNDS rounds
#      (default 3), alternating, medians; and each writer's CPU time per
#      record (equal for one and eight: they contend for nothing). Each
#      writer runs in a session of its own (setsid), as independent
#      supervisors do: with the kernel's autogroup scheduling a session's
#      processes share one session's CPU, so eight writers started from
#      one shell would get one writer's share of a loaded machine.
# Then `runs list` through the index equals `runs list --from-files`.
# RUNWIRE_BIN: a directory holding runs and examples/append-rate (default:
# cargo build --release). Exit status 0 when the targets held, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
bench_bin --bin runs --example append-rate
rate=$bin/examples/append-rate
[ -x "$rate" ] || die "$rate: no such executable"
[ -x "$bin/runs" ] || die "$bin/runs: no such executable"
work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-bench-append.XXXXXX")
trap 'rm -rf "$work"' EXIT
export HARNESS_HOME=$work/home
records=${BENCH_RECORDS:-100000}
each=${BENCH_EACH:-20000}
rounds=${BENCH_ROUNDS:-3}
others=${BENCH_RUNS:-1000}

register() { # SLUG: prints the run's journal
  "$bin/runs" register --slug "$1" --repo-root "$work/repo" >/dev/null
  echo "$work/repo/runstate/$1.jsonl"
}
for i in $(seq 1 "$others"); do
  "$bin/runs" register --slug "o$i" --repo-root "$work/other" >/dev/null
done
"$bin/runs" reindex >/dev/null
echo "home: $others other runs indexed ($(wc -c <"$HARNESS_HOME/index/runs.jsonl") bytes of index); load: $(cut -d' ' -f1-3 /proc/loadavg)"

rc=0
# 1. Record #100 against record #N of one journal.
line=$("$rate" "$(register big)" "$records")
echo "one_journal $line"
ratio=${line##*last_over_first=}
ratio=${ratio%% *}
if awk -v r="$ratio" 'BEGIN { exit !(r <= 1.5) }'; then echo "one_journal target=1.5 met"; else echo "one_journal target=1.5 MISSED"; rc=1; fi

# 2. One writer against eight writers of eight runs, alternating.
one=()
eight=()
for r in $(seq 1 "$rounds"); do
  for w in 1 8; do
    js=()
    for k in $(seq 1 "$w"); do js+=("$(register "r$r-w$w-$k")"); done
    start=$(date +%s%N)
    pids=()
    k=0
    for j in "${js[@]}"; do
      k=$((k + 1))
      setsid "$rate" "$j" "$each" >"$work/out.$k" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    ns=$(($(date +%s%N) - start))
    cpu=$(cat "$work"/out.* | sed 's/.*cpu_us=\([0-9.]*\).*/\1/' | awk '{ s += $1 } END { printf "%.2f", s / NR }')
    rm -f "$work"/out.*
    per_s=$(awk -v n=$((w * each)) -v ns="$ns" 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
    if [ "$w" = 1 ]; then one+=("$per_s"); else eight+=("$per_s"); fi
    echo "round $r writers=$w records=$((w * each)) ms=$((ns / 1000000)) per_s=$per_s cpu_us_per_record=$cpu"
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m1=$(median "${one[@]}")
m8=$(median "${eight[@]}")
speedup=$(awk -v a="$m8" -v b="$m1" 'BEGIN { printf "%.2f", a / b }')
echo "writers one_per_s=$m1 eight_per_s=$m8 eight_over_one=$speedup cores=$(nproc)"
if awk -v r="$speedup" 'BEGIN { exit !(r >= 1.6) }'; then echo "writers target=1.6 met"; else echo "writers target=1.6 MISSED"; rc=1; fi

# The index was never written by the appends; listings catch up and agree with the files.
if [ "$("$bin/runs" list --page)" = "$("$bin/runs" list --page --from-files)" ]; then
  echo "identical index_vs_files=True"
else
  echo "identical index_vs_files=False"
  rc=1
fi
exit "$rc"
