//! `GET /runs`, `GET /runs/:runId`, `GET /runs/:runId/tasks/:tid` and
//! `GET /runs/:runId/tasks/:tid/stream`: the durable tier, read from files
//! only (no supervisor needed; live and finished runs alike).
//!
//! The JSON views are `runs::view`'s, the very functions `runs list|show|task`
//! print. The stream tails the task's logfile (woken by the shared inotify
//! [`Hub`]) through the same [`Normalizer`] as `normalize-events`, frames
//! each event with [`Encoder`] (`id:` = `seq`, as `sse-encode --id-from seq`)
//! and resumes after `Last-Event-ID` / `?after=` by the same seq comparison
//! as `normalize-events --after`. `?format=agui` passes the events through
//! [`Translator`] instead, with ids of its own that resume the same way
//! ([`AguiId`]).
//!
//! Each stream writes through a bounded buffer on a non-blocking socket: the
//! file is read on at the writer's pace, and what a too-slow client cannot
//! take is dropped and named in one `error` event (no `id:`, so the client's
//! last event id stays the last one it really received).
//!
//! [`Hub`]: crate::util::watch::Hub
//! [`Normalizer`]: crate::pipeline::normalize::Normalizer
//! [`Encoder`]: crate::pipeline::encode::Encoder
//! [`Translator`]: crate::pipeline::translate::Translator

use super::http::{respond, respond_error, respond_pieces, Close, Request};
use super::state::Shared;
use crate::runs::list::Query;
use crate::runs::liveness;
use crate::runs::registry::Registry;
use crate::runs::view::{self, Loaded, Problem, ViewError};
use std::io;
use std::net::TcpStream;
use std::time::Duration;

/// `GET /runs`'s query: `limit`, `cursor`, `status` (comma-separated), `repo`.
fn list_query(req: &Request) -> Result<Query, String> {
    Query::parse(
        query_param(req, "limit").as_deref(),
        query_param(req, "cursor").as_deref(),
        query_param(req, "status").as_deref(),
        query_param(req, "repo").as_deref(),
    )
}

fn view_error(stream: &mut TcpStream, cors: Cors, e: ViewError) -> Close {
    match e {
        ViewError::Bad(m) => respond_error(stream, 400, cors, &m),
        ViewError::NotFound(m) => respond_error(stream, 404, cors, &m),
        ViewError::Unreadable(m) => respond_error(stream, 409, cors, &m),
    }
    Close::Linger
}

/// `GET /runs`: a page of the listing (`?limit=&cursor=&status=&repo=`,
/// and at a hub `&node=`).
pub fn list(shared: &Shared, stream: &mut TcpStream, req: &Request, cors: Cors) -> Close {
    let reg = Registry::at(&shared.cfg.harness_home);
    let hub = super::cluster::is_hub();
    let q = match list_query(req).and_then(|q| node_filter(q, query_param(req, "node"), hub)) {
        Ok(q) => q,
        Err(m) => return view_error(stream, cors, ViewError::Bad(m)),
    };
    // Through the run index, as `runs list`.
    let o = crate::runs::list::Options::default().with_env();
    let mut page = crate::runs::list::page_with(&reg, &q, o);
    // Whether each run not ended still has its supervisor, judged now (never kept in the index).
    crate::supervise::owned::add_to_page(&shared.cfg.harness_home, &mut page);
    if hub {
        crate::runs::nodes::add_to_page(&mut page, super::cluster::node_states().as_ref());
    }
    let mut tail = String::new();
    let _ = respond_pieces(stream, 200, cors, &page.pieces(&mut tail));
    Close::Linger
}

/// `?node=NAME`: at a hub, only that node's runs (their ids are `NAME.<run>`).
fn node_filter(q: Query, node: Option<String>, hub: bool) -> Result<Query, String> {
    let Some(node) = node else { return Ok(q) };
    if !hub {
        return Err("node: only a hub (runwire-serve --cluster URL --hub) lists runs by node".into());
    }
    crate::runs::nodes::by_node(q, &node)
}

