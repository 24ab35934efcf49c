//! The supervisor: runs a plan wave by wave, owning the task processes so
//! that they can be killed, steered, paused and resumed through a control
//! socket ([`control`]). The state machine is `spec/SUPERVISOR.md`.
//!
//! Everything durable goes through `runs`: the journal is the truth (a
//! restart folds it and continues), liveness only says which process runs
//! what right now. One thread owns every task; the socket thread only
//! forwards requests to it over a channel, so no state is shared.

pub mod control;

use crate::control::{Command, Door, Issued, Verb};
use crate::pipeline::events::Data;
use crate::pipeline::normalize::{Adapter, Normalizer};
use crate::runs::journal::{self, is_terminal, Journal, Record};
use crate::runs::liveness::{self, Entry};
use crate::runs::plan::{Plan, Task};
use crate::runs::registry::{NewRun, Registry};
use crate::runs::{self, RunFiles};
use crate::session::input::AckLine;
use crate::session::launch::AgentKind;
use crate::session::proc::{self, Proc, Spec};
use crate::util::lines::{read_capped, Capped, Rest};
use control::{Reply, Request, MAX_LINE};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The journal's actor for the supervisor's own records.
pub const ACTOR: &str = "runwire-supervise";
/// How often the loop looks at its children when no request arrives.
const TICK: Duration = Duration::from_millis(25);
/// Longest a connection may take to send its request line.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What a supervisor run needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub plan: PathBuf,
    pub runstate: PathBuf,
    pub slug: String,
    pub max_parallel: usize,
    /// From SIGTERM to SIGKILL of a task's process group.
    pub kill_grace: Duration,
    pub home: PathBuf,
    /// The directory tasks, gates and reviews run in; the run's repo root.
    pub workdir: PathBuf,
    /// Where `<adapter>.sh` wrappers are, instead of the default search.
    pub wrapper_dir: Option<PathBuf>,
    /// Turns run interactively (`<adapter>.sh --interactive`, input open;
    /// claude, codex app-server and cursor ACP alike): steer goes into the
    /// running session, `stop` interrupts the turn and keeps the session,
    /// `answer` answers the agent's requests.
    pub interactive: bool,
    /// Where the run's report for a person goes, a line at a time: one
    /// line per task as it ends, one as the run ends (the binary prints
    /// them on stdout).
    pub report: fn(&str),
}

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

fn now_ts() -> String {
    crate::util::time::format_ms(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0),
    )
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Which process a running task has now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Turn,
    Gate,
    Review,
}

/// What a task does next once nothing of it runs.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// A turn: a new session, or `--resume` with a steer message.
    Turn {
        resume: Option<String>,
    },
    Gate,
    Review,
    Commit,
}

struct Running {
    child: Proc,
    /// The thread copying the process's output into its log.
    tee: Tee,
    phase: Phase,
    /// A turn's output as read so far (`None` for gates and reviews, whose
    /// logs are not task logs).
    turn: Option<TurnLog>,
    /// The turn is being stopped to apply an interrupting steer.
    for_steer: bool,
    kill: Option<Kill>,
    /// An interactive turn's session input (the wrapper's stdin), while open.
    input: Option<std::process::ChildStdin>,
    /// Session input lines written so far. Once the session says it is idle
    /// with as many applied (its `runwire.idle` line), nothing more will
    /// happen in it: the input is closed (the session ends).
    written: u64,
    /// Stopped with `stop`: the session stays open, idle, for a steer.
    hold: bool,
    /// Control requests whose line was written to the session and whose
    /// reply is the session's acknowledgement of it (its `runwire.ack`).
    awaiting: Vec<Awaiting>,
}

/// A control request waiting for the session's acknowledgement of the
/// session input line it wrote: the session applies the steer / stop /
/// answer rules (`spec/SESSION-INPUT.md`), the supervisor reports what it did.
struct Awaiting {
    /// The line's number in the session input.
    line: u64,
    what: Asked,
    actor: String,
    door: Door,
    /// Taken once the request is answered: at the acknowledgement, or
    /// without it after [`ACK_WAIT`] (the entry then stays for the
    /// acknowledgement's effects: a steer's record, the hold it ends).
    reply: Option<mpsc::Sender<Reply>>,
    since: Instant,
}

enum Asked {
    /// A steer of this many bytes.
    Steer(usize),
    Stop,
    /// An answer to this request.
    Answer(String),
}

/// How long a control request waits for the session's acknowledgement
/// before it is answered without it (the line was written).
const ACK_WAIT: Duration = Duration::from_secs(1);

struct Kill {
    actor: String,
    /// Why, when it was not a person's request (the task log cannot be written).
    detail: Option<String>,
    replies: Vec<mpsc::Sender<Reply>>,
}

/// The copy of a process's output into its log (and, for a turn, each
/// line's arrival time into the log's sidecar, `crate::util::arrival`): the
/// supervisor writes the log itself, so the raw bytes are the wrapper's and
/// the times are when they arrived.
struct Tee {
    thread: Option<std::thread::JoinHandle<()>>,
    /// The first write error: the log is incomplete from there on.
    error: Arc<Mutex<Option<String>>>,
    /// Set when the supervisor stops waiting for the output's end (a
    /// straggler holds the pipe past the drain grace): stop writing.
    abandon: Arc<AtomicBool>,
}

impl Tee {
    fn start(out: std::io::Result<std::fs::File>, path: &Path, times: bool, src: std::process::ChildStdout) -> Tee {
        let error = Arc::new(Mutex::new(None::<String>));
        let abandon = Arc::new(AtomicBool::new(false));
        let (err2, ab2) = (error.clone(), abandon.clone());
        let at_writer = if times { Some(crate::util::arrival::Writer::append(path)) } else { None };
        let path = path.to_path_buf();
        let fail = move |e: &dyn std::fmt::Display| {
            let mut g = err2.lock().unwrap_or_else(|e| e.into_inner());
            g.get_or_insert_with(|| format!("{}: {e}", path.display()));
        };
        let thread = std::thread::Builder::new().name("task output".into()).spawn(move || {
            let mut out = match out {
                Ok(f) => Some(f),
                Err(e) => {
                    fail(&e);
                    None
                }
            };
            let mut at = match at_writer {
                Some(Ok(w)) => Some(w),
                Some(Err(e)) => {
                    crate::util::cli::report(ACTOR, format!("arrival times: {e}; this turn's lines have none"));
                    None
                }
                None => None,
            };
            proc::read_pieces(src, crate::util::time::Clock::from_env(), |piece, end| {
                if ab2.load(Ordering::Relaxed) {
                    return false;
                }
                // Keep draining after a failure, so the wrapper never
                // blocks on a full pipe; what it writes is lost and said so.
                let Some(f) = out.as_mut() else { return true };
                if let (Some(ms), Some(w)) = (end, at.as_mut()) {
                    if let Err(e) = w.line(ms) {
                        crate::util::cli::report(ACTOR, format!("arrival times: {e}; the rest of this turn has none"));
                        at = None;
                    }
                }
                if let Err(e) = f.write_all(piece) {
                    fail(&e);
                    out = None;
                }
                true
            });
        });
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("cannot start the output thread: {e}"));
                None
            }
        };
        Tee { thread, error, abandon }
    }

    fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits up to `grace` for the output's end, then lets it go.
    fn finish(&mut self, grace: Duration) {
        let until = Instant::now() + grace;
        while self.thread.as_ref().is_some_and(|t| !t.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        match self.thread.take() {
            Some(t) if t.is_finished() => {
                let _ = t.join();
            }
            _ => self.abandon.store(true, Ordering::Relaxed),
        }
    }
}

#[derive(Default)]
struct TaskRt {
    /// The journal's state, or `None` before the first record.
    state: Option<String>,
    session: Option<String>,
    steer: VecDeque<String>,
    next: Option<Step>,
    running: Option<Running>,
    /// The detail of its terminal state, for the run's last line.
    detail: Option<String>,
    /// Agent processes (turns) started so far: the current one's generation.
    generation: u64,
    /// The requests its agent processes raised, by runwire's interrupt id
    /// (bounded, oldest dropped first): which process asked which request,
    /// and how it was closed, so that an answer naming a request of an
    /// earlier process is never sent to the current one.
    interrupts: VecDeque<Bound>,
}

