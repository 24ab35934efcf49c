//! The change feed's log where it lies and what bounds it: its paths under
//! a harness home, its event types and line bound, and opening it to read.
//! A leaf: the feed's writer (mod.rs), reader and watcher build on it.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Event types, in the `type` field of every event. `node` (a node of a
/// cluster lost or up again) is only in a hub's feed (spec/CLUSTER.md).
pub const TYPES: [&str; 8] = ["created", "task", "run", "needs_input", "input_answered", "ended", "removed", "node"];

/// The most bytes one event's line takes, its newline included: feed events
/// are small by construction. An event that would be larger (a record with a
/// long `detail`: an agent can write its own journal) is written as a
/// reference instead (`push_event`); a longer line in the log (written by
/// something else, or corrupt) is skipped by readers, never read whole.
pub const MAX_EVENT: usize = 64 * 1024;

/// The feed's files under a harness home.
#[derive(Debug, Clone)]
pub struct Paths {
    pub dir: PathBuf,
    pub log: PathBuf,
    pub lock: PathBuf,
    pub state: PathBuf,
}

impl Paths {
    pub fn at(home: &Path) -> Paths {
        let dir = home.join("feed");
        Paths { log: dir.join("events.log"), lock: dir.join("lock"), state: dir.join("state.json"), dir }
    }
}

/// Refuses a feed log that is not a regular file (a symlink to `/dev/zero`,
/// a FIFO): it would never end, or never answer.
pub(super) fn regular(f: std::fs::File) -> io::Result<std::fs::File> {
    let m = f.metadata()?;
    if m.is_file() {
        Ok(f)
    } else {
        Err(io::Error::other(format!("events.log: not a regular file ({})", super::super::safe::kind(m.mode()))))
    }
}

/// Opens the feed log to read: never blocking (a FIFO), a regular file only.
pub(super) fn open_log(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(path)?;
    regular(f)
}
