//! The AG-UI side of a thread's requests: each request of the agent as an
//! `Interrupt`, and what a run's `resume` entries mean as session answers.
//!
//! A state object with no IO. Which requests are open, expiry and whether
//! an answer repeats or contradicts an earlier one are the session's
//! ([`crate::session::Session`]); this adds the AG-UI rules runwire follows
//! (`docs/spec/1.0/basic/patterns/interrupt-resume` wins over the concepts
//! page where they differ):
//! - a request of the agent becomes one `Interrupt` (tool approval:
//!   `reason: "tool_call"` with the call's `toolCallId`; question:
//!   `reason: "input_required"` with a schema built from its choices);
//! - the interrupt's id is runwire's, never the agent's request id (codex
//!   and ACP number their requests 0, 1, 2… in each process): the one the
//!   session minted for the request (`interrupt_id` of its
//!   `runwire.request` line, `rw-` then 128 random bits, [`crate::control`]),
//!   so the task log, the journal and every door name it alike. It is bound
//!   to the thread (only its record knows it), the agent process (a
//!   thread's record knows which process raised it) and the request;
//! - the response schema offers what this agent can do with this request
//!   ([`Offer`]): `editedArgs` only where the agent runs edited input
//!   (claude), a deny `message` only where it reaches the model (claude),
//!   `scope` narrowed to the agent's own options (`session`: codex
//!   `acceptForSession`, claude's kept suggestions; `always`, saved by the
//!   agent: codex amendments, ACP `allow_always`, claude rules saved to
//!   its settings), a plan's `mode` without `bypassPermissions` unless the
//!   server has `--grant-all`; `metadata.runwire.permissionUpdates` lists
//!   each of claude's suggested updates with its effect, and which were
//!   dropped and why;
//! - a run must address every open interrupt; one that does not answers
//!   nothing and ends with the still-open interrupts again;
//! - a resume is all or nothing: every entry is checked (ids, payload
//!   against the schema, the session's own checks) before any byte goes to
//!   the agent ([`Plan::Apply`] is sent as one unit);
//! - `cancelled` is always accepted (an expired, auto-denied or unknown
//!   interrupt included), so a thread never gets stuck;
//! - an entry naming an id runwire never raised is skipped with a warning;
//!   one shaped like runwire's but not this thread's (another thread's, or
//!   one this server no longer remembers) is refused;
//! - an interrupt of an earlier agent process of the thread (it was killed,
//!   evicted or crashed, and its successor may reuse the agent's request
//!   ids): an identical replay of the answer given is acknowledged with
//!   nothing sent; any other answer is refused;
//! - an identical replay of an answer is not sent again; only a
//!   *different* answer to a decided interrupt, or `resolved` past
//!   `expiresAt`, is refused (`RUN_ERROR`, `409` on the task routes).

use crate::pipeline::events::{InputAnswer, InputKind, InputRequest, Scope};
use crate::session::input::{AnswerInput, Decision};
use crate::session::launch::AgentKind;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};

/// Requests remembered per thread (to read a late answer to a closed one,
/// and to know an earlier process's ids): a bounded record.
pub const MAX_RAISED: usize = 1024;

/// Every interrupt id runwire raises starts so.
pub const ID_PREFIX: &str = crate::control::INTERRUPT_PREFIX;

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
    /// Send these answers (with the session's request ids) to the session
    /// as one unit ([`crate::session::Input::Answers`]): answers to
    /// requests already closed first (the session takes an identical one
    /// as a replay and refuses a different one, and then sends none);
    /// `warnings` become `runwire.resume_skipped` CUSTOM events.
    Apply { answers: Vec<AnswerInput>, warnings: Vec<String> },
    /// Some open interrupts were not addressed: send nothing, end the run
    /// with the open interrupts again.
    StillOpen { warnings: Vec<String> },
    /// Refused: `RUN_ERROR` with this message; nothing is sent.
    Refuse(String),
}

/// What the agent behind a thread can be told: the interrupts offer this
/// and no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    pub agent: AgentKind,
    /// The server's `--grant-all`.
    pub grant_all: bool,
}

impl Default for Offer {
    fn default() -> Offer {
        Offer { agent: AgentKind::Claude, grant_all: false }
    }
}

/// One interrupt a thread raised.
#[derive(Debug, Clone)]
struct Raise {
    /// The session's request (its id is the session's).
    req: InputRequest,
    interrupt: Value,
    /// The agent process that raised it (the thread's count of processes).
    process: u64,
    /// How the session closed it, once the thread saw it.
    answer: Option<InputAnswer>,
}

