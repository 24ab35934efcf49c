//! A new client of a live task stream, served without reading the run's
//! files again.
//!
//! The first client of a task's log resolves it the long way
//! (`stream_task`: the registry's pointer, the run's journal and plan,
//! liveness, the log opened safely beneath the run's directory) and makes
//! the log's [`Tap`]. What it resolved is kept with the tap, for the tap's
//! life. The next client of that task in that framing is served from it
//! when the files it came from are as they were: the pointer, plan and
//! liveness files with the same [`Stamp`]s (kept only when none had changed
//! within [`RACY_NS`] of being read, so an unchanged stamp is unchanged
//! content), the journal still a regular file within its cap (it grows
//! with the run; a stream needs nothing of it but that it is readable), and
//! the log's path still the tap's file. Any difference, and the client
//! takes the long way, which answers exactly as before (and keeps what it
//! resolved for the next one). One `statx` a file instead of opening,
//! reading and parsing them; the resume point, the framing and everything
//! after the tap are the same code for both.

use super::tap::{self, Tap};
use super::{framing_and_after, Cors};
use crate::pipeline::normalize::Adapter;
use crate::runs::index::{Stamp, RACY_NS};
use crate::runs::registry::Registry;
use crate::runs::view::Loaded;
use crate::serve::http::{Close, Request};
use crate::serve::Shared;
use std::collections::HashMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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
    pub fn of(shared: &Shared, l: &Loaded) -> Option<Stamps> {
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
    l: Loaded,
    log: PathBuf,
    adapter: Adapter,
    run: String,
    task: String,
    journal_path: PathBuf,
    stamps: Stamps,
    /// The log's (device, inode): the tap's file.
    log_id: (u64, u64),
}

impl Resolved {
    fn source(&self, agui: bool) -> tap::Source<'_> {
        tap::Source {
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
    fn unchanged(&self, pointer: &Path) -> bool {
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
    fn same_log(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&self.log).is_ok_and(|m| m.file_type().is_file() && (m.dev(), m.ino()) == self.log_id)
    }
}

/// (the run's pointer file, task, AG-UI framing).
type Key = (PathBuf, String, bool);

/// The taps of task streams by what a request names, with what their first
/// client resolved (dead ones are swept as new ones come).
static LIVE: Mutex<Option<HashMap<Key, Weak<Tap>>>> = Mutex::new(None);

/// Keeps what the stream `src` resolved (its files' `stamps`, its log's
/// `log_id`) with its `tap`, for the next client of the task.
pub(super) fn remember(shared: &Shared, src: &tap::Source, tap: &Arc<Tap>, stamps: Stamps, log_id: (u64, u64)) {
    if tap.resolved().is_some_and(|r| r.stamps == stamps && r.log_id == log_id) {
        return;
    }
    let l = src.l;
    let Some(dir) = l.dir.as_ref().and_then(|d| d.try_clone().ok()) else { return };
    let copy = Loaded {
        pointer: l.pointer.clone(),
        pointer_ok: l.pointer_ok,
        files: l.files.clone(),
        journal: Default::default(),
        plan: l.plan.clone(),
        problem: None,
        dir: Some(dir),
        journal_stamp: None,
    };
    tap.set_resolved(Arc::new(Resolved {
        l: copy,
        log: src.log.to_path_buf(),
        adapter: src.adapter,
        run: src.run.to_string(),
        task: src.task.to_string(),
        journal_path: src.journal_path.to_path_buf(),
        stamps,
        log_id,
    }));
    let key = (Registry::at(&shared.cfg.harness_home).path(src.run), src.task.to_string(), src.agui);
    let mut live = lock(&LIVE);
    let live = live.get_or_insert_with(HashMap::new);
    live.retain(|_, t| t.strong_count() > 0);
    live.insert(key, Arc::downgrade(tap));
}

/// Serves `GET /runs/:id/tasks/:tid/stream` from the task's live tap when
/// what it was resolved from is unchanged; `None`: take the long way.
pub(super) fn stream(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: Cors,
    id: &str,
    tid: &str,
) -> Option<Close> {
    // A refused request is refused the long way, in its order of checks.
    let (agui, after) = framing_and_after(req).ok()?;
    let pointer = Registry::at(&shared.cfg.harness_home).path(id);
    let key: Key = (pointer, tid.to_string(), agui);
    let tap = lock(&LIVE).as_ref()?.get(&key)?.upgrade()?;
    let res = tap.resolved()?;
    if !res.unchanged(&key.0) {
        return None;
    }
    let hub = shared.hub().ok()?;
    let journal_sub = hub.subscribe(&res.journal_path).ok();
    // Watched before it is checked, as the long way watches before it opens.
    let sub = hub.subscribe(&res.log).ok()?;
    if !res.same_log() {
        return None;
    }
    // The head goes out with the stream's first frames, in one write.
    let body =
        crate::serve::stream::Stream::held(stream, req, cors, shared.cfg.stream_buffer, shared.cfg.write_timeout);
    let mut out = tap::Out::new(body);
    let src = res.source(agui);
    let w = tap::Watches { log: &sub, journal: journal_sub.as_ref() };
    let _ = tap::serve(shared, &mut out, &src, Some(tap.clone()), &w, after);
    Some(Close::Now)
}
