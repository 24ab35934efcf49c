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
    Then BENCH_BURSTS (default 5) bursts, 0.5 s apart, of BENCH_BURST
    (default 2000) lines written with no pause, the same delays; target:
    hub median <= 3x the local median, both over every burst's lines (each
    burst's own ratio is printed too: one burst's ratio ranged from 2 to 12
    within a run, session 13). The lines are written by a process of its
    own, each client follows in a process of its own and only times the
    chunks it receives (frames are parsed after the stream ends): until
    session 11 the writer and the parsing shared this process's lock with
    the clients, and until session 13 the two clients shared it, so the
    hub's client, woken for a batch, waited for the lock while the local
    one took its lines one at a time.
(d) first frame: a client of GET /runs/events (no resume point) at the
    node's own server and at the hub, connect -> its first frame (`ready`),
    BENCH_LIST_REPEAT times each, medians; target hub <= max(3x local, 1 ms).
(e) 50 feed clients at the hub: the RSS of the hub and its children (the
    sidecar) before and with them connected; target <= 30 MB more.
(f) command acknowledgement: node "beta" is a runwire-serve --cluster
    --node beta (its sidecar forwards control requests to it); POST
    /runs/RUN/tasks/t/steer (no live session: the node's own answer) at the
    hub, BENCH_ACKS (default 200) times, beside the same request at beta's
    own server: median and p99; targets hub median <= 2 ms, p99 <= 10 ms.
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
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import get_timed, start_server, stop  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
LINES = int(os.environ.get("BENCH_LINES", "300"))
INTERVAL = float(os.environ.get("BENCH_INTERVAL_MS", "20")) / 1000.0
NODES = int(os.environ.get("BENCH_NODES", "20"))
PER_NODE = int(os.environ.get("BENCH_RUNS_PER_NODE", "50"))
REPEAT = int(os.environ.get("BENCH_LIST_REPEAT", "21"))
BURST = int(os.environ.get("BENCH_BURST", "2000"))
BURSTS = int(os.environ.get("BENCH_BURSTS", "5"))
ACKS = int(os.environ.get("BENCH_ACKS", "200"))
PUBLISH_RATE = os.environ.get("BENCH_PUBLISH_RATE", "")
STATUS = '{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":null,"files":[]}'
procs = []


def free_ports(n):
    # Every listener held until all n are bound: ports taken one at a time
    # (bind, close, bind again) can come back twice, and a cluster whose two
    # servers got one port loses a server and never places 3 replicas.
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def spawn(cmd, log, env=None):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(WORK, log), "ab"), env=env)
    procs.append(p)
    return p


def nats_cluster():
    both = free_ports(6)
    ports, cports = both[:3], both[3:]
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
    """Follows one task stream. Each chunk is only timed as it arrives and
    kept; the frames are parsed after the stream ends, so this process's
    own work (Python's, under one lock for both followers) is not in the
    delays of the frames that follow."""
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    connected.set()
    chunks, tail = [], b""
    while True:
        b = s.recv(1 << 16)
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if not b:
            break
        chunks.append((now, b))
        # The task's `exit` event ends what this measures (also when split across chunks).
        if b'"type":"exit"' in tail + b:
            break
        tail = b[-32:]
    s.close()
    # A frame arrived when the chunk that completed it did.
    buf = b""
    for now, b in chunks:
        buf += b
        frames = buf.split(b"\n\n")
        buf = frames.pop()
        for frame in frames:
            for line in frame.split(b"\n"):
                if line.startswith(b"data: "):
                    ev = json.loads(line[6:])
                    if ev.get("type") == "token_delta":
                        phase, ns = ev["data"]["text"].split(":")
                        delays.append((phase, (now - int(ns)) / 1e6))


# Run in a process of its own: its loop holds Python's lock while it
# writes, and the followers' arrival times would wait for it.
WRITER = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from benchlib import HEAD, delta_line
path, lines, interval, burst, bursts, status = (sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]),
                                                int(sys.argv[6]), sys.argv[7])
with open(path, "a") as f:
    for line in HEAD:
        f.write(line + "\\n")
        f.flush()
    time.sleep(0.3)
    for _ in range(lines):
        f.write(delta_line("p:" + str(time.clock_gettime_ns(time.CLOCK_MONOTONIC))) + "\\n")
        f.flush()
        time.sleep(interval)
    # The bursts: one write per line, no pause.
    for k in range(bursts):
        time.sleep(0.5)
        for _ in range(burst):
            f.write(delta_line("b" + str(k) + ":" + str(time.clock_gettime_ns(time.CLOCK_MONOTONIC))) + "\\n")
            f.flush()
    time.sleep(0.5)
    f.write(status + "\\n")