/// One request of one agent process of a task, named by runwire's id.
struct Bound {
    interrupt: String,
    generation: u64,
    /// The agent's own id for it.
    request: String,
    answer: Option<crate::pipeline::events::InputAnswer>,
    /// The door and `by` of the answer last written for it: the journal
    /// names the door when the answer that closed it is that one.
    door: Option<(Door, Option<String>)>,
}

/// Requests remembered per task.
const MAX_BOUND: usize = 1024;

/// A turn's output, read through the same normalizer as `normalize-events`
/// and the server, so that the session and the status line are understood
/// in one place: the session to resume is [`Normalizer::resume_session`],
/// the detail is the `exit` event's.
struct TurnLog {
    /// Offset of the task log up to which the turn's output was read.
    read_to: u64,
    norm: Normalizer,
    /// The status line's detail (the last, should a wrapper write several).
    detail: Option<String>,
    /// The input count of the session's last `runwire.idle` line: the
    /// session was idle with that many input lines applied.
    idle: Option<u64>,
    /// An interactive session's requests still open, by id (its input is
    /// not closed while one waits).
    pending: BTreeMap<String, crate::pipeline::events::InputRequest>,
    /// Requests raised and closed since the journal last took them.
    records: Vec<Data>,
    /// The session's acknowledgements read since the last look.
    acks: Vec<AckLine>,
}

impl TurnLog {
    fn new(adapter: Adapter, from: u64) -> TurnLog {
        // Event times are not used: a fixed clock spares a syscall per line.
        let opts =
            crate::pipeline::normalize::Options { clock: crate::util::time::Clock::Fixed(0), ..Default::default() };
        TurnLog {
            read_to: from,
            norm: Normalizer::new(adapter, opts),
            detail: None,
            idle: None,
            pending: BTreeMap::new(),
            records: Vec::new(),
            acks: Vec::new(),
        }
    }

    /// One line of the turn's output (a cut-off last line included: the
    /// normalizer reports what it cannot read as an error event and goes on).
    fn feed(&mut self, line: &[u8]) {
        // The session's own word (no event: the normalizer skips the line).
        if let Some(n) = crate::pipeline::normalize::idle_inputs(line) {
            self.idle = Some(n);
        }
        if let Some(a) = AckLine::parse(line) {
            self.acks.push(a);
        }
        for ev in self.norm.push(line) {
            match ev.data {
                Data::Exit(x) => self.detail = x.detail,
                Data::InputRequest(r) => {
                    self.pending.insert(r.id.clone(), r.clone());
                    self.records.push(Data::InputRequest(r));
                }
                Data::InputAnswer(a) => {
                    self.pending.remove(&a.id);
                    self.records.push(Data::InputAnswer(a));
                }
                _ => {}
            }
        }
    }

    fn session(&self) -> Option<&str> {
        self.norm.resume_session()
    }

    /// The session said it is idle with all `written` input lines applied.
    fn idle_after(&self, written: u64) -> bool {
        self.idle == Some(written)
    }
}

struct Msg {
    req: Request,
    reply: mpsc::Sender<Reply>,
}

struct Sup {
    opts: Options,
    plan: Plan,
    files: RunFiles,
    run_id: String,
    tasks: BTreeMap<String, TaskRt>,
    order: Vec<String>,
    held: bool,
    wrappers: BTreeMap<String, PathBuf>,
    /// `runwire-session`, when a task has adapter `acp` (run by it, no wrapper).
    session_bin: Option<PathBuf>,
    /// This supervisor's registration and the groups it started, as recorded.
    owner: control::Owner,
    /// `$HARNESS_HOME`, absolute.
    home: PathBuf,
    /// A task whose turn just ended, with its cost and tokens so far: its
    /// next record carries them (`journal::TaskTotals`).
    turn_totals: Option<(String, journal::TaskTotals)>,
}

fn io(what: &Path, e: impl std::fmt::Display) -> StartError {
    StartError::Io(format!("{}: {e}", what.display()))
}

/// Runs the plan to its end. Registers the run, binds the control socket,
/// continues from the journal, and cleans the socket up on the way out.
pub fn run(opts: Options) -> Result<Outcome, StartError> {
    runs::check_id("slug", &opts.slug).map_err(StartError::Usage)?;
    let bytes = std::fs::read(&opts.plan).map_err(|e| io(&opts.plan, e))?;
    let plan = Plan::parse(&bytes).map_err(|e| StartError::Usage(format!("{}: {e}", opts.plan.display())))?;
    std::fs::create_dir_all(&opts.runstate).map_err(|e| io(&opts.runstate, e))?;
    let runstate = opts.runstate.canonicalize().map_err(|e| io(&opts.runstate, e))?;
    let files = RunFiles::new(&runstate, &opts.slug);
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
                session_bin = Some(find_session().map_err(StartError::Usage)?);
            }
        }
        for a in std::iter::once(t.adapter.as_str()).chain(t.review.as_deref()) {
            if let (Some(ad), false) = (crate::runs::view::adapter(a), wrappers.contains_key(a)) {
                // The session settings its wrapper will read, under the same flag rules.
                crate::session::wrappers::check_env(AgentKind::of(ad)).map_err(StartError::Usage)?;
                wrappers.insert(a.to_string(), find_wrapper(&opts, ad).map_err(StartError::Usage)?);
            }
        }
    }
    let root = opts.workdir.display().to_string();
    let new = NewRun {
        slug: opts.slug.clone(),
        repo_root: root,
        runstate_dir: Some(runstate.display().to_string()),
        ..NewRun::default()
    };
    let pointer = new.pointer(now_ts()).map_err(StartError::Usage)?;
    let run_id = pointer.run_id.clone();
    // Absolute: liveness hands this path to other processes (runwire-serve)
    // that run in other directories.
    let home = std::path::absolute(&opts.home).map_err(|e| io(&opts.home, e))?;
    let sock = control::sock_path(&home, &run_id);
    // sun_path holds 108 bytes with its NUL; refuse rather than truncate.
    if sock.as_os_str().len() > 107 {
        return Err(StartError::Usage(format!(
            "{}: control socket path longer than 107 bytes; use a shorter HARNESS_HOME or slug",
            sock.display()
        )));
    }
    // Before anything is written: the slug may be another run's in this directory.
    if let Some(owner) = Registry::at(&opts.home).owner_of(&pointer) {
        return Err(StartError::Usage(format!(
            "{}: slug {:?} is already owned by run {owner}: a runstate directory's files belong to one run",
            runstate.display(),
            opts.slug
        )));
    }
    if files.plan() != opts.plan.canonicalize().unwrap_or_default() {
        runs::write_atomic(&files.plan(), &bytes).map_err(|e| io(&files.plan(), e))?;
    }
    let listener = bind(&sock)?;
    // Registration outside the worktree: who may answer on the socket, and
    // which groups are ours to stop. The last supervisor's groups stay in
    // the record until `start` has dealt with them.
    let mut owner = control::Owner::me().map_err(StartError::Io)?;
    owner.groups = control::Owner::read(&home, &run_id).map(|o| o.groups).unwrap_or_default();
    owner.write(&home, &run_id).map_err(|e| io(&control::owner_path(&home, &run_id), e))?;
    Registry::at(&opts.home).register(&pointer).map_err(|e| io(&Registry::at(&opts.home).path(&run_id), e))?;
    let journal = Journal::read(&files.journal()).map_err(|e| io(&files.journal(), e))?;
    let order: Vec<String> = plan.waves().into_iter().flatten().collect();
    let mut sup = Sup {
        opts,
        plan,
        files,
        run_id,
        tasks: BTreeMap::new(),
        order,
        held: false,
        wrappers,
        session_bin,
        owner,
        home,
        turn_totals: None,
    };
    let out = sup.start(&journal, &sock, listener);
    // Replies decided on the way out (the kill of the last task) still go out.
    let until = Instant::now() + Duration::from_secs(2);
    while REPLYING.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(control::owner_path(&sup.home, &sup.run_id));
    let _ = liveness::update(&sup.files, |l| l.sock = None);
    out
}

/// How a task's log is normalized: its adapter's, the ACP normalizer
/// (cursor's) for `acp`.
fn turn_adapter(name: &str) -> Option<Adapter> {
    if name == "acp" {
        Some(Adapter::Cursor)
    } else {
        crate::runs::view::adapter(name)
    }
}

