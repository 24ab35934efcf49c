#!/usr/bin/env python3
"""bench/fanout-client.py: the work of bench/fanout.sh (stdlib only).

  fanout-client.py BIN_DIR WORK_DIR LOG   (BENCH_BASELINE_BIN: a build to compare with)

(a) Server CPU for 1, 10 and 50 clients (BENCH_CLIENTS, comma-separated) of
    one task stream over LOG (a finished task: it ends in a status line):
    for each count, a fresh runwire-serve; all clients connect at once and
    read to the end; the server's user and system CPU (/proc/PID/stat
    utime, stime) over the reads. Every client must get the same number of
    frames, the last one the exit event. Ratio: user CPU over that of 1 client.
(b) First frame of a live task (BENCH_LATENCY_ROUNDS rounds, default 20,
    median): an already connected client of a task whose log is empty,
    from the append of its first line to that line's frame; and a new
    client of a live task whose log holds LOG's lines (no status line)
    while 10 clients follow it, from its connect to its first frame. Both
    are measured with the server idle (no CPU used for 50 ms: the followers
    stalled on their full sockets). Beside them, the floor of any new client
    (one of a task of one line), and a new client right after the 10
    followers were drained, while the server refills their sockets (the
    same ratio under that load: CPU shared with them, on a small machine).
Prints one JSON object.
"""

import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def register(bin_dir, home, base, slug, log_src):
    """A run with one claude task `t` whose log is `log_src`'s bytes (None: empty)."""
    rs = os.path.join(base, slug, "runstate")
    os.makedirs(rs, exist_ok=True)
    with open(os.path.join(rs, f"{slug}.plan.json"), "w") as f:
        f.write('{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"}]}')
    log = os.path.join(rs, f"{slug}.t.log")
    if log_src is None:
        open(log, "w").close()
    else:
        if os.path.exists(log):
            os.unlink(log)
        os.link(log_src, log)
    out = subprocess.run(
        [os.path.join(bin_dir, "runs"), "register", "--slug", slug, "--repo-root", os.path.join(base, slug)],
        env={**os.environ, "HARNESS_HOME": home},
        check=True,
        capture_output=True,
    )
    return json.loads(out.stdout.splitlines()[0])["runId"], log


