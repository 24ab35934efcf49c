#!/usr/bin/env python3
"""bench/runs-client.py: the work of bench/runs.sh (stdlib only).

  runs-client.py BIN_DIR WORK_DIR

(a) GET /runs over BENCH_RUNS registered runs (default 10000): pointers,
    plans (2 tasks) and journals (3 records) written straight to disk,
    100 repos x 100 slugs, no task logs; then `runs reindex` builds the run
    index the writers would have kept. Checks that the server's listing
    through the index is byte for byte `runs list --page --from-files` (the
    same build reading every run's files) and, with BENCH_OLD_BIN, the old
    build's. Then, with BENCH_OLD_BIN (a directory holding the old build's
    runwire-serve: bench/runs.sh builds it from BENCH_OLD_REV), the first
    page, a status page and the full listing, each request on a freshly
    started server, the builds alternating, BENCH_PAGE_REPEAT (default 5)
    rounds: medians and new_over_old against the targets (full <= 0.5,
    first page <= 0.6).
    Also printed: the full listing's median over BENCH_LIST_REPEAT (default
    5) requests to one server, a restarted server's first, the syscall floor
    of reading every run's files (examples/listing-floor, when built), and
    `runs list` from files and through the index.
(b) Append-to-frame delay: one live task; this process appends Claude
    text_delta lines, each carrying CLOCK_MONOTONIC ns just before the write,
    one every BENCH_INTERVAL_MS (default 10), BENCH_LINES of them (default
    500), to the task's log while one client follows its stream; delay =
    frame arrival - write time.
(c) BENCH_CLIENTS (default 1000) concurrent stream clients on one live task
    (server started with --max-connections BENCH_CLIENTS+50): all connect,
    then BENCH_FAN_LINES (default 200) lines and a status line are appended;
    every client must receive every event id, in order, and the exit event.
    Reports wall time and the server's peak RSS (VmHWM).
(m) BENCH_PARTS=m: peak RSS of `runs list` and of the server over one
    GET /runs when one run's task log is BENCH_BIG_MB (default 300) MB, as one
    line and as one streamed Claude message (10 KB text deltas), each
    ending with a result line whose cost must still be counted.
BENCH_PARTS=a runs (a) only.
Prints one key=value line per part; exit status 0 when every check passed.
"""
import asyncio
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

from benchlib import HEAD, SESSION, cpu_ms, delta_line, get_timed, start_server, status_kb, stop

BIN, WORK = sys.argv[1], sys.argv[2]
N_RUNS = int(os.environ.get("BENCH_RUNS", "10000"))
REPEAT = int(os.environ.get("BENCH_LIST_REPEAT", "5"))
LINES = int(os.environ.get("BENCH_LINES", "500"))
INTERVAL = float(os.environ.get("BENCH_INTERVAL_MS", "10")) / 1000.0
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "1000"))
FAN_LINES = int(os.environ.get("BENCH_FAN_LINES", "200"))
HOME = os.path.join(WORK, "home")


def server(extra=()):
    return start_server(BIN, HOME, extra)
STATUS = '{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":null,"files":[]}'
ok = True


def run_id(repo_root, worktree, slug):
    return hashlib.sha256((repo_root + "\0" + worktree).encode()).hexdigest()[:12] + "--" + slug


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def pointer_bytes(rid, repo, slug, rs, created):
    # Exactly what `runs register` writes (serde_json's pretty printer: two
    # spaces, keys in the struct's order, UTF-8, no final newline).
    return json.dumps({
        "runId": rid, "slug": slug, "repoRoot": repo, "project": os.path.basename(repo),
        "repo": os.path.basename(repo), "branch": "main", "worktree": repo, "runstateDir": rs,
        "created": created}, indent=2, ensure_ascii=False).encode()


