//! Codex's requests to the session (its server requests: approvals,
//! permissions, questions, elicitations, dynamic tools) read into
//! [`InputRequest`]s, and what codex may be told in answer.

use super::*;

impl Codex {
    /// A server request codex sent: the request it raises (and how it is
    /// answered, kept in `asked`), or `None` when it was answered at once.
    pub(super) fn server_request(
        &mut self,
        id: &Value,
        method: &str,
        p: &Value,
        to_agent: &mut Vec<Vec<u8>>,
    ) -> Option<Signal> {
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
            "item/tool/call" if p.get("tool").and_then(Value::as_str) == Some(QUESTION_TOOL) && self.opts.questions => {
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
                Self::refuse_why(
                    id,
                    "runwire holds no ChatGPT tokens (it never logs codex in with external tokens): codex keeps its own login",
                    to_agent,
                );
                return None;
            }
            "attestation/generate" => {
                Self::refuse_why(
                    id,
                    "runwire cannot attest this client: it has no attestation token to give",
                    to_agent,
                );
                return None;
            }
            other => {
                Self::refuse(id, other, to_agent);
                return None;
            }
        };
        self.asked.insert(rid, (id.clone(), asked));
        Some(Signal::Request(Box::new(req)))
    }
}

/// What codex can be told in answer to `req` (its record: `suggestions`
/// are the decisions codex offered): no edited input, and allow-for-session
/// only where codex offered `acceptForSession`. [`Agent::check_answer`], for
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
