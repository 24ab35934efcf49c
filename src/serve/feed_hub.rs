//! The change feed's follower for the server ([`FeedHub`]: one thread
//! extends the feed log, frames each new event once and keeps the recent
//! frames in a bounded ring) and the feed's frames. A leaf: the server's
//! state holds the hub, `feed.rs`'s routes stream from it.

use crate::runs::feed::{self, Cursor, Extender, Filter, Line, Paths, Scope, Watcher};
use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

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
    pub(super) id: u64,
    /// The SSE frame.
    pub(super) bytes: Box<[u8]>,
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
    pub(super) fn of(from: u64, id: u64, line: Line) -> Frame {
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

    pub(super) fn passes(&self, filter: &Filter) -> bool {
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
    pub(super) paths: Paths,
    /// The log's length once the follower had caught up at start.
    pub(super) start_end: u64,
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
    pub(super) fn skipped(&self, id: u64, line: Line) {
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
    pub(super) fn take(&self, pos: u64, into: &mut Vec<Arc<Frame>>) -> Option<bool> {
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

    pub(super) fn generation(&self) -> u64 {
        *lock(&self.gen)
    }

    pub(super) fn wait(&self, seen: u64, timeout: Duration) {
        let g = lock(&self.gen);
        if *g == seen {
            let _ = self.cv.wait_timeout_while(g, timeout, |g| *g == seen);
        }
    }
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
