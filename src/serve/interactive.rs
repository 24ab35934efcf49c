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
//!   all ([`super::interrupts`]); anything else answers nothing and ends
//!   with the open interrupts again, so a client that disconnected sees
//!   them on its next run;
//! - a client that leaves mid-turn interrupts the turn; the session stays.
//!
//! The task routes (`POST /runs/:id/tasks/:tid/answer|steer|stop|kill`, see
//! [`control_post`]) act on the same session under the same rules.

use super::http::{respond, respond_error, Close};
use super::interrupts::{Offer, Plan, Raised};
use super::Shared;
use crate::agui::{AguiEvent, RunOutcome, TranslateOptions, Translator};
use crate::events::{Data, Event, Exit, Seq};
use crate::normalize::{Normalizer, Options};
use crate::runs::record::Recorder;
use crate::sse::{Encoder, SseOptions};
use crate::time::Clock;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io;
use std::net::TcpStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a stream looks at its client, the shutdown flag and the clock.
const TICK: Duration = Duration::from_millis(50);
/// How long a new message waits for the previous turn to end before that
/// turn is interrupted, and how long after that before the run gives up.
const SETTLE: Duration = Duration::from_secs(3);
const SETTLE_GIVE_UP: Duration = Duration::from_secs(15);
/// Live sessions held at once; a new thread past this is refused (503).
pub const MAX_SESSIONS: usize = 64;
/// The task name of a recorded interactive session.
pub const TASK: &str = crate::runs::record::TASK;

/// The live agent of a thread and what the server knows about it.
pub struct Thread {
    pub id: String,
    st: Mutex<State>,
}

struct State {
    agent: Option<Engine>,
    /// The session's output, held here while no run streams it.
    rx: Option<Feed>,
    norm: Normalizer,
    /// Every request the session raised, as AG-UI interrupts.
    raised: Raised,
    /// Agent tool id -> AG-UI toolCallId of every call streamed on the thread.
    tool_ids: HashMap<String, String>,
    /// User messages sent whose turn has not ended.
    turns_open: u32,
    /// The agent's session id, for `--resume` when the process is gone.
    resume: Option<String>,
    /// The session's record; its log is written as lines arrive (by the
    /// session's reader), whether a run is streaming or not.
    rec: Arc<Mutex<Option<Recorder>>>,
    /// The recorded run's id (`GET /runs/:id`, the task routes).
    record_id: Option<String>,
    /// When a run last used the session (the idle one used least recently is ended first).
    last_used: Instant,
    /// Output lines taken from the session's output (from its channel or
    /// its log, or passed over as a gap): the ordinal of the last one,
    /// compared with what the session produced (has the stream caught up?).
    taken: u64,
}

impl State {
    fn new(shared: &Shared) -> State {
        State {
            agent: None,
            rx: None,
            norm: Normalizer::new(shared.cfg.adapter, Options { run: None, task: None, clock: Clock::from_env() }),
            raised: Raised::new(Offer {
                agent: crate::session::launch::AgentKind::of(shared.cfg.adapter),
                grant_all: shared.cfg.grant_all,
            }),
            tool_ids: HashMap::new(),
            turns_open: 0,
            resume: None,
            rec: Arc::new(Mutex::new(None)),
            record_id: None,
            last_used: Instant::now(),
            taken: 0,
        }
    }

    /// One session input; `Ok(true)` when it was an identical replay
    /// (nothing sent). Never waits for the agent: one that does not read
    /// its input is [`NotSent::NotReading`].
    fn send(&mut self, input: Input) -> Result<bool, NotSent> {
        match self.agent.as_ref() {
            Some(a) => command(a, input).map(|t| t.replayed),
            None => Err(NotSent::Refused("the agent's session is not running".into())),
        }
    }

