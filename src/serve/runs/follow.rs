//! One reader and one normalizer per task stream, however many watch.
//!
//! The first client of a task's log (in one format) makes its [`Tap`]: the
//! log's reader, normalizer and framing, and a ring of the frames they made,
//! in batches shared by every client ([`Arc`]). Each client only copies
//! batches to its socket (by reference: `writev` from the shared text) and
//! keeps its own place in the ring and its own resume point. There is no
//! reader thread: the client that has sent everything made so far and
//! wants more makes the next batch (the others wait for it, never on it:
//! the maker's lock is only tried), so the log is read at the pace of the
//! fastest client.
//!
//! The ring keeps [`Tap::retain`] bytes. The reader does not drop the
//! oldest batch while a client still taking frames (within [`ACTIVE`]) has
//! not taken it: the spread of clients reading at one pace (their kernel
//! buffers differ by megabytes) costs nothing. A client that took nothing
//! for [`ACTIVE`] is not waited for: it, or one joining when the start is
//! gone, catches up from the log with a reader and normalizer of its own,
//! and rejoins the ring once it reached what the ring holds. The stream's
//! first batch is kept apart ([`Ring::opening`]): a client joining a live
//! task gets its first frames from memory at once, and catches up after them. A client that
//! takes nothing stays where it is until the write timeout lets it go.
//! Frames of one batch that do not fit a client's queue (a batch larger
//! than its bound) are dropped and named in one `error` event, as before.
//!
//! The viewers of an interactive thread are served here too: the thread's
//! session is streamed by one AG-UI run at a time (`serve::interactive`; a
//! second at once is refused `busy`), and everyone else watches the
//! session's recorded run through its task stream, so they share one reader
//! and normalizer (and translator, for `?format=agui`) per framing, however
//! many they are. A client holds no descriptor of the log of its own unless
//! it catches up from it.