/// `runwire-session` for `acp` tasks, as the wrappers find it:
/// `$RUNWIRE_SESSION_BIN`, else the one beside this program, else `PATH`.
fn find_session() -> Result<PathBuf, String> {
    let name = std::ffi::OsString::from("runwire-session");
    let given = std::env::var_os("RUNWIRE_SESSION_BIN").filter(|v| !v.is_empty());
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join(&name))).filter(|p| p.is_file());
    let p = match (given, beside) {
        (Some(g), _) => crate::session::launch::on_path(&g),
        (None, Some(b)) => b,
        (None, None) => crate::session::launch::on_path(&name),
    };
    match std::fs::metadata(&p) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(p),
        _ => Err(format!(
            "{}: runwire-session not found (adapter acp runs under it): set RUNWIRE_SESSION_BIN or put it on PATH",
            p.display()
        )),
    }
}

/// The default wrapper search ([`crate::session::wrappers::find`]), or `wrapper_dir`.
fn find_wrapper(opts: &Options, ad: Adapter) -> Result<PathBuf, String> {
    match &opts.wrapper_dir {
        Some(d) => {
            let p = d.join(format!("{}.sh", ad.name()));
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!("{}: no such wrapper", p.display()))
            }
        }
        None => crate::session::wrappers::find(ad),
    }
}

/// Binds the private socket: directory 0700, socket 0600. A socket file
/// that nobody answers is stale (a supervisor killed with -9) and replaced;
/// one that answers belongs to a live supervisor of the same run.
fn bind(sock: &Path) -> Result<UnixListener, StartError> {
    let dir = sock.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| io(dir, e))?;
    if sock.exists() {
        if UnixStream::connect(sock).is_ok() {
            return Err(StartError::Io(format!("{}: another supervisor of this run is live", sock.display())));
        }
        std::fs::remove_file(sock).map_err(|e| io(sock, e))?;
    }
    let l = UnixListener::bind(sock).map_err(|e| io(sock, e))?;
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o600)).map_err(|e| io(sock, e))?;
    Ok(l)
}

/// Accepts connections forever; each request goes to the owning thread.
fn serve_socket(listener: UnixListener, tx: mpsc::Sender<Msg>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || answer(conn, tx));
    }
}

/// Replies still to be written: the run waits for them before it exits (a
/// kill that ends the last task is answered after the loop has finished).
static REPLYING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Replying;

impl Replying {
    fn new() -> Replying {
        REPLYING.fetch_add(1, Ordering::SeqCst);
        Replying
    }
}

impl Drop for Replying {
    fn drop(&mut self) {
        REPLYING.fetch_sub(1, Ordering::SeqCst);
    }
}

fn answer(conn: UnixStream, tx: mpsc::Sender<Msg>) {
    let _replying = Replying::new();
    let _ = conn.set_read_timeout(Some(READ_TIMEOUT));
    let _ = conn.set_write_timeout(Some(READ_TIMEOUT));
    let Ok(mut w) = conn.try_clone() else { return };
    let mut r = BufReader::new(conn);
    let mut buf = Vec::new();
    let reply = match read_capped(&mut r, &mut buf, MAX_LINE, Rest::Leave) {
        Err(_) | Ok(Capped::End) => return,
        Ok(Capped::TooLong) => Reply::refuse(format!("request longer than {MAX_LINE} bytes"), None),
        Ok(Capped::Line | Capped::Last) => match serde_json::from_slice::<Request>(&buf) {
            Err(e) => Reply::refuse(format!("bad request: {e}"), None),
            Ok(req) => {
                let (rtx, rrx) = mpsc::channel();
                if tx.send(Msg { req, reply: rtx }).is_err() {
                    return;
                }
                // A kill answers once the group is gone, so wait past any grace.
                match rrx.recv_timeout(Duration::from_secs(120)) {
                    Ok(r) => r,
                    Err(_) => return,
                }
            }
        },
    };
    let mut line = serde_json::to_vec(&reply).unwrap_or_default();
    line.push(b'\n');
    let _ = w.write_all(&line);
}

/// The bytes of a file from `offset` on (a turn's output not read yet).
fn read_from(path: &Path, offset: u64) -> Option<Vec<u8>> {
    use std::io::Seek;
    let mut f = std::fs::File::open(path).ok()?;
    // Only a regular file: a device (a log that is /dev/full) never ends.
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    f.seek(std::io::SeekFrom::Start(offset)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// Kills a whole process group; a group already gone is not an error.
fn signal_group(pgid: i32, sig: Signal) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), sig);
    }
}

/// True while some process is in group `pgid`.
fn group_alive(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(nix::errno::Errno::ESRCH))
}

/// The reply to a request whose line the session acknowledged with `ack`
/// (`None`: no acknowledgement came), and for a steer taken, the detail of
/// its `steer-queued` record.
fn acked(id: &str, w: &Awaiting, ack: Option<&AckLine>, state: Option<String>) -> (Reply, Option<String>) {
    let Some(a) = ack else {
        let why = format!(
            "task {id}: written to its session (input line {}); the session has not acknowledged it yet",
            w.line
        );
        return (Reply::ok(why, state), None);
    };
    if let Some(why) = &a.refused {
        return (Reply::refuse(format!("task {id}: {why}"), state), None);
    }
    let detail = a.detail.as_deref().unwrap_or("taken");
    match &w.what {
        Asked::Steer(n) => {
            // The journal's word for what the message did (the session's ack).
            let how = match a.ack.as_deref() {
                Some("started") => "live, new turn",
                Some("interrupted_then_started") => "live, interrupt",
                Some("cancelled_then_prompted") => "live, cancel then prompt",
                Some("pending") => "live, joined or next turn (the task log shows which)",
                _ => "live",
            };
            let reply = Reply::ok(format!("task {id}: {detail} (live: no kill, no resume)"), state);
            (reply, Some(format!("task {id}: {n} bytes, {how}")))
        }
        Asked::Stop => (Reply::ok(format!("task {id}: {detail} (steer to go on, kill to end it)"), state), None),
        Asked::Answer(rid) => {
            let sent = a.ack.as_deref() != Some(crate::session::input::ack_name(crate::session::Ack::Replay));
            (Reply::answered(sent, format!("task {id}: answer to {rid:?}: {detail}"), state), None)
        }
    }
}

impl Sup {
    /// A turn's prompt: the task's own, or a steer message resuming its session.
    fn prompt_args(&self, c: &mut Spec, id: &str, resume: Option<&str>, prompt: &str) {
        match resume {
            Some(msg) => {
                let sid = self.tasks[id].session.clone().unwrap_or_default();
                c.arg("--prompt").arg(msg).arg("--resume").arg(sid);
            }
            None => {
                c.arg("--prompt").arg(prompt);
            }
        }
    }

    fn journal(&self, rec: Record) {
        if let Err(e) = journal::append(&self.files.journal(), &rec) {
            crate::util::cli::report(ACTOR, format!("{}: {e}", self.files.journal().display()));
        }
    }

    fn task_rec(&mut self, actor: &str, task: &str, state: &str, rc: Option<i64>, detail: Option<String>) {
        let totals = self.turn_totals.take_if(|(t, _)| t == task).map(|(_, t)| t);
        let mut r = Record::task(actor, task, state, rc).with_totals(task, totals);
        r.detail = detail;
        self.journal(r);
    }

    fn run_rec(&self, actor: &str, what: &str, detail: Option<String>) {
        let mut r = Record::run(actor, what);
        r.detail = detail;
        self.journal(r);
    }

    /// A run record of what a person's command did, with its door.
    fn command_rec(&self, actor: &str, door: Door, what: &str, detail: Option<String>) {
        let mut r = Record::run(actor, what);
        r.detail = detail;
        r.door = Some(door.as_str().into());
        self.journal(r);
    }

    fn live(&self, task: &str, e: Entry) {
        let _ = liveness::update(&self.files, |l| l.tasks.entry(task.to_string()).or_default().merge(e));
    }

