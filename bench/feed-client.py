#!/usr/bin/env python3
"""bench/feed-client.py: the work of bench/feed.sh (stdlib only).

  feed-client.py BIN_DIR WORK_DIR

Setup: BENCH_RUNS registered runs (default 1000; 10 repos x 100 slugs),
pointers, one-task plans and two-record journals written straight to disk.
Every journal append below is one write of one runstate/v1 line whose
`detail` is CLOCK_MONOTONIC ns just before the write; the feed copies
`detail` into the event, so delay = arrival - write time.

(a) Feed latency: runwire-serve, one client on GET /runs/events; this
    process appends a task record to one of 50 runs (in turn) every
    BENCH_INTERVAL_MS (default 10), BENCH_LINES times (default 500).
    Baseline in the same run: a task stream's append-to-frame delay (GET
    /runs/:id/tasks/:tid/stream, a Claude text_delta line appended to the
    task's log the same way): the server's inotify-to-socket path without the
    feed. Reports median, p99, max and the median over the baseline's.
(b) BENCH_CLIENTS (default 500) concurrent feed clients (server started with
    --max-connections BENCH_CLIENTS+50): all connect and read their `ready`
    frame, then BENCH_FAN_LINES (default 100) records are appended 5 ms
    apart; every client must receive every event, in the same order. Reports
    the per-event delay over all clients (median, p99), the wall time, and
    the server's RSS idle with no client (VmRSS), with the clients connected
    (VmRSS), and its peak (VmHWM).
(c) `runs watch --type needs_input,ended` (no server): for BENCH_WATCH runs
    (default 200) in turn, an input record (`requested`: the run needs
    input) is appended and waited for, then the task's `committed` (the run
    ends) and waited for. Reports the delay from the append to the line on
    the script's stdout, median and p99; then again with a server following
    the same feed (both write it, serialized by its flock).
(d) Catching up: BENCH_CATCHUP records (default 10000) appended to one
    journal while nothing reads the feed, then one `runs watch --no-follow
    --since` makes and prints their events; reports the wall time.
Prints one key=value line per part; exit status 0 when every check passed.
"""
import asyncio
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

from benchlib import HEAD, cpu_ms, delta_line, start_server, status_kb, stop

BIN, WORK = sys.argv[1], sys.argv[2]
N_RUNS = int(os.environ.get("BENCH_RUNS", "1000"))
LINES = int(os.environ.get("BENCH_LINES", "500"))
INTERVAL = float(os.environ.get("BENCH_INTERVAL_MS", "10")) / 1000.0
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "500"))
FAN_LINES = int(os.environ.get("BENCH_FAN_LINES", "100"))
FAN_INTERVAL = float(os.environ.get("BENCH_FAN_INTERVAL_MS", "20")) / 1000.0
WATCH = int(os.environ.get("BENCH_WATCH", "200"))
HOME = os.path.join(WORK, "home")


def server(extra=()):
    return start_server(BIN, HOME, extra)
if N_RUNS < 202 + 2 * (WATCH + 1):
    sys.exit(f"bench: BENCH_RUNS must be at least {202 + 2 * (WATCH + 1)} for BENCH_WATCH={WATCH}")
STATUS = '{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":null,"files":[]}'
ok = True


def mono():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def run_id(repo_root, worktree, slug):
    return hashlib.sha256((repo_root + "\0" + worktree).encode()).hexdigest()[:12] + "--" + slug


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def register(repo, slug, tasks):
    rs = os.path.join(repo, "runstate")
    os.makedirs(rs, exist_ok=True)
    rid = run_id(repo, repo, slug)
    os.makedirs(os.path.join(HOME, "runs"), exist_ok=True)
    write(os.path.join(rs, slug + ".plan.json"), json.dumps({"v": "plan/v1", "tasks": tasks}))
    write(os.path.join(HOME, "runs", rid + ".json"), json.dumps({
        "runId": rid, "slug": slug, "repoRoot": repo, "project": os.path.basename(repo),
        "repo": os.path.basename(repo), "branch": "main", "worktree": repo, "runstateDir": rs,
        "created": "2026-01-01T00:00:00.000Z"}))
    return rid, rs