use super::reader::{Batch, Reader, Source, Step, Tail, READ};
use super::resolved::Resolved;
use super::task::{AguiId, JOURNAL_EVERY, TICK};
use crate::pipeline::events::{Data, ErrorData, Event, Seq};
use crate::pipeline::translate::{AguiEvent, CustomValue, ErrorValue};
use crate::serve::state::Shared;
use crate::serve::stream::Stream;
use crate::util::watch::Sub;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// A client that took or wrote nothing for this long is not waited for.
const ACTIVE: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared frames of a task stream (see the module's doc).
pub(super) struct Tap {
    ring: Mutex<Ring>,
    /// Signalled when frames are added or the stream ends.
    cv: Condvar,
    /// The one reader; tried (never waited on) by a client that wants more.
    reader: Mutex<Option<Reader>>,
    /// The bytes of frames the ring keeps for clients behind the fastest.
    retain: usize,
    /// What its first client resolved from the run's files, for the next
    /// ones ([`super::live`]).
    resolved: Mutex<Option<Arc<Resolved>>>,
}

/// An empty ring is its default: the one way it is made.
#[derive(Default)]
struct Ring {
    batches: VecDeque<Arc<Batch>>,
    /// The number of batches ever dropped from the front.
    first: u64,
    bytes: usize,
    /// The last frame id dropped from the front.
    evicted_through: Option<AguiId>,
    /// The stream's first batch, kept for the tap's life though the ring
    /// drops it: every new client starts there, so its first frames are
    /// sent from memory at once, never after a reader of its own has
    /// opened the log and normalized its start (it catches up from the
    /// log after them). One batch: what the reader's first, small piece made.
    opening: Option<Arc<Batch>>,
    ended: bool,
    /// Each client reading the ring: the batch it takes next, and when it
    /// last took or wrote anything.
    places: HashMap<u64, (u64, Instant)>,
    next_client: u64,
}

impl Ring {
    fn head(&self) -> u64 {
        self.first + self.batches.len() as u64
    }

    /// The stream's opening frames for a client that has everything through
    /// `after` and finds the ring no longer holds what follows: the first
    /// batch, when some of it is past `after`.
    fn opening_for(&self, after: Option<AguiId>) -> Option<Arc<Batch>> {
        self.opening.as_ref().filter(|b| after < b.last_id()).cloned()
    }

    /// Where a client that has everything through `after` reads on, when the
    /// ring still holds all that follows.
    fn place_after(&self, after: Option<AguiId>) -> Option<u64> {
        match (self.evicted_through, after) {
            (None, _) => {}
            (Some(e), Some(a)) if e <= a => {}
            _ => return None,
        }
        let i = self.batches.partition_point(|b| match (b.last_id(), after) {
            (Some(last), Some(a)) => last <= a,
            (None, _) => true,
            (Some(_), None) => false,
        });
        Some(self.first + i as u64)
    }
}

type Key = (u64, u64, String, String, &'static str, bool);

/// The taps of all task streams in this process, by log file and framing.
static TAPS: Mutex<Option<HashMap<Key, Weak<Tap>>>> = Mutex::new(None);

impl Tap {
    /// The tap of `src`'s log (as `file` is: the same inode), made if none is open.
    fn get(src: &Source, file: &File, retain: usize) -> Option<Arc<Tap>> {
        let (dev, ino) = file_id(file)?;
        let key: Key = (dev, ino, src.run.into(), src.task.into(), src.adapter.name(), src.agui);
        let mut taps = lock(&TAPS);
        let taps = taps.get_or_insert_with(HashMap::new);
        if let Some(t) = taps.get(&key).and_then(Weak::upgrade) {
            return Some(t);
        }
        taps.retain(|_, w| w.strong_count() > 0);
        let reader = Reader::open(src, None)?;
        let tap = Arc::new(Tap {
            ring: Mutex::new(Ring::default()),
            cv: Condvar::new(),
            reader: Mutex::new(Some(reader)),
            retain,
            resolved: Mutex::new(None),
        });
        taps.insert(key, Arc::downgrade(&tap));
        Some(tap)
    }

    pub(super) fn resolved(&self) -> Option<Arc<Resolved>> {
        lock(&self.resolved).clone()
    }

    pub(super) fn set_resolved(&self, r: Arc<Resolved>) {
        *lock(&self.resolved) = Some(r);
    }

    /// Adds a batch (and the end), keeping the ring within its bound.
    fn add(&self, b: Batch, ended: bool) {
        let mut r = lock(&self.ring);
        if !b.frames.is_empty() {
            r.bytes += b.text.len();
            let b = Arc::new(b);
            if r.first == 0 && r.batches.is_empty() {
                r.opening.get_or_insert_with(|| b.clone());
            }
            r.batches.push_back(b);
        }
        r.ended |= ended;
        while r.bytes > self.retain && r.batches.len() > 1 {
            if let Some(old) = r.batches.pop_front() {
                r.bytes -= old.text.len();
                r.first += 1;
                r.evicted_through = old.last_id().or(r.evicted_through);
            }
        }
        drop(r);
        self.cv.notify_all();
    }

    /// Makes the next batch when no one else is; false when the log has
    /// nothing new (or another client is reading it).
    fn read_on(&self, journal_gen: Option<u64>, finish: bool) -> io::Result<bool> {
        let Ok(mut reader) = self.reader.try_lock() else { return Ok(false) };
        let Some(r) = reader.as_mut() else { return Ok(false) };
        let step = if finish { r.end() } else { r.step(journal_gen)? };
        match step {
            Step::Made(b) => self.add(b, false),
            Step::Ended(b) => {
                self.add(b, true);
                *reader = None;
            }
            Step::Idle => return Ok(false),
        }
        Ok(true)
    }

    /// True when reading on would drop a batch that a client still taking
    /// its frames (within [`ACTIVE`]) has not taken yet: the reader waits
    /// for it, a little. A client that takes nothing for [`ACTIVE`] is not
    /// waited for (it catches up from the log when it comes back).
    fn held(&self) -> bool {
        let r = lock(&self.ring);
        r.bytes + READ > self.retain && r.places.values().any(|&(c, active)| c <= r.first && active.elapsed() < ACTIVE)
    }

    fn wait(&self, head: u64, timeout: Duration) {
        let r = lock(&self.ring);
        let _ = self.cv.wait_timeout_while(r, timeout, |r| r.head() == head && !r.ended);
    }
}

/// A task stream's response: the HTTP layer's [`Stream`], plus what a
/// client that falls too far behind misses.
pub(super) struct Out<'a> {
    body: Stream<'a>,
    /// Seqs dropped since the last `error` event: (first, last).
    dropped: Option<(Seq, Seq)>,
}

impl<'a> std::ops::Deref for Out<'a> {
    type Target = Stream<'a>;
    fn deref(&self) -> &Stream<'a> {
        &self.body
    }
}

