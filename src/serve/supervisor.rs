//! `POST /runs/:runId/tasks/:tid/steer|kill|stop|answer` and `POST /runs/:runId/pause|resume`:
//! the control verbs, passed to the run's supervisor over its socket
//! (`crate::supervise::socket`). The server keeps no state of its own
//! here: no supervisor answering is a `409`, never a silent success, and a
//! socket answered by anyone but the supervisor registered for the run is a
//! `502` with nothing sent (spec/SUPERVISOR.md, "Trust"), as is one that
//! takes the request and never replies, except
//! for a run that declares a steer inbox (`<slug>.steer.jsonl`), where
//! steer, pause and resume are appended for its runner to apply, up to
//! the steers' budget (`crate::supervise::records::STEER_BUDGET`).
//!
//! The router applied the browser boundary (Host, Origin, token), checked
//! the ids and read the body (JSON, where one is needed or sent), as for `/agui`.

use super::http::{respond, respond_error, Close};
use super::state::Shared;
use crate::control::{Command, Door, Issued, Verb};
use crate::runs::registry::Registry;
use crate::runs::view::{self, ViewError};
use crate::supervise::records::STEER_BUDGET;
use crate::supervise::socket::{self as control, CallError, Reply, NOT_LIVE};
use std::io::Write;
use std::time::Duration;

/// Longest wait for a supervisor's reply: a kill answers once the task's
/// group is gone, after at most its grace (`RUNWIRE_CONTROL_TIMEOUT_MS`
/// overrides, for tests).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn call_timeout() -> Duration {
    std::env::var("RUNWIRE_CONTROL_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(CALL_TIMEOUT, Duration::from_millis)
}

