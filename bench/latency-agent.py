#!/usr/bin/env python3
"""bench/latency-agent.py: a stub agent wrapper for bench/serve.sh.

Follows the wrapper contract (--prompt TEXT [--resume ID] ...; raw Claude Code
stream-json lines on stdout, then one runwire.status line). It prints one
streamed assistant text message whose text_delta lines each carry, as their
whole text, the CLOCK_MONOTONIC time (ns) just before the line was written.
CLOCK_MONOTONIC is one clock for every process on the machine, so the client
(bench/serve-client.py) can subtract it from its own arrival time.

Environment:
  LATENCY_LINES        text_delta lines to print (default 500)
  LATENCY_INTERVAL_MS  pause between them (default 10)
"""
import json
import os
import sys
import time
import uuid

lines = int(os.environ.get("LATENCY_LINES", "500"))
interval = float(os.environ.get("LATENCY_INTERVAL_MS", "10")) / 1000.0
session = str(uuid.uuid4())
msg = "msg_latency_" + uuid.uuid4().hex[:16]
out = sys.stdout


def emit(obj):
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    out.flush()


def stream(event):
    emit({"type": "stream_event", "event": event, "session_id": session, "parent_tool_use_id": None,
          "uuid": str(uuid.uuid4())})


emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": session, "model": "latency-stub",
      "tools": [], "uuid": str(uuid.uuid4())})
stream({"type": "message_start", "message": {"id": msg, "type": "message", "role": "assistant", "content": [],
                                             "model": "latency-stub"}})
stream({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
texts = []
for _ in range(lines):
    time.sleep(interval)
    texts.append(str(time.monotonic_ns()))
    stream({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": texts[-1]}})
stream({"type": "content_block_stop", "index": 0})
stream({"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
stream({"type": "message_stop"})
# The final result repeats the streamed text, as Claude Code's does, so it adds no message.
emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "".join(texts),
      "session_id": session, "uuid": str(uuid.uuid4())})
emit({"type": "runwire.status", "ok": True, "rc": 0, "session_id": session, "detail": None, "files": []})
