//! Codex's requests to the session (its server requests: approvals,
//! permissions, questions, elicitations, dynamic tools) read into
//! [`InputRequest`]s, and what codex may be told in answer.

use super::super::AnswerInput;
use crate::pipeline::events::{InputKind, InputRequest, Question, Scope};
use crate::pipeline::normalize::elicit::{elicitation, Elicit, Field};
use serde_json::{json, Map, Value};

/// The name of runwire's question tool (the one the recorded client registered).
pub const QUESTION_TOOL: &str = "AskUserQuestion";
/// The decisions a permission-profile approval offers: granted for the
/// turn (codex's default scope) or for the session.
const PERMISSION_DECISIONS: [&str; 2] = ["accept", "acceptForSession"];
/// The `tool` of an MCP elicitation's request.
pub const ELICITATION_TOOL: &str = "mcp_elicitation";
/// The `tool` of a permission-profile approval's request.
pub const PERMISSIONS_TOOL: &str = "permissions";

pub(super) fn now_secs() -> i64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// A server request waiting for a person.
#[derive(Debug, Clone)]
pub(super) enum Asked {
    /// Command or file change approval; the decisions codex offered.
    Approval { available: Vec<Value> },
    /// runwire's `AskUserQuestion` dynamic tool.
    Tool { arguments: Value },
    /// Codex's own `requestUserInput`: question text → question id.
    UserInput { ids: Vec<(String, String)> },
    /// A permission-profile approval: the profile codex asked for (granted as asked).
    Permissions { asked: Value },
    /// An MCP server's form elicitation: one question per field.
    Form { fields: Vec<Field> },
    /// An MCP server's elicitation a person accepts or declines (a URL to
    /// visit, or a form with no fields): `content` is `{}` for a form.
    Confirm { content: Option<Value> },
}

pub(super) fn line(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize infallibly")
}

pub(super) fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A dynamic tool's result: one text item.
pub(super) fn tool_text(id: &Value, text: &str, success: bool) -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "id": id,
        "result": {"contentItems": [{"type": "inputText", "text": text}], "success": success}}))
}

/// Refuses a server request nobody here will answer.
fn refuse(id: &Value, method: &str, to_agent: &mut Vec<Vec<u8>>) {
    refuse_why(id, &format!("runwire-session does not handle {method}"), to_agent);
}

