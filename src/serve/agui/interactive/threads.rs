//! The live sessions `runwire-serve --interactive` holds: one
//! [`Engine`] per AG-UI thread, kept between runs, bounded in number, and
//! recorded as a run with one task. What a session is doing (phase, turn,
//! open requests, session id, exit) is the engine's [`Status`]; nothing
//! here keeps a copy of it.

pub(super) use super::sessions::{Ending, State};
pub use super::sessions::{Sessions, Thread};
use crate::pipeline::normalize::{Normalizer, Options};
use crate::runs::record::Recorder;
use crate::serve::agui::book::MAX_THREADS;
use crate::serve::interrupts::{Offer, Raised};
use crate::serve::state::Shared;
use crate::session::driver::{JournalTo, Taken};
use crate::session::engine::{Engine, Status};
use crate::session::input::{Input, Who};
use crate::session::launch::{launch, LaunchOptions};
use crate::session::tap::Feed;
use crate::util::time::Clock;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The name an approval link is minted for when no named person sent the message.
pub use crate::control::links::LINK_NAME;

/// Live sessions held at once; a new thread past this is refused (503).
pub const MAX_SESSIONS: usize = 64;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a session input was not sent.
#[derive(Debug)]
pub(super) enum NotSent {
    /// The session refused it (nothing was written): why.
    Refused(String),
    /// Refused as not fitting its request (an answer naming a question
    /// that was not asked): the caller's to correct, the request stays open.
    Invalid(String),
    /// The agent is not reading its input: nothing was taken; try again later.
    NotReading(String),
}

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSent::Refused(m) | NotSent::Invalid(m) | NotSent::NotReading(m) => f.write_str(m),
        }
    }
}

/// One session input to `agent` (a handle taken under the thread's lock,
/// which the caller has let go of: the wait for the loop's reply holds no
/// lock another request of the thread needs), with what the session did.
/// Never waits for the agent: one that does not read its input is
/// [`NotSent::NotReading`]. An answer may name its request by runwire's
/// interrupt id: the session's loop resolves it against the requests its
/// own agent process raised, so an id of another process or thread is
/// refused there, whatever happened to the thread meanwhile.
pub(super) fn send(agent: Option<&Engine>, input: Input) -> Result<Taken, NotSent> {
    let Some(a) = agent else {
        return Err(NotSent::Refused("the agent's session is not running".into()));
    };
    match a.command(input) {
        Ok(t) => Ok(t),
        Err(why @ crate::session::Refused::NotReading { .. }) => Err(NotSent::NotReading(why.to_string())),
        Err(crate::session::Refused::Unknown(id)) if crate::control::is_interrupt_id(&id) => Err(NotSent::Refused(format!(
            "interrupt {id:?} is not one of this session's agent process (an earlier process's, another thread's, or forgotten): nothing was sent"
        ))),
        Err(crate::session::Refused::Invalid(why)) => Err(NotSent::Invalid(why)),
        Err(why) => Err(NotSent::Refused(why.to_string())),
    }
}

/// Longest the shutdown waits for a start under way (spawning is
/// milliseconds; a record on a stalled disk, or a journal another process
/// holds locked, may take longer: such a start stops its own agent when it
/// ends, and one cut short by the server's exit is found by the next
/// server's recovery, as a crash would be).
const START_WAIT: Duration = Duration::from_secs(5);

/// Why a thread's session was not started.
#[derive(Debug)]
pub(super) enum NotStarted {
    /// Another run of the thread is starting it.
    Starting,
    /// It could not start (its record, when it has one, says `failed` and why).
    Failed(String),
    /// Its run's runId is recorded, or being recorded, by another server,
    /// or this server cannot record it: nothing was started or written.
    NotRecorded(crate::serve::agui::common::NotRecorded),
}

/// Clears a thread's `starting` if its start unwinds (a panic while the
/// record is made or the agent spawned): the thread is not left starting,
/// refusing every later run as busy.
struct StartGuard<'a>(&'a Thread);

impl Drop for StartGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.start_ended();
        }
    }
}

impl Thread {
    /// A start ends with nothing started: the thread is not starting, and
    /// whoever waits for it ([`Thread::settled`]) looks again.
    fn start_ended(&self) {
        lock(&self.st).starting = false;
        self.started.notify_all();
    }

