//! `POST /agui` in interactive mode (`runwire-serve --agent claude
//! --interactive`): one live agent session per thread, held between runs.
//!
//! The session is the library's ([`crate::session`]), the same code the
//! session binary runs: the server writes session input (a message, an
//! answer, an interrupt, the end) and reads the session's output lines (the
//! agent's raw lines plus runwire's own `runwire.request` /
//! `runwire.answer` lines), which go through the same normalizer and
//! translator as every other run.
//!
//! An AG-UI run on a thread is one stretch of that session:
//! - it sends the run's input (the user message, or the answers in
//!   `resume`), then streams until the turn ends (`RUN_FINISHED`), the agent
//!   asks for something (`RUN_FINISHED` with the interrupt outcome; the
//!   process stays), or the run is stopped (`cancelled` outcome);
//! - what the session printed between runs (the tail of a turn the client
//!   left, a turn started on a task route, a request raised after an
//!   auto-deny) is streamed first: the session never waits for a reader.
//!   A recorded line is not kept in memory: the run reads it back from the
//!   task log with its own cursor. An unrecorded one (`--no-record`) is
//!   kept in a bounded channel (4 MiB a session, [`crate::session::tap::ALL_CHANNELS_BYTES`]
//!   for all sessions together); what had no room is a reported gap. So
//!   every line is streamed once and in order, or reported missing;
//! - a thread with open interrupts takes only a `resume` that addresses them
//!   all ([`crate::serve::interrupts`]); anything else answers nothing and ends
//!   with the open interrupts again, so a client that disconnected sees
//!   them on its next run;
//! - a client that leaves mid-turn interrupts the turn; the session stays;
//! - a run ends when its reader has seen the end of its own turn
//!   (`spec/INTERRUPTS.md`, "Turns"): what the session is doing is the
//!   engine's [`Status`](crate::session::engine::Status), never a copy
//!   kept here.
//!
//! The task routes (`POST /runs/:id/tasks/:tid/answer|steer|stop|kill`, see
//! [`control_post`]) act on the same session under the same rules. The
//! sessions themselves (one per thread, bounded, recorded) are `threads` (`interactive/threads.rs`).
//!
//! Imports only [`super`] and [`super::common`] (the request, the book, the
//! response body), never the batch mode.

use super::book::RunInput;
use super::common::{Body, Messages, NotRecorded, Outcome};
use crate::control::Door;
use crate::pipeline::events::{Data, Event, Exit, Seq};
use crate::pipeline::translate::{AguiEvent, RunOutcome, TranslateOptions, Translator};
use crate::serve::http::{client_gone, Request};
use crate::serve::interrupts::Plan;
use crate::serve::{options::BIN, state::Shared};
use crate::session::engine::Engine;
use crate::session::input::{AnswerInput, Input, MessageInput, Who};
use crate::session::tap::{Feed, Got};
use crate::session::Phase;
use crate::util::time::Clock;
use serde_json::{json, Value};
use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod routes;
pub(crate) mod sessions;
mod threads;
pub use routes::{control_post, holds_link, link_answer, link_request};
pub use threads::{agent_program, check_launch, Sessions, Thread, MAX_SESSIONS};
use threads::{lock, send, Ending, NotSent, NotStarted, State};

/// How often a stream looks at its client, the shutdown flag and the clock.
const TICK: Duration = Duration::from_millis(50);
/// How long a new message waits for the previous turn to end before that
/// turn is interrupted, and how long after that before the run gives up.
const SETTLE: Duration = Duration::from_secs(3);
const SETTLE_GIVE_UP: Duration = Duration::from_secs(15);
/// How long a run whose agent closed its output waits for the agent's
/// exit status (its reaper publishes it as the process ends).
const EXIT_WAIT: Duration = Duration::from_secs(2);
/// The task name of a recorded interactive session.
pub const TASK: &str = crate::runs::record::TASK;

