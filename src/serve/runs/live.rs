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

use super::follow::{self, Tap};
use super::reader::Source;
use super::resolved::{Resolved, Stamps};
use super::task::{framing_and_after, Cors};
use crate::runs::registry::Registry;
use crate::runs::view::Loaded;
use crate::serve::http::{Close, Request};
use crate::serve::state::Shared;
use std::collections::HashMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// (the run's pointer file, task, AG-UI framing).
type Key = (PathBuf, String, bool);

/// The taps of task streams by what a request names, with what their first
/// client resolved (dead ones are swept as new ones come).
static LIVE: Mutex<Option<HashMap<Key, Weak<Tap>>>> = Mutex::new(None);

/// Keeps what the stream `src` resolved (its files' `stamps`, its log's
/// `log_id`) with its `tap`, for the next client of the task.
pub(super) fn remember(shared: &Shared, src: &Source, tap: &Arc<Tap>, stamps: Stamps, log_id: (u64, u64)) {
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
        link_prefixes: Default::default(),
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
    let src = res.source(agui);
    // The long way's check, on the same log (closed at once: the tap reads it).
    let checked = super::task::check_after(super::task::open_log(src.l, src.log).ok()?.as_ref(), after);
    if let Err(m) = checked {
        crate::serve::http::respond_error(stream, 400, cors, &m);
        return Some(Close::Linger);
    }
    // The head goes out with the stream's first frames, in one write.
    let body =
        crate::serve::stream::Stream::held(stream, req, cors, shared.cfg.stream_buffer, shared.cfg.write_timeout);
    let mut out = follow::Out::new(body);
    let w = follow::Watches { log: &sub, journal: journal_sub.as_ref() };
    let _ = follow::serve(shared, &mut out, &src, Some(tap.clone()), &w, after);
    Some(Close::Now)
}