def register(repo, slug, plan_tasks, created="2026-01-01T00:00:00.000Z"):
    # What `runs register --slug SLUG --repo-root REPO --branch main` does
    # (spec/LAYOUT.md): the runstate directory, the journal (empty) and its
    # link journals/<runId>.jsonl (a hard link; a symlink across
    # filesystems), then the pointer; plus the plan, as a runner writes it.
    # check_register() compares the two.
    rs = os.path.join(repo, "runstate")
    os.makedirs(rs, exist_ok=True)
    rid = run_id(repo, repo, slug)
    os.makedirs(os.path.join(HOME, "runs"), exist_ok=True)
    links = os.path.join(HOME, "journals")
    os.makedirs(links, exist_ok=True)
    journal = os.path.join(rs, slug + ".jsonl")
    open(journal, "a").close()
    tmp = os.path.join(links, f".{rid}.jsonl.tmp")
    try:
        os.link(journal, tmp)
    except OSError:
        os.symlink(journal, tmp)
    os.replace(tmp, os.path.join(links, rid + ".jsonl"))
    with open(os.path.join(HOME, "runs", rid + ".json"), "wb") as f:
        f.write(pointer_bytes(rid, repo, slug, rs, created))
    if plan_tasks is not None:
        write(os.path.join(rs, slug + ".plan.json"), json.dumps({"v": "plan/v1", "tasks": plan_tasks}))
    return rid, rs


def check_register():
    # The bench's registry must be what the real `runs register` writes, byte
    # for byte (but the time), or the listing would be timed on another layout.
    global HOME
    saved, HOME = HOME, os.path.join(WORK, "check-py")
    real = os.path.join(WORK, "check-real")
    repo = os.path.join(WORK, "check-repo-é")
    rid, rs = register(repo, "s.1", None)
    py = HOME
    HOME = saved
    out = subprocess.run([os.path.join(BIN, "runs"), "register", "--slug", "s.1", "--repo-root", repo,
                          "--branch", "main"], env=dict(os.environ, HARNESS_HOME=real), stdout=subprocess.PIPE,
                         check=True).stdout
    created = json.loads(out)["created"]
    with open(os.path.join(real, "runs", rid + ".json"), "rb") as f:
        got = f.read()
    same = got == pointer_bytes(rid, repo, "s.1", rs, created)
    names = lambda h, d: sorted(os.listdir(os.path.join(h, d)))
    same = same and names(py, "runs") == names(real, "runs") and names(py, "journals") == names(real, "journals")
    link = lambda h: os.path.join(h, "journals", rid + ".jsonl")
    same = same and os.path.islink(link(py)) == os.path.islink(link(real))
    same = same and all(os.path.samefile(link(h), os.path.join(rs, "s.1.jsonl")) for h in [py, real])
    same = same and os.path.getsize(os.path.join(rs, "s.1.jsonl")) == 0
    for d in [py, real, repo]:
        shutil.rmtree(d, ignore_errors=True)
    return same


def get(port, path):
    # (status, body); the_end is when the last byte came (this client's
    # own copying of a megabytes body afterwards is not the server's time).
    global the_end
    the_end, raw = get_timed(port, path)
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


the_end = 0.0


def peak_rss_mb(cmd, env):
    # The command's own peak RSS, from /usr/bin/time (a child forked from this
    # process would count this process's pages, the big log's text among them).
    r = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M", *cmd], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    kb = [l for l in r.stderr.splitlines() if l.startswith("maxrss_kb=")]
    return r.stdout.encode(), (int(kb[-1].split("=")[1]) / 1024 if kb else -1)


