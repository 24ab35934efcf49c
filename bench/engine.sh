#!/usr/bin/env bash
# bench/engine.sh: everything issue 24 asks of bench/, in one run, against
# one set of release binaries. On demand only; CI never runs it.
#
#   1. fan-out (bench/fanout.sh): server user CPU (system CPU beside it) for
#      1, 10 and 50 clients of one task log of BENCH_FANOUT_MB (default
#      256); target 50 clients <= 1.5x one; and the first frame to a new
#      client of a live task against one already connected (target <= 2x);
#   2. idle sessions (bench/sessions.py): server peak RSS with 64
#      interactive sessions that print 8 MB each after their turn, unrecorded;
#      target under 256 MB;
#   3. the feed (bench/feed.sh, its big-record part, bench/feed-big.py):
#      server peak RSS with 100 feed clients and one 8 MB journal record;
#      target under 128 MB;
#   4. the pipeline (bench/pipeline.sh): normalize-events CPU throughput of
#      this build and of the old one (BENCH_OLD, default f4eef08, built from
#      `git archive`), alternated in the same run; target within 5 %.
# Each part's own output goes to stderr as it runs; the figures are printed
# last, one line each, with the part's verdict. Exit status 1 when any part
# missed its target or failed.
#
# Environment: BENCH_FANOUT_MB (default 256), BENCH_PIPELINE_MB (default 256: CPU time
# is counted in 10 ms ticks, so the 5 % comparison needs a second of it),
# BENCH_OLD, RUNWIRE_BIN (default: cargo build --release), and each part's
# own knobs (see the scripts named above).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
bench_bin --bin runwire-serve --bin runs --bin normalize-events --bin agui-translate --bin sse-encode
export RUNWIRE_BIN="$bin"
mkdir -p "$root/bench/out"
work=$(mktemp -d "$root/bench/out/engine.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "bench: issue 24, one run, binaries in $bin; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
rc=0
part() {
  local name=$1
  shift
  echo "bench: == $name ==" >&2
  if "$@" >"$work/$name.out" 2>"$work/$name.err"; then
    echo ok >"$work/$name.rc"
  else
    echo "MISSED or failed (exit $?)" >"$work/$name.rc"
    rc=1
  fi
  cat "$work/$name.err" "$work/$name.out" >&2
}

part fanout env BENCH_SIZE_MB="${BENCH_FANOUT_MB:-256}" bash "$root/bench/fanout.sh"
part sessions python3 "$root/bench/sessions.py" "$bin" "$work"
part feed env BENCH_BIG_ONLY=1 bash "$root/bench/feed.sh"
part pipeline env BENCH_SIZE_MB="${BENCH_PIPELINE_MB:-256}" BENCH_RSS_MB=0 bash "$root/bench/pipeline.sh"

echo
echo "issue 24, one run ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores shared, load $(cut -d' ' -f1-3 /proc/loadavg) at the end):"
python3 - "$work" <<'PY' || rc=1
import json, re, sys, os
w = sys.argv[1]
def rc(name):
    return open(os.path.join(w, name + ".rc")).read().strip()
def text(name):
    return open(os.path.join(w, name + ".out")).read() + open(os.path.join(w, name + ".err")).read()
def first_json(s):
    i = s.find("{")
    while i >= 0:
        try:
            return json.JSONDecoder().raw_decode(s[i:])[0]
        except ValueError:
            i = s.find("{", i + 1)
    return None
f = first_json(open(os.path.join(w, "fanout.out")).read())
if f:
    cpu = f["cpu"]
    print("fan-out, %s MB task log: server user CPU %s s for %s clients (system %s s); 50/1 = %sx (target 1.5) [%s]" % (
        f["log_mb"], " / ".join(str(c["user_s"]) for c in cpu), " / ".join(str(c["clients"]) for c in cpu),
        " / ".join(str(c["system_s"]) for c in cpu), cpu[-1]["user_over_1_client"], rc("fanout")))
    ff = f["first_frame"]
    print("first frame, live task: connected %s ms, new %s ms: %sx (target 2); new client of a one-line task %s ms; "
          "new while the server refills 10 followers' sockets %s ms (%sx)" % (
        ff["connected_client_first_frame_ms"], ff["new_client_first_frame_ms"], ff["new_over_connected"],
        ff["new_client_of_a_one_line_task_ms"], ff["new_client_while_followers_refill_ms"], ff["busy_new_over_connected"]))
else:
    print("fan-out: no figures [%s]" % rc("fanout"))
s = first_json(open(os.path.join(w, "sessions.out")).read())
if s:
    print("idle sessions: %d sessions printing %d MB each: server peak RSS %s MB (target %d) [%s]" % (
        s["sessions"], s["printed_mb_each"], s["peak_rss_mb"], s["bound_mb"], rc("sessions")))
else:
    print("idle sessions: no figures [%s]" % rc("sessions"))
bad = 0
t = text("feed")
m = [l for l in t.splitlines() if l.startswith("feed_big ")]
kv = dict(w.split("=", 1) for w in m[-1].split()[1:] if "=" in w) if m else {}
if kv:
    print("feed: %s clients, one %s MB journal record: server peak RSS %s MB (target 128), %s MB after; %s of them got the event [%s]" % (
        kv.get("clients"), kv.get("record_mb"), kv.get("peak_rss_mb"), kv.get("rss_after_mb"), kv.get("complete"), rc("feed")))
else:
    print("feed: no figures [%s]" % rc("feed"))
t = text("pipeline")
for l in t.splitlines():
    if l.startswith("normalize-events claude, CPU s") or l.startswith("normalize-events claude of"):
        print("pipeline: " + " ".join(l.split()))
m = re.search(r"normalize-events CPU throughput: ([0-9.]+) of (\S+)'s", t)
if m:
    ok = float(m.group(1)) >= 0.95
    bad |= not ok
    print("pipeline: normalize-events CPU throughput %s of %s's (target at least 0.95): %s [%s]" % (
        m.group(1), m.group(2), "ok" if ok else "MISSED", rc("pipeline")))
else:
    bad = 1
    print("pipeline: no old-build figure [%s]" % rc("pipeline"))
sys.exit(bad)
PY
exit "$rc"
