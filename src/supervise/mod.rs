//! The supervisor: runs a plan wave by wave, owning the task processes so
//! that they can be killed, steered, paused and resumed through a control
//! socket ([`socket`]). The state machine is `spec/SUPERVISOR.md`.
//!
//! By responsibility: [`waves`] is the plan's state machine (pure: no IO),
//! [`runner`] starts each step's process through `session::proc`, copies its
//! output into the task log and reads an interactive turn's session as an
//! engine client (its typed lines, off the pipe), [`commands`] carries out
//! the control verbs, [`socket`] is the control socket, [`records`] is what
//! is journaled and what a restart rebuilds from the journal, [`owned`]
//! whether a run's supervisor still runs, as its views say. The loop's
//! state (`Sup`, with [`Options`]) is a leaf, `state.rs`, below the files
//! that extend it: this module (the loop), `steps.rs` (a step's process and
//! its reports) and [`commands`]; `awaiting.rs` is a control request
//! waiting for its session's acknowledgement.
//!
//! One loop (this module's) owns every task and every decision: the socket's
//! threads and each step's threads only send it [`Ev`]s over one channel, so
//! no state is shared and the loop waits for events, not on a clock.

mod awaiting;
pub mod commands;
pub mod owned;
pub mod records;
pub mod request;
pub mod runner;
pub mod socket;
mod state;
mod steps;
pub mod waves;

use crate::runs::journal::Journal;
use crate::runs::liveness;
use crate::runs::plan::Plan;
use crate::runs::registry::{NewRun, Registry};
use crate::runs::{self, RunFiles};
use crate::session::launch::AgentKind;

use nix::sys::signal::Signal;
use records::Records;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use waves::{Effect, Waves};

pub use runner::Ev;
pub use state::Options;
use state::{now_ts, Sup};
pub use waves::ACTOR;

/// Longest the loop waits for an event before it looks at the stop flag
/// (a signal handler can only set it) and its timers.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// How a supervisor run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every task committed.
    AllCommitted,
    /// Finished, but some task halted or failed.
    SomeHalted,
    /// Stopped by SIGTERM/SIGINT: running tasks were killed and journaled.
    Aborted,
}

/// Why a run could not start: usage (bad plan, bad id) or I/O.
pub use crate::util::cli::StartError;

/// The slug of a plan file: its name without `.plan.json` / `.json`.
pub fn slug_of(plan: &Path) -> String {
    let name = plan.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".plan.json").or_else(|| name.strip_suffix(".json")).unwrap_or(&name);
    stem.to_string()
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn io(what: &Path, e: impl std::fmt::Display) -> StartError {
    StartError::Io(format!("{}: {e}", what.display()))
}

