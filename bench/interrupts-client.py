#!/usr/bin/env python3
"""bench/interrupts-client.py: the client side of bench/interrupts.sh (stdlib only).

  interrupts-client.py URL N

N times, on a fresh thread each: POST /agui with a message and read the run
to its RUN_FINISHED with the interrupt outcome; then POST /agui with a
`resume` entry that approves it, and time, from just before the connect of
that POST (CLOCK_MONOTONIC):
  first   the first SSE event of the resumed stream arriving (RUN_STARTED);
  result  the TOOL_CALL_RESULT of the approved call arriving (runwire wrote
          the answer, the agent ran and replied, runwire streamed it);
  end     the resumed run's terminal event.
The same-run baseline is a GET /healthz round trip (connect, request,
answer) taken right before each answer: the floor of one HTTP exchange on
this server and machine.

Prints one line per measure: name n= median_ms= p99_ms= max_ms=, then the
ratios of the medians to the baseline's. Exit status 0 when every resumed
run finished with RUN_FINISHED (success), 1 otherwise.
"""
import json
import os
import socket
import sys
import time
import uuid
from urllib.parse import urlsplit

IO_TIMEOUT = float(os.environ.get("BENCH_IO_TIMEOUT_S", "30"))


def connect(host, port):
    s = socket.create_connection((host, port), timeout=IO_TIMEOUT)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def post(host, port, path, body):
    raw = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(raw)}\r\n\r\n").encode()
    s = connect(host, port)
    s.sendall(head + raw)
    return s


class Events:
    """SSE `data:` payloads off a chunked HTTP/1.1 response, as they arrive."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.head = None
        self.body = b""

    def _read(self):
        b = self.sock.recv(65536)
        if not b:
            raise EOFError("the server closed the stream")
        self.buf += b

    def __iter__(self):
        while self.head is None:
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                self.head = self.buf[:i].decode("latin-1")
                if " 200 " not in self.head.split("\r\n")[0]:
                    raise RuntimeError(self.head.split("\r\n")[0])
                self.buf = self.buf[i + 4:]
            else:
                self._read()
        done = False
        while True:
            # De-chunk what is complete.
            while not done:
                i = self.buf.find(b"\r\n")
                if i < 0:
                    break
                size = int(self.buf[:i], 16)
                if size == 0:
                    done = True
                    break
                if len(self.buf) < i + 2 + size + 2:
                    break
                self.body += self.buf[i + 2:i + 2 + size]
                self.buf = self.buf[i + 2 + size + 2:]
            while b"\n\n" in self.body:
                frame, self.body = self.body.split(b"\n\n", 1)
                for line in frame.split(b"\n"):
                    if line.startswith(b"data: "):
                        yield time.monotonic(), json.loads(line[6:])
            if done:
                return
            self._read()


def healthz(host, port):
    t0 = time.monotonic()
    s = connect(host, port)
    s.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    data = b""
    while b'"ok":true' not in data:
        b = s.recv(4096)
        if not b:
            break
        data += b
    t1 = time.monotonic()
    s.close()
    return t1 - t0


def stats(name, xs):
    xs = sorted(xs)
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    p99 = xs[min(n - 1, int(round(0.99 * (n - 1))))]
    print(f"{name} n={n} median_ms={med * 1000:.3f} p99_ms={p99 * 1000:.3f} max_ms={xs[-1] * 1000:.3f}")
    return med


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: interrupts-client.py URL N")
    u = urlsplit(sys.argv[1])
    host, port, path = u.hostname, u.port, u.path or "/agui"
    n = int(sys.argv[2])
    first, result, end, base = [], [], [], []
    failed = 0
    why = []
    for _ in range(n):
        thread = str(uuid.uuid4())
        s = post(host, port, path, {"threadId": thread, "runId": str(uuid.uuid4()),
                                    "messages": [{"id": "m1", "role": "user", "content": "run true"}]})
        interrupt = None
        last = None
        for _, ev in Events(s):
            last = ev
            if ev.get("type") == "RUN_FINISHED":
                ints = (ev.get("outcome") or {}).get("interrupts") or []
                interrupt = ints[0] if ints else None
        s.close()
        if not interrupt:
            failed += 1
            why.append(f"ask: {json.dumps(last)[:200]}")
            continue
        base.append(healthz(host, port))
        t0 = time.monotonic()
        s = post(host, port, path, {"threadId": thread, "runId": str(uuid.uuid4()), "messages": [],
                                    "resume": [{"interruptId": interrupt["id"], "status": "resolved",
                                                "payload": {"approved": True}}]})
        t_first = t_result = t_end = None
        ok = False
        for t, ev in Events(s):
            last = ev
            if t_first is None:
                t_first = t
            if ev.get("type") == "TOOL_CALL_RESULT" and ev.get("toolCallId") == interrupt.get("toolCallId"):
                t_result = t
            if ev.get("type") in ("RUN_FINISHED", "RUN_ERROR"):
                t_end = t
                ok = ev.get("type") == "RUN_FINISHED" and not ev.get("outcome")
        s.close()
        if not ok or t_result is None:
            failed += 1
            why.append(f"answer: {json.dumps(last)[:200]}")
            continue
        first.append(t_first - t0)
        result.append(t_result - t0)
        end.append(t_end - t0)
    if not first:
        print(f"failed={failed}: no run resumed")
        for w in why[:5]:
            print(f"fail: {w}")
        return 1
    b = stats("baseline_healthz", base)
    m1 = stats("answer_to_first_event", first)
    m2 = stats("answer_to_tool_result", result)
    stats("answer_to_run_end", end)
    print(f"ratio_first_event_to_baseline={m1 / b:.2f} ratio_tool_result_to_baseline={m2 / b:.2f} failed={failed}")
    for w in why[:5]:
        print(f"fail: {w}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