def rec(**kw):
    return json.dumps({"v": "runstate/v1", "ts": "2026-01-01T00:00:00.000Z", "actor": "bench", **kw},
                      separators=(",", ":"))


def append(path, line):
    # One write of one line with O_APPEND, as journal writers do.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else -1


def frames(sock, on_frame):
    """Reads SSE frames off a raw HTTP/1.0 response until on_frame returns True."""
    buf = b""
    head = False
    while True:
        b = sock.recv(1 << 16)
        now = mono()
        if not b:
            return
        buf += b
        if not head:
            if b"\r\n\r\n" not in buf:
                continue
            h, buf = buf.split(b"\r\n\r\n", 1)
            assert h.startswith(b"HTTP/1.1 200"), h
            head = True
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            if on_frame(frame, now):
                return


def data_of(frame):
    for l in frame.split(b"\n"):
        if l.startswith(b"data: "):
            return json.loads(l[6:])
    return None


# setup
t0 = time.time()
runs = []
for i in range(N_RUNS):
    repo = os.path.join(WORK, "repos", f"r{i // 100}")
    slug = f"s{i % 100}"
    rid, rs = register(repo, slug, [{"id": "a", "adapter": "claude", "prompt": "p"}])
    journal = os.path.join(rs, slug + ".jsonl")
    write(journal, rec(run="started") + "\n" + rec(task="a", state="leased") + "\n")
    runs.append((rid, journal))
print(f"setup runs={N_RUNS} s={time.time() - t0:.2f}", flush=True)

# (a) baseline: a task stream's append-to-frame delay
live = os.path.join(WORK, "live")
brid, brs = register(live, "lat", [{"id": "t", "adapter": "claude", "prompt": "p"}])
blog = os.path.join(brs, "lat.t.log")
write(blog, "")

p, port = server()
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(f"GET /runs/{brid}/tasks/t/stream HTTP/1.0\r\n\r\n".encode())
base = []


def writer_base():
    for line in HEAD:
        append(blog, line)
    time.sleep(0.2)
    for _ in range(LINES):
        append(blog, delta_line(str(mono())))
        time.sleep(INTERVAL)
    append(blog, STATUS)


def on_base(frame, now):
    ev = data_of(frame)
    if ev and ev.get("type") == "token_delta":
        base.append((now - int(ev["data"]["text"])) / 1e6)
    return bool(ev and ev.get("type") == "exit")


th = threading.Thread(target=writer_base)
th.start()
frames(s, on_base)
th.join()
s.close()

# (a) the feed, on the same server
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(b"GET /runs/events?type=task HTTP/1.0\r\n\r\n")
lat = []
got_ready = threading.Event()
hot = runs[:50]


def writer_feed():
    got_ready.wait(30)
    time.sleep(0.1)
    for i in range(LINES):
        _, journal = hot[i % len(hot)]
        append(journal, rec(task="a", state="implemented", detail=str(mono())))
        time.sleep(INTERVAL)


def on_feed(frame, now):
    if frame.startswith(b"event: ready"):
        got_ready.set()
        return False
    ev = data_of(frame)
    if ev and ev.get("actor") == "bench" and ev.get("state") == "implemented":
        lat.append((now - int(ev["detail"])) / 1e6)
    return len(lat) >= LINES


th = threading.Thread(target=writer_feed)
th.start()
frames(s, on_feed)
th.join()
s.close()
idle_rss = status_kb(p, "VmRSS")
stop(p)
if len(lat) != LINES or len(base) != LINES:
    ok = False
bm = statistics.median(base) if base else -1
fm = statistics.median(lat) if lat else -1
print(f"latency events={len(lat)} median_ms={fm:.2f} p99_ms={pct(lat, 0.99):.2f} max_ms={max(lat) if lat else -1:.2f} "
      f"baseline_task_stream_median_ms={bm:.2f} baseline_p99_ms={pct(base, 0.99):.2f} "
      f"median_over_baseline={fm / bm if bm > 0 else -1:.2f} target_median_ms=5 met={fm <= 5}", flush=True)
