//! The interrupts of one interactive thread: which requests of the agent are
//! open, which were decided and how, and what a run's `resume` entries mean.
//!
//! A state object with no IO (the interactive layer writes the answers and
//! streams the run). It holds the AG-UI rules runwire follows
//! (`docs/spec/1.0/basic/patterns/interrupt-resume` wins over the concepts
//! page where they differ):
//! - a request of the agent becomes one `Interrupt` (tool approval:
//!   `reason: "tool_call"` with the call's `toolCallId`; question:
//!   `reason: "input_required"` with a schema built from its choices);
//! - a run must address every open interrupt; one that does not answers
//!   nothing and ends with the still-open interrupts again;
//! - `cancelled` is always accepted (an expired, auto-denied or unknown
//!   interrupt included), so a thread never gets stuck;
//! - an entry naming an interrupt runwire never raised is skipped with a
//!   warning; an identical replay of an answer is not sent again; only a
//!   *different* answer to a decided interrupt, or `resolved` past
//!   `expiresAt`, is refused (`RUN_ERROR`, `409` on the task routes).

use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};

/// Decided interrupts remembered per thread (for idempotent replays).
pub const MAX_DECIDED: usize = 1024;

/// A pending request as the session writes it (`runwire.request`; the
/// fields of events/v1 `input_request`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Request {
    pub id: String,
    pub kind: String,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub suggestions: Option<Vec<Value>>,
    #[serde(default)]
    pub questions: Option<Vec<Question>>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Question {
    pub question: String,
    #[serde(default)]
    pub header: Option<String>,
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    #[serde(default)]
    pub multi_select: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct QuestionOption {
    pub label: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// What runwire tells the agent about one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Allow, optionally for the session, optionally with the whole input replaced.
    Allow { session: bool, updated_input: Option<Value> },
    /// Deny, with a message for the agent.
    Deny { message: String },
    /// Answers to a question: question text -> the chosen label(s), joined by ", ".
    Answer { answers: Map<String, Value> },
    /// Abandoned by the client (`cancelled`): denied.
    Cancelled,
    /// Nobody answered before `expiresAt`: denied (fail closed).
    Expired,
}

impl Decision {
    /// The events/v1 `input_answer.decision` word.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Allow { .. } => "allow",
            Decision::Deny { .. } => "deny",
            Decision::Answer { .. } => "answer",
            Decision::Cancelled => "cancelled",
            Decision::Expired => "expired",
        }
    }
}

/// One open request and the interrupt it became.
#[derive(Debug, Clone, PartialEq)]
pub struct Open {
    pub request: Request,
    /// The AG-UI `Interrupt` object.
    pub interrupt: Value,
    pub expires_ms: Option<i64>,
}

/// How a request was closed, and by which resume entry (for replays).
#[derive(Debug, Clone, PartialEq)]
struct Closed {
    decision: Decision,
    /// `(status, payload)` of the entry that decided it; `None` when the
    /// server decided it (expiry) or another route did.
    entry: Option<(String, Value)>,
    expired: bool,
}

/// One `RunAgentInput.resume` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    pub interrupt_id: String,
    pub status: String,
    #[serde(default)]
    pub payload: Option<Value>,
}

/// What a run's `resume` comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Send these answers (possibly none) and stream on; `warnings` become
    /// `runwire.resume_skipped` CUSTOM events.
    Apply { answers: Vec<(String, Decision)>, warnings: Vec<String> },
    /// Some open interrupts were not addressed: send nothing, end the run
    /// with the open interrupts again.
    StillOpen { warnings: Vec<String> },
    /// Refused: `RUN_ERROR` (409 on the task routes) with this message.
    Refuse(String),
}

/// The thread's interrupts.
#[derive(Debug, Default)]
pub struct Interrupts {
    /// Open requests, in the order the agent raised them.
    open: Vec<Open>,
    closed: HashMap<String, Closed>,
    closed_order: VecDeque<String>,
}

/// Parses an RFC 3339 time into epoch ms (`None` when it is not one).
pub fn parse_time(s: &str) -> Option<i64> {
    crate::time::parse_rfc3339_ms(s)
}

impl Interrupts {
    /// Records a request of the agent; `tool_call_id` is the AG-UI toolCallId
    /// of the call it concerns, when that call was streamed.
    pub fn raise(&mut self, request: Request, tool_call_id: Option<String>) -> &Open {
        self.open.retain(|o| o.request.id != request.id);
        let expires_ms = request.expires_at.as_deref().and_then(parse_time);
        let interrupt = interrupt_for(&request, tool_call_id);
        self.open.push(Open { request, interrupt, expires_ms });
        self.open.last().expect("just pushed")
    }