impl std::ops::DerefMut for Out<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.body
    }
}

impl<'a> Out<'a> {
    pub fn new(body: Stream<'a>) -> Out<'a> {
        Out { body, dropped: None }
    }

    /// Queues the frames of `b` past `after` as far as the queue has room,
    /// and drops the rest (remembering their seqs).
    fn push_batch(&mut self, b: &Arc<Batch>, after: Option<AguiId>) {
        let i = b.first_after(after);
        let from = b.start_of(i);
        let mut k = i;
        // An empty queue takes any frame, so one event larger than the
        // bound (a huge tool result) is late, never lost.
        while k < b.frames.len() && self.dropped.is_none() {
            let empty = self.queued() == 0 && k == i;
            if !empty && self.queued() + (b.frames[k].2 - from) > self.cap {
                break;
            }
            k += 1;
        }
        if k > i {
            let to = b.start_of(k);
            self.body.push_shared(b.clone(), from, to);
        }
        if k < b.frames.len() {
            let (first, last) = (b.frames[k].1, b.frames[b.frames.len() - 1].1);
            self.dropped = Some(match self.dropped {
                Some((f, _)) => (f, last),
                None => (first, last),
            });
        }
    }
}

/// One client's side: what it has sent, and what it names a drop with.
struct Client<'a> {
    src: &'a Source<'a>,
    /// Frames through this id are not sent: the resume point, then the
    /// last frame handed on (sent, queued or dropped).
    after: Option<AguiId>,
    session: Option<String>,
}

impl Client<'_> {
    fn send(&mut self, out: &mut Out, b: &Arc<Batch>) {
        if b.session.is_some() {
            self.session.clone_from(&b.session);
        }
        out.push_batch(b, self.after);
        self.after = self.after.max(b.last_id());
    }

    /// The one `error` event naming what a slow client missed, once the
    /// queue has room again. Not framed with an `id:`.
    fn report_drop(&self, out: &mut Out, at_end: bool) {
        let Some((first, last)) = out.dropped else { return };
        if out.queued() > out.cap / 2 && !at_end {
            return;
        }
        out.dropped = None;
        let reason = format!(
            "the client read too slowly: events {first} to {last} were dropped; reconnect with Last-Event-ID to get them"
        );
        let (code, raw) = ("dropped".to_string(), format!("{first}..{last}"));
        let ts_ms = crate::util::time::Clock::from_env().now_ms();
        let frame = if self.src.agui {
            // Not through the translator: the notice must not change its
            // state (closing open messages), or a resumed re-translation,
            // which never sees it, would frame the rest differently.
            let value = CustomValue::Error(ErrorValue { reason, code, raw });
            let ev = AguiEvent::Custom { name: "runwire.error", value, subagent_run_id: None, timestamp: Some(ts_ms) };
            crate::pipeline::encode::frame(None, None, &ev.to_json())
        } else {
            let ev = Event {
                run: Some(self.src.run.to_string()),
                task: Some(self.src.task.to_string()),
                session: self.session.clone(),
                seq: first,
                ts_ms,
                data: Data::Error(ErrorData { reason, code, raw, fatal: false }),
            };
            crate::pipeline::encode::frame(Some("error"), None, &ev.to_json())
        };
        out.push(frame.as_bytes());
    }

    /// Ends the stream: the report of anything dropped, then the end.
    fn end(&self, out: &mut Out) -> io::Result<()> {
        self.report_drop(out, true);
        out.end()
    }
}

/// The watches a client waits on.
pub(super) struct Watches<'a> {
    pub log: &'a Sub,
    pub journal: Option<&'a Sub>,
}