/// The requests a thread's session raised, as AG-UI interrupts.
#[derive(Debug)]
pub struct Raised {
    offer: Offer,
    /// This thread's random tag: part of every id it raises.
    tag: String,
    process: u64,
    by_id: HashMap<String, Raise>,
    /// The current process's request ids -> interrupt ids.
    current: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Default for Raised {
    fn default() -> Raised {
        Raised::new(Offer::default())
    }
}

/// `n` random bytes as hex (the one source of runwire's ids: [`crate::control::random_hex`]).
pub use crate::control::random_hex;

impl Raised {
    pub fn new(offer: Offer) -> Raised {
        Raised {
            offer,
            tag: random_hex(8),
            process: 0,
            by_id: HashMap::new(),
            current: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// A new agent process runs the thread (the last one was killed,
    /// evicted or crashed): what was raised before belongs to an earlier
    /// process, whose request ids the new one may reuse.
    pub fn new_process(&mut self) {
        self.process += 1;
        self.current.clear();
    }

    /// Records a request of the current process; `tool_call_id` is the
    /// AG-UI toolCallId of the call it concerns, when that call was
    /// streamed on the thread. Returns the interrupt's id.
    pub fn raise(&mut self, r: &InputRequest, tool_call_id: Option<String>) -> String {
        // The session's id for the request (the same on the task log, the
        // journal and every door); one without (a request built here) gets
        // one of this thread's own.
        let id = r.interrupt_id.clone().unwrap_or_else(|| format!("{ID_PREFIX}{}-{}", self.tag, random_hex(16)));
        let interrupt = interrupt_for(r, &id, tool_call_id, self.offer);
        self.by_id.insert(id.clone(), Raise { req: r.clone(), interrupt, process: self.process, answer: None });
        // An id the agent reuses in the same process replaces the stale request.
        self.current.insert(r.id.clone(), id.clone());
        self.order.push_back(id.clone());
        while self.order.len() > MAX_RAISED {
            if let Some(old) = self.order.pop_front() {
                if let Some(gone) = self.by_id.remove(&old) {
                    if self.current.get(&gone.req.id) == Some(&old) {
                        self.current.remove(&gone.req.id);
                    }
                }
            }
        }
        id
    }

    /// The session closed a request of the current process (its
    /// `runwire.answer` line): remembered, to tell a replay from a
    /// different answer once that process is gone.
    pub fn closed(&mut self, a: &InputAnswer) {
        if let Some(id) = self.current.get(&a.id) {
            if let Some(r) = self.by_id.get_mut(id) {
                r.answer = Some(a.clone());
            }
        }
    }

    /// The current process's request with session id `request_id`, and its interrupt.
    pub fn get(&self, request_id: &str) -> Option<(&InputRequest, &Value)> {
        let r = self.by_id.get(self.current.get(request_id)?)?;
        Some((&r.req, &r.interrupt))
    }

    /// The session request id an interrupt id of the current process stands for.
    pub fn request_of(&self, interrupt_id: &str) -> Option<&str> {
        let r = self.by_id.get(interrupt_id)?;
        (self.current.get(&r.req.id).map(String::as_str) == Some(interrupt_id)).then_some(r.req.id.as_str())
    }

    /// The AG-UI interrupts of `open` (the session's request ids, oldest first).
    pub fn interrupts(&self, open: &[String]) -> Vec<Value> {
        open.iter().filter_map(|id| self.get(id).map(|(_, i)| i.clone())).collect()
    }

    /// Reads a run's `resume` entries against the session's open requests
    /// (see the module doc).
    pub fn plan(&self, entries: &[ResumeEntry], open: &[String], by: &str) -> Plan {
        let mut late = Vec::new();
        let mut now = Vec::new();
        let mut warnings = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for e in entries {
            let id = e.interrupt_id.as_str();
            if seen.contains(&id) {
                return Plan::Refuse(format!("resume: interrupt {id:?} is answered twice in one input"));
            }
            seen.push(id);
            if !matches!(e.status.as_str(), "resolved" | "cancelled") {
                return Plan::Refuse(format!(
                    "resume: interrupt {id:?}: status must be \"resolved\" or \"cancelled\", not {:?}",
                    e.status
                ));
            }
            let Some(raise) = self.by_id.get(id) else {
                if e.status == "cancelled" {
                    continue;
                }
                if id.starts_with(ID_PREFIX) {
                    return Plan::Refuse(format!(
                        "resume: interrupt {id:?} was not raised on this thread (another thread's, or one this server no longer remembers): nothing was sent"
                    ));
                }
                warnings.push(format!("resume entry for interrupt {id:?} skipped: runwire raised no such interrupt"));
                continue;
            };
            let req = &raise.req;
            let live = raise.process == self.process && self.current.get(&req.id).map(String::as_str) == Some(id);
            if !live {
                // An earlier agent process's (or a request the agent replaced).
                if e.status == "cancelled" {
                    continue;
                }
                let a = match answer_of(req, e, by) {
                    Ok(a) => a,
                    Err(m) => return Plan::Refuse(format!("resume: interrupt {id:?}: {m}")),
                };
                match &raise.answer {
                    Some(prev) if crate::session::same_answer(prev, &a) => {
                        warnings.push(format!(
                            "interrupt {id:?} was answered the same way before its agent process ended: acknowledged, nothing sent"
                        ));
                        continue;
                    }
                    Some(prev) => {
                        return Plan::Refuse(format!(
                            "resume: interrupt {id:?} belongs to an earlier agent process and was decided ({}); a different answer is refused and nothing was sent",
                            prev.decision.as_str()
                        ))
                    }
                    None => {
                        return Plan::Refuse(format!(
                            "resume: interrupt {id:?} belongs to an earlier agent process, which ended before it was answered: nothing was sent"
                        ))
                    }
                }
            }
            let is_open = open.iter().any(|o| o == &req.id);
            if !is_open && e.status == "cancelled" {
                // Accepted whatever closed it (an answer, expiry, the agent):
                // abandoning it changes nothing, and the thread moves on.
                continue;
            }
            match answer_of(req, e, by) {
                Ok(a) if is_open => now.push(a),
                Ok(a) => late.push(a),
                Err(m) => return Plan::Refuse(format!("resume: interrupt {id:?}: {m}")),
            }
        }
        let unanswered: Vec<&str> = open
            .iter()
            .filter(|rid| !now.iter().any(|a: &AnswerInput| &a.id == *rid))
            .map(|rid| self.current.get(rid).map_or(rid.as_str(), String::as_str))
            .collect();
        if !unanswered.is_empty() {
            if !now.is_empty() || !late.is_empty() {
                warnings.push(format!(
                    "resume left interrupt(s) {} unanswered: nothing was sent; answer every open interrupt in one input",
                    unanswered.join(", ")
                ));
            }
            return Plan::StillOpen { warnings };
        }
        late.extend(now);
        Plan::Apply { answers: late, warnings }
    }
}

fn scope_name(s: Scope) -> &'static str {
    match s {
        Scope::Once => "once",
        Scope::Session => "session",
        Scope::Always => "always",
    }
}

/// The session answer a resume entry means for request `r`: its payload's
/// shape only. Whether the agent can take it (edited input, a scope, a
/// plan's mode: what the interrupt offered) is the session's one rule
/// (`Session`'s answer check, `Agent::check_answer`), applied to every
/// door's answer alike; an AG-UI resume is checked there as one unit
/// before anything is sent.
pub fn answer_of(r: &InputRequest, e: &ResumeEntry, by: &str) -> Result<AnswerInput, String> {
    let mut a = AnswerInput {
        id: r.id.clone(),
        decision: Decision::Cancelled,
        scope: None,
        updated_input: None,
        answers: None,
        message: None,
        mode: None,
        by: Some(by.to_string()),
        door: None,
    };
    if e.status == "cancelled" {
        a.message = Some("The user abandoned this request.".into());
        return Ok(a);
    }
    let Some(Value::Object(p)) = &e.payload else {
        return Err("payload must be an object (see the interrupt's responseSchema)".into());
    };
    if r.kind == InputKind::Question {
        let Some(Value::Object(given)) = p.get("answers") else {
            return Err("payload.answers must be an object: question text -> chosen label".into());
        };
        for q in r.questions.iter().flatten() {
            match given.get(&q.question) {
                // The session's own check of a chosen label (the supervisor makes it too).
                Some(v) => crate::session::answer_label(q, v).map(drop).map_err(|e| format!("payload.answers: {e}"))?,
                None => return Err(format!("payload.answers has no answer to {:?}", q.question)),
            }
        }
        if let Some(extra) = given.keys().find(|k| !r.questions.iter().flatten().any(|q| &q.question == *k)) {
            return Err(format!("payload.answers: no question {extra:?} was asked"));
        }
        a.decision = Decision::Answer;
        a.answers = Some(given.clone());
        return Ok(a);
    }
    let approved = match p.get("approved") {
        Some(Value::Bool(b)) => *b,
        _ => return Err("payload.approved must be true or false".into()),
    };
    if !approved {
        a.decision = Decision::Deny;
        a.message = Some(match p.get("message").or_else(|| p.get("reason")) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => "The user denied this.".to_string(),
        });
        return Ok(a);
    }
    a.decision = Decision::Allow;
    if r.kind == InputKind::PlanApproval {
        // The permission mode to carry the plan out in (the session checks it).
        a.mode = match p.get("mode") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(_) => return Err("payload.mode must be a permission mode (a string)".into()),
        };
    }
    a.updated_input = match p.get("editedArgs") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(o.clone()),
        Some(_) => return Err("payload.editedArgs must be an object (the whole input, not a patch)".into()),
    };
    a.scope = match p.get("scope") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "once" => Some(Scope::Once),
        Some(Value::String(s)) if s == "session" => Some(Scope::Session),
        Some(Value::String(s)) if s == "always" => Some(Scope::Always),
        Some(_) => return Err("payload.scope must be \"once\", \"session\" or \"always\"".into()),
    };
    Ok(a)
}

