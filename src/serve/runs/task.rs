//! The terms every part of a task stream shares: its pace, its framing and
//! resume point (`?format=`, `Last-Event-ID`), whether the task is over,
//! and its log opened the safe way. The routes (`serve/runs.rs`) and the
//! stream's parts (`follow`, `reader`, `live`) import them from here.

use crate::pipeline::events::Seq;
use crate::runs::journal::{is_terminal, Journal};
use crate::runs::view::Loaded;
use crate::serve::http::Request;
use std::time::Duration;

/// How often an idle stream looks at its client, the journal and the clock.
pub(super) const TICK: Duration = Duration::from_millis(100);
/// How often an idle stream of a live task re-reads a journal it could not
/// watch (one that does not exist yet) for the task's exit.
pub(super) const JOURNAL_EVERY: Duration = Duration::from_millis(250);

pub(super) type Cors<'a> = &'a [(&'static str, String)];

/// The query parameter `name`, percent-decoded (`?after=3%2F1` is `3/1`,
/// as a browser's URLSearchParams writes it).
pub(super) fn query_param(req: &Request, name: &str) -> Option<String> {
    let raw = req.query.as_deref()?.split('&').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?;
    Some(String::from_utf8_lossy(&crate::serve::http::percent_decode(raw)).into_owned())
}

/// A frame id of the AG-UI task stream, ordered as the frames are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AguiId {
    pub seq: Seq,
    pub k: u32,
}

impl AguiId {
    /// `SEQ/K`, or a bare `SEQ` (an events/v1 id: after every frame of that event).
    pub fn parse(s: &str) -> Option<AguiId> {
        match s.trim().split_once('/') {
            Some((seq, k)) => Some(AguiId { seq: Seq::parse(seq)?, k: k.parse().ok()? }),
            None => Some(AguiId { seq: Seq::parse(s)?, k: u32::MAX }),
        }
    }
}

/// The stream's framing (`?format=`: true for AG-UI) and resume point
/// (`Last-Event-ID` or `?after=`), or why the request is refused.
pub(super) fn framing_and_after(req: &Request) -> Result<(bool, Option<AguiId>), String> {
    let agui = match query_param(req, "format").as_deref() {
        None | Some("events") => false,
        Some("agui") => true,
        Some(f) => return Err(format!("format={f}: expected events or agui")),
    };
    let after_raw = req.header("last-event-id").map(str::to_string).or_else(|| query_param(req, "after"));
    let after = match after_raw.as_deref() {
        None => None,
        Some(a) if agui => match AguiId::parse(a) {
            Some(id) => Some(id),
            None => return Err(format!("{a:?} is not an AG-UI frame id of this stream (SEQ/K, or a seq)")),
        },
        // An events/v1 id: after every frame of that event.
        Some(a) => match Seq::parse(a) {
            Some(seq) => Some(AguiId { seq, k: u32::MAX }),
            None => return Err(format!("{a:?} is not a seq (LINE or LINE.K)")),
        },
    };
    Ok((agui, after))
}

/// Refuses a resume point past everything the task's log holds now (the
/// stream's ids are its lines' seqs): an id from another run or server, not
/// one a client of this stream was sent, is answered at once, as the
/// change feed answers a `since` past its log's end, never waited on. A
/// line still being written counts (its events may have been sent). `log`:
/// the task's log opened (`None`: none yet, so nothing was ever sent).
pub(super) fn check_after(log: Option<&std::fs::File>, after: Option<AguiId>) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let Some(want) = after.map(|a| a.seq.line).filter(|&l| l > 0) else { return Ok(()) };
    let mut lines = 0u64;
    if let Some(f) = log {
        let mut buf = vec![0u8; 64 * 1024];
        let (mut at, mut partial) = (0u64, false);
        while lines < want {
            let n = match f.read_at(&mut buf, at) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("the task's log cannot be read: {e}")),
            };
            lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
            partial = buf[n - 1] != b'\n';
            at += n as u64;
        }
        lines += u64::from(partial && lines < want);
    }
    if lines < want {
        let a = after.map(|a| if a.k == u32::MAX { a.seq.to_string() } else { format!("{}/{}", a.seq, a.k) });
        return Err(format!(
            "{} is not an event id of this stream (the task's log holds {lines} lines so far)",
            a.unwrap_or_default()
        ));
    }
    Ok(())
}

/// True once the journal says the task will write nothing more: its exit is
/// journaled (a terminal state) or the run itself finished or was aborted.
pub(super) fn task_over(journal_path: &std::path::Path, tid: &str) -> bool {
    let Ok(j) = Journal::read(journal_path) else { return false };
    j.state(tid).is_some_and(is_terminal)
        || matches!(j.last_run.as_ref().and_then(|r| r.run.as_deref()), Some("finished" | "aborted"))
}

/// Opens a task's log (a path inside the run's directory, from
/// [`Loaded::log_path`]) the safe way: a regular file beneath the run's
/// directory, never blocking. `Ok(None)` when it does not exist (yet).
pub(super) fn open_log(
    l: &Loaded,
    log: &std::path::Path,
) -> Result<Option<std::fs::File>, crate::runs::safe::Unreadable> {
    let (Some(dir), Ok(rel)) = (l.dir.as_ref(), log.strip_prefix(&l.files.dir)) else { return Ok(None) };
    match crate::runs::safe::open_beneath(std::os::fd::AsFd::as_fd(dir), rel) {
        Ok((f, _)) => Ok(Some(f)),
        Err(e) if e.absent => Ok(None),
        Err(e) => Err(e),
    }
}