    pub fn open(&self) -> &[Open] {
        &self.open
    }

    pub fn is_open(&self, id: &str) -> bool {
        self.open.iter().any(|o| o.request.id == id)
    }

    /// The AG-UI interrupts still open.
    pub fn open_interrupts(&self) -> Vec<Value> {
        self.open.iter().map(|o| o.interrupt.clone()).collect()
    }

    /// Open requests past their `expiresAt` at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<String> {
        self.open.iter().filter(|o| o.expires_ms.is_some_and(|e| now_ms >= e)).map(|o| o.request.id.clone()).collect()
    }

    /// Closes a request (an answer was written, or it expired, or the
    /// session recorded an answer from elsewhere).
    pub fn close(&mut self, id: &str, decision: Decision, entry: Option<(String, Value)>) {
        self.open.retain(|o| o.request.id != id);
        let expired = decision == Decision::Expired;
        if self.closed.insert(id.to_string(), Closed { decision, entry, expired }).is_none() {
            self.closed_order.push_back(id.to_string());
        }
        while self.closed_order.len() > MAX_DECIDED {
            if let Some(old) = self.closed_order.pop_front() {
                self.closed.remove(&old);
            }
        }
    }

    /// Forgets every open request (the agent process is gone: nobody waits).
    pub fn abandon_all(&mut self) -> Vec<String> {
        let ids: Vec<String> = self.open.iter().map(|o| o.request.id.clone()).collect();
        for id in &ids {
            self.close(id, Decision::Cancelled, None);
        }
        ids
    }

    /// Reads a run's `resume` entries at `now_ms` (see the module doc).
    pub fn plan(&self, entries: &[ResumeEntry], now_ms: i64) -> Plan {
        let mut answers = Vec::new();
        let mut warnings = Vec::new();
        let mut covered = Vec::new();
        for e in entries {
            let id = e.interrupt_id.as_str();
            if answers.iter().any(|(a, _): &(String, Decision)| a == id) || covered.iter().any(|c| c == id) {
                return Plan::Refuse(format!("resume: interrupt {id:?} is answered twice in one input"));
            }
            if !matches!(e.status.as_str(), "resolved" | "cancelled") {
                return Plan::Refuse(format!(
                    "resume: interrupt {id:?}: status must be \"resolved\" or \"cancelled\", not {:?}",
                    e.status
                ));
            }
            let payload = e.payload.clone().unwrap_or(Value::Null);
            if let Some(open) = self.open.iter().find(|o| o.request.id == id) {
                if e.status == "cancelled" {
                    answers.push((id.to_string(), Decision::Cancelled));
                    continue;
                }
                if open.expires_ms.is_some_and(|x| now_ms >= x) {
                    return Plan::Refuse(expired_message(id, open.request.expires_at.as_deref()));
                }
                match decision_for(&open.request, &payload) {
                    Ok(d) => answers.push((id.to_string(), d)),
                    Err(m) => return Plan::Refuse(format!("resume: interrupt {id:?}: {m}")),
                }
            } else if let Some(c) = self.closed.get(id) {
                covered.push(id.to_string());
                if e.status == "cancelled" {
                    // Accepted whatever happened: an expired or auto-denied
                    // interrupt must not hold the thread.
                    continue;
                }
                match &c.entry {
                    Some((st, p)) if st == &e.status && p == &payload => {} // identical replay: not sent again
                    _ if c.expired => return Plan::Refuse(expired_message(id, None)),
                    _ => {
                        return Plan::Refuse(format!(
                            "resume: interrupt {id:?} was already decided ({}); a different answer cannot be sent",
                            c.decision.word()
                        ))
                    }
                }
            } else {
                warnings.push(format!("resume entry for interrupt {id:?} skipped: runwire raised no such interrupt"));
            }
        }
        let unanswered: Vec<&str> = self
            .open
            .iter()
            .map(|o| o.request.id.as_str())
            .filter(|id| !answers.iter().any(|(a, _)| a == id))
            .collect();
        if !unanswered.is_empty() {
            if !answers.is_empty() {
                warnings.push(format!(
                    "resume left interrupt(s) {} unanswered: nothing was sent; answer every open interrupt in one input",
                    unanswered.join(", ")
                ));
            }
            return Plan::StillOpen { warnings };
        }
        Plan::Apply { answers, warnings }
    }

    /// The entry that decided `id`, recorded with [`Interrupts::close`].
    pub fn entry_of(e: &ResumeEntry) -> (String, Value) {
        (e.status.clone(), e.payload.clone().unwrap_or(Value::Null))
    }

    /// For the task routes: is this answer to `id` acceptable now?
    /// `Ok(true)`: send it; `Ok(false)`: an identical replay, nothing to send.
    pub fn check_answer(&self, id: &str, d: &Decision, now_ms: i64) -> Result<bool, String> {
        if let Some(open) = self.open.iter().find(|o| o.request.id == id) {
            if *d != Decision::Cancelled && open.expires_ms.is_some_and(|x| now_ms >= x) {
                return Err(expired_message(id, open.request.expires_at.as_deref()));
            }
            return Ok(true);
        }
        match self.closed.get(id) {
            Some(_) if *d == Decision::Cancelled => Ok(false),
            Some(c) if &c.decision == d => Ok(false),
            Some(c) if c.expired => Err(expired_message(id, None)),
            Some(c) => Err(format!(
                "request {id:?} was already decided ({}); a different answer cannot be sent",
                c.decision.word()
            )),
            None => Err(format!("no request {id:?} is open in this session")),
        }
    }
}