    /// The thread's state once no start is under way. The wait lets go of
    /// the thread's lock (a start holds none while it makes the record and
    /// spawns the agent); after [`START_WAIT`] the state is returned as it is.
    pub(super) fn settled(&self) -> MutexGuard<'_, State> {
        let st = lock(&self.st);
        match self.started.wait_timeout_while(st, START_WAIT, |s| s.starting) {
            Ok((st, _)) => st,
            Err(e) => e.into_inner().0,
        }
    }

    /// Starts the thread's session unless one runs or is starting
    /// (recorded as a new run when the thread has no record open). The
    /// record is made and the agent spawned with no lock of the thread
    /// held: a second request of the thread is answered meanwhile, not
    /// queued behind the spawn. A start that ends after the server began
    /// shutting down stops what it started.
    pub(super) fn ensure_started(
        &self,
        shared: &Shared,
        run_id: &str,
        prompt: &str,
        request: &str,
    ) -> Result<(), NotStarted> {
        let (rec, resume, generation, link_for) = {
            let mut st = lock(&self.st);
            st.last_used = Instant::now();
            if st.agent.is_some() {
                return Ok(());
            }
            if st.starting {
                return Err(NotStarted::Starting);
            }
            if shared.is_shutting_down() {
                return Err(NotStarted::Failed("the server is shutting down".into()));
            }
            st.starting = true;
            (st.rec.clone(), st.resume.clone(), st.generation + 1, st.link_for.clone())
        };
        let _unwinding = StartGuard(self);
        // Nothing else replaces `rec` while `starting` holds (only a live
        // agent's end does), so the record is made in the thread's slot.
        let mut new_record = None;
        let open_record = lock(&rec).is_some();
        if !open_record {
            let what = || format!("cannot record the session of thread {:?}", self.id);
            let made = match crate::serve::agui::common::record(shared, run_id, prompt, request, what) {
                Ok(made) => made,
                Err(not) => {
                    self.start_ended();
                    return Err(NotStarted::NotRecorded(not));
                }
            };
            new_record = made.as_ref().map(|r| r.run_id.clone());
            *lock(&rec) = made;
        }
        let journal = lock(&rec).as_ref().map(Recorder::journal);
        let started = start_live(shared, resume.as_deref(), generation, journal, rec.clone(), link_for);
        let mut st = lock(&self.st);
        st.starting = false;
        // The thread's run is the new process's record, or none (not
        // recorded): a route naming the earlier process's run never
        // reaches this one.
        if let Some(id) = &new_record {
            lock(&shared.sessions.by_record).insert(id.clone(), self.id.clone());
        }
        if !open_record {
            st.record_id = new_record;
        }
        let result = match started {
            Ok((agent, rx)) => {
                st.generation = generation;
                st.agent = Some(agent);
                // Interrupts raised before are an earlier process's.
                st.raised.new_process();
                st.rx = Some(rx);
                st.norm =
                    Normalizer::new(shared.cfg.adapter, Options { run: None, task: None, clock: Clock::from_env() });
                if shared.is_shutting_down() {
                    let gone = st.agent_gone(Ending::Shutdown);
                    drop(st);
                    self.started.notify_all();
                    if let Some(g) = gone {
                        g.stop();
                    }
                    return Err(NotStarted::Failed("the server is shutting down".into()));
                }
                Ok(())
            }
            Err(why) => Err(why),
        };
        drop(st);
        self.started.notify_all();
        result.map_err(|why| {
            // Nothing runs: the record says so and why, now.
            if let Some(r) = lock(&rec).take() {
                let detail = Some(format!("the agent's session could not start: {why}"));
                if let Err(e) = r.finish("failed", None, detail) {
                    crate::util::cli::report(crate::serve::options::BIN, format!("record {}: {e}", r.run_id));
                }
            }
            NotStarted::Failed(why)
        })
    }
}

impl State {
    fn new(shared: &Shared) -> State {
        State {
            agent: None,
            starting: false,
            rx: None,
            norm: Normalizer::new(shared.cfg.adapter, Options { run: None, task: None, clock: Clock::from_env() }),
            raised: Raised::new(Offer { agent: shared.cfg.kind, grant_all: shared.cfg.grant_all }),
            tool_ids: crate::util::bounded::Bounded::new(crate::pipeline::translate::TOOL_MEMORY),
            resume: None,
            rec: Arc::new(Mutex::new(None)),
            record_id: None,
            generation: 0,
            last_used: Instant::now(),
            link_for: Arc::new(Mutex::new(LINK_NAME.into())),
        }
    }

