//! The Agent Client Protocol (JSON-RPC 2.0 over stdio; types in
//! `agent-client-protocol-schema`), with no IO: any ACP agent
//! (`cursor-agent acp`, `opencode acp`, …) given its command line.
//!
//! * runwire writes `initialize` (protocol 1; no file system and no terminal
//!   offered, so the agent uses its own tools), then, once it is answered,
//!   `session/new` (or `session/load` with the session id) with the working
//!   directory and no MCP servers;
//! * a message is `session/prompt`; prompts wait for the session id. ACP
//!   cannot take a message into a running turn: a message mid-turn cancels
//!   the turn (`session/cancel`; it ends with `stopReason: cancelled`) and is
//!   sent as the next prompt once the agent has stopped;
//! * the agent asks with `session/request_permission` (a tool approval):
//!   allow once is its `allow_once` option, `scope: "always"` its
//!   `allow_always` option (when offered; the agent keeps it, and what
//!   "always" covers is the agent's to say: never offered as "for this
//!   session", which ACP has no option for), deny its `reject_once` option; a request abandoned by
//!   the session's end or an interrupt is answered `cancelled`, as the
//!   protocol asks of a client that cancels;
//! * questions: ACP has none of its own (the recorded client asked through
//!   an MCP server it passed in `session/new`); runwire passes none, so an
//!   ACP session has no questions;
//! * `session/cancel` interrupts the turn; every other request of the agent
//!   (`fs/*`, `terminal/*`, `cursor/task`, …) is refused at once.

use super::{Agent, AnswerInput, Signal};
use crate::pipeline::events::{Decision, InputAnswer, InputKind, InputRequest, Scope};
use serde_json::{json, Value};
use std::collections::HashMap;

/// ACP settings for a session.
#[derive(Debug, Clone, Default)]
pub struct AcpOptions {
    /// The session's working directory (absolute, as ACP requires).
    pub cwd: String,
    /// Load this session instead of starting one.
    pub resume: Option<String>,
    /// A session mode to switch to once the session exists (the agent's own
    /// ids: cursor `agent`, `plan`, `ask`).
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Sent {
    Initialize,
    Session,
    Mode,
    Prompt,
}

/// The protocol state for one ACP agent process.
#[derive(Debug)]
pub struct Acp {
    opts: AcpOptions,
    next: u64,
    sent: HashMap<u64, Sent>,
    session: Option<String>,
    /// A `session/prompt` is running (its response ends the turn).
    prompting: bool,
    /// The agent queues a prompt sent while one runs and runs it next
    /// (`agentCapabilities._meta.claudeCode.promptQueueing`, claude-agent-acp):
    /// a message mid-turn is sent at once instead of cancelling the turn.
    queueing: bool,
    /// Prompts sent while one ran, queued at the agent (each ends a turn of
    /// its own once the one before it has ended).
    queued_at_agent: u32,
    /// `session/cancel` was sent for the running prompt (once is enough: an
    /// interrupt followed by a message must not cancel twice).
    cancelling: bool,
    /// An interrupt came before the session existed: the first prompt is
    /// still sent (ACP cancels a prompt, not a session) and
    /// cancelled at once.
    cancel_on_prompt: bool,
    /// Prompts waiting for the session, or for the cancelled turn to stop.
    queued: Vec<String>,
    /// Pending permission requests: runwire id → (the agent's id, its options).
    asked: HashMap<String, (Value, Vec<Value>)>,
}

fn line(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize infallibly")
}

fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The option of `kind` among the agent's options.
fn option_id<'a>(options: &'a [Value], kind: &str) -> Option<&'a str> {
    options
        .iter()
        .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
        .and_then(|o| o.get("optionId"))
        .and_then(Value::as_str)
}

fn outcome(id: &Value, outcome: Value) -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}}))
}

