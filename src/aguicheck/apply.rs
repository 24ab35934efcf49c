//! What the client's reducer (`@ag-ui/client` 1.0.0 `src/apply/default.ts`)
//! does with an event the sequence checks passed: the messages it holds,
//! the warnings it gives, an activity's content as its deltas make it.

use super::*;

/// The protocol version `@ag-ui/client` 1.0.0 speaks (`PROTOCOL_VERSION`).
const SPOKEN: &str = "1.0";

/// What the client says of a producer's declared version
/// (`compareDeclaredProtocol` in `src/agent/agent.ts`): nothing when it is
/// 1.0 or older; a warning when it is not two numeric components
/// (`/^\d+\.\d+$/`: "1.0.0", "", "1") or is newer ("2.0", "1.1").
fn declared_version(v: &str) -> Option<String> {
    let parts: Vec<&str> = v.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() != 2 || !parts.iter().all(numeric) {
        return Some(format!(
            "protocolVersion {v:?} is not MAJOR.MINOR: the client warns that it cannot interpret it (this version is {SPOKEN:?})"
        ));
    }
    // Compared by value, as compare-versions does: "1.00" is "1.0".
    let value = |p: &str| {
        let p = p.trim_start_matches('0');
        (p.len(), p.to_string())
    };
    let (major, minor) = (value(parts[0]), value(parts[1]));
    ((major, minor) > (value("1"), value("0"))).then(|| {
        format!("protocolVersion {v:?} is newer than the client's {SPOKEN:?}: it warns that it will strip what it does not know")
    })
}

impl Checker {
    /// A place at the end of the client's list.
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A message pushed at the end of the client's list: held, unless a
    /// message under its id comes before it. Returns its place.
    fn push(&mut self, id: &str, role: &str, content: Option<Value>) -> u64 {
        let seq = self.next_seq();
        if !self.held.contains_key(id) {
            self.held.insert(id.to_string(), held(role, seq, content));
        }
        seq
    }

    /// Notes the `activityType` of the held activity `id` from `m` (a
    /// message or an ACTIVITY_SNAPSHOT), when it is one.
    fn typed(&mut self, id: &str, m: &Value) {
        if let Some(h) = self.held.get(id).filter(|h| h.role == "activity").cloned() {
            let mut h = h;
            h.activity_type = m.get("activityType").and_then(Value::as_str).map(str::to_string);
            self.held.insert(id.to_string(), h);
        }
    }

    fn role_of(&self, id: &str) -> Option<&str> {
        self.held.get(id).map(|h| h.role.as_str())
    }

    /// The tool call `id` as the client holds it: gone once the message
    /// holding it was replaced by one of another kind (an activity).
    fn live_call(&self, id: &str) -> Option<&Call> {
        self.calls.get(id).filter(|c| match self.held.get(&c.holder) {
            Some(h) if h.seq == c.seq => h.role == "assistant",
            _ => true,
        })
    }

    /// The tool calls of a message at place `seq` (a message's own, as the
    /// client holds them), each kept unless already held.
    fn hold_calls(&mut self, m: &Value, id: &str, seq: u64) {
        for tc in m.get("toolCalls").and_then(Value::as_array).into_iter().flatten() {
            if let (Some(tid), Some(name)) =
                (tc.get("id").and_then(Value::as_str), tc.pointer("/function/name").and_then(Value::as_str))
            {
                if self.live_call(tid).is_none() {
                    let call = Call { name: name.to_string(), holder: id.to_string(), seq };
                    self.calls.insert(tid.to_string(), call);
                }
            }
        }
    }

    /// Messages the client already holds (the request's): each pushed.
    pub(super) fn hold_messages(&mut self, msgs: &[Value]) {
        for m in msgs {
            let (Some(id), Some(role)) = (m.get("id").and_then(Value::as_str), m.get("role").and_then(Value::as_str))
            else {
                continue;
            };
            let content = (role == "activity").then(|| activity_content(m.get("content")));
            let seq = self.push(id, role, content);
            self.typed(id, m);
            self.hold_calls(m, id, seq);
        }
    }

