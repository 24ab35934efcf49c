#!/usr/bin/env python3
"""bench/interrupt-agent.py: a minimal Claude Code stand-in for bench/interrupts.sh.

Speaks the stream-json control protocol runwire-serve --interactive drives
(the shapes of the recorded cells in fixtures/interactive/claude-code/):
answers `initialize`; for each user message prints a system init, an
assistant message with one Bash tool_use, and a `can_use_tool` control
request for it; when runwire answers (allow or deny), prints the tool result,
one text message and the turn's `result`. No delays: the bench measures
runwire, not an agent. stdlib only; exits when its stdin closes.
"""
import json
import sys
import uuid

SESSION = str(uuid.uuid4())


def out(v):
    sys.stdout.write(json.dumps(v) + "\n")
    sys.stdout.flush()


def main():
    turn = 0
    pending = {}
    for raw in sys.stdin:
        try:
            m = json.loads(raw)
        except ValueError:
            continue
        t = m.get("type")
        if t == "control_request" and m.get("request", {}).get("subtype") == "initialize":
            out({"type": "control_response", "response": {"subtype": "success", "request_id": m["request_id"], "response": {}}})
        elif t == "control_request":
            out({"type": "control_response", "response": {"subtype": "success", "request_id": m.get("request_id", ""), "response": {}}})
        elif t == "user":
            turn += 1
            tool_id = f"toolu_bench_{turn}"
            req_id = str(uuid.uuid4())
            pending[req_id] = tool_id
            out({"type": "system", "subtype": "init", "session_id": SESSION, "model": "bench", "cwd": "/tmp", "tools": ["Bash"]})
            out({"type": "assistant", "session_id": SESSION, "message": {"id": f"msg_a{turn}", "role": "assistant", "content": [
                {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "true", "description": "bench"}}]}})
            out({"type": "control_request", "request_id": req_id, "request": {
                "subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "true", "description": "bench"},
                "tool_use_id": tool_id, "permission_suggestions": []}})
        elif t == "control_response":
            r = m.get("response", {})
            tool_id = pending.pop(r.get("request_id"), None)
            if tool_id is None:
                continue
            allowed = (r.get("response") or {}).get("behavior") == "allow"
            out({"type": "user", "session_id": SESSION, "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": "ok" if allowed else "denied", "is_error": not allowed}]}})
            out({"type": "assistant", "session_id": SESSION, "message": {"id": f"msg_b{turn}", "role": "assistant", "content": [
                {"type": "text", "text": "done"}]}})
            out({"type": "result", "subtype": "success", "is_error": False, "session_id": SESSION, "num_turns": 1,
                 "result": "done", "duration_ms": 1, "total_cost_usd": 0,
                 "usage": {"input_tokens": 1, "output_tokens": 1}})


if __name__ == "__main__":
    main()
