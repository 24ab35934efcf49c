#!/usr/bin/env python3
"""Two or more builds' listing, alternated on one registry: each round
starts every build's runwire-serve afresh (an old build without its own
listing cache, cache/runs-list.index, removed first; the run index,
index/runs.log, is the writers' and stays) and times one
GET PATH to its last byte, the builds' order flipped every other round (the
machine's speed drifts by tens of percent over minutes: only alternation
compares builds). Prints each build's median, quartiles and median over the
first build's.

    python3 bench/listing-ab.py HOME PATH ROUNDS BIN_DIR [BIN_DIR...]

HOME is a registry, for example the one bench/runs-client.py makes in its
work directory (`BENCH_PARTS=a python3 bench/runs-client.py target/release
/tmp/lw` leaves 10,000 runs, indexed, in /tmp/lw/home); each BIN_DIR holds a
runwire-serve."""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import get_timed, start_server, stop  # noqa: E402

def get_ms(port, path):
    t = time.perf_counter()
    end, raw = get_timed(port, path)
    if not raw.startswith(b"HTTP/1.1 200 "):
        sys.exit(f"listing-ab: GET {path}: {raw[:40]!r}")
    return (end - t) * 1000


def main():
    if len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    home, path, rounds, bins = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    index = os.path.join(home, "cache", "runs-list.index")
    times = {b: [] for b in bins}
    for r in range(rounds):
        for b in bins if r % 2 == 0 else bins[::-1]:
            if os.path.exists(index):
                os.remove(index)
            p, port = start_server(b, home)
            times[b].append(get_ms(port, path))
            stop(p)
    base = statistics.median(times[bins[0]])
    for b in bins:
        v = sorted(times[b])
        med = statistics.median(v)
        print(f"{b} median_ms={med:.1f} q1={v[len(v) // 4]:.1f} q3={v[3 * len(v) // 4]:.1f} "
              f"over_first={med / base:.3f}")


main()