    /// A MESSAGES_SNAPSHOT as the reducer applies it: the held messages it
    /// names become its (the last of them under an id, in place), those it
    /// does not name go (but client-only kinds it does not carry), and the
    /// new ones are pushed in its order.
    fn snapshot(&mut self, msgs: &[Value], auth: &Authoritative) {
        let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_string);
        let has = |r: &str| msgs.iter().any(|m| role(m).as_deref() == Some(r));
        let (activity, reasoning) = (has("activity"), has("reasoning"));
        let mut last: HashMap<&str, &Value> = HashMap::new();
        for m in msgs {
            if let Some(id) = m.get("id").and_then(Value::as_str) {
                last.insert(id, m);
            }
        }
        self.held.retain(|id, h| {
            last.contains_key(id.as_str())
                || (h.role == "activity" && auth.keeps(h.activity_type.as_deref(), activity))
                || (h.role == "reasoning" && !reasoning)
        });
        self.calls.retain(|_, _| false);
        self.held_capped = false;
        // In place: the snapshot's last message under each id the client held.
        let mut placed: HashMap<&str, u64> = HashMap::new();
        for (id, m) in &last {
            if let Some(h) = self.held.get(id) {
                let seq = h.seq;
                let r = role(m).unwrap_or_default();
                let content = (r == "activity").then(|| activity_content(m.get("content")));
                self.held.insert(id.to_string(), held(&r, seq, content));
                self.typed(id, m);
                placed.insert(id, seq);
            }
        }
        for m in msgs {
            let Some(id) = m.get("id").and_then(Value::as_str) else { continue };
            let seq = match placed.get(id) {
                // Replaced in place: its calls are the last message's.
                Some(&seq) if std::ptr::eq(last[id], m) => seq,
                Some(_) => continue,
                None => {
                    let r = role(m).unwrap_or_default();
                    let content = (r == "activity").then(|| activity_content(m.get("content")));
                    let seq = self.push(id, &r, content);
                    self.typed(id, m);
                    seq
                }
            };
            self.hold_calls(m, id, seq);
        }
    }

    /// What the client's reducer does with an event the sequence checks
    /// passed, as far as it can go wrong: a continuation for a message or
    /// tool call it no longer holds, an id held by a message of another
    /// kind, an activity patch that does not apply. It warns, and drops or
    /// redirects the event.
    pub(super) fn apply(&mut self, ty: &str, ev: &Map<String, Value>, out: &mut Vec<Finding>) {
        let id = |k: &str| s(ev, k).unwrap_or_default().to_string();
        let mut find = |c: &Checker, rule: &'static str, m: String| out.push(c.at(rule, Some(ty), m));
        match ty {
            "RUN_STARTED" => {
                // The client's own subscriber reads the declaration (a warning; the run goes on).
                if let Some(m) = s(ev, "protocolVersion").and_then(declared_version) {
                    find(self, "run.protocol-version", m);
                }
                if let Some(msgs) = ev.get("input").and_then(|i| i.get("messages")).and_then(Value::as_array) {
                    self.hold_messages(msgs);
                }
            }
            "MESSAGES_SNAPSHOT" => {
                if let Some(msgs) = ev.get("messages").and_then(Value::as_array) {
                    self.snapshot(msgs, &Authoritative::of(ev));
                }
            }
            "TEXT_MESSAGE_START"
            | "REASONING_MESSAGE_START"
            | "TEXT_MESSAGE_CONTENT"
            | "TEXT_MESSAGE_END"
            | "REASONING_MESSAGE_CONTENT"
            | "REASONING_MESSAGE_END" => {
                let mid = id("messageId");
                let starts = ty.ends_with("_START");
                match self.role_of(&mid) {
                    Some("activity") => find(
                        self,
                        "message.role",
                        format!("{ty} for '{mid}', an activity message's id: the client drops the event"),
                    ),
                    Some(_) => {}
                    None if starts => {
                        let role = if ty == "REASONING_MESSAGE_START" {
                            "reasoning"
                        } else {
                            s(ev, "role").unwrap_or("assistant")
                        };
                        self.push(&mid, role, None);
                    }
                    None if !self.held_capped => find(
                        self,
                        "message.held",
                        format!("{ty} for '{mid}', a message the client no longer holds (a MESSAGES_SNAPSHOT without it dropped it)"),
                    ),
                    None => {}
                }
            }
            "TOOL_CALL_START" => {
                let (tid, name) = (id("toolCallId"), id("toolCallName"));
                if let Some(was) = self.live_call(&tid).cloned() {
                    if was.name != name {
                        let m = format!(
                            "TOOL_CALL_START for '{tid}', a call the client holds as {:?}: it renames it {name:?}",
                            was.name
                        );
                        find(self, "message.role", m);
                        self.calls.insert(tid, Call { name, ..was });
                    }
                    return;
                }
                // resolveOrCreateAssistantMessage: the parent when it is an
                // assistant message, else a new one (under the toolCallId
                // when the parent's id is another kind's).
                let (holder, seq) = match s(ev, "parentMessageId") {
                    Some(parent) => match self.held.get(parent).map(|h| (h.role.clone(), h.seq)) {
                        Some((role, seq)) if role == "assistant" => (parent.to_string(), seq),
                        Some((role, _)) => {
                            find(
                                self,
                                "message.role",
                                format!("TOOL_CALL_START '{tid}' names parentMessageId '{parent}', a {role} message, not the assistant's: the client files the call elsewhere"),
                            );
                            (tid.clone(), self.push(&tid, "assistant", None))
                        }
                        None => (parent.to_string(), self.push(parent, "assistant", None)),
                    },
                    None => (tid.clone(), self.push(&tid, "assistant", None)),
                };
                self.calls.insert(tid, Call { name, holder, seq });
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let tid = id("toolCallId");
                if self.live_call(&tid).is_none() && !self.held_capped {
                    find(
                        self,
                        "message.held",
                        format!("{ty} for '{tid}', a tool call the client no longer holds (a MESSAGES_SNAPSHOT without its message, or an ACTIVITY_SNAPSHOT over it, dropped it)"),
                    );
                }
            }
            "TOOL_CALL_RESULT" => {
                // The tool message goes in after the assistant message holding
                // the call (pushed last when none does): it is the first under
                // its id only if no message under that id comes before.
                let (mid, tid) = (id("messageId"), id("toolCallId"));
                let owner = self.live_call(&tid).map(|c| c.seq);
                match (self.held.get(&mid).map(|h| (h.role.clone(), h.seq)), owner) {
                    (None, Some(at)) => {
                        self.held.insert(mid, held("tool", at, None));
                    }
                    (None, None) => {
                        self.push(&mid, "tool", None);
                    }
                    (Some((role, seq)), Some(at)) if seq > at && role != "tool" => {
                        self.held.insert(mid, held("tool", at, None));
                    }
                    (Some(_), _) => {}
                }
            }
            "ACTIVITY_SNAPSHOT" => {
                let mid = id("messageId");
                let replace = ev.get("replace") != Some(&Value::Bool(false));
                let content = activity_content(ev.get("content"));
                if json_len(&content) > MAX_ACTIVITY {
                    let m = format!("activity '{mid}' over {} MiB: its deltas go unchecked", MAX_ACTIVITY >> 20);
                    let mut more = Vec::new();
                    self.limit(&mut more, ty, m);
                    for f in more {
                        find(self, f.rule, f.message);
                    }
                }
                let content = Some(content);
                let ev_type = Value::Object(ev.clone());
                match self.held.get(&mid).map(|h| h.seq) {
                    None => {
                        self.push(&mid, "activity", content);
                        self.typed(&mid, &ev_type);
                    }
                    // Replaced in place, whatever it was (its tool calls with it); or kept as it is.
                    Some(seq) if replace => {
                        self.held.insert(mid.clone(), held("activity", seq, content));
                        self.typed(&mid, &ev_type);
                    }
                    Some(_) => {}
                }
            }
            "ACTIVITY_DELTA" => {
                let mid = id("messageId");
                let Some(h) = self.held.get(&mid) else { return };
                if h.role != "activity" {
                    let m = format!("ACTIVITY_DELTA for '{mid}', a {} message: the client drops it", h.role);
                    return find(self, "message.role", m);
                }
                let (Some(content), Some(patch)) = (&h.content, ev.get("patch").and_then(Value::as_array)) else {
                    return;
                };
                match patch::apply(content, patch) {
                    Ok(next) => {
                        let mut h = h.clone();
                        h.content_bytes += patch.iter().map(json_len).sum::<usize>();
                        h.content = Some(next);
                        if h.content_bytes > MAX_ACTIVITY {
                            h.content = None;
                            h.content_bytes = 0;
                            let m = format!(
                                "activity '{mid}' over {} MiB: its later deltas go unchecked",
                                MAX_ACTIVITY >> 20
                            );
                            let mut more = Vec::new();
                            self.limit(&mut more, ty, m);
                            for f in more {
                                find(self, f.rule, f.message);
                            }
                        }
                        // The delta's type is the activity's now (as the client sets it).
                        h.activity_type = s(ev, "activityType").map(str::to_string);
                        self.held.insert(mid, h);
                    }
                    Err(e) => find(
                        self,
                        "activity.delta-applies",
                        format!("the patch does not apply to activity '{mid}' (the client warns and skips it): {e}"),
                    ),
                }
            }
            _ => {}
        }
    }
}