/// What an ACP agent can be told in answer to `req` (its record:
/// `suggestions` are the agent's options): no edited input, and only an
/// option the agent offered. [`Agent::check_answer`], for a runner that
/// holds the record and not the protocol object (the supervisor).
pub fn check_answer(req: &InputRequest, a: &AnswerInput) -> Result<(), String> {
    if a.updated_input.is_some() {
        return Err("ACP takes no edited input: the agent runs the call as asked (allow or deny it)".into());
    }
    let want = match (a.decision, a.scope) {
        // ACP has no session-only grant: its `allow_always` is the agent's
        // to keep (always, saved by the agent), never "for this session".
        (super::input::Decision::Allow, Some(Scope::Session)) => {
            return Err("ACP offers no allow-for-this-session: the agent's allow_always option is \"always, saved by the agent\" (scope \"always\")".into())
        }
        (super::input::Decision::Allow, Some(Scope::Always)) => "allow_always",
        (super::input::Decision::Allow, _) => "allow_once",
        _ => return Ok(()),
    };
    let options = req.suggestions.as_deref().unwrap_or_default();
    if option_id(options, want).is_none() {
        let offered: Vec<&str> = options.iter().filter_map(|o| o.get("kind").and_then(Value::as_str)).collect();
        return Err(format!("the agent offered no {want} option (it offered {})", offered.join(", ")));
    }
    Ok(())
}

impl Acp {
    pub fn new(opts: AcpOptions) -> Acp {
        Acp {
            opts,
            next: 0,
            sent: HashMap::new(),
            session: None,
            prompting: false,
            queueing: false,
            queued_at_agent: 0,
            cancelling: false,
            cancel_on_prompt: false,
            queued: Vec::new(),
            asked: HashMap::new(),
        }
    }

    fn request(&mut self, what: Sent, method: &str, params: Value) -> Vec<u8> {
        self.next += 1;
        self.sent.insert(self.next, what);
        line(&json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}))
    }

    fn prompt(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>) {
        match self.session.clone() {
            Some(s) if !self.prompting => {
                self.prompting = true;
                let l = self.request(
                    Sent::Prompt,
                    "session/prompt",
                    json!({"sessionId": s, "prompt": [{"type": "text", "text": text}]}),
                );
                to_agent.push(l);
                if std::mem::take(&mut self.cancel_on_prompt) {
                    self.cancel(to_agent);
                }
            }
            _ => self.queued.push(text.to_string()),
        }
    }

    /// `session/cancel`, and `cancelled` for every permission request still
    /// open (the protocol asks a cancelling client to answer them so).
    fn cancel(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        if let Some(s) = self.session.as_ref().filter(|_| !self.cancelling) {
            to_agent.push(line(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s}})));
            self.cancelling = self.prompting;
        }
        for (_, (id, _)) in self.asked.drain() {
            to_agent.push(outcome(&id, json!({"outcome": "cancelled"})));
        }
    }

    fn flush(&mut self, to_agent: &mut Vec<Vec<u8>>, out: &mut Vec<Signal>) {
        if self.session.is_none() || self.prompting || self.queued.is_empty() {
            return;
        }
        let text = self.queued.remove(0);
        self.prompt(&text, to_agent);
        out.push(Signal::TurnActive);
    }

    fn response(&mut self, v: &Value, to_agent: &mut Vec<Vec<u8>>, out: &mut Vec<Signal>) {
        let Some(sent) = v.get("id").and_then(Value::as_u64).and_then(|id| self.sent.remove(&id)) else { return };
        let failed = v.get("error").is_some_and(|e| !e.is_null());
        match sent {
            Sent::Initialize if !failed => {
                self.queueing =
                    v.pointer("/result/agentCapabilities/_meta/claudeCode/promptQueueing") == Some(&Value::Bool(true));
                let cwd = self.opts.cwd.clone();
                let l = match self.opts.resume.clone() {
                    Some(s) => self.request(
                        Sent::Session,
                        "session/load",
                        json!({"sessionId": s, "cwd": cwd, "mcpServers": []}),
                    ),
                    None => self.request(Sent::Session, "session/new", json!({"cwd": cwd, "mcpServers": []})),
                };
                to_agent.push(l);
            }
            Sent::Session if !failed => {
                let id = v
                    .pointer("/result/sessionId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| self.opts.resume.clone());
                if let Some(id) = id.filter(|s| !s.is_empty()) {
                    self.session = Some(id.clone());
                    out.push(Signal::SessionId(id.clone()));
                    if let Some(m) = self.opts.mode.clone() {
                        let l = self.request(Sent::Mode, "session/set_mode", json!({"sessionId": id, "modeId": m}));
                        to_agent.push(l);
                    }
                }
                self.flush(to_agent, out);
            }
            Sent::Prompt if self.queued_at_agent > 0 => {
                // The next prompt queued at the agent runs now: a new turn.
                self.queued_at_agent -= 1;
                self.cancelling = false;
                self.asked.clear();
                let ok = !failed && v.pointer("/result/stopReason").and_then(Value::as_str) == Some("end_turn");
                out.push(Signal::TurnEnded { ok });
                out.push(Signal::TurnActive);
            }
            Sent::Prompt => {
                self.prompting = false;
                self.cancelling = false;
                self.asked.clear();
                let ok = !failed && v.pointer("/result/stopReason").and_then(Value::as_str) == Some("end_turn");
                out.push(Signal::TurnEnded { ok });
                // A message that cancelled this turn is the next prompt.
                self.flush(to_agent, out);
            }
            // A failed initialize or session leaves no session: nothing can
            // run, the session ends with the agent's reason (an
            // `auth_required` error included: runwire cannot log in).
            Sent::Initialize | Sent::Session => {
                let method = match (sent, &self.opts.resume) {
                    (Sent::Initialize, _) => "initialize",
                    (_, Some(_)) => "session/load",
                    _ => "session/new",
                };
                out.push(Signal::Failed(super::refusal("the agent", method, v)));
            }
            Sent::Mode => {}
        }
    }

    fn agent_request(&mut self, id: &Value, method: &str, p: &Value, to_agent: &mut Vec<Vec<u8>>) -> Option<Signal> {
        if method != "session/request_permission" {
            to_agent.push(line(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("Unsupported ACP client method \"{method}\"")}})));
            return None;
        }
        let call = p.get("toolCall").unwrap_or(&Value::Null);
        let options = p.get("options").and_then(Value::as_array).cloned().unwrap_or_default();
        let s = |k: &str| call.get(k).and_then(Value::as_str).filter(|x| !x.is_empty()).map(str::to_string);
        let said: Vec<&str> = call
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| b.pointer("/content/text").and_then(Value::as_str))
            .collect();
        let mut input = call.get("rawInput").filter(|r| r.is_object()).cloned().unwrap_or_else(|| json!({}));
        if let (Some(o), Some(t)) = (input.as_object_mut(), s("title")) {
            o.entry("title").or_insert(Value::String(t));
        }
        let rid = id_text(id);
        let req = InputRequest {
            interrupt_id: None,
            id: rid.clone(),
            kind: InputKind::ToolApproval,
            tool_call_id: s("toolCallId"),
            tool: s("kind").or_else(|| s("title")),
            input: Some(input),
            suggestions: Some(options.clone()),
            questions: None,
            message: Some(said.join("\n")).filter(|m| !m.is_empty()).or_else(|| s("title")),
            expires_at: None,
            blocking: None,
        };
        self.asked.insert(rid, (id.clone(), options));
        Some(Signal::Request(Box::new(req)))
    }
}

