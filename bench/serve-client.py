#!/usr/bin/env python3
"""bench/serve-client.py: the client side of bench/serve.sh (stdlib only).

  serve-client.py latency URL
      One POST /agui; for every TEXT_MESSAGE_CONTENT frame, the arrival time
      (CLOCK_MONOTONIC, taken when the bytes holding the frame's end were
      read) minus the send time its delta carries (bench/latency-agent.py).
      Prints: frames=N median_ms=X p99_ms=Y max_ms=Z terminal=T

  serve-client.py concurrent URL N [SAVE_DIR [SAVE_N]]
      N POST /agui at once (asyncio, one connection each). A stream passes
      when the answer is 200, every frame's data is JSON, the first event is
      RUN_STARTED and the only terminal event is RUN_FINISHED, last. The first
      SAVE_N bodies (default 3) are written to SAVE_DIR as SSE files.
      Prints: streams=N ok=K failed=F wall_s=W first_byte_max_s=B events=E
      refused_503=R (answered 503: the server's connection limit) and up to
      5 "fail: ..." lines.

Every socket operation has a timeout (BENCH_IO_TIMEOUT_S, default 60): this
never hangs. Exit status 0 when everything passed, 1 otherwise.
"""
import asyncio
import json
import os
import socket
import sys
import time
import uuid
from urllib.parse import urlsplit

IO_TIMEOUT = float(os.environ.get("BENCH_IO_TIMEOUT_S", "60"))
TERMINAL = ("RUN_FINISHED", "RUN_ERROR")


def request_bytes(host, port, path):
    body = json.dumps({
        "threadId": str(uuid.uuid4()),
        "runId": str(uuid.uuid4()),
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": "bench"}],
    }).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


class Reader:
    """Incremental HTTP/1.1 response reader: head, then a chunked or plain
    body, split into SSE frames (their joined data lines)."""

    def __init__(self):
        self.buf = b""
        self.status = None
        self.chunked = False
        self.body = bytearray()  # de-chunked body not yet split into frames
        self.raw = bytearray()  # the whole de-chunked body
        self.chunk_left = None  # bytes left in the current chunk; None = size line next
        self.done = False

    def feed(self, data):
        """Returns the frames (data payloads, str) completed by data."""
        self.buf += data
        if self.status is None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return []
            head = self.buf[:end].decode("latin-1").split("\r\n")
            self.status = int(head[0].split(" ")[1])
            for h in head[1:]:
                name, _, value = h.partition(":")
                if name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
                    self.chunked = True
            self.buf = self.buf[end + 4:]
        if self.chunked:
            self._dechunk()
        else:
            self.body += self.buf
            self.raw += self.buf
            self.buf = b""
        return self._frames()

    def _dechunk(self):
        while not self.done:
            if self.chunk_left is None:
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return
                size = int(self.buf[:i].split(b";")[0], 16)
                self.buf = self.buf[i + 2:]
                if size == 0:
                    self.done = True
                    return
                self.chunk_left = size
            take = min(self.chunk_left, len(self.buf))
            self.body += self.buf[:take]
            self.raw += self.buf[:take]
            self.buf = self.buf[take:]
            self.chunk_left -= take
            if self.chunk_left:
                return
            if len(self.buf) < 2:
                return  # the chunk's CRLF is still to come (chunk_left stays 0)
            self.buf = self.buf[2:]
            self.chunk_left = None

    def _frames(self):
        frames = []
        while True:
            i = self.body.find(b"\n\n")
            if i < 0:
                return frames
            frame = bytes(self.body[:i]).decode("utf-8")
            del self.body[:i + 2]
            data = [ln[6:] if ln.startswith("data: ") else ln[5:] for ln in frame.split("\n") if ln.startswith("data:")]
            if data:
                frames.append("\n".join(data))

    def end(self):
        """Frames left at end of body (a last frame without its blank line)."""
        if self.body:
            self.body += b"\n\n"
        return self._frames()


