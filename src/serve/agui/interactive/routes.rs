//! The task routes of a session this server holds
//! (`POST /runs/:id/tasks/agent/answer|steer|stop|kill`): the same session
//! and the same rules as a run on its thread; the rules themselves are the
//! session's (its `answer`, `steer` and `stop` inputs), each acknowledged
//! with what it did.

use super::threads::{lock, send, Ending, NotSent, State, Thread};
use crate::control::{Command, Reply, Verb};
use crate::runs::record::TASK;
use crate::serve::http::{respond, respond_error, Close};
use crate::serve::state::Shared;
use crate::session::engine::Engine;
use crate::session::input::{AnswerInput, Input, SteerInput, Who};
use crate::session::Ack;
use serde_json::json;
use std::io::Write;

/// `POST /runs/:id/tasks/:tid/answer|steer|stop|kill` for a session this
/// server holds; `None` when `id` is not one (the caller goes on to the
/// supervisor). The thread's lock is held only to read which agent process
/// the run is and take a handle to its session: the command is sent and its
/// reply awaited with no lock held (the session's loop resolves an
/// interrupt id against its own process's requests), and the reply is
/// written to the client after it. Nothing here waits for the agent: an agent that
/// does not read its input gets `503` with `Retry-After`, and `kill` waits
/// only for the process group to be gone (its grace, then SIGKILL).
/// `person`: the name of the caller's named token, journaled as `by`.
#[allow(clippy::too_many_arguments)]
pub fn control_post(
    shared: &Shared,
    stream: &mut impl Write,
    id: &str,
    task: &str,
    verb: &str,
    body: &[u8],
    cors: &[(&'static str, String)],
    person: Option<&str>,
    door: crate::control::Door,
) -> Option<Close> {
    let th = shared.sessions.by_record(id)?;
    if task != TASK {
        respond_error(stream, 404, cors, &format!("run {id} has one task, {TASK:?}"));
        return Some(Close::Linger);
    }
    if !Verb::parse(verb).is_some_and(|v| Verb::TASK_ROUTE.contains(&v)) {
        return None;
    }
    // A recorded run is one agent process of the thread: once the thread's
    // agent was started again (its session is another run), the old run's
    // routes act on nothing (a stale answer to request "0" must not answer
    // the new process's request "0").
    // The record and the handle are read together: the handle is the
    // session of the process this run records.
    // A start under way is not waited for: it records a new run (every
    // agent process the thread starts is its own run), so a route naming
    // a run of the thread names an earlier process, which is gone.
    let (current, agent) = {
        let st = lock(&th.st);
        (st.record_id.clone(), st.engine())
    };
    if current.as_deref() != Some(id) {
        let now = current.map_or(String::new(), |c| format!("; the thread's session is now run {c}"));
        let detail = format!("run {id}'s agent process has ended{now}: nothing was sent");
        let _ = respond(stream, 409, cors, &json!({"ok": false, "detail": detail}).to_string());
        return Some(Close::Linger);
    }
    // One parse, one validation, for every door (`crate::control`): an
    // answer names its request by runwire's interrupt id here too, as on
    // the supervisor's routes (only a session's own input lines may use
    // the agent's id, spec/SESSION-INPUT.md).
    let command = match Verb::parse(verb)
        .ok_or_else(|| format!("unknown verb {verb:?}"))
        .and_then(|v| Command::from_route(v, body, person.unwrap_or("task route")))
        .and_then(|c| c.check_bound().map(|()| c))
    {
        // A person's token names them; the body cannot name someone else.
        Ok(c) => match person {
            Some(p) => c.by_person(p),
            None => c,
        },
        Err(m) => {
            respond_error(stream, 400, cors, &m);
            return Some(Close::Linger);
        }
    };
    let r = if let Command::Kill = command {
        // Taken off the thread under its lock, stopped after it.
        let gone = {
            // Still this run's process (a message may have started
            // another since the check above): else nothing is killed.
            let mut st = lock(&th.st);
            if st.record_id.as_deref() == Some(id) {
                st.agent_gone(Ending::Killed)
            } else {
                None
            }
        };
        if let Some(g) = gone {
            // A named person's kill is journaled with their name.
            match person {
                Some(p) => g.killed_by(p).stop(),
                None => g.stop(),
            }
        }
        Reply::ok(
            "the session's process group was killed; the next message on the thread starts it again with --resume",
            None,
        )
    } else {
        match agent {
            None => {
                let m = "the session is not running (it ended or was killed); the next message on its thread starts it again with --resume";
                Reply::refuse(m, None)
            }
            // No lock is held from here: the route waits for the loop's reply only.
            Some(agent) => match command {
                Command::Answer { answer } => answer_route(&agent, answer, door),
                Command::Steer { text, interrupt, turn } => {
                    steer_route(&agent, text, interrupt, turn, person.unwrap_or("steer"))
                }
                _ => stop_route(&agent, person.unwrap_or("stop")),
            },
        }
    };
    match r.http_status() {
        400 => respond_error(stream, 400, cors, &r.detail),
        503 => {
            let h = crate::serve::http::with_retry(cors, 503);
            let _ = respond(stream, 503, &h, &serde_json::to_string(&r).unwrap_or_default());
        }
        code => {
            let _ = respond(stream, code, cors, &serde_json::to_string(&r).unwrap_or_default());
        }
    }
    Some(Close::Linger)
}

/// What the session said, as the reply of every door.
fn not_sent(e: NotSent) -> Reply {
    match e {
        NotSent::Refused(m) => Reply::refuse(m, None),
        NotSent::Invalid(m) => Reply::bad(m),
        NotSent::NotReading(m) => Reply { code: Some(crate::control::NOT_READING.into()), ..Reply::refuse(m, None) },
    }
}

fn answer_route(agent: &Engine, mut a: AnswerInput, door: crate::control::Door) -> Reply {
    a.door = a.door.or(Some(door));
    // An interrupt id names its request only in the process that raised it:
    // sent as it is, the session's loop resolves it against its own
    // process's requests and refuses any other (`send`).
    match send(Some(agent), Input::Answer(a)).map(|t| t.replayed) {
        Ok(replayed) => Reply::answered(!replayed, if replayed { Ack::Replay } else { Ack::Taken }.to_string(), None),
        Err(e) => not_sent(e),
    }
}

fn steer_route(agent: &Engine, text: String, interrupt: bool, turn: Option<u64>, by: &str) -> Reply {
    // The steer rules are the session's (`steer` input): its answer says what it did.
    // A steer that starts a turn of its own keeps the session mid-turn:
    // the streaming run follows it to its end.
    match send(Some(agent), Input::Steer(SteerInput { text, interrupt, turn, by: Some(by.into()) })) {
        Ok(t) => Reply { live: Some(true), ..Reply::ok(t.ack.to_string(), None) },
        Err(e) => not_sent(e),
    }
}

fn stop_route(agent: &Engine, by: &str) -> Reply {
    // The stop rules are the session's (`stop` input): open requests
    // cancelled, then the turn interrupted; nothing when nothing runs.
    match send(Some(agent), Input::Stop(Who { by: Some(by.into()) })) {
        Ok(t) => Reply::ok(t.ack.to_string(), None),
        Err(e) => not_sent(e),
    }
}

/// An approval link's session, locked, if the link still names a request
/// of it: the run is this thread's current agent process and runs, and the
/// request (when this server streamed it) is still open. `Err`: why the
/// link is no longer valid (a later process superseded it, or it was used).
fn link_state<'a>(
    th: &'a Thread,
    c: &crate::serve::link_keys::Claims,
) -> Result<std::sync::MutexGuard<'a, State>, String> {
    let st = lock(&th.st);
    if st.record_id.as_deref() != Some(c.r.as_str()) || st.agent.is_none() {
        return Err("The agent process that asked has ended (the thread's agent was started again, or stopped): this link is superseded. Nothing was done.".into());
    }
    if let Some(rid) = st.raised.request_of(&c.i) {
        if !st.open().iter().any(|o| o == rid) {
            return Err(
                "This request was already answered, or its time ran out: this link is used. Nothing was done.".into()
            );
        }
    }
    Ok(st)
}