struct Run<'a, 'b> {
    tr: Translator,
    /// Who sent the run's input (the name of a named token, else `agui`): the journal's `by`.
    by: String,
    /// The name of the sender's named token, if any.
    person: Option<String>,
    /// The door the run came through (`agui`, or `hub` for a hub's): its answers' journaled door.
    door: Door,
    /// The AG-UI response body, which [`run`] starts and ends; the run only
    /// writes frames to it.
    body: &'a mut Body<'b>,
    clock: Clock,
    /// The run's own turn (`spec/INTERRUPTS.md`, "Turns"): the session's
    /// turn number once its input was taken; the run ends once that turn
    /// has ended and the session has settled (see [`settle_end`]).
    own_turn: Option<u64>,
    /// The session's stop count when the run's input was taken: a stop
    /// after it stopped the run's own turn (it ends `cancelled`).
    stops_seen: u64,
    /// A turn's end was streamed since the input: the run ends with its
    /// outcome (success, or `RUN_ERROR` for a failed turn).
    saw_turn_end: bool,
    /// The thread's messages: recorded, and snapshotted after RUN_STARTED.
    msgs: Messages,
    /// The exit of the agent the run streams (read when its output ends).
    agent: Option<crate::session::engine::ExitWatch>,
}

impl Run<'_, '_> {
    fn emit(&mut self, events: Vec<AguiEvent>) -> io::Result<()> {
        self.msgs.emit(events, self.body)
    }

    fn now(&self) -> Option<i64> {
        Some(self.clock.now_ms())
    }

    /// The run's input was taken: its own turn is the session's turn now.
    fn took_input(&mut self, status: Option<crate::session::engine::Status>) {
        if let Some(s) = status {
            self.own_turn = Some(s.turn);
            self.stops_seen = s.stops;
        }
    }
}

/// Why a run stopped streaming.
enum End {
    /// The translator emitted the terminal event.
    Done,
    /// The client left.
    Gone,
}

/// The run of an admitted request: starts the thread's session (its record
/// claimed before anything is sent: [`NotRecorded`], nothing sent, when
/// another server records the runId or this one cannot record it), then
/// the response body, streams the session
/// into it (see [`stream_into`]) and returns how the run ended, for the book.
pub(super) fn run(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    input: &RunInput,
) -> Result<Outcome, NotRecorded> {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1)));
    let Ok(peek) = stream.try_clone() else { return Ok(Outcome::Cancelled) };
    let th = start(shared, input)?;
    let Ok(mut body) = Body::start(stream, req, cors, shared.cfg.write_timeout) else {
        return Ok(Outcome::Cancelled);
    };
    // A hub's run acts for the hub's caller, `<person>@<hub>` (the sidecar's
    // token alone may say so, spec/CLUSTER.md); else the caller's token name.
    // Its answers are journaled with the door they came through: `hub` for
    // a hub's, as a forwarded command's are.
    let tokens = shared.cfg.token.as_ref();
    let (person, door) = match tokens.and_then(|t| crate::serve::tokens::acting_for_via_hub(t, req)) {
        Some(p) => (Some(p), Door::Hub),
        None => (tokens.and_then(|t| crate::serve::tokens::caller(t, req).flatten().map(str::to_string)), Door::Agui),
    };
    let streamed = stream_into(shared, &mut body, &peek, input, th, person, door);
    // The run is over once its terminal event is out: the thread takes the
    // next run (a resume sent the moment RUN_FINISHED arrives) from now.
    shared.book.lock().unwrap_or_else(|e| e.into_inner()).release(&input.thread_id);
    let gone = io::Error::new(io::ErrorKind::ConnectionAborted, "the client left");
    Ok(body.finish(if streamed { Ok(()) } else { Err(gone) }))
}

