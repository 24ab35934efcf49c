#!/usr/bin/env bash
# bench/pipeline.sh: throughput and memory of the claude pipeline. On demand
# only; CI never runs it.
#
# Builds a large Claude Code log by concatenating fixtures/claude/*.jsonl
# again and again into bench/out/, then times, on that same file in the same
# run:
#   1. normalize-events claude
#   2. normalize-events claude | agui-translate | sse-encode
#   3. the same normalization in jq (bench/claude.jq)
# and prints wall time, MB/s (and normalize-events' CPU time: its one-core
# throughput), events written, and the normalize/jq speed
# ratio. Last, it streams a much larger input (generated on the fly, never
# stored) into normalize-events under /usr/bin/time to read its peak RSS.
#
# Environment:
#   BENCH_SIZE_MB   size of the timed log (default 64; at least 50 is the point)
#   BENCH_RSS_MB    size streamed for the peak-RSS run (default 1024; 0 skips it)
#   BENCH_REPEAT    runs of each Rust measurement, best kept (default 3; jq runs once);
#                   the turns against BENCH_OLD report the median of as many
#                   runs of each build, and their spread (fastest..slowest)
#   BENCH_FIXTURES  directory of claude logs to repeat (default fixtures/claude)
#   RUNWIRE_BIN     directory holding the binaries (default: cargo build --release)
#   BENCH_OLD       commit whose normalize-events CPU time is measured beside
#                   this build's, in turns, in the same run (default f4eef08;
#                   "none" skips it); built once from `git archive` into
#                   bench/out/old-COMMIT/ with a target dir of its own
#   BENCH_OLD_BIN   that commit's normalize-events, built elsewhere (e.g. a
#                   `git worktree` with its own CARGO_TARGET_DIR): used as is
#   JQ              jq binary (default jq)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
size_mb=${BENCH_SIZE_MB:-64}
rss_mb=${BENCH_RSS_MB:-1024}
repeat=${BENCH_REPEAT:-3}
fixtures=${BENCH_FIXTURES:-$root/fixtures/claude}
jq=${JQ:-jq}
out="$root/bench/out"

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

for n in "$size_mb" "$rss_mb" "$repeat"; do
  case "$n" in '' | *[!0-9]*) die "BENCH_SIZE_MB, BENCH_RSS_MB and BENCH_REPEAT must be whole numbers" ;; esac
done
[ "$repeat" -ge 1 ] || die "BENCH_REPEAT must be at least 1"
[ "$size_mb" -ge 1 ] || die "BENCH_SIZE_MB must be at least 1"
command -v "$jq" >/dev/null 2>&1 || die "jq is not installed (apt-get install jq)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"

