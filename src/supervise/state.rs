//! The supervisor's state: its options and what its loop holds ([`Sup`],
//! whose methods are the loop's in `mod.rs`, the steps' in `steps.rs` and the
//! control verbs' in `commands.rs`). A leaf below them all.

use super::records::{Interrupts, Records};
use super::runner::{Ev, Running};
use super::waves::Waves;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

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
    /// Approval links (`--public-url`, `--link-secret-file`): each tool or
    /// plan approval a task's agent raises is journaled with a link that
    /// answers it once, through a `runwire-serve` with the same settings.
    pub links: Option<crate::control::links::Keys>,
    /// Where the run's report for a person goes, a line at a time: one
    /// line per task as it ends, one as the run ends (the binary prints
    /// them on stdout).
    pub report: fn(&str),
}

/// The loop's state: the plan's state machine, the records, the steps running.
pub(super) struct Sup {
    pub(super) opts: Options,
    pub(super) waves: Waves,
    pub(super) rec: Records,
    /// The steps running now, by task.
    pub(super) running: BTreeMap<String, Running>,
    /// Each task's runwire interrupt ids (rebuilt from the journal at a restart).
    pub(super) interrupts: BTreeMap<String, Interrupts>,
    pub(super) wrappers: BTreeMap<String, PathBuf>,
    /// `runwire-session`, when a task has adapter `acp` (run by it, no wrapper).
    pub(super) session_bin: Option<PathBuf>,
    /// Steps started so far: each one's number tells its reports apart.
    pub(super) steps: u64,
    pub(super) events: mpsc::Sender<Ev>,
}

pub(super) fn now_ts() -> String {
    crate::util::time::format_ms(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0),
    )
}