/// A thread whose session runs, or why the run ends at once (its message,
/// and its `RUN_ERROR` code).
type Started = Result<std::sync::Arc<Thread>, (String, &'static str)>;

/// Phase 0, before the response starts: the thread, and its session
/// started (recorded as a new run when the thread has no record open).
/// The inner `Err` (why, and the `RUN_ERROR` code) is the run's to end
/// with; [`NotRecorded`] ends it before it starts.
fn start(shared: &Shared, input: &RunInput) -> Result<Started, NotRecorded> {
    let th = match shared.sessions.thread(shared, &input.thread_id) {
        Ok(t) => t,
        Err(m) => return Ok(Err((m, "sessions_full"))),
    };
    Ok(match th.ensure_started(shared, &input.run_id, &input.prompt, &crate::serve::agui::common::digest(input)) {
        Ok(()) => Ok(th),
        Err(NotStarted::Starting) => Err(("another run is starting this thread's session".into(), "busy")),
        Err(NotStarted::Failed(why)) => Err((format!("cannot start the agent's session: {why}"), "spawn_failed")),
        Err(NotStarted::NotRecorded(not)) => return Err(not),
    })
}

/// Sends the run's input and streams the session to `body` until the run
/// ends (`peek`: the client's socket, to see it leave). `false` when the
/// client left before the run's end.
fn stream_into(
    shared: &Shared,
    body: &mut Body,
    peek: &TcpStream,
    input: &RunInput,
    th: Started,
    person: Option<String>,
    door: Door,
) -> bool {
    let by = person.clone().unwrap_or_else(|| "agui".into());
    let tr = Translator::new(TranslateOptions {
        thread_id: Some(input.thread_id.clone()),
        run_id: Some(input.run_id.clone()),
    });
    let msgs = Messages::start(shared, input);
    let mut run = Run {
        tr,
        by,
        person,
        door,
        body,
        clock: Clock::from_env(),
        own_turn: None,
        stops_seen: 0,
        saw_turn_end: false,
        msgs,
        agent: None,
    };
    match drive(shared, &mut run, input, th, peek) {
        Ok(End::Done) => true,
        Ok(End::Gone) => false,
        Err(_) => {
            // A write failed: the client left mid-turn. The turn is
            // interrupted; the session stays for the next run.
            if let Some(th) = lock(&shared.sessions.threads).get(&input.thread_id).cloned() {
                client_left(&th);
            }
            false
        }
    }
}

/// The client of the run streaming `th` left: a running turn is
/// interrupted; the session stays for the next run.
fn client_left(th: &Thread) {
    let agent = lock(&th.st).engine();
    if agent.as_ref().is_some_and(|a| a.status().phase == Phase::Turn) {
        let _ = send(agent.as_ref(), Input::Interrupt(Who { by: Some("agui: the client left".into()) }));
    }
}

fn drive(shared: &Shared, run: &mut Run, input: &RunInput, th: Started, peek: &TcpStream) -> io::Result<End> {
    // Phase 1: the session exists ([`start`]), and what it printed meanwhile is streamed.
    let th = match th {
        Ok(th) => th,
        Err((why, code)) => return fail(run, why, code),
    };
    let Some(rx) = lock(&th.st).rx.take() else {
        return fail(run, "another run is streaming this thread's session".into(), "busy");
    };
    let mut guard = Streaming { th: &th, rx: Some(rx) };
    run.agent = lock(&th.st).engine().map(|e| e.exit_watch());
    let begin = run.tr.begin(run.now());
    run.emit(begin)?;
    let info = session_info(&lock(&th.st));
    let e = run.tr.custom("runwire.session", info, run.now());
    run.emit(e)?;
    adopt(&th, run);
    // What arrived while no run was streaming (the log fills in what the
    // channel dropped).
    loop {
        match next(run, &th, guard.feed(), Duration::ZERO)? {
            Next::Events(evs) => backlog(run, &th, evs)?,
            Next::Idle => break,
            Next::Closed => return agent_died(run, &th),
        }
    }
    // Phase 2: the input. A stop from now on is this run's.
    run.took_input(lock(&th.st).status());
    let (open, plan, agent) = {
        let st = lock(&th.st);
        let open = waiting(&st);
        let plan = if input.resume.is_empty() && open.is_empty() {
            None
        } else {
            Some(st.raised.plan(&input.resume, &open, &run.by))
        };
        // Each answer names its request by runwire's interrupt id, which
        // the session's loop resolves against its own process's requests:
        // the plan read here binds to the process whose handle is taken.
        let plan = match plan {
            Some(Plan::Apply { answers, warnings }) => {
                let answers = answers
                    .into_iter()
                    .map(|mut a| {
                        if let Some(iid) = st.raised.get(&a.id).and_then(|(r, _)| r.interrupt_id.clone()) {
                            a.id = iid;
                        }
                        a
                    })
                    .collect();
                Some(Plan::Apply { answers, warnings })
            }
            p => p,
        };
        (open, plan, st.engine())
    };
    match plan {
        Some(Plan::Refuse(m)) => return fail(run, m, "resume_refused"),
        Some(Plan::StillOpen { warnings }) => {
            for w in warnings {
                let e = run.tr.custom("runwire.resume_skipped", json!({ "warning": w }), run.now());
                run.emit(e)?;
            }
            if input.resume.is_empty() {
                let e = run.tr.custom(
                    "runwire.input_not_sent",
                    json!({"warning": "the message was not sent: the agent is waiting for an answer to the open interrupts"}),
                    run.now(),
                );
                run.emit(e)?;
            }
            return end_interrupted(run, &th, &open);
        }
        Some(Plan::Apply { answers, warnings }) => {
            for w in warnings {
                let e = run.tr.custom("runwire.resume_skipped", json!({ "warning": w }), run.now());
                run.emit(e)?;
            }
            // The one command of every door (`crate::control`): checked once,
            // then, as one unit, every answer checked by the session before
            // any is written and all queued as one piece (or none).
            let answers = answers.into_iter().map(|a| AnswerInput { door: Some(run.door), ..a }).collect();
            let command = crate::control::Command::Answers { answers };
            if let Err(m) = command.check() {
                return fail(run, format!("resume: {m}; nothing was sent"), "resume_refused");
            }
            let input = command.into_input(&run.by).expect("answers are a session input");
            // Sent with no lock held: the wait for the loop's reply blocks no other request of the thread.
            let sent = match send(agent.as_ref(), input) {
                Ok(t) => !t.replayed,
                Err(m) => {
                    let code = if matches!(m, NotSent::NotReading(_)) { "agent_not_reading" } else { "resume_refused" };
                    return fail(run, format!("resume: {m}; nothing was sent"), code);
                }
            };
            run.msgs.sent();
            if agent.as_ref().map(Engine::status).is_some_and(|s| !sent && s.open.is_empty() && s.phase != Phase::Turn)
            {
                // Nothing sent and nothing left running (an identical
                // replay, or cancels of interrupts already closed): the run
                // is complete.
                let e = run.tr.end_with_success(run.now());
                run.emit(e)?;
                return Ok(End::Done);
            }
        }
        None => {
            if input.prompt.is_empty() {
                return fail(
                    run,
                    "resume: no interrupt is open on this thread, and the input has no user message".into(),
                    "no_input",
                );
            }
            if let Some(end) = settle_first(run, &th, guard.feed(), peek)? {
                return Ok(end);
            }
            let agent = {
                let st = lock(&th.st);
                let open = waiting(&st);
                if !open.is_empty() {
                    // Raised while the earlier turn settled.
                    drop(st);
                    return end_interrupted(run, &th, &open);
                }
                // Links minted from now on are the sender's, when a named token says who they are.
                *lock(&st.link_for) = run.person.clone().unwrap_or_else(|| threads::LINK_NAME.into());
                st.engine()
            };
            let msg = Input::Message(MessageInput { text: input.prompt.clone(), by: Some(run.by.clone()) });
            // Sent with no lock held: the wait for the loop's reply blocks no other request of the thread.
            if let Err(m) = send(agent.as_ref(), msg) {
                let code = if matches!(m, NotSent::NotReading(_)) { "agent_not_reading" } else { "agent_gone" };
                return fail(run, m.to_string(), code);
            }
            run.msgs.sent();
            // Its own turn is the one the message started (or joined); a
            // stop before it was the earlier turn's.
            run.took_input(agent.as_ref().map(Engine::status));
        }
    }
    // Phase 3: stream until the run ends.
    let mut last_check = Instant::now();
    loop {
        match next(run, &th, guard.feed(), TICK)? {
            Next::Events(evs) => {
                if live(run, &th, guard.feed(), evs)? {
                    return Ok(End::Done);
                }
            }
            Next::Idle => {
                if settle_end(run, &th, guard.feed())? {
                    return Ok(End::Done);
                }
                if run.body.idle_for() >= shared.cfg.keepalive {
                    run.body.write_chunk(b": keep-alive\n\n")?;
                }
            }
            Next::Closed => return agent_died(run, &th),
        }
        if last_check.elapsed() >= TICK {
            last_check = Instant::now();
            // A client that takes nothing for the write timeout has left too.
            if run.body.check().is_err() || client_gone(peek) {
                client_left(&th);
                return Ok(End::Gone);
            }
            // The turn was stopped (the `stop` input): its result, if the
            // agent sends one, is shown by the next run.
            let stopped = lock(&th.st).status().is_some_and(|s| s.stops > run.stops_seen);
            if stopped || shared.is_shutting_down() {
                let e = run.tr.end_with(RunOutcome::Cancelled, run.now());
                run.emit(e)?;
                return Ok(End::Done);
            }
        }
    }
}

/// Before a new message, a turn still running (a client that left
/// mid-turn, a turn started on a task route) is let end, streamed as
/// backlog (to its last line: its end is an earlier turn's, never this
/// run's): for [`SETTLE`], then interrupted, then given up. `Some`: the run
/// ended meanwhile.
fn settle_first(run: &mut Run, th: &Thread, feed: &mut Feed, peek: &TcpStream) -> io::Result<Option<End>> {
    let start = Instant::now();
    let mut interrupted = false;
    while lock(&th.st).status().is_some_and(|s| s.phase == Phase::Turn) {
        if !interrupted && start.elapsed() > SETTLE {
            let agent = lock(&th.st).engine();
            let sent = send(agent.as_ref(), Input::Interrupt(Who { by: Some(BIN.into()) }));
            if let Err(NotSent::NotReading(m)) = sent {
                // It would never take the interrupt, nor this message.
                return fail(run, m, "agent_not_reading").map(Some);
            }
            interrupted = true;
        }
        // A second after the interrupt the agent has still not read
        // its input: the turn cannot end that way; say so now.
        let unread = lock(&th.st).agent.as_ref().map_or(0, Engine::unread_input);
        if interrupted && unread > 0 && start.elapsed() > SETTLE + Duration::from_secs(1) {
            let why = crate::session::Refused::NotReading { waiting: unread };
            return fail(run, why.to_string(), "agent_not_reading").map(Some);
        }
        if start.elapsed() > SETTLE_GIVE_UP {
            let m = "the agent's previous turn did not end; try again, or kill the session";
            return fail(run, m.into(), "busy").map(Some);
        }
        match next(run, th, feed, TICK)? {
            Next::Events(evs) => backlog(run, th, evs)?,
            Next::Idle => {}
            Next::Closed => return agent_died(run, th).map(Some),
        }
        if client_gone(peek) {
            return Ok(Some(End::Gone));
        }
    }
    let produced = lock(&th.st).status().map_or(0, |s| s.produced);
    while feed.taken() < produced && start.elapsed() < SETTLE_GIVE_UP {
        match next(run, th, feed, TICK)? {
            Next::Events(evs) => backlog(run, th, evs)?,
            Next::Idle => {}
            Next::Closed => return agent_died(run, th).map(Some),
        }
    }
    Ok(None)
}

/// Gives the session's output back to the thread when the run ends, however.
struct Streaming<'a> {
    th: &'a Thread,
    rx: Option<Feed>,
}