/// What a tap's ring keeps: 8 client buffers (`RUNWIRE_STREAM_RETAIN`
/// bytes overrides it, for tests of clients that fall behind).
fn retain(stream_buffer: usize) -> usize {
    static RETAIN: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let set = RETAIN.get_or_init(|| std::env::var("RUNWIRE_STREAM_RETAIN").ok().and_then(|v| v.trim().parse().ok()));
    set.unwrap_or(stream_buffer.saturating_mul(8))
}

/// The tap of `src`'s log, open as `file` (`None`: it went away meanwhile).
/// The tap's reader reads the log for every client: a client holds no
/// descriptor of it (one that falls behind opens its own while it catches up).
pub(super) fn join(shared: &Shared, src: &Source, file: File) -> Option<Arc<Tap>> {
    Tap::get(src, &file, retain(shared.cfg.stream_buffer))
}

/// The log's identity as a tap knows it: (device, inode).
pub(super) fn file_id(file: &File) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// Serves a task stream from `tap` (its log's, from [`join`]), from its
/// start (frames through `after` are not sent) to the task's end.
pub(super) fn serve(
    shared: &Shared,
    out: &mut Out,
    src: &Source,
    tap: Option<Arc<Tap>>,
    w: &Watches,
    after: Option<AguiId>,
) -> io::Result<()> {
    let mut client = Client { src, after, session: None };
    let Some(tap) = tap else {
        // The log went away between opening and now: an empty stream, ended.
        return client.end(out);
    };
    let (mut cursor, me, opening) = {
        let mut r = lock(&tap.ring);
        let me = r.next_client;
        r.next_client += 1;
        let place = r.place_after(client.after);
        let opening = if place.is_none() { r.opening_for(client.after) } else { None };
        (place, me, opening)
    };
    // Nothing sent yet: the first write carries one batch alone, so the
    // client's first frames are not behind a socket's worth of the rest.
    let mut first = opening.is_none();
    let mut yielded = false;
    if let Some(b) = opening {
        // The ring has moved on: the stream's start from memory first, then
        // the ring (if it still holds what follows) or the log.
        client.send(out, &b);
        out.flush()?;
        yield_once(&mut yielded, true);
        cursor = lock(&tap.ring).place_after(client.after);
    }
    // Its place is given up when it leaves, however it leaves.
    struct Leave<'a>(&'a Tap, u64);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            lock(&self.0.ring).places.remove(&self.1);
            self.0.cv.notify_all();
        }
    }
    let _leave = Leave(&tap, me);
    // A reader of its own, kept once made: a client that falls behind again
    // reads on from where it left the log, not from its start.
    let mut own = None;
    loop {
        let at = match cursor {
            Some(c) => c,
            None => {
                // Not waited for while it reads the log itself.
                lock(&tap.ring).places.remove(&me);
                match catch_up(shared, out, &mut client, &tap, w, &mut own, &mut yielded)? {
                    Some(c) => c,
                    None => return Ok(()),
                }
            }
        };
        cursor = Some(at);
        // Take what the ring holds for us, as far as our queue has room.
        let mut take = Vec::new();
        let (head, ended, fell_off) = {
            let mut r = lock(&tap.ring);
            if at < r.first {
                (r.head(), r.ended, true)
            } else {
                let mut c = at;
                let mut queued = out.queued();
                while c < r.head() {
                    let b = &r.batches[(c - r.first) as usize];
                    if !(queued == 0 || queued + b.text.len() <= out.cap) {
                        break;
                    }
                    queued += b.text.len();
                    take.push(b.clone());
                    c += 1;
                    if std::mem::take(&mut first) {
                        break;
                    }
                }
                cursor = Some(c);
                let was = r.places.get(&me).map_or(Instant::now(), |p| p.1);
                let active = if take.is_empty() { was.max(Instant::now() - out.idle_for()) } else { Instant::now() };
                let front = r.first;
                r.places.insert(me, (c, active));
                if at <= front && c > front {
                    // The reader may be waiting for this client to take the oldest batch.
                    tap.cv.notify_all();
                }
                (r.head(), r.ended, false)
            }
        };
        if fell_off {
            cursor = None;
            continue;
        }
        for b in &take {
            client.send(out, b);
        }
        client.report_drop(out, false);
        out.flush()?;
        yield_once(&mut yielded, !take.is_empty());
        out.heartbeat(shared.cfg.keepalive)?;
        let c = cursor.unwrap_or(head);
        if shared.is_shutting_down() {
            // Everyone is leaving: the translator's last frames, once, for all.
            while tap.read_on(None, true)? {}
            drain_ring(out, &mut client, &tap, c);
            return client.end(out);
        }
        if c < head {
            // The next batch waits for room: until the socket takes more.
            if take.is_empty() || !out.has_room() {
                out.wait_writable(Duration::from_millis(20));
            }
            continue;
        }
        if ended {
            return client.end(out);
        }
        if !out.has_room() {
            out.wait_writable(Duration::from_millis(20));
            continue;
        }
        // At the head: read on ourselves (unless that would leave a client
        // still taking its frames behind), or wait for whoever is reading.
        if tap.held() {
            // Woken when a client takes the oldest batch (or leaves).
            let r = lock(&tap.ring);
            let _ = tap.cv.wait_timeout(r, Duration::from_millis(20));
            continue;
        }
        let gen = w.log.generation();
        if !tap.read_on(w.journal.map(|j| j.generation()), false)? {
            if tap.reader.try_lock().is_ok() {
                // Nothing new in the log: wait for it to change (or a tick, for the journal).
                w.log.wait(gen, TICK.min(JOURNAL_EVERY));
            } else {
                tap.wait(head, TICK);
            }
        }
    }
}