    /// [`send`](State::send), with what the session did.
    fn send_at(&mut self, input: Input) -> Result<crate::session::driver::Taken, NotSent> {
        match self.agent.as_ref() {
            Some(a) => command(a, input),
            None => Err(NotSent::Refused("the agent's session is not running".into())),
        }
    }

    /// The session's stop count ([`crate::session::Session::stops`]).
    fn stops(&self) -> u64 {
        self.agent.as_ref().map_or(0, Engine::stops)
    }

    /// The stream has taken all the session printed and no turn runs or is owed.
    fn settled(&self) -> bool {
        self.agent.as_ref().is_some_and(|a| a.settled(self.taken))
    }

    /// No run streams it, no turn runs, nobody is asked anything.
    fn is_idle(&self) -> bool {
        self.rx.is_some() && self.turns_open == 0 && self.open().is_empty()
    }

    /// The session's open requests, oldest first (expired ones closed first).
    fn open(&self) -> Vec<String> {
        self.agent.as_ref().map(Engine::open).unwrap_or_default()
    }

    /// Normalizes a line of the session's output (recorded already, with
    /// its arrival time `at`).
    fn take_line(&mut self, line: &[u8], at: Option<i64>) -> Vec<Event> {
        self.taken += 1;
        let events = self.norm.push_at(line, at);
        for ev in &events {
            if let Data::TurnEnd(_) = &ev.data {
                self.turns_open = self.turns_open.saturating_sub(1);
            }
        }
        if let Some(s) = self.norm.resume_session() {
            self.resume = Some(s.to_string());
        }
        events
    }

    /// Passes over output lines `from..=to` that can be neither streamed
    /// nor re-read (the channel dropped them and the session is not
    /// recorded): the normalizer still counts them, so later events keep
    /// their `seq` (the line's ordinal). A turn's end among them is unseen:
    /// when the session has settled past them, no turn is open.
    fn skip_lines(&mut self, from: u64, to: u64) {
        for _ in from..=to {
            // A blank line is counted and yields nothing.
            self.norm.push_at(b"", None);
        }
        self.taken = to;
        if self.settled() {
            self.turns_open = 0;
        }
    }

    /// The agent is gone: nobody waits for its requests any more. What is
    /// returned is stopped by the caller ([`Gone::stop`]) once it has let
    /// go of the thread's lock: stopping waits for the process.
    #[must_use]
    fn agent_gone(&mut self) -> Option<Gone> {
        let gone = self.agent.take().map(|live| {
            // Its input closes once what is queued is written (an `end`'s
            // cancels and interrupt); a deaf agent's is dropped when it dies.
            live.end_input();
            // The ended session's sink keeps the old slot: a late line of
            // it never lands in the next session's record.
            let rec = std::mem::replace(&mut self.rec, Arc::new(Mutex::new(None)));
            Gone { live, rec }
        });
        self.rx = None;
        self.turns_open = 0;
        gone
    }
}

/// Why a session input was not sent.
#[derive(Debug)]
enum NotSent {
    /// The session refused it (nothing was written): why.
    Refused(String),
    /// The agent is not reading its input: nothing was taken; try again later.
    NotReading(String),
}

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSent::Refused(m) | NotSent::NotReading(m) => f.write_str(m),
        }
    }
}

/// Seconds a client is told to wait (`Retry-After`) when the agent does not read.
const RETRY_AFTER: &str = "1";

/// A session taken off its thread, to be stopped outside any lock.
struct Gone {
    live: Engine,
    rec: Arc<Mutex<Option<Recorder>>>,
}

impl Gone {
    /// Stops the agent's process group (TERM and CONT, the grace, KILL),
    /// reaps it and ends the record.
    fn stop(self) {
        let rc = self.live.kill();
        if let Some(rec) = lock(&self.rec).take() {
            let state = if rc == Some(0) { "committed" } else { "halted" };
            if let Err(e) = rec.finish(state, rc, None) {
                crate::cli::report(super::BIN, format!("record {}: {e}", rec.run_id));
            }
        }
    }

