"""bench/supervise.sh's client (stdlib only): live control through
runwire-serve to runwire-supervise, on loopback.

1. Round trip of a control verb: POST /runs/:id/pause then /resume,
   BENCH_VERBS times each, through the server to the supervisor's socket
   and back (the supervisor journals each one); and the same verbs straight
   on the unix socket, for the server's share.
2. Kill to group gone: BENCH_KILLS tasks hang (stub engines, STUB_MODE=hang,
   each with a child in its group); each is killed through
   POST /runs/:id/tasks/:tid/kill. Measured: from the request to the last
   process of the task's engine group gone from /proc (polled every 0.5 ms),
   and to the HTTP reply (sent once the supervisor reaped the wrapper).

Usage: supervise-client.py BIN_DIR WORK_DIR ROOT
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

BIN, WORK, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
VERBS = int(os.environ.get("BENCH_VERBS", "200"))
KILLS = int(os.environ.get("BENCH_KILLS", "8"))
HOME = os.path.join(WORK, "home")


def post(port, path, body=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = b"" if body is None else json.dumps(body).encode()
    head = f"POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {len(data)}\r\n"
    if body is not None:
        head += "Content-Type: application/json\r\n"
    s.sendall(head.encode() + b"\r\n" + data)
    raw = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        raw += c
    s.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(rest or b"null")


def sock_call(path, req):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(path)
    s.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    return json.loads(buf)


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_for(what, f, limit=30):
    end = time.monotonic() + limit
    while not f():
        if time.monotonic() > end:
            sys.exit(f"bench: timed out waiting for {what}")
        time.sleep(0.01)


def ms(xs):
    xs = sorted(xs)
    return f"median {statistics.median(xs) * 1e3:.2f} ms, p90 {xs[int(len(xs) * 0.9) - 1] * 1e3:.2f} ms, max {xs[-1] * 1e3:.2f} ms (n={len(xs)})"


def main():
    os.makedirs(os.path.join(WORK, ".git"))
    os.makedirs(HOME)
    tasks = [{"id": f"t{i}", "adapter": "claude", "prompt": f"task {i}"} for i in range(KILLS)]
    with open(os.path.join(WORK, "b.plan.json"), "w") as f:
        json.dump({"v": "plan/v1", "tasks": tasks}, f)
    pids_dir = os.path.join(WORK, "pids")
    os.makedirs(pids_dir)
    env = dict(os.environ, HARNESS_HOME=HOME, STUB_MODE="hang",
               PATH=os.path.join(ROOT, "fixtures/stub-engines") + ":" + os.environ["PATH"],
               STUB_PID_FILE=os.path.join(pids_dir, "all"))
    sup = subprocess.Popen([os.path.join(BIN, "runwire-supervise"), "--plan", "b.plan.json",
                            "--max-parallel", str(KILLS), "--kill-grace", "4"],
                           cwd=WORK, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    srv = subprocess.Popen([os.path.join(BIN, "runwire-serve"), "--listen", "127.0.0.1:0"],
                           env=dict(os.environ, HARNESS_HOME=HOME), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = int(srv.stdout.readline().decode().strip().rsplit(":", 1)[1])
        live_path = os.path.join(WORK, "runstate", "b.live.json")

        def live():
            try:
                with open(live_path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return {}

        # Every engine and its child wrote their pid.
        wait_for("every task to hang", lambda: os.path.exists(STUB := os.path.join(pids_dir, "all"))
                 and len(open(STUB).read().split()) >= 2 * KILLS
                 and len(live().get("tasks", {})) == KILLS)
        run_id = os.listdir(os.path.join(HOME, "runs"))[0][: -len(".json")]
        sock = live()["sock"]

        rt = []
        for _ in range(VERBS):
            for verb in ("pause", "resume"):
                t = time.perf_counter()
                code, body = post(port, f"/runs/{run_id}/{verb}")
                rt.append(time.perf_counter() - t)
                assert code == 200 and body["ok"], body
        direct = []
        for _ in range(VERBS):
            for verb in ("pause", "resume"):
                t = time.perf_counter()
                r = sock_call(sock, {"verb": verb})
                direct.append(time.perf_counter() - t)
                assert r["ok"], r

        # Which engine pids belong to which task: the engine's pid is its pgid.
        groups = {}
        for pid in open(os.path.join(pids_dir, "all")).read().split():
            pid = int(pid)
            try:
                with open(f"/proc/{pid}/stat") as f:
                    pgid = int(f.read().rsplit(")", 1)[1].split()[2])
            except OSError:
                continue
            groups.setdefault(pgid, []).append(pid)
        wrapper_of = {t: e["pid"] for t, e in live()["tasks"].items()}
        # The wrapper's engine group: the group of a child of the wrapper's tree, found via the argv "task N".
        task_groups = {}
        for pgid, members in groups.items():
            try:
                with open(f"/proc/{pgid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            for t in wrapper_of:
                if f"task {t[1:]}".encode() in argv:
                    task_groups[t] = members
        if len(task_groups) != len(wrapper_of) or any(len(m) < 2 for m in task_groups.values()):
            sys.exit(f"bench: could not find every engine group with its child: {task_groups}")
        gone_t, reply_t = [], []
        for t in sorted(wrapper_of):
            members = task_groups.get(t, []) + [wrapper_of[t]]
            t0 = time.perf_counter()
            res = {}

            def k():
                res["r"] = post(port, f"/runs/{run_id}/tasks/{t}/kill")
                res["t"] = time.perf_counter() - t0

            th = threading.Thread(target=k)
            th.start()
            while not all(gone(p) for p in members):
                time.sleep(0.0005)
            gone_t.append(time.perf_counter() - t0)
            th.join(60)
            code, body = res["r"]
            assert code == 200 and body["state"] == "halted", body
            reply_t.append(res["t"])
        print(f"control verb round trip through runwire-serve (pause/resume): {ms(rt)}")
        print(f"same verbs straight on the unix socket: {ms(direct)}")
        print(f"kill -> wrapper and its engine group (engine + child) gone from /proc: {ms(gone_t)}")
        print(f"kill -> HTTP reply (wrapper reaped, halted journaled): {ms(reply_t)}")
        sup.wait(30)
    finally:
        srv.kill()
        srv.wait()
        if sup.poll() is None:
            os.killpg(sup.pid, 15)
            sup.wait(30)


main()
