//! The task routes of a session this server holds
//! (`POST /runs/:id/tasks/agent/answer|steer|stop|kill`): the same session
//! and the same rules as a run on its thread; the rules themselves are the
//! session's (its `answer`, `steer` and `stop` inputs), each acknowledged
//! with what it did.

use super::threads::{lock, Ending, NotSent, State};
use super::{Shared, TASK};
use crate::serve::http::{respond, respond_error, Close};
use crate::session::input::{Input, SteerInput, Who};
use serde_json::{json, Value};
use std::net::TcpStream;

/// Seconds a client is told to wait (`Retry-After`) when the agent does not read.
const RETRY_AFTER: &str = "1";

/// `POST /runs/:id/tasks/:tid/answer|steer|stop|kill` for a session this
/// server holds; `None` when `id` is not one (the caller goes on to the
/// supervisor). The answer is decided under the thread's lock and written
/// to the client after it; nothing here waits for the agent: an agent that
/// does not read its input gets `503` with `Retry-After`, and `kill` waits
/// only for the process group to be gone (its grace, then SIGKILL).
pub fn control_post(
    shared: &Shared,
    stream: &mut TcpStream,
    id: &str,
    task: &str,
    verb: &str,
    body: &[u8],
    cors: &[(&'static str, String)],
) -> Option<Close> {
    let th = shared.sessions.by_record(id)?;
    if task != TASK {
        respond_error(stream, 404, cors, &format!("run {id} has one task, {TASK:?}"));
        return Some(Close::Linger);
    }
    if !matches!(verb, "answer" | "steer" | "stop" | "kill") {
        return None;
    }
    // A recorded run is one agent process of the thread: once the thread's
    // agent was started again (its session is another run), the old run's
    // routes act on nothing (a stale answer to request "0" must not answer
    // the new process's request "0").
    let current = lock(&th.st).record_id.clone();
    if current.as_deref() != Some(id) {
        let now = current.map_or(String::new(), |c| format!("; the thread's session is now run {c}"));
        let detail = format!("run {id}'s agent process has ended{now}: nothing was sent");
        let _ = respond(stream, 409, cors, &json!({"ok": false, "detail": detail}).to_string());
        return Some(Close::Linger);
    }
    let v: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(body).unwrap_or(Value::Null) };
    let Value::Object(b) = v else {
        respond_error(stream, 400, cors, "the body must be a JSON object");
        return Some(Close::Linger);
    };
    let r = if verb == "kill" {
        // Taken off the thread under its lock, stopped after it.
        let gone = lock(&th.st).agent_gone(Ending::Killed);
        if let Some(g) = gone {
            g.stop();
        }
        Reply::Ok(
            json!({"ok": true, "detail": "the session's process group was killed; the next message on the thread starts it again with --resume"}),
        )
    } else {
        let mut st = lock(&th.st);
        if st.agent.is_none() {
            let m = "the session is not running (it ended or was killed); the next message on its thread starts it again with --resume";
            Reply::Conflict(m.into())
        } else {
            match verb {
                "answer" => answer_route(&mut st, b),
                "steer" => steer_route(&mut st, &b),
                _ => stop_route(&mut st),
            }
        }
    };
    match r {
        Reply::Ok(v) => {
            let _ = respond(stream, 200, cors, &v.to_string());
        }
        Reply::Conflict(m) => {
            let _ = respond(stream, 409, cors, &json!({"ok": false, "detail": m}).to_string());
        }
        Reply::NotReading(m) => {
            let mut h = cors.to_vec();
            h.push(("Retry-After", RETRY_AFTER.into()));
            let v = json!({"ok": false, "code": "agent_not_reading", "detail": m});
            let _ = respond(stream, 503, &h, &v.to_string());
        }
        Reply::Bad(m) => respond_error(stream, 400, cors, &m),
    }
    Some(Close::Linger)
}

/// A task route's answer, decided under the thread's lock.
enum Reply {
    Ok(Value),
    /// 409: the session refused it.
    Conflict(String),
    /// 503 + `Retry-After`: the agent does not read its input.
    NotReading(String),
    /// 400: the body is wrong.
    Bad(String),
}

impl From<NotSent> for Reply {
    fn from(e: NotSent) -> Reply {
        match e {
            NotSent::Refused(m) => Reply::Conflict(m),
            NotSent::NotReading(m) => Reply::NotReading(m),
        }
    }
}

fn answer_route(st: &mut State, b: serde_json::Map<String, Value>) -> Reply {
    // The session input's own answer, with `request` naming the id.
    let mut a = b.clone();
    let Some(mut rid) = a.remove("request") else {
        return Reply::Bad("answer body: request (the request id) is required".into());
    };
    // An interrupt id names its request only while the process that raised it runs.
    if let Some(iid) = rid.as_str().filter(|r| r.starts_with(crate::serve::interrupts::ID_PREFIX)) {
        match st.raised.request_of(iid) {
            Some(r) => rid = r.into(),
            None => {
                return Reply::Conflict(format!(
                    "interrupt {iid:?} is not one of this session's agent process (an earlier process's, another thread's, or forgotten): nothing was sent"
                ))
            }
        }
    }
    a.insert("id".into(), rid);
    a.insert("type".into(), "answer".into());
    a.entry("by").or_insert_with(|| "task route".into());
    // Answers to a question are held to its choices, as on /agui.
    if let (Some(Value::String(rid)), Some("answer")) = (a.get("id"), a.get("decision").and_then(Value::as_str)) {
        if let Some((req, interrupt)) = st.raised.get(rid) {
            let e = crate::serve::interrupts::ResumeEntry {
                interrupt_id: rid.clone(),
                status: "resolved".into(),
                payload: Some(json!({"answers": a.get("answers").cloned().unwrap_or(Value::Null)})),
            };
            if let Err(m) = crate::serve::interrupts::answer_for(req, interrupt, &e, "check") {
                return Reply::Bad(format!("answer body: {m}"));
            }
        }
    }
    let input = match Input::parse(Value::Object(a).to_string().as_bytes()) {
        Ok(i @ Input::Answer(_)) => i,
        Ok(_) | Err(_) => {
            let e = Input::parse(Value::Object(b).to_string().as_bytes()).err().unwrap_or_default();
            return Reply::Bad(format!("answer body: {{request, decision: allow|deny|answer|cancelled, scope?, updated_input?, answers?, message?, by?}} expected{}", if e.is_empty() { String::new() } else { format!(" ({e})") }));
        }
    };
    match st.send(input).map(|t| t.replayed) {
        Ok(replayed) => Reply::Ok(
            json!({"ok": true, "sent": !replayed, "detail": if replayed { "already decided the same way; not sent again" } else { "sent to the agent" }}),
        ),
        Err(e) => e.into(),
    }
}

fn steer_route(st: &mut State, b: &serde_json::Map<String, Value>) -> Reply {
    let text = match b.get("msg") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= crate::supervise::control::MAX_MSG => s.clone(),
        _ => return Reply::Bad("steer body: {\"msg\": non-empty string, \"interrupt\"?: bool}".into()),
    };
    let interrupt = b.get("interrupt").and_then(Value::as_bool).unwrap_or(false);
    // The steer rules are the session's (`steer` input): its answer says what it did.
    // A steer that starts a turn of its own keeps the session mid-turn:
    // the streaming run follows it to its end.
    match st.send(Input::Steer(SteerInput { text, interrupt, by: Some("steer".into()) })) {
        Ok(t) => Reply::Ok(json!({"ok": true, "live": true, "detail": t.ack.to_string()})),
        Err(e) => e.into(),
    }
}

fn stop_route(st: &mut State) -> Reply {
    // The stop rules are the session's (`stop` input): open requests
    // cancelled, then the turn interrupted; nothing when nothing runs.
    match st.send(Input::Stop(Who { by: Some("stop".into()) })) {
        Ok(t) => Reply::Ok(json!({"ok": true, "detail": t.ack.to_string()})),
        Err(e) => e.into(),
    }
}