    /// Stopped in the background (nobody waits for it).
    fn stop_later(self) {
        let slot = Arc::new(Mutex::new(Some(self)));
        let s2 = slot.clone();
        let spawned = std::thread::Builder::new().name("session stop".into()).spawn(move || {
            if let Some(g) = lock(&s2).take() {
                g.stop();
            }
        });
        if spawned.is_err() {
            if let Some(g) = lock(&slot).take() {
                g.stop();
            }
        }
    }
}

/// Every thread's session, and the recorded run id -> thread index.
#[derive(Default)]
pub struct Sessions {
    threads: Mutex<HashMap<String, Arc<Thread>>>,
    by_record: Mutex<HashMap<String, String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sessions {
    fn thread(&self, shared: &Shared, id: &str) -> Result<Arc<Thread>, String> {
        let mut t = lock(&self.threads);
        if let Some(th) = t.get(id) {
            return Ok(th.clone());
        }
        // Bounded: at most MAX_SESSIONS live agents (the idle one used least
        // recently is ended; its thread resumes it later with --resume) and
        // MAX_THREADS threads remembered.
        let live: Vec<(Instant, Arc<Thread>)> = t
            .values()
            .filter_map(|th| {
                let st = th.st.try_lock().ok()?;
                st.agent.is_some().then(|| (st.last_used, th.clone()))
            })
            .collect();
        if live.len() >= MAX_SESSIONS {
            let idle = live
                .iter()
                .filter(|(_, th)| th.st.try_lock().is_ok_and(|st| st.is_idle()))
                .min_by_key(|(at, _)| *at)
                .map(|(_, th)| th.clone());
            match idle {
                Some(th) => {
                    // Stopped in the background: this lock is every thread's.
                    if let Some(g) = lock(&th.st).agent_gone() {
                        g.stop_later();
                    }
                }
                None => {
                    return Err(format!(
                        "{MAX_SESSIONS} interactive sessions are busy (running a turn or waiting for an answer); try again later"
                    ))
                }
            }
        }
        if t.len() >= MAX_THREADS {
            let gone: Vec<String> = t
                .iter()
                .filter(|(_, th)| th.st.try_lock().is_ok_and(|st| st.agent.is_none()))
                .map(|(k, _)| k.clone())
                .collect();
            let n = (t.len() + 1).saturating_sub(MAX_THREADS);
            let gone: Vec<String> = gone.into_iter().take(n).collect();
            for k in &gone {
                t.remove(k);
            }
            lock(&self.by_record).retain(|_, thread| !gone.contains(thread));
        }
        let th = Arc::new(Thread { id: id.to_string(), st: Mutex::new(State::new(shared)) });
        t.insert(id.to_string(), th.clone());
        Ok(th)
    }

    /// The thread whose session is recorded as run `record`.
    pub fn by_record(&self, record: &str) -> Option<Arc<Thread>> {
        let thread = lock(&self.by_record).get(record).cloned()?;
        lock(&self.threads).get(&thread).cloned()
    }

    /// Ends every session (server shutdown): each is told to end, every
    /// process group is signalled at once, and each is reaped within its
    /// grace (then killed): the whole takes one grace, not one per session.
    pub fn end_all(&self) {
        let all: Vec<Arc<Thread>> = lock(&self.threads).values().cloned().collect();
        let gone: Vec<Gone> = all
            .iter()
            .filter_map(|th| {
                let mut st = lock(&th.st);
                let _ = st.send(Input::End(Who { by: Some(super::BIN.into()) }));
                st.agent_gone()
            })
            .collect();
        for g in &gone {
            g.live.terminate();
        }
        for g in gone {
            g.stop();
        }
    }
}

/// What one run on the thread streams, as SSE frames.
/// Where a run's frames go: the AG-UI response body, which `serve::agui`
/// starts and ends; this module only writes frames to it.
pub trait Frames {
    /// One SSE frame (kept for replay).
    fn frame(&mut self, frame: &[u8]) -> io::Result<()>;
    /// Bytes that are not a frame (a keep-alive comment).
    fn write_chunk(&mut self, data: &[u8]) -> io::Result<()>;
    /// `Err` when the client stopped taking what is written.
    fn check(&mut self) -> io::Result<()>;
    /// Time since the last write.
    fn idle_for(&self) -> Duration;
}

/// What one AG-UI run on a thread asks for (a validated `RunAgentInput`).
pub struct RunRequest<'a> {
    pub thread_id: &'a str,
    pub run_id: &'a str,
    /// Empty only when `resume` is not.
    pub prompt: &'a str,
    pub resume: &'a [super::interrupts::ResumeEntry],
}