fn refuse_why(id: &Value, why: &str, to_agent: &mut Vec<Vec<u8>>) {
    to_agent.push(line(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": why}})));
}

/// A server request codex sent: the request it raises and how it is
/// answered (the caller keeps it), or `None` when it was answered at once.
/// `questions`: runwire's question tool is registered.
pub(super) fn server_request(
    questions: bool,
    id: &Value,
    method: &str,
    p: &Value,
    to_agent: &mut Vec<Vec<u8>>,
) -> Option<(InputRequest, Asked)> {
    let rid = id_text(id);
    let s = |k: &str| p.get(k).and_then(Value::as_str).filter(|x| !x.is_empty()).map(str::to_string);
    let (req, asked) = match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            let command = method.starts_with("item/command");
            let mut input = Map::new();
            for k in ["command", "cwd", "commandActions", "grantRoot", "networkApprovalContext"] {
                if let Some(x) = p.get(k).filter(|x| !x.is_null()) {
                    input.insert(k.into(), x.clone());
                }
            }
            let available = p.get("availableDecisions").and_then(Value::as_array).cloned().unwrap_or_else(|| {
                // File changes name no list: the protocol's own four.
                vec![json!("accept"), json!("acceptForSession"), json!("decline"), json!("cancel")]
            });
            let req = InputRequest {
                interrupt_id: None,
                id: rid.clone(),
                kind: InputKind::ToolApproval,
                tool_call_id: s("itemId"),
                tool: Some(if command { "command_execution" } else { "file_change" }.into()),
                input: Some(Value::Object(input)),
                suggestions: Some(available.clone()),
                questions: None,
                message: s("reason"),
                expires_at: None,
                blocking: None,
            };
            (req, Asked::Approval { available })
        }
        "item/tool/call" if p.get("tool").and_then(Value::as_str) == Some(QUESTION_TOOL) && questions => {
            let arguments = p.get("arguments").cloned().unwrap_or_else(|| json!({}));
            let questions = super::super::questions_of(&arguments);
            if questions.is_empty() {
                to_agent.push(tool_text(id, "AskUserQuestion needs at least one question with options", false));
                return None;
            }
            let req = InputRequest {
                interrupt_id: None,
                id: rid.clone(),
                kind: InputKind::Question,
                tool_call_id: s("callId"),
                tool: Some(QUESTION_TOOL.into()),
                input: Some(arguments.clone()),
                suggestions: None,
                questions: Some(questions),
                message: None,
                expires_at: None,
                blocking: None,
            };
            (req, Asked::Tool { arguments })
        }
        "item/tool/call" => {
            let tool = p.get("tool").and_then(Value::as_str).unwrap_or("?");
            to_agent.push(tool_text(id, &format!("no dynamic tool {tool:?} is registered by runwire"), false));
            return None;
        }
        "item/tool/requestUserInput" => {
            let qs = p.get("questions").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut ids = Vec::new();
            let mut questions = Vec::new();
            for q in &qs {
                let (Some(qid), Some(text)) =
                    (q.get("id").and_then(Value::as_str), q.get("question").and_then(Value::as_str))
                else {
                    continue;
                };
                ids.push((text.to_string(), qid.to_string()));
                questions.push(Question {
                    question: text.to_string(),
                    header: q.get("header").and_then(Value::as_str).map(str::to_string),
                    options: super::super::options_of(q.get("options")),
                    multi_select: false,
                    // codex's own clients then add "None of the above" and a note.
                    free_text: q.get("isOther").and_then(Value::as_bool).unwrap_or(false),
                });
            }
            let req = InputRequest {
                interrupt_id: None,
                id: rid.clone(),
                kind: InputKind::Question,
                tool_call_id: s("itemId"),
                tool: Some("request_user_input".into()),
                input: Some(json!({"questions": qs})),
                suggestions: None,
                questions: Some(questions),
                message: None,
                expires_at: None,
                // `isBlocking: false`: codex goes on working while it waits.
                blocking: (p.get("isBlocking") == Some(&Value::Bool(false))).then_some(false),
            };
            (req, Asked::UserInput { ids })
        }
        "item/permissions/requestApproval" => {
            let asked = p.get("permissions").filter(|x| x.is_object()).cloned().unwrap_or_else(|| json!({}));
            let mut input = Map::new();
            input.insert("permissions".into(), asked.clone());
            if let Some(c) = p.get("cwd").filter(|x| !x.is_null()) {
                input.insert("cwd".into(), c.clone());
            }
            let req = InputRequest {
                interrupt_id: None,
                id: rid.clone(),
                kind: InputKind::ToolApproval,
                tool_call_id: s("itemId"),
                tool: Some(PERMISSIONS_TOOL.into()),
                input: Some(Value::Object(input)),
                suggestions: Some(PERMISSION_DECISIONS.iter().map(|d| json!(d)).collect()),
                questions: None,
                message: Some(s("reason").map_or_else(
                    || "codex asks for more permissions".to_string(),
                    |r| format!("codex asks for more permissions: {r}"),
                )),
                expires_at: None,
                blocking: None,
            };
            (req, Asked::Permissions { asked })
        }
        "mcpServer/elicitation/request" => {
            let server = s("serverName").unwrap_or_else(|| "an MCP server".into());
            let e = match elicitation(p) {
                Ok(e) => e,
                Err(_) => {
                    // Declined at once; the log's reader says why (a `runwire.notice`).
                    to_agent.push(line(&json!({"jsonrpc": "2.0", "id": id, "result": {"action": "decline"}})));
                    return None;
                }
            };
            let mut input = p.clone();
            if let Some(o) = input.as_object_mut() {
                o.remove("threadId");
                o.remove("turnId");
            }
            let said = s("message").unwrap_or_default();
            let (kind, questions, message, asked) = match e {
                Elicit::Form(fields) => {
                    let qs = fields.iter().map(Field::as_question).collect();
                    (InputKind::Question, Some(qs), format!("{server} asks: {said}"), Asked::Form { fields })
                }
                Elicit::Confirm { content } => {
                    let message = match s("url") {
                        Some(u) if content.is_none() => format!("{server} asks you to open {u}: {said}"),
                        _ => format!("{server} asks: {said}"),
                    };
                    (InputKind::ToolApproval, None, message, Asked::Confirm { content })
                }
            };
            let req = InputRequest {
                interrupt_id: None,
                id: rid.clone(),
                kind,
                tool_call_id: None,
                tool: Some(ELICITATION_TOOL.into()),
                input: Some(input),
                suggestions: None,
                questions,
                message: Some(message),
                expires_at: None,
                blocking: None,
            };
            (req, asked)
        }
        // Machine requests, answered at once.
        "currentTime/read" => {
            to_agent.push(line(&json!({"jsonrpc": "2.0", "id": id, "result": {"currentTimeAt": now_secs()}})));
            return None;
        }
        "account/chatgptAuthTokens/refresh" => {
            refuse_why(
                id,
                "runwire holds no ChatGPT tokens (it never logs codex in with external tokens): codex keeps its own login",
                to_agent,
            );
            return None;
        }
        "attestation/generate" => {
            refuse_why(id, "runwire cannot attest this client: it has no attestation token to give", to_agent);
            return None;
        }
        other => {
            refuse(id, other, to_agent);
            return None;
        }
    };
    Some((req, asked))
}

