//! Agent processes: the one place that starts, signals and reaps them, for
//! the server's runs, the supervisor's tasks and interactive sessions alike.
//!
//! A [`Proc`] is started from a [`Spec`]: stdin null or a pipe, stdout a
//! pipe, stderr inherited (or into the stdout pipe: [`Spec::merge_stderr`]),
//! in a process group of its own. Between us and the program sits a small
//! per-run reaper, `runwire-reaper` (found next to the running binary, see
//! [`reaper_path`]), so that no process of the program's tree outlives the
//! run, however it ends:
//!
//! - the reaper is a child subreaper (`PR_SET_CHILD_SUBREAPER`): every
//!   descendant of the program, one that called `setsid` included, stays
//!   its descendant, and it finds them all through `/proc`;
//! - it holds a parent-death signal, set from one long-lived spawner thread
//!   (a parent-death signal follows the *thread* that forked, so a request
//!   thread that ends must not be that parent): when the server or the
//!   supervisor dies, even by SIGKILL, the reaper stops the tree;
//! - when the program exits, whatever it left running gets SIGTERM and, after
//!   [`DRAIN_GRACE`], SIGKILL; then the reaper exits with the program's code
//!   (`128 + signal` for a killed program). So the run ends once the program
//!   is reaped, even when a grandchild still holds its stdout;
//! - SIGTERM (also SIGINT, SIGHUP), or the caller's death, stops the run:
//!   SIGTERM to the program's process group (once: a wrapper then stops its
//!   engine and writes its status line), and SIGKILL to every descendant
//!   left after the run's kill grace; SIGUSR1 means SIGKILL now.
//!
//! When the reaper binary cannot be found (a library test, a partial
//! install) the program is started directly, with the same process group
//! and parent-death signal; stopping it then signals the process groups of
//! every descendant found in `/proc`, which misses only processes that
//! escaped by double-forking out of the tree.
//!
//! Reading: [`read_pieces`] hands over the program's output in pieces that
//! end at a newline, each with its arrival time (the moment the read that
//! delivered the newline returned), for the arrival-time sidecar
//! (`crate::util::arrival`).

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Default time between SIGTERM and SIGKILL when a run is stopped.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// After the program exits: how long what it left running may live (SIGTERM
/// at once, SIGKILL after this), and how long a reader keeps draining its
/// output before the run ends without waiting for the end of the pipe.
pub const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Set (to `1`) by `runwire-supervise` on a step that runs a session of its
/// task: that session's stop signals are its runner's. A session and the
/// server remove it from their agents' environment, so it reaches no session
/// further down (`spec/SUPERVISOR.md`).
pub const SUPERVISED_ENV: &str = "RUNWIRE_SUPERVISED";

/// The reaper's file name.
pub const REAPER_BIN: &str = "runwire-reaper";

/// What the program's stdin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// `/dev/null`: a batch run.
    Null,
    /// A pipe kept open for the caller ([`Proc::stdin`]): an interactive session.
    Piped,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Variables of this process's environment the program does not inherit.
    pub env_remove: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    pub stdin: Input,
    /// SIGTERM to SIGKILL when the run is stopped.
    pub kill_grace: Duration,
    /// stderr goes into the stdout pipe (a gate's log holds both) instead of
    /// being inherited.
    pub merge_stderr: bool,
    /// stderr is a pipe of its own ([`Proc::stderr`]): a probe that reads
    /// what the program says there (`runs doctor`).
    pub pipe_stderr: bool,
}

impl Spec {
    pub fn new(program: impl Into<PathBuf>) -> Spec {
        Spec {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            cwd: None,
            stdin: Input::Null,
            kill_grace: KILL_GRACE,
            merge_stderr: false,
            pipe_stderr: false,
        }
    }

    pub fn arg(&mut self, a: impl Into<OsString>) -> &mut Spec {
        self.args.push(a.into());
        self
    }