def big_logs():
    mb = int(os.environ.get("BENCH_BIG_MB", "300"))
    result = json.dumps({"type": "result", "subtype": "success", "is_error": False, "session_id": SESSION,
                         "total_cost_usd": 0.25, "usage": {"input_tokens": 7, "output_tokens": 9}})
    for shape in ["one_line", "streamed_message"]:
        home = os.path.join(WORK, "big-" + shape)
        repo = os.path.join(WORK, "big-repo-" + shape)
        global HOME
        saved, HOME = HOME, home
        rid, rs = register(repo, "big", [{"id": "t", "adapter": "claude", "prompt": "p"}])
        HOME = saved
        with open(os.path.join(rs, "big.t.log"), "w") as f:
            f.write(HEAD[0] + "\n")
            if shape == "one_line":
                f.write(json.dumps({"type": "assistant", "session_id": SESSION, "message": {
                    "id": "m", "role": "assistant", "content": [{"type": "text", "text": "x" * (mb << 20)}]}}) + "\n")
            else:
                f.write(HEAD[1] + "\n" + HEAD[2] + "\n")
                chunk = delta_line("y" * 10240) + "\n"
                for _ in range((mb << 20) // len(chunk)):
                    f.write(chunk)
            f.write(result + "\n")
        env = dict(os.environ, HARNESS_HOME=home)
        out, rss = peak_rss_mb([os.path.join(BIN, "runs"), "list"], env)
        cost = json.loads(out.splitlines()[0]).get("costUsd") if out else None
        p = subprocess.Popen([os.path.join(BIN, "runwire-serve"), "--listen", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        port = int(p.stdout.readline().decode().strip().rsplit(":", 1)[1])
        code, body = get(port, "/runs")
        srv_rss = status_kb(p, "VmHWM") / 1024
        stop(p)
        print(f"big_log shape={shape} log_mb={mb} runs_list_peak_rss_mb={rss:.1f} cost_usd={cost} "
              f"server_get_runs_peak_rss_mb={srv_rss:.1f} code={code}", flush=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(repo, ignore_errors=True)



PARTS = os.environ.get("BENCH_PARTS", "abc")
if PARTS == "m":
    big_logs()
    sys.exit(0)

# (a)
if not check_register():
    print("register: the bench's registry differs from what `runs register` writes", flush=True)
    sys.exit(1)
tasks2 = [{"id": "a", "adapter": "claude", "prompt": "p"}, {"id": "b", "adapter": "claude", "prompt": "q", "deps": ["a"]}]
journal = "".join(json.dumps({"v": "runstate/v1", "ts": "2026-01-01T00:00:00.000Z", "actor": "runner", "task": t,
                              "state": s}) + "\n" for t, s in [("a", "leased"), ("a", "committed"), ("b", "leased")])
t0 = time.time()
for i in range(N_RUNS):
    repo = os.path.join(WORK, "repos", f"r{i // 100}")
    slug = f"s{i % 100}"
    _, rs = register(repo, slug, tasks2)
    write(os.path.join(rs, slug + ".jsonl"), journal)
setup_s = time.time() - t0
INDEX = os.path.join(HOME, "index", "runs.jsonl")
OLD = os.environ.get("BENCH_OLD_BIN")
# The old build's own listing cache (removed before each of its fresh servers).
OLD_CACHE = os.path.join(HOME, "cache", "runs-list.index")


def list_requests(repeat, bin_dir=BIN):
    p, port = start_server(bin_dir, HOME)
    times = []
    n = -1
    first_cpu = -1
    body = b""
    for _ in range(repeat):
        c = cpu_ms(p)
        t = time.perf_counter()
        code, body = get(port, "/runs")
        times.append((the_end - t) * 1000)
        if first_cpu < 0:
            first_cpu = cpu_ms(p) - c
        n = len(json.loads(body)["runs"]) if code == 200 else -1
    stop(p)
    return n, times, first_cpu, body


def runs_list(*extra):
    env = dict(os.environ, HARNESS_HOME=HOME)
    t = time.perf_counter()
    out = subprocess.run([os.path.join(BIN, "runs"), "list", *extra], env=env, stdout=subprocess.PIPE,
                         check=True).stdout
    return out, (time.perf_counter() - t) * 1000


def floor_once(stat_only=False):
    # The same files opened, stat'ed, read and closed with no parsing: what
    # reading every run's files costs in syscalls alone (examples/listing-floor.rs).
    # With stat_only, only a stat of every pointer and journal. (wall ms, CPU ms),
    # or None when the binary was not built.
    exe = os.path.join(BIN, "examples", "listing-floor")
    if not os.access(exe, os.X_OK):
        return None
    rs_dirs = sorted(os.path.join(WORK, "repos", r, "runstate") for r in os.listdir(os.path.join(WORK, "repos")))
    if stat_only:
        args = ["--stat", os.path.join(HOME, "runs") + ":.json"] + [d + ":.jsonl" for d in rs_dirs]
    else:
        args = [os.path.join(HOME, "runs")] + rs_dirs
    out = subprocess.run([exe, *args], stdout=subprocess.PIPE, check=True, text=True).stdout
    return float(out.split(" ms=")[1]), float(out.split("cpu_ms=")[1].split()[0])


def fresh_get(bin_dir, path):
    # One GET on a freshly started server: (wall ms to the last byte, server CPU ms, body).
    p, port = start_server(bin_dir, HOME)
    c = cpu_ms(p)
    t = time.perf_counter()
    code, body = get(port, path)
    ms = (the_end - t) * 1000
    cpu = cpu_ms(p) - c
    stop(p)
    return (ms, cpu, body) if code == 200 else (ms, cpu, None)


# The setup's writeback is not the listing's cost: flush it first. Index rows are
# trusted only 2 s after their journal's last change: let the newest age.
os.sync()
time.sleep(2.5)
# The registry was written as `runs register` and a runner write it, but by this
# script: the writers' index is what `runs reindex` builds from the same files.
t = time.perf_counter()
out = subprocess.run([os.path.join(BIN, "runs"), "reindex"], env=dict(os.environ, HARNESS_HOME=HOME),
                     stdout=subprocess.PIPE, check=True).stdout
reindex_ms = (time.perf_counter() - t) * 1000
indexed = json.loads(out)["runs"]
if indexed != N_RUNS:
    ok = False
print(f"reindex runs={indexed} ms={reindex_ms:.0f} index_bytes={os.path.getsize(INDEX)}", flush=True)

# Identical answers: the server through the index, `runs list --from-files` (every
# run's files, same build), and the old build (no index of ours).
n, times, cpu1, body_index = list_requests(REPEAT)
files_page, files_ms = runs_list("--page", "--from-files")
same = body_index.rstrip(b"\n") == files_page.rstrip(b"\n")
line = f"identical index_vs_files={same}"
if OLD:
    if os.path.exists(OLD_CACHE):
        os.remove(OLD_CACHE)
    _, _, _, body_old = list_requests(1, OLD)
    line += f" new_vs_old={body_old == body_index}"
    if body_old != body_index:
        ok = False
print(line, f"bytes={len(body_index)}", flush=True)
if not same:
    ok = False
n2, times2, cpu2, _ = list_requests(1)
if n != N_RUNS or n2 != N_RUNS:
    ok = False
print(f"list runs={n} first_ms={times[0]:.1f} first_cpu_ms={cpu1:.0f} (fresh server, index) "
      f"median_ms={statistics.median(times):.1f} max_ms={max(times):.1f} "
      f"restart_first_ms={times2[0]:.1f} restart_first_cpu_ms={cpu2:.0f} setup_s={setup_s:.1f}", flush=True)
f = floor_once()
if f is not None:
    print(f"list_floor files={3 * N_RUNS} ms={f[0]:.1f} (open+fstat+read+close of every pointer, plan, journal) "
          f"stat_floor_ms={floor_once(stat_only=True)[0]:.1f} (fstatat of every pointer and journal)", flush=True)

# This build against the old one (BENCH_OLD_BIN), each request on a freshly started
# server, the builds and the pages taking turns (the machine's speed drifts by
# tens of percent over minutes: only alternation compares builds). The old build
# starts with no listing cache of its own (its fresh state); this one with the
# index its writers keep. Targets (issue 27): full listing <= 0.5x, first page <= 0.6x.
PAGES = [("first_page", "/runs?limit=50", 0.6), ("status_page", "/runs?limit=50&status=running", None),
         ("full", "/runs", 0.5)]
builds = [("new", BIN)] + ([("old", OLD)] if OLD else [])
got = {(b, name): {"ms": [], "cpu": []} for b, _ in builds for name, _, _ in PAGES}
for r in range(PAGE_REPEAT := int(os.environ.get("BENCH_PAGE_REPEAT", "5"))):
    order = builds if r % 2 == 0 else builds[::-1]
    for name, path, _ in PAGES[r % 3:] + PAGES[:r % 3]:
        for b, d in order:
            if b == "old" and os.path.exists(OLD_CACHE):
                os.remove(OLD_CACHE)
            ms, cpu, body = fresh_get(d, path)
            if body is None or json.loads(body).get("total") != N_RUNS:
                ok = False
            got[(b, name)]["ms"].append(ms)
            got[(b, name)]["cpu"].append(cpu)
for name, path, target in PAGES:
    new = got[("new", name)]
    med = statistics.median(new["ms"])
    line = (f"page {name} path={path} new_median_ms={med:.1f} new_all_ms={','.join(f'{t:.0f}' for t in new['ms'])} "
            f"new_cpu_ms={statistics.median(new['cpu']):.0f}")
    if OLD:
        old = got[("old", name)]
        omed = statistics.median(old["ms"])
        ratio = med / omed
        line += (f" old_median_ms={omed:.1f} old_all_ms={','.join(f'{t:.0f}' for t in old['ms'])} "
                 f"old_cpu_ms={statistics.median(old['cpu']):.0f} new_over_old={ratio:.2f}")
        if target is not None:
            met = ratio <= target
            line += f" target={target} {'met' if met else 'MISSED'}"
            if not met:
                ok = False
    print(line, flush=True)
# The page that checks every run (what a listing costs once the window of trusted rows,
# RUNWIRE_INDEX_CHECK_MS, has passed; 0 here: every listing checks).
os.environ["RUNWIRE_INDEX_CHECK_MS"] = "0"
checked = [fresh_get(BIN, "/runs?limit=50") for _ in range(PAGE_REPEAT)]
del os.environ["RUNWIRE_INDEX_CHECK_MS"]
print(f"page first_page_checked path=/runs?limit=50 RUNWIRE_INDEX_CHECK_MS=0 "
      f"median_ms={statistics.median(c[0] for c in checked):.1f} "
      f"all_ms={','.join(f'{c[0]:.0f}' for c in checked)} cpu_ms={statistics.median(c[1] for c in checked):.0f}",
      flush=True)
# Issue 35's targets, same run: the full listing <= 0.6x the files floor (open, fstat, read and
# close of every pointer, plan and journal), the first page <= 10 ms.
if f is not None:
    full = statistics.median(got[("new", "full")]["ms"])
    first = statistics.median(got[("new", "first_page")]["ms"])
    r = full / f[0]
    print(f"floor full_ms={full:.1f} floor_ms={f[0]:.1f} full_over_floor={r:.2f} target=0.6 "
          f"{'met' if r <= 0.6 else 'MISSED'} first_page_ms={first:.1f} target=10 {'met' if first <= 10 else 'MISSED'}",
          flush=True)
_, cold = runs_list("--from-files")
out, warm = runs_list()
c2 = len(out.splitlines())
if c2 != N_RUNS:
    ok = False
print(f"runs_list runs={c2} from_files_ms={cold:.1f} index_ms={warm:.1f}", flush=True)

# BENCH_PARTS=a: the listing only (the parts below take a minute more).
if not set(os.environ.get("BENCH_PARTS", "abc")) & set("bcm"):
    sys.exit(0 if ok else 1)

# a live task for (b) and (c)
live_repo = os.path.join(WORK, "live")


def live_task(slug):
    rid, rs = register(live_repo, slug, [{"id": "t", "adapter": "claude", "prompt": "p"}])
    log = os.path.join(rs, slug + ".t.log")
    write(log, "")
    return rid, log


def append(f, line):
    f.write(line + "\n")
    f.flush()


# (b)
rid, log = live_task("lat")
p, port = server()
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(f"GET /runs/{rid}/tasks/t/stream HTTP/1.0\r\n\r\n".encode())
delays = []


def writer_b():
    with open(log, "a") as f:
        for line in HEAD:
            append(f, line)
        time.sleep(0.2)
        for _ in range(LINES):
            append(f, delta_line(str(time.clock_gettime_ns(time.CLOCK_MONOTONIC))))
            time.sleep(INTERVAL)
        append(f, STATUS)


th = threading.Thread(target=writer_b)
th.start()
buf = b""
done = False
while not done:
    b = s.recv(1 << 16)
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    if not b:
        break
    buf += b
    while b"\n\n" in buf:
        frame, buf = buf.split(b"\n\n", 1)
        for l in frame.split(b"\n"):
            if l.startswith(b"data: "):
                ev = json.loads(l[6:])
                if ev.get("type") == "token_delta":
                    delays.append((now - int(ev["data"]["text"])) / 1e6)
                if ev.get("type") == "exit":
                    done = True
th.join()
s.close()
stop(p)
delays.sort()
if len(delays) != LINES:
    ok = False
p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))] if delays else -1
print(f"follow frames={len(delays)} median_ms={statistics.median(delays) if delays else -1:.2f} p99_ms={p99:.2f} "
      f"max_ms={max(delays) if delays else -1:.2f}", flush=True)

# (c)
rid, log = live_task("fan")
p, port = server(["--max-connections", str(CLIENTS + 50)])


async def client(ready):
    r, w = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    w.write(f"GET /runs/{rid}/tasks/t/stream HTTP/1.0\r\n\r\n".encode())
    await w.drain()
    head = await r.readuntil(b"\r\n\r\n")
    ready.append(1)
    if not head.startswith(b"HTTP/1.1 200"):
        return None
    ids = []
    while True:
        frame = await r.readuntil(b"\n\n")
        for l in frame.split(b"\n"):
            if l.startswith(b"id: "):
                ids.append(l[4:].decode())
        if b'"type":"exit"' in frame:
            w.close()
            return ids


async def fan():
    ready = []
    t0 = time.time()
    tasks = [asyncio.create_task(asyncio.wait_for(client(ready), 120)) for _ in range(CLIENTS)]
    while len(ready) < CLIENTS and time.time() - t0 < 60:
        await asyncio.sleep(0.05)
    connect_s = time.time() - t0

    def writer_c():
        with open(log, "a") as f:
            for line in HEAD:
                append(f, line)
            for i in range(FAN_LINES):
                append(f, delta_line(f"x{i}"))
                time.sleep(0.002)
            append(f, STATUS)

    t1 = time.time()
    await asyncio.to_thread(writer_c)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return connect_s, time.time() - t1, results


connect_s, wall_s, results = asyncio.run(fan())
rss = status_kb(p, "VmHWM")
stop(p)
complete = [r for r in results if isinstance(r, list)]
want = None
with open(log, "rb") as f:
    want_lines = len(f.read().splitlines())
full = sum(1 for r in complete if len(r) == len(complete[0]) and r == complete[0]) if complete else 0
events = len(complete[0]) if complete else 0
if full != CLIENTS:
    ok = False
print(f"fanout clients={CLIENTS} complete={full} events_each={events} log_lines={want_lines} connect_s={connect_s:.2f} "
      f"wall_s={wall_s:.2f} peak_rss_mb={rss / 1024:.1f}", flush=True)
sys.exit(0 if ok else 1)
