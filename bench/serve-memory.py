#!/usr/bin/env python3
"""bench/serve-memory.py: the work of bench/serve-memory.sh (stdlib only).

  serve-memory.py BIN_DIR WORK_DIR

Every log is generated in WORK_DIR on the fly (never committed) and removed
with it. The server's peak RSS is its VmHWM, read from /proc; each part
starts a fresh server.

(a) FAN: one task log of BENCH_LOG_MB (default 1024) MB of Claude lines
    (text deltas, assistant messages, 64 KiB tool results) and a status
    line. Baseline in the same run: a fresh server serving the whole stream
    to 1 client; then a fresh server serving it to BENCH_STREAM_CLIENTS
    (default 10) clients at once. Reports both peaks and their ratio; checks
    that every client got the exit event and the 10-client peak is under
    BENCH_RSS_LIMIT_MB (default 200).
(b) HUGE: one message of BENCH_HUGE_MB (default 150) MB streamed as text
    deltas, then the whole message as one assistant line (over the line
    cap), to BENCH_HUGE_CLIENTS (default 4) clients. Reports the peak; the
    same limit applies.
(c) STALL: one client opens the stream and reads nothing while
    BENCH_STALL_MB (default 256) MB are appended to the live task's log.
    Reports the peak before and after; checks the growth is under 32 MB.
BENCH_PARTS picks parts (default abc).
Prints one key=value line per part; exit status 0 when every check passed.
"""
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time

from benchlib import start_server, status_kb, stop

BIN, WORK = sys.argv[1], sys.argv[2]
PARTS = os.environ.get("BENCH_PARTS", "abc")
LOG_MB = int(os.environ.get("BENCH_LOG_MB", "1024"))
CLIENTS = int(os.environ.get("BENCH_STREAM_CLIENTS", "10"))
LIMIT_MB = int(os.environ.get("BENCH_RSS_LIMIT_MB", "200"))
HUGE_MB = int(os.environ.get("BENCH_HUGE_MB", "150"))
HUGE_CLIENTS = int(os.environ.get("BENCH_HUGE_CLIENTS", "4"))
STALL_MB = int(os.environ.get("BENCH_STALL_MB", "256"))
HOME = os.path.join(WORK, "home")


def server(extra=()):
    return start_server(BIN, HOME, extra)
SESSION = "bench-session"
STATUS = '{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":null,"files":[]}'
MB = 1 << 20
ok = True


def check(cond, what):
    global ok
    if not cond:
        ok = False
        print(f"bench: FAILED: {what}", file=sys.stderr)


def register(name):
    repo = os.path.join(WORK, "repos", name)
    rs = os.path.join(repo, "runstate")
    os.makedirs(rs, exist_ok=True)
    rid = hashlib.sha256((repo + "\0" + repo).encode()).hexdigest()[:12] + "--" + name
    os.makedirs(os.path.join(HOME, "runs"), exist_ok=True)
    with open(os.path.join(HOME, "runs", rid + ".json"), "w") as f:
        json.dump({"runId": rid, "slug": name, "repoRoot": repo, "project": name, "repo": name, "branch": "main",
                   "worktree": repo, "runstateDir": rs, "created": "2026-01-01T00:00:00.000Z"}, f)
    with open(os.path.join(rs, name + ".plan.json"), "w") as f:
        json.dump({"v": "plan/v1", "tasks": [{"id": "t", "adapter": "claude", "prompt": "p"}]}, f)
    return rid, os.path.join(rs, name + ".t.log")


def ev(e):
    return json.dumps({"type": "stream_event", "event": e, "session_id": SESSION}, separators=(",", ":"))


def message_lines(i, text_parts, tool_bytes):
    """One assistant turn: streamed text, the whole message, a tool call and its result."""
    mid = f"msg_{i}"
    out = [ev({"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant",
                                                     "content": [], "model": "m"}}),
           ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
    out += [ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
            for t in text_parts]
    out.append(ev({"type": "content_block_stop", "index": 0}))
    out.append(json.dumps({"type": "assistant", "session_id": SESSION, "message": {
        "id": mid, "role": "assistant", "content": [{"type": "text", "text": "".join(text_parts)},
                                                    {"type": "tool_use", "id": f"tu_{i}", "name": "Bash",
                                                     "input": {"command": "cat big"}}]}}))
    out.append(json.dumps({"type": "user", "session_id": SESSION, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"tu_{i}", "content": "r" * tool_bytes}]}}))
    out.append(ev({"type": "message_stop"}))
    return "\n".join(out) + "\n"