if fm > 5:
    ok = False

# (b) fan-out
p, port = server(["--max-connections", str(CLIENTS + 50)])
# The feed follower starts with the first client; one first, so idle RSS is with the feed running.
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(b"GET /runs/events HTTP/1.0\r\n\r\n")
frames(s, lambda f, now: f.startswith(b"event: ready"))
s.close()
time.sleep(0.3)
rss_idle = status_kb(p, "VmRSS")
fan_runs = runs[100:200]


async def client(ready):
    r, w = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    w.write(b"GET /runs/events HTTP/1.0\r\n\r\n")
    await w.drain()
    head = await r.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        ready.append(0)
        return None
    await r.readuntil(b"\n\n")  # ready
    ready.append(1)
    ids, delays = [], []
    while len(ids) < FAN_LINES:
        frame = await r.readuntil(b"\n\n")
        now = mono()
        # No JSON parsing here: 500 clients in one Python thread would measure Python.
        i = frame.find(b'"detail":"')
        if not frame.startswith(b"id: ") or i < 0:
            continue
        ids.append(int(frame[4:frame.index(b"\n")]))
        delays.append((now - int(frame[i + 10:frame.index(b'"', i + 10)])) / 1e6)
    w.close()
    return ids, delays


async def fan():
    ready = []
    t0 = time.time()
    tasks = [asyncio.create_task(asyncio.wait_for(client(ready), 180)) for _ in range(CLIENTS)]
    while len(ready) < CLIENTS and time.time() - t0 < 120:
        await asyncio.sleep(0.05)
    connect_s = time.time() - t0
    rss_conn = status_kb(p, "VmRSS")
    # What 500 idle connections cost: each looks at its client twice a second.
    c0 = cpu_ms(p)
    await asyncio.sleep(2)
    idle_cpu = (cpu_ms(p) - c0) / 2

    def writer():
        for i in range(FAN_LINES):
            _, journal = fan_runs[i % len(fan_runs)]
            append(journal, rec(task="a", state="implemented", detail=str(mono())))
            time.sleep(FAN_INTERVAL)

    t1 = time.time()
    c1 = cpu_ms(p)
    await asyncio.to_thread(writer)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return connect_s, time.time() - t1, rss_conn, results, cpu_ms(p) - c1, idle_cpu


connect_s, wall_s, rss_conn, results, fan_cpu, idle_cpu = asyncio.run(fan())
hwm = status_kb(p, "VmHWM")
stop(p)
complete = [r for r in results if isinstance(r, tuple)]
ref = complete[0][0] if complete else None
full = sum(1 for r in complete if r[0] == ref and len(r[0]) == FAN_LINES)
all_delays = [d for r in complete for d in r[1]]
if full != CLIENTS:
    ok = False
print(f"fanout clients={CLIENTS} complete={full} events_each={FAN_LINES} connect_s={connect_s:.2f} wall_s={wall_s:.2f} "
      f"delay_median_ms={statistics.median(all_delays) if all_delays else -1:.2f} delay_p99_ms={pct(all_delays, 0.99):.2f} "
      f"server_idle_cpu_ms_per_s={idle_cpu:.0f} server_cpu_ms={fan_cpu:.0f} server_cpu_us_per_delivery={fan_cpu * 1000 / max(1, CLIENTS * FAN_LINES):.1f} "
      f"rss_idle_mb={rss_idle / 1024:.1f} rss_clients_mb={rss_conn / 1024:.1f} peak_rss_mb={hwm / 1024:.1f}", flush=True)