    fn set_state(&mut self, actor: &str, task: &str, state: &str, rc: Option<i64>, detail: Option<String>) {
        if is_terminal(state) {
            // One line per task as it ends: the run's report.
            match detail.as_deref().filter(|d| !d.is_empty()) {
                Some(d) => (self.opts.report)(&format!("{task} {state}: {d}")),
                None => (self.opts.report)(&format!("{task} {state}")),
            }
        }
        self.task_rec(actor, task, state, rc, detail.clone());
        if let Some(t) = self.tasks.get_mut(task) {
            t.state = Some(state.to_string());
            t.detail = detail;
        }
        if is_terminal(state) {
            // Liveness says who runs now; a finished task runs nothing.
            let _ = liveness::update(&self.files, |l| {
                l.tasks.remove(task);
            });
        } else {
            self.live(task, Entry { state: Some(state.into()), ..Entry::default() });
        }
    }

    /// Records (or forgets) the group a task's process runs in.
    fn record_group(&mut self, task: &str, leader: Option<crate::util::procid::Ident>) {
        match leader {
            Some(l) => self.owner.groups.insert(task.to_string(), l),
            None => self.owner.groups.remove(task),
        };
        self.save_owner();
    }

    fn save_owner(&self) {
        if let Err(e) = self.owner.write(&self.home, &self.run_id) {
            crate::util::cli::report(
                ACTOR,
                format!("{}: {e}", control::owner_path(&self.home, &self.run_id).display()),
            );
        }
    }

    /// Stops the groups an earlier supervisor of this run recorded and left
    /// running (their output cannot be taken over). Only a group whose
    /// leader is still the recorded process (pid, start time, boot) is
    /// signalled, checked before each signal: liveness's `pgid`, which the
    /// agent can write, is never signalled.
    fn stop_stale_groups(&mut self, stale: &liveness::Liveness) {
        for (task, e) in &stale.tasks {
            let ours = self.owner.groups.get(task).is_some_and(|l| Some(l.pid) == e.pgid);
            if let Some(pgid) = e.pgid.filter(|&g| !ours && g > 1 && group_alive(g)) {
                crate::util::cli::report(
                    ACTOR,
                    format!("not stopping process group {pgid} named in liveness for task {task}: not one this run recorded"),
                );
            }
        }
        for (task, leader) in std::mem::take(&mut self.owner.groups) {
            if let Some(why) = leader.group_mismatch() {
                if group_alive(leader.pid) {
                    crate::util::cli::report(
                        ACTOR,
                        format!("not stopping process group {} of task {task}: {why}", leader.pid),
                    );
                }
                continue;
            }
            crate::util::cli::report(ACTOR, format!("stopping stale process group {} of task {task}", leader.pid));
            signal_group(leader.pid, Signal::SIGTERM);
            let until = Instant::now() + self.opts.kill_grace;
            while group_alive(leader.pid) && Instant::now() < until {
                std::thread::sleep(TICK);
            }
            // The leader may have exited and its id been reused meanwhile.
            if leader.group_mismatch().is_none() {
                signal_group(leader.pid, Signal::SIGKILL);
            }
        }
        self.save_owner();
    }

