//! Codex CLI's interactive protocol, `codex app-server` (JSON-RPC 2.0 over
//! stdio, types in `codex-rs/app-server-protocol` of openai/codex), with no IO.
//!
//! * runwire writes `initialize` (with `experimentalApi`, which dynamic tools
//!   need), then, once it is answered, `thread/start` (or `thread/resume`
//!   with the thread id) with the approval policy and sandbox, and registers
//!   its own `AskUserQuestion` dynamic tool (questions are a tool of the
//!   client's in this protocol, as the recorded client did);
//! * a message is `turn/start` when no turn runs, `turn/steer` (with the
//!   running turn's id) during one; messages wait for the thread (and a
//!   steer for `turn/started`: codex refuses a steer before it) when the
//!   server has not named them yet;
//! * a steer codex refuses (`no active turn to steer`: the turn ended just
//!   before the steer reached it; or the turn cannot be steered) is not
//!   lost: it starts the next turn, at once when no turn runs, else when the
//!   running one ends. Until then the session stays mid-turn
//!   ([`Agent::working`]), so whoever streams the turn follows the one the
//!   steer started;
//! * codex asks with server requests: `item/commandExecution/requestApproval`
//!   and `item/fileChange/requestApproval` (tool approvals: `accept`,
//!   `acceptForSession` when codex offers it, `decline`; `cancel` when the
//!   session ends), `item/tool/call` for runwire's `AskUserQuestion` (a
//!   question, answered with the questions and `answers` as text),
//!   `item/tool/requestUserInput` (codex's own questions, answered by
//!   question id; `isBlocking: false` makes it a request with `blocking:
//!   false`: codex works on, and the turn's end cancels it), `item/permissions/requestApproval` (a tool approval:
//!   the profile asked for is granted as asked, for the turn or the
//!   session; refused, nothing is granted) and `mcpServer/elicitation/request`
//!   (an MCP server asking: a form is a question per field, answered with
//!   the form's content; a URL to visit is an approval; one runwire cannot
//!   represent, a device verification or a multi-select, is declined at once);
//! * machine requests are answered at once: `currentTime/read` with the
//!   host's time, `account/chatgptAuthTokens/refresh` and
//!   `attestation/generate` with a JSON-RPC error (runwire holds no tokens
//!   and no attestation: codex keeps its own login, goes on without one);
//! * `turn/interrupt` stops the running turn (`turn/completed` `interrupted`);
//! * every other server request (unknown dynamic tools, v1 approvals, a
//!   newer codex's) is refused at once, so codex never waits on something
//!   nobody will answer.

mod requests;

use super::{Agent, AnswerInput, Signal};
use crate::pipeline::events::{Decision, InputAnswer, InputRequest, Question, Scope};
pub use requests::{amendment, check_answer, decision_effect, ELICITATION_TOOL, PERMISSIONS_TOOL, QUESTION_TOOL};
use requests::{id_text, line, tool_text, Asked};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The approval policies codex knows (`AskForApproval`; 0.169.0 dropped `on-failure`).
pub const APPROVAL_POLICIES: [&str; 3] = ["untrusted", "on-request", "never"];
/// The sandbox modes codex knows (`SandboxMode`).
pub const SANDBOXES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];
/// The sandbox that grants everything: only with an explicit flag.
pub const GRANT_ALL: &str = "danger-full-access";

/// Codex settings for a session.
#[derive(Debug, Clone)]
pub struct CodexOptions {
    /// `approvalPolicy` (default `on-request`: codex asks before leaving the sandbox).
    pub approval_policy: String,
    /// `sandbox` (default `workspace-write`).
    pub sandbox: String,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// Resume this thread instead of starting one.
    pub resume: Option<String>,
    /// Register the `AskUserQuestion` dynamic tool.
    pub questions: bool,
    /// Granting everything (`danger-full-access`) was asked for explicitly.
    pub grant_all: bool,
}

impl Default for CodexOptions {
    fn default() -> CodexOptions {
        CodexOptions {
            approval_policy: "on-request".into(),
            sandbox: "workspace-write".into(),
            cwd: None,
            model: None,
            resume: None,
            questions: true,
            grant_all: false,
        }
    }
}

impl CodexOptions {
    /// Known policy and sandbox, and the full-access sandbox only with `grant_all`.
    pub fn check(&self) -> Result<(), String> {
        if !APPROVAL_POLICIES.contains(&self.approval_policy.as_str()) {
            return Err(format!(
                "unknown approval policy {:?} (known: {})",
                self.approval_policy,
                APPROVAL_POLICIES.join(", ")
            ));
        }
        if !SANDBOXES.contains(&self.sandbox.as_str()) {
            return Err(format!("unknown sandbox {:?} (known: {})", self.sandbox, SANDBOXES.join(", ")));
        }
        if self.sandbox == GRANT_ALL && !self.grant_all {
            return Err(format!("sandbox {GRANT_ALL} lets every command run unconfined: it needs --grant-all"));
        }
        Ok(())
    }
}

/// What one of runwire's own requests was (to read its response).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sent {
    Initialize,
    Thread,
    Turn,
    Steer,
    Interrupt,
}

/// The protocol state for one `codex app-server` process.
#[derive(Debug)]
pub struct Codex {
    opts: CodexOptions,
    next: u64,
    sent: HashMap<u64, Sent>,
    thread: Option<String>,
    /// The running turn's id, once codex named it.
    turn: Option<String>,
    turn_running: bool,
    /// Messages waiting for the thread, or (mid-turn) for the turn's id.
    queued: Vec<String>,
    /// An interrupt asked for before codex named the running turn (sent once it does).
    interrupt_pending: bool,
    /// The running turn is being interrupted: a message now waits for its
    /// end and starts the next turn (a `turn/steer` would join the dying one).
    interrupting: bool,
    /// Codex announced the running turn (`turn/started`): it takes steers.
    started: bool,
    /// Steers sent and not yet answered: request id -> text.
    steering: HashMap<u64, String>,
    /// Refused steers, for the turn after the running one, in order.
    next_turn: Vec<String>,
    /// Pending server requests by runwire request id: codex's own id and what it asked.
    asked: HashMap<String, (Value, Asked)>,
}

fn text_input(text: &str) -> Value {
    json!([{"type": "text", "text": text, "text_elements": []}])
}

