//! `GET /runs/events`: the change feed of every run as Server-Sent Events,
//! the same events `runs watch` prints (`runs::feed`), each with `id:` = its
//! event id, so a client that reconnects with `Last-Event-ID` (or
//! `?since=`) gets exactly what it missed, also across a server restart.
//!
//! One thread per server follows the journals ([`Watcher`]), extends the feed
//! log and wakes the connections ([`FeedHub`]); each connection reads the log
//! from its own position, at its own pace (a slow client only falls behind
//! in the file: nothing is buffered for it).
//!
//! [`Watcher`]: crate::runs::feed::Watcher

use super::http::{respond_error, Close, Progress, Request};
use super::Shared;
use crate::runs::feed::{self, Cursor, Extender, Filter, Paths, Scope, Watcher};
use std::io::{self, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often an idle connection looks at its client, the clock and shutdown.
const TICK: Duration = Duration::from_millis(500);

/// The server's feed follower: the log's generation, bumped on every growth.
pub struct FeedHub {
    gen: Mutex<u64>,
    cv: Condvar,
    paths: Paths,
    /// The log's length once the follower had caught up at start.
    start_end: u64,
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
        let hub = Arc::new(FeedHub { gen: Mutex::new(0), cv: Condvar::new(), paths: x.paths().clone(), start_end });
        let h = hub.clone();
        // Connections are woken only when the log grew (a busy task log in a
        // watched directory wakes this thread, not them).
        let mut end = start_end;
        std::thread::Builder::new().name("feed".into()).spawn(move || loop {
            let ch = match watcher.wait(None) {
                Ok(ch) => ch,
                Err(e) => {
                    crate::cli::report(super::BIN, format!("feed: {e}; the change feed stopped"));
                    return;
                }
            };
            let extended = if ch.all {
                x.extend(Scope::All)
            } else if !ch.runs.is_empty() {
                x.extend(Scope::Runs(&ch.runs))
            } else {
                Ok(end)
            };
            // Another writer's append (a `runs watch`) shows as the log's growth.
            let extended = extended.map(|e| if ch.feed { e.max(feed::end(&h.paths)) } else { e });
            match extended {
                Ok(e) if e != end => {
                    end = e;
                    h.bump();
                }
                Ok(_) => {}
                Err(e) => crate::cli::report(super::BIN, format!("feed: {}: {e}", x.paths().log.display())),
            }
        })?;
        Ok(hub)
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
    let mut f = Filter::default();
    let mut since = None;
    for kv in req.query.as_deref().unwrap_or_default().split('&').filter(|kv| !kv.is_empty()) {
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
            respond_error(stream, 503, cors, &format!("the change feed is not available: {e}"));
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
    let head = super::http::sse_head(req, cors);
    if stream.write_all(head.as_bytes()).is_err() {
        return Close::Now;
    }
    let _ = pump(shared, &hub, stream, req.http11, &filter, Cursor::new(&hub.paths, since));
    Close::Now
}

/// Queues one SSE frame (as one chunk on HTTP/1.1).
fn push(out: &mut Vec<u8>, chunked: bool, frame: &[u8]) {
    if chunked {
        out.extend_from_slice(format!("{:x}\r\n", frame.len()).as_bytes());
    }
    out.extend_from_slice(frame);
    if chunked {
        out.extend_from_slice(b"\r\n");
    }
}

fn client_gone(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let gone = super::http::client_gone(stream);
    gone || stream.set_nonblocking(false).is_err()
}

fn pump(
    shared: &Shared,
    hub: &FeedHub,
    stream: &mut TcpStream,
    chunked: bool,
    filter: &Filter,
    mut cursor: Cursor,
) -> io::Result<()> {
    let mut out = Vec::new();
    // Writes wake every 100 ms; a client that takes nothing for the write timeout is let go.
    stream.set_write_timeout(Some(Duration::from_millis(100)))?;
    let mut progress = Progress::new(shared.cfg.write_timeout);
    let mut ready = false;
    let mut last_write = Instant::now();
    let mut last_peek = Instant::now();
    loop {
        let gen = hub.generation();
        cursor.read(|id, line| {
            if filter.matches(line) {
                let json = feed::with_id(line, id);
                let frame = crate::sse::frame(None, Some(&id.to_string()), &String::from_utf8_lossy(&json));
                push(&mut out, chunked, frame.as_bytes());
            }
        })?;
        if !ready {
            // Caught up: from here on, events as they happen. Its id is where
            // a reconnect resumes if nothing else comes (filtered out or quiet).
            ready = true;
            let id = cursor.pos.to_string();
            let frame = crate::sse::frame(Some("ready"), Some(&id), &format!("{{\"type\":\"ready\",\"id\":{id}}}"));
            push(&mut out, chunked, frame.as_bytes());
        }
        if shared.is_shutting_down() {
            if chunked {
                push(&mut out, true, b"");
            }
            return progress.write_all(stream, &out);
        }
        if out.is_empty() && last_write.elapsed() >= shared.cfg.keepalive {
            push(&mut out, chunked, b": keep-alive\n\n");
        }
        if !out.is_empty() {
            progress.write_all(stream, &out)?;
            out.clear();
            last_write = Instant::now();
        }
        if last_peek.elapsed() >= TICK {
            last_peek = Instant::now();
            if client_gone(stream) {
                return Ok(());
            }
            progress.check(stream, false)?;
        }
        hub.wait(gen, TICK.min(shared.cfg.keepalive));
    }
}