/// `GET /runs/:id`. Its `run` says whether its supervisor runs, as the
/// listing's items do (`supervise::owned`); at a hub it carries the node's
/// name and liveness as they do too (`with_node`): a run still going on a
/// lost node, or with its supervisor gone, is not shown as plain running on
/// its own page either.
pub fn show(shared: &Shared, stream: &mut TcpStream, cors: Cors, id: &str) -> Close {
    let home = &shared.cfg.harness_home;
    let mut r = view::find(&Registry::at(home), id).map(|l| l.show());
    if let Ok(v) = &mut r {
        crate::supervise::owned::add_to_view(home, v);
    }
    if let (Ok(v), true) = (&mut r, super::cluster::is_hub()) {
        crate::runs::nodes::add_to_view(v, id, super::cluster::node_states().as_ref());
    }
    json_view(stream, cors, r)
}

/// `GET /runs/:id/tasks/:tid`.
pub fn task(shared: &Shared, stream: &mut TcpStream, cors: Cors, id: &str, tid: &str) -> Close {
    let r = view::find(&Registry::at(&shared.cfg.harness_home), id).and_then(|l| l.task(tid));
    json_view(stream, cors, r)
}

/// `GET /runs/:id/tasks/:tid/stream`.
pub fn stream(shared: &Shared, stream: &mut TcpStream, req: &Request, cors: Cors, id: &str, tid: &str) -> Close {
    if let Some(close) = live::stream(shared, stream, req, cors, id, tid) {
        return close;
    }
    match view::find(&Registry::at(&shared.cfg.harness_home), id) {
        Ok(l) => stream_task(shared, stream, req, cors, l, tid),
        Err(e) => view_error(stream, cors, e),
    }
}

fn json_view(stream: &mut TcpStream, cors: Cors, r: Result<serde_json::Value, ViewError>) -> Close {
    match r {
        Ok(v) => {
            let _ = respond(stream, 200, cors, &v.to_string());
            Close::Linger
        }
        Err(e) => view_error(stream, cors, e),
    }
}

