//! What a task stream resolved its task to (the run as read, the log, the
//! stamps of the files it came from), kept with the log's tap so the next
//! client of the task is served without reading the run's files again
//! ([`super::live`] says when that holds).

use super::reader::Source;
use crate::pipeline::normalize::Adapter;
use crate::runs::index::{Stamp, RACY_NS};
use crate::runs::registry::Registry;
use crate::runs::view::Loaded;
use crate::serve::state::Shared;
use std::path::{Path, PathBuf};

/// The stamps of the files a stream resolved its task from.
#[derive(Clone, Copy, PartialEq)]
pub(super) struct Stamps {
    pointer: Stamp,
    plan: Option<Stamp>,
    live: Option<Stamp>,
}

fn stamp(p: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(p).ok().map(|m| Stamp::of_meta(&m))
}

fn now_ns() -> i64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl Stamps {
    /// The stamps of `l`'s files now (`None` for one that is absent);
    /// `None` when one changed too recently for its stamp to tell a later
    /// change apart (a stream that resolved it is not kept).
    pub(super) fn of(shared: &Shared, l: &Loaded) -> Option<Stamps> {
        let now = now_ns();
        let s = Stamps {
            pointer: stamp(&Registry::at(&shared.cfg.harness_home).path(&l.pointer.run_id))?,
            plan: stamp(&l.files.plan()),
            live: stamp(&l.files.live()),
        };
        let racy = |s: Option<Stamp>| s.is_some_and(|s| s.racy(now, RACY_NS));
        if racy(Some(s.pointer)) || racy(s.plan) || racy(s.live) {
            return None;
        }
        Some(s)
    }
}

/// What a stream resolved its task to, kept with the tap.
pub(super) struct Resolved {
    /// The run as read, but its journal (the stream keeps none of it).
    pub(super) l: Loaded,
    pub(super) log: PathBuf,
    pub(super) adapter: Adapter,
    pub(super) run: String,
    pub(super) task: String,
    pub(super) journal_path: PathBuf,
    pub(super) stamps: Stamps,
    /// The log's (device, inode): the tap's file.
    pub(super) log_id: (u64, u64),
}

impl Resolved {
    pub(super) fn source(&self, agui: bool) -> Source<'_> {
        Source {
            l: &self.l,
            log: &self.log,
            adapter: self.adapter,
            run: &self.run,
            task: &self.task,
            agui,
            journal_path: &self.journal_path,
        }
    }

    /// The files are as they were when this was resolved (see the module's doc).
    pub(super) fn unchanged(&self, pointer: &Path) -> bool {
        let journal_ok = match std::fs::symlink_metadata(&self.journal_path) {
            Ok(m) => m.file_type().is_file() && m.len() <= crate::runs::safe::MAX_JOURNAL,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        journal_ok
            && stamp(pointer) == Some(self.stamps.pointer)
            && stamp(&self.l.files.plan()) == self.stamps.plan
            && stamp(&self.l.files.live()) == self.stamps.live
    }

    /// The log's path is still the tap's file (a regular file, no link).
    pub(super) fn same_log(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&self.log).is_ok_and(|m| m.file_type().is_file() && (m.dev(), m.ino()) == self.log_id)
    }
}