    /// A handle to the running session, to command it once this lock is
    /// let go of ([`send`]): a command waits for the session's loop, and no
    /// request of the thread may wait behind that under this lock.
    pub(super) fn engine(&self) -> Option<Engine> {
        self.agent.clone()
    }

    /// The session's status (`None`: no agent runs).
    pub(super) fn status(&self) -> Option<Status> {
        self.agent.as_ref().map(Engine::status)
    }

    /// The session's open requests, oldest first (expired ones closed first).
    pub(super) fn open(&self) -> Vec<String> {
        self.status().map(|s| s.open.into_iter().map(|o| o.id).collect()).unwrap_or_default()
    }

    /// No run streams it, no turn runs, nobody is asked anything.
    fn is_idle(&self) -> bool {
        self.rx.is_some() && self.status().is_some_and(|s| s.is_idle())
    }

    /// The agent is gone, or is being ended (`why`): nobody waits for its
    /// requests any more. What is returned is stopped by the caller
    /// ([`Gone::stop`]) once it has let go of the thread's lock: stopping
    /// waits for the process.
    #[must_use]
    pub(super) fn agent_gone(&mut self, why: Ending) -> Option<Gone> {
        let gone = self.agent.take().map(|live| {
            let status = live.status();
            if let Some(id) = &status.session_id {
                self.resume = Some(id.clone());
            }
            // Its input closes once what is queued is written (an `end`'s
            // cancels and interrupt); a deaf agent's is dropped when it dies.
            live.end_input();
            // The ended session's sink keeps the old slot: a late line of
            // it never lands in the next session's record.
            let rec = std::mem::replace(&mut self.rec, Arc::new(Mutex::new(None)));
            Gone { live, rec, why, held: status.between_turns(), asked: !status.open.is_empty(), by: None }
        });
        self.rx = None;
        gone
    }
}

/// A session taken off its thread, to be stopped outside any lock.
pub(super) struct Gone {
    live: Engine,
    rec: Arc<Mutex<Option<Recorder>>>,
    why: Ending,
    /// Every turn it began had ended, and nothing was asked.
    held: bool,
    /// A request of the agent's waited for an answer.
    asked: bool,
    /// Who killed it (a person's kill is journaled with their name).
    by: Option<String>,
}

impl Gone {
    /// The person who killed it, for the record that ends the run.
    pub(super) fn killed_by(self, who: &str) -> Gone {
        Gone { by: Some(who.to_string()), ..self }
    }