/// The schema of one question's answer: one of its labels (a list of them
/// for a multi-select question); where the question takes free text, the
/// person's own words too (`anyOf`: a label, or any text that is not
/// blank); a question with no options takes any text.
fn answer_schema(q: &crate::pipeline::events::Question) -> Value {
    let labels: Vec<Value> = q.options.iter().map(|o| Value::String(o.label.clone())).collect();
    let one = if q.options.is_empty() {
        json!({"type": "string"})
    } else if q.free_text {
        json!({"type": "string", "anyOf": [
            {"enum": labels, "description": "one of the choices"},
            {"minLength": 1, "pattern": "\\S", "description": "the person's own answer (Other)"},
        ]})
    } else {
        json!({"type": "string", "enum": labels})
    };
    if !q.multi_select {
        return one;
    }
    let mut many = json!({"type": "array", "items": one, "minItems": 1});
    if q.free_text && !q.options.is_empty() {
        many["description"] = "labels of the choices, and at most one answer in the person's own words".into();
    }
    many
}

/// What a tool or plan approval of `r` offers with `offer`'s agent: the
/// scopes (with what each grants, in words), whether edited input and a
/// deny message reach the agent, and (claude) its suggested updates judged.
struct Offered {
    scopes: Vec<(Scope, String)>,
    edits: bool,
    deny_message: bool,
    updates: Option<Vec<crate::session::claude::Update>>,
}