    fn start(&mut self, journal: &Journal, sock: &Path, listener: UnixListener) -> Result<Outcome, StartError> {
        let stale = liveness::get(&self.files);
        self.stop_stale_groups(&stale);
        let sock_s = sock.display().to_string();
        liveness::update(&self.files, |l| {
            l.tasks.clear();
            l.sock = Some(sock_s);
        })
        .map_err(|e| io(&self.files.live(), e))?;
        let restarted = journal.records > 0;
        for id in self.order.clone() {
            let rec = journal.tasks.get(&id);
            let rt = TaskRt {
                state: rec.and_then(|r| r.state.clone()),
                detail: rec.and_then(|r| r.detail.clone()),
                ..TaskRt::default()
            };
            self.tasks.insert(id, rt);
        }
        // The journal is the truth: a hold survives a restart.
        let was_paused = journal.last_run.as_ref().and_then(|r| r.run.as_deref()) == Some("paused");
        self.run_rec(ACTOR, "started", restarted.then(|| "restarted: continuing from the journal".to_string()));
        if was_paused {
            self.held = true;
            self.run_rec(ACTOR, "paused", Some("still paused from before the restart".into()));
        }
        for id in self.order.clone() {
            let st = self.tasks[&id].state.clone();
            let Some(s) = st.filter(|s| !is_terminal(s)) else { continue };
            // In flight when the last supervisor died; its process is gone.
            // The journal says how far it got: a turn in flight is redone
            // from the start, anything after a finished turn continues with
            // the next step (the session id, if any, from the stale liveness).
            let def = self.task_def(&id);
            let next = match s.as_str() {
                "implemented" if def.gate.is_some() => Some(Step::Gate),
                "implemented" | "gated" if def.review.is_some() => Some(Step::Review),
                "implemented" | "gated" | "reviewed" => Some(Step::Commit),
                _ => None,
            };
            let sid = stale.tasks.get(&id).and_then(|e| e.session_id.clone());
            let t = self.tasks.get_mut(&id).expect("task of the plan");
            match next {
                Some(step) => {
                    t.next = Some(step);
                    t.session = sid;
                    crate::util::cli::report(
                        ACTOR,
                        format!("task {id} was {s} when the last supervisor stopped; continuing"),
                    );
                }
                None => {
                    t.state = None;
                    crate::util::cli::report(
                        ACTOR,
                        format!("task {id} was {s} when the last supervisor stopped; starting it again"),
                    );
                }
            }
        }
        let (tx, rx) = mpsc::channel::<Msg>();
        std::thread::spawn(move || serve_socket(listener, tx));
        let handler = nix::sys::signal::SigHandler::Handler(on_stop);
        for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            // SAFETY: the handler only stores to an atomic.
            unsafe {
                let _ = nix::sys::signal::signal(sig, handler);
            }
        }
        let mut stopping = false;
        loop {
            match rx.recv_timeout(TICK) {
                Ok(m) => {
                    let r = self.handle(m.req, &m.reply);
                    if let Some(r) = r {
                        let _ = m.reply.send(r);
                    }
                    while let Ok(m) = rx.try_recv() {
                        if let Some(r) = self.handle(m.req, &m.reply) {
                            let _ = m.reply.send(r);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {}
            }
            if STOP.load(Ordering::SeqCst) && !stopping {
                stopping = true;
                self.held = true;
                for id in self.order.clone() {
                    self.begin_kill(&id, "signal", None);
                }
            }
            self.poll_children();
            if stopping {
                if self.tasks.values().all(|t| t.running.is_none()) {
                    let why = "the supervisor got a stop signal";
                    self.run_rec(ACTOR, "aborted", Some(why.into()));
                    (self.opts.report)(&format!("{} aborted: {why}", self.files.slug));
                    return Ok(Outcome::Aborted);
                }
                continue;
            }
            self.advance();
            if self.tasks.values().all(|t| t.state.as_deref().is_some_and(is_terminal)) {
                self.run_rec(ACTOR, "finished", None);
                let all = self.tasks.values().all(|t| t.state.as_deref() == Some("committed"));
                (self.opts.report)(&self.last_line());
                return Ok(if all { Outcome::AllCommitted } else { Outcome::SomeHalted });
            }
        }
    }

    /// The run's last line: how it ended and, when it failed, why (the
    /// same one-line reason `runs list` gives).
    fn last_line(&self) -> String {
        let slug = &self.files.slug;
        let n = self.order.len();
        let committed = self.tasks.values().filter(|t| t.state.as_deref() == Some("committed")).count();
        let tasks = self.order.iter().map(|id| {
            let t = &self.tasks[id];
            (id.as_str(), t.state.as_deref(), t.detail.as_deref())
        });
        match journal::failure_reason(tasks) {
            Some(why) => format!("{slug} failed ({committed} of {n} tasks committed): {why}"),
            None => format!("{slug} done: {committed} of {n} tasks committed"),
        }
    }

    /// `<slug>.<task>.<what>.log`: a gate's or a review's log.
    fn step_log(&self, id: &str, what: &str) -> PathBuf {
        self.files.dir.join(format!("{}.{id}.{what}.log", self.files.slug))
    }

    /// A path as a person finds it from the run's directory: relative to
    /// the working directory when it lies beneath it.
    fn shown(&self, p: &Path) -> String {
        let wd = self.opts.workdir.canonicalize().unwrap_or_else(|_| self.opts.workdir.clone());
        p.strip_prefix(&wd).unwrap_or(p).display().to_string()
    }

    fn task_def(&self, id: &str) -> Task {
        self.plan.task(id).cloned().unwrap_or_else(|| Task {
            id: id.into(),
            adapter: "claude".into(),
            prompt: String::new(),
            deps: vec![],
            gate: None,
            review: None,
            cmd: None,
        })
    }

    /// Dispatches what can be dispatched: next steps of started tasks, then
    /// new tasks whose dependencies are committed, up to `max_parallel`.
    fn advance(&mut self) {
        for id in self.order.clone() {
            let rt = &self.tasks[&id];
            if rt.running.is_some() {
                continue;
            }
            let Some(step) = rt.next.clone() else { continue };
            if step == Step::Commit {
                if let Some(t) = self.tasks.get_mut(&id) {
                    t.next = None;
                }
                self.set_state(ACTOR, &id, "committed", Some(0), None);
                continue;
            }
            if self.held {
                continue;
            }
            if let Some(t) = self.tasks.get_mut(&id) {
                t.next = None;
            }
            self.dispatch(&id, step);
        }
        for id in self.order.clone() {
            if self.tasks[&id].state.is_some() {
                continue;
            }
            let def = self.task_def(&id);
            let blocked = def.deps.iter().find_map(|d| {
                let s = self.tasks.get(d).and_then(|t| t.state.clone());
                s.filter(|s| s == "halted" || s == "failed").map(|s| (d.clone(), s))
            });
            if let Some((d, s)) = blocked {
                // Fail-closed: a dependent of a halted task never starts.
                self.set_state(ACTOR, &id, "halted", None, Some(format!("not started: dependency {d} is {s}")));
                continue;
            }
            let ready =
                def.deps.iter().all(|d| self.tasks.get(d).and_then(|t| t.state.as_deref()) == Some("committed"));
            let busy = self.tasks.values().filter(|t| t.state.as_deref().is_some_and(|s| !is_terminal(s))).count();
            if !ready || self.held || busy >= self.opts.max_parallel {
                continue;
            }
            self.set_state(ACTOR, &id, "leased", None, None);
            self.dispatch(&id, Step::Turn { resume: None });
        }
    }

    fn dispatch(&mut self, id: &str, step: Step) {
        let def = self.task_def(id);
        let wrapper_env = |c: &mut Spec, grace: Duration| {
            // The wrapper's own grace is shorter than ours, so it can still
            // stop its engine (in a session of its own) before our SIGKILL.
            c.env("RUNWIRE_KILL_GRACE", (grace.as_secs() / 2).max(1).to_string());
        };
        // Every adapter's wrapper has --interactive (claude, codex app-server,
        // cursor ACP); what differs between them is the session layer's.
        let kind = turn_adapter(&def.adapter);
        let live = self.opts.interactive && kind.is_some();
        let (mut cmd, phase, out_path) = match &step {
            // An ACP agent given as a command line: its session is the turn
            // (`runwire-session acp`, what cursor.sh --interactive runs for
            // cursor-agent), its stdin the session input.
            Step::Turn { resume } if def.adapter == "acp" => {
                let mut c = Spec::new(self.session_bin.clone().unwrap_or_default());
                c.arg("acp");
                self.prompt_args(&mut c, id, resume.as_deref(), &def.prompt);
                let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
                c.arg("--answer-timeout").arg(var("RUNWIRE_ANSWER_TIMEOUT").unwrap_or_else(|| "300s".into()));
                if let Some(m) = var("RUNWIRE_ACP_MODE") {
                    c.arg("--mode").arg(m);
                }
                c.arg("--");
                for a in def.cmd.iter().flatten() {
                    c.arg(a);
                }
                c.stdin = proc::Input::Piped;
                (c, Phase::Turn, self.files.log(id))
            }
            Step::Turn { resume } => {
                let w = self.wrappers.get(&def.adapter).cloned().unwrap_or_default();
                if let Err(why) = crate::session::wrappers::recheck(&w) {
                    self.set_state(ACTOR, id, "halted", None, Some(why));
                    return;
                }
                let mut c = Spec::new(w);
                if live {
                    c.arg("--interactive");
                    c.stdin = proc::Input::Piped;
                }
                self.prompt_args(&mut c, id, resume.as_deref(), &def.prompt);
                wrapper_env(&mut c, self.opts.kill_grace);
                (c, Phase::Turn, self.files.log(id))
            }
            Step::Gate => {
                let mut c = Spec::new("/bin/sh");
                c.arg("-c").arg(def.gate.clone().unwrap_or_default());
                // Its log says why it failed: a gate's errors are on stderr.
                c.merge_stderr = true;
                (c, Phase::Gate, self.step_log(id, "gate"))
            }
            Step::Review => {
                let seat = def.review.clone().unwrap_or_default();
                let Some(w) = self.wrappers.get(&seat).cloned() else {
                    let d = format!("review seat {seat:?} is not an adapter the supervisor can run");
                    self.set_state(ACTOR, id, "halted", None, Some(d));
                    return;
                };
                if let Err(why) = crate::session::wrappers::recheck(&w) {
                    self.set_state(ACTOR, id, "halted", None, Some(why));
                    return;
                }
                let mut c = Spec::new(w);
                c.arg("--prompt").arg(format!("Review the work of task {id}. The task was: {}", def.prompt));
                wrapper_env(&mut c, self.opts.kill_grace);
                (c, Phase::Review, self.step_log(id, "review"))
            }
            Step::Commit => return,
        };
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&out_path);
        let log_from = std::fs::metadata(&out_path).map(|m| m.len()).unwrap_or(0);
        let out = match out {
            Ok(f) => Ok(f),
            Err(e) => {
                self.set_state(ACTOR, id, "halted", None, Some(format!("{}: {e}", out_path.display())));
                return;
            }
        };
        cmd.cwd = Some(self.opts.workdir.clone());
        cmd.kill_grace = self.opts.kill_grace;
        cmd.env("RUNWIRE_RUN_ID", &self.run_id).env("RUNWIRE_TASK", id);
        if let Some(s) = &self.tasks[id].session {
            cmd.env("RUNWIRE_SESSION_ID", s);
        }
        // A reaper between us and the wrapper stops its whole tree when the
        // task is killed, when the wrapper exits, and when we die, even by
        // SIGKILL (session::proc).
        match Proc::spawn(&cmd) {
            Ok(mut child) => {
                let pid = child.pid();
                let Some(stdout) = child.stdout.take() else {
                    child.stop();
                    self.set_state(
                        ACTOR,
                        id,
                        "halted",
                        None,
                        Some("the wrapper's stdout could not be captured".into()),
                    );
                    return;
                };
                // Arrival times for the task log, unless SOURCE_DATE_EPOCH pins time.
                let times = phase == Phase::Turn && crate::util::arrival::clock().is_some();
                let tee = Tee::start(out, &out_path, times, stdout);
                self.record_group(id, crate::util::procid::Ident::of(child.pgid()));
                self.live(
                    id,
                    Entry {
                        pid: Some(pid),
                        pgid: Some(child.pgid()),
                        logfile: Some(self.files.log(id).display().to_string()),
                        started_ts: Some(now_ts()),
                        ..Entry::default()
                    },
                );
                let rt = self.tasks.get_mut(id).expect("task of the plan");
                if phase == Phase::Turn {
                    // A new agent process: its requests are its own.
                    rt.generation += 1;
                }
                let turn = (phase == Phase::Turn).then(|| turn_adapter(&def.adapter)).flatten();
                let turn = turn.map(|a| TurnLog::new(a, log_from));
                let input = child.stdin.take();
                rt.running = Some(Running {
                    child,
                    tee,
                    phase,
                    turn,
                    for_steer: false,
                    kill: None,
                    input,
                    written: 0,
                    hold: false,
                    awaiting: Vec::new(),
                });
            }
            Err(e) => self.set_state(ACTOR, id, "halted", Some(127), Some(e.to_string())),
        }
    }

    /// Reads the complete lines the turn added to the task log since the
    /// last look, for its session id (into liveness as soon as it is known).
    fn scan_log(&mut self, id: &str) {
        let path = self.files.log(id);
        let Some(turn) = self.tasks.get_mut(id).and_then(|t| t.running.as_mut()).and_then(|r| r.turn.as_mut()) else {
            return;
        };
        let Some(buf) = read_from(&path, turn.read_to) else { return };
        // A line still being written is read once it is complete.
        let Some(end) = memchr::memrchr(b'\n', &buf) else { return };
        for line in buf[..end].split(|&b| b == b'\n') {
            turn.feed(line);
        }
        turn.read_to += end as u64 + 1;
        self.after_scan(id);
        let Some(turn) = self.tasks.get_mut(id).and_then(|t| t.running.as_mut()).and_then(|r| r.turn.as_mut()) else {
            return;
        };
        // Into liveness when the turn names a session the task did not have.
        let sid = turn.session().map(str::to_string);
        let rt = self.tasks.get_mut(id).expect("task of the plan");
        if let Some(sid) = sid.filter(|s| rt.session.as_ref() != Some(s)) {
            rt.session = Some(sid.clone());
            self.live(id, Entry { session_id: Some(sid), ..Entry::default() });
        }
    }

    /// What an interactive turn's new lines mean: its requests and answers
    /// go into the journal (input records), and once the session has said it
    /// is idle with every line written to it applied, its input is closed so
    /// that the session ends (unless `stop` holds it open for a steer). This
    /// runs on the thread that writes the input, so no line can be written
    /// between the look and the close: a steer after it finds the input
    /// closed and waits for the turn boundary; one before it makes the
    /// counts differ until the session has applied it.
    fn after_scan(&mut self, id: &str) {
        let Some(t) = self.tasks.get_mut(id) else { return };
        let state = t.state.clone();
        let Some(r) = t.running.as_mut() else { return };
        let Some(turn) = r.turn.as_mut() else { return };
        let recs = std::mem::take(&mut turn.records);
        // The session's word on each line written: the requests it answers.
        let mut steers = Vec::new();
        for a in std::mem::take(&mut turn.acks) {
            let Some(i) = r.awaiting.iter().position(|w| w.line == a.line) else { continue };
            let w = r.awaiting.remove(i);
            if matches!(w.what, Asked::Steer(_)) && a.refused.is_none() {
                // A steer taken goes on: the session is no longer held for one.
                r.hold = false;
            }
            let (reply, steered) = acked(id, &w, Some(&a), state.clone());
            if let Some(tx) = &w.reply {
                let _ = tx.send(reply);
            }
            steers.extend(steered.map(|d| (w.actor, w.door, d)));
        }
        if r.input.is_some() && !r.hold && turn.idle_after(r.written) && turn.pending.is_empty() {
            r.input = None;
        }
        for (actor, door, d) in steers {
            self.command_rec(&actor, door, "steer-queued", Some(d));
        }
        let now = crate::util::time::Clock::from_env().now_ms();
        let Some(t) = self.tasks.get_mut(id) else { return };
        let generation = t.generation;
        for d in recs {
            let rec = match &d {
                Data::InputRequest(q) => {
                    if let Some(i) = &q.interrupt_id {
                        if t.interrupts.len() == MAX_BOUND {
                            t.interrupts.pop_front();
                        }
                        let b =
                            Bound { interrupt: i.clone(), generation, request: q.id.clone(), answer: None, door: None };
                        t.interrupts.push_back(b);
                    }
                    crate::session::record::InputRecord::requested("runner", id, q, now)
                }
                Data::InputAnswer(a) => {
                    let mut rec = crate::session::record::InputRecord::answered("runner", id, a, now);
                    // The request it closes: named by runwire's id (a log of an
                    // older session has none: the last one of this process with that agent id).
                    let b = match &a.interrupt_id {
                        Some(i) => t.interrupts.iter_mut().rev().find(|b| &b.interrupt == i),
                        None => t.interrupts.iter_mut().rev().find(|b| b.generation == generation && b.request == a.id),
                    };
                    if let Some(b) = b.filter(|b| b.answer.is_none()) {
                        b.answer = Some(a.clone());
                        rec.interrupt = Some(b.interrupt.clone());
                        rec.door = b.door.take().filter(|(_, by)| *by == a.by).map(|(d, _)| d.as_str().to_string());
                    }
                    rec
                }
                _ => continue,
            };
            if let Err(e) = rec.append(&self.files.journal()) {
                crate::util::cli::report(ACTOR, format!("{}: {e}", self.files.journal().display()));
            }
        }
    }

    /// Writes one session input line into a running interactive turn.
    fn write_input(r: &mut Running, input: &crate::session::Input) -> Result<u64, String> {
        let Some(w) = r.input.as_mut() else { return Err("its session input is closed".into()) };
        let mut line = input.to_line().into_bytes();
        line.push(b'\n');
        if let Err(e) = w.write_all(&line).and_then(|()| w.flush()) {
            r.input = None;
            return Err(format!("its session input could not be written: {e}"));
        }
        r.written += 1;
        Ok(r.written)
    }

    /// Writes `input` into a running interactive turn; the request is
    /// answered with the session's acknowledgement of it ([`acked`]).
    fn ask(
        r: &mut Running,
        input: &crate::session::Input,
        what: Asked,
        who: (&str, Door),
        reply: &mpsc::Sender<Reply>,
    ) -> Result<(), String> {
        let line = Self::write_input(r, input)?;
        let (actor, door, reply, since) = (who.0.to_string(), who.1, Some(reply.clone()), Instant::now());
        r.awaiting.push(Awaiting { line, what, actor, door, reply, since });
        Ok(())
    }

    fn poll_children(&mut self) {
        for id in self.order.clone() {
            if self.tasks[&id].running.is_none() {
                continue;
            }
            self.scan_log(&id);
            let rt = self.tasks.get_mut(&id).expect("task of the plan");
            let r = rt.running.as_mut().expect("checked");
            if r.kill.is_none() {
                if let Some(e) = r.tee.error() {
                    // Its output is being lost: stop the turn, say why.
                    r.child.terminate();
                    let detail = Some(format!("the output could not be written: {e}"));
                    r.kill = Some(Kill { actor: ACTOR.into(), detail, replies: vec![] });
                }
            }
            if r.kill.is_some() {
                r.child.escalate();
            }
            // A request the session has not acknowledged in time is answered without it.
            for w in r.awaiting.iter_mut().filter(|w| w.since.elapsed() >= ACK_WAIT) {
                if let Some(tx) = w.reply.take() {
                    let _ = tx.send(acked(&id, w, None, rt.state.clone()).0);
                }
            }
            let Some(rc) = r.child.try_wait() else { continue };
            // The reaper has stopped what the wrapper left; what it wrote
            // gets the drain grace to reach the log.
            r.tee.finish(proc::DRAIN_GRACE);
            self.scan_final(&id);
            let r = self.tasks.get_mut(&id).and_then(|t| t.running.take()).expect("checked");
            self.record_group(&id, None);
            self.finished(&id, r, rc);
        }
    }

    /// The last lines of a turn, written between the last scan and the
    /// exit, a last line without its newline included (nothing will finish
    /// it now).
    fn scan_final(&mut self, id: &str) {
        let path = self.files.log(id);
        let rt = self.tasks.get_mut(id).expect("task of the plan");
        if let Some(turn) = rt.running.as_mut().and_then(|r| r.turn.as_mut()) {
            for line in read_from(&path, turn.read_to).unwrap_or_default().split(|&b| b == b'\n') {
                turn.feed(line);
            }
            turn.read_to = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(turn.read_to);
            // A turn that names no session keeps the one the task had.
            if let Some(s) = turn.session() {
                rt.session = Some(s.to_string());
            }
        }
        if let Some(s) = rt.session.clone() {
            self.live(id, Entry { session_id: Some(s), ..Entry::default() });
        }
        self.after_scan(id);
    }

    /// One process of a task ended with `rc`: the state machine's edges.
    fn finished(&mut self, id: &str, r: Running, rc: i64) {
        // An agent's turn ended: the task's next record (below, whichever
        // edge) says what its log adds up to now.
        self.turn_totals = match r.phase {
            Phase::Turn => {
                runs::view::turn_totals(&self.files, id, &self.task_def(id).adapter).map(|t| (id.to_string(), t))
            }
            _ => None,
        };
        let state = self.tasks.get(id).and_then(|t| t.state.clone());
        for tx in r.awaiting.iter().filter_map(|w| w.reply.as_ref()) {
            let why = format!("task {id}: its session ended before it took the line written for this request");
            let _ = tx.send(Reply::refuse(why, state.clone()));
        }
        if let (None, Some(e)) = (&r.kill, r.tee.error()) {
            // Its log is incomplete: the step cannot count as done.
            self.set_state(ACTOR, id, "halted", Some(rc), Some(format!("the output could not be written: {e}")));
            return;
        }
        if let Some(k) = r.kill {
            let detail = k.detail.unwrap_or_else(|| format!("killed by {}", k.actor));
            self.set_state(&k.actor, id, "halted", Some(rc), Some(detail.clone()));
            for reply in k.replies {
                let _ = reply.send(Reply::ok(format!("{detail}: rc {rc}"), Some("halted".into())));
            }
            return;
        }
        let def = self.task_def(id);
        let rt = self.tasks.get_mut(id).expect("task of the plan");
        if r.for_steer {
            if let Some(msg) = rt.steer.pop_front() {
                rt.next = Some(Step::Turn { resume: Some(msg) });
                self.set_state(ACTOR, id, "leased", None, Some("steered: resuming after an interrupt".into()));
                return;
            }
        }
        let (actor, after) = match r.phase {
            Phase::Turn => ("runner", "implemented"),
            Phase::Gate => ("gate", "gated"),
            Phase::Review => ("reviewer", "reviewed"),
        };
        if rc != 0 {
            let what = match r.phase {
                // This turn's own detail: none when it wrote no status line.
                Phase::Turn => {
                    let who = if def.adapter == "acp" { "runwire-session" } else { "wrapper" };
                    match r.turn.and_then(|t| t.detail).filter(|d| !d.is_empty()) {
                        Some(d) => format!("{who} exited {rc}: {d}"),
                        None => format!("{who} exited {rc}"),
                    }
                }
                Phase::Gate => format!(
                    "gate {:?} exited {rc} ({})",
                    def.gate.as_deref().unwrap_or_default(),
                    self.shown(&self.step_log(id, "gate"))
                ),
                Phase::Review => format!("review exited {rc} ({})", self.shown(&self.step_log(id, "review"))),
            };
            self.set_state(actor, id, "halted", Some(rc), Some(what));
            return;
        }
        self.set_state(actor, id, after, None, None);
        let rt = self.tasks.get_mut(id).expect("task of the plan");
        // A queued steer is applied at this boundary: the task goes back to
        // leased and its gate and review run again after the new turn.
        if let Some(msg) = rt.steer.pop_front() {
            rt.next = Some(Step::Turn { resume: Some(msg) });
            self.set_state(ACTOR, id, "leased", None, Some("steered: resuming the session".into()));
            return;
        }
        rt.next = Some(match r.phase {
            Phase::Turn if def.gate.is_some() => Step::Gate,
            Phase::Turn | Phase::Gate if def.review.is_some() => Step::Review,
            _ => Step::Commit,
        });
    }

    /// Starts stopping a task; `reply` is answered when its group is gone.
    fn begin_kill(&mut self, id: &str, actor: &str, reply: Option<&mpsc::Sender<Reply>>) -> Option<Reply> {
        let state = self.tasks.get(id).and_then(|t| t.state.clone());
        let rt = self.tasks.get_mut(id)?;
        if let Some(r) = rt.running.as_mut() {
            let k = r.kill.get_or_insert_with(|| {
                r.child.terminate();
                Kill { actor: actor.to_string(), detail: None, replies: vec![] }
            });
            if let Some(tx) = reply {
                k.replies.push(tx.clone());
            }
            return None;
        }
        if let Some(s) = state.as_deref().filter(|s| is_terminal(s)) {
            return Some(Reply::ok(format!("task {id} is already {s}"), Some(s.to_string())));
        }
        rt.next = None;
        rt.steer.clear();
        let detail = match state {
            None => "killed by {actor} before it started".replace("{actor}", actor),
            Some(_) => format!("killed by {actor} between steps"),
        };
        self.set_state(actor, id, "halted", None, Some(detail.clone()));
        Some(Reply::ok(detail, Some("halted".into())))
    }

    fn handle(&mut self, req: Request, reply: &mpsc::Sender<Reply>) -> Option<Reply> {
        // One parse, one validation (`crate::control`); an answer names its
        // request by runwire's id: the task's agent processes each number
        // their own requests.
        let issued = match Issued::from_request(&req).and_then(|i| i.command.check_bound().map(|()| i)) {
            Ok(i) => i,
            Err(why) => return Some(Reply::refuse(why, None)),
        };
        let Issued { door, actor, command, .. } = issued;
        let verb = command.verb();
        let task = match (verb.needs_task(), req.task.as_deref()) {
            (true, None) => return Some(Reply::refuse(format!("{verb} needs a task"), None)),
            (true, Some(t)) => match self.tasks.get(t) {
                Some(_) => Some(t.to_string()),
                None => return Some(Reply::refuse(format!("no task {t:?} in this run"), None)),
            },
            (false, _) => None,
        };
        let who = (actor.as_str(), door);
        let state_of = |s: &Sup, t: &str| s.tasks.get(t).and_then(|r| r.state.clone());
        match (command, task) {
            (Command::Kill, Some(t)) => self.begin_kill(&t, &actor, Some(reply)),
            (Command::Steer { text, interrupt, turn }, Some(t)) => self.steer(&t, who, text, interrupt, turn, reply),
            (Command::Stop, Some(t)) => self.stop(&t, who, reply),
            (Command::Answer { answer }, Some(t)) => self.answer(&t, who, answer, reply),
            (Command::Pause, _) => {
                let was = std::mem::replace(&mut self.held, true);
                if !was {
                    self.command_rec(&actor, door, "paused", None);
                }
                Some(Reply::ok(if was { "already paused" } else { "paused" }, Some("paused".into())))
            }
            (Command::Resume, _) => {
                let was = std::mem::replace(&mut self.held, false);
                if was {
                    self.command_rec(&actor, door, "resumed", None);
                }
                Some(Reply::ok(if was { "resumed" } else { "not paused" }, Some("running".into())))
            }
            (Command::Status, _) => {
                let v: BTreeMap<&String, Option<String>> = self.tasks.keys().map(|k| (k, state_of(self, k))).collect();
                let held = if self.held { "paused" } else { "running" };
                Some(Reply::ok(serde_json::to_string(&v).unwrap_or_default(), Some(held.into())))
            }
            (c, _) => Some(Reply::refuse(
                format!("unknown verb {:?} ({})", c.verb().as_str(), Verb::list(&Verb::SUPERVISOR)),
                None,
            )),
        }
    }

    /// `steer`: into an open interactive session as a `steer` line (the
    /// session applies the steer rules and says what it did: the reply is
    /// its acknowledgement, `None` here until it comes), else queued for
    /// the turn boundary (`--resume`).
    fn steer(
        &mut self,
        id: &str,
        who: (&str, Door),
        msg: String,
        interrupt: bool,
        turn: Option<u64>,
        reply: &mpsc::Sender<Reply>,
    ) -> Option<Reply> {
        let (actor, door) = who;
        let def = self.task_def(id);
        let rt = self.tasks.get_mut(id).expect("checked by handle");
        let state = rt.state.clone();
        // A batch codex task is a review seat; an interactive one is a
        // session like any other.
        if (def.adapter == "codex" && !self.opts.interactive)
            || rt.running.as_ref().is_some_and(|r| r.phase == Phase::Review)
        {
            return Some(Reply::refuse(format!("task {id} is a review seat (codex): it is not steered"), state));
        }
        if let Some(s) = state.as_deref().filter(|s| is_terminal(s)) {
            return Some(Reply::refuse(format!("task {id} is {s}: a terminal task cannot be steered"), Some(s.into())));
        }
        let n = msg.len();
        // An interactive turn whose session is open takes the message: one
        // `steer` line, no kill, no resume.
        if let Some(r) = rt.running.as_mut().filter(|r| r.input.is_some() && r.kill.is_none() && !r.for_steer) {
            use crate::session::{Input, SteerInput};
            let steer = SteerInput { text: msg.clone(), interrupt, turn, by: Some(actor.to_string()) };
            if Self::ask(r, &Input::Steer(steer), Asked::Steer(n), who, reply).is_ok() {
                return None;
            }
            // The session is going away: fall back to the turn boundary.
        }
        // A steer at the turn boundary resumes the agent's session: it needs
        // its id (a live steer above does not: the session is open).
        if rt.session.is_none() {
            return Some(Reply::refuse(format!("task {id} has no session id yet: nothing to resume"), state));
        }
        rt.steer.push_back(msg);
        let mut detail = format!("queued for task {id} ({n} bytes): applied at its next turn boundary (--resume)");
        if interrupt {
            if let Some(r) = rt.running.as_mut().filter(|r| r.phase == Phase::Turn && r.kill.is_none()) {
                r.for_steer = true;
                r.child.terminate();
                detail.push_str("; the current turn is being stopped");
            }
        }
        let now = rt.running.is_none() && rt.next.is_none() && state.is_some();
        if now {
            // Between steps with nothing pending: apply it at once.
            if let Some(m) = rt.steer.pop_front() {
                rt.next = Some(Step::Turn { resume: Some(m) });
            }
        }
        self.command_rec(
            actor,
            door,
            "steer-queued",
            Some(format!("task {id}: {n} bytes{}", if interrupt { ", interrupt" } else { "" })),
        );
        if now {
            self.set_state(ACTOR, id, "leased", None, Some("steered: resuming the session".into()));
        }
        Some(Reply::ok(detail, state))
    }

    /// `stop`: interrupts an interactive task's running turn and keeps its
    /// session open (idle) for a steer, as a `stop` line (the session
    /// cancels open requests and interrupts the turn, or says nothing ran);
    /// `kill` still ends it. A batch turn cannot be interrupted without
    /// being killed: refused, saying so.
    fn stop(&mut self, id: &str, who: (&str, Door), reply: &mpsc::Sender<Reply>) -> Option<Reply> {
        let actor = who.0;
        let rt = self.tasks.get_mut(id).expect("checked by handle");
        let state = rt.state.clone();
        let Some(r) = rt.running.as_mut().filter(|r| r.phase == Phase::Turn && r.kill.is_none()) else {
            return Some(Reply::refuse(format!("task {id} has no running turn to stop"), state));
        };
        if r.input.is_none() {
            let why = if self.opts.interactive {
                "its session is ending"
            } else {
                "it is a batch turn (stdin closed): it cannot be interrupted without being killed; use kill, or steer with interrupt"
            };
            return Some(Reply::refuse(format!("task {id}: {why}"), state));
        }
        use crate::session::input::Who;
        use crate::session::Input;
        // Held open for a steer, whatever the session says it stopped.
        r.hold = true;
        match Self::ask(r, &Input::Stop(Who { by: Some(actor.to_string()) }), Asked::Stop, who, reply) {
            Ok(()) => None,
            Err(e) => Some(Reply::refuse(format!("task {id}: {e}"), state)),
        }
    }

    /// `answer`: passes a person's answer to a request the task's session
    /// raised, as an `answer` line: the session checks it (pending, replay
    /// or conflict, what the agent's protocol can say) and says what it did.
    /// The request is named by runwire's interrupt id ([`Command::check_bound`]):
    /// one of an earlier agent process of the task (a steer at the turn
    /// boundary starts another, which numbers its requests again) is never
    /// written to the current one: an identical replay of its answer is
    /// acknowledged with nothing sent, anything else refused.
    fn answer(
        &mut self,
        id: &str,
        who: (&str, Door),
        mut a: crate::session::AnswerInput,
        reply: &mpsc::Sender<Reply>,
    ) -> Option<Reply> {
        use crate::session::Input;
        // A client may have read the request in the task log before this
        // loop did: read what the turn wrote so far first.
        if self.tasks.get(id).is_some_and(|t| t.running.is_some()) {
            self.scan_log(id);
        }
        let rt = self.tasks.get_mut(id).expect("checked by handle");
        let state = rt.state.clone();
        if a.by.is_none() {
            a.by = Some(who.0.to_string());
        }
        let generation = rt.generation;
        let Some(b) = rt.interrupts.iter_mut().rev().find(|b| b.interrupt == a.id) else {
            return Some(Reply::refuse(
                format!(
                    "task {id}: interrupt {:?} was not raised by this task's agent (another task's or run's, or one this supervisor no longer remembers): nothing was sent",
                    a.id
                ),
                state,
            ));
        };
        let live = rt.running.as_mut().filter(|r| r.input.is_some() && r.kill.is_none() && r.phase == Phase::Turn);
        let Some(r) = live.filter(|_| b.generation == generation) else {
            // Its agent process is gone: nothing can reach it any more.
            let whose = if b.generation < generation {
                "belongs to an earlier agent process"
            } else {
                "belongs to an agent process that has ended"
            };
            let iid = &a.id;
            return Some(match &b.answer {
                Some(prev)
                    if a.decision == crate::session::input::Decision::Cancelled
                        || crate::session::same_answer(prev, &a) =>
                {
                    let d = prev.decision.as_str();
                    let m = format!("task {id}: interrupt {iid:?} {whose}, which took the same answer ({d}): acknowledged, nothing sent");
                    Reply::answered(false, m, state)
                }
                Some(prev) => Reply::refuse(
                    format!(
                        "task {id}: interrupt {iid:?} {whose} and was decided ({}); a different answer is refused and nothing was sent",
                        prev.decision.as_str()
                    ),
                    state,
                ),
                None => Reply::refuse(
                    format!("task {id}: interrupt {iid:?} {whose}, which ended before it was answered: nothing was sent"),
                    state,
                ),
            });
        };
        b.door = Some((who.1, a.by.clone()));
        let rid = a.id.clone();
        // The session resolves runwire's id itself (and refuses one it did not mint).
        match Self::ask(r, &Input::Answer(a), Asked::Answer(rid), who, reply) {
            Ok(()) => None,
            Err(e) => Some(Reply::refuse(format!("task {id}: {e}"), state)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `request` to [`answer`] over a real socket pair (the write end
    /// then closed) and returns the reply; a request that parses is
    /// answered by `on_request`.
    fn ask(request: Vec<u8>, on_request: Reply) -> Reply {
        let (conn, client) = UnixStream::pair().unwrap();
        let (tx, rx) = mpsc::channel::<Msg>();
        std::thread::spawn(move || answer(conn, tx));
        std::thread::spawn(move || {
            if let Ok(m) = rx.recv_timeout(Duration::from_secs(10)) {
                let _ = m.reply.send(on_request);
            }
        });
        let mut w = client.try_clone().unwrap();
        // Written apart: the supervisor stops reading one byte past the cap.
        std::thread::spawn(move || {
            let _ = w.write_all(&request);
            let _ = w.shutdown(std::net::Shutdown::Write);
        });
        client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // As the client reads it: one line (a reset for the unread rest comes after it).
        let mut reply = Vec::new();
        let got = read_capped(&mut BufReader::new(client), &mut reply, MAX_LINE, Rest::Leave).unwrap();
        assert_eq!(got, Capped::Line);
        serde_json::from_slice(&reply).unwrap()
    }

    #[test]
    fn a_request_over_the_line_cap_is_refused_without_being_read_whole() {
        let mut big = br#"{"verb":"steer","msg":""#.to_vec();
        big.resize(MAX_LINE * 4, b'x');
        big.extend_from_slice(b"\"}\n");
        let r = ask(big, Reply::ok("taken", None));
        assert!(!r.ok && r.detail.contains("request longer than"), "{r:?}");
        // At the cap, with CR LF, or ended by the end of input: read and answered.
        let mut at_cap = br#"{"verb":"status"}"#.to_vec();
        at_cap.resize(MAX_LINE, b' ');
        for end in [&b"\r\n"[..], b"\n", b""] {
            let r = ask([&at_cap[..], end].concat(), Reply::ok("taken", None));
            assert!(r.ok && r.detail == "taken", "{r:?}");
        }
        let r = ask(b"not json\n".to_vec(), Reply::ok("taken", None));
        assert!(!r.ok && r.detail.starts_with("bad request"), "{r:?}");
    }
}