impl Streaming<'_> {
    fn feed(&mut self) -> &mut Feed {
        self.rx.as_mut().expect("held until drop")
    }
}

impl Drop for Streaming<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.th.st);
        if st.agent.is_some() {
            st.rx = self.rx.take();
        }
    }
}

/// What the session printed next, for the run.
enum Next {
    /// A line's events (none for a line that makes none, or a gap shown).
    Events(Vec<Event>),
    /// Nothing within the wait.
    Idle,
    /// The session's output ended (the agent is gone).
    Closed,
}

/// Takes the session's next output line, normalized: from the channel, or
/// from the log where the channel dropped lines; lines neither holds are
/// shown as a `runwire.lines_not_streamed` event and passed over (the
/// normalizer still counts them, so later events keep their `seq`).
fn next(run: &mut Run, th: &Thread, feed: &mut Feed, wait: Duration) -> io::Result<Next> {
    Ok(match feed.read(wait) {
        Got::Line(bytes, at) => Next::Events(lock(&th.st).norm.push_capped_at(&bytes, at)),
        Got::Gap(from, to) => {
            let mut st = lock(&th.st);
            for _ in from..=to {
                // A blank line is counted and yields nothing.
                st.norm.push_at(b"", None);
            }
            drop(st);
            let lines = to - from + 1;
            let e = run.tr.custom(
                "runwire.lines_not_streamed",
                json!({
                    "lines": lines,
                    "from": from,
                    "to": to,
                    "warning": format!("{lines} lines of the session's output (lines {from} to {to}) were printed while no run streamed it, overflowed the server's buffer and are not recorded: they are not streamed"),
                }),
                run.now(),
            );
            run.emit(e)?;
            Next::Events(Vec::new())
        }
        Got::Idle => Next::Idle,
        Got::Closed => Next::Closed,
    })
}

