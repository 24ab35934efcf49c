//! How a session's waiting and answers are recorded: the journal's input
//! records (`spec/runstate.schema.json`) a runner appends for them. The raw
//! `runwire.request` / `runwire.answer` lines the session writes into its
//! output (the task log; `normalize-events` reads them as `input_request` /
//! `input_answer` in every dialect) are the pure core's
//! ([`crate::session::core::input`]), re-exported here.

use crate::pipeline::events::{InputAnswer, InputRequest};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub use crate::session::core::input::{answer_line, idle_line, request_line};

/// A journal input record: a request raised or closed. Not a task state
/// record: it does not change the task's last state. A task whose last state
/// is not terminal and that has a `requested` without a later `answered` for
/// the same request waits for a person (status `needs_input`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRecord {
    pub v: String,
    pub ts: String,
    pub actor: String,
    pub task: String,
    /// `requested` or `answered`.
    pub input: String,
    pub request: String,
    /// `requested`: `tool_approval`, `question` or `plan_approval`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kind: Option<String>,
    /// `answered`: `allow`, `deny`, `answer`, `cancelled` or `expired`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub decision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expires_at: Option<String>,
    /// runwire's interrupt id of the request: it names this request of this
    /// agent process, so the feed and other processes can name it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interrupt: Option<String>,
    /// `answered`: the door the answer came through, when runwire knows it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub door: Option<String>,
    /// `answered` `allow`: how far it reaches (`once`, `session`, `always`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scope: Option<String>,
    /// `answered` `allow` with edits: the input the tool runs with instead
    /// of the agent's, as JSON text, secrets redacted as the events redact
    /// it, clipped as `detail` is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub updated_input: Option<String>,
    /// `answered` `allow` of a plan: the permission mode the agent was
    /// switched to, to carry the plan out in.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mode: Option<String>,
    /// `requested`: the approval links minted for it (`runwire-serve --public-url`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub links: Option<Vec<String>>,
    /// `requested` of kind `question`: the questions and their choices, as
    /// the agent asked them (what another process needs to offer them: a
    /// supervised task's approval link is answered by the server).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub questions: Option<Vec<crate::pipeline::events::Question>>,
}

/// Longest `detail` journaled (a plan or a command can be long; the log has it whole).
const MAX_DETAIL: usize = 512;