def serve(bin_dir, home):
    p = subprocess.Popen(
        [os.path.join(bin_dir, "runwire-serve"), "--listen", "127.0.0.1:0", "--max-connections", "200"],
        env={**os.environ, "HARNESS_HOME": home},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    line = p.stdout.readline().decode()
    return p, int(line.strip().rsplit(":", 1)[1])


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def connect(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    return s


def read_all(port, path, n):
    """n clients read the stream to its end at once: (frames, tail) per client."""
    sel = selectors.DefaultSelector()
    state = {}
    for _ in range(n):
        s = connect(port, path)
        s.setblocking(False)
        state[s] = [0, b""]
        sel.register(s, selectors.EVENT_READ)
    buf = bytearray(1 << 20)
    left = n
    while left:
        for key, _ in sel.select(timeout=60):
            s = key.fileobj
            k = s.recv_into(buf)
            st = state[s]
            if k == 0:
                sel.unregister(s)
                s.close()
                left -= 1
                continue
            chunk = bytes(buf[:k])
            # A frame's blank line can straddle two reads: its first LF is the last byte kept.
            st[0] += (st[1][-1:] + chunk).count(b"\n\n")
            st[1] = (st[1] + chunk)[-4096:]
    return list(state.values())


def part_a(bin_dir, work, log, counts):
    home = os.path.join(work, "home-a")
    rid, _ = register(bin_dir, home, work, "fan", log)
    path = f"/runs/{rid}/tasks/t/stream"
    rows = []
    for n in counts:
        p, port = serve(bin_dir, home)
        try:
            u0, s0 = cpu(p.pid)
            t0 = time.monotonic()
            got = read_all(port, path, n)
            wall = time.monotonic() - t0
            u1, s1 = cpu(p.pid)
        finally:
            p.terminate()
            p.wait()
        frames = {g[0] for g in got}
        complete = all(b'"type":"exit"' in g[1] for g in got)
        rows.append({"clients": n, "user_s": round(u1 - u0, 2), "system_s": round(s1 - s0, 2),
                     "wall_s": round(wall, 2), "frames_each": sorted(frames), "all_complete": complete})
    base = rows[0]["user_s"] or 0.01
    for r in rows:
        r["user_over_1_client"] = round(r["user_s"] / base, 2)
    return rows


def first_frame(s, deadline=30):
    """Seconds until the first data frame arrives (after the head)."""
    s.settimeout(deadline)
    data = b""
    while b"\ndata: " not in data and not data.startswith(b"data: "):
        k = s.recv(65536)
        if not k:
            raise RuntimeError("stream ended before a frame")
        data += k
        head, _, data_rest = data.partition(b"\r\n\r\n")
        if _:
            data = b"\n" + data_rest if not data_rest.startswith(b"data") else data_rest
    return time.monotonic()


LINE = ('{"type":"assistant","message":{"id":"m%d","role":"assistant","content":'
        '[{"type":"text","text":"hello %d"}]}}\n')


def settle(pid, still=0.05, most=2.0):
    """Waits (up to `most` s) until the server used no CPU for `still` s."""
    end = time.monotonic() + most
    last = cpu(pid)
    while time.monotonic() < end:
        time.sleep(still)
        now = cpu(pid)
        if now == last:
            return
        last = now


def live_history(work, log):
    """The big log without its status line: a task still running."""
    history = os.path.join(work, "live-history.jsonl")
    with open(log, "rb") as src, open(history, "wb") as dst:
        for line in src:
            if b'"runwire.status"' not in line:
                dst.write(line)
    return history


def part_b(bin_dir, work, history, rounds):
    os.makedirs(work, exist_ok=True)
    home = os.path.join(work, "home-b")
    p, port = serve(bin_dir, home)
    connected, new, busy, floor = [], [], [], []
    try:
        rid_live, _ = register(bin_dir, home, work, "hist", history)
        # As a live task's run is: registered more than 2 s ago (a file
        # changed within 2 s is read again by each new client; see
        # src/serve/runs/live.rs).
        time.sleep(2.5)
        followers = [connect(port, f"/runs/{rid_live}/tasks/t/stream") for _ in range(10)]
        for f in followers:
            f.setblocking(False)
        for i in range(rounds):
            rid, live_log = register(bin_dir, home, work, f"empty{i}", None)
            a = connect(port, f"/runs/{rid}/tasks/t/stream")
            a.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                head += a.recv(4096)
            time.sleep(0.05)
            settle(p.pid)
            t0 = time.monotonic()
            with open(live_log, "a") as f:
                f.write(LINE % (i, i))
            connected.append(first_frame(a) - t0)
            a.close()
            # The floor: a new client of a task of one line (no history, no other client).
            t2 = time.monotonic()
            c = connect(port, f"/runs/{rid}/tasks/t/stream")
            floor.append(first_frame(c) - t2)
            c.close()
            # A new client of the live task, the server as it was for the
            # connected one: idle (the followers stalled on their full sockets).
            settle(p.pid)
            t1 = time.monotonic()
            b = connect(port, f"/runs/{rid_live}/tasks/t/stream")
            new.append(first_frame(b) - t1)
            b.close()
            # Drain the followers (so they stay connected); the server is then
            # busy refilling their sockets: a new client while it is.
            for f in followers:
                try:
                    while f.recv(1 << 20):
                        pass
                except BlockingIOError:
                    pass
            t3 = time.monotonic()
            d = connect(port, f"/runs/{rid_live}/tasks/t/stream")
            busy.append(first_frame(d) - t3)
            d.close()
        for f in followers:
            f.close()
    finally:
        p.terminate()
        p.wait()
    return connected, new, busy, floor


def summary(samples, rounds):
    """The medians and ratios of part_b's samples (pooled over turns)."""
    connected, new, busy, floor = samples
    ms = lambda xs: round(statistics.median(xs) * 1000, 2)
    return {"connected_client_first_frame_ms": ms(connected), "new_client_first_frame_ms": ms(new),
            "new_over_connected": round(statistics.median(new) / max(statistics.median(connected), 1e-6), 2),
            "new_client_while_followers_refill_ms": ms(busy),
            "busy_new_over_connected": round(statistics.median(busy) / max(statistics.median(connected), 1e-6), 2),
            "new_client_of_a_one_line_task_ms": ms(floor),
            "new_over_one_line_task": round(statistics.median(new) / max(statistics.median(floor), 1e-6), 2),
            "rounds": rounds}


def main():
    bin_dir, work, log = sys.argv[1:4]
    counts = [int(c) for c in os.environ.get("BENCH_CLIENTS", "1,10,50").split(",")]
    rounds = int(os.environ.get("BENCH_LATENCY_ROUNDS", "20"))
    # A baseline build (BENCH_BASELINE_BIN): part (b) for it and for this
    # build in turns (this, baseline, this, ...; BENCH_TURNS each), so load
    # that comes and goes hits both alike; medians over all their rounds.
    base_dir = os.environ.get("BENCH_BASELINE_BIN") or None
    turns = int(os.environ.get("BENCH_TURNS", "2")) if base_dir else 1
    res = {"log_mb": round(os.path.getsize(log) / 1048576, 1), "cpu": part_a(bin_dir, work, log, counts)}
    history = live_history(work, log)
    pooled = {"this": ([], [], [], []), "baseline": ([], [], [], [])}
    for t in range(turns):
        for name, d in [("this", bin_dir), ("baseline", base_dir)]:
            if d is None:
                continue
            for acc, xs in zip(pooled[name], part_b(d, os.path.join(work, f"{name}{t}"), history, rounds)):
                acc.extend(xs)
    res["first_frame"] = summary(pooled["this"], rounds * turns)
    if base_dir:
        res["first_frame_baseline"] = summary(pooled["baseline"], rounds * turns)
        res["baseline_bin"] = base_dir
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