fn adopt(th: &Thread, run: &mut Run) {
    let st = lock(&th.st);
    run.tr.adopt_tool_calls(st.tool_ids.iter());
}

/// Remembers the run's tool calls for later runs of the thread.
fn remember(th: &Thread, run: &Run) {
    let mut st = lock(&th.st);
    for (k, v) in run.tr.tool_calls().iter() {
        st.tool_ids.insert(k.clone(), v.clone());
    }
}

fn session_info(st: &State) -> Value {
    let mut v = json!({"interactive": true, "task": TASK});
    // Which of the thread's agent processes runs (1, then one more each
    // time the thread's agent is started again): the loop's own number.
    if let Some(s) = st.status() {
        v["generation"] = s.generation.into();
    }
    if let Some(id) = &st.record_id {
        v["run"] = id.clone().into();
        use crate::control::Verb;
        for verb in [Verb::Steer, Verb::Stop, Verb::Answer] {
            v[verb.as_str()] = format!("/runs/{id}/tasks/{TASK}/{verb}").into();
        }
    }
    v
}

fn end_interrupted(run: &mut Run, th: &Thread, open: &[String]) -> io::Result<End> {
    let interrupts = lock(&th.st).raised.interrupts(open);
    let e = if interrupts.is_empty() {
        // Open requests the thread never saw raised cannot be shown; say so
        // rather than pretend the run finished.
        run.tr.end_with_error("the agent waits for an answer runwire cannot show".into(), "unknown_request", run.now())
    } else {
        run.tr.end_with(RunOutcome::Interrupt { interrupts }, run.now())
    };
    run.emit(e)?;
    Ok(End::Done)
}