fn stream_task(shared: &Shared, stream: &mut TcpStream, req: &Request, cors: Cors, l: Loaded, tid: &str) -> Close {
    // What is read of the run's files before its log, as it was when read (see `live`).
    let stamps = resolved::Stamps::of(shared, &l);
    let mut l = l;
    if let Err(e) = crate::runs::check_id("task", tid) {
        return view_error(stream, cors, ViewError::Bad(e));
    }
    match &l.problem {
        Some(Problem::Missing) => {
            let m = format!("run {:?}: its runstate directory {} is gone", l.pointer.run_id, l.files.dir.display());
            return view_error(stream, cors, ViewError::NotFound(m));
        }
        Some(Problem::Unreadable(why)) => return view_error(stream, cors, ViewError::Unreadable(why.clone())),
        None => {}
    }
    if !l.task_ids().iter().any(|t| t == tid) {
        let m = format!("run {:?} has no task {tid:?}", l.pointer.run_id);
        return view_error(stream, cors, ViewError::NotFound(m));
    }
    let Some(adapter) = l.adapter_of(tid) else {
        let m = format!("task {tid:?} has no adapter in the run's plan, so its log cannot be read");
        return view_error(stream, cors, ViewError::NotFound(m));
    };
    let (agui, after) = match framing_and_after(req) {
        Ok(f) => f,
        Err(m) => return view_error(stream, cors, ViewError::Bad(m)),
    };
    // The journal was needed for the checks above only: a stream keeps none of it.
    l.journal = Default::default();
    let l = &l;
    let hub = match shared.hub() {
        Ok(h) => h,
        Err(e) => {
            respond_error(stream, 503, cors, &format!("cannot watch files: {e}"));
            return Close::Linger;
        }
    };
    let run_id = l.pointer.run_id.clone();
    let journal_path = l.files.journal();
    // The journal is watched too, so an idle stream re-reads it only when it changed.
    let journal_sub = hub.subscribe(&journal_path).ok();
    // Watch before opening, so no write between the first read and a wait is missed.
    let log = match l.log_path(tid, liveness::get(&l.files).tasks.get(tid)) {
        Ok(p) => p,
        Err(e) => return view_error(stream, cors, ViewError::Unreadable(e.to_string())),
    };
    let opened = match hub.subscribe(&log) {
        Ok(sub) => match open_log(l, &log) {
            Ok(Some(f)) => Some((sub, f, log.clone())),
            Ok(None) => None,
            Err(e) => return view_error(stream, cors, ViewError::Unreadable(e.to_string())),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            respond_error(stream, 503, cors, &format!("cannot watch the log: {e}"));
            return Close::Linger;
        }
    };
    // A task the run knows but whose log does not exist yet (not started,
    // or its wrapper not yet writing) is waited for, not refused: the
    // client gets its events from the first line on.
    let dir_sub = match opened {
        Some(_) => None,
        None => match hub.subscribe_dir(&l.files.dir) {
            Ok(d) => Some(d),
            Err(e) => {
                respond_error(stream, 503, cors, &format!("cannot watch the run's directory: {e}"));
                return Close::Linger;
            }
        },
    };
    if let Err(m) = task::check_after(opened.as_ref().map(|o| &o.1), after) {
        return view_error(stream, cors, ViewError::Bad(m));
    }
    // The head goes out with the first frames (or alone, in the first flush).
    let body = super::stream::Stream::held(stream, req, cors, shared.cfg.stream_buffer, shared.cfg.write_timeout);
    let mut out = follow::Out::new(body);
    let (sub, file, log) = match (opened, dir_sub) {
        (Some(o), _) => o,
        (None, Some(d)) => {
            let w = Waiting { hub: &hub, dir: &d, journal: journal_sub.as_ref(), l, tid };
            match wait_for_log(shared, &mut out, &w) {
                Ok(Some(o)) => o,
                // The task ended (or the run did) before writing a log: an empty stream, ended.
                Ok(None) => {
                    let src = reader::Source {
                        l,
                        log: &log,
                        adapter,
                        run: &run_id,
                        task: tid,
                        agui,
                        journal_path: &journal_path,
                    };
                    let _ = follow::end_without_log(&mut out, &src, after);
                    return Close::Now;
                }
                Err(_) => return Close::Now,
            }
        }
        (None, None) => return Close::Now,
    };
    let src = reader::Source { l, log: &log, adapter, run: &run_id, task: tid, agui, journal_path: &journal_path };
    let w = follow::Watches { log: &sub, journal: journal_sub.as_ref() };
    let log_id = follow::file_id(&file);
    let tap = follow::join(shared, &src, file);
    if let (Some(t), Some(stamps), Some(log_id)) = (&tap, stamps, log_id) {
        // The next client of this live task is served from here without reading the run's files again.
        live::remember(shared, &src, t, stamps, log_id);
    }
    let _ = follow::serve(shared, &mut out, &src, tap, &w, after);
    Close::Now
}

/// What a stream waiting for its task's log looks at.
struct Waiting<'a> {
    hub: &'a std::sync::Arc<crate::util::watch::Hub>,
    /// The run's runstate directory: the log, liveness and journal appear there.
    dir: &'a crate::util::watch::Sub,
    journal: Option<&'a crate::util::watch::Sub>,
    l: &'a Loaded,
    tid: &'a str,
}

/// Waits, woken by the directory's inotify watch, until the task's log
/// exists (at its default path or where liveness says), then returns it
/// watched and opened. `None` when the task or run ended first, or the
/// server is shutting down; `Err` when the client left. Keep-alive comments
/// go out meanwhile.
type Opened = (crate::util::watch::Sub, std::fs::File, std::path::PathBuf);

