//! `GET /runs/events`: the change feed of every run as Server-Sent Events,
//! the same events `runs watch` prints (`runs::feed`), each with `id:` = its
//! event id, so a client that reconnects with `Last-Event-ID` (or
//! `?since=`) gets exactly what it missed, also across a server restart.
//! And `GET /runs/:runId/journal?offset=&length=`: the record a reference
//! event points to (an event is at most `MAX_EVENT` bytes; a bigger one
//! leaves its long fields in the journal).
//!
//! One thread per server follows the journals ([`Watcher`]), extends the feed
//! log, reads each new event once and frames it once ([`Frame`]), keeps the
//! recent frames in a bounded ring and wakes the connections ([`FeedHub`]).
//! Every connection at the live edge sends those shared frames (one copy of
//! an event however many watch); one that is behind the ring (a resume from
//! far back, or a slow client) reads the log on its own, a buffer at a time,
//! at its own pace, never holding the others.
//!
//! [`Watcher`]: crate::runs::feed::Watcher

pub use super::feed_hub::{event_frame, ready_frame, skipped_frame, FeedHub, Frame, Skip};
use super::http::{respond_error, Close, Progress, Request};
use super::state::Shared;
use super::stream::Stream;
use crate::runs::feed::{self, Cursor, Filter};
use std::io;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

/// How often an idle connection looks at its client, the clock and shutdown.
const TICK: Duration = Duration::from_millis(500);
/// The query's filters and resume point.
fn parse_query(req: &Request) -> Result<(Filter, Option<u64>), String> {
    query(req.query.as_deref().unwrap_or_default())
}

/// The filters and resume point of a `GET /runs/events` query string
/// (`run`, `status`, `repo`, `type`, `since`, `token`): the local feed's and
/// a hub's.
pub fn query(query: &str) -> Result<(Filter, Option<u64>), String> {
    let mut f = Filter::default();
    let mut since = None;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let v = String::from_utf8(super::http::percent_decode(v)).map_err(|_| format!("{k}: not UTF-8"))?;
        let list = || v.split(',').filter(|s| !s.is_empty()).map(str::to_string);
        match k {
            "run" => f.runs.extend(list()),
            "status" => f.statuses.extend(list()),
            "repo" => f.repos.extend(list()),
            "type" => f.types.extend(list()),
            "since" => since = Some(v.trim().parse::<u64>().map_err(|_| format!("since={v}: not an event id"))?),
            "token" => {}
            _ => return Err(format!("unknown query parameter {k:?} (run, status, repo, type, since)")),
        }
    }
    f.validate()?;
    Ok((f, since))
}

/// The route.
pub fn get(shared: &Shared, stream: &mut TcpStream, req: &Request, cors: &[(&'static str, String)]) -> Close {
    let (filter, query_since) = match parse_query(req) {
        Ok(q) => q,
        Err(m) => {
            respond_error(stream, 400, cors, &m);
            return Close::Linger;
        }
    };
    let since = match req.header("last-event-id") {
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                respond_error(stream, 400, cors, &format!("Last-Event-ID {v:?} is not an event id of this feed"));
                return Close::Linger;
            }
        },
        None => query_since,
    };
    let hub = match shared.feed() {
        Ok(h) => h,
        Err(e) => {
            let m = format!("the change feed is not available: {e}");
            crate::util::cli::report(super::options::BIN, &m);
            respond_error(stream, 503, cors, &m);
            return Close::Linger;
        }
    };
    // Without a resume point: from now (the log's end as this client arrives).
    let since = match since {
        Some(s) => s,
        None => feed::end(&hub.paths).max(hub.start_end),
    };
    if let Err(m) = feed::check_since(&hub.paths, since) {
        respond_error(stream, 400, cors, &m);
        return Close::Linger;
    }
    // The feed drops nothing: each pass is drained, so the queue holds one pass.
    let Ok(mut body) = Stream::start(stream, req, cors, usize::MAX, shared.cfg.write_timeout) else {
        return Close::Now;
    };
    if let Err(e) = pump(shared, &hub, &mut body, &filter, since) {
        // A log that became unreadable under a connection (replaced by a FIFO, say) is said; a client gone is not.
        if e.kind() == io::ErrorKind::Other {
            crate::util::cli::report(super::options::BIN, format!("feed: {}: {e}", hub.paths.log.display()));
        }
    }
    Close::Now
}

