#!/usr/bin/env python3
"""model-server.py: a scripted model for the real-agent matrix (tests/it/real_agents.rs).

Usage: model-server.py SCRIPT.json RECORD.jsonl

Speaks the Anthropic Messages API (POST /v1/messages, streamed as SSE or not;
POST /v1/messages/count_tokens) and the OpenAI Responses API (POST
/v1/responses, streamed as SSE) on 127.0.0.1, port 0: the first stdout line is
the port. Python 3 standard library only, so CI needs nothing more.

SCRIPT is a JSON object {"steps": [STEP, ...], "fallback": "text"}: each
streamed model call takes the next STEP, in order, whatever API it came
through:
  {"text": "final answer"}                      a text reply (end_turn)
  {"tool": "Bash", "input": {...}}              one tool call (tool_use)
  ... "chunks": N, "delay_ms": D                a text streamed in N pieces,
                                                D ms apart (to steer mid-answer)
When the steps are used up, or for a side call (non-streamed, or an Anthropic
call that offers no tools), the reply is the text `fallback` (default "ok").

Every request is appended to RECORD as one JSON line {"n", "path", "step",
"body"} before it is answered, so a test can assert on what the agent sent
(e.g. that a deny message reached the model).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"next": 0, "n": 0}


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def take_step(script, scripted):
    """The next step for a scripted call, or the fallback text; and its index."""
    with LOCK:
        STATE["n"] += 1
        steps = script.get("steps", [])
        if scripted and STATE["next"] < len(steps):
            i = STATE["next"]
            STATE["next"] += 1
            return i, steps[i]
        return None, {"text": script.get("fallback", "ok")}


def pieces(text, n):
    n = max(1, min(int(n), len(text) or 1))
    size = -(-len(text) // n) if text else 1
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script = {}
    record = ""

    def log_message(self, fmt, *args):  # quiet: the record is the log
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.reply_json({"data": [], "object": "list"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0]
        if path.endswith("/count_tokens"):
            self.write_record(path, None, body)
            return self.reply_json({"input_tokens": 42})
        stream = bool(body.get("stream"))
        anthropic = path.endswith("/messages")
        # Side calls (titles, summaries) are not streamed or offer no tools:
        # they must not eat the scenario's steps.
        scripted = stream and (not anthropic or bool(body.get("tools")))
        index, step = take_step(self.script, scripted)
        self.write_record(path, index, body)
        if anthropic:
            return self.anthropic(body, step, stream)
        if path.endswith("/responses"):
            return self.openai(body, step)
        self.send_error(404)

    def write_record(self, path, index, body):
        with LOCK:
            with open(self.record, "a", encoding="utf-8") as f:
                f.write(json.dumps({"n": STATE["n"], "path": path, "step": index, "body": body}) + "\n")

    def reply_json(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, event, data):
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    # Anthropic Messages.
    def anthropic(self, body, step, stream):
        model = body.get("model", "claude-test")
        mid = f"msg_{STATE['n']:04d}"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if "tool" in step:
            block = {"type": "tool_use", "id": f"toolu_{STATE['n']:04d}", "name": step["tool"],
                     "input": step.get("input", {})}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": step.get("text", "")}
            stop = "end_turn"
        if not stream:
            return self.reply_json({"id": mid, "type": "message", "role": "assistant", "model": model,
                                    "content": [block], "stop_reason": stop, "stop_sequence": None,
                                    "usage": usage})
        self.start_sse()
        self.sse("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}})
        if block["type"] == "tool_use":
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": dict(block, input={})})
            self.sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        else:
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}})
            for i, piece in enumerate(pieces(block["text"], step.get("chunks", 1))):
                if i and step.get("delay_ms"):
                    time.sleep(step["delay_ms"] / 1000)
                self.sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "text_delta", "text": piece}})
        self.sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        self.sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 5}})
        self.sse("message_stop", {"type": "message_stop"})

    # OpenAI Responses.
    def openai(self, body, step):
        rid = f"resp_{STATE['n']:04d}"
        model = body.get("model", "gpt-test")
        created = int(time.time())
        base = {"id": rid, "object": "response", "created_at": created, "model": model, "output": []}
        self.start_sse()
        seq = iter(range(1 << 30))
        self.sse("response.created", {"type": "response.created", "sequence_number": next(seq),
                                      "response": dict(base, status="in_progress")})
        if "tool" in step:
            item = {"type": "function_call", "id": f"fc_{STATE['n']:04d}", "call_id": f"call_{STATE['n']:04d}",
                    "name": step["tool"], "arguments": json.dumps(step.get("input", {})), "status": "completed"}
            self.sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                    "output_index": 0, "item": dict(item, status="in_progress")})
        else:
            text = step.get("text", "")
            item_id = f"msg_{STATE['n']:04d}"
            self.sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                    "output_index": 0, "item": {
                                                        "type": "message", "id": item_id, "role": "assistant",
                                                        "status": "in_progress", "content": []}})
            self.sse("response.content_part.added", {"type": "response.content_part.added", "sequence_number": next(seq),
                                                     "item_id": item_id, "output_index": 0, "content_index": 0,
                                                     "part": {"type": "output_text", "text": "", "annotations": []}})
            for i, piece in enumerate(pieces(text, step.get("chunks", 1))):
                if i and step.get("delay_ms"):
                    time.sleep(step["delay_ms"] / 1000)
                self.sse("response.output_text.delta", {"type": "response.output_text.delta",
                                                        "sequence_number": next(seq), "item_id": item_id,
                                                        "output_index": 0, "content_index": 0, "delta": piece})
            item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
        self.sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                               "output_index": 0, "item": item})
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        self.sse("response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                        "response": dict(base, status="completed", output=[item], usage=usage)})


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: model-server.py SCRIPT.json RECORD.jsonl\n")
        return 2
    Handler.script = load(sys.argv[1])
    Handler.record = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