def latency(url):
    u = urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=IO_TIMEOUT)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(request_bytes(u.hostname, u.port, u.path or "/agui"))
    r = Reader()
    lat = []
    terminal = None
    bad = 0
    deadline = time.monotonic() + 10 * IO_TIMEOUT
    while time.monotonic() < deadline:
        data = s.recv(1 << 16)
        now = time.monotonic_ns()
        frames = r.feed(data) if data else r.end()
        for f in frames:
            ev = json.loads(f)
            if ev.get("type") == "TEXT_MESSAGE_CONTENT":
                try:
                    lat.append(now - int(ev["delta"]))
                except (KeyError, ValueError):
                    bad += 1
            elif ev.get("type") in TERMINAL:
                terminal = ev["type"]
        if not data or r.done:
            break
    s.close()
    if r.status != 200 or not lat:
        print(f"latency: status {r.status}, {len(lat)} timed frames", file=sys.stderr)
        return 1
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(round(p / 100.0 * (len(lat) - 1))))] / 1e6

    print(f"frames={len(lat)} median_ms={pct(50):.3f} p99_ms={pct(99):.3f} max_ms={lat[-1] / 1e6:.3f} "
          f"untimed={bad} terminal={terminal}")
    return 0 if terminal == "RUN_FINISHED" and bad == 0 else 1


async def one_stream(host, port, path, t0):
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), IO_TIMEOUT)
    writer.write(request_bytes(host, port, path))
    await writer.drain()
    r = Reader()
    events = []
    first_byte = None
    while True:
        data = await asyncio.wait_for(reader.read(1 << 16), IO_TIMEOUT)
        if first_byte is None and data:
            first_byte = time.monotonic() - t0
        frames = r.feed(data) if data else r.end()
        for f in frames:
            events.append(json.loads(f))  # a frame that is not JSON fails the stream
        if not data or r.done:
            break
    writer.close()
    errors = []
    if r.status != 200:
        errors.append(f"status {r.status}")
    if not events or events[0].get("type") != "RUN_STARTED":
        errors.append("first event is not RUN_STARTED")
    term = [i for i, e in enumerate(events) if e.get("type") in TERMINAL]
    if len(term) != 1 or term[0] != len(events) - 1 or events[-1].get("type") != "RUN_FINISHED":
        errors.append(f"terminal events at {term} of {len(events)}, last {events[-1].get('type') if events else None}")
    if r.chunked and not r.done:
        errors.append("chunked body not terminated")
    return errors, len(events), first_byte or 0.0, bytes(r.raw)


async def concurrent(url, n, save_dir, save_n):
    u = urlsplit(url)
    t0 = time.monotonic()
    results = await asyncio.gather(*(one_stream(u.hostname, u.port, u.path or "/agui", t0) for _ in range(n)),
                                   return_exceptions=True)
    wall = time.monotonic() - t0
    ok = 0
    fails = []
    events = 0
    first_max = 0.0
    saved = 0
    refused = 0
    for i, res in enumerate(results):
        if isinstance(res, BaseException):
            fails.append(f"stream {i}: {type(res).__name__}: {res}")
            continue
        errors, count, first, raw = res
        events += count
        refused += "status 503" in errors
        first_max = max(first_max, first)
        if errors:
            fails.append(f"stream {i}: {'; '.join(errors)}")
        else:
            ok += 1
            if save_dir and saved < save_n:
                with open(os.path.join(save_dir, f"stream-{i}.sse"), "wb") as f:
                    f.write(raw)
                saved += 1
    print(f"streams={n} ok={ok} failed={len(fails)} wall_s={wall:.3f} first_byte_max_s={first_max:.3f} events={events} "
          f"refused_503={refused}")
    for f in fails[:5]:
        print(f"fail: {f}")
    return 0 if ok == n else 1


def main(argv):
    if len(argv) >= 2 and argv[0] == "latency":
        return latency(argv[1])
    if len(argv) >= 3 and argv[0] == "concurrent":
        save_dir = argv[3] if len(argv) > 3 else None
        save_n = int(argv[4]) if len(argv) > 4 else 3
        return asyncio.run(concurrent(argv[1], int(argv[2]), save_dir, save_n))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