fn expired_message(id: &str, at: Option<&str>) -> String {
    match at {
        Some(at) => format!("interrupt {id:?} expired at {at} and was denied; it can only be cancelled now"),
        None => format!("interrupt {id:?} expired and was denied; it can only be cancelled now"),
    }
}

/// Reads a `resolved` payload against what the request asked.
pub fn decision_for(r: &Request, payload: &Value) -> Result<Decision, String> {
    let Value::Object(p) = payload else {
        return Err("payload must be an object (see the interrupt's responseSchema)".into());
    };
    if r.kind == "question" {
        let Some(Value::Object(given)) = p.get("answers") else {
            return Err("payload.answers must be an object: question text -> chosen label".into());
        };
        let mut answers = Map::new();
        for q in r.questions.iter().flatten() {
            let v = match given.get(&q.question) {
                Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
                Some(Value::Array(a))
                    if !a.is_empty() && a.iter().all(|x| x.as_str().is_some_and(|s| !s.is_empty())) =>
                {
                    a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
                }
                Some(_) => {
                    return Err(format!("payload.answers[{:?}] must be a label or a list of labels", q.question))
                }
                None => return Err(format!("payload.answers has no answer to {:?}", q.question)),
            };
            answers.insert(q.question.clone(), Value::String(v));
        }
        if answers.is_empty() {
            return Err("the question has nothing to answer".into());
        }
        return Ok(Decision::Answer { answers });
    }
    let approved = match p.get("approved") {
        Some(Value::Bool(b)) => *b,
        _ => return Err("payload.approved must be true or false".into()),
    };
    if !approved {
        let message = match p.get("message").or_else(|| p.get("reason")) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => "The user denied this.".to_string(),
        };
        return Ok(Decision::Deny { message });
    }
    let updated_input = match p.get("editedArgs") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(_) => return Err("payload.editedArgs must be an object (the whole input, not a patch)".into()),
    };
    let session = match p.get("scope") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "once" => false,
        Some(Value::String(s)) if s == "session" => true,
        Some(_) => return Err("payload.scope must be \"once\" or \"session\"".into()),
    };
    Ok(Decision::Allow { session, updated_input })
}

