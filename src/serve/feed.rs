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

use super::http::{respond_error, Close, Progress, Request};
use super::state::Shared;
use super::stream::Stream;
use crate::runs::feed::{self, Cursor, Extender, Filter, Line, Paths, Scope, Watcher};
use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::net::TcpStream;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

/// How often an idle connection looks at its client, the clock and shutdown.
const TICK: Duration = Duration::from_millis(500);
/// Most bytes of recent frames the hub keeps for the connections (at least one frame).
const RING_BYTES: usize = 4 * 1024 * 1024;
/// Most bytes of frames a connection takes from the ring at once (at least
/// one frame): what a blocked connection keeps alive past the ring is bounded.
const TAKE_BYTES: usize = 256 * 1024;
/// Most skipped lines remembered as already reported.
const MAX_REPORTED: usize = 1024;

/// One line of the log as every connection sends it: framed once.
pub struct Frame {
    /// Where its line starts in the log (the id before it).
    from: u64,
    id: u64,
    /// The SSE frame.
    bytes: Box<[u8]>,
    /// The event (`{"id":N,…}`) within `bytes`, for filters; `None` for a
    /// skipped line, which every client is told of (its id moves theirs on).
    json: Option<Range<usize>>,
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Frame {
    fn of(from: u64, id: u64, line: Line) -> Frame {
        let sid = id.to_string();
        match line {
            Line::Event(line) => {
                let json = feed::with_id(line, id);
                let f = event_frame(id, &String::from_utf8_lossy(&json));
                // `id: N\ndata: {json}\n\n`
                let range = "id: ".len() + sid.len() + "\ndata: ".len()..f.len() - "\n\n".len();
                Frame { from, id, json: Some(range), bytes: f.into_bytes().into_boxed_slice() }
            }
            Line::TooLong(len) => {
                let m = format!(
                    "a line of {len} bytes, over the {} KiB an event takes, was skipped",
                    feed::MAX_EVENT / 1024
                );
                let f = skipped_frame(id, from, len, Skip::LineTooLong, &m);
                Frame { from, id, json: None, bytes: f.into_bytes().into_boxed_slice() }
            }
        }
    }

    fn passes(&self, filter: &Filter) -> bool {
        self.json.as_ref().is_none_or(|r| filter.matches(&self.bytes[r.clone()]))
    }
}

/// The recent frames, in log order: `start` is the id before the first.
struct Ring {
    start: u64,
    frames: VecDeque<Arc<Frame>>,
    bytes: usize,
}

impl Ring {
    fn push(&mut self, f: Frame) {
        self.bytes += f.bytes.len();
        self.frames.push_back(Arc::new(f));
        while self.bytes > RING_BYTES && self.frames.len() > 1 {
            if let Some(old) = self.frames.pop_front() {
                self.bytes -= old.bytes.len();
                self.start = old.id;
            }
        }
    }
}

/// The server's feed follower: the shared frames and their generation,
/// bumped on every growth.
pub struct FeedHub {
    gen: Mutex<u64>,
    cv: Condvar,
    paths: Paths,
    /// The log's length once the follower had caught up at start.
    start_end: u64,
    /// Read by every connection at each wake-up, written by the one follower.
    ring: RwLock<Ring>,
    /// Skipped lines already reported on stderr (each is said once).
    reported: Mutex<BTreeSet<u64>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FeedHub {
    /// Catches the feed up with every journal, then follows them on a thread.
    pub fn start(home: &Path) -> io::Result<Arc<FeedHub>> {
        let mut watcher = Watcher::new(home)?;
        let mut x = Extender::new(home);
        let start_end = x.extend(Scope::All)?;
        let hub = Arc::new(FeedHub {
            gen: Mutex::new(0),
            cv: Condvar::new(),
            paths: x.paths().clone(),
            start_end,
            ring: RwLock::new(Ring { start: start_end, frames: VecDeque::new(), bytes: 0 }),
            reported: Mutex::new(BTreeSet::new()),
        });
        hub.report_extender(&mut x);
        let h = hub.clone();
        let mut reader = Cursor::new(&hub.paths, start_end);
        // Connections are woken only when the log grew (a busy task log in a
        // watched directory wakes this thread, not them).
        std::thread::Builder::new().name("feed".into()).spawn(move || loop {
            let ch = match watcher.wait(None) {
                Ok(ch) => ch,
                Err(e) => {
                    crate::util::cli::report(super::options::BIN, format!("feed: {e}; the change feed stopped"));
                    return;
                }
            };
            let extended = if ch.all {
                x.extend(Scope::All).map(drop)
            } else if !ch.runs.is_empty() {
                x.extend(Scope::Runs(&ch.runs)).map(drop)
            } else {
                Ok(())
            };
            if let Err(e) = extended {
                crate::util::cli::report(super::options::BIN, format!("feed: {}: {e}", x.paths().log.display()));
            }
            h.report_extender(&mut x);
            // What this process appended, and any other writer's (a `runs watch`).
            if let Err(e) = h.read_new(&mut reader) {
                crate::util::cli::report(super::options::BIN, format!("feed: {}: {e}", h.paths.log.display()));
            }
        })?;
        Ok(hub)
    }

    fn report_extender(&self, x: &mut Extender) {
        for r in x.take_reports() {
            crate::util::cli::report(super::options::BIN, format!("feed: {r}"));
        }
    }

    /// Frames every new line once, into the ring, waking the connections
    /// after each buffer's worth.
    fn read_new(&self, reader: &mut Cursor) -> io::Result<()> {
        loop {
            let mut from = reader.pos;
            let mut frames = Vec::new();
            let more = reader.read_some(|id, line| {
                self.skipped(id, line);
                frames.push(Frame::of(from, id, line));
                from = id;
            })?;
            if !frames.is_empty() {
                let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
                for f in frames {
                    ring.push(f);
                }
                drop(ring);
                self.bump();
            }
            if !more {
                return Ok(());
            }
        }
    }

    /// Reports a skipped line on stderr, once per line.
    fn skipped(&self, id: u64, line: Line) {
        let Line::TooLong(len) = line else { return };
        let mut seen = lock(&self.reported);
        if seen.len() >= MAX_REPORTED {
            seen.clear();
        }
        if seen.insert(id) {
            crate::util::cli::report(super::options::BIN, feed::too_long(&self.paths.log, id, len));
        }
    }

    /// The shared frames from `pos` on (about [`TAKE_BYTES`]): `None` when
    /// `pos` is before the ring (read the log instead), else whether they
    /// reach its end.
    fn take(&self, pos: u64, into: &mut Vec<Arc<Frame>>) -> Option<bool> {
        let ring = self.ring.read().unwrap_or_else(|e| e.into_inner());
        if pos < ring.start {
            return None;
        }
        let mut bytes = 0;
        for f in ring.frames.range(ring.frames.partition_point(|f| f.from < pos)..) {
            if bytes >= TAKE_BYTES {
                return Some(false);
            }
            bytes += f.bytes.len();
            into.push(f.clone());
        }
        Some(true)
    }

    fn bump(&self) {
        *lock(&self.gen) += 1;
        self.cv.notify_all();
    }

    fn generation(&self) -> u64 {
        *lock(&self.gen)
    }

    fn wait(&self, seen: u64, timeout: Duration) {
        let g = lock(&self.gen);
        if *g == seen {
            let _ = self.cv.wait_timeout_while(g, timeout, |g| *g == seen);
        }
    }
}

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

// The feed's frames, one vocabulary for the local feed and a hub's
// (runwire-cluster's fan-out uses these): an event, `ready` once a client
// has caught up, `skipped` for a line that is not an event.

/// An event's frame, `id: ID\ndata: JSON\n\n` (`json` one line, its `id` first).
pub fn event_frame(id: u64, json: &str) -> String {
    crate::pipeline::encode::frame(None, Some(&id.to_string()), json)
}

/// `event: ready`: the client has caught up; `id` is where a reconnect
/// resumes if nothing else comes (filtered out or quiet).
pub fn ready_frame(id: u64) -> String {
    crate::pipeline::encode::frame(Some("ready"), Some(&id.to_string()), &format!("{{\"type\":\"ready\",\"id\":{id}}}"))
}

/// Why a line of the feed was skipped (`error` of a `skipped` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Over the bytes an event takes ([`feed::MAX_EVENT`]).
    LineTooLong,
    /// Not a feed event (a hub: a message of its stream that is not one).
    NotAnEvent,
}

/// `event: skipped`: the line from `from` to `id` (`size` bytes) is not
/// sent; every client is told (its id moves theirs on).
pub fn skipped_frame(id: u64, from: u64, size: u64, why: Skip, message: &str) -> String {
    let error = match why {
        Skip::LineTooLong => "line_too_long",
        Skip::NotAnEvent => "not_an_event",
    };
    let data = serde_json::json!({
        "type": "skipped", "id": id, "from": from, "size": size, "error": error, "message": message,
    });
    crate::pipeline::encode::frame(Some("skipped"), Some(&id.to_string()), &data.to_string())
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
    crate::runs::check_id("run", id).map_err(|m| (400, m))?;
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
