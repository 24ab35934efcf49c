//! Claude Code's interactive protocol (stream-json in and out, the control
//! protocol typed in `sdk.d.ts` of `@anthropic-ai/claude-agent-sdk`), with
//! no IO.
//!
//! * runwire writes `initialize`, then user messages
//!   (`{"type":"user","message":{"role":"user","content":…}}`, also mid-turn:
//!   claude folds them into the running turn);
//! * claude asks with `control_request` `can_use_tool`: a tool approval; a
//!   question when the tool is `AskUserQuestion`; a plan approval when it is
//!   `ExitPlanMode`. runwire answers with `control_response`
//!   `{behavior:"allow", updatedInput, toolUseID}` (the questions plus
//!   `answers` for a question; a plan is approved with `set_permission_mode`
//!   first) or `{behavior:"deny", message, toolUseID}`;
//! * `interrupt` is a `control_request` of runwire's; the turn ends with its
//!   `result`; `control_cancel_request` withdraws one of claude's requests;
//! * requests runwire never registered for (`hook_callback`, `mcp_message`,
//!   …) get an error response, so claude never waits on them.

use super::{Agent, Signal};
use crate::events::{InputAnswer, InputKind, InputRequest, Scope};
use serde_json::{json, Map, Value};

/// The permission modes claude knows (`PermissionMode` in `sdk.d.ts`).
pub const MODES: [&str; 6] = ["default", "acceptEdits", "plan", "dontAsk", "auto", "bypassPermissions"];

/// Claude Code 2.1.328 lists `manual` too: another name of `default`
/// (older builds and the SDK know only `default`, which runwire writes).
pub const ALIASES: [(&str, &str); 1] = [("manual", "default")];

/// The mode claude is told for `mode`: aliases by their canonical name.
pub fn canonical_mode(mode: &str) -> &str {
    ALIASES.iter().find(|(a, _)| *a == mode).map_or(mode, |(_, m)| m)
}

/// The mode that grants everything: only with an explicit flag.
pub const GRANT_ALL: &str = "bypassPermissions";