/// Events printed before this run's input: shown, and requests noted, but
/// the run does not end on them (a turn_end here closes an earlier turn).
fn backlog(run: &mut Run, th: &Thread, evs: Vec<Event>) -> io::Result<()> {
    for ev in evs {
        if let Data::InputRequest(r) = &ev.data {
            raise(run, th, r);
        }
        if let Data::InputAnswer(a) = &ev.data {
            lock(&th.st).raised.closed(a);
        }
        if let Data::Exit(_) = &ev.data {
            // The process ends: shown as the run's end (RUN_ERROR or finished).
            let out = run.tr.push(&ev);
            run.emit(out)?;
            let gone = lock(&th.st).agent_gone(Ending::Exited);
            if let Some(g) = gone {
                g.stop();
            }
            continue;
        }
        let out = run.tr.push(&ev);
        run.emit(out)?;
    }
    remember(th, run);
    Ok(())
}

/// Events after the input: `true` when the run ended.
fn live(run: &mut Run, th: &Thread, feed: &Feed, evs: Vec<Event>) -> io::Result<bool> {
    let mut asked = false;
    for ev in evs {
        match &ev.data {
            Data::InputRequest(r) => {
                raise(run, th, r);
                // A non-blocking request (codex `isBlocking: false`) is a card
                // in the stream: the agent works on, so the run does too.
                asked |= r.blocking != Some(false);
            }
            Data::InputAnswer(a) => lock(&th.st).raised.closed(a),
            Data::TurnEnd(_) => run.saw_turn_end = true,
            Data::Exit(_) => {
                let out = run.tr.push(&ev);
                run.emit(out)?;
                let gone = lock(&th.st).agent_gone(Ending::Exited);
                if let Some(g) = gone {
                    g.stop();
                }
                return Ok(true);
            }
            _ => {}
        }
        let out = run.tr.push(&ev);
        run.emit(out)?;
        remember(th, run);
        if run.tr.is_terminated() {
            return Ok(true);
        }
    }
    let open = waiting(&lock(&th.st));
    if asked && !open.is_empty() {
        end_interrupted(run, th, &open)?;
        return Ok(true);
    }
    settle_end(run, th, feed)
}