type Cors<'a> = &'a [(&'static str, String)];

fn reply(stream: &mut impl Write, cors: Cors, code: u16, r: &Reply) -> Close {
    // A 503 (a supervisor with no room for the call, an agent not reading)
    // did nothing: the client is told when to try again.
    let h = super::http::with_retry(cors, code);
    let _ = respond(stream, code, &h, &serde_json::to_string(r).unwrap_or_default());
    Close::Linger
}

/// Answers a control verb on run `id` (and `task`); the router checked
/// both ids and read the body (empty when none was sent; JSON for steer).
/// `person`: the name of the caller's named token, journaled as who gave
/// the command (else the server's name); `door`: the task route's, or the
/// hub's for a command a hub forwarded.
#[allow(clippy::too_many_arguments)]
pub fn post(
    shared: &Shared,
    stream: &mut impl Write,
    cors: Cors,
    id: &str,
    task: Option<&str>,
    verb: &str,
    body: &[u8],
    person: Option<&str>,
    door: Door,
) -> Close {
    // A session this server holds itself (interactive mode) answers here.
    if let Some(tid) = task {
        if let Some(close) =
            super::agui::interactive::control_post(shared, stream, id, tid, verb, body, cors, person, door)
        {
            return close;
        }
    }
    // Otherwise answer and stop go to the run's supervisor, which holds the
    // session of an interactive task (runwire-supervise --interactive) and
    // refuses them for a batch one.
    // One parse, one validation (`crate::control`); an answer names its
    // request by runwire's interrupt id, since the supervisor's task may
    // have had several agent processes that each number their requests.
    let actor = person.unwrap_or(super::options::BIN);
    let command = Verb::parse(verb)
        .ok_or_else(|| format!("unknown verb {verb:?}"))
        .and_then(|v| Command::from_route(v, body, actor))
        .and_then(|c| c.check_bound().map(|()| c))
        // A person's token names them; the body cannot name someone else.
        .map(|c| match person {
            Some(p) => c.by_person(p),
            None => c,
        });
    let command = match command {
        Ok(c) => c,
        Err(m) => {
            respond_error(stream, 400, cors, &m);
            return Close::Linger;
        }
    };
    let issued = Issued { door, actor: actor.into(), task: task.map(str::to_string), command };
    let Some(creq) = issued.to_request() else {
        respond_error(stream, 400, cors, &format!("{verb} is not a verb of a supervised run"));
        return Close::Linger;
    };
    let loaded = view::find(&Registry::at(&shared.cfg.harness_home), id);
    let loaded = match loaded {
        Ok(l) => l,
        Err(ViewError::Bad(m)) => {
            respond_error(stream, 400, cors, &m);
            return Close::Linger;
        }
        Err(ViewError::NotFound(m)) => {
            respond_error(stream, 404, cors, &m);
            return Close::Linger;
        }
        Err(ViewError::Unreadable(m)) => {
            respond_error(stream, 409, cors, &m);
            return Close::Linger;
        }
    };
    // A run whose pointer or directory cannot be read names no socket or inbox to trust.
    match &loaded.problem {
        Some(crate::runs::view::Problem::Missing) => {
            respond_error(stream, 404, cors, &format!("run {id:?}: its runstate directory is gone"));
            return Close::Linger;
        }
        Some(crate::runs::view::Problem::Unreadable(why)) if !loaded.pointer_ok => {
            respond_error(stream, 409, cors, why);
            return Close::Linger;
        }
        _ => {}
    }
    // The socket and who may answer on it come from $HARNESS_HOME, never
    // from the run's liveness file, which its agent can write.
    match control::call(&shared.cfg.harness_home, &loaded.pointer.run_id, &creq, call_timeout()) {
        Ok(r) => reply(stream, cors, r.http_status(), &r),
        // The registered supervisor took the request and said nothing (a
        // deaf or stopped process), or someone else answers: what happened
        // is unknown or nothing, so neither success nor the inbox.
        Err(CallError::Untrusted(why) | CallError::Broken(why)) => reply(stream, cors, 502, &Reply::refuse(why, None)),
        Err(CallError::NotLive(_)) => inbox(stream, cors, &loaded, &creq),
    }
}

/// No supervisor: a declared steer inbox takes steer, pause and resume,
/// on the terms a supervisor keeps: a task of the run, not ended, a run
/// not ended (a line nobody will read is refused, not accepted), and the
/// steers' budget ([`STEER_BUDGET`]: an inbox its runner does not empty
/// does not fill the disk). Every door comes here: the control and task
/// routes, and a hub's command, which the node's sidecar makes again as
/// the same request to this server.
fn inbox(stream: &mut impl Write, cors: Cors, loaded: &view::Loaded, creq: &control::Request) -> Close {
    let files = &loaded.files;
    let name = format!("{}.steer.jsonl", files.slug);
    let path = files.dir.join(&name);
    // Whether the runner declared one: a regular file, not followed if a
    // link (the write below refuses one too, whatever happens between).
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        return reply(stream, cors, 409, &Reply::refuse(NOT_LIVE, None));
    }
    if !matches!(Verb::parse(&creq.verb), Some(Verb::Steer | Verb::Pause | Verb::Resume)) {
        let r = Reply::refuse(
            format!("{NOT_LIVE}: the run has a steer inbox only, and {} needs a supervisor", creq.verb),
            None,
        );
        return reply(stream, cors, 409, &r);
    }
    if let Some(t) = creq.task.as_deref() {
        if !loaded.task_ids().iter().any(|k| k == t) {
            return reply(stream, cors, 409, &Reply::no_task(t));
        }
        if let Some(s) = loaded.journal.state(t).filter(|s| crate::runs::journal::is_terminal(s)) {
            return reply(stream, cors, 409, &Reply::terminal_task(t, s));
        }
    }
    let status = loaded.status();
    if matches!(status, "done" | "failed") {
        let r = Reply::refuse(format!("the run is {status}: nothing reads its steer inbox now"), Some(status.into()));
        return reply(stream, cors, 409, &r);
    }
    let mut rec = serde_json::json!({
        "v": "steer/v1",
        "ts": crate::util::time::format_ms(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
        ),
        "actor": creq.actor.as_deref().unwrap_or(super::options::BIN),
        "verb": creq.verb,
    });
    if let Some(t) = &creq.task {
        rec["task"] = t.clone().into();
    }
    if let Some(m) = &creq.msg {
        rec["msg"] = m.clone().into();
        rec["interrupt"] = creq.interrupt.unwrap_or(false).into();
    }
    let mut line = rec.to_string().into_bytes();
    line.push(b'\n');
    // One write of one line with O_APPEND, as for the journal; the
    // directory is the agent's to write, so the inbox is opened as every
    // file there is read: no symlink followed, only a regular file. It may
    // hold the steer text a supervised run's journal may ([`STEER_BUDGET`]):
    // a line past it is refused (409, as a supervisor's), nothing written.
    match crate::runs::safe::append_in(&files.dir, &name, &line, STEER_BUDGET) {
        Ok(()) => reply(stream, cors, 202, &Reply::ok(format!("appended to the steer inbox {}", path.display()), None)),
        Err(e) => {
            reply(stream, cors, 409, &Reply::refuse(format!("the steer inbox {}: {}", path.display(), e.why), None))
        }
    }
}

/// What a link says when its run has no live supervisor to answer it.
const LINK_NOT_LIVE: &str = "The run this link was minted for is not running here now (it ended, or its server or \
     supervisor stopped). Nothing was done.";

/// `GET /a/<token>` of a supervised run's task (the supervisor minted it:
/// `runwire-supervise --public-url`): the request the link names, while it
/// is open in the run's journal; `Err` (the page says why) once it was
/// answered, ran out, or the run is not here.
pub fn link_request(
    shared: &Shared,
    c: &crate::control::links::Claims,
) -> Result<Option<crate::pipeline::events::InputRequest>, String> {
    let loaded = view::find(&Registry::at(&shared.cfg.harness_home), &c.r)
        .map_err(|_| "The run this link was minted for is not on this server. Nothing was done.".to_string())?;
    // Open as the views show it: not answered, and its task not ended.
    let ended = loaded.journal.state(&c.t).is_some_and(crate::runs::journal::is_terminal);
    let open = loaded.journal.open.iter().find(|o| o.task == c.t && o.interrupt.as_deref() == Some(c.i.as_str()));
    let open = open.filter(|_| !ended);
    let Some(o) = open else {
        return Err(
            "This request was already answered, or its time ran out: this link is used. Nothing was done.".into()
        );
    };
    // Open in the journal is not enough: a supervisor killed without a word
    // leaves its requests open there. The run's registered supervisor, and
    // the task's process when it names one, must still be the ones running.
    let home = &shared.cfg.harness_home;
    let live = control::Owner::read(home, &c.r).is_some_and(|owner| {
        owner.supervisor.mismatch().is_none() && owner.groups.get(&c.t).is_none_or(|g| g.mismatch().is_none())
    });
    if !live {
        return Err(
            "The process that asked is gone (its supervisor stopped): this link is used. Nothing was done.".into()
        );
    }
    // What the journal keeps of it: the kind, the tool and what it would
    // run, a question's questions and choices.
    let r = serde_json::json!({"id": o.request, "kind": o.kind, "tool": o.tool, "message": o.detail,
        "questions": o.questions});
    Ok(serde_json::from_value(r).ok())
}

/// `POST /a/<token>` of a supervised run's task: the answer, as the task
/// route gives one (one [`Command`], door `link`, by the name the link was
/// minted for), to the run's supervisor over its socket, which checks it
/// against the request it holds (open, this process's, the agent's offer).
pub fn link_answer(
    shared: &Shared,
    c: &crate::control::links::Claims,
    decision: &str,
    reason: Option<String>,
    answers: Option<serde_json::Map<String, serde_json::Value>>,
) -> Reply {
    let command = match c.answer(decision, reason, answers) {
        Ok(answer) => Command::Answer { answer },
        Err(m) => return Reply::bad(m),
    };
    let issued = Issued { door: Door::Link, actor: c.n.clone(), task: Some(c.t.clone()), command };
    let Some(creq) = issued.to_request() else { return Reply::bad("not an answer") };
    match control::call(&shared.cfg.harness_home, &c.r, &creq, call_timeout()) {
        Ok(r) => r,
        Err(CallError::NotLive(_)) => Reply::refuse(LINK_NOT_LIVE, None),
        Err(CallError::Untrusted(why) | CallError::Broken(why)) => Reply::refuse(why, None),
    }
}