shopt -s nullglob
logs=("$fixtures"/*.jsonl)
[ "${#logs[@]}" -gt 0 ] || die "no claude logs in $fixtures (set BENCH_FIXTURES)"

bench_bin --bin normalize-events --bin agui-translate --bin sse-encode

# The old build (BENCH_OLD), once, in a target dir of its own: a crate's
# artifacts are named alike in both trees, so a shared one would mix them.
old=${BENCH_OLD:-f4eef08}
old_bin=""
if [ "$old" != none ] && [ -n "${BENCH_OLD_BIN:-}" ]; then
  old_bin=$BENCH_OLD_BIN
  [ -x "$old_bin" ] || die "BENCH_OLD_BIN=$old_bin: no such executable"
elif [ "$old" != none ]; then
  old_bin="$out/old-$old/normalize-events"
  if [ ! -x "$old_bin" ]; then
    echo "bench: building normalize-events of $old (its own target dir: minutes, once)" >&2
    rm -rf "$out/old-$old/src"
    mkdir -p "$out/old-$old/src"
    git -C "$root" archive "$old" | tar -x -C "$out/old-$old/src"
    # Its own workspace: bench/out/ lies under this one's, and cargo would
    # otherwise take it for a member that is not listed.
    grep -q '^\[workspace\]' "$out/old-$old/src/Cargo.toml" || printf '\n[workspace]\n' >>"$out/old-$old/src/Cargo.toml"
    (cd "$out/old-$old/src" && CARGO_TARGET_DIR="$out/old-$old/target" cargo build --quiet --release --bin normalize-events)
    cp "$out/old-$old/target/release/normalize-events" "$old_bin"
  fi
fi
if [ -n "$old_bin" ] && cmp -s "$old_bin" "$bin/normalize-events"; then
  die "$bin/normalize-events is the old build's"
fi
for b in normalize-events agui-translate sse-encode; do
  [ -x "$bin/$b" ] || die "$bin/$b: no such executable"
done

mkdir -p "$out"

# One pass over every fixture, each ending in a newline, then the big log.
# The wrappers' own "runwire.status" lines (the agent process exited) are
# left out: each would end the AG-UI run, and agui-translate would drop all
# that follows, leaving the pipeline measurement with nothing to translate.
unit="$out/claude-unit.jsonl"
: >"$unit"
for f in "${logs[@]}"; do
  grep -v '"type":[[:space:]]*"runwire[.]status"' "$f" >>"$unit" || true
  if [ -s "$unit" ] && [ "$(tail -c 1 "$unit" | od -An -tx1 | tr -d ' ')" != "0a" ]; then
    echo >>"$unit"
  fi
done
unit_bytes=$(stat -c %s "$unit")
[ "$unit_bytes" -gt 0 ] || die "the fixtures in $fixtures are empty"

log="$out/claude-${size_mb}MB.jsonl"
want=$((size_mb * 1024 * 1024))
if [ ! -f "$log" ] || [ "$(stat -c %s "$log")" -lt "$want" ] || ! cmp -s "$unit" "$out/.unit-of-$size_mb"; then
  echo "bench: writing $log" >&2
  cp "$unit" "$log"
  # Double until at least half way, then top up one unit at a time.
  while [ $(($(stat -c %s "$log") * 2)) -le "$want" ]; do
    cat "$log" "$log" >"$log.tmp"
    mv "$log.tmp" "$log"
  done
  while [ "$(stat -c %s "$log")" -lt "$want" ]; do
    cat "$unit" >>"$log"
  done
  cp "$unit" "$out/.unit-of-$size_mb"
fi
log_bytes=$(stat -c %s "$log")
log_mb=$(awk -v b="$log_bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
log_lines=$(wc -l <"$log")

now_ns() { date +%s%N; }

# best_of N CMD...: runs CMD N times (stdin, stdout as given by the caller's
# redirections inside CMD), prints the best wall time in seconds. A status
# above 1 (1 = input lines flagged) fails the benchmark.
best_of() {
  local n=$1 best="" t0 t1 rc
  shift
  for ((i = 0; i < n; i++)); do
    t0=$(now_ns)
    set +e
    "$@"
    rc=$?
    set -e
    t1=$(now_ns)
    [ "$rc" -le 1 ] || die "'$*' exited $rc"
    if [ -z "$best" ] || [ $((t1 - t0)) -lt "$best" ]; then best=$((t1 - t0)); fi
  done
  awk -v ns="$best" 'BEGIN { printf "%.3f", ns / 1e9 }'
}

run_normalize() { "$bin/normalize-events" claude <"$log" >"$out/normalize.jsonl" 2>"$out/normalize.stderr"; }

# cpu_best_of N: the least CPU time (user + system) normalize-events needs for
# the log: MB per CPU second is its one-core throughput, and unlike wall time it
# barely moves when other work shares the machine.
cpu_best_of() {
  local n=$1 exe=${2:-$bin/normalize-events} best="" t
  for ((i = 0; i < n; i++)); do
    # 1 is input lines flagged (the fixtures hold a few bad lines on purpose), as in best_of.
    local rc=0
    /usr/bin/time -f '%U %S' -o "$out/cpu.txt" "$exe" claude <"$log" >/dev/null 2>/dev/null || rc=$?
    [ "$rc" -le 1 ] || die "$exe exited $rc"
    t=$(tail -n 1 "$out/cpu.txt" | awk '{ printf "%.3f", $1 + $2 }')
    if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
  done
  echo "$best"
}

# one_run EXE: one normalize-events run over the log: "CPU-seconds wall-seconds".
one_run() {
  local exe=$1 rc=0 t0 t1
  t0=$(now_ns)
  /usr/bin/time -f '%U %S' -o "$out/cpu.txt" "$exe" claude <"$log" >/dev/null 2>/dev/null || rc=$?
  t1=$(now_ns)
  [ "$rc" -le 1 ] || die "$exe exited $rc"
  tail -n 1 "$out/cpu.txt" | awk -v ns=$((t1 - t0)) '{ printf "%.3f %.3f\n", $1 + $2, ns / 1e9 }'
}

# stats FILE COLUMN: "median fastest slowest" of a column of numbers.
stats() {
  awk -v c="$2" '{ print $c }' "$1" | sort -g | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.3f %.3f %.3f\n", m, v[1], v[NR] }'
}

# cpu_turns N: this build's and the old build's normalize-events, N runs
# each in turns (new, old, new, old, ...) so load that comes and goes hits
# both alike; every run's CPU and wall time go to turns-new.txt and
# turns-old.txt. Prints the median CPU time of each (new, old).
cpu_turns() {
  local n=$1
  : >"$out/turns-new.txt"
  : >"$out/turns-old.txt"
  for ((j = 0; j < n; j++)); do
    one_run "$bin/normalize-events" >>"$out/turns-new.txt"
    one_run "$old_bin" >>"$out/turns-old.txt"
  done
  echo "$(stats "$out/turns-new.txt" 1 | cut -d' ' -f1) $(stats "$out/turns-old.txt" 1 | cut -d' ' -f1)"
}
run_pipeline() {
  "$bin/normalize-events" claude <"$log" 2>/dev/null | "$bin/agui-translate" 2>"$out/pipeline.stderr" |
    "$bin/sse-encode" >"$out/pipeline.sse"
  local rc=("${PIPESTATUS[@]}")
  [ "${rc[0]}" -le 1 ] && [ "${rc[1]}" -le 1 ] && [ "${rc[2]}" -le 1 ] || return 2
}
run_jq() { "$jq" -n -c -R --arg now "2026-01-01T00:00:00.000Z" -f "$root/bench/claude.jq" <"$log" >"$out/jq.jsonl"; }

mbps() { awk -v b="$log_bytes" -v s="$1" 'BEGIN { if (s > 0) printf "%.1f", b / 1048576 / s; else print "inf" }'; }

echo "bench: input $log: $log_mb MB, $log_lines lines, ${#logs[@]} fixtures repeated" >&2
echo "bench: normalize-events (best of $repeat)" >&2
t_norm=$(best_of "$repeat" run_normalize)
echo "bench: pipeline (best of $repeat)" >&2
t_pipe=$(best_of "$repeat" run_pipeline)
c_old=""
if [ -n "$old_bin" ]; then
  echo "bench: normalize-events, this build and $old's in turns ($repeat runs each, medians)" >&2
  read -r c_norm c_old < <(cpu_turns "$repeat")
else
  echo "bench: normalize-events CPU time (best of $repeat)" >&2
  c_norm=$(cpu_best_of "$repeat")
fi
echo "bench: jq (once; this is the slow one)" >&2
t_jq=$(best_of 1 run_jq)

ev_norm=$(wc -l <"$out/normalize.jsonl")
ev_pipe=$(grep -c '^data:' "$out/pipeline.sse" || true)
ev_jq=$(wc -l <"$out/jq.jsonl")

printf '\ninput: %s (%s MB, %s lines)\n\n' "${log#"$root"/}" "$log_mb" "$log_lines"
printf '%-46s %9s %9s %10s\n' "measurement" "wall s" "MB/s" "records"
printf '%-46s %9s %9s %10s\n' "normalize-events claude" "$t_norm" "$(mbps "$t_norm")" "$ev_norm"
printf '%-46s %9s %9s %10s\n' "normalize-events claude, CPU s (one core)" "$c_norm" "$(mbps "$c_norm")" "$ev_norm"
if [ -n "$c_old" ]; then
  printf '%-46s %9s %9s %10s\n' "normalize-events claude of $old, CPU s" "$c_old" "$(mbps "$c_old")" ""
fi
printf '%-46s %9s %9s %10s\n' "normalize-events | agui-translate | sse-encode" "$t_pipe" "$(mbps "$t_pipe")" "$ev_pipe"
printf '%-46s %9s %9s %10s\n' "jq -f bench/claude.jq ($("$jq" --version))" "$t_jq" "$(mbps "$t_jq")" "$ev_jq"
if [ -s "$out/pipeline.stderr" ]; then
  printf '\nnote: agui-translate said: %s\n' "$(head -n 1 "$out/pipeline.stderr")"
fi
if [ -n "$c_old" ]; then
  # The turns, both builds: medians and spread (fastest..slowest), CPU and wall.
  printf '\nturns, %s runs each (median, fastest..slowest, seconds; MB/s of the median):\n' "$repeat"
  for which in new old; do
    read -r cm cf cs < <(stats "$out/turns-$which.txt" 1)
    read -r wm wf ws < <(stats "$out/turns-$which.txt" 2)
    name=$([ "$which" = new ] && echo "this build" || echo "$old")
    printf '  %-12s CPU %s (%s..%s) %s MB/s   wall %s (%s..%s) %s MB/s\n' "$name" \
      "$cm" "$cf" "$cs" "$(mbps "$cm")" "$wm" "$wf" "$ws" "$(mbps "$wm")"
  done
  read -r wn _ < <(stats "$out/turns-new.txt" 2)
  read -r wo _ < <(stats "$out/turns-old.txt" 2)
  printf '\nnormalize-events throughput, median of %s: CPU %s, wall %s of %s'"'"'s (target: at least 0.95)\n' "$repeat" \
    "$(awk -v n="$c_norm" -v o="$c_old" 'BEGIN { if (n > 0) printf "%.3f", o / n; else print "inf" }')" \
    "$(awk -v n="$wn" -v o="$wo" 'BEGIN { if (n > 0) printf "%.3f", o / n; else print "inf" }')" "$old"
fi
ratio=$(awk -v a="$t_jq" -v b="$t_norm" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "inf" }')
printf '\nnormalize/jq throughput ratio: %sx (normalize-events is %sx as fast as jq)\n' "$ratio" "$ratio"

if [ "$rss_mb" -gt 0 ]; then
  # Stream rss_mb of input without storing it: the log, repeated, through a pipe.
  reps=$(((rss_mb * 1048576 + log_bytes - 1) / log_bytes))
  streamed_mb=$(awk -v b="$log_bytes" -v r="$reps" 'BEGIN { printf "%.0f", b * r / 1048576 }')
  echo "bench: streaming $streamed_mb MB into normalize-events for peak RSS" >&2
  t0=$(now_ns)
  set +e
  for ((i = 0; i < reps; i++)); do cat "$log"; done |
    /usr/bin/time -f '%M' -o "$out/rss.txt" "$bin/normalize-events" claude >/dev/null
  rc=("${PIPESTATUS[@]}")
  set -e
  t1=$(now_ns)
  [ "${rc[1]}" -le 1 ] || die "normalize-events exited ${rc[1]} on the streamed input"
  rss_kb=$(tail -n 1 "$out/rss.txt")
  secs=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
  printf 'peak RSS of normalize-events claude on %s MB streamed: %s KB (%.1f MB), wall %s s, %s MB/s\n' \
    "$streamed_mb" "$rss_kb" "$(awk -v k="$rss_kb" 'BEGIN { print k / 1024 }')" "$secs" \
    "$(awk -v m="$streamed_mb" -v s="$secs" 'BEGIN { if (s > 0) printf "%.1f", m / s; else print "inf" }')"
fi
