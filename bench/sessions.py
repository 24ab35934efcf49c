#!/usr/bin/env python3
"""bench/sessions.py: idle interactive sessions that keep printing (stdlib only).

  sessions.py BIN_DIR WORK_DIR

A release runwire-serve holding BENCH_SESSIONS (default 64, the most a
server holds) interactive claude threads (`--interactive --no-record`: no
task log holds their lines) whose agent answers its turn, then, once every
turn is over, prints BENCH_SESSION_MB (default 8) MB of output without
pause while nobody streams it. Reports the server's peak RSS (VmHWM) and
its RSS once they are done, against the issue's bound (256 MB for 64).
Before the session engine, each thread buffered up to 32 MiB: 64 threads
held 2.16 GB (issue 24). Prints one JSON object; exit status 1 when the
bound is broken.
"""

import json
import os
import socket
import subprocess
import sys
import time

LINE_KB = 64


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/{pid}/status")


def post(port, path, body, timeout=60):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    b = body.encode()
    s.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(b)}\r\nConnection: close\r\n\r\n".encode() + b
    )
    data = b""
    while True:
        k = s.recv(65536)
        if not k:
            break
        data += k
    s.close()
    return data


def main():
    bin_dir, work = sys.argv[1:3]
    n = int(os.environ.get("BENCH_SESSIONS", "64"))
    mb = int(os.environ.get("BENCH_SESSION_MB", "8"))
    bound_mb = 256 * n / 64
    d = os.path.join(work, "sessions")
    os.makedirs(d, exist_ok=True)
    go, noise = os.path.join(d, "go"), os.path.join(d, "noise")
    line = '{"type":"noise","x":"' + "x" * (LINE_KB * 1024) + '"}\n'
    with open(noise, "w") as f:
        for _ in range(mb * 1024 // LINE_KB):
            f.write(line)
    agent = os.path.join(d, "printing.sh")
    with open(agent, "w") as f:
        f.write(f"""#!/bin/sh
read -r a; read -r b
echo '{{"type":"system","subtype":"init","session_id":"s-p'$$'","tools":[],"model":"m"}}'
echo '{{"type":"assistant","message":{{"id":"m1","role":"assistant","content":[{{"type":"text","text":"done"}}]}},"session_id":"s-p'$$'"}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-p'$$'"}}'
while [ ! -e {go} ]; do sleep 0.1; done
cat {noise}
touch {d}/printed.$$
while read -r l; do :; done
""")
    os.chmod(agent, 0o755)
    p = subprocess.Popen(
        [os.path.join(bin_dir, "runwire-serve"), "--listen", "127.0.0.1:0", "--agent", "claude",
         "--interactive", "--agent-cmd", agent, "--no-record"],
        env={**os.environ, "HARNESS_HOME": os.path.join(d, "harness"), "RUNWIRE_KEEPALIVE_MS": "60000"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = int(p.stdout.readline().decode().strip().rsplit(":", 1)[1])
        for i in range(n):
            body = json.dumps({"threadId": f"t{i}", "runId": f"r{i}",
                               "messages": [{"id": "m", "role": "user", "content": "go"}]})
            r = post(port, "/agui", body)
            if b"RUN_FINISHED" not in r:
                raise RuntimeError(f"run {i} did not finish: {r[:300]!r}")
        before = status_kb(p.pid, "VmRSS:")
        t0 = time.monotonic()
        open(go, "w").close()
        deadline = t0 + 300
        while sum(1 for e in os.listdir(d) if e.startswith("printed.")) < n:
            if time.monotonic() > deadline:
                raise RuntimeError("the agents did not print all their output in 300 s")
            time.sleep(0.1)
        wall = time.monotonic() - t0
        time.sleep(0.5)
        peak, now = status_kb(p.pid, "VmHWM:"), status_kb(p.pid, "VmRSS:")
    finally:
        p.terminate()
        p.wait()
    res = {"sessions": n, "printed_mb_each": mb, "rss_before_mb": round(before / 1024, 1),
           "peak_rss_mb": round(peak / 1024, 1), "rss_after_mb": round(now / 1024, 1),
           "print_wall_s": round(wall, 1), "bound_mb": bound_mb, "ok": peak / 1024 < bound_mb}
    print(json.dumps(res, indent=1))
    sys.exit(0 if res["ok"] else 1)


if __name__ == "__main__":
    main()
