"""What the bench clients share: starting and stopping runwire-serve, and
reading a process's memory and CPU from Linux /proc."""

import json
import os
import socket
import subprocess
import time


def start_server(bin_dir, home, extra=()):
    """runwire-serve on a free loopback port with HARNESS_HOME=home: (process, port)."""
    env = dict(os.environ, HARNESS_HOME=home)
    p = subprocess.Popen([os.path.join(bin_dir, "runwire-serve"), "--listen", "127.0.0.1:0", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    port = int(p.stdout.readline().decode().strip().rsplit(":", 1)[1])
    return p, port


def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def status_kb(p, key):
    """A kB field of /proc/<pid>/status (VmHWM: the peak RSS); -1 when absent."""
    with open(f"/proc/{p.pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def cpu_ms(p):
    """utime + stime of every thread of the process: CPU time does not swing
    with other load on a shared machine the way wall time does."""
    with open(f"/proc/{p.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


# What get_timed reads into (grown when a body needs more; pages touched now).
_RECV = bytearray(8 << 20)


def get_timed(port, path):
    """GET path over HTTP/1.0 on loopback: (when its last byte came, by
    time.perf_counter, and the whole response). Read into one buffer made
    before the clock starts: a fresh megabyte a read (what recv(n)
    allocates) cost the client 0.7 ms on a 3 MB body."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    got = 0
    while True:
        if got == len(_RECV):
            _RECV.extend(bytes(len(_RECV)))
        n = s.recv_into(memoryview(_RECV)[got:])
        if not n:
            break
        got += n
    end = time.perf_counter()
    s.close()
    return end, bytes(_RECV[:got])


# A Claude Code stream-json log as the bench agents write it: its head, then
# text deltas (runs-client.py, cluster-client.py).
SESSION = "bench-session"


def delta_line(text):
    return json.dumps({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": None,
                       "event": {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}}, separators=(",", ":"))


HEAD = [
    json.dumps({"type": "system", "subtype": "init", "cwd": "/", "session_id": SESSION, "model": "bench", "tools": []}),
    json.dumps({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": None, "event": {
        "type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant",
                                             "content": [], "model": "bench"}}}),
    json.dumps({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": None, "event": {
        "type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}}),
]