fn offered(r: &InputRequest, offer: Offer) -> Offered {
    use crate::session::{claude, codex};
    let suggestions = r.suggestions.as_deref().unwrap_or_default();
    match offer.agent {
        AgentKind::Claude => {
            let updates =
                claude::permission_updates(suggestions, offer.grant_all, &crate::session::reach::Places::here());
            let scopes = claude::scopes(&updates)
                .into_iter()
                .map(|s| {
                    let what = match s {
                        Scope::Once => "this call only".to_string(),
                        Scope::Session => {
                            "for this session: the kept permissionUpdates, for this session only (nothing saved)".to_string()
                        }
                        Scope::Always => "always, saved by the agent: the kept permissionUpdates with claude's own destinations (its settings files)".to_string(),
                    };
                    (s, what)
                })
                .collect();
            Offered { scopes, edits: true, deny_message: true, updates: Some(updates) }
        }
        // A permission profile is granted for the turn (codex's default) or the session.
        AgentKind::Codex if r.tool.as_deref() == Some(codex::PERMISSIONS_TOOL) => Offered {
            scopes: vec![
                (Scope::Once, "grant the permissions asked for this turn only".to_string()),
                (Scope::Session, "grant them for the rest of this session".to_string()),
            ],
            edits: false,
            deny_message: false,
            updates: None,
        },
        AgentKind::Codex => {
            // `availableDecisions` is advisory: accept is always taken.
            let mut scopes = vec![(Scope::Once, "accept: this call only".to_string())];
            for d in suggestions {
                if let Some((s, what)) = codex::decision_effect(d) {
                    if !scopes.iter().any(|(x, _)| *x == s) {
                        scopes.push((s, what));
                    }
                }
            }
            Offered { scopes, edits: false, deny_message: false, updates: None }
        }
        AgentKind::Cursor | AgentKind::Acp => {
            let mut scopes = vec![(Scope::Once, "allow_once: this call only".to_string())];
            if let Some(o) = suggestions.iter().find(|o| o.get("kind").and_then(Value::as_str) == Some("allow_always"))
            {
                let name = o.get("name").and_then(Value::as_str).unwrap_or("Allow always");
                scopes.push((
                    Scope::Always,
                    format!("always, saved by the agent (its {name:?} option; what it covers is the agent's to say)"),
                ));
            }
            Offered { scopes, edits: false, deny_message: false, updates: None }
        }
    }
}

