#!/usr/bin/env python3
"""bench/cluster-client.py: the work of bench/cluster.sh (stdlib only).

  cluster-client.py BIN_DIR WORK_DIR

Starts a 3-server NATS JetStream cluster on loopback (streams and buckets
with 3 replicas, as cluster/tests/it does), then:

(a) latency: node "alpha" (runwire-cluster node, default settings) on a
    harness home with one live task; a runwire-serve on that home (the local
    baseline) and a hub (runwire-serve --cluster URL --hub). One client
    follows the task's stream at the local server, one at the hub, both
    connected before the first line. This process appends BENCH_LINES
    (default 300) Claude text_delta lines, one every BENCH_INTERVAL_MS
    (default 20), each carrying CLOCK_MONOTONIC ns just before the write;
    delay = frame arrival - write time, at each client. Targets: hub median
    <= 10 ms and <= local median + 5 ms.
(b) listing: BENCH_NODES (default 20) nodes x BENCH_RUNS_PER_NODE (default
    50) runs (each a runwire-cluster node on its own home; runs written as
    `runs register` writes them, with a plan and a journal), all mirrored by
    the hub; the same runs registered in one local home served by a plain
    runwire-serve. GET /runs (the studio's request: every run) and
    GET /runs?limit=50, BENCH_LIST_REPEAT (default 21) times each after a
    warm-up, medians; target hub/local <= 2.
(c) the node's publishing rate beside a bare async-nats publisher's
    (cluster/examples/publish-rate.rs), with the hub and the (b) nodes
    stopped first.
Prints key=value lines; exit status 0 when every part ran.
"""
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import HEAD, SESSION, delta_line, get_timed, start_server, stop  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
LINES = int(os.environ.get("BENCH_LINES", "300"))
INTERVAL = float(os.environ.get("BENCH_INTERVAL_MS", "20")) / 1000.0
NODES = int(os.environ.get("BENCH_NODES", "20"))
PER_NODE = int(os.environ.get("BENCH_RUNS_PER_NODE", "50"))
REPEAT = int(os.environ.get("BENCH_LIST_REPEAT", "21"))
PUBLISH_RATE = os.environ.get("BENCH_PUBLISH_RATE", "")
STATUS = '{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":null,"files":[]}'
procs = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def spawn(cmd, log, env=None):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(WORK, log), "ab"), env=env)
    procs.append(p)
    return p