fn clip(s: &str) -> String {
    if s.len() <= MAX_DETAIL {
        return s.to_string();
    }
    let mut end = MAX_DETAIL;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl InputRecord {
    /// The record of a raised request. `detail`: the question, the agent's
    /// message, or the tool input, clipped.
    pub fn requested(actor: &str, task: &str, r: &InputRequest, now_ms: i64) -> InputRecord {
        let detail = r
            .questions
            .as_ref()
            .and_then(|q| q.first())
            .map(|q| q.question.clone())
            .or_else(|| r.message.clone())
            .or_else(|| r.input.as_ref().map(|i| i.to_string()));
        InputRecord {
            v: crate::runs::journal::VERSION.into(),
            ts: crate::util::time::format_ms(now_ms),
            actor: actor.into(),
            task: task.into(),
            input: "requested".into(),
            request: r.id.clone(),
            kind: Some(r.kind.as_str().into()),
            decision: None,
            tool: r.tool.clone(),
            by: None,
            detail: detail.as_deref().map(clip),
            expires_at: r.expires_at.clone(),
            interrupt: r.interrupt_id.clone(),
            door: None,
            scope: None,
            updated_input: None,
            mode: None,
            links: None,
            questions: r.questions.clone(),
        }
    }

    /// The record of a closed request. `detail`: the deny message, or the
    /// answers; what an allow granted (its scope, the edited input, a
    /// plan's mode) in fields of their own.
    pub fn answered(actor: &str, task: &str, a: &InputAnswer, now_ms: i64) -> InputRecord {
        let detail = a.message.clone().or_else(|| a.answers.as_ref().map(|m| Value::Object(m.clone()).to_string()));
        // Redacted here whatever the answer's source: the session's own
        // answers are not (the events' copy is, by the normalizer).
        let updated_input = a.updated_input.as_ref().map(|i| {
            let mut i = i.clone();
            crate::pipeline::normalize::redact::redact_json(&mut i);
            clip(&i.to_string())
        });
        InputRecord {
            v: crate::runs::journal::VERSION.into(),
            ts: crate::util::time::format_ms(now_ms),
            actor: actor.into(),
            task: task.into(),
            input: "answered".into(),
            request: a.id.clone(),
            kind: None,
            decision: Some(a.decision.as_str().into()),
            tool: None,
            by: a.by.clone(),
            detail: detail.as_deref().map(clip),
            expires_at: None,
            interrupt: a.interrupt_id.clone(),
            door: a.door.clone(),
            scope: a.scope.map(|s| s.as_str().to_string()),
            updated_input,
            mode: a.mode.clone(),
            links: None,
            questions: None,
        }
    }

    /// Appends the record to a journal (one `write` of one line, like every journal record).
    pub fn append(&self, run: Option<&crate::runs::marks::Run>, journal: &Path) -> std::io::Result<()> {
        match run {
            Some(run) => crate::runs::journal::append(run, journal, self),
            // A journal no registered run names (`runwire-session --journal`
            // of a loose file): no listing shows it, so no mark.
            None => {
                crate::runs::journal::append_line(journal, &serde_json::to_vec(self).map_err(std::io::Error::other)?)
            }
        }
    }
}

use serde_json::Value;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::events::{Decision, InputKind};

    #[test]
    fn lines_carry_the_type_first_and_normalize_back() {
        let r = InputRequest {
            interrupt_id: None,
            id: "q1".into(),
            kind: InputKind::ToolApproval,
            tool_call_id: Some("t1".into()),
            tool: Some("Bash".into()),
            input: Some(serde_json::json!({"command": "ls"})),
            suggestions: None,
            questions: None,
            message: Some("why".into()),
            expires_at: Some("2026-01-01T00:00:00.000Z".into()),
            blocking: None,
        };
        let line = request_line(&r);
        assert!(line.starts_with(br#"{"type":"runwire.request","id":"q1""#));
        let a = InputAnswer {
            interrupt_id: None,
            id: "q1".into(),
            decision: Decision::Deny,
            scope: None,
            updated_input: None,
            answers: None,
            message: Some("no".into()),
            mode: None,
            by: Some("ana".into()),
            at: "2026-01-01T00:00:01.000Z".into(),
            door: None,
        };
        let mut n = crate::pipeline::normalize::Normalizer::new(
            crate::pipeline::normalize::Adapter::Claude,
            Default::default(),
        );
        let evs: Vec<_> = [line, answer_line(&a)].iter().flat_map(|l| n.push(l)).collect();
        assert_eq!(evs[0].data, crate::pipeline::events::Data::InputRequest(r.clone()));
        assert_eq!(evs[1].data, crate::pipeline::events::Data::InputAnswer(a.clone()));
        let rec = InputRecord::answered("me", "t", &a, 0);
        assert_eq!(rec.decision.as_deref(), Some("deny"));
        let rec = InputRecord::requested("me", "t", &r, 0);
        assert_eq!((rec.kind.as_deref(), rec.detail.as_deref()), (Some("tool_approval"), Some("why")));
    }

    /// An allow's record says what was granted: its scope, the input the
    /// tool runs with when edited (secrets redacted, clipped), a plan's mode.
    #[test]
    fn an_allow_records_its_scope_its_edits_and_a_plans_mode() {
        let a = InputAnswer {
            interrupt_id: None,
            id: "q1".into(),
            decision: Decision::Allow,
            scope: Some(crate::pipeline::events::Scope::Session),
            updated_input: Some(serde_json::json!({"command": "ls -a", "env": {"API_TOKEN": "t0ps3cret"}})),
            answers: None,
            message: None,
            mode: None,
            by: Some("ana".into()),
            at: "2026-01-01T00:00:01.000Z".into(),
            door: Some("studio".into()),
        };
        let rec = serde_json::to_value(InputRecord::answered("me", "t", &a, 0)).unwrap();
        assert_eq!(rec["scope"], "session");
        let edited = rec["updated_input"].as_str().expect("the edited input");
        assert!(edited.contains("ls -a") && !edited.contains("t0ps3cret"), "{edited}");
        let long = InputAnswer { updated_input: Some(serde_json::json!({"content": "x".repeat(4000)})), ..a.clone() };
        let rec = InputRecord::answered("me", "t", &long, 0);
        assert!(rec.updated_input.unwrap().len() <= MAX_DETAIL + "…".len());
        let plan = InputAnswer {
            mode: Some("acceptEdits".into()),
            scope: Some(crate::pipeline::events::Scope::Once),
            updated_input: None,
            ..a.clone()
        };
        let rec = serde_json::to_value(InputRecord::answered("me", "t", &plan, 0)).unwrap();
        assert_eq!((rec["mode"].as_str(), rec["scope"].as_str()), (Some("acceptEdits"), Some("once")));
        assert!(rec.get("updated_input").is_none(), "{rec}");
    }
}