/// Once the client's first frames are written (`sent`), yields the CPU,
/// once: the client they woke may be waiting for it (a local client on a
/// small machine), and the catch-up that follows is bulk work. Measured:
/// a new client of a live task's first frame 0.59 -> 0.51 ms, now what a
/// one-line task's costs (docs/PERFORMANCE.md, issue 24).
fn yield_once(yielded: &mut bool, sent: bool) {
    if sent && !std::mem::replace(yielded, true) {
        std::thread::yield_now();
    }
}

/// Sends whatever the ring holds past `c` (the stream's last frames at a shutdown).
fn drain_ring(out: &mut Out, client: &mut Client, tap: &Tap, c: u64) {
    let r = lock(&tap.ring);
    let take: Vec<Arc<Batch>> = r.batches.iter().skip(c.saturating_sub(r.first) as usize).cloned().collect();
    drop(r);
    for b in &take {
        client.send(out, b);
    }
}

/// Catches up from the log with a reader of its own, until what it sent
/// reaches what the ring holds: `Some(place)` there, `None` when the
/// stream ended meanwhile.
fn catch_up(
    shared: &Shared,
    out: &mut Out,
    client: &mut Client,
    tap: &Tap,
    w: &Watches,
    own: &mut Option<Reader>,
    yielded: &mut bool,
) -> io::Result<Option<u64>> {
    if own.is_none() {
        *own = Reader::open(client.src, client.after);
    }
    let Some(reader) = own.as_mut() else {
        client.end(out)?;
        return Ok(None);
    };
    // It is behind what the client was sent: those frames are not made again.
    reader.tail.skip_through = reader.tail.skip_through.max(client.after);
    loop {
        if out.queued() > out.cap / 2 {
            // Read on only as the client takes it (a batch is sized for half the queue).
            out.wait_writable(Duration::from_millis(20));
            out.flush()?;
            out.heartbeat(shared.cfg.keepalive)?;
            continue;
        }
        let gen = w.log.generation();
        let step = reader.step(w.journal.map(|j| j.generation()))?;
        let (b, ended, idle) = match step {
            Step::Made(b) => (b, false, false),
            Step::Ended(b) => (b, true, false),
            Step::Idle => (Batch::new(), false, true),
        };
        let b = Arc::new(b);
        client.send(out, &b);
        client.report_drop(out, ended);
        out.flush()?;
        yield_once(yielded, !b.text.is_empty());
        out.heartbeat(shared.cfg.keepalive)?;
        if ended || shared.is_shutting_down() {
            client.end(out)?;
            return Ok(None);
        }
        // What this reader sent (or skipped) is through `last`: the ring takes over when it holds what follows.
        let last = reader.tail.last.max(client.after);
        if let Some(place) = lock(&tap.ring).place_after(last) {
            client.after = last;
            return Ok(Some(place));
        }
        if idle {
            w.log.wait(gen, TICK);
        }
    }
}