/// The AG-UI `Interrupt` for a request.
pub fn interrupt_for(r: &Request, tool_call_id: Option<String>) -> Value {
    let mut i = Map::new();
    i.insert("id".into(), r.id.clone().into());
    let tool = r.tool.clone().unwrap_or_else(|| "a tool".into());
    let (reason, message, schema) = if r.kind == "question" {
        let mut props = Map::new();
        let mut required = Vec::new();
        for q in r.questions.iter().flatten() {
            let labels: Vec<Value> = q.options.iter().map(|o| Value::String(o.label.clone())).collect();
            let one = json!({"type": "string", "enum": labels});
            let s = if q.multi_select { json!({"type": "array", "items": one, "minItems": 1}) } else { one };
            let mut s = s;
            if let Some(h) = &q.header {
                s["title"] = h.clone().into();
            }
            props.insert(q.question.clone(), s);
            required.push(Value::String(q.question.clone()));
        }
        let message = r.message.clone().unwrap_or_else(|| {
            r.questions.iter().flatten().map(|q| q.question.as_str()).collect::<Vec<_>>().join("\n")
        });
        let schema = json!({
            "type": "object",
            "properties": {"answers": {"type": "object", "properties": props, "required": required}},
            "required": ["answers"],
        });
        ("input_required", message, schema)
    } else {
        let what = if r.kind == "plan_approval" { "Approve the plan and start" } else { "Allow" };
        let message = r.message.clone().unwrap_or_else(|| format!("{what} {tool}?"));
        let schema = json!({
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "editedArgs": {"type": "object", "description": "Full replacement of the tool input. Not merged."},
                "scope": {"type": "string", "enum": ["once", "session"], "description": "session: allow this tool for the rest of the session"},
                "message": {"type": "string", "description": "Why, when denying (told to the agent)."},
            },
            "required": ["approved"],
        });
        ("tool_call", message, schema)
    };
    i.insert("reason".into(), reason.into());
    i.insert("message".into(), message.into());
    if let Some(t) = tool_call_id {
        i.insert("toolCallId".into(), t.into());
    }
    i.insert("responseSchema".into(), schema);
    if let Some(e) = &r.expires_at {
        i.insert("expiresAt".into(), e.clone().into());
    }
    // What a UI shows on the card; metadata is open by key and never null.
    let mut meta = Map::new();
    meta.insert("kind".into(), r.kind.clone().into());
    if let Some(t) = &r.tool {
        meta.insert("tool".into(), t.clone().into());
    }
    if let Some(v) = r.input.as_ref().filter(|v| !v.is_null()) {
        meta.insert("input".into(), strip_nulls(v));
    }
    if let Some(s) = r.suggestions.as_ref().filter(|s| !s.is_empty()) {
        meta.insert("suggestions".into(), strip_nulls(&Value::Array(s.clone())));
    }
    if let Some(qs) = &r.questions {
        let qs: Vec<Value> = qs
            .iter()
            .map(|q| {
                let mut o = json!({"question": q.question, "multiSelect": q.multi_select,
                    "options": q.options.iter().map(|o| {
                        let mut x = json!({"label": o.label});
                        if let Some(d) = &o.description { x["description"] = d.clone().into(); }
                        x
                    }).collect::<Vec<_>>()});
                if let Some(h) = &q.header {
                    o["header"] = h.clone().into();
                }
                o
            })
            .collect();
        meta.insert("questions".into(), qs.into());
    }
    i.insert("metadata".into(), json!({ "runwire": meta }));
    Value::Object(i)
}

