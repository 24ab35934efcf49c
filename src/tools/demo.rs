//! The demo agent: a stand-in for Claude Code, built into `runwire-serve`,
//! so a newcomer can try an approval card, a question, a steer and Stop
//! with no agent installed (`runwire-serve --demo`).
//!
//! It speaks the same stream-json control protocol runwire drives Claude
//! Code with ([`crate::session::claude`]): it takes `initialize`, user
//! messages, `can_use_tool` answers, `interrupt` and `set_permission_mode`,
//! and writes `system/init`, streamed text, tool calls, `can_use_tool`
//! requests and `result`. Unlike the strict replay stubs of the tests it
//! accepts any prompt and any answer and plays along. It runs nothing: the
//! command it asks to run is only described.
//!
//! [`Demo`] is the state object with no IO (a line in, timed lines out);
//! [`run`] is its IO loop on stdin/stdout.

use crate::util::lines::{read_capped, Capped, Rest};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set (to `1`) by `runwire-serve --demo` for the agents it starts: the
/// same binary, started with claude's flags, is then the demo agent.
pub const ENV: &str = "RUNWIRE_DEMO_AGENT";

/// This process was started as the demo agent.
pub fn is_agent() -> bool {
    std::env::var_os(ENV).is_some_and(|v| v == "1")
}

/// Pause between streamed pieces, so the demo looks live.
const PACE_MS: u64 = 120;
/// The command the demo asks to run (and never runs).
const COMMAND: &str = "touch demo.txt && ls";

/// One line for stdout, written `after_ms` after the previous one.
#[derive(Debug, Clone, PartialEq)]
pub struct Out {
    pub after_ms: u64,
    pub line: String,
    /// It starts a message or a tool call: where a steer can cut in.
    pub starts_block: bool,
}

/// What the running turn waits for.
#[derive(Debug, Clone, PartialEq)]
enum Waits {
    Approval { request: String, tool_use: String },
    Answer { request: String, tool_use: String },
}

/// The demo agent's state.
#[derive(Debug)]
pub struct Demo {
    session: String,
    /// Turns started (ids of messages and requests derive from it).
    turns: u32,
    /// A turn runs (between a prompt and its `result`).
    in_turn: bool,
    waits: Option<Waits>,
    /// Text blocks written, for unique message ids.
    blocks: u32,
    /// `--replay-user-messages`: each user message is echoed (with its
    /// `uuid`, `isReplay: true`) when it is taken, as Claude Code does.
    echo: bool,
}

fn out(line: Value) -> Out {
    Out { after_ms: PACE_MS, line: line.to_string(), starts_block: false }
}

fn block(line: Value) -> Out {
    Out { starts_block: true, ..out(line) }
}

impl Demo {
    /// `resume`: the session id to go on with (`--resume ID`), else a new one.
    pub fn new(resume: Option<String>) -> Demo {
        let session = resume.unwrap_or_else(|| {
            let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            format!("demo-{:x}-{:x}", n, std::process::id())
        });
        Demo { session, turns: 0, in_turn: false, waits: None, blocks: 0, echo: false }
    }

    /// Echoes each user message when it is taken (`--replay-user-messages`).
    pub fn echoing(mut self, on: bool) -> Demo {
        self.echo = on;
        self
    }

    /// The echo of a taken message, when echoing and it has a uuid.
    fn echo_of(&self, text: &str, uuid: Option<&str>) -> Option<Out> {
        let uuid = uuid.filter(|_| self.echo)?;
        Some(out(json!({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": null,
            "session_id": self.session, "uuid": uuid, "isReplay": true})))
    }

    /// A turn runs.
    pub fn in_turn(&self) -> bool {
        self.in_turn
    }

    /// One line from runwire; returns what to write, in order. `interrupt`
    /// is reported by [`Demo::interrupts`] first, so the loop can drop what
    /// it has not written yet.
    pub fn input(&mut self, line: &[u8]) -> Vec<Out> {
        let Ok(v) = serde_json::from_slice::<Value>(line) else { return Vec::new() };
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        match s("type") {
            Some("control_request") => {
                let id = s("request_id").unwrap_or_default().to_string();
                let subtype = v.pointer("/request/subtype").and_then(Value::as_str).unwrap_or_default();
                let mut o = vec![self.control_ok(&id)];
                if subtype == "interrupt" && self.in_turn {
                    o.extend(self.end_turn("[Request interrupted by user]", true));
                }
                o
            }
            Some("control_response") => {
                let id = v.pointer("/response/request_id").and_then(Value::as_str).unwrap_or_default();
                let r = v.pointer("/response/response").cloned().unwrap_or(Value::Null);
                self.answered(id, &r)
            }
            Some("user") => {
                let text = match v.pointer("/message/content") {
                    Some(Value::String(t)) => t.clone(),
                    Some(Value::Array(parts)) => {
                        parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(" ")
                    }
                    _ => String::new(),
                };
                self.message(&text, s("uuid"))
            }
            _ => Vec::new(),
        }
    }