impl Agent for Acp {
    fn name(&self) -> &'static str {
        "acp"
    }

    fn open(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        let l = self.request(
            Sent::Initialize,
            "initialize",
            json!({"protocolVersion": 1,
                   "clientInfo": {"name": "runwire", "version": env!("CARGO_PKG_VERSION")},
                   "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}),
        );
        to_agent.push(l);
    }

    fn line(&mut self, raw: &[u8], to_agent: &mut Vec<Vec<u8>>) -> Vec<Signal> {
        let Some(v) = super::json_line(raw) else { return Vec::new() };
        let mut out = Vec::new();
        let method = v.get("method").and_then(Value::as_str);
        let id = v.get("id").filter(|i| !i.is_null());
        match (method, id) {
            (None, Some(_)) => self.response(&v, to_agent, &mut out),
            (Some(m), Some(id)) => {
                out.extend(self.agent_request(id, m, v.get("params").unwrap_or(&Value::Null), to_agent))
            }
            (Some("session/update"), None) if self.prompting => out.push(Signal::TurnActive),
            _ => {}
        }
        out
    }

    fn message(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>) {
        if let (true, true, false, Some(s)) = (self.prompting, self.queueing, self.cancelling, self.session.clone()) {
            // The agent queues it and runs it once the running turn ends
            // (cancelling and prompting again loses the reply with
            // claude-agent-acp 0.23.1: the new prompt ends at once, 0 tokens).
            self.queued_at_agent += 1;
            let l = self.request(
                Sent::Prompt,
                "session/prompt",
                json!({"sessionId": s, "prompt": [{"type": "text", "text": text}]}),
            );
            return to_agent.push(l);
        }
        if self.prompting {
            // No steering in ACP: stop the turn, then prompt again.
            self.cancel(to_agent);
            self.queued.push(text.to_string());
        } else {
            self.prompt(text, to_agent);
        }
    }

    fn answer(&mut self, req: &InputRequest, a: &InputAnswer, _mode: Option<&str>, to_agent: &mut Vec<Vec<u8>>) {
        let Some((id, options)) = self.asked.remove(&req.id) else { return };
        let kind = match a.decision {
            Decision::Allow | Decision::Answer if a.scope == Some(Scope::Always) => "allow_always",
            Decision::Allow | Decision::Answer => "allow_once",
            Decision::Deny | Decision::Expired => "reject_once",
            Decision::Cancelled => return to_agent.push(outcome(&id, json!({"outcome": "cancelled"}))),
        };
        match option_id(&options, kind) {
            Some(o) => to_agent.push(outcome(&id, json!({"outcome": "selected", "optionId": o}))),
            // An agent without a once-only rejection: never "reject always".
            // ACP answers `cancelled` only for a turn the client cancels, so
            // the turn is cancelled (`session/cancel`) and the request
            // answered `cancelled`; the turn ends as a denial.
            None if kind == "reject_once" => {
                self.cancel(to_agent);
                to_agent.push(outcome(&id, json!({"outcome": "cancelled"})));
            }
            None => to_agent.push(outcome(&id, json!({"outcome": "cancelled"}))),
        }
    }

    fn interrupt(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        if self.session.is_none() && !self.queued.is_empty() {
            self.queued.truncate(1);
            self.cancel_on_prompt = true;
            return;
        }
        self.queued.clear();
        if self.prompting {
            self.cancel(to_agent);
        }
    }

    /// A prompt runs, or waits to be sent (a message that cancelled the
    /// turn is prompted once it has stopped): the cancelled turn's end does
    /// not make the session idle.
    fn mid_turn(&self) -> super::MidTurn {
        if self.queueing {
            super::MidTurn::Joins
        } else {
            super::MidTurn::CancelsAndPrompts
        }
    }
    /// A message the agent queues runs as the next turn (after the running one).
    fn pending_steer(&self) -> bool {
        self.queueing
    }
    fn working(&self) -> bool {
        self.prompting || !self.queued.is_empty()
    }

    fn check_answer(&self, req: &InputRequest, a: &AnswerInput) -> Result<(), String> {
        if !self.asked.contains_key(&req.id) {
            return Ok(());
        }
        check_answer(req, a)
    }
    /// A cancel (an interrupt, a message mid-turn) answers every open
    /// request `cancelled` at once (its `cancel`).
    fn holds(&self, req: &InputRequest) -> bool {
        self.asked.contains_key(&req.id)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Input, Options, Refused, Session};
    use super::*;

    const PERMISSION: &str = r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1\nfc_1","title":"`touch ~/x`","kind":"execute","status":"pending","content":[{"type":"content","content":{"type":"text","text":"Not in allowlist: touch"}}]},"options":[{"optionId":"allow-once","name":"Allow once","kind":"allow_once"},{"optionId":"allow-always","name":"Allow always","kind":"allow_always"},{"optionId":"reject-once","name":"Reject","kind":"reject_once"}]}}"#;

    fn parse(l: &[u8]) -> Value {
        serde_json::from_slice(l).unwrap()
    }

    fn session() -> (Session<Acp>, Vec<Vec<u8>>) {
        let opts = AcpOptions { cwd: "/w".into(), ..AcpOptions::default() };
        let mut s = Session::new(Acp::new(opts), Options { answer_timeout_ms: 1000, actor: "t".into() });
        let mut w = s.open(Some("go")).to_agent;
        w.extend(s.agent_line(br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#, 0).to_agent);
        w.extend(s.agent_line(br#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#, 0).to_agent);
        (s, w)
    }

    fn msg(text: &str) -> Input {
        Input::Message(super::super::input::MessageInput { text: text.into(), by: None })
    }

    #[test]
    fn the_prompt_waits_for_the_session() {
        let (_, w) = session();
        let m: Vec<Value> = w.iter().map(|l| parse(l)["method"].clone()).collect();
        assert_eq!(m, vec![json!("initialize"), json!("session/new"), json!("session/prompt")]);
        assert_eq!(parse(&w[2])["params"]["sessionId"], "s1");
        assert_eq!(parse(&w[1])["params"], json!({"cwd":"/w","mcpServers":[]}));
    }

    #[test]
    fn a_message_mid_turn_cancels_and_prompts_again_once_the_turn_stopped() {
        let (mut s, _) = session();
        s.agent_line(PERMISSION.as_bytes(), 0);
        let st = s.input(msg("do this instead"), 1).unwrap();
        let w: Vec<Value> = st.to_agent.iter().map(|l| parse(l)).collect();
        assert_eq!(w[0]["method"], "session/cancel");
        assert_eq!(w[1], json!({"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}));
        assert_eq!(w.len(), 2, "no prompt before the turn stopped");
        let st = s.agent_line(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}"#, 2);
        let p = parse(&st.to_agent[0]);
        assert_eq!(p["method"], "session/prompt");
        assert_eq!(p["params"]["prompt"][0]["text"], "do this instead");
        assert_eq!(s.phase(), super::super::Phase::Turn);
        // The permission request was closed by the turn's end, not left pending.
        assert_eq!(s.pending().count(), 0);
    }

    #[test]
    fn the_cancelled_turns_end_with_a_prompt_to_send_is_not_idle_and_does_not_end_the_session() {
        let (mut s, _) = session();
        s.input(msg("do this instead"), 1).unwrap();
        // The input ends while the cancelled turn stops: nobody can steer any more.
        assert!(!s.input_closed(1).close_agent_input);
        let st = s.agent_line(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}"#, 2);
        assert_eq!(parse(&st.to_agent[0])["method"], "session/prompt");
        assert!(!st.close_agent_input, "the message's own turn still runs");
        assert_eq!(s.phase(), super::super::Phase::Turn);
        assert_eq!(s.idle_line(), None);
        let st = s.agent_line(br#"{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}"#, 3);
        assert!(st.close_agent_input);
    }

    /// The cancel of an interrupt (or of a message mid-turn) answers the
    /// open request `cancelled` at the agent: the session closes it then and
    /// there, and a later allow is refused, never recorded as given with
    /// nothing sent to the agent.
    #[test]
    fn a_request_the_cancel_answered_is_closed_and_takes_no_later_answer() {
        let allow =
            || serde_json::from_value::<Input>(json!({"type":"answer","id":"0","decision":"allow","by":"m"})).unwrap();
        for cancel in [Input::Interrupt(super::super::input::Who { by: None }), msg("do this instead")] {
            let (mut s, _) = session();
            s.agent_line(PERMISSION.as_bytes(), 0);
            let st = s.input(cancel, 1).unwrap();
            assert_eq!(s.pending().count(), 0, "closed with the cancel");
            assert_eq!(st.answered.len(), 1);
            assert_eq!(st.answered[0].decision, crate::pipeline::events::Decision::Cancelled);
            assert!(s.input(allow(), 2).is_err(), "an allow after the cancel is refused");
        }
    }

    #[test]
    fn an_interrupt_then_a_message_cancels_once() {
        let (mut s, _) = session();
        let st = s.input(Input::Interrupt(super::super::input::Who { by: None }), 1).unwrap();
        assert_eq!(parse(&st.to_agent[0])["method"], "session/cancel");
        assert!(s.input(msg("instead"), 1).unwrap().to_agent.is_empty(), "no second cancel");
        let st = s.agent_line(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}"#, 2);
        assert_eq!(parse(&st.to_agent[0])["method"], "session/prompt");
        // The new turn can be cancelled in its turn.
        let st = s.input(msg("again"), 3).unwrap();
        assert_eq!(parse(&st.to_agent[0])["method"], "session/cancel");
    }

    #[test]
    fn a_stop_before_the_session_exists_prompts_and_cancels_at_once() {
        let opts = AcpOptions { cwd: "/w".into(), ..AcpOptions::default() };
        let mut s = Session::new(Acp::new(opts), Options { answer_timeout_ms: 1000, actor: "t".into() });
        s.open(Some("go"));
        s.agent_line(br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#, 0);
        assert!(s.input(Input::Interrupt(super::super::input::Who { by: None }), 1).unwrap().to_agent.is_empty());
        let st = s.agent_line(br#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#, 2);
        let m: Vec<Value> = st.to_agent.iter().map(|l| parse(l)["method"].clone()).collect();
        assert_eq!(m, vec![json!("session/prompt"), json!("session/cancel")]);
    }

    #[test]
    fn permission_answers_pick_the_agents_options() {
        let (mut s, _) = session();
        let st = s.agent_line(PERMISSION.as_bytes(), 0);
        assert_eq!(st.requested[0].message.as_deref(), Some("Not in allowlist: touch"));
        let a = |d: &str, scope: Option<&str>| {
            let mut v = json!({"type":"answer","id":"0","decision":d});
            if let Some(sc) = scope {
                v["scope"] = json!(sc);
            }
            serde_json::from_value::<Input>(v).unwrap()
        };
        // allow_always is the agent's to keep: "always", never "for the session".
        assert!(matches!(s.input(a("allow", Some("session")), 1), Err(Refused::Invalid(_))));
        let st = s.input(a("allow", Some("always")), 1).unwrap();
        assert_eq!(parse(&st.to_agent[0])["result"]["outcome"]["optionId"], "allow-always");
        // Expiry rejects once.
        s.agent_line(PERMISSION.replace("\"id\":0", "\"id\":1").as_bytes(), 2);
        let st = s.tick(5000);
        assert_eq!(parse(&st.to_agent[0])["result"]["outcome"]["optionId"], "reject-once");
        // An agent that offers no allow_always cannot be allowed for the session.
        let once = PERMISSION
            .replace("\"id\":0", "\"id\":2")
            .replace(r#",{"optionId":"allow-always","name":"Allow always","kind":"allow_always"}"#, "");
        s.agent_line(once.as_bytes(), 6);
        let mut v = json!({"type":"answer","id":"2","decision":"allow","scope":"always"});
        assert!(matches!(s.input(serde_json::from_value(v.clone()).unwrap(), 7), Err(Refused::Invalid(_))));
        v["scope"] = json!("once");
        assert!(s.input(serde_json::from_value(v).unwrap(), 7).is_ok());
    }

    #[test]
    fn other_agent_requests_are_refused_at_once() {
        let (mut s, _) = session();
        let st = s.agent_line(br#"{"jsonrpc":"2.0","id":0,"method":"cursor/task","params":{}}"#, 0);
        assert!(st.requested.is_empty());
        assert_eq!(
            parse(&st.to_agent[0]),
            json!({"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Unsupported ACP client method \"cursor/task\""}})
        );
    }

    /// Issue 26 case 7: an agent that offers no `reject_once` is never told
    /// "reject always": the turn is cancelled and the request answered
    /// `cancelled`, as ACP asks of a client that cancels.
    #[test]
    fn a_deny_without_a_reject_once_option_cancels_the_turn() {
        let (mut s, _) = session();
        let only_always = PERMISSION.replace(r#""kind":"reject_once""#, r#""kind":"reject_always""#);
        s.agent_line(only_always.as_bytes(), 0);
        let deny = serde_json::from_value::<Input>(json!({"type":"answer","id":"0","decision":"deny"})).unwrap();
        let st = s.input(deny, 1).unwrap();
        let w: Vec<Value> = st.to_agent.iter().map(|l| parse(l)).collect();
        assert_eq!(w[0]["method"], "session/cancel", "{w:?}");
        assert_eq!(w[1], json!({"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}));
        assert_eq!(w.len(), 2, "{w:?}");
    }

    /// claude-agent-acp queues a prompt sent while one runs
    /// (`promptQueueing`): a message mid-turn is sent at once, acknowledged
    /// `pending`, and runs as the next turn; the session stays mid-turn until
    /// that turn ends (issue 26 case 7: cancel then prompt lost its reply).
    #[test]
    fn an_agent_that_queues_prompts_gets_a_mid_turn_message_at_once() {
        let opts = AcpOptions { cwd: "/w".into(), ..AcpOptions::default() };
        let mut s = Session::new(Acp::new(opts), Options { answer_timeout_ms: 1000, actor: "t".into() });
        s.open(Some("go"));
        s.agent_line(br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"_meta":{"claudeCode":{"promptQueueing":true}}}}}"#, 0);
        s.agent_line(br#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#, 0);
        let st = s.input(msg("also otters"), 1).unwrap();
        assert_eq!(st.ack, super::super::Ack::Pending);
        let w: Vec<Value> = st.to_agent.iter().map(|l| parse(l)).collect();
        assert_eq!(w.len(), 1, "no cancel: {w:?}");
        assert_eq!((w[0]["method"].as_str(), w[0]["id"].as_u64()), (Some("session/prompt"), Some(4)));
        s.agent_line(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#, 2);
        assert_eq!(s.phase(), super::super::Phase::Turn, "the queued prompt's turn runs next");
        assert_eq!(s.idle_line(), None);
        s.agent_line(br#"{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}"#, 3);
        assert_eq!(s.phase(), super::super::Phase::Idle);
    }
}