/// The AG-UI `Interrupt` for a request, with runwire's id `id`, offering
/// what `offer`'s agent can do with it.
pub fn interrupt_for(r: &InputRequest, id: &str, tool_call_id: Option<String>, offer: Offer) -> Value {
    let mut i = Map::new();
    i.insert("id".into(), id.into());
    let tool = r.tool.clone().unwrap_or_else(|| "a tool".into());
    let mut meta = Map::new();
    let (reason, message, schema) = if r.kind == InputKind::Question {
        let mut props = Map::new();
        let mut required = Vec::new();
        for q in r.questions.iter().flatten() {
            let mut s = answer_schema(q);
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
        let what = if r.kind == InputKind::PlanApproval { "Approve the plan and start" } else { "Allow" };
        let message = r.message.clone().unwrap_or_else(|| format!("{what} {tool}?"));
        let o = offered(r, offer);
        let mut props = Map::new();
        props.insert("approved".into(), json!({"type": "boolean"}));
        if o.edits {
            props.insert(
                "editedArgs".into(),
                json!({"type": "object", "description": "Full replacement of the tool input. Not merged."}),
            );
        }
        if o.scopes.len() > 1 {
            let names: Vec<&str> = o.scopes.iter().map(|(s, _)| scope_name(*s)).collect();
            let desc: Vec<String> = o.scopes.iter().map(|(s, w)| format!("{}: {w}", scope_name(*s))).collect();
            props.insert("scope".into(), json!({"type": "string", "enum": names, "description": desc.join("; ")}));
        }
        if o.deny_message {
            props.insert(
                "message".into(),
                json!({"type": "string", "description": "Why, when denying (told to the agent)."}),
            );
        }
        if r.kind == InputKind::PlanApproval {
            let modes: Vec<&str> = crate::session::claude::MODES
                .iter()
                .copied()
                .filter(|m| offer.grant_all || *m != crate::session::claude::GRANT_ALL)
                .collect();
            props.insert("mode".into(), json!({"type": "string", "enum": modes,
                "description": "The permission mode to carry the plan out in (default: the server's --plan-exit-mode)."}));
        }
        let scopes: Map<String, Value> =
            o.scopes.iter().map(|(s, w)| (scope_name(*s).to_string(), w.clone().into())).collect();
        meta.insert("scopes".into(), Value::Object(scopes));
        if let Some(updates) = &o.updates {
            let list: Vec<Value> = updates
                .iter()
                .map(|u| {
                    let mut x = json!({"update": strip_nulls(&u.raw), "effect": u.effect, "applied": u.dropped.is_none(),
                        "savedByAgent": u.persistent});
                    if let Some(d) = &u.dropped {
                        x["dropped"] = d.clone().into();
                    }
                    // Where it reaches once resolved, and a command rule that runs anything: shown on the card.
                    if !u.reach.is_empty() {
                        x["reaches"] = json!(u.reach);
                    }
                    if let Some(r) = &u.runs_anything {
                        x["runsAnything"] = r.clone().into();
                    }
                    x
                })
                .collect();
            let dropped: Vec<&str> = updates.iter().filter_map(|u| u.dropped.as_deref()).collect();
            if !list.is_empty() {
                meta.insert("permissionUpdates".into(), list.into());
            }
            if !dropped.is_empty() {
                meta.insert(
                    "droppedUpdates".into(),
                    format!(
                        "{} of the agent's suggested permission update(s) will not be applied: {}",
                        dropped.len(),
                        dropped.join("; ")
                    )
                    .into(),
                );
            }
            let kept: Vec<Value> =
                updates.iter().filter(|u| u.dropped.is_none()).map(|u| strip_nulls(&u.raw)).collect();
            if !kept.is_empty() {
                meta.insert("suggestions".into(), kept.into());
            }
        } else if let Some(s) = r.suggestions.as_ref().filter(|s| !s.is_empty()) {
            meta.insert("suggestions".into(), strip_nulls(&Value::Array(s.clone())));
        }
        let schema = json!({"type": "object", "properties": props, "required": ["approved"]});
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
    meta.insert("kind".into(), r.kind.as_str().into());
    meta.insert("agent".into(), offer.agent.name().into());
    if let Some(t) = &r.tool {
        meta.insert("tool".into(), t.clone().into());
    }
    if let Some(v) = r.input.as_ref().filter(|v| !v.is_null()) {
        meta.insert("input".into(), strip_nulls(v));
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
                if q.free_text {
                    o["freeText"] = true.into();
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
    use crate::pipeline::events::{Question, QuestionOption};

    fn tool_req(id: &str) -> InputRequest {
        InputRequest {
            interrupt_id: None,
            id: id.into(),
            kind: InputKind::ToolApproval,
            tool_call_id: Some("toolu_1".into()),
            tool: Some("Bash".into()),
            input: Some(json!({"command": "ls", "x": null})),
            suggestions: None,
            questions: None,
            message: None,
            expires_at: Some("2030-01-01T00:00:00Z".into()),
            blocking: None,
        }
    }

    fn question() -> InputRequest {
        InputRequest {
            interrupt_id: None,
            id: "q".into(),
            kind: InputKind::Question,
            tool_call_id: None,
            tool: Some("AskUserQuestion".into()),
            input: None,
            suggestions: None,
            questions: Some(vec![Question {
                question: "Which?".into(),
                header: Some("Pick".into()),
                options: vec![
                    QuestionOption { label: "A".into(), description: None },
                    QuestionOption { label: "B".into(), description: None },
                ],
                multi_select: true,
                free_text: false,
            }]),
            message: None,
            expires_at: None,
            blocking: None,
        }
    }

    /// A resume entry's answer as the session takes it: its shape here,
    /// then the session's one rule of what the agent can take (the same
    /// rule every door's answer meets), so each test below checks that the
    /// interrupt offers exactly what that rule lets through.
    fn taken(offer: Offer, r: &InputRequest, e: &ResumeEntry) -> Result<AnswerInput, String> {
        use crate::session::claude;
        let a = answer_of(r, e, "t")?;
        crate::session::answer_of(r, &a, 0).map_err(|e| format!("{e:?}"))?;
        match offer.agent {
            AgentKind::Claude => {
                if let Some(m) = &a.mode {
                    claude::check_mode(m, offer.grant_all)?;
                }
                claude::check_scope(r, &a, offer.grant_all)?;
            }
            k => k.check_answer(r, &a)?,
        }
        Ok(a)
    }

    fn entry(id: &str, status: &str, payload: Option<Value>) -> ResumeEntry {
        ResumeEntry { interrupt_id: id.into(), status: status.into(), payload }
    }

    #[test]
    fn a_tool_request_becomes_a_tool_call_interrupt() {
        let i = interrupt_for(&tool_req("r1"), "rw-x", Some("run1:t:toolu_1".into()), Offer::default());
        assert_eq!(i["id"], "rw-x");
        assert_eq!(i["reason"], "tool_call");
        assert_eq!(i["toolCallId"], "run1:t:toolu_1");
        assert_eq!(i["expiresAt"], "2030-01-01T00:00:00Z");
        assert_eq!(i["responseSchema"]["required"], json!(["approved"]));
        assert_eq!(i["metadata"]["runwire"]["input"], json!({"command": "ls"}));
        assert_eq!(i["metadata"]["runwire"]["kind"], "tool_approval");
    }

    #[test]
    fn a_question_gets_a_schema_from_its_choices() {
        let r = question();
        let i = interrupt_for(&r, "q", None, Offer::default());
        assert_eq!(i["reason"], "input_required");
        assert_eq!(
            i["responseSchema"]["properties"]["answers"]["properties"]["Which?"]["items"]["enum"],
            json!(["A", "B"])
        );
        let a = answer_of(&r, &entry("q", "resolved", Some(json!({"answers": {"Which?": ["A", "B"]}}))), "t").unwrap();
        assert_eq!(a.decision, Decision::Answer);
        assert!(answer_of(&r, &entry("q", "resolved", Some(json!({"answers": {}}))), "t").is_err());
        for bad in [json!({"Which?": ["C"]}), json!({"Which?": "A", "Other?": "x"}), json!({"Which?": []})] {
            assert!(answer_of(&r, &entry("q", "resolved", Some(json!({ "answers": bad }))), "t").is_err());
        }
        // A label that is not a choice is refused in the session's own words (as the supervisor refuses it).
        let e = answer_of(&r, &entry("q", "resolved", Some(json!({"answers": {"Which?": ["A", "C"]}}))), "t");
        let session = crate::session::answer_label(&r.questions.as_ref().unwrap()[0], &json!(["A", "C"]));
        assert_eq!(e.unwrap_err(), format!("payload.answers: {}", session.unwrap_err()));
    }

    /// A question that takes free text: the schema allows a string beyond
    /// the labels, the metadata says so, and a resume with the person's own
    /// words is an answer (blank text, or two texts in a multi-select, not).
    #[test]
    fn a_free_text_question_takes_the_persons_own_words() {
        let mut r = question();
        r.questions.as_mut().unwrap()[0].free_text = true;
        let i = interrupt_for(&r, "q", None, Offer::default());
        let s = &i["responseSchema"]["properties"]["answers"]["properties"]["Which?"];
        assert_eq!(s["items"]["anyOf"][0]["enum"], json!(["A", "B"]), "{s}");
        assert_eq!(s["items"]["anyOf"][1]["minLength"], 1, "{s}");
        assert_eq!(i["metadata"]["runwire"]["questions"][0]["freeText"], true);
        let ok = |r: &InputRequest, a: Value| {
            answer_of(r, &entry("q", "resolved", Some(json!({"answers": {"Which?": a}}))), "t")
        };
        assert_eq!(ok(&r, json!(["A", "my own"])).unwrap().decision, Decision::Answer);
        assert!(ok(&r, json!(["A", " "])).is_err());
        assert!(ok(&r, json!(["mine", "yours"])).is_err());
        // Choices only: the same words are refused.
        assert!(answer_of(&question(), &entry("q", "resolved", Some(json!({"answers": {"Which?": ["my own"]}}))), "t")
            .is_err());
        assert!(interrupt_for(&question(), "q", None, Offer::default())["metadata"]["runwire"]["questions"][0]
            .get("freeText")
            .is_none());
        // Single-select: a string schema beyond the enum.
        r.questions.as_mut().unwrap()[0].multi_select = false;
        let i = interrupt_for(&r, "q", None, Offer::default());
        let s = &i["responseSchema"]["properties"]["answers"]["properties"]["Which?"];
        assert_eq!((s["type"].as_str(), s["anyOf"][0]["enum"].clone()), (Some("string"), json!(["A", "B"])));
        assert!(ok(&r, json!("something else")).is_ok());
    }

    #[test]
    fn payloads_map_to_answers() {
        let r = tool_req("r");
        let ok = |p: Value| answer_of(&r, &entry("r", "resolved", Some(p)), "t");
        let a = ok(json!({"approved": true})).unwrap();
        assert_eq!((a.decision, a.scope, a.updated_input), (Decision::Allow, None, None));
        let a = ok(json!({"approved": true, "scope": "session", "editedArgs": {"command": "pwd"}})).unwrap();
        assert_eq!(a.scope, Some(Scope::Session));
        assert_eq!(a.updated_input.unwrap()["command"], "pwd");
        let a = ok(json!({"approved": false, "message": "no"})).unwrap();
        assert_eq!((a.decision, a.message.as_deref()), (Decision::Deny, Some("no")));
        for bad in [
            json!(null),
            json!({"approved": "yes"}),
            json!({"approved": true, "editedArgs": [1]}),
            json!({"approved": true, "scope": "ever"}),
        ] {
            assert!(ok(bad.clone()).is_err(), "{bad}");
        }
        assert_eq!(answer_of(&r, &entry("r", "cancelled", None), "t").unwrap().decision, Decision::Cancelled);
    }

    #[test]
    fn resume_rules() {
        let mut raised = Raised::default();
        let a = raised.raise(&tool_req("a"), None);
        assert!(a.starts_with(ID_PREFIX) && a.len() > 40, "{a}");
        let open = vec!["a".to_string()];
        let yes = || Some(json!({"approved": true}));
        // Nothing addressed: still open, nothing sent.
        assert_eq!(raised.plan(&[], &open, "t"), Plan::StillOpen { warnings: vec![] });
        // Unknown ids are skipped with a warning (a cancel of one silently).
        let p = raised.plan(
            &[entry("zzz", "resolved", yes()), entry("zz", "cancelled", None), entry(&a, "resolved", yes())],
            &open,
            "t",
        );
        let Plan::Apply { answers, warnings } = p else { panic!("{p:?}") };
        assert_eq!((answers.len(), warnings.len()), (1, 1));
        assert_eq!(answers[0].id, "a", "the session's own request id");
        // Bad payload, bad status, duplicates: refused.
        assert!(matches!(raised.plan(&[entry(&a, "resolved", Some(json!({})))], &open, "t"), Plan::Refuse(_)));
        assert!(matches!(raised.plan(&[entry(&a, "done", None)], &open, "t"), Plan::Refuse(_)));
        assert!(matches!(
            raised.plan(&[entry(&a, "cancelled", None), entry(&a, "cancelled", None)], &open, "t"),
            Plan::Refuse(_)
        ));
        // The agent's own id is not an interrupt id.
        assert!(matches!(raised.plan(&[entry("a", "resolved", yes())], &open, "t"), Plan::StillOpen { .. }));
        // Closed: a cancel is accepted and sends nothing; a resolved goes to
        // the session (which tells a replay from a conflict).
        assert_eq!(
            raised.plan(&[entry(&a, "cancelled", None)], &[], "t"),
            Plan::Apply { answers: vec![], warnings: vec![] }
        );
        let Plan::Apply { answers, .. } = raised.plan(&[entry(&a, "resolved", yes())], &[], "t") else { panic!() };
        assert_eq!(answers.len(), 1);
    }

    /// Ids are unique, bound to the process: after a restart that reuses
    /// the agent's request id, the old interrupt never answers the new
    /// request; an identical replay is acknowledged, a different answer or
    /// one never given refused; another thread's id is refused.
    #[test]
    fn ids_are_bound_to_the_thread_and_the_process() {
        let mut raised = Raised::default();
        let old = raised.raise(&tool_req("0"), None);
        raised.closed(&InputAnswer {
            interrupt_id: None,
            id: "0".into(),
            decision: crate::pipeline::events::Decision::Allow,
            scope: Some(Scope::Once),
            updated_input: None,
            answers: None,
            message: None,
            mode: None,
            by: Some("agui".into()),
            at: "2030-01-01T00:00:00Z".into(),
            door: None,
        });
        let unanswered = raised.raise(&tool_req("1"), None);
        raised.new_process();
        let new = raised.raise(&tool_req("0"), None);
        assert_ne!(old, new);
        let open = vec!["0".to_string()];
        let yes = || Some(json!({"approved": true}));
        let no = || Some(json!({"approved": false}));
        // The identical replay: acknowledged, and it answers nothing (the new request stays open).
        let p = raised.plan(&[entry(&old, "resolved", yes())], &open, "t");
        assert!(matches!(&p, Plan::StillOpen { .. }), "{p:?}");
        let p = raised.plan(&[entry(&old, "resolved", yes()), entry(&new, "resolved", no())], &open, "t");
        let Plan::Apply { answers, warnings } = p else { panic!("{p:?}") };
        assert_eq!((answers.len(), answers[0].decision), (1, Decision::Deny));
        assert!(warnings[0].contains("acknowledged, nothing sent"), "{warnings:?}");
        // A different answer, or one to a request never answered: refused.
        assert!(matches!(raised.plan(&[entry(&old, "resolved", no())], &open, "t"), Plan::Refuse(_)));
        assert!(matches!(raised.plan(&[entry(&unanswered, "resolved", yes())], &open, "t"), Plan::Refuse(_)));
        // Cancelling it is accepted.
        assert!(matches!(raised.plan(&[entry(&old, "cancelled", None)], &open, "t"), Plan::StillOpen { .. }));
        // Another thread's id.
        let mut other = Raised::default();
        let theirs = other.raise(&tool_req("0"), None);
        let p = raised.plan(&[entry(&theirs, "resolved", yes())], &open, "t");
        assert!(matches!(&p, Plan::Refuse(m) if m.contains("not raised on this thread")), "{p:?}");
        assert_eq!(raised.interrupts(&open)[0]["id"], new.as_str());
    }

    /// What codex raised from `line` (a server request).
    fn codex_request(line: &str) -> InputRequest {
        use crate::session::{codex, Agent, Signal};
        let mut c = codex::Codex::new(codex::CodexOptions::default());
        let mut w = Vec::new();
        match c.line(line.as_bytes(), &mut w).pop() {
            Some(Signal::Request(r)) => *r,
            other => panic!("no request from {line}: {other:?}"),
        }
    }

    /// Codex's permission-profile approval offers the turn (once) or the
    /// session, never `always`; an MCP form is a question per field.
    #[test]
    fn codex_permissions_and_mcp_forms_are_offered_as_codex_takes_them() {
        let codex = Offer { agent: AgentKind::Codex, grant_all: false };
        let r = codex_request(
            r#"{"method":"item/permissions/requestApproval","id":5,"params":{"threadId":"th","turnId":"t1","itemId":"p1","cwd":"/w","startedAtMs":1,"permissions":{"network":{"enabled":true}}}}"#,
        );
        let i = interrupt_for(&r, "rw-5", Some("p1".into()), codex);
        assert_eq!(i["reason"], "tool_call");
        assert_eq!(i["responseSchema"]["properties"]["scope"]["enum"], json!(["once", "session"]));
        assert!(i["metadata"]["runwire"]["scopes"]["once"].as_str().unwrap().contains("this turn"));
        assert_eq!(i["metadata"]["runwire"]["input"]["permissions"], json!({"network": {"enabled": true}}));
        let e = |p: Value| entry("rw-5", "resolved", Some(p));
        assert!(taken(codex, &r, &e(json!({"approved": true, "scope": "always"}))).is_err());
        let a = taken(codex, &r, &e(json!({"approved": true, "scope": "session"}))).unwrap();
        assert_eq!(a.scope, Some(Scope::Session));

        let form = codex_request(
            r#"{"method":"mcpServer/elicitation/request","id":6,"params":{"threadId":"th","serverName":"deploy","mode":"form","message":"Where to?","requestedSchema":{"type":"object","properties":{"env":{"type":"string","enum":["prod","staging"]},"dry":{"type":"boolean","title":"Dry run"}}}}}"#,
        );
        let i = interrupt_for(&form, "rw-6", None, codex);
        assert_eq!(
            (i["reason"].as_str(), i["message"].as_str()),
            (Some("input_required"), Some("deploy asks: Where to?"))
        );
        let answers = &i["responseSchema"]["properties"]["answers"]["properties"];
        assert_eq!(answers["env"]["enum"], json!(["prod", "staging"]));
        assert_eq!(answers["Dry run"]["enum"], json!(["yes", "no"]));
    }

    /// The schema offers what the agent can do: codex takes no edits and no
    /// deny message and offers its own decisions as scopes; ACP's
    /// allow_always is "always"; claude's dangerous suggestions are dropped
    /// without --grant-all and a plan's mode omits bypassPermissions.
    #[test]
    fn each_agent_is_offered_what_it_can_do() {
        let codex = Offer { agent: AgentKind::Codex, grant_all: false };
        let mut r = tool_req("0");
        r.suggestions = Some(vec![
            json!("accept"),
            json!({"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}),
            json!("cancel"),
        ]);
        let i = interrupt_for(&r, "rw-1", None, codex);
        let props = &i["responseSchema"]["properties"];
        assert!(props.get("editedArgs").is_none() && props.get("message").is_none(), "{props}");
        assert_eq!(props["scope"]["enum"], json!(["once", "always"]));
        assert!(i["metadata"]["runwire"]["scopes"]["always"].as_str().unwrap().contains("saved by the agent"));
        let e = |p: Value| entry("rw-1", "resolved", Some(p));
        assert!(taken(codex, &r, &e(json!({"approved": true, "scope": "session"}))).is_err());
        assert!(taken(codex, &r, &e(json!({"approved": true, "editedArgs": {}}))).is_err());
        assert_eq!(
            taken(codex, &r, &e(json!({"approved": true, "scope": "always"}))).unwrap().scope,
            Some(Scope::Always)
        );
        // A plain approval with nothing more to offer: no scope at all.
        r.suggestions = Some(vec![json!("accept"), json!("cancel")]);
        assert!(interrupt_for(&r, "rw-1", None, codex)["responseSchema"]["properties"].get("scope").is_none());

        let acp = Offer { agent: AgentKind::Cursor, grant_all: false };
        r.suggestions = Some(vec![
            json!({"optionId": "a1", "name": "Allow once", "kind": "allow_once"}),
            json!({"optionId": "a2", "name": "Allow always", "kind": "allow_always"}),
        ]);
        let i = interrupt_for(&r, "rw-2", None, acp);
        assert_eq!(i["responseSchema"]["properties"]["scope"]["enum"], json!(["once", "always"]));

        let mut c = tool_req("b1");
        c.suggestions = Some(vec![
            json!({"type": "setMode", "mode": "acceptEdits", "destination": "session"}),
            json!({"type": "setMode", "mode": "bypassPermissions", "destination": "session"}),
            json!({"type": "addDirectories", "directories": ["/"], "destination": "session"}),
            json!({"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow", "destination": "session"}),
            json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "*"}], "behavior": "allow", "destination": "session"}),
            json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow", "destination": "localSettings"}),
        ]);
        let i = interrupt_for(&c, "rw-3", None, Offer::default());
        let ups = i["metadata"]["runwire"]["permissionUpdates"].as_array().unwrap().clone();
        let applied: Vec<bool> = ups.iter().map(|u| u["applied"].as_bool().unwrap()).collect();
        assert_eq!(applied, vec![true, false, false, false, false, true], "{ups:?}");
        assert!(i["metadata"]["runwire"]["droppedUpdates"].as_str().unwrap().starts_with("4 of"));
        assert_eq!(i["responseSchema"]["properties"]["scope"]["enum"], json!(["once", "session", "always"]));
        let all = Offer { agent: AgentKind::Claude, grant_all: true };
        let i = interrupt_for(&c, "rw-3", None, all);
        assert!(i["metadata"]["runwire"].get("droppedUpdates").is_none());

        let mut plan = tool_req("p");
        plan.kind = InputKind::PlanApproval;
        let i = interrupt_for(&plan, "rw-4", None, Offer::default());
        let modes = i["responseSchema"]["properties"]["mode"]["enum"].as_array().unwrap().clone();
        assert!(!modes.contains(&json!("bypassPermissions")) && modes.contains(&json!("acceptEdits")));
        let bad = entry("rw-4", "resolved", Some(json!({"approved": true, "mode": "bypassPermissions"})));
        assert!(taken(Offer::default(), &plan, &bad).unwrap_err().contains("--grant-all"));
        // With --grant-all the schema offers it, and the session takes it.
        let i = interrupt_for(&plan, "rw-4", None, all);
        assert!(i["responseSchema"]["properties"]["mode"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("bypassPermissions")));
        assert!(taken(all, &plan, &bad).is_ok());
    }

    #[test]
    fn partial_resumes_send_nothing() {
        let mut raised = Raised::default();
        let a = raised.raise(&tool_req("a"), None);
        raised.raise(&tool_req("b"), None);
        let open = vec!["a".to_string(), "b".to_string()];
        let p = raised.plan(&[entry(&a, "resolved", Some(json!({"approved": true})))], &open, "t");
        assert!(matches!(p, Plan::StillOpen { warnings } if warnings.len() == 1));
        assert_eq!(raised.interrupts(&open).len(), 2);
    }
}