/// The flags that make claude speak this protocol: stream-json both ways,
/// partial messages, and permission prompts over stdio (without it claude
/// never asks and denies instead), in `mode`.
pub fn protocol_args(mode: &str) -> Vec<String> {
    [
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--permission-prompt-tool",
        "stdio",
        "--permission-mode",
        canonical_mode(mode),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Checks a permission mode: known, and granting everything only when
/// `grant_all` says so.
pub fn check_mode(mode: &str, grant_all: bool) -> Result<(), String> {
    if !MODES.contains(&canonical_mode(mode)) {
        return Err(format!("unknown permission mode {mode:?} (known: {})", MODES.join(", ")));
    }
    if mode == GRANT_ALL && !grant_all {
        return Err(format!("permission mode {GRANT_ALL} grants every tool call: it needs --grant-all"));
    }
    Ok(())
}

/// Claude settings for a session.
#[derive(Debug, Clone)]
pub struct ClaudeOptions {
    /// The mode a plan is carried out in once approved (an answer may name another).
    pub plan_exit_mode: String,
    /// Granting everything was asked for explicitly (`--grant-all`).
    pub grant_all: bool,
}

impl Default for ClaudeOptions {
    fn default() -> ClaudeOptions {
        ClaudeOptions { plan_exit_mode: "default".into(), grant_all: false }
    }
}

/// The protocol state for one claude process.
#[derive(Debug)]
pub struct Claude {
    opts: ClaudeOptions,
    next: u64,
    session: Option<String>,
}

impl Claude {
    pub fn new(opts: ClaudeOptions) -> Claude {
        Claude { opts, next: 0, session: None }
    }

    /// Ids for runwire's own control requests: unique in the process.
    fn request_id(&mut self, what: &str) -> String {
        self.next += 1;
        format!("runwire-{what}-{}", self.next)
    }

    fn control(&mut self, what: &str, request: Value) -> Vec<u8> {
        let id = self.request_id(what);
        line(&json!({"type": "control_request", "request_id": id, "request": request}))
    }
}

fn line(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize infallibly")
}

fn control_response(request_id: &str, response: Value) -> Vec<u8> {
    line(
        &json!({"type": "control_response", "response": {"subtype": "success", "request_id": request_id, "response": response}}),
    )
}

/// The pending request a `can_use_tool` is, in the neutral shape.
fn request_of(request_id: &str, r: &Value) -> InputRequest {
    let tool = r.get("tool_name").and_then(Value::as_str).unwrap_or_default();
    let input = r.get("input").cloned().unwrap_or_else(|| json!({}));
    let kind = match tool {
        "AskUserQuestion" => InputKind::Question,
        "ExitPlanMode" => InputKind::PlanApproval,
        _ => InputKind::ToolApproval,
    };
    let questions = (kind == InputKind::Question).then(|| super::questions_of(&input));
    let text = |k: &str| r.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let message = match kind {
        InputKind::PlanApproval => input.get("plan").and_then(Value::as_str).map(str::to_string),
        _ => text("decision_reason").or_else(|| text("title")).or_else(|| text("description")),
    };
    InputRequest {
        id: request_id.to_string(),
        kind,
        tool_call_id: text("tool_use_id"),
        tool: Some(tool.to_string()).filter(|t| !t.is_empty()),
        input: Some(input),
        suggestions: r.get("permission_suggestions").and_then(Value::as_array).cloned(),
        questions,
        message,
        expires_at: None,
    }
}

impl Agent for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn open(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        let l = self.control("init", json!({"subtype": "initialize"}));
        to_agent.push(l);
    }

    fn line(&mut self, raw: &[u8], to_agent: &mut Vec<Vec<u8>>) -> Vec<Signal> {
        let Some(v) = super::json_line(raw) else { return Vec::new() };
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        let mut out = Vec::new();
        match s("type") {
            Some("control_request") => {
                let id = s("request_id").unwrap_or_default();
                let req = v.get("request").cloned().unwrap_or(Value::Null);
                match req.get("subtype").and_then(Value::as_str) {
                    Some("can_use_tool") if !id.is_empty() => out.push(Signal::Request(request_of(id, &req))),
                    other => {
                        // Nothing of runwire's registered for it: say so at once.
                        let what = other.unwrap_or("(no subtype)");
                        to_agent.push(line(&json!({"type": "control_response", "response": {
                            "subtype": "error", "request_id": id,
                            "error": format!("runwire-session does not handle {what} requests")}})));
                    }
                }
            }
            Some("control_cancel_request") => {
                if let Some(id) = s("request_id") {
                    out.push(Signal::Withdrawn(id.to_string()));
                }
            }
            Some("system") => {
                if s("subtype") == Some("init") {
                    if let Some(id) = s("session_id").filter(|x| !x.is_empty()) {
                        self.session = Some(id.to_string());
                        out.push(Signal::SessionId(id.to_string()));
                    }
                }
                if s("subtype") == Some("init") || s("status") == Some("requesting") {
                    out.push(Signal::TurnActive);
                }
            }
            Some("stream_event" | "assistant") => out.push(Signal::TurnActive),
            // The result line may start with another key: `type` is read, not matched by prefix.
            Some("result") => out.push(Signal::TurnEnded { ok: v.get("is_error") != Some(&Value::Bool(true)) }),
            _ => {}
        }
        out
    }

    fn message(&mut self, text: &str, to_agent: &mut Vec<Vec<u8>>) {
        to_agent.push(line(&json!({
            "type": "user",
            "message": {"role": "user", "content": text},
            "parent_tool_use_id": null,
            "session_id": self.session.as_deref().unwrap_or(""),
        })));
    }

    fn answer(&mut self, req: &InputRequest, a: &InputAnswer, mode: Option<&str>, to_agent: &mut Vec<Vec<u8>>) {
        use crate::events::Decision as D;
        let original = req.input.clone().unwrap_or_else(|| json!({}));
        let mut r = Map::new();
        match a.decision {
            D::Allow | D::Answer => {
                let mut input = a.updated_input.clone().unwrap_or(original);
                if let (Some(answers), Some(obj)) = (&a.answers, input.as_object_mut()) {
                    obj.insert("answers".into(), Value::Object(answers.clone()));
                }
                if req.kind == InputKind::PlanApproval {
                    let mode = canonical_mode(mode.unwrap_or(&self.opts.plan_exit_mode)).to_string();
                    let l = self.control("mode", json!({"subtype": "set_permission_mode", "mode": mode}));
                    to_agent.push(l);
                }
                r.insert("behavior".into(), json!("allow"));
                r.insert("updatedInput".into(), input);
                if a.scope == Some(Scope::Session) {
                    // The agent's own suggested rules, kept for this session only.
                    let rules: Vec<Value> = req
                        .suggestions
                        .iter()
                        .flatten()
                        .cloned()
                        .map(|mut s| {
                            if let Some(o) = s.as_object_mut() {
                                o.insert("destination".into(), json!("session"));
                            }
                            s
                        })
                        .collect();
                    r.insert("updatedPermissions".into(), Value::Array(rules));
                }
                r.insert("decisionClassification".into(), json!("user_temporary"));
            }
            D::Deny | D::Cancelled | D::Expired => {
                r.insert("behavior".into(), json!("deny"));
                r.insert("message".into(), json!(a.message.as_deref().unwrap_or("Permission request denied")));
                r.insert("decisionClassification".into(), json!("user_reject"));
            }
        }
        if let Some(t) = &req.tool_call_id {
            r.insert("toolUseID".into(), json!(t));
        }
        to_agent.push(control_response(&req.id, Value::Object(r)));
    }

    fn interrupt(&mut self, to_agent: &mut Vec<Vec<u8>>) {
        let l = self.control("interrupt", json!({"subtype": "interrupt"}));
        to_agent.push(l);
    }

    fn check_mode(&self, mode: &str) -> Result<(), String> {
        check_mode(mode, self.opts.grant_all)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Input, Options, Phase, Refused, Session};
    use super::*;

    const ASK: &str = r#"{"type":"control_request","request_id":"q1","request":{"subtype":"can_use_tool","tool_name":"AskUserQuestion","input":{"questions":[{"question":"Tabs or spaces?","header":"Indent","options":[{"label":"tabs"},{"label":"spaces"}],"multiSelect":false},{"question":"Which?","options":[{"label":"a"},{"label":"b"}],"multiSelect":true}]},"tool_use_id":"tu1","requires_user_interaction":true}}"#;
    const BASH: &str = r#"{"type":"control_request","request_id":"b1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls"}],"behavior":"allow","destination":"localSettings"}],"tool_use_id":"tu2"}}"#;
    const PLAN: &str = r#"{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool","tool_name":"ExitPlanMode","input":{"plan":"1. do it"},"tool_use_id":"tu3","requires_user_interaction":true}}"#;

    fn session() -> Session<Claude> {
        let mut s =
            Session::new(Claude::new(ClaudeOptions::default()), Options { answer_timeout_ms: 1000, actor: "t".into() });
        s.open(Some("go"));
        s
    }

    fn input(s: &mut Session<Claude>, l: &str) -> Result<super::super::Step, Refused> {
        s.input(Input::parse(l.as_bytes()).unwrap(), 5)
    }

    fn json_of(l: &[u8]) -> Value {
        serde_json::from_slice(l).unwrap()
    }

    /// The stop and steer rules, once, in the session: a stop cancels the
    /// open request (telling the agent why: `STOPPED`) then
    /// interrupts; a stop with nothing running sends nothing; a steer is
    /// refused while a request is open, and says whether it joined the turn
    /// or started one.
    #[test]
    fn stop_and_steer_follow_the_session_rules() {
        use super::super::{Ack, STOPPED};
        let mut s = session();
        s.agent_line(BASH.as_bytes(), 1);
        let refused = input(&mut s, r#"{"type":"steer","text":"left"}"#);
        assert_eq!(refused, Err(Refused::RequestOpen));
        let st = input(&mut s, r#"{"type":"stop","by":"ana"}"#).unwrap();
        assert_eq!(st.ack, Ack::Stopped);
        assert_eq!(st.answered.len(), 1);
        assert_eq!(st.answered[0].message.as_deref(), Some(STOPPED));
        assert_eq!(st.answered[0].by.as_deref(), Some("ana"));
        let wrote: Vec<Value> = st.to_agent.iter().map(|l| json_of(l)).collect();
        assert_eq!(wrote.len(), 2, "{wrote:?}");
        assert_eq!(wrote[0]["response"]["request_id"], "b1", "{wrote:?}");
        assert_eq!(wrote[1]["request"]["subtype"], "interrupt", "{wrote:?}");
        let st = input(&mut s, r#"{"type":"steer","text":"left"}"#).unwrap();
        assert_eq!(st.ack, Ack::Joined { may_start_next: false });
        s.agent_line(br#"{"type":"result","subtype":"success","is_error":false}"#, 2);
        assert_eq!(s.phase(), Phase::Idle);
        let st = input(&mut s, r#"{"type":"stop"}"#).unwrap();
        assert_eq!((st.ack, st.to_agent.len()), (Ack::NothingRunning, 0));
        let st = input(&mut s, r#"{"type":"steer","text":"again","interrupt":true}"#).unwrap();
        assert_eq!((st.ack, st.to_agent.len()), (Ack::Started, 1), "no turn ran: nothing to interrupt");
    }

    /// The idle line: said once each time the session becomes idle, with
    /// the inputs taken (refused and unreadable ones too), never mid-turn or
    /// while a request waits.
    #[test]
    fn the_idle_line_counts_every_input_and_is_said_once_per_idle_moment() {
        let mut s = session();
        assert_eq!(s.idle_line(), None, "the first message's turn runs");
        s.agent_line(BASH.as_bytes(), 1);
        s.agent_line(br#"{"type":"result","subtype":"success","is_error":false}"#, 2);
        // The turn's end closed the request: idle, no input taken yet.
        assert_eq!(s.idle_line().as_deref(), Some(&br#"{"type":"runwire.idle","inputs":0}"#[..]));
        assert_eq!(s.idle_line(), None, "said once");
        assert!(matches!(
            input(&mut s, r#"{"type":"answer","id":"nope","decision":"allow"}"#),
            Err(Refused::Unknown(_))
        ));
        s.unreadable();
        assert_eq!(s.idle_line().as_deref(), Some(&br#"{"type":"runwire.idle","inputs":2}"#[..]));
        input(&mut s, r#"{"type":"message","text":"more"}"#).unwrap();
        assert_eq!(s.idle_line(), None, "a turn runs");
        s.agent_line(PLAN.as_bytes(), 3);
        s.agent_line(br#"{"type":"result","subtype":"success","is_error":false}"#, 4);
        assert_eq!(s.idle_line().as_deref(), Some(&br#"{"type":"runwire.idle","inputs":3}"#[..]));
        assert_eq!(s.inputs(), 3);
    }

    #[test]
    fn a_question_is_answered_with_the_questions_and_joined_labels() {
        let mut s = session();
        let st = s.agent_line(ASK.as_bytes(), 0);
        assert_eq!(st.output.len(), 2, "the line, then runwire.request");
        let req = json_of(&st.output[1]);
        assert_eq!(req["kind"], "question");
        assert_eq!(req["questions"][1]["multi_select"], true);
        assert_eq!(req["expires_at"], "1970-01-01T00:00:01.000Z");
        // A label list for a single-select question is refused, nothing written.
        let bad = input(
            &mut s,
            r#"{"type":"answer","id":"q1","decision":"answer","answers":{"Tabs or spaces?":["tabs","spaces"]}}"#,
        );
        assert!(matches!(bad, Err(Refused::Invalid(_))), "{bad:?}");
        // So is a blank answer of one's own, and two of them in a multi-select.
        for (answers, why) in [
            (r#"{"Tabs or spaces?":"  "}"#, "must not be blank"),
            (r#"{"Which?":["a","c","d"]}"#, "at most one answer in the person's own words"),
        ] {
            let l = format!(r#"{{"type":"answer","id":"q1","decision":"answer","answers":{answers}}}"#);
            let bad = input(&mut s, &l);
            assert!(matches!(&bad, Err(Refused::Invalid(m)) if m.contains(why)), "{bad:?}");
        }
        let st = input(&mut s, r#"{"type":"answer","id":"q1","decision":"answer","answers":{"Tabs or spaces?":"spaces","Which?":["a","b"]},"by":"ana"}"#).unwrap();
        let resp = json_of(&st.to_agent[0]);
        assert_eq!(resp["response"]["request_id"], "q1");
        let r = &resp["response"]["response"];
        assert_eq!(r["behavior"], "allow");
        assert_eq!(r["updatedInput"]["answers"], json!({"Tabs or spaces?": "spaces", "Which?": "a, b"}));
        assert_eq!(r["updatedInput"]["questions"][0]["header"], "Indent");
        assert_eq!(r["toolUseID"], "tu1");
        let ans = json_of(&st.output[0]);
        assert_eq!(
            (ans["type"].as_str(), ans["decision"].as_str(), ans["by"].as_str()),
            (Some("runwire.answer"), Some("answer"), Some("ana"))
        );
        // Replaying the same answer is a no-op; a different one is refused.
        assert!(input(&mut s, r#"{"type":"answer","id":"q1","decision":"answer","answers":{"Tabs or spaces?":"spaces","Which?":["a","b"]}}"#).unwrap().replayed);
        assert!(matches!(
            input(&mut s, r#"{"type":"answer","id":"q1","decision":"deny"}"#),
            Err(Refused::Decided { .. })
        ));
        assert!(matches!(input(&mut s, r#"{"type":"answer","id":"zz","decision":"deny"}"#), Err(Refused::Unknown(_))));
    }

    /// claude's AskUserQuestion always offers "Other": the request says so,
    /// and the person's own words reach claude as the `answers` value (in
    /// a multi-select, after the labels, joined as claude joins them).
    #[test]
    fn a_question_takes_the_persons_own_words_as_claude_does() {
        let mut s = session();
        let st = s.agent_line(ASK.as_bytes(), 0);
        let req = json_of(&st.output[1]);
        assert_eq!(
            (req["questions"][0]["free_text"].as_bool(), req["questions"][1]["free_text"].as_bool()),
            (Some(true), Some(true))
        );
        let st = input(&mut s, r#"{"type":"answer","id":"q1","decision":"answer","answers":{"Tabs or spaces?":"two spaces, as gofmt would not","Which?":["b","c, of course"]}}"#).unwrap();
        let r = &json_of(&st.to_agent[0])["response"]["response"];
        assert_eq!(r["behavior"], "allow");
        assert_eq!(
            r["updatedInput"]["answers"],
            json!({"Tabs or spaces?": "two spaces, as gofmt would not", "Which?": "b, c, of course"})
        );
        assert_eq!(json_of(&st.output[0])["answers"]["Tabs or spaces?"], "two spaces, as gofmt would not");
        // The same words again are a replay; other words to the decided question are refused.
        let again = r#"{"type":"answer","id":"q1","decision":"answer","answers":{"Tabs or spaces?":"two spaces, as gofmt would not","Which?":["b","c, of course"]}}"#;
        assert!(input(&mut s, again).unwrap().replayed);
        let other = r#"{"type":"answer","id":"q1","decision":"answer","answers":{"Tabs or spaces?":"tabs","Which?":["b","c, of course"]}}"#;
        assert!(matches!(input(&mut s, other), Err(Refused::Decided { .. })));
    }

    #[test]
    fn allow_for_the_session_keeps_the_suggested_rules_for_the_session() {
        let mut s = session();
        s.agent_line(BASH.as_bytes(), 0);
        let st = input(
            &mut s,
            r#"{"type":"answer","id":"b1","decision":"allow","scope":"session","updated_input":{"command":"ls -a"}}"#,
        )
        .unwrap();
        let r = &json_of(&st.to_agent[0])["response"]["response"];
        assert_eq!(r["updatedInput"], json!({"command": "ls -a"}));
        assert_eq!(r["updatedPermissions"][0]["destination"], "session");
        assert_eq!(r["updatedPermissions"][0]["rules"][0]["ruleContent"], "ls");
    }

    #[test]
    fn a_plan_is_approved_by_setting_the_mode_then_allowing() {
        let mut s = session();
        s.agent_line(PLAN.as_bytes(), 0);
        assert!(matches!(
            input(&mut s, r#"{"type":"answer","id":"p1","decision":"allow","mode":"bypassPermissions"}"#),
            Err(Refused::Invalid(_))
        ));
        let st = input(&mut s, r#"{"type":"answer","id":"p1","decision":"allow","mode":"acceptEdits"}"#).unwrap();
        let (m, a) = (json_of(&st.to_agent[0]), json_of(&st.to_agent[1]));
        assert_eq!(m["request"], json!({"subtype": "set_permission_mode", "mode": "acceptEdits"}));
        assert_eq!(a["response"]["response"]["behavior"], "allow");
        assert_eq!(a["response"]["response"]["updatedInput"]["plan"], "1. do it");
    }

    #[test]
    fn manual_is_default_by_another_name_and_claude_is_told_default() {
        assert_eq!(check_mode("manual", false), Ok(()));
        let args = protocol_args("manual");
        assert_eq!(args[args.len() - 2..], ["--permission-mode".to_string(), "default".to_string()]);
        let mut s = session();
        s.agent_line(PLAN.as_bytes(), 0);
        let st = input(&mut s, r#"{"type":"answer","id":"p1","decision":"allow","mode":"manual"}"#).unwrap();
        assert_eq!(json_of(&st.to_agent[0])["request"], json!({"subtype": "set_permission_mode", "mode": "default"}));
        assert!(check_mode("manually", false).is_err());
    }

    #[test]
    fn an_unanswered_request_is_denied_when_it_expires() {
        let mut s = session();
        s.agent_line(BASH.as_bytes(), 0);
        assert_eq!(s.deadline(), Some(1000));
        assert!(s.tick(999).to_agent.is_empty());
        let st = s.tick(1000);
        let r = &json_of(&st.to_agent[0])["response"]["response"];
        assert_eq!(r["behavior"], "deny");
        assert!(r["message"].as_str().unwrap().contains("no answer within 1 s"));
        assert_eq!(st.answered[0].decision, crate::events::Decision::Expired);
        assert!(matches!(input(&mut s, r#"{"type":"answer","id":"b1","decision":"allow"}"#), Err(Refused::Expired(_))));
        // Abandoning it afterwards is accepted and changes nothing.
        assert!(input(&mut s, r#"{"type":"answer","id":"b1","decision":"cancelled"}"#).unwrap().replayed);
    }

    #[test]
    fn requests_runwire_did_not_register_for_are_refused_at_once() {
        let mut s = session();
        let st = s.agent_line(br#"{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback","callback_id":"hook_4"}}"#, 0);
        let r = json_of(&st.to_agent[0]);
        assert_eq!(
            (r["response"]["subtype"].as_str(), r["response"]["request_id"].as_str()),
            (Some("error"), Some("h1"))
        );
        assert!(st.requested.is_empty());
    }

    #[test]
    fn interrupt_and_end_follow_the_turn() {
        let mut s = session();
        assert_eq!(s.phase(), Phase::Turn);
        let st = input(&mut s, r#"{"type":"interrupt"}"#).unwrap();
        assert_eq!(json_of(&st.to_agent[0])["request"]["subtype"], "interrupt");
        s.agent_line(br#"{"type":"result","subtype":"error_during_execution","is_error":true}"#, 1);
        assert_eq!(s.phase(), Phase::Idle);
        assert!(input(&mut s, r#"{"type":"interrupt"}"#).unwrap().to_agent.is_empty(), "nothing to interrupt");
        let st = s.input_closed(2);
        assert!(st.close_agent_input);
        assert_eq!(s.phase(), Phase::Ended);
        assert_eq!(input(&mut s, r#"{"type":"message","text":"x"}"#), Err(Refused::Ended));
    }
}