/// Threads remembered at once (idle ones forgotten oldest first), here and
/// in the book of runs.
pub const MAX_THREADS: usize = 1024;

struct Run<'a> {
    tr: Translator,
    enc: Encoder,
    body: &'a mut dyn Frames,
    clock: Clock,
    /// A turn ended since the run's input: the run ends once the session
    /// has settled (see [`settle_end`]).
    turn_ended: bool,
    /// The session's stop count when the run's input was taken: a stop
    /// after it stopped the run's own turn (it ends `cancelled`).
    stops_seen: u64,
}

impl Run<'_> {
    fn emit(&mut self, events: Vec<AguiEvent>) -> io::Result<()> {
        for e in events {
            if let Ok(Some(frame)) = self.enc.push(e.to_json().as_bytes()) {
                self.body.frame(frame.as_bytes())?;
            }
        }
        Ok(())
    }

    fn now(&self) -> Option<i64> {
        Some(self.clock.now_ms())
    }
}

/// Why a run stopped streaming.
enum End {
    /// The translator emitted the terminal event.
    Done,
    /// The client left.
    Gone,
}

/// The run: sends its input and streams the session to `body` until the
/// run ends (`peek`: the client's socket, to see it leave). `false` when
/// the client left before the run's end.
pub fn run(shared: &Shared, body: &mut dyn Frames, peek: &TcpStream, input: &RunRequest) -> bool {
    let clock = Clock::from_env();
    let tr = Translator::new(TranslateOptions {
        thread_id: Some(input.thread_id.to_string()),
        run_id: Some(input.run_id.to_string()),
    });
    let result = {
        // SAFETY of the borrow: `Run` lives only inside this block.
        let mut run =
            Run { tr, enc: Encoder::new(SseOptions::default()), body, clock, turn_ended: false, stops_seen: 0 };
        let r = drive(shared, &mut run, input, peek);
        match r {
            Ok(End::Done) => Ok(()),
            Ok(End::Gone) => Err(()),
            Err(_) => {
                // A write failed: the client left mid-turn. The turn is
                // interrupted; the session stays for the next run.
                if let Some(th) = lock(&shared.sessions.threads).get(input.thread_id).cloned() {
                    let mut st = lock(&th.st);
                    if st.turns_open > 0 {
                        let _ = st.send(Input::Interrupt(Who { by: Some("agui: the client left".into()) }));
                    }
                }
                Err(())
            }
        }
    };
    result.is_ok()
}