def nats_cluster():
    ports = [free_port() for _ in range(3)]
    cports = [free_port() for _ in range(3)]
    for i in range(3):
        routes = ",".join(f"nats://127.0.0.1:{cports[j]}" for j in range(3) if j != i)
        spawn(["nats-server", "-a", "127.0.0.1", "-p", str(ports[i]), "-n", f"s{i}", "-js",
               "-sd", os.path.join(WORK, f"js-{i}"), "--cluster_name", "rwbench",
               "--cluster", f"nats://127.0.0.1:{cports[i]}", "--routes", routes], f"nats-{i}.log")
    url = ",".join(f"nats://127.0.0.1:{p}" for p in ports)
    for _ in range(120):
        r = subprocess.run([os.path.join(BIN, "runwire-cluster"), "setup", "--url", url, "--replicas", "3"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            return url
        time.sleep(0.5)
    sys.exit("bench: the cluster's setup never succeeded")


def run_id(repo, slug):
    return hashlib.sha256((repo + "\0" + repo).encode()).hexdigest()[:12] + "--" + slug


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def register(home, repo, slug, journal_states=(("t", "leased"),)):
    """A run as `runs register` writes it (pointer, journal and its link),
    with a one-task Claude plan, an empty task log and journal records."""
    rs = os.path.join(repo, "runstate")
    os.makedirs(rs, exist_ok=True)
    rid = run_id(repo, slug)
    os.makedirs(os.path.join(home, "runs"), exist_ok=True)
    links = os.path.join(home, "journals")
    os.makedirs(links, exist_ok=True)
    journal = os.path.join(rs, slug + ".jsonl")
    write(journal, "".join(json.dumps({"v": "runstate/v1", "ts": "2026-01-01T00:00:00.000Z", "actor": "runner",
                                       "task": t, "state": s}) + "\n" for t, s in journal_states))
    os.link(journal, os.path.join(links, rid + ".jsonl"))
    write(os.path.join(rs, slug + ".plan.json"),
          json.dumps({"v": "plan/v1", "tasks": [{"id": "t", "adapter": "claude", "prompt": "p"}]}))
    write(os.path.join(rs, slug + ".t.log"), "")
    tmp = os.path.join(home, "runs", f".{rid}.tmp")
    with open(tmp, "w") as f:
        json.dump({"runId": rid, "slug": slug, "repoRoot": repo, "project": os.path.basename(repo),
                   "repo": os.path.basename(repo), "branch": "main", "worktree": repo, "runstateDir": rs,
                   "created": "2026-01-01T00:00:00.000Z"}, f, indent=2)
    os.replace(tmp, os.path.join(home, "runs", rid + ".json"))
    return rid, rs


def node(url, name, home):
    return spawn([os.path.join(BIN, "runwire-cluster"), "node", "--url", url, "--node", name, "--home", home],
                 f"node-{name}.log")


def get(port, path):
    end, raw = get_timed(port, path)
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body, end


def get_json(port, path):
    code, body, _ = get(port, path)
    return json.loads(body) if code == 200 else None


def wait(what, secs, f):
    deadline = time.time() + secs
    while time.time() < deadline:
        v = f()
        if v:
            return v
        time.sleep(0.1)
    sys.exit(f"bench: timed out after {secs} s waiting for {what}")



def follower(port, path, delays, connected):
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    connected.set()
    buf = b""
    while True:
        b = s.recv(1 << 16)
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if not b:
            break
        buf += b
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            for line in frame.split(b"\n"):
                if line.startswith(b"data: "):
                    ev = json.loads(line[6:])
                    if ev.get("type") == "token_delta":
                        delays.append((now - int(ev["data"]["text"])) / 1e6)
                    if ev.get("type") == "exit":
                        s.close()
                        return
    s.close()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else -1


def part_a(url):
    home, hub_home = os.path.join(WORK, "alpha"), os.path.join(WORK, "hub")
    rid, rs = register(home, os.path.join(WORK, "repo-alpha"), "live")
    node(url, "alpha", home)
    local, lport = start_server(BIN, home)
    procs.append(local)
    hub, hport = start_server(BIN, hub_home, ["--cluster", url, "--hub"])
    procs.append(hub)
    hub_id = f"alpha.{rid}"
    wait("the run at the hub", 60, lambda: get(hport, f"/runs/{hub_id}/tasks/t")[0] == 200)
    local_d, hub_d = [], []
    ready = [threading.Event(), threading.Event()]
    ts = [threading.Thread(target=follower, args=(lport, f"/runs/{rid}/tasks/t/stream", local_d, ready[0])),
          threading.Thread(target=follower, args=(hport, f"/runs/{hub_id}/tasks/t/stream", hub_d, ready[1]))]
    for t in ts:
        t.start()
    for r in ready:
        r.wait(10)
    time.sleep(0.5)
    with open(os.path.join(rs, "live.t.log"), "a") as f:
        for line in HEAD:
            f.write(line + "\n")
            f.flush()
        time.sleep(0.3)
        for _ in range(LINES):
            f.write(delta_line(str(time.clock_gettime_ns(time.CLOCK_MONOTONIC))) + "\n")
            f.flush()
            time.sleep(INTERVAL)
        f.write(STATUS + "\n")
    for t in ts:
        t.join(120)
    for name, d in (("local", local_d), ("hub", hub_d)):
        print(f"latency_{name} frames={len(d)} median_ms={statistics.median(d) if d else -1:.2f} "
              f"p90_ms={pct(d, 0.9):.2f} p99_ms={pct(d, 0.99):.2f} max_ms={max(d) if d else -1:.2f}", flush=True)
    if local_d and hub_d:
        hm, lm = statistics.median(hub_d), statistics.median(local_d)
        print(f"latency hub_minus_local_median_ms={hm - lm:.2f} targets: hub_median<=10 {hm <= 10}, "
              f"hub<=local+5 {hm <= lm + 5}", flush=True)
    stop(local)
    return hub, hport, rid, rs, home


def part_b(url, hport):
    local_home = os.path.join(WORK, "local-1000")
    sim = []
    for n in range(NODES):
        name = f"n{n:02d}"
        home = os.path.join(WORK, "nodes", name)
        for r in range(PER_NODE):
            states = (("t", "leased"), ("t", "committed")) if r % 2 else (("t", "leased"),)
            repo = os.path.join(WORK, "repos", name, f"r{r}")
            register(home, repo, f"s{r}", states)
            # The same run in the local home of 1,000 runs.
            register(local_home, os.path.join(WORK, "repos-local", name, f"r{r}"), f"s{r}", states)
        sim.append(node(url, name, home))
    total = NODES * PER_NODE

    def listed():
        j = get_json(hport, "/runs?limit=1")
        return j and j["total"] >= total + 1

    t0 = time.time()
    wait(f"{total} runs at the hub", 600, listed)
    print(f"listing mirrored runs={total} nodes={NODES} secs={time.time() - t0:.1f}", flush=True)
    local, lport = start_server(BIN, local_home)
    procs.append(local)
    out = {}
    for name, port in (("local", lport), ("hub", hport)):
        for path in ("/runs", "/runs?limit=50"):
            # Warm-up: the index rows are written once the files are older than 2 s.
            get(port, path)
            time.sleep(2.5)
            get(port, path)
            times = []
            for _ in range(REPEAT):
                t = time.perf_counter()
                code, body, end = get(port, path)
                times.append((end - t) * 1000)
                assert code == 200
            n = len(json.loads(body)["runs"])
            out[(name, path)] = statistics.median(times)
            print(f"listing_{name} path={path} runs={n} median_ms={out[(name, path)]:.2f} "
                  f"min_ms={min(times):.2f}", flush=True)
    for path in ("/runs", "/runs?limit=50"):
        r = out[("hub", path)] / out[("local", path)]
        print(f"listing path={path} hub_over_local={r:.2f} target<=2 {r <= 2}", flush=True)
    j = get_json(hport, "/runs?node=n07&limit=5")
    print(f"listing node_filter n07 total={j['total']} first_node={j['runs'][0]['node']}", flush=True)
    stop(local)
    return sim


def main():
    url = nats_cluster()
    print(f"cluster url={url}", flush=True)
    hub, hport, rid, rs, home = part_a(url)
    sim = part_b(url, hport) if NODES > 0 else []
    for p in sim + [hub]:
        stop(p)
    rate = PUBLISH_RATE or os.path.join(BIN, "examples", "publish-rate")
    r = subprocess.run([rate, "--url", url, "--node", "alpha", "--run", rid, "--log",
                        os.path.join(rs, "live.t.log")], stdout=subprocess.PIPE, text=True)
    sys.stdout.write(r.stdout)
    return r.returncode


try:
    rc = main()
finally:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
sys.exit(rc)
