#!/usr/bin/env python3
"""bench/notify-client.py: the work of bench/notify.sh (stdlib only).

  notify-client.py BIN_DIR WORK_DIR

Setup: 20 registered runs (pointers, one-task plans) written straight to
disk, a webhook receiver in this process (http.server, one thread per
connection) that checks every signature (HMAC-SHA256 per Standard
Webhooks, with the stdlib's hmac) and notes each delivery's arrival time
(CLOCK_MONOTONIC), and `runs notify --secret-file --state` POSTing to it.
Every journal append is one write of one runstate/v1 input record
(`requested`: the run needs input) whose `detail` is CLOCK_MONOTONIC ns
just before the write; the webhook body carries `detail`, so delay =
arrival - write time.

(a) Latency: BENCH_NOTIFY records (default 500), one every
    BENCH_INTERVAL_MS (default 10) ms, the runs in turn, each waited for at
    the receiver. Reports the delay from the append (the interrupt raised)
    to the delivery: median, p99, max (targets: median <= 5 ms, p99 <= 50 ms).
(b) Down then up: the receiver stops (its port kept); BENCH_BACKLOG records
    (default 1000) are appended; after BENCH_DOWN_S (default 3) s the
    receiver listens again on the same port. Every event must arrive, none
    twice (by webhook-id, and by the record's own tag), every signature
    valid; reports the time from up to the last delivery.
Prints one key=value line per part; exit status 0 when every check passed
and the targets held.
"""
import base64
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIN, WORK = sys.argv[1], sys.argv[2]
N = int(os.environ.get("BENCH_NOTIFY", "500"))
INTERVAL = float(os.environ.get("BENCH_INTERVAL_MS", "10")) / 1000.0
BACKLOG = int(os.environ.get("BENCH_BACKLOG", "1000"))
DOWN_S = float(os.environ.get("BENCH_DOWN_S", "3"))
HOME = os.path.join(WORK, "home")
KEY = os.urandom(32)
SECRET = os.path.join(WORK, "whsec")
with open(SECRET, "w") as f:
    f.write("whsec_" + base64.b64encode(KEY).decode() + "\n")
ok = True


def mono():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else -1


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def register(repo, slug):
    rs = os.path.join(repo, "runstate")
    os.makedirs(rs, exist_ok=True)
    rid = hashlib.sha256((repo + "\0" + repo).encode()).hexdigest()[:12] + "--" + slug
    os.makedirs(os.path.join(HOME, "runs"), exist_ok=True)
    write(os.path.join(rs, slug + ".plan.json"),
          json.dumps({"v": "plan/v1", "tasks": [{"id": "a", "adapter": "claude", "prompt": "p"}]}))
    write(os.path.join(HOME, "runs", rid + ".json"), json.dumps({
        "runId": rid, "slug": slug, "repoRoot": repo, "project": "bench", "repo": "bench", "branch": "main",
        "worktree": repo, "runstateDir": rs, "created": "2026-01-01T00:00:00.000Z"}))
    return os.path.join(rs, slug + ".jsonl")


def ask(request, detail):
    return json.dumps({"v": "runstate/v1", "ts": "2026-01-01T00:00:00.000Z", "actor": "bench", "task": "a",
                       "input": "requested", "request": request, "kind": "tool_approval", "tool": "Bash",
                       "detail": detail}, separators=(",", ":"))


def append(path, lines):
    # One write per line with O_APPEND, as journal writers do.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for line in lines:
            os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


got = []  # (arrival ns, webhook-id, body)
bad_signatures = []
cv = threading.Condition()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        at = mono()
        wid, ts = self.headers.get("webhook-id", ""), self.headers.get("webhook-timestamp", "")
        mac = hmac.new(KEY, f"{wid}.{ts}.".encode() + body, hashlib.sha256).digest()
        want = "v1," + base64.b64encode(mac).decode()
        with cv:
            if want not in self.headers.get("webhook-signature", "").split(" "):
                bad_signatures.append(wid)
            got.append((at, wid, json.loads(body)))
            cv.notify_all()
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def listen(port=0):
    ThreadingHTTPServer.allow_reuse_address = True
    s = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    s.daemon_threads = True
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def wait_for(n, timeout):
    with cv:
        return cv.wait_for(lambda: len(got) >= n, timeout)