# (c) runs watch
def watch_bench(label, batch):
    global ok
    env = dict(os.environ, HARNESS_HOME=HOME)
    w = subprocess.Popen([os.path.join(BIN, "runs"), "watch", "--type", "needs_input,ended"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    # Started once its first extension is done: a probe event it must print.
    probe_rid, probe_journal = batch[0]
    lines = []
    got = threading.Condition()

    def reader():
        for l in w.stdout:
            with got:
                lines.append((mono(), json.loads(l)))
                got.notify_all()

    th = threading.Thread(target=reader, daemon=True)
    th.start()

    def wait_for(n, timeout=10):
        with got:
            return got.wait_for(lambda: len(lines) >= n, timeout)

    # Wait until it is following: probe with a request on the first run until one comes out.
    deadline = time.time() + 30
    while time.time() < deadline:
        append(probe_journal, rec(task="a", input="requested", request="probe", kind="question", detail="0"))
        if wait_for(1, 0.5):
            break
    time.sleep(0.5)  # any late probe line is out before measuring
    start = len(lines)
    need, end = [], []
    for rid, journal in batch[1:]:
        for kind, out in (("needs_input", need), ("ended", end)):
            n = len(lines) + 1  # before the append: the line may be out before the next statement
            t = mono()
            if kind == "needs_input":
                append(journal, rec(task="a", input="requested", request="r1", kind="tool_approval", tool="Bash",
                                    detail=str(t)))
            else:
                append(journal, rec(task="a", state="committed", rc=0, detail=str(t)))
            if not wait_for(n):
                print(f"bench: runs watch ({label}) printed nothing for {kind} of {rid} within 10 s", file=sys.stderr)
                ok = False
                break
            at, ev = lines[n - 1]
            if ev.get("runId") != rid or ev.get("type") != kind:
                print(f"bench: runs watch ({label}): expected {kind} of {rid}, got {ev.get('type')} of {ev.get('runId')}",
                      file=sys.stderr)
                ok = False
            out.append((at - t) / 1e6)
            time.sleep(0.005)
    w.terminate()
    w.wait()
    both = need + end
    if len(both) != 2 * (len(batch) - 1):
        ok = False
    m = statistics.median(both) if both else -1
    print(f"watch {label} lines={len(both) + start} median_ms={m:.2f} p99_ms={pct(both, 0.99):.2f} "
          f"needs_input_median_ms={statistics.median(need) if need else -1:.2f} "
          f"ended_median_ms={statistics.median(end) if end else -1:.2f} target_median_ms=5 met={m <= 5}", flush=True)
    return m


m1 = watch_bench("no_server", runs[200:200 + WATCH + 1])
p, port = server()
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(b"GET /runs/events HTTP/1.0\r\n\r\n")
frames(s, lambda f, now: f.startswith(b"event: ready"))
m2 = watch_bench("with_server", runs[201 + WATCH:202 + 2 * WATCH])
s.close()
stop(p)
if m1 > 5 or m2 > 5:
    ok = False

# (d) catching up: a run's journal gains CATCHUP records while nothing reads the feed; one
# `runs watch --no-follow` then makes their events and prints them.
CATCHUP = int(os.environ.get("BENCH_CATCHUP", "10000"))
env = dict(os.environ, HARNESS_HOME=HOME)
end = subprocess.run([os.path.join(BIN, "runs"), "watch", "--no-follow", "--since", "0", "--type", "created"],
                     capture_output=True, env=env)
since = os.path.getsize(os.path.join(HOME, "feed", "events.log"))
_, journal = runs[-1]
with open(journal, "a") as f:
    for i in range(CATCHUP):
        f.write(rec(task="a", state="implemented", detail=str(i)) + "\n")
t0 = time.time()
out = subprocess.run([os.path.join(BIN, "runs"), "watch", "--no-follow", "--since", str(since)], capture_output=True,
                     env=env)
wall = time.time() - t0
got = out.stdout.count(b"\n")
if got != CATCHUP:
    ok = False
print(f"catchup records={CATCHUP} events={got} wall_s={wall:.2f} us_per_event={wall * 1e6 / max(1, got):.0f}", flush=True)
sys.exit(0 if ok else 1)