fn pump(shared: &Shared, hub: &FeedHub, body: &mut Stream, filter: &Filter, since: u64) -> io::Result<()> {
    let mut taken = Vec::new();
    // Reading back what the ring no longer (or never) held: from the log, a buffer at a time.
    let mut behind: Option<Cursor> = None;
    let mut pos = since;
    let mut ready = false;
    loop {
        let gen = hub.generation();
        taken.clear();
        let caught_up = match hub.take(pos, &mut taken) {
            Some(all) => {
                behind = None;
                if let Some(last) = taken.last() {
                    pos = last.id;
                }
                all
            }
            None => {
                let c = behind.get_or_insert_with(|| Cursor::new(&hub.paths, pos));
                let mut from = c.pos;
                let more = c.read_some(|id, line| {
                    hub.skipped(id, line);
                    let f = Frame::of(from, id, line);
                    from = id;
                    if f.passes(filter) {
                        body.push(&f.bytes);
                    }
                })?;
                pos = c.pos;
                !more
            }
        };
        // Shared frames go out by reference: one copy of an event for every client.
        for f in taken.iter().filter(|f| f.passes(filter)) {
            let len = f.bytes.len();
            body.push_shared(f.clone(), 0, len);
        }
        if !ready && caught_up {
            // Caught up: from here on, events as they happen. Its id is where
            // a reconnect resumes if nothing else comes (filtered out or quiet).
            ready = true;
            body.push(ready_frame(pos).as_bytes());
        }
        if shared.is_shutting_down() {
            return body.end();
        }
        body.drain()?;
        match body.heartbeat(shared.cfg.keepalive) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => return Ok(()),
            other => other?,
        }
        if caught_up {
            hub.wait(gen, TICK.min(shared.cfg.keepalive));
        }
    }
}

/// `GET /runs/:runId/journal?offset=&length=`: one whole record of the
/// run's journal (what a reference event's `ref` names), copied from the
/// file a buffer at a time: any number of readers, bounded memory.
pub fn record(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &[(&'static str, String)],
    id: &str,
) -> Close {
    match open_record(shared, req, id) {
        Ok((file, offset, length)) => {
            let _ = send_range(stream, cors, &file, offset, length, shared.cfg.write_timeout);
            Close::Linger
        }
        Err((code, m)) => {
            respond_error(stream, code, cors, &m);
            Close::Linger
        }
    }
}

/// The journal, opened safely, and the record's place, checked to be one whole line.
fn open_record(shared: &Shared, req: &Request, id: &str) -> Result<(std::fs::File, u64, u64), (u16, String)> {
    use crate::runs::safe;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;
    crate::runs::check_run_id("run", id).map_err(|m| (400, m))?;
    let (mut offset, mut length) = (None, None);
    for kv in req.query.as_deref().unwrap_or_default().split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let n = || v.parse::<u64>().map_err(|_| (400, format!("{k}={v}: not a byte count")));
        match k {
            "offset" => offset = Some(n()?),
            "length" => length = Some(n()?),
            "token" => {}
            _ => return Err((400, format!("unknown query parameter {k:?} (offset, length)"))),
        }
    }
    let (Some(offset), Some(length)) = (offset, length) else {
        return Err((400, "offset and length are required (an event's ref)".into()));
    };
    if length == 0 || length >= safe::MAX_JOURNAL {
        return Err((400, format!("length={length}: a record is 1 to {} bytes", safe::MAX_JOURNAL - 1)));
    }
    let p = crate::runs::registry::Registry::at(&shared.cfg.harness_home).read(id).map_err(|e| {
        if e.absent {
            (404, format!("no run {id:?}"))
        } else {
            (409, e.to_string())
        }
    })?;
    let files = crate::runs::RunFiles::new(&p.runstate_dir, &p.slug);
    let dir = safe::open_dir(&files.dir).map_err(|e| (409, format!("{}: {}", files.dir.display(), e.desc())))?;
    let (file, st) = safe::open_beneath(dir.as_fd(), Path::new(&format!("{}.jsonl", p.slug)))
        .map_err(|e| (if e.absent { 404 } else { 409 }, e.to_string()))?;
    let size = st.st_size.max(0) as u64;
    // One whole line: a newline (or the start) before it, a newline just past it.
    let byte = |at: u64| {
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, at).ok().map(|_| b[0])
    };
    let whole = offset.checked_add(length).is_some_and(|end| end < size)
        && (offset == 0 || byte(offset - 1) == Some(b'\n'))
        && byte(offset + length) == Some(b'\n');
    if !whole {
        return Err((
            409,
            format!(
                "offset={offset} length={length} is not a record of run {id}'s journal ({size} bytes; replaced since?)"
            ),
        ));
    }
    Ok((file, offset, length))
}

fn send_range(
    stream: &mut TcpStream,
    cors: &[(&'static str, String)],
    file: &std::fs::File,
    offset: u64,
    length: u64,
    limit: Duration,
) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut head = String::from("HTTP/1.1 200 OK\r\n");
    for (n, v) in cors {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"));
    stream.set_write_timeout(Some(Duration::from_millis(100)))?;
    let mut progress = Progress::new(limit);
    progress.write_all(stream, head.as_bytes())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = offset;
    let end = offset + length;
    while at < end {
        let want = ((end - at) as usize).min(buf.len());
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        progress.write_all(stream, &buf[..n])?;
        at += n as u64;
    }
    Ok(())
}