/// Ends the run once its reader has seen the end of its own turn: that
/// turn has ended, nobody is asked anything, and the session has settled:
/// the run has streamed all the session printed and no turn runs or is
/// owed there (so every turn its inputs started has ended too). The last
/// two make a steer
/// that raced the turn's end part of this run: one that started a new turn
/// (codex had ended the turn: `turn/start`, or a `turn/steer` codex refused,
/// which the session sends again as `turn/start`) keeps the session
/// mid-turn, so the run follows that turn to its end.
fn settle_end(run: &mut Run, th: &Thread, feed: &Feed) -> io::Result<bool> {
    let Some(own) = run.own_turn else { return Ok(false) };
    let Some(s) = lock(&th.st).status() else { return Ok(false) };
    if s.turns_ended < own || !s.open.is_empty() || !s.settled(feed.taken()) {
        return Ok(false);
    }
    let stopped = s.stops > run.stops_seen;
    let e = if stopped {
        run.tr.end_with(RunOutcome::Cancelled, run.now())
    } else if !run.saw_turn_end {
        // Its turn ended before the run saw it (an answer the agent took
        // between runs): nothing failed that this run streamed.
        run.tr.end_with_success(run.now())
    } else {
        run.tr.finish()
    };
    run.emit(e)?;
    Ok(true)
}

/// The open requests a run waits on, oldest first: all but the
/// non-blocking ones (codex `isBlocking: false`), which the agent does not
/// wait on: cards in the stream, answered through the task route while the
/// run streams and cancelled at the turn's end; never a run's interrupts.
fn waiting(st: &State) -> Vec<String> {
    st.open().into_iter().filter(|id| st.raised.get(id).is_none_or(|(r, _)| r.blocking != Some(false))).collect()
}

/// Records a request of the agent as an interrupt of the thread, bound to
/// the AG-UI toolCallId of its call.
fn raise(run: &Run, th: &Thread, r: &crate::pipeline::events::InputRequest) {
    let mut st = lock(&th.st);
    let tcid =
        r.tool_call_id.as_ref().and_then(|raw| run.tr.tool_calls().get(raw).or_else(|| st.tool_ids.get(raw)).cloned());
    st.raised.raise(r, tcid);
}

fn agent_died(run: &mut Run, th: &Thread) -> io::Result<End> {
    // Its output is over, and its exit is published once its reaper has it
    // (a moment later; a kill route took the agent off the thread already):
    // waited for, briefly, so that an agent killed by a signal ends the run
    // as 128 + the signal, as its record says, not as "exited with status 1".
    let rc = run.agent.as_ref().and_then(|w| w.exit_within(EXIT_WAIT));
    // Taken under the lock, written to the client after it.
    let (mut events, exit, gone) = {
        let mut st = lock(&th.st);
        let rc = rc.or_else(|| st.agent.as_ref().and_then(Engine::exit_code));
        let events = st.norm.finish();
        let exit = Event {
            run: None,
            task: None,
            session: st.norm.session().map(str::to_string),
            seq: Seq { line: st.norm.lines() + 1, sub: 0 },
            ts_ms: run.clock.now_ms(),
            data: Data::Exit(Exit {
                rc: rc.unwrap_or(1).max(1),
                ok: false,
                detail: Some("the agent's session ended".into()),
            }),
        };
        (events, exit, st.agent_gone(Ending::Exited))
    };
    if let Some(g) = gone {
        g.stop();
    }
    for ev in events.drain(..) {
        let out = run.tr.push(&ev);
        run.emit(out)?;
    }
    if !run.tr.is_terminated() {
        let out = run.tr.push(&exit);
        run.emit(out)?;
    }
    Ok(End::Done)
}

fn fail(run: &mut Run, message: String, code: &'static str) -> io::Result<End> {
    let e = run.tr.end_with_error(message, code, run.now());
    run.emit(e)?;
    Ok(End::Done)
}