/// Runs the plan to its end. Takes the run ([`socket::Ownership`]),
/// registers it, binds the control socket, continues from the journal, and
/// cleans the socket up on the way out. Refused at either of the first two
/// steps (another supervisor of the run is live: exit 3; another run owns
/// the slug in the runstate directory: exit 2), it has written nothing.
pub fn run(opts: Options) -> Result<Outcome, StartError> {
    runs::check_id("slug", &opts.slug).map_err(StartError::Usage)?;
    let bytes = std::fs::read(&opts.plan).map_err(|e| io(&opts.plan, e))?;
    let plan = Plan::parse(&bytes).map_err(|e| StartError::Usage(format!("{}: {e}", opts.plan.display())))?;
    let mut wrappers = BTreeMap::new();
    let mut session_bin = None;
    for t in &plan.tasks {
        if t.adapter == "acp" {
            // An ACP agent only speaks its protocol: there is no batch turn to run.
            if !opts.interactive {
                return Err(StartError::Usage(format!(
                    "{}: task {:?}: adapter \"acp\" runs only with --interactive (ACP has no batch mode)",
                    opts.plan.display(),
                    t.id
                )));
            }
            if session_bin.is_none() {
                session_bin = Some(runner::find_session().map_err(StartError::Usage)?);
            }
        }
        for a in std::iter::once(t.adapter.as_str()).chain(t.review.as_deref()) {
            if let (Some(ad), false) = (crate::runs::view::adapter(a), wrappers.contains_key(a)) {
                // The session settings its wrapper will read, under the same flag rules.
                crate::session::wrappers::check_env(AgentKind::of(ad)).map_err(StartError::Usage)?;
                let w = runner::find_wrapper(opts.wrapper_dir.as_deref(), ad).map_err(StartError::Usage)?;
                wrappers.insert(a.to_string(), w);
            }
        }
    }
    let root = opts.workdir.display().to_string();
    let run_id = crate::runs::registry::run_id(&root, &root, &opts.slug);
    // Absolute: liveness hands this path to other processes (runwire-serve)
    // that run in other directories.
    let home = std::path::absolute(&opts.home).map_err(|e| io(&opts.home, e))?;
    let sock = socket::sock_path(&home, &run_id);
    // sun_path holds 108 bytes with its NUL; refuse rather than truncate.
    if sock.as_os_str().len() > 107 {
        return Err(StartError::Usage(format!(
            "{}: control socket path longer than 107 bytes; use a shorter HARNESS_HOME or slug",
            sock.display()
        )));
    }
    // 1. The run is this process's, held for its life, before anything of
    // the run is written: held by another process, that supervisor is live.
    let owned = socket::Ownership::take(&home, &run_id).map_err(StartError::Io)?;
    // A run id already registered keeps its runstate directory: started
    // with another, it would be pointed there and run anew, its first
    // journal orphaned. Refused (this process holds the run: no other
    // supervisor of it can register meanwhile), nothing written.
    let reg = Registry::at(&opts.home);
    if let Ok(had) = reg.read(&run_id) {
        let given = opts.runstate.canonicalize().or_else(|_| std::path::absolute(&opts.runstate));
        let same = given.as_ref().is_ok_and(|g| {
            Path::new(&had.runstate_dir) == g || Path::new(&had.runstate_dir).canonicalize().is_ok_and(|h| h == *g)
        });
        if !same {
            return Err(StartError::Usage(format!(
                "{}: run {run_id} (slug {:?} of {root}) is registered with its runstate in {}: to continue that run, start it with --runstate {}; for a new run, give another --slug; or remove the registered run first (runs rm {run_id})",
                opts.runstate.display(),
                opts.slug,
                had.runstate_dir,
                had.runstate_dir
            )));
        }
    }
    // Where its approval links live, recorded before one is minted: readers
    // pass on only links under a recorded prefix (`runs::link_prefixes`).
    if let Some(keys) = &opts.links {
        crate::runs::link_prefixes::record(&home, &keys.public)
            .map_err(|e| io(&crate::runs::link_prefixes::path(&home), e))?;
    }
    // 2. Registration: the owner check and the writes in one step, so one of
    // the runs that want the slug in this runstate directory wins.
    if opts.runstate.exists() && !opts.runstate.is_dir() {
        let e = std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory (--runstate names the run's directory)",
        );
        return Err(io(&opts.runstate, e));
    }
    std::fs::create_dir_all(&opts.runstate).map_err(|e| io(&opts.runstate, e))?;
    let runstate = opts.runstate.canonicalize().map_err(|e| io(&opts.runstate, e))?;
    let files = RunFiles::new(&runstate, &opts.slug);
    let new = NewRun {
        slug: opts.slug.clone(),
        repo_root: root,
        runstate_dir: Some(runstate.display().to_string()),
        ..NewRun::default()
    };
    let pointer = new.pointer(now_ts()).map_err(StartError::Usage)?;
    // The id the lock was taken for is the pointer's (no worktree given: the repo root's).
    debug_assert_eq!(pointer.run_id, run_id);
    // Also holds the run's mark (`runs::marks`) before any of its files is written.
    reg.register(&pointer).map_err(|e| match e.kind() {
        // Another registered run owns the slug here: refused, nothing written.
        std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::InvalidInput => StartError::Usage(e.to_string()),
        _ => io(&reg.path(&run_id), e),
    })?;
    // 3. The run's files: its plan, the socket, who owns it. The run is
    // registered now: a step that fails here says so in the journal (the run
    // reads `failed`, with why), not only on stderr, or it would list as
    // `registered` for ever with nothing running it.
    let (listener, owner, journal, interrupts) =
        match prepare(&files, &opts.plan, &bytes, &sock, &owned, &home, &run_id) {
            Ok(ready) => ready,
            Err(e) => {
                let why = match &e {
                    StartError::Usage(m) | StartError::Io(m) => m.clone(),
                };
                let mut r = crate::runs::journal::Record::run(ACTOR, "aborted");
                r.detail = Some(format!("the supervisor could not start: {why}"));
                let _ =
                    crate::runs::journal::append(&crate::runs::marks::Run::new(&home, &run_id), &files.journal(), &r);
                return Err(e);
            }
        };
    let (tx, rx) = mpsc::channel::<Ev>();
    let report = opts.report;
    let waves = Waves::new(plan, opts.max_parallel);
    let rec = Records { files, run_id, home, owner, report, turn_totals: None, lost: Default::default() };
    let mut sup = Sup {
        opts,
        waves,
        rec,
        running: BTreeMap::new(),
        interrupts,
        wrappers,
        session_bin,
        steps: 0,
        events: tx.clone(),
    };
    let out = sup.start(&journal, &sock, listener, tx, rx);
    // Replies decided on the way out (the kill of the last task) still go out.
    socket::drain_replies(Duration::from_secs(2));
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(socket::owner_path(&sup.rec.home, &sup.rec.run_id));
    let _ = liveness::update(&sup.rec.files, |l| l.sock = None);
    // Let go last: until here no other supervisor of the run can start.
    drop(owned);
    // The run's work is done either way; a journal that could not take all
    // of it does not say so, so the exit does (3, as for any write that
    // failed), and says how to make the journal whole.
    match (out, sup.rec.lost()) {
        (Ok(_), Some((first, n))) => Err(StartError::Io(format!(
            "{}: {n} record(s) could not be written ({first}), so the journal may not say how the run ended; \
             once it can be written, start the same command again: it goes on from what the journal holds",
            sup.rec.files.journal().display()
        ))),
        (out, _) => out,
    }
}