journals = [register(os.path.join(WORK, f"repo{i}"), f"s{i}") for i in range(20)]
receiver = listen()
port = receiver.server_address[1]
state = os.path.join(WORK, "notify.state")
env = dict(os.environ, HARNESS_HOME=HOME)
notify = subprocess.Popen([os.path.join(BIN, "runs"), "notify", "--webhook", f"http://127.0.0.1:{port}/hook",
                           "--secret-file", SECRET, "--state", state],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
deadline = time.time() + 30
while not os.path.exists(state) and time.time() < deadline:
    time.sleep(0.01)
# Following once a probe comes through.
while time.time() < deadline:
    append(journals[0], [ask("probe", "0")])
    if wait_for(1, 0.5):
        break
time.sleep(0.5)

# (a) latency
delays = []
with cv:
    base = len(got)
for i in range(N):
    n = base + i + 1
    t = mono()
    append(journals[i % len(journals)], [ask(f"r{i}", str(t))])
    if not wait_for(n, 10):
        print(f"bench: no delivery for record {i} within 10 s", file=sys.stderr)
        ok = False
        break
    at, _, body = got[n - 1]
    if body["data"].get("detail") != str(t):
        print(f"bench: delivery {n} is not record {i}: {body['data'].get('detail')}", file=sys.stderr)
        ok = False
    delays.append((at - t) / 1e6)
    time.sleep(INTERVAL)
m, p99 = (statistics.median(delays), pct(delays, 0.99)) if delays else (-1, -1)
met = m <= 5 and p99 <= 50 and len(delays) == N
ok = ok and met and not bad_signatures
print(f"latency events={len(delays)} median_ms={m:.2f} p99_ms={p99:.2f} max_ms={max(delays, default=-1):.2f} "
      f"target_median_ms=5 target_p99_ms=50 met={met} bad_signatures={len(bad_signatures)}", flush=True)

# (b) down then up
receiver.shutdown()
receiver.server_close()
with cv:
    base = len(got)
tags = [f"bulk-{i}" for i in range(BACKLOG)]
for i, tag in enumerate(tags):
    append(journals[i % len(journals)], [ask(tag, tag)])
time.sleep(DOWN_S)
receiver = listen(port)
up = mono()
complete = wait_for(base + BACKLOG, 120 + BACKLOG / 100)
time.sleep(1)  # anything sent twice arrives now
with cv:
    bulk = got[base:]
ids = [w for _, w, _ in bulk]
seen = [b["data"].get("detail") for _, _, b in bulk]
dups = len(ids) - len(set(ids))
missing = len(set(tags) - set(seen))
last = max((at for at, _, _ in bulk), default=up)
passed = complete and dups == 0 and missing == 0 and len(bulk) == BACKLOG and not bad_signatures
ok = ok and passed
print(f"down_then_up events={BACKLOG} down_s={DOWN_S:.1f} delivered={len(bulk)} missing={missing} duplicates={dups} "
      f"bad_signatures={len(bad_signatures)} drain_s={(last - up) / 1e9:.2f} all_once={passed}", flush=True)

notify.terminate()
try:
    _, err = notify.communicate(timeout=20)
except subprocess.TimeoutExpired:
    notify.kill()
    _, err = notify.communicate()
if notify.returncode != 0:
    print(f"bench: runs notify exited {notify.returncode} after SIGTERM:\n{err.decode(errors='replace')}", file=sys.stderr)
    ok = False
sys.exit(0 if ok else 1)
