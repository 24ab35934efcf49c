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
//! - a run must address every open interrupt; one that does not answers
//!   nothing and ends with the still-open interrupts again;
//! - `cancelled` is always accepted (an expired, auto-denied or unknown
//!   interrupt included), so a thread never gets stuck;
//! - an entry naming an interrupt runwire never raised is skipped with a
//!   warning; an identical replay of an answer is not sent again; only a
//!   *different* answer to a decided interrupt, or `resolved` past
//!   `expiresAt`, is refused (`RUN_ERROR`, `409` on the task routes).

use crate::events::{InputKind, InputRequest, Scope};
use crate::session::input::{AnswerInput, Decision};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};

/// Requests remembered per thread (to read a late answer to a closed one).
pub const MAX_RAISED: usize = 1024;

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
    /// Send these answers to the session, in order (answers to requests
    /// already closed first: the session takes an identical one as a replay
    /// and refuses a different one, before anything open is answered);
    /// `warnings` become `runwire.resume_skipped` CUSTOM events.
    Apply { answers: Vec<AnswerInput>, warnings: Vec<String> },
    /// Some open interrupts were not addressed: send nothing, end the run
    /// with the open interrupts again.
    StillOpen { warnings: Vec<String> },
    /// Refused: `RUN_ERROR` with this message; nothing is sent.
    Refuse(String),
}

/// The requests a thread's session raised, as AG-UI interrupts.
#[derive(Debug, Default)]
pub struct Raised {
    by_id: HashMap<String, (InputRequest, Value)>,
    order: VecDeque<String>,
}