/// What [`prepare`] made: the bound socket, the owner record, the journal
/// and each task's interrupts from it.
type Prepared = (std::os::unix::net::UnixListener, socket::Owner, Journal, BTreeMap<String, records::Interrupts>);

/// The run's files once it is registered: its plan copied in, the control
/// socket bound, the owner record written, the journal and its interrupts
/// read back.
fn prepare(
    files: &RunFiles,
    plan: &Path,
    bytes: &[u8],
    sock: &Path,
    owned: &socket::Ownership,
    home: &Path,
    run_id: &str,
) -> Result<Prepared, StartError> {
    if files.plan() != plan.canonicalize().unwrap_or_default() {
        runs::write_atomic(&files.plan(), bytes).map_err(|e| io(&files.plan(), e))?;
    }
    let listener = socket::bind(sock, owned).map_err(StartError::Io)?;
    // Registration outside the worktree: who may answer on the socket, and
    // which groups are ours to stop. The last supervisor's groups stay in
    // the record until `start` has dealt with them.
    let mut owner = socket::Owner::me().map_err(StartError::Io)?;
    owner.groups = socket::Owner::read(home, run_id).map(|o| o.groups).unwrap_or_default();
    owner.write(home, run_id).map_err(|e| io(&socket::owner_path(home, run_id), e))?;
    let journal = Journal::read(&files.journal()).map_err(|e| io(&files.journal(), e))?;
    let interrupts = records::restore(&files.journal());
    Ok((listener, owner, journal, interrupts))
}