/// What codex can be told in answer to `req` (its record: `suggestions`
/// are the decisions codex offered): no edited input, and allow-for-session
/// only where codex offered `acceptForSession`. [`Agent::check_answer`](super::super::Agent::check_answer), for
/// a runner that holds the record and not the protocol object (the supervisor).
pub fn check_answer(req: &InputRequest, a: &AnswerInput) -> Result<(), String> {
    if a.updated_input.is_some() {
        return Err("codex runs the request as asked: it takes no edited input (allow or deny it)".into());
    }
    if req.kind == InputKind::ToolApproval {
        let available = req.suggestions.clone().unwrap_or_default();
        let missing = match a.scope {
            Some(Scope::Session) => !available.iter().any(|x| x.as_str() == Some("acceptForSession")),
            Some(Scope::Always) => amendment(&available).is_none(),
            _ => false,
        };
        if missing {
            let what = if a.scope == Some(Scope::Always) {
                "always (an execpolicy or network amendment)"
            } else {
                "for the session"
            };
            return Err(format!("codex did not offer to allow this {what} (it offered {})", Value::Array(available)));
        }
    }
    // An MCP form's numbers must be numbers (the server checks the content).
    if let (InputKind::Question, Some(ELICITATION_TOOL), Some(given)) = (req.kind, req.tool.as_deref(), &a.answers) {
        if let Some(Ok(Elicit::Form(fields))) = req.input.as_ref().map(elicitation) {
            for f in &fields {
                if let Some(t) = given.get(&f.question).and_then(Value::as_str) {
                    f.value(t)?;
                }
            }
        }
    }
    Ok(())
}

/// The first persistent grant among codex's `availableDecisions`: an object
/// decision (`{"acceptWithExecpolicyAmendment": …}`, its "always allow this
/// command"; `{"applyNetworkPolicyAmendment": …}`), which codex saves.
pub fn amendment(available: &[Value]) -> Option<&Value> {
    available.iter().find(|d| d.as_object().is_some_and(|o| o.len() == 1))
}

/// What a codex decision of `availableDecisions` grants, in words (for the card).
pub fn decision_effect(d: &Value) -> Option<(Scope, String)> {
    match d {
        Value::String(s) if s == "accept" => Some((Scope::Once, "accept: run it this once".into())),
        Value::String(s) if s == "acceptForSession" => {
            Some((Scope::Session, "acceptForSession: allow it for the rest of this session".into()))
        }
        Value::Object(o) => {
            let (k, v) = o.iter().next()?;
            let what = match k.as_str() {
                "acceptWithExecpolicyAmendment" => {
                    let prefix = v
                        .get("execpolicy_amendment")
                        .and_then(Value::as_array)
                        .map(|p| p.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "));
                    format!(
                        "always allow commands starting with {:?}, saved by the agent (execpolicy)",
                        prefix.unwrap_or_default()
                    )
                }
                "applyNetworkPolicyAmendment" => format!("always apply the network rule {v}, saved by the agent"),
                other => format!("{other} {v}, saved by the agent"),
            };
            Some((Scope::Always, what))
        }
        _ => None,
    }
}