/// The definition of runwire's question tool (a dynamic tool: codex calls
/// back with `item/tool/call`).
pub fn question_tool() -> Value {
    let option = json!({"type": "object", "additionalProperties": false, "required": ["label"],
        "properties": {"label": {"type": "string", "description": "The option's text (1-5 words)."},
                       "description": {"type": "string", "description": "What choosing it means."}}});
    let question = json!({"type": "object", "additionalProperties": false, "required": ["question", "options"],
        "properties": {
            "question": {"type": "string", "description": "The complete question, ending with a question mark."},
            "header": {"type": "string", "description": "A very short label (max 12 chars)."},
            "multiSelect": {"type": "boolean", "default": false, "description": "Allow several answers."},
            "options": {"type": "array", "minItems": 2, "maxItems": 4, "items": option}}});
    json!({
        "type": "function",
        "name": QUESTION_TOOL,
        "description": "Ask the user one to four multiple-choice questions and wait for the answers. Use it only when you are blocked on a decision that is genuinely the user's to make. The user can always answer in their own words instead of (or, for multiSelect, besides) the options: do not add an \"Other\" option.",
        "inputSchema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "additionalProperties": false, "required": ["questions"],
            "properties": {"questions": {"type": "array", "minItems": 1, "maxItems": 4, "items": question}}}
    })
}

/// One answer to a `requestUserInput` question, as codex's own clients
/// encode it: a choice by its label, the person's own words (an `isOther`
/// question, or one with no options) as `user_note: <text>` (the TUI's
/// encoding of what is typed, which codex's model is given).
fn user_input_answer(q: Option<&Question>, answer: &str) -> String {
    match q {
        Some(q) if q.options.iter().any(|o| o.label == answer) => answer.to_string(),
        _ => format!("user_note: {answer}"),
    }
}

impl Codex {
    pub fn new(opts: CodexOptions) -> Codex {
        Codex {
            opts,
            next: 0,
            sent: HashMap::new(),
            thread: None,
            turn: None,
            turn_running: false,
            queued: Vec::new(),
            interrupt_pending: false,
            interrupting: false,
            started: false,
            steering: HashMap::new(),
            next_turn: Vec::new(),
            asked: HashMap::new(),
        }
    }

    /// The thread id codex named (resumable).
    pub fn thread(&self) -> Option<&str> {
        self.thread.as_deref()
    }

    fn request(&mut self, what: Sent, method: &str, params: Value) -> Vec<u8> {
        self.next += 1;
        self.sent.insert(self.next, what);
        line(&json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}))
    }

    fn thread_request(&mut self) -> Vec<u8> {
        let o = &self.opts;
        let mut p = Map::new();
        if let Some(t) = &o.resume {
            p.insert("threadId".into(), json!(t));
        }
        p.insert("approvalPolicy".into(), json!(o.approval_policy));
        p.insert("sandbox".into(), json!(o.sandbox));
        if let Some(c) = &o.cwd {
            p.insert("cwd".into(), json!(c));
        }
        if let Some(m) = &o.model {
            p.insert("model".into(), json!(m));
        }
        // A resumed thread keeps the tools it was started with
        // (`thread/resume` takes none), and its turns are not wanted back:
        // without `excludeTurns` codex replays them and adds a deprecation notice.
        match o.resume {
            Some(_) => _ = p.insert("excludeTurns".into(), json!(true)),
            None if o.questions => _ = p.insert("dynamicTools".into(), json!([question_tool()])),
            None => {}
        }
        let method = if o.resume.is_some() { "thread/resume" } else { "thread/start" };
        self.request(Sent::Thread, method, Value::Object(p))
    }

    fn start_turn(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>) {
        let Some(thread) = self.thread.clone() else {
            self.queued.push(text.to_string());
            return;
        };
        self.turn_running = true;
        self.turn = None;
        self.started = false;
        let l = self.request(Sent::Turn, "turn/start", json!({"threadId": thread, "input": text_input(text)}));
        to_agent.push(l);
    }

    fn steer(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>) {
        match (self.thread.clone(), self.turn.clone()) {
            (Some(thread), Some(turn)) if self.started => {
                let l = self.request(
                    Sent::Steer,
                    "turn/steer",
                    json!({"threadId": thread, "expectedTurnId": turn, "input": text_input(text)}),
                );
                self.steering.insert(self.next, text.to_string());
                to_agent.push(l);
            }
            _ => self.queued.push(text.to_string()),
        }
    }

    /// The running turn ended: the first refused steer starts the next turn
    /// (the others join it as steers once it runs).
    fn start_next(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        let mut next = std::mem::take(&mut self.next_turn).into_iter();
        if let Some(first) = next.next() {
            self.start_turn(&first, to_agent);
            self.queued.extend(next);
        }
    }

    /// Sends what waited for the thread or the turn id.
    fn flush(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        if self.thread.is_none() || (self.turn_running && self.turn.is_none()) {
            return;
        }
        if self.interrupt_pending && self.turn_running {
            self.send_interrupt(to_agent);
        }
        if self.interrupting && self.turn_running {
            return;
        }
        for text in std::mem::take(&mut self.queued) {
            if self.turn_running {
                self.steer(&text, to_agent);
            } else {
                self.start_turn(&text, to_agent);
            }
        }
    }

    /// `turn/interrupt` for the running turn, once: before codex named the
    /// turn it waits (a stop right after the message must not be lost, the
    /// turn would run on).
    fn send_interrupt(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        if self.interrupting && !self.interrupt_pending {
            return;
        }
        match (self.thread.clone(), self.turn.clone()) {
            (Some(thread), Some(turn)) => {
                self.interrupt_pending = false;
                self.interrupting = true;
                let l = self.request(Sent::Interrupt, "turn/interrupt", json!({"threadId": thread, "turnId": turn}));
                to_agent.push(l);
            }
            _ if self.turn_running => {
                self.interrupt_pending = true;
                self.interrupting = true;
            }
            _ => {}
        }
    }

    fn set_thread(&mut self, thread: Option<&Value>, out: &mut Vec<Signal>) {
        // A subagent's thread (`parentThreadId`) is not the session's.
        if thread.and_then(|t| t.get("parentThreadId")).is_some_and(|t| !t.is_null()) {
            return;
        }
        if let Some(id) = thread.and_then(|t| t.get("id")).and_then(Value::as_str).filter(|s| !s.is_empty()) {
            if self.thread.as_deref() != Some(id) {
                self.thread = Some(id.to_string());
                out.push(Signal::SessionId(id.to_string()));
            }
        }
    }

    fn response(&mut self, v: &Value, to_agent: &mut Vec<Vec<u8>>, out: &mut Vec<Signal>) {
        let Some(sent) = v.get("id").and_then(Value::as_u64).and_then(|id| self.sent.remove(&id)) else { return };
        let failed = v.get("error").is_some_and(|e| !e.is_null());
        match sent {
            Sent::Initialize if !failed => {
                let l = self.thread_request();
                to_agent.push(l);
            }
            Sent::Thread if !failed => {
                self.set_thread(v.pointer("/result/thread"), out);
                self.flush(to_agent);
            }
            Sent::Turn if failed => {
                // The turn never started: nothing will end it but this.
                self.turn_running = false;
                (self.interrupting, self.interrupt_pending) = (false, false);
                out.push(Signal::TurnEnded { ok: false });
            }
            Sent::Turn => {
                if let Some(t) = v.pointer("/result/turn/id").and_then(Value::as_str) {
                    self.turn = Some(t.to_string());
                }
                self.flush(to_agent);
            }
            Sent::Steer => {
                let Some(text) = v["id"].as_u64().and_then(|id| self.steering.remove(&id)) else { return };
                if !failed {
                    // Taken into a turn that has ended meanwhile: nothing is owed any more.
                    if !self.working() {
                        out.push(Signal::TurnEnded { ok: true });
                    }
                    return;
                }
                // Refused: the turn ended before the steer reached codex (or
                // it cannot be steered). The message starts the next turn.
                if !self.turn_running {
                    self.start_turn(&text, to_agent);
                    out.push(Signal::TurnActive);
                } else if !self.started {
                    // A newer turn is starting: steered into it once it runs.
                    self.queued.push(text);
                } else {
                    self.next_turn.push(text);
                }
            }
            // A failed initialize or thread leaves codex without a thread:
            // nothing can run, the session ends with codex's reason.
            Sent::Initialize | Sent::Thread => {
                let method = match (sent, &self.opts.resume) {
                    (Sent::Initialize, _) => "initialize",
                    (_, Some(_)) => "thread/resume",
                    _ => "thread/start",
                };
                out.push(Signal::Failed(super::refusal("codex", method, v)));
            }
            Sent::Interrupt => {}
        }
    }

    /// A server request codex sent: the request it raises (and how it is
    /// answered, kept in `asked`), or `None` when it was answered at once.
    fn server_request(&mut self, id: &Value, method: &str, p: &Value, to_agent: &mut Vec<Vec<u8>>) -> Option<Signal> {
        let (req, asked) = requests::server_request(self.opts.questions, id, method, p, to_agent)?;
        self.asked.insert(req.id.clone(), (id.clone(), asked));
        Some(Signal::Request(Box::new(req)))
    }
}