impl Sup {
    /// Carries out what the state machine decided.
    fn apply(&mut self, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::State { actor, task, state, rc, detail, steer } => {
                    self.rec.state(&actor, &task, &state, rc, detail, steer);
                    if crate::runs::journal::is_terminal(&state) {
                        // Steers still queued for it never reach it: the journal says so.
                        let why = format!("the task ended {state} before its next turn");
                        for m in self.waves.drop_steers(&task) {
                            self.rec.steer_dropped(&task, &m, &why);
                        }
                    }
                }
                Effect::Start { task, step } => self.dispatch(&task, step),
            }
        }
    }

    /// A task's new state, through the state machine and into the journal.
    fn set_state(&mut self, actor: &str, task: &str, state: &str, rc: Option<i64>, detail: Option<String>) {
        let e = self.waves.set(actor, task, state, rc, detail);
        self.apply(vec![e]);
    }

    /// Stops the groups an earlier supervisor of this run recorded and left
    /// running (their output cannot be taken over). Only a group whose
    /// leader is still the recorded process (pid, start time, boot) is
    /// signalled, checked before each signal: liveness's `pgid`, which the
    /// agent can write, is never signalled. The signals are `session::proc`'s,
    /// which alone signals agent processes.
    fn stop_stale_groups(&mut self, stale: &liveness::Liveness) {
        for (task, e) in &stale.tasks {
            let ours = self.rec.owner.groups.get(task).is_some_and(|l| Some(l.pid) == e.pgid);
            if let Some(pgid) = e.pgid.filter(|&g| !ours && g > 1 && crate::session::proc::group_alive(g)) {
                crate::util::cli::report(
                    ACTOR,
                    format!("not stopping process group {pgid} named in liveness for task {task}: not one this run recorded"),
                );
            }
        }
        for (task, leader) in std::mem::take(&mut self.rec.owner.groups) {
            if let Some(why) = leader.group_mismatch() {
                if crate::session::proc::group_alive(leader.pid) {
                    crate::util::cli::report(
                        ACTOR,
                        format!("not stopping process group {} of task {task}: {why}", leader.pid),
                    );
                }
                continue;
            }
            crate::util::cli::report(ACTOR, format!("stopping stale process group {} of task {task}", leader.pid));
            if let Err(why) = crate::session::proc::stop_stale_group(&leader, self.opts.kill_grace) {
                crate::util::cli::report(
                    ACTOR,
                    format!("not stopping process group {} of task {task}: {why}", leader.pid),
                );
            }
        }
        self.rec.save_owner();
    }

    fn start(
        &mut self,
        journal: &Journal,
        sock: &Path,
        listener: std::os::unix::net::UnixListener,
        tx: mpsc::Sender<Ev>,
        rx: mpsc::Receiver<Ev>,
    ) -> Result<Outcome, StartError> {
        let stale = liveness::get(&self.rec.files);
        // The tasks whose process the last supervisor had started and not
        // seen end (its owner record, outside the worktree).
        let had_process: std::collections::BTreeSet<String> = self.rec.owner.groups.keys().cloned().collect();
        self.stop_stale_groups(&stale);
        let sock_s = sock.display().to_string();
        liveness::update(&self.rec.files, |l| {
            l.tasks.clear();
            l.sock = Some(sock_s);
        })
        .map_err(|e| io(&self.rec.files.live(), e))?;
        let restarted = journal.records > 0;
        // The journal is the truth: in flight when the last supervisor died
        // (its process is gone), a task redoes its turn or continues with
        // the step after a finished one (the session id from the stale liveness).
        // Else the one its log names: a `liveness reap` (cron) between the
        // crash and this start drops the entry, session id and all.
        let from_logs: BTreeMap<String, String> = self
            .waves
            .order()
            .iter()
            .filter(|id| {
                !journal.tasks.get(*id).and_then(|r| r.state.as_deref()).is_some_and(crate::runs::journal::is_terminal)
            })
            .filter(|id| stale.tasks.get(*id).and_then(|e| e.session_id.as_ref()).is_none())
            .filter_map(|id| {
                let s = crate::runs::view::log_session(&self.rec.files, id, &self.waves.def(id).adapter)?;
                Some((id.clone(), s))
            })
            .collect();
        let session_of =
            |id: &str| stale.tasks.get(id).and_then(|e| e.session_id.clone()).or_else(|| from_logs.get(id).cloned());
        let resumed = self.waves.restore(
            |id| {
                let r = journal.tasks.get(id);
                (r.and_then(|r| r.state.clone()), r.and_then(|r| r.detail.clone()))
            },
            session_of,
        );
        // A plan run again after it ended does nothing: say so, and how to
        // run it anew, instead of only repeating the old outcome.
        if restarted && self.waves.all_terminal() {
            crate::util::cli::report(
                ACTOR,
                format!(
                    "run {}: every task already ended in an earlier run of this plan (its journal {}), and finished tasks are not redone; to run the plan again, give another --slug (a new run with files of its own), or first move the run's files ({}/{}.*: its journal, task logs and liveness) away",
                    self.rec.run_id,
                    self.rec.files.journal().display(),
                    self.rec.files.dir.display(),
                    self.rec.files.slug
                ),
            );
        }
        // A hold survives a restart.
        let was_paused = journal.last_run.as_ref().and_then(|r| r.run.as_deref()) == Some("paused");
        self.rec.run_rec(ACTOR, "started", restarted.then(|| "restarted: continuing from the journal".to_string()));
        if was_paused {
            self.waves.held = true;
            self.rec.run_rec(ACTOR, "paused", Some("still paused from before the restart".into()));
        }
        for r in resumed {
            let how = if r.continues { "continuing" } else { "starting it again" };
            crate::util::cli::report(
                ACTOR,
                format!("task {} was {} when the last supervisor stopped; {how}", r.task, r.was),
            );
        }
        let last_state = |id: &str| journal.tasks.get(id).and_then(|r| r.state.clone());
        let effects = self.restore_steers(&last_state, &session_of, &had_process);
        self.apply(effects);
        std::thread::spawn(move || socket::serve(listener, tx, Ev::Control));
        let handler = nix::sys::signal::SigHandler::Handler(on_stop);
        for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            // SAFETY: the handler only stores to an atomic.
            unsafe {
                let _ = nix::sys::signal::signal(sig, handler);
            }
        }
        let mut stopping = false;
        loop {
            let wait = self.next_timer().map_or(STOP_CHECK, |t| t.saturating_duration_since(Instant::now()));
            if let Ok(ev) = rx.recv_timeout(wait.min(STOP_CHECK)) {
                self.on(ev);
                while let Ok(ev) = rx.try_recv() {
                    self.on(ev);
                }
            }
            self.timers();
            if STOP.load(Ordering::SeqCst) && !stopping {
                stopping = true;
                self.waves.held = true;
                // The running tasks only (halted, as a kill halts them): a
                // task not started, or between its steps, is left as the
                // journal has it, and the same command started again goes
                // on with it. Halting them all left a restart nothing to do.
                let running: Vec<String> = self.running.keys().cloned().collect();
                for id in running {
                    self.begin_kill(&id, "signal", None);
                }
            }
            if stopping {
                if self.running.is_empty() {
                    let why = "the supervisor got a stop signal";
                    self.rec.run_rec(ACTOR, "aborted", Some(why.into()));
                    (self.opts.report)(&format!("{} aborted: {why}", self.rec.files.slug));
                    return Ok(Outcome::Aborted);
                }
                continue;
            }
            let effects = self.waves.advance();
            self.apply(effects);
            if self.waves.all_terminal() && self.running.is_empty() {
                self.rec.run_rec(ACTOR, "finished", None);
                (self.opts.report)(&self.waves.last_line(&self.rec.files.slug));
                return Ok(if self.waves.all_committed() { Outcome::AllCommitted } else { Outcome::SomeHalted });
            }
        }
    }

    /// The steers the journal holds for the tasks' next turn boundaries
    /// (accepted by an earlier supervisor of the run, not yet delivered),
    /// queued again; what cannot be delivered now is journaled
    /// `steer-dropped`, with why. A `leased` that took a steer whose turn
    /// never started (no process of the task was running: the run was
    /// paused, or the supervisor died first) queues it again and takes it
    /// now, resuming the task's session, rather than starting the task
    /// afresh without it.
    fn restore_steers(
        &mut self,
        last_state: &dyn Fn(&str) -> Option<String>,
        session_of: &dyn Fn(&str) -> Option<String>,
        had_process: &std::collections::BTreeSet<String>,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        for (id, st) in records::steers(&self.rec.files.journal()) {
            if self.waves.slot(&id).is_none() {
                continue;
            }
            let mut queued = st.queued;
            let unstarted =
                st.taken.filter(|_| last_state(&id).as_deref() == Some("leased") && !had_process.contains(&id));
            let redo = unstarted.is_some();
            if let Some(m) = unstarted {
                // Queued again in the journal too, so that the `leased` taking it now pairs with a queued one.
                let what = format!("task {id}: {} bytes, queued again: its turn had not started", m.len());
                if let Err(e) = self.rec.steer_queued(ACTOR, None, &id, &m, what) {
                    crate::util::cli::report(ACTOR, format!("{}: {e}", self.rec.files.journal().display()));
                }
                queued.push_front(m);
            }
            let n = queued.len();
            match self.waves.restore_steers(&id, queued) {
                Ok(e) => {
                    crate::util::cli::report(
                        ACTOR,
                        format!("task {id}: {n} steer(s) accepted by the last supervisor are applied at its next turn boundary"),
                    );
                    effects.extend(e);
                    // Without a session, its task starts afresh and takes it after that turn.
                    if let Some(sid) = session_of(&id).filter(|_| redo) {
                        effects.extend(self.waves.redo_steered(&id, sid));
                    }
                }
                Err(lost) => {
                    let why = if last_state(&id).as_deref().is_some_and(crate::runs::journal::is_terminal) {
                        "the task had ended".to_string()
                    } else {
                        "the restarted supervisor found no session id of the task to resume (neither liveness nor its log names one)".to_string()
                    };
                    for m in lost {
                        self.rec.steer_dropped(&id, &m, &why);
                    }
                }
            }
        }
        effects
    }

    fn on(&mut self, ev: Ev) {
        match ev {
            // Taken past its caller's deadline (this loop, or the whole
            // process, was stopped or busy): its caller has given up, so it
            // does not start (spec/SUPERVISOR.md, "Control protocol").
            Ev::Control(m) if socket::past_deadline(&m.req) => {
                let _ = m.reply.send(socket::late());
            }
            Ev::Control(m) => {
                if let Some(r) = self.handle(m.req, &m.reply) {
                    let _ = m.reply.send(r);
                }
            }
            Ev::Task(e) => self.on_task(e),
        }
    }

    /// The earliest moment a timer of a running step is due: a kill's
    /// escalation, a request's wait for its acknowledgement.
    fn next_timer(&self) -> Option<Instant> {
        let grace = self.opts.kill_grace;
        self.running.values().flat_map(|r| r.timers(grace)).min()
    }

    fn timers(&mut self) {
        let grace = self.opts.kill_grace;
        for (id, r) in self.running.iter_mut() {
            r.escalate(grace);
            let state = self.waves.state(id).map(str::to_string);
            // A request the session has not acknowledged in time is answered without it.
            for w in r.awaiting.iter_mut().filter(|w| w.since.elapsed() >= awaiting::ACK_WAIT) {
                if let Some(tx) = w.reply.take() {
                    let _ = tx.send(awaiting::acked(id, w, None, state.clone()).0);
                }
            }
        }
    }
}