    /// Stops the agent's process group (TERM and CONT, the grace, KILL),
    /// reaps it and ends the record. Ended by the server (a kill, an
    /// eviction, its shutdown): `committed` when it was held between turns
    /// (its turns finished), `halted` when a turn ran or a request waited
    /// for an answer, whatever the agent's exit code (an agent told to end
    /// may exit 0, and its turn was still cut short). Exited on its own:
    /// `committed` on 0, else `halted`.
    pub(super) fn stop(self) {
        let rc = self.live.kill();
        if let Some(rec) = lock(&self.rec).take() {
            let killer = self.by.as_deref().map_or(String::new(), |who| format!(" by {who} through the task route"));
            let ended = match self.why {
                Ending::Exited => None,
                Ending::Killed => Some(format!("killed{killer}")),
                Ending::Evicted => Some("ended to make room for another thread's session".to_string()),
                Ending::Shutdown => Some("ended by the server's shutdown".to_string()),
            };
            let (state, detail) = match (ended, rc) {
                (Some(e), _) if self.held => ("committed", Some(format!("the session was held between turns; {e}"))),
                (Some(e), _) if self.asked => ("halted", Some(format!("{e} while waiting for an answer"))),
                (Some(e), _) => ("halted", Some(format!("{e} while the agent was running"))),
                (None, Some(0)) => ("committed", None),
                (None, _) => ("halted", None),
            };
            let actor = self.by.as_deref().unwrap_or(crate::runs::record::ACTOR);
            if let Err(e) = rec.finish_as(actor, state, rc, detail) {
                crate::util::cli::report(crate::serve::options::BIN, format!("record {}: {e}", rec.run_id));
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

impl Sessions {
    pub(super) fn thread(&self, shared: &Shared, id: &str) -> Result<Arc<Thread>, String> {
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
                (st.agent.is_some() || st.starting).then(|| (st.last_used, th.clone()))
            })
            .collect();
        if live.len() >= MAX_SESSIONS {
            let idle = live
                .iter()
                .filter(|(_, th)| th.st.try_lock().is_ok_and(|st| st.is_idle()))
                .min_by_key(|(at, _)| *at)
                .map(|(_, th)| th.clone());
            let Some(th) = idle else {
                return Err(format!(
                    "{MAX_SESSIONS} interactive sessions are busy (running a turn or waiting for an answer); try again later"
                ));
            };
            // Stopped in the background: this lock is every thread's.
            let gone = lock(&th.st).agent_gone(Ending::Evicted);
            if let Some(g) = gone {
                g.stop_later();
            }
        }
        if t.len() >= MAX_THREADS {
            let gone: Vec<String> = t
                .iter()
                .filter(|(_, th)| th.st.try_lock().is_ok_and(|st| st.agent.is_none() && !st.starting))
                .map(|(k, _)| k.clone())
                .collect();
            let n = (t.len() + 1).saturating_sub(MAX_THREADS);
            let gone: Vec<String> = gone.into_iter().take(n).collect();
            for k in &gone {
                t.remove(k);
            }
            lock(&self.by_record).retain(|_, thread| !gone.contains(thread));
        }
        let th = Arc::new(Thread { id: id.to_string(), st: Mutex::new(State::new(shared)), started: Condvar::new() });
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
    /// A session held between turns is recorded `committed`: its turns
    /// finished; one mid-turn or waiting for an answer, `halted`.
    pub fn end_all(&self) {
        let all: Vec<Arc<Thread>> = lock(&self.threads).values().cloned().collect();
        let gone: Vec<Gone> = all
            .iter()
            .filter_map(|th| {
                // A start under way stops what it started (the server is
                // shutting down); one that already ended is ended here.
                let agent = th.settled().engine()?;
                // Read before the end, which cancels what is asked.
                let before = agent.status();
                // Sent with no lock held: the wait is the loop's turn.
                let _ = send(Some(&agent), Input::End(Who { by: Some(crate::serve::options::BIN.into()) }));
                let mut gone = lock(&th.st).agent_gone(Ending::Shutdown)?;
                (gone.held, gone.asked) = (before.between_turns(), !before.open.is_empty());
                Some(gone)
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

/// Starts a thread's session: the agent as `runwire-session` runs it
/// (`--agent-cmd`, else `$RUNWIRE_<AGENT>_BIN`, else its usual name; the
/// protocol's flags appended), recorded to `rec`, journaled to `journal`.
fn start_live(
    shared: &Shared,
    resume: Option<&str>,
    generation: u64,
    journal: Option<std::path::PathBuf>,
    rec: Arc<Mutex<Option<Recorder>>>,
    link_for: Arc<Mutex<String>>,
) -> Result<(Engine, Feed), String> {
    let mut o = launch_options(&shared.cfg);
    o.resume = resume.map(str::to_string);
    let opts = crate::session::Options {
        answer_timeout_ms: shared.cfg.answer_timeout.as_millis() as i64,
        actor: crate::serve::options::BIN.into(),
    };
    let task = crate::runs::record::TASK.into();
    // Approval links (--public-url): bound to this run, its task and each request's own id and deadline.
    let run_id = lock(&rec).as_ref().map(|r| r.run_id.clone());
    let run = lock(&rec).as_ref().map(|r| r.run().clone());
    let links = shared.cfg.links.clone().zip(run_id).map(|(keys, run)| {
        let task: String = crate::runs::record::TASK.into();
        crate::session::driver::Linker(Arc::new(move |r: &crate::pipeline::events::InputRequest| {
            let name = lock(&link_for).clone();
            crate::serve::link_keys::claims_for(&run, &task, r, &name).map(|c| keys.link(&c)).into_iter().collect()
        }))
    });
    let journal = journal.map(|path| JournalTo { path, run, task, actor: crate::runs::record::ACTOR.into(), links });
    Engine::start(shared.cfg.kind, &o, opts, generation, journal, rec, crate::serve::options::BIN)
}

/// The session settings the server's flags give, for every thread: the
/// one place they are read (checked at start by [`check_launch`]).
fn launch_options(cfg: &crate::serve::options::Config) -> LaunchOptions {
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
pub fn check_launch(cfg: &crate::serve::options::Config) -> Result<(), String> {
    launch(cfg.kind, &launch_options(cfg)).map(drop)
}

/// The agent program a session would start (`--agent-cmd`, else
/// `$RUNWIRE_<AGENT>_BIN`, else its usual name), as given.
pub fn agent_program(cfg: &crate::serve::options::Config) -> Option<String> {
    launch(cfg.kind, &launch_options(cfg)).ok()?.argv.into_iter().next()
}