fn wait_for_log(shared: &Shared, out: &mut follow::Out, w: &Waiting) -> io::Result<Option<Opened>> {
    let journal_path = w.l.files.journal();
    let mut journal_seen: Option<u64> = None;
    // A log that liveness puts in another directory is watched there too.
    let mut elsewhere: Option<(std::path::PathBuf, Option<crate::util::watch::Sub>)> = None;
    // The generations last looked at: nothing is read again until one moves.
    let mut looked: Option<(u64, Option<u64>)> = None;
    loop {
        let gen = w.dir.generation();
        let other_gen = elsewhere.as_ref().and_then(|(_, s)| s.as_ref()).map(|s| s.generation());
        // An unwatchable other directory (not there yet) is looked at on every tick instead.
        let blind = elsewhere.as_ref().is_some_and(|(_, s)| s.is_none());
        let changed = looked != Some((gen, other_gen)) || blind;
        if changed {
            looked = Some((gen, other_gen));
            match look_for_log(w, &mut elsewhere)? {
                Look::Found(o) => return Ok(Some(o)),
                // Started watching another directory after the look: look again before waiting.
                Look::Moved => {
                    looked = None;
                    continue;
                }
                Look::Nothing => {}
            }
        }
        let journal_gen = w.journal.map(|j| j.generation());
        // Also on any change in the directory: a journal created (or replaced) after the
        // stream started is seen there, not by the journal's own watch.
        if changed || journal_gen != journal_seen {
            journal_seen = journal_gen;
            if task_over(&journal_path, w.tid) {
                return Ok(None);
            }
        }
        if shared.is_shutting_down() {
            return Ok(None);
        }
        out.heartbeat(shared.cfg.keepalive)?;
        out.flush()?;
        match &elsewhere {
            // Two watches cannot be waited on at once: the other directory is looked at every 50 ms.
            Some((_, Some(s))) if Some(s.generation()) != other_gen => {}
            Some(_) => w.dir.wait(gen, Duration::from_millis(50)),
            None => w.dir.wait(gen, TICK),
        }
    }
}

enum Look {
    Found(Opened),
    /// The log is now placed in a directory not watched before.
    Moved,
    Nothing,
}

/// One look for the task's log where liveness (or the default) puts it:
/// watched and opened when it exists. Starts watching the directory of a
/// log placed elsewhere.
fn look_for_log(
    w: &Waiting,
    elsewhere: &mut Option<(std::path::PathBuf, Option<crate::util::watch::Sub>)>,
) -> io::Result<Look> {
    let refused = |e: crate::runs::safe::Unreadable| io::Error::new(io::ErrorKind::PermissionDenied, e.to_string());
    let log = w.l.log_path(w.tid, liveness::get(&w.l.files).tasks.get(w.tid)).map_err(refused)?;
    match w.hub.subscribe(&log) {
        Ok(sub) => {
            if let Some(f) = open_log(w.l, &log).map_err(refused)? {
                return Ok(Look::Found((sub, f, log)));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(parent) = log.parent().filter(|p| *p != w.l.files.dir.as_path()) {
        if elsewhere.as_ref().map(|(p, _)| p.as_path()) != Some(parent) {
            // Remembered even when it cannot be watched (not there yet).
            *elsewhere = Some((parent.to_path_buf(), w.hub.subscribe_dir(parent).ok()));
            return Ok(Look::Moved);
        }
    }
    Ok(Look::Nothing)
}

mod follow;
mod live;
mod reader;
mod resolved;
mod task;

pub use task::AguiId;
use task::{framing_and_after, open_log, query_param, task_over, Cors, TICK};

/// The longest log line a task stream reads whole: the pipeline's line cap,
/// so a stream and `normalize-events` read every log the same way. A longer
/// one is skimmed as it streams past ([`crate::util::lines`]), so a stream's
/// memory does not grow with a line.
pub use crate::util::pipe::MAX_LINE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hubs_listing_filters_by_node_at_a_hub_only() {
        let q = node_filter(Query::default(), Some("beta".into()), true).unwrap();
        assert_eq!(q.id_prefix.as_deref(), Some("beta."));
        assert!(node_filter(Query::default(), Some("a.b".into()), true).is_err());
        assert!(node_filter(Query::default(), Some(String::new()), true).is_err());
        assert!(node_filter(Query::default(), Some("beta".into()), false).unwrap_err().contains("only a hub"));
        assert_eq!(node_filter(Query::default(), None, false).unwrap(), Query::default());
    }
}