    /// Whether `line` is a message that joins the running turn (the loop
    /// puts its reply before the next block it has queued, not at the end).
    pub fn joins(&self, line: &[u8]) -> bool {
        self.in_turn
            && serde_json::from_slice::<Value>(line)
                .ok()
                .is_some_and(|v| v.get("type").and_then(Value::as_str) == Some("user"))
    }

    /// Whether `line` interrupts the turn (the loop drops its queue first).
    pub fn interrupts(line: &[u8]) -> bool {
        serde_json::from_slice::<Value>(line)
            .ok()
            .is_some_and(|v| v.pointer("/request/subtype").and_then(Value::as_str) == Some("interrupt"))
    }

    fn control_ok(&self, id: &str) -> Out {
        Out {
            after_ms: 0,
            line: json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": {}}})
                .to_string(),
            starts_block: false,
        }
    }

    /// Streamed text: deltas a few words at a time, then the whole message.
    fn say(&mut self, text: &str) -> Vec<Out> {
        self.blocks += 1;
        let id = format!("msg_demo_{}_{}", self.turns, self.blocks);
        let sid = &self.session;
        let mut o = vec![
            block(json!({"type": "stream_event", "session_id": sid, "parent_tool_use_id": null,
            "event": {"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "content": []}}})),
            out(json!({"type": "stream_event", "session_id": sid, "parent_tool_use_id": null,
            "event": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}})),
        ];
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        for piece in words.chunks(3) {
            o.push(out(json!({"type": "stream_event", "session_id": sid, "parent_tool_use_id": null,
                "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece.concat()}}})));
        }
        o.push(out(json!({"type": "stream_event", "session_id": sid, "parent_tool_use_id": null,
            "event": {"type": "content_block_stop", "index": 0}})));
        o.push(out(json!({"type": "assistant", "session_id": sid, "parent_tool_use_id": null,
            "message": {"id": id, "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}]}})));
        o
    }

    /// A tool call and the permission request for it.
    fn ask(&mut self, tool: &str, input: Value, suggestions: Option<Value>) -> Vec<Out> {
        self.blocks += 1;
        let tool_use = format!("toolu_demo_{}_{}", self.turns, self.blocks);
        let request = format!("demo-req-{}-{}", self.turns, self.blocks);
        let sid = &self.session;
        let mut req = json!({"subtype": "can_use_tool", "tool_name": tool, "input": input, "tool_use_id": tool_use});
        if let Some(s) = suggestions {
            req["permission_suggestions"] = s;
        }
        let o = vec![
            block(json!({"type": "assistant", "session_id": sid, "parent_tool_use_id": null,
                "message": {"id": format!("msg_demo_{}_{}", self.turns, self.blocks), "type": "message", "role": "assistant",
                    "content": [{"type": "tool_use", "id": tool_use, "name": tool, "input": input}]}})),
            out(json!({"type": "control_request", "request_id": request, "request": req})),
        ];
        self.waits = Some(if tool == "AskUserQuestion" {
            Waits::Answer { request, tool_use }
        } else {
            Waits::Approval { request, tool_use }
        });
        o
    }

    fn tool_result(&self, tool_use: &str, content: &str, is_error: bool) -> Out {
        out(json!({"type": "user", "session_id": self.session, "parent_tool_use_id": null,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use, "content": content, "is_error": is_error}]}}))
    }

    fn end_turn(&mut self, text: &str, interrupted: bool) -> Vec<Out> {
        self.in_turn = false;
        self.waits = None;
        let mut o = if interrupted { Vec::new() } else { self.say(text) };
        o.push(out(
            json!({"type": "result", "subtype": if interrupted { "error_during_execution" } else { "success" },
            "is_error": interrupted, "result": text, "session_id": self.session, "num_turns": 1,
            "total_cost_usd": 0, "usage": {"input_tokens": 0, "output_tokens": 0}}),
        ));
        o
    }

    fn message(&mut self, text: &str, uuid: Option<&str>) -> Vec<Out> {
        let echo = self.echo_of(text, uuid);
        let text = text.trim();
        let shown: String = text.chars().take(200).collect();
        if self.in_turn {
            // A steer: taken into the running turn, as Claude Code does.
            let mut o: Vec<Out> = echo.into_iter().collect();
            o.extend(self.say(&format!("(Steer received while I work: \"{shown}\". I'll take it into account.) ")));
            return o;
        }
        self.turns += 1;
        self.in_turn = true;
        let mut o = vec![out(json!({"type": "system", "subtype": "init", "session_id": self.session,
            "model": "runwire-demo", "tools": ["Bash", "AskUserQuestion"], "permissionMode": "default"}))];
        o.extend(echo);
        o.extend(self.say(&format!(
            "Hi! I am runwire's built-in demo agent: no model, and I run nothing. You wrote: \"{shown}\". \
             To show an approval, I will ask to run a command. Approve it, deny it, or send a message now to steer me."
        )));
        let suggestion = json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "touch demo.txt"}],
            "behavior": "allow", "destination": "session"}]);
        o.extend(self.ask(
            "Bash",
            json!({"command": COMMAND, "description": "Create demo.txt and list the directory"}),
            Some(suggestion),
        ));
        o
    }

    fn answered(&mut self, id: &str, r: &Value) -> Vec<Out> {
        let allow = r.get("behavior").and_then(Value::as_str) == Some("allow");
        match self.waits.clone() {
            Some(Waits::Approval { request, tool_use }) if request == id => {
                self.waits = None;
                if !allow {
                    let why = r.get("message").and_then(Value::as_str).unwrap_or("denied");
                    let mut o = vec![self.tool_result(&tool_use, &format!("Permission denied: {why}"), true)];
                    o.extend(self.end_turn(
                        &format!(
                            "Understood, I did not run it (you said: \"{why}\"). Send another message to start again."
                        ),
                        false,
                    ));
                    return o;
                }
                let cmd = r.pointer("/updatedInput/command").and_then(Value::as_str).unwrap_or(COMMAND).to_string();
                let mut o = vec![self.tool_result(&tool_use, &format!("(demo: nothing ran) $ {cmd}\ndemo.txt"), false)];
                o.extend(self.say("Done. One more thing, to show a question: "));
                let q = json!({"questions": [{"question": "Which should the demo do next?", "header": "Next",
                    "multiSelect": false, "options": [
                        {"label": "Say goodbye", "description": "End the turn"},
                        {"label": "Tell a joke", "description": "A short one"}]}]});
                o.extend(self.ask("AskUserQuestion", q, None));
                o
            }
            Some(Waits::Answer { request, tool_use }) if request == id => {
                self.waits = None;
                let answer = r
                    .pointer("/updatedInput/answers")
                    .and_then(Value::as_object)
                    .and_then(|a| a.values().next())
                    .and_then(Value::as_str)
                    .unwrap_or("(no answer)")
                    .to_string();
                if !allow {
                    let mut o = vec![self.tool_result(&tool_use, "The user declined to answer.", true)];
                    o.extend(self.end_turn("No answer, no problem. That is the end of the demo turn.", false));
                    return o;
                }
                let mut o = vec![self.tool_result(&tool_use, &format!("The user answered: \"{answer}\""), false)];
                let reply = if answer == "Tell a joke" {
                    "Why do programmers prefer dark mode? Because light attracts bugs. That is the end of the demo turn."
                        .to_string()
                } else {
                    format!(
                        "You chose \"{answer}\". That is the end of the demo turn: send another message to go again."
                    )
                };
                o.extend(self.end_turn(&reply, false));
                o
            }
            // An answer to nothing the demo asked (or already answered): ignored.
            _ => Vec::new(),
        }
    }
}

/// The demo agent's process: reads runwire's lines on stdin, writes its
/// own on stdout at a steady pace, until stdin ends. `args` are its
/// command line (claude's flags; `--resume ID` is used).
pub fn run(args: &[String]) -> i32 {
    let resume = args.windows(2).find(|w| w[0] == "--resume").map(|w| w[1].clone());
    let mut demo = Demo::new(resume).echoing(args.iter().any(|a| a == "--replay-user-messages"));
    let (tx, rx) = mpsc::channel::<Option<Vec<u8>>>();
    std::thread::spawn(move || {
        let stdin = io::stdin();
        let mut r = stdin.lock();
        let mut buf = Vec::new();
        // Bounded: a line longer than this is cut (the demo reads only short ones).
        while read_capped(&mut r, &mut buf, 1 << 20, Rest::Skip).is_ok_and(|c| c != Capped::End) {
            if tx.send(Some(std::mem::take(&mut buf))).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    let mut queue: VecDeque<Out> = VecDeque::new();
    // The running turn has begun a message or a call (a steer then follows
    // the one under way); before that, the turn's first message comes first.
    let mut said = false;
    let mut due = Instant::now();
    let stdout = io::stdout();
    let mut w = stdout.lock();
    loop {
        let wait = match queue.front() {
            Some(_) => due.saturating_duration_since(Instant::now()),
            None => Duration::from_secs(3600),
        };
        match rx.recv_timeout(wait) {
            Ok(Some(line)) => {
                // What the turn had still to say is dropped; a turn that
                // already ended (a denial just before) says its end.
                if Demo::interrupts(&line) && demo.in_turn() {
                    queue.clear();
                }
                let was_empty = queue.is_empty();
                let joins = demo.joins(&line);
                let starting = !demo.in_turn();
                let outs = demo.input(&line);
                if starting && demo.in_turn() {
                    said = false;
                }
                match steer_at(&queue, said).filter(|_| joins) {
                    // A steer is said when the current message is done, before what comes next.
                    Some(at) => {
                        for (i, o) in outs.into_iter().enumerate() {
                            queue.insert(at + i, o);
                        }
                    }
                    None => queue.extend(outs),
                }
                if was_empty {
                    due = Instant::now() + Duration::from_millis(queue.front().map_or(0, |o| o.after_ms));
                }
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Input ended: what is queued is written at once, then exit.
                for o in queue.drain(..) {
                    if writeln!(w, "{}", o.line).and_then(|()| w.flush()).is_err() {
                        return 0;
                    }
                }
                return 0;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(o) = queue.pop_front() {
                    said |= o.starts_block;
                    if writeln!(w, "{}", o.line).and_then(|()| w.flush()).is_err() {
                        return 0;
                    }
                }
                due = Instant::now() + Duration::from_millis(queue.front().map_or(0, |o| o.after_ms));
            }
        }
    }
}

/// Where a steer's reply goes in what the turn has queued: before the next
/// block, once the message under way is done. `said`: the turn has begun a
/// block already; if not, its first message (the reply to the prompt the
/// turn started with) is said first, so a steer sent at once never comes
/// before the greeting it followed. None: at the end.
fn steer_at(queue: &VecDeque<Out>, said: bool) -> Option<usize> {
    queue.iter().enumerate().filter(|(_, o)| o.starts_block).nth(usize::from(!said)).map(|(i, _)| i)
}

/// Reads lines for tests.
#[cfg(test)]
fn lines(o: &[Out]) -> Vec<Value> {
    o.iter().map(|o| serde_json::from_str(&o.line).unwrap()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Vec<u8> {
        json!({"type": "user", "message": {"role": "user", "content": text}}).to_string().into_bytes()
    }

    fn respond(id: &str, r: Value) -> Vec<u8> {
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": r}})
            .to_string()
            .into_bytes()
    }

    fn request_of(o: &[Value]) -> (String, String) {
        let r = o.iter().find(|v| v["type"] == "control_request").expect("a request");
        (r["request_id"].as_str().unwrap().into(), r["request"]["tool_use_id"].as_str().unwrap().into())
    }

    /// Any prompt starts a turn that asks to run a command; approving it
    /// leads to a question, answering that ends the turn with the answer.
    #[test]
    fn a_prompt_asks_for_approval_then_a_question_then_ends_with_the_answer() {
        let mut d = Demo::new(None);
        let o = lines(&d.input(&user("whatever you like")));
        assert_eq!(o[0]["subtype"], "init");
        let text: String = o.iter().filter_map(|v| v["event"]["delta"]["text"].as_str()).collect();
        assert!(text.contains("whatever you like"), "{text}");
        let (req, tool) = request_of(&o);
        assert_eq!(o.iter().find(|v| v["type"] == "control_request").unwrap()["request"]["tool_name"], "Bash");
        assert!(d.in_turn());
        let o = lines(&d.input(&respond(&req, json!({"behavior": "allow", "updatedInput": {"command": "ls -la"}}))));
        assert_eq!(o[0]["message"]["content"][0]["tool_use_id"], tool.as_str());
        assert!(o[0]["message"]["content"][0]["content"].as_str().unwrap().contains("ls -la"), "edited input is shown");
        let (q, _) = request_of(&o);
        let o = lines(&d.input(&respond(
            &q,
            json!({"behavior": "allow", "updatedInput": {"answers": {"Which should the demo do next?": "Tell a joke"}}}),
        )));
        assert_eq!(o.last().unwrap()["type"], "result");
        assert_eq!(o.last().unwrap()["is_error"], false);
        assert!(o.last().unwrap()["result"].as_str().unwrap().contains("light attracts bugs"));
        assert!(!d.in_turn());
        // An answer to a request already answered does nothing.
        assert!(d.input(&respond(&q, json!({"behavior": "allow"}))).is_empty());
    }

    #[test]
    fn a_denial_ends_the_turn_with_the_reason_and_the_call_failed() {
        let mut d = Demo::new(Some("s1".into()));
        let o = lines(&d.input(&user("go")));
        assert_eq!(o[0]["session_id"], "s1", "a resumed session keeps its id");
        let (req, tool) = request_of(&o);
        let o = lines(&d.input(&respond(&req, json!({"behavior": "deny", "message": "not today"}))));
        assert_eq!(o[0]["message"]["content"][0]["tool_use_id"], tool.as_str());
        assert_eq!(o[0]["message"]["content"][0]["is_error"], true);
        assert!(o.last().unwrap()["result"].as_str().unwrap().contains("not today"));
        assert!(!d.in_turn());
    }

    /// A message mid-turn joins the turn; an interrupt ends it at once.
    #[test]
    fn a_steer_joins_the_turn_and_an_interrupt_ends_it() {
        let mut d = Demo::new(None);
        d.input(&user("first"));
        let o = lines(&d.input(&user("use the other API")));
        assert!(o.iter().all(|v| v["type"] != "result" && v["subtype"] != "init"), "no new turn");
        let said = o.iter().filter_map(|v| v["event"]["delta"]["text"].as_str()).collect::<String>();
        assert!(said.contains("use the other API"), "{said}");
        let stop =
            br#"{"type":"control_request","request_id":"runwire-interrupt-2","request":{"subtype":"interrupt"}}"#;
        assert!(Demo::interrupts(stop));
        let o = lines(&d.input(stop));
        assert_eq!(o[0]["response"]["request_id"], "runwire-interrupt-2");
        assert_eq!(o.last().unwrap()["type"], "result");
        assert_eq!(o.last().unwrap()["is_error"], true);
        assert!(!d.in_turn());
        // Junk is ignored, never a panic.
        assert!(d.input(b"not json").is_empty());
        assert!(d.input(br#"{"type":"control_response"}"#).is_empty());
    }

    /// A steer sent before the turn said anything follows the greeting
    /// (the reply to the prompt), not before it; once a block is under way,
    /// it follows that one.
    #[test]
    fn a_steer_at_once_follows_the_greeting() {
        let mut d = Demo::new(None);
        let queue: VecDeque<Out> = d.input(&user("first")).into();
        let starts: Vec<usize> = queue.iter().enumerate().filter(|(_, o)| o.starts_block).map(|(i, _)| i).collect();
        assert_eq!(starts.len(), 2, "the greeting and the call");
        let greeting_end = queue.iter().position(|o| o.line.contains("\"type\":\"assistant\"")).unwrap();
        let at = steer_at(&queue, false).unwrap();
        assert!(at > greeting_end, "the steer's reply at {at}, the greeting ends at {greeting_end}");
        assert_eq!(steer_at(&queue, true), Some(starts[0]));
        let rest: VecDeque<Out> = queue.into_iter().skip(starts[1] + 1).collect();
        assert_eq!(steer_at(&rest, true), None, "nothing left to go before: at the end");
    }

    /// With `--replay-user-messages` each message is echoed with its uuid
    /// when taken: after `system/init` for a new turn, first for a steer.
    #[test]
    fn an_echoing_demo_echoes_each_message_with_its_uuid() {
        let msg = |t: &str, u: &str| {
            json!({"type": "user", "message": {"role": "user", "content": t}, "uuid": u}).to_string().into_bytes()
        };
        let mut d = Demo::new(None).echoing(true);
        let o = lines(&d.input(&msg("hello", "u-1")));
        assert_eq!((o[0]["subtype"].as_str(), o[1]["uuid"].as_str()), (Some("init"), Some("u-1")));
        assert_eq!(o[1]["isReplay"], true);
        let o = lines(&d.input(&msg("go left", "u-2")));
        assert_eq!((o[0]["uuid"].as_str(), o[0]["message"]["content"].as_str()), (Some("u-2"), Some("go left")));
        // Without the flag nothing is echoed.
        let o = lines(&Demo::new(None).input(&msg("hello", "u-3")));
        assert!(o.iter().all(|v| v["type"] != "user"), "{o:?}");
    }
}
