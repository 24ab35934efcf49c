#!/usr/bin/env python3
"""bench/feed-big.py: the change feed's memory on a big journal record (stdlib only).

  feed-big.py BIN_DIR WORK_DIR

One registered run; runwire-serve with BENCH_BIG_CLIENTS (default 100)
clients on GET /runs/events, each read up to its `ready` frame; then one
journal record of BENCH_BIG_MB MB (default 8: an agent can write its own
journal, bounded at 16 MiB) is appended, and every client reads until it
has that record's event. Reports the bytes each client received for it,
the wall time, and the server's RSS: before the record (VmRSS), its peak
(VmHWM), and 2 s after the clients left (VmRSS). Target: peak < 128 MB.
Exit status 0 when every client got the event and the target held.
"""
import json
import os
import socket
import sys
import threading
import time

from benchlib import start_server, status_kb, stop

BIN, WORK = sys.argv[1], sys.argv[2]
CLIENTS = int(os.environ.get("BENCH_BIG_CLIENTS", "100"))
MB = int(os.environ.get("BENCH_BIG_MB", "8"))
HOME = os.path.join(WORK, "home-big")

repo = os.path.join(WORK, "repo-big")
rs = os.path.join(repo, "runstate")
os.makedirs(rs, exist_ok=True)
os.makedirs(os.path.join(HOME, "runs"), exist_ok=True)
rid = "0123456789ab--big"
with open(os.path.join(rs, "big.plan.json"), "w") as f:
    json.dump({"v": "plan/v1", "tasks": [{"id": "a", "adapter": "claude", "prompt": "p"}]}, f)
with open(os.path.join(HOME, "runs", rid + ".json"), "w") as f:
    json.dump({"runId": rid, "slug": "big", "repoRoot": repo, "project": "big", "repo": "big", "branch": "main",
               "worktree": repo, "runstateDir": rs, "created": "2026-01-01T00:00:00.000Z"}, f)
journal = os.path.join(rs, "big.jsonl")
open(journal, "a").close()

p, port = start_server(BIN, HOME, ["--max-connections", str(CLIENTS + 50)])


def connect():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(60)
    s.sendall(b"GET /runs/events HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    buf = b""
    while b"event: ready" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("bench: a feed client was closed before its ready frame")
        buf += chunk
    return s


socks = [connect() for _ in range(CLIENTS)]
idle_kb = status_kb(p, "VmRSS")
got = [0] * CLIENTS
done = [False] * CLIENTS


def read(i, s):
    # Until the record's event (a frame naming the run) has ended; counts its bytes.
    buf = bytearray()
    while True:
        try:
            chunk = s.recv(1 << 20)
        except OSError:
            return
        if not chunk:
            return
        buf += chunk
        at = buf.find(rid.encode())
        if at >= 0 and buf.find(b"\n\n", at) >= 0:
            got[i] = len(buf)
            done[i] = True
            return


threads = [threading.Thread(target=read, args=(i, s)) for i, s in enumerate(socks)]
for t in threads:
    t.start()
line = json.dumps({"v": "runstate/v1", "ts": "2026-01-01T00:00:01.000Z", "actor": "agent", "task": "a",
                   "state": "leased", "detail": "x" * (MB << 20)}, separators=(",", ":"))
t0 = time.time()
fd = os.open(journal, os.O_WRONLY | os.O_APPEND)
os.write(fd, (line + "\n").encode())
os.close(fd)
for t in threads:
    t.join(120)
wall = time.time() - t0
peak_kb = status_kb(p, "VmHWM")
for s in socks:
    s.close()
time.sleep(2)
after_kb = status_kb(p, "VmRSS")
stop(p)
complete = sum(done)
print(f"feed_big clients={CLIENTS} record_mb={MB} complete={complete} bytes_each_max={max(got)} wall_s={wall:.2f} "
      f"rss_before_mb={idle_kb / 1024:.1f} peak_rss_mb={peak_kb / 1024:.1f} rss_after_mb={after_kb / 1024:.1f}",
      flush=True)
ok = complete == CLIENTS and peak_kb < 128 * 1024
if not ok:
    print(f"bench: feed_big: {complete} of {CLIENTS} clients got the event; peak RSS {peak_kb / 1024:.0f} MB "
          "(target: every client, under 128 MB)", file=sys.stderr)
sys.exit(0 if ok else 1)