impl Raised {
    /// Records a request; `tool_call_id` is the AG-UI toolCallId of the call
    /// it concerns, when that call was streamed on the thread.
    pub fn raise(&mut self, r: &InputRequest, tool_call_id: Option<String>) {
        let i = interrupt_for(r, tool_call_id);
        if self.by_id.insert(r.id.clone(), (r.clone(), i)).is_none() {
            self.order.push_back(r.id.clone());
        }
        while self.order.len() > MAX_RAISED {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<&(InputRequest, Value)> {
        self.by_id.get(id)
    }

    /// The AG-UI interrupts of `open` (request ids, oldest first).
    pub fn interrupts(&self, open: &[String]) -> Vec<Value> {
        open.iter().filter_map(|id| self.by_id.get(id).map(|(_, i)| i.clone())).collect()
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
            let Some((req, _)) = self.by_id.get(id) else {
                if e.status != "cancelled" {
                    warnings
                        .push(format!("resume entry for interrupt {id:?} skipped: runwire raised no such interrupt"));
                }
                continue;
            };
            let is_open = open.iter().any(|o| o == id);
            if !is_open && e.status == "cancelled" {
                // Accepted whatever closed it (an answer, expiry, the agent):
                // abandoning it changes nothing, and the thread moves on.
                continue;
            }
            match answer_for(req, e, by) {
                Ok(a) if is_open => now.push(a),
                Ok(a) => late.push(a),
                Err(m) => return Plan::Refuse(format!("resume: interrupt {id:?}: {m}")),
            }
        }
        let unanswered: Vec<&str> =
            open.iter().map(String::as_str).filter(|id| !now.iter().any(|a: &AnswerInput| a.id == *id)).collect();
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

/// The session answer a resume entry means for request `r`.
pub fn answer_for(r: &InputRequest, e: &ResumeEntry, by: &str) -> Result<AnswerInput, String> {
    let mut a = AnswerInput {
        id: r.id.clone(),
        decision: Decision::Cancelled,
        scope: None,
        updated_input: None,
        answers: None,
        message: None,
        mode: None,
        by: Some(by.to_string()),
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
        Some(_) => return Err("payload.scope must be \"once\" or \"session\"".into()),
    };
    Ok(a)
}

/// The schema of one question's answer: one of its labels (a list of them
/// for a multi-select question); where the question takes free text, the
/// person's own words too (`anyOf`: a label, or any text that is not
/// blank); a question with no options takes any text.
fn answer_schema(q: &crate::events::Question) -> Value {
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

/// The AG-UI `Interrupt` for a request.
pub fn interrupt_for(r: &InputRequest, tool_call_id: Option<String>) -> Value {
    let mut i = Map::new();
    i.insert("id".into(), r.id.clone().into());
    let tool = r.tool.clone().unwrap_or_else(|| "a tool".into());
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
        let mut schema = schema;
        if r.kind == InputKind::PlanApproval {
            schema["properties"]["mode"] = json!({"type": "string", "enum": crate::session::claude::MODES,
                "description": "The permission mode to carry the plan out in (default: the server's --plan-exit-mode)."});
        }
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
    meta.insert("kind".into(), r.kind.as_str().into());
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
    use crate::events::{Question, QuestionOption};

    fn tool_req(id: &str) -> InputRequest {
        InputRequest {
            id: id.into(),
            kind: InputKind::ToolApproval,
            tool_call_id: Some("toolu_1".into()),
            tool: Some("Bash".into()),
            input: Some(json!({"command": "ls", "x": null})),
            suggestions: None,
            questions: None,
            message: None,
            expires_at: Some("2030-01-01T00:00:00Z".into()),
        }
    }

    fn question() -> InputRequest {
        InputRequest {
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
        }
    }

    fn entry(id: &str, status: &str, payload: Option<Value>) -> ResumeEntry {
        ResumeEntry { interrupt_id: id.into(), status: status.into(), payload }
    }

    #[test]
    fn a_tool_request_becomes_a_tool_call_interrupt() {
        let i = interrupt_for(&tool_req("r1"), Some("run1:t:toolu_1".into()));
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
        let i = interrupt_for(&r, None);
        assert_eq!(i["reason"], "input_required");
        assert_eq!(
            i["responseSchema"]["properties"]["answers"]["properties"]["Which?"]["items"]["enum"],
            json!(["A", "B"])
        );
        let a = answer_for(&r, &entry("q", "resolved", Some(json!({"answers": {"Which?": ["A", "B"]}}))), "t").unwrap();
        assert_eq!(a.decision, Decision::Answer);
        assert!(answer_for(&r, &entry("q", "resolved", Some(json!({"answers": {}}))), "t").is_err());
        for bad in [json!({"Which?": ["C"]}), json!({"Which?": "A", "Other?": "x"}), json!({"Which?": []})] {
            assert!(answer_for(&r, &entry("q", "resolved", Some(json!({ "answers": bad }))), "t").is_err());
        }
        // A label that is not a choice is refused in the session's own words (as the supervisor refuses it).
        let e = answer_for(&r, &entry("q", "resolved", Some(json!({"answers": {"Which?": ["A", "C"]}}))), "t");
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
        let i = interrupt_for(&r, None);
        let s = &i["responseSchema"]["properties"]["answers"]["properties"]["Which?"];
        assert_eq!(s["items"]["anyOf"][0]["enum"], json!(["A", "B"]), "{s}");
        assert_eq!(s["items"]["anyOf"][1]["minLength"], 1, "{s}");
        assert_eq!(i["metadata"]["runwire"]["questions"][0]["freeText"], true);
        let ok = |r: &InputRequest, a: Value| {
            answer_for(r, &entry("q", "resolved", Some(json!({"answers": {"Which?": a}}))), "t")
        };
        assert_eq!(ok(&r, json!(["A", "my own"])).unwrap().decision, Decision::Answer);
        assert!(ok(&r, json!(["A", " "])).is_err());
        assert!(ok(&r, json!(["mine", "yours"])).is_err());
        // Choices only: the same words are refused.
        assert!(answer_for(
            &question(),
            &entry("q", "resolved", Some(json!({"answers": {"Which?": ["my own"]}}))),
            "t"
        )
        .is_err());
        assert!(interrupt_for(&question(), None)["metadata"]["runwire"]["questions"][0].get("freeText").is_none());
        // Single-select: a string schema beyond the enum.
        r.questions.as_mut().unwrap()[0].multi_select = false;
        let i = interrupt_for(&r, None);
        let s = &i["responseSchema"]["properties"]["answers"]["properties"]["Which?"];
        assert_eq!((s["type"].as_str(), s["anyOf"][0]["enum"].clone()), (Some("string"), json!(["A", "B"])));
        assert!(ok(&r, json!("something else")).is_ok());
    }

    #[test]
    fn payloads_map_to_answers() {
        let r = tool_req("r");
        let ok = |p: Value| answer_for(&r, &entry("r", "resolved", Some(p)), "t");
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
        assert_eq!(answer_for(&r, &entry("r", "cancelled", None), "t").unwrap().decision, Decision::Cancelled);
    }

    #[test]
    fn resume_rules() {
        let mut raised = Raised::default();
        raised.raise(&tool_req("a"), None);
        let open = vec!["a".to_string()];
        let yes = || Some(json!({"approved": true}));
        // Nothing addressed: still open, nothing sent.
        assert_eq!(raised.plan(&[], &open, "t"), Plan::StillOpen { warnings: vec![] });
        // Unknown ids are skipped with a warning (a cancel of one silently).
        let p = raised.plan(
            &[entry("zzz", "resolved", yes()), entry("zz", "cancelled", None), entry("a", "resolved", yes())],
            &open,
            "t",
        );
        let Plan::Apply { answers, warnings } = p else { panic!("{p:?}") };
        assert_eq!((answers.len(), warnings.len()), (1, 1));
        // Bad payload, bad status, duplicates: refused.
        assert!(matches!(raised.plan(&[entry("a", "resolved", Some(json!({})))], &open, "t"), Plan::Refuse(_)));
        assert!(matches!(raised.plan(&[entry("a", "done", None)], &open, "t"), Plan::Refuse(_)));
        assert!(matches!(
            raised.plan(&[entry("a", "cancelled", None), entry("a", "cancelled", None)], &open, "t"),
            Plan::Refuse(_)
        ));
        // Closed: a cancel is accepted and sends nothing; a resolved goes to
        // the session (which tells a replay from a conflict).
        assert_eq!(
            raised.plan(&[entry("a", "cancelled", None)], &[], "t"),
            Plan::Apply { answers: vec![], warnings: vec![] }
        );
        let Plan::Apply { answers, .. } = raised.plan(&[entry("a", "resolved", yes())], &[], "t") else { panic!() };
        assert_eq!(answers.len(), 1);
    }

    #[test]
    fn partial_resumes_send_nothing() {
        let mut raised = Raised::default();
        raised.raise(&tool_req("a"), None);
        raised.raise(&tool_req("b"), None);
        let open = vec!["a".to_string(), "b".to_string()];
        let p = raised.plan(&[entry("a", "resolved", Some(json!({"approved": true})))], &open, "t");
        assert!(matches!(p, Plan::StillOpen { warnings } if warnings.len() == 1));
        assert_eq!(raised.interrupts(&open).len(), 2);
    }
}