fn drive(shared: &Shared, run: &mut Run, input: &RunRequest, peek: &TcpStream) -> io::Result<End> {
    let th = match shared.sessions.thread(shared, input.thread_id) {
        Ok(t) => t,
        Err(m) => return fail(run, m, "sessions_full"),
    };
    // Phase 1: the session exists, and what it printed meanwhile is streamed.
    let rx = {
        let mut st = lock(&th.st);
        st.last_used = Instant::now();
        if st.agent.is_none() {
            if lock(&st.rec).is_none() {
                *lock(&st.rec) = recorder(shared, input);
                let id = lock(&st.rec).as_ref().map(|r| r.run_id.clone());
                if let Some(id) = id {
                    lock(&shared.sessions.by_record).insert(id.clone(), th.id.clone());
                    st.record_id = Some(id);
                }
            }
            let journal = lock(&st.rec).as_ref().map(Recorder::journal);
            match start_live(shared, st.resume.as_deref(), journal, st.rec.clone()) {
                Ok((agent, rx)) => {
                    st.agent = Some(agent);
                    // Interrupts raised before are an earlier process's.
                    st.raised.new_process();
                    st.rx = Some(rx);
                    st.norm = Normalizer::new(
                        shared.cfg.adapter,
                        Options { run: None, task: None, clock: Clock::from_env() },
                    );
                    st.turns_open = 0;
                    st.taken = 0;
                }
                Err(why) => {
                    drop(st);
                    return fail(run, format!("cannot start the agent's session: {why}"), "spawn_failed");
                }
            }
        }
        st.rx.take()
    };
    let Some(rx) = rx else {
        return fail(run, "another run is streaming this thread's session".into(), "busy");
    };
    let mut guard = Streaming { th: &th, rx: Some(rx) };
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
    run.stops_seen = lock(&th.st).stops();
    let (open, plan) = {
        let st = lock(&th.st);
        let open = st.open();
        let plan = if input.resume.is_empty() && open.is_empty() {
            None
        } else {
            Some(st.raised.plan(input.resume, &open, "agui"))
        };
        (open, plan)
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
            let mut st = lock(&th.st);
            // One unit: every answer checked by the session before any is
            // written, then all queued as one piece (or none).
            if let Err(m) = st.send(Input::Answers(answers)) {
                drop(st);
                let code = if matches!(m, NotSent::NotReading(_)) { "agent_not_reading" } else { "resume_refused" };
                return fail(run, format!("resume: {m}; nothing was sent"), code);
            }
            if st.turns_open == 0 && st.open().is_empty() {
                // Nothing left running (an identical replay, or cancels of
                // interrupts already closed): the run is complete.
                drop(st);
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
            // A turn still running (a client that left mid-turn) is settled first.
            let start = Instant::now();
            let mut interrupted = false;
            while lock(&th.st).turns_open > 0 {
                if !interrupted && start.elapsed() > SETTLE {
                    let sent = lock(&th.st).send(Input::Interrupt(Who { by: Some(super::BIN.into()) }));
                    if let Err(NotSent::NotReading(m)) = sent {
                        // It would never take the interrupt, nor this message.
                        return fail(run, m, "agent_not_reading");
                    }
                    interrupted = true;
                }
                // A second after the interrupt the agent has still not read
                // its input: the turn cannot end that way; say so now.
                let unread = lock(&th.st).agent.as_ref().map_or(0, |a| a.unread_input());
                if interrupted && unread > 0 && start.elapsed() > SETTLE + Duration::from_secs(1) {
                    let why = crate::session::Refused::NotReading { waiting: unread };
                    return fail(run, why.to_string(), "agent_not_reading");
                }
                if start.elapsed() > SETTLE_GIVE_UP {
                    return fail(
                        run,
                        "the agent's previous turn did not end; try again, or kill the session".into(),
                        "busy",
                    );
                }
                match next(run, &th, guard.feed(), TICK)? {
                    Next::Events(evs) => backlog(run, &th, evs)?,
                    Next::Idle => {}
                    Next::Closed => return agent_died(run, &th),
                }
                if super::http::client_gone(peek) {
                    return Ok(End::Gone);
                }
            }
            let mut st = lock(&th.st);
            let open = st.open();
            if !open.is_empty() {
                // Raised while the earlier turn settled.
                drop(st);
                return end_interrupted(run, &th, &open);
            }
            let msg = Input::Message(MessageInput { text: input.prompt.to_string(), by: Some("agui".into()) });
            if let Err(m) = st.send(msg) {
                drop(st);
                let code = if matches!(m, NotSent::NotReading(_)) { "agent_not_reading" } else { "agent_gone" };
                return fail(run, m.to_string(), code);
            }
            st.turns_open += 1;
            // A stop before this message was the earlier turn's.
            run.stops_seen = st.stops();
        }
    }
    // Phase 3: stream until the run ends.
    let mut last_check = Instant::now();
    loop {
        match next(run, &th, guard.feed(), TICK)? {
            Next::Events(evs) => {
                if live(run, &th, evs)? {
                    return Ok(End::Done);
                }
            }
            Next::Idle => {
                if settle_end(run, &th)? {
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
            if run.body.check().is_err() || super::http::client_gone(peek) {
                // The turn is interrupted; the session stays for the next run.
                let _ = lock(&th.st).send(Input::Interrupt(Who { by: Some("agui: the client left".into()) }));
                return Ok(End::Gone);
            }
            let stopped = {
                let mut st = lock(&th.st);
                let s = st.stops() > run.stops_seen;
                if s {
                    // The turn was stopped (the `stop` input): its result, if
                    // the agent sends one, is an earlier turn's for the next run.
                    st.turns_open = 0;
                }
                s
            };
            if stopped || shared.is_shutting_down() {
                let e = run.tr.end_with(RunOutcome::Cancelled, run.now());
                run.emit(e)?;
                return Ok(End::Done);
            }
        }
    }
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

/// What the session printed next, for the run.
enum Next {
    /// A line's events (none for a line that makes none, or a gap shown).
    Events(Vec<Event>),
    /// Nothing within the wait.
    Idle,
    /// The session's output ended (the agent is gone).
    Closed,
}

/// Takes the session's next output line: from the channel, or from the
/// log where the channel dropped lines; lines neither holds are shown as a
/// `runwire.lines_not_streamed` event and passed over.
fn next(run: &mut Run, th: &Thread, feed: &mut Feed, wait: Duration) -> io::Result<Next> {
    let taken = lock(&th.st).taken;
    Ok(match feed.next(taken, wait) {
        Got::Line(bytes, at) => Next::Events(lock(&th.st).take_line(&bytes, at)),
        Got::Gap(from, to) => {
            lock(&th.st).skip_lines(from, to);
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

impl Drop for Streaming<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.th.st);
        if st.agent.is_some() {
            st.rx = self.rx.take();
        }
    }
}

fn adopt(th: &Thread, run: &mut Run) {
    let st = lock(&th.st);
    run.tr.adopt_tool_calls(st.tool_ids.iter());
}

/// Remembers the run's tool calls for later runs of the thread.
fn remember(th: &Thread, run: &Run) {
    let mut st = lock(&th.st);
    for (k, v) in run.tr.tool_calls() {
        st.tool_ids.insert(k.clone(), v.clone());
    }
}

fn session_info(st: &State) -> Value {
    let mut v = json!({"interactive": true, "task": TASK});
    if let Some(id) = &st.record_id {
        v["run"] = id.clone().into();
        v["steer"] = format!("/runs/{id}/tasks/{TASK}/steer").into();
        v["stop"] = format!("/runs/{id}/tasks/{TASK}/stop").into();
        v["answer"] = format!("/runs/{id}/tasks/{TASK}/answer").into();
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
            let gone = lock(&th.st).agent_gone();
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
fn live(run: &mut Run, th: &Thread, evs: Vec<Event>) -> io::Result<bool> {
    let mut asked = false;
    for ev in evs {
        match &ev.data {
            Data::InputRequest(r) => {
                raise(run, th, r);
                asked = true;
            }
            Data::InputAnswer(a) => lock(&th.st).raised.closed(a),
            Data::TurnEnd(_) => run.turn_ended = true,
            Data::Exit(_) => {
                let out = run.tr.push(&ev);
                run.emit(out)?;
                let gone = lock(&th.st).agent_gone();
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
    let open = lock(&th.st).open();
    if asked && !open.is_empty() {
        end_interrupted(run, th, &open)?;
        return Ok(true);
    }
    settle_end(run, th)
}

/// Ends the run once its turn is over: a turn ended since its input, none
/// the run sent is still running (`turns_open`), nobody is asked anything,
/// and the session has settled: the run has streamed all the session
/// printed and no turn runs or is owed there. The last two make a steer
/// that raced the turn's end part of this run: one that started a new turn
/// (codex had ended the turn: `turn/start`, or a `turn/steer` codex refused,
/// which the session sends again as `turn/start`) keeps the session
/// mid-turn, so the run follows that turn to its end.
fn settle_end(run: &mut Run, th: &Thread) -> io::Result<bool> {
    if !run.turn_ended {
        return Ok(false);
    }
    let st = lock(&th.st);
    if st.turns_open > 0 || !st.open().is_empty() || !st.settled() {
        return Ok(false);
    }
    let stopped = st.stops() > run.stops_seen;
    drop(st);
    let e = if stopped { run.tr.end_with(RunOutcome::Cancelled, run.now()) } else { run.tr.finish() };
    run.emit(e)?;
    Ok(true)
}

/// Records a request of the agent as an interrupt of the thread, bound to
/// the AG-UI toolCallId of its call.
fn raise(run: &Run, th: &Thread, r: &crate::events::InputRequest) {
    let mut st = lock(&th.st);
    let tcid =
        r.tool_call_id.as_ref().and_then(|raw| run.tr.tool_calls().get(raw).or_else(|| st.tool_ids.get(raw)).cloned());
    st.raised.raise(r, tcid);
}

fn agent_died(run: &mut Run, th: &Thread) -> io::Result<End> {
    // Taken under the lock, written to the client after it.
    let (mut events, exit, gone) = {
        let mut st = lock(&th.st);
        let rc = st.agent.as_ref().and_then(Engine::exit_code);
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
        (events, exit, st.agent_gone())
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

fn recorder(shared: &Shared, input: &RunRequest) -> Option<Recorder> {
    if !shared.cfg.record {
        return None;
    }
    match Recorder::start(&shared.cfg.harness_home, input.run_id, shared.cfg.adapter.name(), input.prompt) {
        Ok(r) => Some(r),
        Err(e) => {
            crate::cli::report(super::BIN, format!("cannot record the session of thread {:?}: {e}", input.thread_id));
            None
        }
    }
}

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
        let gone = lock(&th.st).agent_gone();
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
    if let Some(iid) = rid.as_str().filter(|r| r.starts_with(super::interrupts::ID_PREFIX)) {
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
            let e = super::interrupts::ResumeEntry {
                interrupt_id: rid.clone(),
                status: "resolved".into(),
                payload: Some(json!({"answers": a.get("answers").cloned().unwrap_or(Value::Null)})),
            };
            if let Err(m) = super::interrupts::answer_for(req, interrupt, &e, "check") {
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
    match st.send(input) {
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
    match st.send_at(Input::Steer(SteerInput { text, interrupt, by: Some("steer".into()) })) {
        Ok(t) => {
            // A steer that became a turn of its own is one the streaming run follows.
            if matches!(t.ack, Ack::Started | Ack::InterruptedThenStarted | Ack::CancelledThenPrompted) {
                st.turns_open += 1;
            }
            Reply::Ok(json!({"ok": true, "live": true, "detail": t.ack.to_string()}))
        }
        Err(e) => e.into(),
    }
}

fn stop_route(st: &mut State) -> Reply {
    // The stop rules are the session's (`stop` input): open requests
    // cancelled, then the turn interrupted; nothing when nothing runs.
    match st.send_at(Input::Stop(Who { by: Some("stop".into()) })) {
        Ok(t) => Reply::Ok(json!({"ok": true, "detail": t.ack.to_string()})),
        Err(e) => e.into(),
    }
}

/// The server's AG-UI `AgentCapabilities` (`GET /agui/capabilities`, and
/// `capabilities` in `/api/info`).
pub fn capabilities(shared: &Shared) -> Value {
    let hitl = if shared.cfg.interactive {
        // Only claude runs a call with edited input; codex and ACP run it as asked.
        let edits = shared.cfg.adapter == crate::normalize::Adapter::Claude;
        json!({"supported": true, "approvals": true, "interventions": true, "interrupts": true, "approveWithEdits": edits})
    } else {
        json!({"supported": false})
    };
    json!({
        "identity": {"name": super::BIN, "type": shared.cfg.adapter.name(), "version": env!("CARGO_PKG_VERSION")},
        "transport": {"streaming": true},
        "humanInTheLoop": hitl,
    })
}

// ---- the live session: the library's Session, driven ----------------------

use crate::session::driver::{self, JournalTo};
use crate::session::engine::Engine;
use crate::session::input::{Input, MessageInput, SteerInput, Who};
use crate::session::launch::{launch, LaunchOptions};
use crate::session::tap::{Feed, Got};
use crate::session::Ack;

/// Starts a thread's session: the agent as `runwire-session` runs it
/// (`--agent-cmd`, else `$RUNWIRE_<AGENT>_BIN`, else its usual name; the
/// protocol's flags appended), recorded to `rec`, journaled to `journal`.
fn start_live(
    shared: &Shared,
    resume: Option<&str>,
    journal: Option<std::path::PathBuf>,
    rec: Arc<Mutex<Option<Recorder>>>,
) -> Result<(Engine, Feed), String> {
    let mut o = launch_options(&shared.cfg);
    o.resume = resume.map(str::to_string);
    let opts = crate::session::Options {
        answer_timeout_ms: shared.cfg.answer_timeout.as_millis() as i64,
        actor: super::BIN.into(),
    };
    let journal = journal.map(|path| JournalTo { path, task: TASK.into(), actor: crate::runs::record::ACTOR.into() });
    Engine::start(shared.cfg.kind, &o, opts, journal, rec, super::BIN)
}

/// A command to a live session, with why it was not sent.
fn command(live: &Engine, input: Input) -> Result<driver::Taken, NotSent> {
    match live.command(input) {
        Ok(t) => Ok(t),
        Err(why @ crate::session::Refused::NotReading { .. }) => Err(NotSent::NotReading(why.to_string())),
        Err(why) => Err(NotSent::Refused(why.to_string())),
    }
}

/// The session settings the server's flags give, for every thread: the
/// one place they are read (checked at start by [`check_launch`]).
fn launch_options(cfg: &super::Config) -> LaunchOptions {
    LaunchOptions {
        cmd: cfg
            .engine
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .chain(cfg.engine_args.iter().cloned())
            .collect(),
        grant_all: cfg.grant_all,
        permission_mode: cfg.permission_mode.clone(),
        plan_exit_mode: cfg.plan_exit_mode.clone(),
        sandbox: cfg.sandbox.clone(),
        approval_policy: cfg.approval_policy.clone(),
        ..LaunchOptions::default()
    }
}

/// Checks the server's session settings as `runwire-session` checks its
/// own (`session::launch`); nothing is started. `Err` is a usage error.
pub fn check_launch(cfg: &super::Config) -> Result<(), String> {
    launch(cfg.kind, &launch_options(cfg)).map(drop)
}

/// The agent program a session would start (`--agent-cmd`, else
/// `$RUNWIRE_<AGENT>_BIN`, else its usual name), as given.
pub fn agent_program(cfg: &super::Config) -> Option<String> {
    launch(cfg.kind, &launch_options(cfg)).ok()?.argv.into_iter().next()
}