fn link_thread(shared: &Shared, c: &crate::serve::link_keys::Claims) -> Result<std::sync::Arc<Thread>, String> {
    if c.t != TASK {
        return Err("This link names no task of this server. Nothing was done.".into());
    }
    shared.sessions.by_record(&c.r).ok_or_else(|| {
        "The run this link was minted for is no longer held by this server (it ended, or the server restarted). Nothing was done.".to_string()
    })
}

/// Whether this server's own session is what a link names (else the link
/// is a supervised run's: `super::super::super::supervisor`).
pub fn holds_link(shared: &Shared, c: &crate::serve::link_keys::Claims) -> bool {
    c.t == TASK && shared.sessions.by_record(&c.r).is_some()
}

/// `GET /a/<token>`: the request a valid link names (`None` inside when this
/// server did not stream it and has only the link's own claims to show).
pub fn link_request(
    shared: &Shared,
    c: &crate::serve::link_keys::Claims,
) -> Result<Option<crate::pipeline::events::InputRequest>, String> {
    let th = link_thread(shared, c)?;
    let st = link_state(&th, c)?;
    Ok(st.raised.request_of(&c.i).and_then(|rid| st.raised.get(rid)).map(|(r, _)| r.clone()))
}

/// `POST /a/<token>`: the link's answer, as every door gives one: a
/// [`Command`] checked by the one rule, then the session's own (open,
/// replay, the agent's offer). `by`: the name the link was minted for.
pub fn link_answer(
    shared: &Shared,
    c: &crate::serve::link_keys::Claims,
    decision: &str,
    reason: Option<String>,
    answers: Option<serde_json::Map<String, serde_json::Value>>,
) -> Reply {
    let th = match link_thread(shared, c) {
        Ok(t) => t,
        Err(m) => return Reply::refuse(m, None),
    };
    // The link's checks and the handle under the thread's lock; the answer
    // is sent after it is let go of.
    let agent = match link_state(&th, c) {
        Ok(st) => st.engine(),
        Err(m) => return Reply::refuse(m, None),
    };
    let Some(agent) = agent else {
        return Reply::refuse("The agent process that asked has ended. Nothing was done.", None);
    };
    let answer = match c.answer(decision, reason, answers) {
        Ok(a) => a,
        Err(m) => return Reply::bad(m),
    };
    // runwire's id, resolved by the session's loop against its own process's
    // requests (streamed here or not).
    answer_route(&agent, answer, crate::control::Door::Link)
}