/// The client rejects `null` anywhere in an event: drop null members.
pub fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            Value::Object(o.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), strip_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().filter(|v| !v.is_null()).map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_req(id: &str, expires: Option<&str>) -> Request {
        Request {
            id: id.into(),
            kind: "tool_approval".into(),
            tool_call_id: Some("toolu_1".into()),
            tool: Some("Bash".into()),
            input: Some(json!({"command": "ls", "x": null})),
            expires_at: expires.map(str::to_string),
            ..Request::default()
        }
    }

    fn entry(id: &str, status: &str, payload: Option<Value>) -> ResumeEntry {
        ResumeEntry { interrupt_id: id.into(), status: status.into(), payload }
    }

    #[test]
    fn a_tool_request_becomes_a_tool_call_interrupt() {
        let mut t = Interrupts::default();
        let o = t.raise(tool_req("r1", Some("2030-01-01T00:00:00Z")), Some("run1:t:toolu_1".into())).clone();
        assert_eq!(o.interrupt["reason"], "tool_call");
        assert_eq!(o.interrupt["toolCallId"], "run1:t:toolu_1");
        assert_eq!(o.interrupt["expiresAt"], "2030-01-01T00:00:00Z");
        assert_eq!(o.interrupt["responseSchema"]["required"], json!(["approved"]));
        assert_eq!(o.interrupt["metadata"]["runwire"]["input"], json!({"command": "ls"}));
        assert!(o.expires_ms.is_some());
    }

    #[test]
    fn a_question_gets_a_schema_from_its_choices() {
        let r = Request {
            id: "q".into(),
            kind: "question".into(),
            questions: Some(vec![Question {
                question: "Which?".into(),
                header: Some("Pick".into()),
                options: vec![
                    QuestionOption { label: "A".into(), description: None },
                    QuestionOption { label: "B".into(), description: None },
                ],
                multi_select: true,
            }]),
            ..Request::default()
        };
        let i = interrupt_for(&r, None);
        assert_eq!(i["reason"], "input_required");
        assert_eq!(
            i["responseSchema"]["properties"]["answers"]["properties"]["Which?"]["items"]["enum"],
            json!(["A", "B"])
        );
        let d = decision_for(&r, &json!({"answers": {"Which?": ["A", "B"]}})).unwrap();
        assert_eq!(d, Decision::Answer { answers: json!({"Which?": "A, B"}).as_object().unwrap().clone() });
        assert!(decision_for(&r, &json!({"answers": {}})).is_err());
    }

    #[test]
    fn payloads_map_to_decisions() {
        let r = tool_req("r", None);
        assert_eq!(
            decision_for(&r, &json!({"approved": true})).unwrap(),
            Decision::Allow { session: false, updated_input: None }
        );
        assert_eq!(
            decision_for(&r, &json!({"approved": true, "scope": "session", "editedArgs": {"command": "pwd"}})).unwrap(),
            Decision::Allow { session: true, updated_input: Some(json!({"command": "pwd"})) }
        );
        assert_eq!(
            decision_for(&r, &json!({"approved": false, "message": "no"})).unwrap(),
            Decision::Deny { message: "no".into() }
        );
        for bad in [
            json!(null),
            json!({"approved": "yes"}),
            json!({"approved": true, "editedArgs": [1]}),
            json!({"approved": true, "scope": "ever"}),
        ] {
            assert!(decision_for(&r, &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resume_rules() {
        let mut t = Interrupts::default();
        t.raise(tool_req("a", None), None);
        let now = 0;
        // Nothing addressed: still open, nothing sent.
        assert_eq!(t.plan(&[], now), Plan::StillOpen { warnings: vec![] });
        // Unknown ids are skipped with a warning.
        let p = t.plan(
            &[
                entry("zzz", "resolved", Some(json!({"approved": true}))),
                entry("a", "resolved", Some(json!({"approved": true}))),
            ],
            now,
        );
        let Plan::Apply { answers, warnings } = p else { panic!("{p:?}") };
        assert_eq!(answers.len(), 1);
        assert_eq!(warnings.len(), 1);
        // Bad payload, bad status, duplicates: refused.
        assert!(matches!(t.plan(&[entry("a", "resolved", Some(json!({})))], now), Plan::Refuse(_)));
        assert!(matches!(t.plan(&[entry("a", "done", None)], now), Plan::Refuse(_)));
        assert!(matches!(
            t.plan(&[entry("a", "cancelled", None), entry("a", "cancelled", None)], now),
            Plan::Refuse(_)
        ));
        // Decide it; an identical replay is accepted and sends nothing.
        let e = entry("a", "resolved", Some(json!({"approved": true})));
        t.close("a", Decision::Allow { session: false, updated_input: None }, Some(Interrupts::entry_of(&e)));
        assert_eq!(t.plan(std::slice::from_ref(&e), now), Plan::Apply { answers: vec![], warnings: vec![] });
        // A different answer is refused; cancelled is accepted.
        assert!(matches!(t.plan(&[entry("a", "resolved", Some(json!({"approved": false})))], now), Plan::Refuse(_)));
        assert_eq!(t.plan(&[entry("a", "cancelled", None)], now), Plan::Apply { answers: vec![], warnings: vec![] });
    }

    #[test]
    fn expiry_fails_closed_and_cancel_still_works() {
        let mut t = Interrupts::default();
        t.raise(tool_req("a", Some("2020-01-01T00:00:00Z")), None);
        let now = parse_time("2021-01-01T00:00:00Z").unwrap();
        assert_eq!(t.expired(now), vec!["a".to_string()]);
        assert!(
            matches!(t.plan(&[entry("a", "resolved", Some(json!({"approved": true})))], now), Plan::Refuse(m) if m.contains("expired"))
        );
        t.close("a", Decision::Expired, None);
        assert!(
            matches!(t.plan(&[entry("a", "resolved", Some(json!({"approved": true})))], now), Plan::Refuse(m) if m.contains("expired"))
        );
        assert_eq!(t.plan(&[entry("a", "cancelled", None)], now), Plan::Apply { answers: vec![], warnings: vec![] });
        assert!(t.check_answer("a", &Decision::Allow { session: false, updated_input: None }, now).is_err());
        assert_eq!(t.check_answer("a", &Decision::Cancelled, now), Ok(false));
    }

    #[test]
    fn partial_resumes_send_nothing() {
        let mut t = Interrupts::default();
        t.raise(tool_req("a", None), None);
        t.raise(tool_req("b", None), None);
        let p = t.plan(&[entry("a", "resolved", Some(json!({"approved": true})))], 0);
        assert!(matches!(p, Plan::StillOpen { warnings } if warnings.len() == 1));
    }
}