impl Agent for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn open(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        let l = self.request(
            Sent::Initialize,
            "initialize",
            json!({"clientInfo": {"name": "runwire", "version": env!("CARGO_PKG_VERSION"), "title": null},
                   "capabilities": {"experimentalApi": true}}),
        );
        to_agent.push(l);
    }

    fn line(&mut self, raw: &[u8], to_agent: &mut Vec<Vec<u8>>) -> Vec<Signal> {
        let Some(v) = super::json_line(raw) else { return Vec::new() };
        let mut out = Vec::new();
        let method = v.get("method").and_then(Value::as_str);
        let id = v.get("id").filter(|i| !i.is_null());
        let p = v.get("params").unwrap_or(&Value::Null);
        match (method, id) {
            (None, Some(_)) => self.response(&v, to_agent, &mut out),
            (Some(m), Some(id)) => out.extend(self.server_request(id, m, p, to_agent)),
            (Some("thread/started"), None) => self.set_thread(p.get("thread"), &mut out),
            // Answered elsewhere (another client, or codex gave up on it): no longer open here.
            (Some("serverRequest/resolved"), None) => {
                if let Some(rid) = p.get("requestId").filter(|r| !r.is_null()).map(id_text) {
                    if self.asked.remove(&rid).is_some() {
                        out.push(Signal::Withdrawn(rid));
                    }
                }
            }
            // A subagent's thread has turns of its own inside the session's turn.
            (Some("turn/started" | "turn/completed"), None)
                if p.get("threadId")
                    .and_then(Value::as_str)
                    .is_some_and(|t| self.thread.as_deref().is_some_and(|m| m != t)) => {}
            (Some("turn/started"), None) => {
                if let Some(t) = p.pointer("/turn/id").and_then(Value::as_str) {
                    self.turn = Some(t.to_string());
                }
                self.turn_running = true;
                self.started = true;
                out.push(Signal::TurnActive);
                self.flush(to_agent);
            }
            (Some("turn/completed"), None) => {
                self.turn_running = false;
                self.started = false;
                (self.interrupting, self.interrupt_pending) = (false, false);
                self.turn = None;
                // Requests of the turn are moot now (the session records them cancelled).
                self.asked.clear();
                let ok = p.pointer("/turn/status").and_then(Value::as_str) == Some("completed");
                out.push(Signal::TurnEnded { ok });
                // A steer codex refused, or a message that waited for the
                // turn's id (or for an interrupted turn's end), starts the
                // next turn: the session is in a turn again, not idle.
                self.start_next(to_agent);
                self.flush(to_agent);
                if self.turn_running {
                    out.push(Signal::TurnActive);
                }
            }
            _ => {}
        }
        out
    }

    fn message(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>) {
        if self.turn_running && self.interrupting {
            self.queued.push(text.to_string());
        } else if self.turn_running {
            self.steer(text, to_agent);
        } else {
            self.start_turn(text, to_agent);
        }
    }

    fn answer(&mut self, req: &InputRequest, a: &InputAnswer, _mode: Option<&str>, to_agent: &mut Vec<Vec<u8>>) {
        let Some((id, asked)) = self.asked.remove(&req.id) else { return };
        let result = match asked {
            Asked::Approval { available } => {
                let offered = |d: &str| available.iter().any(|x| x.as_str() == Some(d));
                let decision = match a.decision {
                    Decision::Allow if a.scope == Some(Scope::Session) && offered("acceptForSession") => {
                        json!("acceptForSession")
                    }
                    // The persistent grant codex offered, as it offered it.
                    Decision::Allow if a.scope == Some(Scope::Always) && amendment(&available).is_some() => {
                        amendment(&available).cloned().unwrap_or_else(|| json!("accept"))
                    }
                    Decision::Allow | Decision::Answer => json!("accept"),
                    // The session ended (or the turn was abandoned): stop the turn too.
                    Decision::Cancelled => json!("cancel"),
                    // Not `cancel`, which aborts the whole turn: codex takes
                    // `decline` whether or not it listed it.
                    Decision::Deny | Decision::Expired => json!("decline"),
                };
                json!({"decision": decision})
            }
            Asked::Tool { arguments } => match (a.decision, &a.answers) {
                (Decision::Answer, Some(answers)) => {
                    let mut body = arguments.as_object().cloned().unwrap_or_default();
                    body.insert("answers".into(), Value::Object(answers.clone()));
                    let text = serde_json::to_string(&body).expect("JSON values serialize infallibly");
                    return to_agent.push(tool_text(&id, &text, true));
                }
                _ => {
                    let why = a.message.as_deref().unwrap_or("The user declined to answer");
                    return to_agent.push(tool_text(&id, why, false));
                }
            },
            Asked::UserInput { ids } => {
                let mut answers = Map::new();
                if let (Decision::Answer, Some(given)) = (a.decision, &a.answers) {
                    for (text, qid) in &ids {
                        if let Some(answer) = given.get(text).and_then(Value::as_str) {
                            let q = req.questions.iter().flatten().find(|q| &q.question == text);
                            answers.insert(qid.clone(), json!({"answers": [user_input_answer(q, answer)]}));
                        }
                    }
                }
                json!({"answers": answers})
            }
            // Granted as asked, for the turn or the session; a refusal grants nothing.
            Asked::Permissions { asked } => match a.decision {
                Decision::Allow | Decision::Answer => {
                    let scope = if a.scope == Some(Scope::Session) { "session" } else { "turn" };
                    json!({"permissions": asked, "scope": scope})
                }
                _ => json!({"permissions": {}, "scope": "turn"}),
            },
            Asked::Form { fields } => match (a.decision, &a.answers) {
                (Decision::Answer, Some(given)) => {
                    let mut content = Map::new();
                    for f in &fields {
                        if let Some(v) = given.get(&f.question).and_then(Value::as_str).and_then(|t| f.value(t).ok()) {
                            content.insert(f.name.clone(), v);
                        }
                    }
                    json!({"action": "accept", "content": content})
                }
                (Decision::Cancelled, _) => json!({"action": "cancel"}),
                _ => json!({"action": "decline"}),
            },
            Asked::Confirm { content } => match (a.decision, content) {
                (Decision::Allow | Decision::Answer, Some(c)) => json!({"action": "accept", "content": c}),
                (Decision::Allow | Decision::Answer, None) => json!({"action": "accept"}),
                (Decision::Cancelled, _) => json!({"action": "cancel"}),
                _ => json!({"action": "decline"}),
            },
        };
        to_agent.push(line(&json!({"jsonrpc": "2.0", "id": id, "result": result})));
    }

    fn interrupt(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        if self.thread.is_none() && !self.queued.is_empty() {
            // The first message is waiting for the thread: it still starts
            // its turn, which is interrupted as soon as codex names it, so
            // that every message that starts a turn ends one (runners count
            // them); what would have joined it is dropped.
            self.queued.truncate(1);
            (self.interrupt_pending, self.interrupting) = (true, true);
            return;
        }
        // Messages that waited for this turn are dropped with it, and so are
        // steers codex may still refuse (a stop is not a new instruction).
        self.queued.clear();
        self.next_turn.clear();
        self.steering.clear();
        self.send_interrupt(to_agent);
    }

    fn steer_may_start_next(&self) -> bool {
        // A `turn/steer` codex finds too late is refused; the session then
        // sends it again as `turn/start`.
        true
    }
    fn working(&self) -> bool {
        self.turn_running || !self.steering.is_empty() || !self.next_turn.is_empty() || !self.queued.is_empty()
    }

    fn check_answer(&self, req: &InputRequest, a: &AnswerInput) -> Result<(), String> {
        if !self.asked.contains_key(&req.id) {
            return Ok(());
        }
        check_answer(req, a)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Input, Options, Refused, Session};
    use super::requests::now_secs;
    use super::*;
    use crate::pipeline::events::InputKind;

    const APPROVAL: &str = r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th","turnId":"t1","itemId":"e1","reason":"outside?","command":"touch ~/x","cwd":"/w","availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch"]}},"cancel"]}}"#;

    /// What codex answers as a session opens: its handshake, the thread,
    /// the turn named, the turn started.
    const OPENING: [&[u8]; 4] = [
        br#"{"id":1,"result":{"userAgent":"x"}}"#,
        br#"{"id":2,"result":{"thread":{"id":"th"}}}"#,
        br#"{"id":3,"result":{"turn":{"id":"t1","status":"inProgress"}}}"#,
        br#"{"method":"turn/started","params":{"threadId":"th","turn":{"id":"t1"}}}"#,
    ];

    /// A session opened with "go" that has had the first `n` lines of
    /// [`OPENING`], and what it wrote to codex.
    fn opened(n: usize) -> (Session<Codex>, Vec<Vec<u8>>) {
        let mut s =
            Session::new(Codex::new(CodexOptions::default()), Options { answer_timeout_ms: 1000, actor: "t".into() });
        let mut w = s.open(Some("go")).to_agent;
        for l in &OPENING[..n] {
            w.extend(s.agent_line(l, 0).to_agent);
        }
        (s, w)
    }

    fn session() -> (Session<Codex>, Vec<Vec<u8>>) {
        opened(OPENING.len())
    }

    fn parse(l: &[u8]) -> Value {
        serde_json::from_slice(l).unwrap()
    }

    #[test]
    fn the_first_message_waits_for_the_thread_and_a_second_one_steers() {
        let (mut s, w) = session();
        let methods: Vec<Value> = w.iter().map(|l| parse(l)["method"].clone()).collect();
        assert_eq!(methods, vec![json!("initialize"), json!("thread/start"), json!("turn/start")]);
        assert_eq!(parse(&w[2])["params"]["threadId"], "th");
        let st =
            s.input(Input::Message(super::super::input::MessageInput { text: "stop".into(), by: None }), 1).unwrap();
        let l = parse(&st.to_agent[0]);
        assert_eq!((l["method"].as_str(), l["params"]["expectedTurnId"].as_str()), (Some("turn/steer"), Some("t1")));
    }

    fn msg(text: &str) -> Input {
        Input::Message(super::super::input::MessageInput { text: text.into(), by: None })
    }

    const COMPLETED: &[u8] =
        br#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t1","status":"completed"}}}"#;

    #[test]
    fn a_steer_codex_refuses_after_the_turn_ended_starts_the_next_turn_and_the_session_stays_mid_turn() {
        let (mut s, _) = session();
        let st = s.input(msg("and then?"), 1).unwrap();
        let steer = parse(&st.to_agent[0]);
        assert_eq!(steer["method"], "turn/steer");
        // The turn ends before codex reads the steer: still owed, so still mid-turn.
        let st = s.agent_line(COMPLETED, 2);
        assert!(st.to_agent.is_empty());
        assert_eq!(s.phase(), super::super::Phase::Turn);
        let refusal = json!({"id": steer["id"], "error": {"code": -32600, "message": "no active turn to steer"}});
        let st = s.agent_line(refusal.to_string().as_bytes(), 3);
        let l = parse(&st.to_agent[0]);
        assert_eq!(
            (l["method"].as_str(), l["params"]["input"][0]["text"].as_str()),
            (Some("turn/start"), Some("and then?"))
        );
        assert_eq!(s.phase(), super::super::Phase::Turn);
        s.agent_line(br#"{"method":"turn/started","params":{"threadId":"th","turn":{"id":"t2"}}}"#, 4);
        s.agent_line(
            br#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t2","status":"completed"}}}"#,
            5,
        );
        assert_eq!(s.phase(), super::super::Phase::Idle);
    }

    #[test]
    fn a_steer_accepted_just_before_the_turn_ended_leaves_the_session_idle() {
        let (mut s, _) = session();
        let st = s.input(msg("also this"), 1).unwrap();
        let id = parse(&st.to_agent[0])["id"].clone();
        s.agent_line(COMPLETED, 2);
        assert_eq!(s.phase(), super::super::Phase::Turn, "the steer is not answered yet");
        let st = s.agent_line(json!({"id": id, "result": {"turnId": "t1"}}).to_string().as_bytes(), 3);
        assert!(st.to_agent.is_empty());
        assert_eq!(s.phase(), super::super::Phase::Idle);
    }

    #[test]
    fn a_steer_waits_for_turn_started_and_a_message_after_a_stop_waits_for_the_next_turn() {
        let (mut s, _) = opened(3);
        // Codex named the turn but has not started it: it would refuse a steer now.
        assert!(s.input(msg("early"), 1).unwrap().to_agent.is_empty());
        let st = s.agent_line(OPENING[3], 2);
        assert_eq!(parse(&st.to_agent[0])["method"], "turn/steer");
        // Stop, then a message: the message is for the turn after the stopped one.
        let st = s.input(Input::Interrupt(super::super::input::Who { by: None }), 3).unwrap();
        assert_eq!(parse(&st.to_agent[0])["method"], "turn/interrupt");
        assert!(s.input(msg("instead"), 4).unwrap().to_agent.is_empty());
        let st = s.agent_line(
            br#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t1","status":"interrupted"}}}"#,
            5,
        );
        let l = parse(&st.to_agent[0]);
        assert_eq!(
            (l["method"].as_str(), l["params"]["input"][0]["text"].as_str()),
            (Some("turn/start"), Some("instead"))
        );
        assert_eq!(s.phase(), super::super::Phase::Turn);
    }

    #[test]
    fn a_stop_before_codex_names_the_turn_is_sent_once_it_does() {
        let (mut s, _) = opened(2);
        let st = s.input(Input::Interrupt(super::super::input::Who { by: None }), 1).unwrap();
        assert!(st.to_agent.is_empty(), "no turn id yet");
        let st = s.agent_line(OPENING[3], 2);
        let l = parse(&st.to_agent[0]);
        assert_eq!((l["method"].as_str(), l["params"]["turnId"].as_str()), (Some("turn/interrupt"), Some("t1")));
    }

    #[test]
    fn a_message_after_an_interrupt_starts_the_next_turn_once_this_one_ended() {
        let (mut s, _) = session();
        let msg = |t: &str| Input::Message(super::super::input::MessageInput { text: t.into(), by: None });
        let st = s.input(Input::Interrupt(super::super::input::Who { by: None }), 1).unwrap();
        assert_eq!(parse(&st.to_agent[0])["method"], "turn/interrupt");
        // Not a `turn/steer` into the dying turn, and no second interrupt.
        assert!(s.input(msg("instead"), 2).unwrap().to_agent.is_empty());
        assert!(s.input(Input::Interrupt(super::super::input::Who { by: None }), 2).unwrap().to_agent.is_empty());
        assert!(s.input(msg("instead"), 2).unwrap().to_agent.is_empty());
        let done =
            br#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t1","status":"interrupted"}}}"#;
        let st = s.agent_line(done, 3);
        assert_eq!(s.phase(), super::super::Phase::Turn, "the next turn is on its way");
        let l = parse(&st.to_agent[0]);
        assert_eq!(
            (l["method"].as_str(), l["params"]["input"][0]["text"].as_str()),
            (Some("turn/start"), Some("instead"))
        );
        assert_eq!(st.to_agent.len(), 1);
    }

    #[test]
    fn a_stop_before_the_thread_exists_still_ends_the_first_turn() {
        let (mut s, _) = opened(1);
        let st = s.input(Input::Interrupt(super::super::input::Who { by: None }), 1).unwrap();
        assert!(st.to_agent.is_empty());
        let st = s.agent_line(br#"{"id":2,"result":{"thread":{"id":"th"}}}"#, 2);
        let l = parse(&st.to_agent[0]);
        assert_eq!((l["method"].as_str(), l["params"]["input"][0]["text"].as_str()), (Some("turn/start"), Some("go")));
        let st = s.agent_line(br#"{"id":3,"result":{"turn":{"id":"t1","status":"inProgress"}}}"#, 3);
        let l = parse(&st.to_agent[0]);
        assert_eq!((l["method"].as_str(), l["params"]["turnId"].as_str()), (Some("turn/interrupt"), Some("t1")));
    }

    #[test]
    fn an_approval_is_answered_by_id_and_session_scope_needs_codex_to_offer_it() {
        let (mut s, _) = session();
        let st = s.agent_line(APPROVAL.as_bytes(), 5);
        assert_eq!(st.requested.len(), 1);
        let ans = |d: &str, scope: Option<&str>| {
            let mut v = json!({"type":"answer","id":"0","decision":d});
            if let Some(sc) = scope {
                v["scope"] = json!(sc);
            }
            serde_json::from_value::<Input>(v).unwrap()
        };
        assert!(matches!(s.input(ans("allow", Some("session")), 6), Err(Refused::Invalid(_))));
        let st = s.input(ans("deny", None), 6).unwrap();
        assert_eq!(parse(&st.to_agent[0]), json!({"jsonrpc":"2.0","id":0,"result":{"decision":"decline"}}));
    }

    /// `scope: "always"` is codex's own "always allow this command": the
    /// amendment it offered, sent back as offered; refused where it offered none.
    #[test]
    fn always_sends_the_amendment_codex_offered() {
        let (mut s, _) = session();
        s.agent_line(APPROVAL.as_bytes(), 5);
        let always = |id: &str| {
            serde_json::from_value::<Input>(json!({"type":"answer","id":id,"decision":"allow","scope":"always"}))
                .unwrap()
        };
        let st = s.input(always("0"), 6).unwrap();
        assert_eq!(
            parse(&st.to_agent[0])["result"]["decision"],
            json!({"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}})
        );
        let plain = APPROVAL
            .replace(r#""id":0"#, r#""id":1"#)
            .replace(r#",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch"]}}"#, "");
        s.agent_line(plain.as_bytes(), 7);
        assert!(matches!(s.input(always("1"), 8), Err(Refused::Invalid(_))));
    }

    #[test]
    fn an_unanswered_approval_expires_as_decline_and_unknown_requests_are_refused_at_once() {
        let (mut s, _) = session();
        s.agent_line(APPROVAL.as_bytes(), 0);
        let st = s.tick(2000);
        assert_eq!(parse(&st.to_agent[0])["result"]["decision"], "decline");
        let st = s.agent_line(br#"{"method":"something/new","id":7,"params":{}}"#, 0);
        assert!(st.requested.is_empty());
        assert_eq!(parse(&st.to_agent[0])["error"]["code"], -32601);
    }

    /// The machine requests are answered at once, nobody is asked: the
    /// time as whole Unix seconds; auth refresh and attestation refused
    /// with a JSON-RPC error saying why.
    #[test]
    fn machine_requests_are_answered_at_once() {
        let (mut s, _) = session();
        let before = now_secs();
        let st = s.agent_line(br#"{"method":"currentTime/read","id":11,"params":{"threadId":"th"}}"#, 0);
        assert!(st.requested.is_empty());
        let r = parse(&st.to_agent[0]);
        assert_eq!(r["id"], 11);
        let t = r["result"]["currentTimeAt"].as_i64().unwrap();
        assert!(t >= before && t <= now_secs(), "{r}");
        for (m, says) in
            [("account/chatgptAuthTokens/refresh", "no ChatGPT tokens"), ("attestation/generate", "attest")]
        {
            let l = json!({"method": m, "id": 12, "params": {"reason": "unauthorized"}}).to_string();
            let st = s.agent_line(l.as_bytes(), 0);
            assert!(st.requested.is_empty());
            let r = parse(&st.to_agent[0]);
            assert_eq!(r["error"]["code"], -32601, "{m}");
            assert!(r["error"]["message"].as_str().unwrap().contains(says), "{r}");
        }
    }

    fn answer_input(id: &str, v: Value) -> Input {
        let mut v = v;
        v["type"] = json!("answer");
        v["id"] = json!(id);
        serde_json::from_value(v).unwrap()
    }

    const PERMISSIONS: &str = r#"{"method":"item/permissions/requestApproval","id":20,"params":{"threadId":"th","turnId":"t1","itemId":"p1","cwd":"/w","startedAtMs":1,"reason":"write outside the workspace","permissions":{"fileSystem":{"write":["/etc/x"]},"network":null}}}"#;

    /// A permission-profile approval is a tool approval: allowed, the
    /// profile is granted as asked for the turn (or the session); denied,
    /// nothing is granted; `always` is not codex's to offer here.
    #[test]
    fn a_permissions_approval_grants_what_was_asked_or_nothing() {
        let (mut s, _) = session();
        let st = s.agent_line(PERMISSIONS.as_bytes(), 0);
        let r = &st.requested[0];
        assert_eq!((r.kind, r.tool.as_deref()), (InputKind::ToolApproval, Some(PERMISSIONS_TOOL)));
        assert!(r.message.as_deref().unwrap().contains("write outside the workspace"));
        assert!(matches!(
            s.input(answer_input("20", json!({"decision":"allow","scope":"always"})), 1),
            Err(Refused::Invalid(_))
        ));
        let st = s.input(answer_input("20", json!({"decision":"allow","scope":"session"})), 1).unwrap();
        assert_eq!(
            parse(&st.to_agent[0])["result"],
            json!({"permissions": {"fileSystem":{"write":["/etc/x"]},"network":null}, "scope": "session"})
        );
        s.agent_line(PERMISSIONS.replace(r#""id":20"#, r#""id":21"#).as_bytes(), 2);
        let st = s.input(answer_input("21", json!({"decision":"deny"})), 3).unwrap();
        assert_eq!(parse(&st.to_agent[0])["result"], json!({"permissions": {}, "scope": "turn"}));
    }

    const FORM: &str = r#"{"method":"mcpServer/elicitation/request","id":30,"params":{"threadId":"th","turnId":"t1","serverName":"deploy","mode":"form","message":"Where to?","requestedSchema":{"type":"object","required":["env"],"properties":{"env":{"type":"string","title":"Environment","enum":["prod","staging"],"enumNames":["Production","Staging"]},"replicas":{"type":"integer","description":"How many replicas?"},"dry":{"type":"boolean","title":"Dry run"},"note":{"type":"string"}}}}}"#;

    /// An MCP form is one question per field, answered with the form's
    /// content typed as its schema says (a choice by its value, a yes/no
    /// as a boolean, a number as a number); a number that is none is refused.
    #[test]
    fn an_mcp_form_is_a_question_per_field_answered_with_typed_content() {
        let (mut s, _) = session();
        let st = s.agent_line(FORM.as_bytes(), 0);
        let r = &st.requested[0];
        assert_eq!((r.kind, r.tool.as_deref()), (InputKind::Question, Some(ELICITATION_TOOL)));
        assert_eq!(r.message.as_deref(), Some("deploy asks: Where to?"));
        let qs: Vec<&str> = r.questions.iter().flatten().map(|q| q.question.as_str()).collect();
        assert_eq!(qs, ["Dry run", "Environment", "note", "How many replicas?"]);
        let bad = json!({"decision":"answer","answers":{"Environment":"Staging","How many replicas?":"three"}});
        assert!(matches!(s.input(answer_input("30", bad), 1), Err(Refused::Invalid(m)) if m.contains("whole number")));
        let good = json!({"decision":"answer","answers":{"Environment":"Staging","How many replicas?":"3","Dry run":"no","note":"after lunch"}});
        let st = s.input(answer_input("30", good), 1).unwrap();
        assert_eq!(
            parse(&st.to_agent[0])["result"],
            json!({"action":"accept","content":{"env":"staging","replicas":3,"dry":false,"note":"after lunch"}})
        );
    }

    /// A URL elicitation is accepted or declined; a cancelled one is
    /// `cancel`; one runwire cannot represent is declined at once.
    #[test]
    fn a_url_elicitation_is_an_approval_and_an_unrepresentable_one_is_declined() {
        let (mut s, _) = session();
        let url = r#"{"method":"mcpServer/elicitation/request","id":31,"params":{"threadId":"th","turnId":null,"serverName":"docs","mode":"url","message":"Log in first","url":"https://x.test/login","elicitationId":"e1"}}"#;
        let st = s.agent_line(url.as_bytes(), 0);
        let r = &st.requested[0];
        assert_eq!(r.kind, InputKind::ToolApproval);
        assert_eq!(r.message.as_deref(), Some("docs asks you to open https://x.test/login: Log in first"));
        let st = s.input(answer_input("31", json!({"decision":"allow"})), 1).unwrap();
        assert_eq!(parse(&st.to_agent[0])["result"], json!({"action":"accept"}));
        s.agent_line(url.replace(r#""id":31"#, r#""id":32"#).as_bytes(), 2);
        let st = s.agent_line(COMPLETED, 3);
        assert_eq!(st.answered[0].decision, Decision::Cancelled);
        let multi = r#"{"method":"mcpServer/elicitation/request","id":33,"params":{"threadId":"th","serverName":"x","mode":"form","message":"m","requestedSchema":{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}}}}}}"#;
        let st = s.agent_line(multi.as_bytes(), 4);
        assert!(st.requested.is_empty());
        assert_eq!(parse(&st.to_agent[0]), json!({"jsonrpc":"2.0","id":33,"result":{"action":"decline"}}));
        assert!(crate::pipeline::normalize::elicit::refusal(&parse(multi.as_bytes())["params"])
            .unwrap()
            .contains("\"tags\""));
    }

    #[test]
    fn the_question_tool_is_answered_with_the_questions_and_answers() {
        let (mut s, _) = session();
        let call = r#"{"method":"item/tool/call","id":4,"params":{"threadId":"th","turnId":"t1","callId":"c1","tool":"AskUserQuestion","arguments":{"questions":[{"question":"Tabs or spaces?","header":"Indent","options":[{"label":"tabs"},{"label":"spaces"}]}]}}}"#;
        let st = s.agent_line(call.as_bytes(), 0);
        assert_eq!(st.requested[0].kind, InputKind::Question);
        let a: Input = serde_json::from_value(
            json!({"type":"answer","id":"4","decision":"answer","answers":{"Tabs or spaces?":"spaces"}}),
        )
        .unwrap();
        let st = s.input(a, 1).unwrap();
        let r = parse(&st.to_agent[0]);
        assert_eq!(r["id"], 4);
        assert_eq!(r["result"]["success"], true);
        let text: Value = serde_json::from_str(r["result"]["contentItems"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["answers"]["Tabs or spaces?"], "spaces");
    }

    /// runwire's question tool promises free text (its description says
    /// so): the person's own words go back as the `answers` value.
    #[test]
    fn the_question_tool_takes_the_persons_own_words() {
        let (mut s, _) = session();
        assert!(question_tool()["description"].as_str().unwrap().contains("in their own words"));
        let call = r#"{"method":"item/tool/call","id":4,"params":{"threadId":"th","turnId":"t1","callId":"c1","tool":"AskUserQuestion","arguments":{"questions":[{"question":"Tabs or spaces?","options":[{"label":"tabs"},{"label":"spaces"}]}]}}}"#;
        let st = s.agent_line(call.as_bytes(), 0);
        assert!(st.requested[0].questions.as_ref().unwrap()[0].free_text);
        let blank: Input = serde_json::from_value(
            json!({"type":"answer","id":"4","decision":"answer","answers":{"Tabs or spaces?":""}}),
        )
        .unwrap();
        assert!(s.input(blank, 1).is_err());
        let a: Input = serde_json::from_value(
            json!({"type":"answer","id":"4","decision":"answer","answers":{"Tabs or spaces?":"whatever the repo uses"}}),
        )
        .unwrap();
        let r = parse(&s.input(a, 1).unwrap().to_agent[0]);
        let text: Value = serde_json::from_str(r["result"]["contentItems"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["answers"]["Tabs or spaces?"], "whatever the repo uses");
    }

    /// codex's own questions: `isOther` says whether the person's words are
    /// taken; they go back as codex's TUI sends typed text (`user_note: …`),
    /// a choice by its label; without `isOther` only a choice is taken.
    #[test]
    fn request_user_input_takes_free_text_only_where_codex_offers_it() {
        let (mut s, _) = session();
        let ask = r#"{"method":"item/tool/requestUserInput","id":9,"params":{"threadId":"th","turnId":"t1","itemId":"i1","questions":[{"id":"indent","header":"Indent","question":"Tabs or spaces?","isOther":true,"isSecret":false,"options":[{"label":"tabs","description":""},{"label":"spaces","description":""}]},{"id":"eol","header":"EOL","question":"LF or CRLF?","isOther":false,"isSecret":false,"options":[{"label":"LF","description":""},{"label":"CRLF","description":""}]}]}}"#;
        let st = s.agent_line(ask.as_bytes(), 0);
        let qs = st.requested[0].questions.clone().unwrap();
        assert_eq!((qs[0].free_text, qs[1].free_text), (true, false));
        let id = st.requested[0].id.clone();
        let answer = |a: Value| -> Input {
            serde_json::from_value(json!({"type":"answer","id": id,"decision":"answer","answers": a})).unwrap()
        };
        let bad = s.input(answer(json!({"Tabs or spaces?": "tabs", "LF or CRLF?": "whatever"})), 1);
        assert!(
            matches!(&bad, Err(super::super::Refused::Invalid(m)) if m.contains("not one of the choices")),
            "{bad:?}"
        );
        let st = s.input(answer(json!({"Tabs or spaces?": "two spaces", "LF or CRLF?": "LF"})), 1).unwrap();
        let r = parse(&st.to_agent[0]);
        assert_eq!(r["id"], 9);
        assert_eq!(
            r["result"]["answers"],
            json!({"indent": {"answers": ["user_note: two spaces"]}, "eol": {"answers": ["LF"]}})
        );
    }

    /// `isBlocking: false`: a request marked `blocking: false`; a steer is
    /// taken while it is open (codex works on), and the turn's end cancels
    /// it with nothing written to codex.
    #[test]
    fn a_non_blocking_question_does_not_hold_the_session_and_ends_with_the_turn() {
        let (mut s, _) = session();
        let ask = r#"{"method":"item/tool/requestUserInput","id":9,"params":{"threadId":"th","turnId":"t1","itemId":"i1","isBlocking":false,"questions":[{"id":"q","header":"H","question":"Tabs?","isOther":false,"isSecret":false,"options":[{"label":"yes","description":""},{"label":"no","description":""}]}]}}"#;
        let st = s.agent_line(ask.as_bytes(), 0);
        assert_eq!(st.requested[0].blocking, Some(false));
        let st = s.input(
            Input::Steer(super::super::input::SteerInput {
                text: "go on".into(),
                interrupt: false,
                turn: None,
                by: None,
            }),
            1,
        );
        assert_eq!(parse(&st.unwrap().to_agent[0])["method"], "turn/steer");
        let st = s.agent_line(COMPLETED, 2);
        assert!(st.to_agent.is_empty(), "{:?}", st.to_agent);
        assert_eq!((st.answered.len(), st.answered[0].decision), (1, Decision::Cancelled));
        // Blocking (no flag, or `isBlocking: true`): a steer waits for the answer.
        let (mut s, _) = session();
        let st = s.agent_line(ask.replace("false,\"questions", "true,\"questions").as_bytes(), 0);
        assert_eq!(st.requested[0].blocking, None);
        let steer = Input::Steer(super::super::input::SteerInput {
            text: "go on".into(),
            interrupt: false,
            turn: None,
            by: None,
        });
        assert!(matches!(s.input(steer, 1), Err(Refused::RequestOpen)));
    }

    #[test]
    fn a_request_resolved_elsewhere_is_closed_and_nothing_is_written_for_it() {
        let (mut s, _) = session();
        assert_eq!(s.agent_line(APPROVAL.as_bytes(), 0).requested.len(), 1);
        let st = s.agent_line(br#"{"method":"serverRequest/resolved","params":{"threadId":"th","requestId":0}}"#, 1);
        assert!(st.to_agent.is_empty(), "codex no longer waits: nothing to answer");
        assert_eq!(st.answered.len(), 1);
        assert_eq!(st.answered[0].decision, Decision::Cancelled);
        // It no longer expires either (it is not open any more).
        assert!(s.tick(5000).to_agent.is_empty());
        // A request of another id stays open.
        s.agent_line(APPROVAL.replace(r#""id":0"#, r#""id":"r2""#).as_bytes(), 2);
        let st = s.agent_line(br#"{"method":"serverRequest/resolved","params":{"threadId":"th","requestId":0}}"#, 3);
        assert!(st.answered.is_empty());
    }

    #[test]
    fn a_subagents_thread_does_not_replace_the_sessions() {
        let (mut s, _) = opened(1);
        let sub = br#"{"method":"thread/started","params":{"thread":{"id":"sub","parentThreadId":"th"}}}"#;
        s.agent_line(sub, 0);
        for l in &OPENING[1..] {
            s.agent_line(l, 0);
        }
        s.agent_line(sub, 0);
        let st = s.input(msg("and then?"), 1).unwrap();
        assert_eq!(parse(&st.to_agent[0])["params"]["threadId"], "th");
    }

    #[test]
    fn a_resume_asks_for_no_turns_and_sends_no_tools_and_a_start_sends_the_question_tool() {
        let thread_request = |resume: Option<&str>| {
            let mut c = Codex::new(CodexOptions { resume: resume.map(str::to_string), ..CodexOptions::default() });
            let mut w = Vec::new();
            c.open(&mut w);
            c.line(br#"{"id":1,"result":{"userAgent":"x"}}"#, &mut w);
            parse(&w[1])
        };
        let r = thread_request(Some("th"));
        assert_eq!((r["method"].as_str(), r["params"]["threadId"].as_str()), (Some("thread/resume"), Some("th")));
        assert_eq!(r["params"]["excludeTurns"], true);
        assert!(r["params"].get("dynamicTools").is_none(), "{r}");
        let r = thread_request(None);
        assert_eq!(r["method"], "thread/start");
        assert!(r["params"].get("excludeTurns").is_none(), "{r}");
        assert_eq!(r["params"]["dynamicTools"][0]["type"], "function");
        assert_eq!(r["params"]["dynamicTools"][0]["name"], QUESTION_TOOL);
    }

    #[test]
    fn on_failure_is_no_policy_of_codex_any_more() {
        for p in ["untrusted", "on-request", "never"] {
            assert!(CodexOptions { approval_policy: p.into(), ..CodexOptions::default() }.check().is_ok(), "{p}");
        }
        let e = CodexOptions { approval_policy: "on-failure".into(), ..CodexOptions::default() }.check().unwrap_err();
        assert!(e.contains("untrusted, on-request, never"), "{e}");
    }

    #[test]
    fn full_access_needs_grant_all() {
        let o = CodexOptions { sandbox: GRANT_ALL.into(), ..CodexOptions::default() };
        assert!(o.check().is_err());
        assert!(CodexOptions { grant_all: true, ..o }.check().is_ok());
        assert!(CodexOptions { approval_policy: "sometimes".into(), ..CodexOptions::default() }.check().is_err());
    }
}