"""


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
    # Each client in a process of its own (forked: it needs nothing but
    # its socket), its delays sent back when its stream ends.
    ctx = multiprocessing.get_context("fork")

    def follow(port, path, out, connected):
        d = []
        follower(port, path, d, connected)
        out.put(d)

    outs, ready = [ctx.Queue(), ctx.Queue()], [ctx.Event(), ctx.Event()]
    ps = [ctx.Process(target=follow, args=(lport, f"/runs/{rid}/tasks/t/stream", outs[0], ready[0])),
          ctx.Process(target=follow, args=(hport, f"/runs/{hub_id}/tasks/t/stream", outs[1], ready[1]))]
    for p in ps:
        p.start()
    for r in ready:
        r.wait(10)
    time.sleep(0.5)
    subprocess.run([sys.executable, "-c", WRITER, os.path.dirname(os.path.abspath(__file__)),
                    os.path.join(rs, "live.t.log"), str(LINES), str(INTERVAL), str(BURST), str(BURSTS), STATUS],
                   check=True)
    local_d, hub_d = outs[0].get(timeout=120), outs[1].get(timeout=120)
    for p in ps:
        p.join(10)
    for label, is_phase in (("latency", lambda ph: ph == "p"), ("burst", lambda ph: ph.startswith("b"))):
        med = {}
        for name, d in (("local", local_d), ("hub", hub_d)):
            d = [x for ph, x in d if is_phase(ph)]
            med[name] = statistics.median(d) if d else -1
            print(f"{label}_{name} frames={len(d)} median_ms={med[name]:.2f} "
                  f"p90_ms={pct(d, 0.9):.2f} p99_ms={pct(d, 0.99):.2f} max_ms={max(d) if d else -1:.2f}", flush=True)
        hm, lm = med["hub"], med["local"]
        if label == "latency":
            print(f"latency hub_minus_local_median_ms={hm - lm:.2f} targets: hub_median<=10 {hm <= 10}, "
                  f"hub<=local+5 {hm <= lm + 5}", flush=True)
        else:
            each = []
            for k in range(BURSTS):
                m = [statistics.median([x for ph, x in d if ph == f"b{k}"] or [-1]) for d in (local_d, hub_d)]
                each.append(f"{m[1] / m[0]:.2f}" if m[0] > 0 else "-")
            r = hm / lm if lm > 0 else -1
            print(f"burst lines={BURST} bursts={BURSTS} hub_over_local_median={r:.2f} "
                  f"hub_minus_local_median_ms={hm - lm:.2f} each_burst=[{' '.join(each)}] "
                  f"target<=3 {0 <= r <= 3}", flush=True)
    part_d(lport, hport)
    stop(local)
    return hub, hport, rid, rs, home


def first_frame(port):
    """Connect -> the first complete SSE frame of GET /runs/events, in ms."""
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET /runs/events HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    buf = b""
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        buf += b
        head, _, body = buf.partition(b"\r\n\r\n")
        if b"\n\n" in body:
            break
    ms = (time.perf_counter() - t) * 1000
    s.close()
    return ms


def tree_rss_kb(pid):
    """The RSS of pid and its descendants, in kB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return total


def part_d(lport, hport):
    med = {}
    for name, port in (("local", lport), ("hub", hport)):
        first_frame(port)
        times = [first_frame(port) for _ in range(REPEAT)]
        med[name] = statistics.median(times)
        print(f"first_frame_{name} median_ms={med[name]:.2f} min_ms={min(times):.2f} max_ms={max(times):.2f}",
              flush=True)
    bound = max(3 * med["local"], 1.0)
    print(f"first_frame hub_median_ms={med['hub']:.2f} bound_ms={bound:.2f} target {med['hub'] <= bound}",
          flush=True)


def part_e(hub):
    before = tree_rss_kb(hub.pid)
    clients = []
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", hub.port), timeout=30)
        s.sendall(b"GET /runs/events HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        clients.append(s)
    time.sleep(2)
    for s in clients:
        s.setblocking(False)
        try:
            s.recv(1 << 16)
        except OSError:
            pass
    time.sleep(1)
    during = tree_rss_kb(hub.pid)
    for s in clients:
        s.close()
    mb = (during - before) / 1024
    print(f"feed_clients n=50 hub_tree_rss_before_mb={before / 1024:.1f} with_mb={during / 1024:.1f} "
          f"added_mb={mb:.1f} target<=30 {mb <= 30}", flush=True)


def part_f(url, hport):
    home = os.path.join(WORK, "beta")
    rid, _ = register(home, os.path.join(WORK, "repo-beta"), "acks")
    beta, bport = start_server(BIN, home, ["--cluster", url, "--node", "beta"])
    procs.append(beta)
    hub_id = f"beta.{rid}"
    wait("beta's run at the hub", 60, lambda: get(hport, f"/runs/{hub_id}/tasks/t")[0] == 200)
    body = b'{"msg":"bench"}'

    def post(port, path):
        t = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(f"POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        raw = b""
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            raw += b
        s.close()
        return (time.perf_counter() - t) * 1000, int(raw.split(b" ")[1])

    # Until beta's sidecar answers control requests (it subscribes after it starts).
    wait("beta answering through the hub", 60, lambda: post(hport, f"/runs/{hub_id}/tasks/t/steer")[1] != 503)
    for name, port, path in (("local", bport, f"/runs/{rid}/tasks/t/steer"),
                             ("hub", hport, f"/runs/{hub_id}/tasks/t/steer")):
        for _ in range(10):
            post(port, path)
        res = [post(port, path) for _ in range(ACKS)]
        times = [t for t, _ in res]
        codes = sorted({c for _, c in res})
        print(f"command_ack_{name} n={ACKS} codes={codes} median_ms={statistics.median(times):.2f} "
              f"p99_ms={pct(times, 0.99):.2f} max_ms={max(times):.2f}", flush=True)
        if name == "hub":
            m, p99 = statistics.median(times), pct(times, 0.99)
            print(f"command_ack targets: median<=2 {m <= 2}, p99<=10 {p99 <= 10}", flush=True)
    stop(beta)


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
    hub.port = hport
    part_e(hub)
    part_f(url, hport)
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