/// Ends a stream whose task ended without writing a log: the translator's
/// last frames (an AG-UI run still ends), then the end.
pub(super) fn end_without_log(out: &mut Out, src: &Source, after: Option<AguiId>) -> io::Result<()> {
    let mut tail = Tail::new(src, after, None);
    tail.finish();
    let mut client = Client { src, after, session: None };
    client.send(out, &Arc::new(tail.take_batch()));
    client.end(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn id(line: u64) -> AguiId {
        AguiId { seq: Seq { line, sub: 0 }, k: 0 }
    }

    /// A batch of one frame a line, `bytes` long each.
    fn batch(lines: std::ops::RangeInclusive<u64>, bytes: usize) -> Arc<Batch> {
        let mut b = Batch::new();
        for l in lines {
            b.push(id(l), id(l).seq, &vec![b'x'; bytes]);
        }
        Arc::new(b)
    }

    #[test]
    fn a_client_joins_the_ring_only_where_it_holds_all_that_follows() {
        let mut r = Ring::default();
        assert_eq!(r.place_after(None), Some(0));
        r.batches.extend([batch(1..=3, 10), batch(4..=6, 10)]);
        assert_eq!(r.place_after(None), Some(0));
        assert_eq!(r.place_after(Some(id(3))), Some(1));
        assert_eq!(r.place_after(Some(id(6))), Some(2));
        // The first batch is gone: only a client that had it joins.
        r.batches.pop_front();
        r.first = 1;
        r.evicted_through = Some(id(3));
        assert_eq!(r.place_after(None), None);
        assert_eq!(r.place_after(Some(id(2))), None);
        assert_eq!(r.place_after(Some(id(3))), Some(1));
        assert_eq!(r.place_after(Some(id(5))), Some(1));
        assert_eq!(r.place_after(Some(id(9))), Some(2));
    }

    #[test]
    fn the_streams_opening_outlives_the_ring_for_new_clients() {
        let tap = Tap {
            ring: Mutex::new(Ring::default()),
            cv: Condvar::new(),
            reader: Mutex::new(None),
            retain: 45,
            resolved: Mutex::new(None),
        };
        let first = batch(1..=2, 10);
        tap.add(Arc::into_inner(first).unwrap(), false);
        tap.add(Arc::into_inner(batch(3..=4, 10)).unwrap(), false);
        tap.add(Arc::into_inner(batch(5..=6, 10)).unwrap(), false);
        let r = lock(&tap.ring);
        // The first batch fell out of the ring (60 bytes over 45)…
        assert_eq!((r.first, r.evicted_through), (1, Some(id(2))));
        assert_eq!(r.place_after(None), None);
        // …but a new client still gets it from memory, and then joins the ring.
        let b = r.opening_for(None).expect("the opening is kept");
        assert_eq!((b.frames.len(), b.last_id()), (2, Some(id(2))));
        assert_eq!(r.place_after(b.last_id()), Some(1));
        // A client that resumes past it does not get it again.
        assert!(r.opening_for(Some(id(1))).is_some());
        assert!(r.opening_for(Some(id(2))).is_none());
        assert!(r.opening_for(Some(id(9))).is_none());
    }

    #[test]
    fn a_full_queue_drops_frames_and_names_them_an_empty_one_takes_any() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut s = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let mut out = Out::new(Stream::new(&mut s, false, 25, Duration::from_secs(1)));
        // An empty queue takes a frame over the bound; the next ones do not fit.
        out.push_batch(&batch(1..=3, 30), None);
        assert_eq!(out.queued(), 30);
        assert_eq!(out.dropped, Some((id(2).seq, id(3).seq)));
        // Frames already sent (the resume point) are neither queued nor dropped.
        let mut out = Out::new(Stream::new(&mut s, false, 25, Duration::from_secs(1)));
        out.push_batch(&batch(1..=3, 10), Some(id(1)));
        assert_eq!((out.queued(), out.dropped), (20, None));
    }
}