    pub fn env(&mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> &mut Spec {
        self.env.push((k.into(), v.into()));
        self
    }

    /// The program does not inherit `k` (a variable of [`Spec::env`] is still set).
    pub fn env_remove(&mut self, k: impl Into<OsString>) -> &mut Spec {
        self.env_remove.push(k.into());
        self
    }
}

/// Process groups started and not yet reaped, for [`kill_remaining`].
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<i32>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A started program (behind its reaper when there is one).
pub struct Proc {
    child: Child,
    pgid: i32,
    reaper: bool,
    kill_grace: Duration,
    status: Option<i64>,
    /// When the stop began (SIGTERM sent).
    stopping: Option<Instant>,
    /// Set once the run is reaped, for [`Signaller`]s (never signal a pid
    /// that may have been reused).
    reaped: Arc<AtomicBool>,
    /// The program's stdin, for [`Input::Piped`].
    pub stdin: Option<ChildStdin>,
    /// The program's stdout, until the caller takes it.
    pub stdout: Option<ChildStdout>,
    /// The program's stderr, when [`Spec::pipe_stderr`] asked for a pipe.
    pub stderr: Option<std::process::ChildStderr>,
}

/// Where `runwire-reaper` is: `$RUNWIRE_REAPER` when set (`none`: no
/// reaper, to compare), else next to the running binary (or one directory
/// up, for test binaries in `target/*/deps`).
pub fn reaper_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RUNWIRE_REAPER").filter(|v| !v.is_empty()) {
        return (p != "none").then(|| PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(REAPER_BIN), dir.parent()?.join(REAPER_BIN)].into_iter().find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

type Job = (Command, mpsc::Sender<io::Result<Child>>);

/// Starts `cmd` on the spawner thread, which lives as long as the process:
/// the child's parent-death signal then fires when the process dies, not
/// when the thread that asked for the start ends.
fn spawn_on_spawner(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new().name("proc spawner".into()).spawn(move || {
            for (mut cmd, reply) in rx {
                let _ = reply.send(cmd.spawn());
            }
        });
        if let Err(e) = started {
            crate::util::cli::report("runwire", format!("cannot start the process spawner thread: {e}"));
        }
        Mutex::new(tx)
    });
    let (rtx, rrx) = mpsc::channel();
    let sent = tx.lock().unwrap_or_else(|e| e.into_inner()).send((cmd, rtx));
    if sent.is_err() {
        return Err(io::Error::other("the process spawner thread is gone"));
    }
    rrx.recv().map_err(|_| io::Error::other("the process spawner thread is gone"))?
}