def write_log(path, mb):
    init = json.dumps({"type": "system", "subtype": "init", "session_id": SESSION, "model": "m", "tools": []})
    block = "".join(message_lines(i, [f"word{j} " * 8 for j in range(40)], 64 * 1024) for i in range(8))
    with open(path, "w") as f:
        f.write(init + "\n")
        written = 0
        while written < mb * MB:
            f.write(block)
            written += len(block)
        f.write(STATUS + "\n")


def follow(port, path, result, i):
    """Reads a whole stream; result[i] = (bytes, saw the exit event)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=600)
    s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    n, tail = 0, b""
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
        tail = (tail + b)[-4096:]
    s.close()
    result[i] = (n, b'"type":"exit"' in tail)


def fan(rid, clients):
    p, port = server()
    result = [None] * clients
    threads = [threading.Thread(target=follow, args=(port, f"/runs/{rid}/tasks/t/stream", result, i))
               for i in range(clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.time() - t0
    peak = status_kb(p, "VmHWM") / 1024
    stop(p)
    check(all(r and r[1] for r in result), f"{clients} clients: every client gets the exit event ({result})")
    return peak, secs, result[0][0] if result[0] else 0


if "a" in PARTS:
    rid, log = register("fan")
    t0 = time.time()
    write_log(log, LOG_MB)
    gen = time.time() - t0
    one, one_s, sent = fan(rid, 1)
    many, many_s, _ = fan(rid, CLIENTS)
    check(many < LIMIT_MB, f"{CLIENTS} clients on a {LOG_MB} MB log: peak {many:.0f} MB >= {LIMIT_MB} MB")
    print(f"fan log_mb={LOG_MB} gen_s={gen:.1f} stream_mb={sent / MB:.0f} rss_1_client_mb={one:.1f} "
          f"secs_1={one_s:.1f} rss_{CLIENTS}_clients_mb={many:.1f} secs_{CLIENTS}={many_s:.1f} "
          f"ratio={many / one:.2f}")
    os.remove(log)

if "b" in PARTS:
    rid, log = register("huge")
    init = json.dumps({"type": "system", "subtype": "init", "session_id": SESSION, "model": "m", "tools": []})
    part = "y" * (64 * 1024)
    n = HUGE_MB * MB // len(part)
    with open(log, "w") as f:
        f.write(init + "\n")
        f.write(message_lines(0, [part] * n, 16))
        f.write(STATUS + "\n")
    peak, secs, _ = fan(rid, HUGE_CLIENTS)
    check(peak < LIMIT_MB, f"{HUGE_CLIENTS} clients on a {HUGE_MB} MB message: peak {peak:.0f} MB >= {LIMIT_MB} MB")
    print(f"huge message_mb={HUGE_MB} clients={HUGE_CLIENTS} rss_mb={peak:.1f} secs={secs:.1f}")
    os.remove(log)

if "c" in PARTS:
    rid, log = register("stall")
    open(log, "w").close()
    p, port = server()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /runs/{rid}/tasks/t/stream HTTP/1.0\r\n\r\n".encode())
    time.sleep(0.5)
    before = status_kb(p, "VmHWM") / 1024
    block = "".join(message_lines(i, [f"word{j} " * 8 for j in range(40)], 64 * 1024) for i in range(8))
    t0 = time.time()
    with open(log, "a") as f:
        written = 0
        while written < STALL_MB * MB:
            f.write(block)
            f.flush()
            written += len(block)
    time.sleep(2)
    after = status_kb(p, "VmHWM") / 1024
    secs = time.time() - t0
    stop(p)
    s.close()
    check(after - before < 32, f"a client that reads nothing: the server grew {after - before:.0f} MB")
    print(f"stall appended_mb={STALL_MB} secs={secs:.1f} rss_before_mb={before:.1f} rss_after_mb={after:.1f}")

sys.exit(0 if ok else 1)
