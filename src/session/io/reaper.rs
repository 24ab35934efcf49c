//! `runwire-reaper`'s own logic (`src/bin/runwire-reaper.rs` is thin): the
//! per-run reaper that [`super::proc`] puts between the server or the
//! supervisor and every agent wrapper, so that no process of the run
//! outlives it (the module doc of [`super::proc`] says how), and the run's
//! scratch directory, which goes with it.

use super::proc::{descendants, DRAIN_GRACE, REAPER_BIN};
use super::run_tmp::{RunTmp, RUN_TMPDIR_ENV};
use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How the reaper was asked to run (`runwire-reaper`'s arguments).
#[derive(Debug, Clone)]
pub struct ReaperOpts {
    pub grace: Duration,
    /// The pid that started us; when our parent is no longer this one, it
    /// died before our parent-death signal was set.
    pub parent: Option<i32>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Running,
    /// The program exited; what it left gets [`DRAIN_GRACE`].
    Lingering(Instant),
    /// Asked to stop (or the parent died); SIGKILL at the instant.
    Stopping(Instant),
    Killing,
}

/// The reaper: starts the program and never leaves a descendant behind (see
/// the module doc). Returns the exit code: the program's, `128 + signal`
/// when it was killed, 127/126 when it could not be started, 3 when the
/// reaper itself could not be set up.
pub fn reaper_main(opts: ReaperOpts) -> i32 {
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    const BIN: &str = REAPER_BIN;
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        crate::util::cli::report(BIN, format!("PR_SET_CHILD_SUBREAPER: {e}"));
        return 3;
    }
    let mut mask = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGCHLD, Signal::SIGUSR1] {
        mask.add(s);
    }
    if let Err(e) = mask.thread_block() {
        crate::util::cli::report(BIN, format!("cannot block signals: {e}"));
        return 3;
    }
    let sfd = match SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
        Ok(s) => s,
        Err(e) => {
            crate::util::cli::report(BIN, format!("signalfd: {e}"));
            return 3;
        }
    };
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
    let parent_gone = || opts.parent.is_some_and(|p| nix::unistd::getppid().as_raw() != p);
    if parent_gone() {
        // As if the parent-death signal had come: the caller is gone (or was
        // never this pid). Said, since nothing was started.
        crate::util::cli::report(
            BIN,
            format!(
                "--parent {}: the reaper's parent is process {}, so the caller is gone: nothing was started",
                opts.parent.unwrap_or_default(),
                nix::unistd::getppid()
            ),
        );
        return 128 + Signal::SIGTERM as i32;
    }
    // The program gets a clean signal mask: ours blocks what the signalfd
    // reads, and a mask is inherited across exec.
    let mut cmd = Command::new(&opts.program);
    cmd.args(&opts.args);
    // The run's scratch directory: a wrapper keeps its temporary files there,
    // and it goes with the run, also when the wrapper was SIGKILLed (past the
    // stop's grace, or SIGUSR1) and its own cleanup never ran.
    let scratch = RunTmp::make();
    if let Some(d) = &scratch.0 {
        cmd.env(RUN_TMPDIR_ENV, d);
    }
    // SAFETY: pthread_sigmask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| SigSet::empty().thread_set_mask().map_err(io::Error::from));
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            crate::util::cli::report(BIN, format!("{}: {e}", Path::new(&opts.program).display()));
            return if e.kind() == io::ErrorKind::PermissionDenied { 126 } else { 127 };
        }
    };
    let wrapper = Pid::from_raw(child.id() as i32);
    drop(child);
    // Let go of the output pipe: its reader sees the end once the program
    // and its descendants have closed it, not when we exit.
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        let _ = nix::unistd::dup2(null.as_raw_fd(), 0);
        let _ = nix::unistd::dup2(null.as_raw_fd(), 1);
    }
    let me = std::process::id() as i32;
    let mut rc: Option<i32> = None;
    let mut phase = Phase::Running;
    let mut stragglers_told = false;
    // A stop request (or the caller's death): SIGTERM to the program's
    // process group, which is ours, once; the program then has the grace to
    // stop what it runs (a wrapper stops its engine and writes its status
    // line) before everything left is killed.
    let own_group = nix::unistd::getpgrp().as_raw() == me;
    let stop = |now: Instant| {
        if own_group {
            let _ = killpg(Pid::from_raw(me), Signal::SIGTERM);
            // A stopped member takes the SIGTERM only once it runs again.
            let _ = killpg(Pid::from_raw(me), Signal::SIGCONT);
        } else {
            // Run by hand inside another group: the program alone.
            let _ = kill(wrapper, Signal::SIGTERM);
            let _ = kill(wrapper, Signal::SIGCONT);
        }
        Phase::Stopping(now + opts.grace)
    };
    let signal_all = |sig: Signal| {
        for d in descendants(me) {
            let _ = kill(Pid::from_raw(d.pid), sig);
        }
    };
    loop {
        // Done only when no child is left at all, not even a zombie: the
        // group must be empty when the caller sees us exit.
        let mut childless = false;
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(p, c)) if p == wrapper => rc = Some(c),
                Ok(WaitStatus::Signaled(p, s, _)) if p == wrapper => rc = Some(128 + s as i32),
                Ok(WaitStatus::StillAlive) => break,
                Err(Errno::ECHILD) => {
                    childless = true;
                    break;
                }
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        if let (Some(c), true) = (rc, childless) {
            return c;
        }
        let now = Instant::now();
        if parent_gone() && phase == Phase::Running {
            phase = stop(now);
        }
        // The program is gone: what it left gets SIGTERM now and SIGKILL
        // after the drain grace (or the stop's grace, if that ends first).
        if rc.is_some() && !stragglers_told {
            stragglers_told = true;
            signal_all(Signal::SIGTERM);
            phase = match phase {
                Phase::Stopping(t) => Phase::Stopping(t.min(now + DRAIN_GRACE)),
                Phase::Killing => Phase::Killing,
                _ => Phase::Lingering(now + DRAIN_GRACE),
            };
        }
        match phase {
            Phase::Lingering(t) | Phase::Stopping(t) if now >= t => phase = Phase::Killing,
            _ => {}
        }
        if phase == Phase::Killing {
            signal_all(Signal::SIGKILL);
        }
        let wait = match phase {
            Phase::Running => Duration::from_secs(1),
            Phase::Lingering(t) | Phase::Stopping(t) => t.saturating_duration_since(now).min(Duration::from_secs(1)),
            Phase::Killing => Duration::from_millis(10),
        };
        let ms = u16::try_from(wait.as_millis().max(1)).unwrap_or(1000);
        let mut fds = [nix::poll::PollFd::new(std::os::fd::AsFd::as_fd(&sfd), nix::poll::PollFlags::POLLIN)];
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms));
        while let Ok(Some(info)) = sfd.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGUSR1) => phase = Phase::Killing,
                // Also our own SIGTERM to the group comes back here: ignored.
                Ok(Signal::SIGTERM | Signal::SIGINT | Signal::SIGHUP) if phase == Phase::Running => {
                    phase = stop(Instant::now());
                }
                _ => {}
            }
        }
    }
}