impl Proc {
    /// Starts the program. `Err` says why nothing started (no such file,
    /// not executable, fork failed).
    pub fn spawn(spec: &Spec) -> io::Result<Proc> {
        match std::fs::metadata(&spec.program) {
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", spec.program.display()))),
            Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{}: not an executable file", spec.program.display()),
                ))
            }
            Ok(_) => {}
        }
        let reaper = reaper_path();
        if reaper.is_none() && !matches!(std::env::var_os("RUNWIRE_REAPER"), Some(v) if v == "none") {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                crate::util::cli::report(
                    REAPER_BIN,
                    "not found next to this binary: agents run without a reaper, and a descendant that \
                     leaves their process tree may outlive its run",
                )
            });
        }
        let mut cmd = match &reaper {
            Some(r) => {
                let mut c = Command::new(r);
                c.arg("--grace-ms")
                    .arg(spec.kill_grace.as_millis().to_string())
                    .arg("--parent")
                    .arg(std::process::id().to_string())
                    .arg("--")
                    .arg(&spec.program);
                c
            }
            None => Command::new(&spec.program),
        };
        cmd.args(&spec.args);
        // The reaper, if any, passes its environment on to the program.
        for k in &spec.env_remove {
            cmd.env_remove(k);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        if let Some(d) = &spec.cwd {
            cmd.current_dir(d);
        }
        cmd.stdin(match spec.stdin {
            Input::Null => Stdio::null(),
            Input::Piped => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(if spec.pipe_stderr && !spec.merge_stderr { Stdio::piped() } else { Stdio::inherit() })
        .process_group(0);
        // SAFETY: prctl, pthread_sigmask and dup2 are async-signal-safe. The run
        // goes when we go, even by SIGKILL; the spawner thread makes "we"
        // the process. The signal mask is inherited across exec: a caller
        // that blocks SIGTERM (the server does, for its signal thread) must
        // not pass that on.
        let merge = spec.merge_stderr;
        unsafe {
            cmd.pre_exec(move || {
                if merge {
                    // stdout is the pipe by now; dup2 is async-signal-safe.
                    if nix::libc::dup2(1, 2) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(io::Error::from)?;
                SigSet::empty().thread_set_mask().map_err(io::Error::from)?;
                Ok(())
            });
        }
        let mut child = spawn_on_spawner(cmd)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {}: {e}", spec.program.display())))?;
        let pgid = child.id() as i32;
        live().push(pgid);
        Ok(Proc {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            pgid,
            reaper: reaper.is_some(),
            kill_grace: spec.kill_grace,
            status: None,
            stopping: None,
            reaped: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A handle that signals the run from another thread (the session loop
    /// ends an agent that outstays its closed input); it does nothing once
    /// the run is reaped.
    pub fn signaller(&self) -> Signaller {
        Signaller { pid: self.pid(), pgid: self.pgid, reaper: self.reaper, reaped: self.reaped.clone() }
    }

    /// The pid we started (the reaper's, when there is one).
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The run's process group (the reaper's and the program's).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// True when a reaper guards the run.
    pub fn has_reaper(&self) -> bool {
        self.reaper
    }

    /// The exit code once the run is over (`128 + signal` for a killed
    /// program), without blocking. With a reaper, "over" means the program
    /// exited and what it left behind is gone.
    pub fn try_wait(&mut self) -> Option<i64> {
        if self.status.is_none() && self.exited(false) {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.reaped(s);
            }
        }
        self.status
    }

    /// Whether the run's first process has exited, looked at without
    /// reaping it (`block`: waiting for that). A reaper killed by a signal
    /// (SIGKILL: ours as a last resort, or anyone's to its group) removed
    /// nothing itself: its run's scratch directory, named by its pid, is
    /// removed here, while its zombie still holds that pid, so no other
    /// reaper can have the pid yet nor a directory under its name.
    fn exited(&self, block: bool) -> bool {
        use nix::sys::wait::{waitid, Id};
        let mut flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        if !block {
            flags |= WaitPidFlag::WNOHANG;
        }
        loop {
            return match waitid(Id::Pid(Pid::from_raw(self.pid())), flags) {
                Ok(WaitStatus::StillAlive) => false,
                Ok(WaitStatus::Signaled(..)) => {
                    if self.reaper {
                        super::run_tmp::remove_of(&std::env::temp_dir(), self.pid());
                    }
                    true
                }
                Err(Errno::EINTR) => continue,
                // Exited, or not to be had here: std's wait tells.
                Ok(_) | Err(_) => true,
            };
        }
    }

    fn reaped(&mut self, s: ExitStatus) {
        self.status = Some(exit_code(s));
        self.reaped.store(true, Ordering::SeqCst);
        if !self.reaper {
            // Without a reaper, what the program left in its group goes with it.
            kill_tree_groups(self.pgid, Signal::SIGKILL);
        }
        reap_adopted(self.pgid);
        live().retain(|&p| p != self.pgid);
    }

    /// Waits for the run's first process to exit, then reaps it.
    fn wait_and_reap(&mut self) -> i64 {
        self.exited(true);
        match self.child.wait() {
            Ok(s) => {
                self.reaped(s);
                self.status.unwrap_or(-1)
            }
            Err(_) => -1,
        }
    }

    /// Waits for the run to be over (blocking): its exit code (`-1` when it
    /// could not be had). For the one thread that reaps a session's agent.
    pub fn wait(&mut self) -> i64 {
        if let Some(rc) = self.status {
            return rc;
        }
        self.wait_and_reap()
    }

    /// Waits up to `d` for the run to be over.
    pub fn wait_timeout(&mut self, d: Duration) -> Option<i64> {
        let until = Instant::now() + d;
        loop {
            if let Some(rc) = self.try_wait() {
                return Some(rc);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Asks the run to stop: SIGTERM to the program's process group (the
    /// reaper passes it on, once), so a wrapper can stop its engine and
    /// write its status line; every process of the run left after the kill
    /// grace gets SIGKILL.
    pub fn terminate(&mut self) {
        if self.status.is_some() || self.stopping.is_some() {
            return;
        }
        self.stopping = Some(Instant::now());
        if self.reaper {
            let _ = kill(Pid::from_raw(self.pid()), Signal::SIGTERM);
        } else {
            kill_tree_groups(self.pgid, Signal::SIGTERM);
        }
        // A stopped process (SIGSTOP, a ^Z) takes SIGTERM only once it runs
        // again; so does a stopped reaper, which relays it.
        kill_tree_groups(self.pgid, Signal::SIGCONT);
    }

    /// SIGKILL to every process of the run now.
    pub fn kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        if self.reaper {
            // The reaper kills the tree and exits; killing it first would
            // orphan the tree's setsid members.
            let _ = kill(Pid::from_raw(self.pid()), Signal::SIGUSR1);
        } else {
            kill_tree_groups(self.pgid, Signal::SIGKILL);
        }
    }

    /// Calls [`kill`](Proc::kill) when the kill grace since
    /// [`terminate`](Proc::terminate) is over; for callers that poll.
    pub fn escalate(&mut self) {
        if self.stopping.is_some_and(|t| t.elapsed() >= self.kill_grace) {
            self.kill();
        }
    }

    /// Stops the run and reaps it: SIGTERM, the kill grace, SIGKILL.
    /// Returns the exit code (`-1` when it could not be had).
    pub fn stop(&mut self) -> i64 {
        if let Some(rc) = self.try_wait() {
            return rc;
        }
        self.terminate();
        let left = self.kill_grace.saturating_sub(self.stopping.map(|t| t.elapsed()).unwrap_or_default());
        if let Some(rc) = self.wait_timeout(left) {
            return rc;
        }
        self.kill();
        if let Some(rc) = self.wait_timeout(Duration::from_secs(1)) {
            return rc;
        }
        // A reaper that does not answer: kill what we can see of the tree.
        kill_tree_groups(self.pgid, Signal::SIGKILL);
        self.wait_and_reap()
    }
}

/// Signals a run from another thread than its [`Proc`]'s owner: as
/// [`Proc::terminate`] and [`Proc::kill`], never after the run was reaped.
#[derive(Debug, Clone)]
pub struct Signaller {
    pid: i32,
    pgid: i32,
    reaper: bool,
    reaped: Arc<AtomicBool>,
}

impl Signaller {
    /// SIGTERM to the program's process group (through the reaper, which
    /// then kills what is left after the run's kill grace), and SIGCONT.
    pub fn terminate(&self) {
        if self.reaped.load(Ordering::SeqCst) {
            return;
        }
        if self.reaper {
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGTERM);
        } else {
            kill_tree_groups(self.pgid, Signal::SIGTERM);
        }
        kill_tree_groups(self.pgid, Signal::SIGCONT);
    }

    /// SIGKILL to every process of the run's tree that can be seen, the
    /// reaper included: the last resort when the reaper does not answer.
    pub fn kill_tree(&self) {
        if self.reaped.load(Ordering::SeqCst) {
            return;
        }
        if self.reaper {
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        }
        kill_tree_groups(self.pgid, Signal::SIGKILL);
    }

    /// SIGKILL to every process of the run.
    pub fn kill(&self) {
        if self.reaped.load(Ordering::SeqCst) {
            return;
        }
        if self.reaper {
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGUSR1);
        } else {
            kill_tree_groups(self.pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// True while some process is in group `pgid` (a probe: no signal is sent).
pub fn group_alive(pgid: i32) -> bool {
    pgid > 1 && !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// Stops a process group an earlier runner started and left running (its
/// output cannot be taken over), known by its leader's identity (pid, start
/// time, boot): SIGTERM, up to `grace` for the group to go, then SIGKILL to
/// it and to every group its tree reaches.
/// The leader is checked before each signal, so a reused pid is never
/// signalled. `Err`: why nothing was sent.
pub fn stop_stale_group(leader: &crate::util::procid::Ident, grace: Duration) -> Result<(), String> {
    if let Some(why) = leader.group_mismatch().or_else(|| (leader.pid <= 1).then(|| "no group".into())) {
        return Err(why);
    }
    let _ = killpg(Pid::from_raw(leader.pid), Signal::SIGTERM);
    let until = Instant::now() + grace;
    while group_alive(leader.pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(25));
    }
    // The leader may have exited and its id been reused meanwhile.
    if leader.group_mismatch().is_none() {
        kill_run_now(leader.pid);
    }
    Ok(())
}

/// Last resort at exit: kill every run still going (a stream stuck writing
/// to a client that reads nothing).
pub fn kill_remaining() {
    for pgid in live().drain(..) {
        kill_run_now(pgid);
    }
}

/// Kills the run whose reaper leads group `pgid`, now, with everything it
/// started: the reaper's "kill now" (SIGUSR1), then SIGKILL to every
/// process group of its tree, found before any of them dies (a descendant
/// in a session of its own, such as a wrapper's setsid orphan, is reached
/// only this way: once the reaper is gone, it belongs to init). A
/// SIGKILLed reaper removes nothing: its run's scratch directory goes here,
/// first, while the reaper still holds its pid (a stale group's reaper is
/// not our child: once dead, init may reap it and its pid be handed out).
fn kill_run_now(pgid: i32) {
    super::run_tmp::remove_of(&std::env::temp_dir(), pgid);
    let _ = kill(Pid::from_raw(pgid), Signal::SIGUSR1);
    kill_tree_groups(pgid, Signal::SIGKILL);
}

/// `128 + signal` for a killed process, as shells report it.
pub fn exit_code(s: ExitStatus) -> i64 {
    match s.code() {
        Some(c) => i64::from(c),
        None => 128 + i64::from(s.signal().unwrap_or(0)),
    }
}

/// Makes this process the reaper of its orphaned descendants (Linux only;
/// elsewhere a no-op).
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Reaps members of group `pgid` that became our children (orphans adopted
/// by a subreaper).
fn reap_adopted(pgid: i32) {
    while let Ok(st) = waitpid(Pid::from_raw(-pgid), Some(WaitPidFlag::WNOHANG)) {
        if st == WaitStatus::StillAlive {
            break;
        }
    }
}

/// One line of `/proc/<pid>/stat`: pid, parent, group, and whether it is a zombie.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stat {
    pub(super) pid: i32,
    ppid: i32,
    pgrp: i32,
    zombie: bool,
}

fn all_procs() -> Vec<Stat> {
    let mut procs = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return procs };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // After the parenthesised name (which may hold anything): state, ppid, pgrp.
        let mut f = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default().split_whitespace();
        let state = f.next().unwrap_or_default();
        if let (Some(Ok(ppid)), Some(Ok(pgrp))) = (f.next().map(str::parse), f.next().map(str::parse)) {
            procs.push(Stat { pid, ppid, pgrp, zombie: state == "Z" || state == "X" });
        }
    }
    procs
}

/// Every descendant of `root` (not `root`), zombies excluded.
pub(super) fn descendants(root: i32) -> Vec<Stat> {
    let procs = all_procs();
    let mut tree = vec![root];
    let mut out = Vec::new();
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for p in &procs {
            if p.ppid == parent && !tree.contains(&p.pid) {
                tree.push(p.pid);
                if !p.zombie {
                    out.push(*p);
                }
            }
        }
        i += 1;
    }
    out
}

/// Signals group `pgid` and the group of every descendant of its leader.
fn kill_tree_groups(pgid: i32, sig: Signal) {
    if pgid <= 1 {
        return;
    }
    let mut groups = vec![pgid];
    for d in descendants(pgid) {
        if d.pgrp > 1 && !groups.contains(&d.pgrp) {
            groups.push(d.pgrp);
        }
    }
    for g in groups {
        let _ = killpg(Pid::from_raw(g), sig);
    }
}

/// Reads `r` to its end (or until `f` returns false), handing `f` each
/// piece of output: a run of bytes ending at a newline (included) with
/// `Some(arrival ms)`, or the bytes of a line still incomplete at the end of
/// a read with `None`. The arrival time is taken from `clock` when the read
/// that delivered the newline returned. At the end of the input, an
/// unterminated last line is closed with `f(b"", Some(ms))`.
pub fn read_pieces(mut r: impl Read, clock: crate::util::time::Clock, mut f: impl FnMut(&[u8], Option<i64>) -> bool) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut open = false;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let at = clock.now_ms();
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let (piece, end) = match memchr::memchr(b'\n', rest) {
                Some(i) => (&rest[..=i], Some(at)),
                None => (rest, None),
            };
            open = end.is_none();
            if !f(piece, end) {
                return;
            }
            rest = &rest[piece.len()..];
        }
    }
    if open {
        f(b"", Some(clock.now_ms()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_end_at_newlines_with_one_time_per_read() {
        let mut got = Vec::new();
        read_pieces(&b"a\nbb\ncc"[..], crate::util::time::Clock::Fixed(7), |p, at| {
            got.push((p.to_vec(), at));
            true
        });
        assert_eq!(
            got,
            vec![
                (b"a\n".to_vec(), Some(7)),
                (b"bb\n".to_vec(), Some(7)),
                (b"cc".to_vec(), None),
                (Vec::new(), Some(7))
            ]
        );
    }

    #[test]
    fn a_missing_program_is_an_error_not_a_run() {
        let e = Proc::spawn(&Spec::new("/nonexistent/agent")).err().expect("no such program");
        assert!(e.to_string().contains("/nonexistent/agent"), "{e}");
    }

    #[test]
    fn a_stopped_tree_is_gone_and_reaped() {
        // Without the reaper binary (a lib test may not have it), the
        // fallback still stops the program and its group.
        // Orphans of the killed shell come to this process (as to the server,
        // a subreaper) and are reaped here: an unreaped zombie would keep the
        // group alive, and PID 1 of a container may never reap it.
        become_subreaper();
        let mut s = Spec::new("/bin/sh");
        s.arg("-c").arg("trap '' TERM; sleep 30 & wait");
        s.kill_grace = Duration::from_millis(200);
        let mut p = Proc::spawn(&s).expect("sh starts");
        let pgid = p.pgid();
        std::thread::sleep(Duration::from_millis(100));
        let rc = p.stop();
        assert!(rc > 128, "killed, not exited: {rc}");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH)) && std::time::Instant::now() < deadline {
            reap_adopted(pgid);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH)), "group {pgid} still has members");
    }
}
