//! The output tap of a session a server holds: each output line is
//! recorded (with its arrival time) and announced to the one reader that
//! streams the session, which follows it with its own cursor. The session
//! never waits for that reader (nobody may stream it between runs). What
//! the task log holds is read back from it, never kept in memory; only
//! unrecorded lines (`--no-record`) are kept, within a per-session and a
//! process-wide bound, and what had no room is a gap the reader is told of.

use crate::runs::record::Recorder;
use crate::session::io::events::{Output, MAX_AGENT_LINE};
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A session's sink and the feed that reads it, over the session's record
/// (`None`: not recorded). `bin` names the program in reports.
pub fn open(rec: Arc<Mutex<Option<Recorder>>>, bin: &'static str) -> (Sink, Feed) {
    let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL);
    let tap = Arc::new(Tap::default());
    // The log, to re-read what the channel only announces or drops; without
    // it (not recorded, or unreadable) dropped lines are shown as a gap.
    let log_path = lock(&rec).as_ref().map(Recorder::log);
    let log = log_path.and_then(|p| {
        LogReader::open(&p)
            .map_err(|e| crate::util::cli::report(bin, format!("the session's log cannot be re-read: {e}")))
            .ok()
    });
    let recording = log.is_some();
    let feed = Feed { rx, tap: tap.clone(), log, held: None, fill_to: 0, taken: 0, bin };
    let changes = Arc::new(Changes::default());
    (Sink { rec, tx, tap, n: 0, recording, max_bytes: CHANNEL_BYTES, bin, changes, on_step: None }, feed)
}

/// A change counter that can be waited on: bumped whenever what a session
/// shows may have changed (a step's output, a command taken, the output's
/// end), so a watcher of its status wakes instead of polling.
#[derive(Default)]
pub struct Changes {
    n: Mutex<u64>,
    cv: Condvar,
}

impl Changes {
    /// Counts a change and wakes every watcher.
    pub fn bump(&self) {
        *lock(&self.n) += 1;
        self.cv.notify_all();
    }

    /// Changes so far.
    pub fn now(&self) -> u64 {
        *lock(&self.n)
    }

    /// Waits until the count passes `seen` or `timeout` is over; the count then.
    pub fn wait(&self, seen: u64, timeout: Duration) -> u64 {
        let until = Instant::now() + timeout;
        let mut n = lock(&self.n);
        while *n <= seen {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            n = self.cv.wait_timeout(n, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *n
    }
}

/// A line of the session's output: its ordinal (1-based: its line number
/// in the task log), its bytes and its arrival time.
struct Line {
    n: u64,
    /// The line itself, only when the task log does not have it (the
    /// session is not recorded, or recording failed); else the reader
    /// reads it from the log with its own cursor.
    bytes: Option<Counted>,
    at: Option<i64>,
}

/// Lines (or notices of a recorded line) between the session and the run
/// streaming it, at most; past this the reader catches up from the log.
const CHANNEL: usize = 1024;
/// Bytes of unrecorded lines one session holds at most (a line longer than
/// this still goes alone into an empty channel, within the global bound).
const CHANNEL_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of unrecorded lines all live sessions hold at most, together
/// (`--no-record`: what no file holds). What does not fit is a reported gap.
pub const ALL_CHANNELS_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of unrecorded lines held in every session's channel now.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// An unrecorded line's bytes, counted in its session's and the server's
/// bound from the moment they are queued until they are dropped (taken by
/// the run, or left in a channel nobody reads any more).
struct Counted {
    bytes: Vec<u8>,
    len: usize,
    tap: Arc<Tap>,
}

impl Counted {
    /// Counts `bytes` in, when both bounds have room.
    fn new(bytes: &[u8], tap: &Arc<Tap>, max_bytes: usize) -> Option<Counted> {
        let len = bytes.len();
        let queued = tap.queued.load(Ordering::SeqCst);
        if queued != 0 && queued + len > max_bytes {
            return None;
        }
        let held = HELD.fetch_add(len, Ordering::SeqCst);
        if held + len > ALL_CHANNELS_BYTES {
            HELD.fetch_sub(len, Ordering::SeqCst);
            return None;
        }
        tap.queued.fetch_add(len, Ordering::SeqCst);
        Some(Counted { bytes: bytes.to_vec(), len, tap: tap.clone() })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.tap.queued.fetch_sub(self.len, Ordering::SeqCst);
        HELD.fetch_sub(self.len, Ordering::SeqCst);
    }
}

/// What the session's sink and the run reading its channel share.
#[derive(Default)]
struct Tap {
    /// Lines `1..=recorded` are whole in the task log (recording has not
    /// failed before them). Set before the line is passed on.
    recorded: AtomicU64,
    /// The latest line the channel had no room for (0: none).
    dropped_through: AtomicU64,
    /// Bytes of the lines in the channel.
    queued: AtomicUsize,
}

/// The session's output as the server takes it: each line recorded (with
/// its arrival time) and offered to the thread's channel, which a run
/// drains. The sink never waits for a reader: nobody streams the session
/// between runs (a turn started on a task route, the tail of a turn a
/// client left), and a session that waited would stop reading its agent.
/// A line the channel has no room for is left out of it (the log has it;
/// the run that streams next reads it from there). The channel closes when
/// the session's loop ends, so the run streaming sees the end.
pub struct Sink {
    bin: &'static str,
    rec: Arc<Mutex<Option<Recorder>>>,
    tx: SyncSender<Line>,
    tap: Arc<Tap>,
    /// Lines taken so far (the last ordinal).
    n: u64,
    /// Every line so far is in the log.
    recording: bool,
    /// Bytes the channel holds at most ([`CHANNEL_BYTES`]).
    max_bytes: usize,
    changes: Arc<Changes>,
    /// Called after each step's lines and at the output's end.
    on_step: Option<Box<dyn FnMut() + Send>>,
}

impl Sink {
    /// The session's change counter ([`Changes`]).
    pub fn changes(&self) -> Arc<Changes> {
        self.changes.clone()
    }

    /// `f` runs after each step's lines are passed on, and once more when
    /// the output ends (the session's status may have changed).
    pub fn on_step(&mut self, f: Box<dyn FnMut() + Send>) {
        self.on_step = Some(f);
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Some(f) = self.on_step.as_mut() {
            f();
        }
        self.changes.bump();
    }
}

impl Output for Sink {
    fn line(&mut self, l: &[u8]) -> io::Result<()> {
        self.n += 1;
        // Its arrival time, recorded beside the log and used for `ts`, so a
        // re-read of the record gives the same events.
        let at = crate::util::arrival::clock().map(|c| c.now_ms());
        {
            let mut rec = lock(&self.rec);
            match rec.as_mut() {
                Some(r) => match r.line(l, at) {
                    Ok(()) if self.recording => self.tap.recorded.store(self.n, Ordering::SeqCst),
                    Ok(()) => {}
                    Err(e) => {
                        crate::util::cli::report(
                            self.bin,
                            format!("record {}: {e}; no longer recording this session", r.run_id),
                        );
                        // Incomplete: the journal says so now (a full disk).
                        let _ = r.finish("failed", None, Some(format!("the run's log could not be written: {e}")));
                        *rec = None;
                        self.recording = false;
                    }
                },
                None => self.recording = false,
            }
        }
        // A recorded line is only announced: the reader reads it from the
        // log. Only what no file holds is kept here, within the bounds.
        let bytes = if self.recording {
            None
        } else {
            match Counted::new(l, &self.tap, self.max_bytes) {
                Some(c) => Some(c),
                None => {
                    self.tap.dropped_through.store(self.n, Ordering::SeqCst);
                    return Ok(());
                }
            }
        };
        match self.tx.try_send(Line { n: self.n, bytes, at }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.tap.dropped_through.store(self.n, Ordering::SeqCst),
            // The thread's session is gone (it dropped the receiver): nobody reads.
            Err(TrySendError::Disconnected(_)) => {}
        }
        Ok(())
    }

    fn end_step(&mut self) -> io::Result<()> {
        if let Some(f) = self.on_step.as_mut() {
            f();
        }
        self.changes.bump();
        Ok(())
    }
}

/// The run's side of the session's output: its channel, and the task log
/// to read what the channel dropped. Every line reaches the normalizer
/// once and in order: lines the channel dropped are read from the log
/// before the next line from the channel (a line the log gave already is
/// skipped when the channel brings it).
pub struct Feed {
    bin: &'static str,
    rx: Receiver<Line>,
    tap: Arc<Tap>,
    log: Option<LogReader>,
    /// A line from the channel that comes after lines it dropped.
    held: Option<Line>,
    /// Lines up to here were dropped from the channel: read from the log first.
    fill_to: u64,
    /// The reader's cursor: the ordinal of the last line it took (read, or
    /// passed over as a gap).
    taken: u64,
}

/// What [`Feed::next`] found.
pub enum Got {
    Line(Vec<u8>, Option<i64>),
    /// Lines `from..=to` were dropped and cannot be re-read.
    Gap(u64, u64),
    Idle,
    Closed,
}

impl Feed {
    /// The next line after the reader's own cursor ([`Feed::taken`]),
    /// waiting up to `wait` for one (zero: not at all); the cursor moves
    /// past what is returned (a gap included).
    pub fn read(&mut self, wait: Duration) -> Got {
        let got = self.next(self.taken, wait);
        match &got {
            Got::Line(..) => self.taken += 1,
            Got::Gap(_, to) => self.taken = *to,
            Got::Idle | Got::Closed => {}
        }
        got
    }

    /// The ordinal of the last line the reader took: compared with the
    /// lines the session produced, it says whether the reader caught up.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The line after `taken` (the ordinal of the last line the run took),
    /// waiting up to `wait` for one (zero: not at all).
    pub fn next(&mut self, taken: u64, wait: Duration) -> Got {
        loop {
            if self.fill_to > taken {
                return self.fill(taken + 1);
            }
            if let Some(l) = self.held.take() {
                if l.n <= taken {
                    continue;
                }
                if l.n > taken + 1 {
                    self.fill_to = l.n - 1;
                    self.held = Some(l);
                    continue;
                }
                match l.bytes {
                    Some(mut c) => return Got::Line(std::mem::take(&mut c.bytes), l.at),
                    // Recorded: read from the log.
                    None => self.fill_to = l.n,
                }
                continue;
            }
            // Read first: if the channel is then empty, every line up to it
            // was passed on and taken, or dropped.
            let dropped = self.tap.dropped_through.load(Ordering::SeqCst);
            let got = if wait.is_zero() {
                self.rx.try_recv().map_err(|e| match e {
                    TryRecvError::Empty => RecvTimeoutError::Timeout,
                    TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                })
            } else {
                self.rx.recv_timeout(wait)
            };
            match got {
                Ok(l) => self.held = Some(l),
                Err(RecvTimeoutError::Timeout) if dropped > taken => self.fill_to = dropped,
                Err(RecvTimeoutError::Timeout) => return Got::Idle,
                Err(RecvTimeoutError::Disconnected) => {
                    // The sink is gone: nothing more is dropped.
                    let dropped = self.tap.dropped_through.load(Ordering::SeqCst);
                    if dropped <= taken {
                        return Got::Closed;
                    }
                    self.fill_to = dropped;
                }
            }
        }
    }

    /// Line `n` (dropped from the channel) from the log, or the gap from
    /// `n` to `fill_to` when the log does not have it.
    fn fill(&mut self, n: u64) -> Got {
        if n <= self.tap.recorded.load(Ordering::SeqCst) {
            if let Some(log) = self.log.as_mut() {
                match log.line(n) {
                    Ok((bytes, at)) => return Got::Line(bytes, at),
                    Err(e) => {
                        crate::util::cli::report(self.bin, format!("re-reading the session's log at line {n}: {e}"));
                        self.log = None;
                    }
                }
            }
        }
        // Recording stops for good at its first failure: nothing after is in the log.
        Got::Gap(n, self.fill_to)
    }
}

/// Reads a session's task log forward, line by line, with each line's
/// arrival time from its sidecar ([`crate::util::arrival`]). The files are opened
/// when the session starts (fresh and empty then) through
/// [`crate::runs::safe`]: regular files beneath the run's directory, read
/// through the descriptor from then on.
struct LogReader {
    r: io::BufReader<std::fs::File>,
    times: Option<crate::util::arrival::Reader>,
    /// The ordinal of the next line `r` reads.
    next: u64,
    buf: Vec<u8>,
}

impl LogReader {
    fn open(log: &std::path::Path) -> Result<LogReader, String> {
        use crate::runs::safe;
        let (Some(dir), Some(name)) = (log.parent(), log.file_name()) else {
            return Err(format!("{}: not a file in a directory", log.display()));
        };
        let fd = safe::open_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let at = |rel: &std::path::Path| safe::open_beneath(std::os::fd::AsFd::as_fd(&fd), rel);
        let (f, st) = at(std::path::Path::new(name)).map_err(|e| e.to_string())?;
        if st.st_size != 0 {
            // Its lines would not be the session's ordinals.
            return Err(format!("{}: not empty at the session's start", log.display()));
        }
        let sidecar = crate::util::arrival::sidecar_path(std::path::Path::new(name));
        let times = at(&sidecar).ok().and_then(|(f, _)| crate::util::arrival::Reader::from_file(f));
        Ok(LogReader { r: io::BufReader::with_capacity(64 * 1024, f), times, next: 1, buf: Vec::new() })
    }

    /// Line `n` (without its newline) and its arrival time; `n` only grows
    /// from one call to the next.
    fn line(&mut self, n: u64) -> io::Result<(Vec<u8>, Option<i64>)> {
        use crate::util::lines::{read_capped, Capped, Rest};
        if n < self.next {
            return Err(io::Error::other("the log was read past that line"));
        }
        // The session's lines are at most the driver's bound (the agent's), plus runwire's own (small).
        let cap = MAX_AGENT_LINE + 64 * 1024;
        while self.next <= n {
            match read_capped(&mut self.r, &mut self.buf, cap, Rest::Leave)? {
                Capped::Line => {}
                Capped::TooLong => {
                    return Err(io::Error::other(format!("line {} of the log is longer than {cap} bytes", self.next)))
                }
                Capped::End | Capped::Last => {
                    return Err(io::Error::other(format!("the log ends or is cut before line {n}")))
                }
            }
            self.next += 1;
        }
        let at = self.times.as_mut().and_then(|t| t.at(n));
        Ok((std::mem::take(&mut self.buf), at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::io::driver::Output;

    /// A sink on a channel of `lines` lines and `bytes` bytes, and the feed reading it.
    fn tapped(lines: usize, bytes: usize, rec: Option<Recorder>) -> (Sink, Feed) {
        let (tx, rx) = std::sync::mpsc::sync_channel(lines);
        let tap = Arc::new(Tap::default());
        let log = rec.as_ref().map(|r| LogReader::open(&r.log()).unwrap());
        let recording = log.is_some();
        let sink = Sink {
            rec: Arc::new(Mutex::new(rec)),
            tx,
            tap: tap.clone(),
            n: 0,
            recording,
            max_bytes: bytes,
            bin: "test",
            changes: Arc::default(),
            on_step: None,
        };
        (sink, Feed { rx, tap, log, held: None, fill_to: 0, taken: 0, bin: "test" })
    }

    /// The reader's cursor is the feed's own: every line once, in order, a
    /// gap passed over; a watcher of the changes wakes at each step and at
    /// the output's end, not before.
    #[test]
    fn the_reader_keeps_its_own_cursor_and_watchers_wake_on_each_step() {
        let (mut sink, mut feed) = tapped(2, 1 << 20, None);
        let changes = sink.changes();
        let seen = changes.now();
        let steps = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let s2 = steps.clone();
        sink.on_step(Box::new(move || {
            s2.fetch_add(1, Ordering::SeqCst);
        }));
        let t = std::time::Instant::now();
        assert_eq!(changes.wait(seen, Duration::from_millis(100)), seen, "nothing changed");
        assert!(t.elapsed() >= Duration::from_millis(100));
        let waiter = {
            let c = changes.clone();
            std::thread::spawn(move || c.wait(seen, Duration::from_secs(10)))
        };
        for i in 1..=3 {
            sink.line(format!("l{i}").as_bytes()).unwrap();
        }
        sink.end_step().unwrap();
        assert!(waiter.join().unwrap() > seen, "the step woke the watcher");
        assert_eq!(steps.load(Ordering::SeqCst), 1);
        // The channel held two: the third is a gap (not recorded).
        let mut got = Vec::new();
        loop {
            match feed.read(Duration::ZERO) {
                Got::Line(b, _) => got.push(String::from_utf8(b).unwrap()),
                Got::Gap(from, to) => got.push(format!("gap {from}-{to}")),
                Got::Idle | Got::Closed => break,
            }
        }
        assert_eq!(got, ["l1", "l2", "gap 3-3"]);
        assert_eq!(feed.taken(), 3);
        let before = changes.now();
        drop(sink);
        assert!(changes.now() > before, "the output's end is a change");
        assert_eq!(steps.load(Ordering::SeqCst), 2, "and a step");
        assert!(matches!(feed.read(Duration::ZERO), Got::Closed));
    }

    /// Everything the feed gives now, as the run takes it (a gap as `gap from-to`).
    fn drain(feed: &mut Feed, taken: &mut u64) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            match feed.next(*taken, Duration::ZERO) {
                Got::Line(b, _) => {
                    *taken += 1;
                    out.push(String::from_utf8(b).unwrap());
                }
                Got::Gap(from, to) => {
                    assert_eq!(from, *taken + 1);
                    *taken = to;
                    out.push(format!("gap {from}-{to}"));
                }
                Got::Idle => return out,
                Got::Closed => {
                    out.push("closed".into());
                    return out;
                }
            }
        }
    }

    fn print(sink: &mut Sink, lines: std::ops::RangeInclusive<u32>) {
        for i in lines {
            sink.line(format!("l{i}").as_bytes()).unwrap();
        }
    }

    fn names(lines: std::ops::RangeInclusive<u32>) -> Vec<String> {
        lines.map(|i| format!("l{i}")).collect()
    }

    /// Recorded: what the channel had no room for is read from the log,
    /// before the next line the channel brings, with its arrival time.
    #[test]
    fn lines_the_channel_dropped_are_read_from_the_log_in_order() {
        let home = std::env::temp_dir().join(format!("runwire-feed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let rec = Recorder::start(&home, "feed", "claude", "hi", "d").unwrap();
        let (mut sink, mut feed) = tapped(4, usize::MAX, Some(rec));
        let mut taken = 0;
        // Nobody reads: 1..4 fit, 5 and 6 are dropped; the sink never waits.
        print(&mut sink, 1..=6);
        // A run takes one, and the session prints on: 7 fits again.
        assert_eq!(drain_one(&mut feed, &mut taken), "l1");
        print(&mut sink, 7..=7);
        assert_eq!(drain(&mut feed, &mut taken), names(2..=7));
        // Dropped at the end, with nothing after it in the channel.
        print(&mut sink, 8..=20);
        assert_eq!(drain(&mut feed, &mut taken), names(8..=20));
        // Re-read lines have the arrival time the sidecar recorded.
        print(&mut sink, 21..=30);
        let mut times = Vec::new();
        while let Got::Line(_, at) = feed.next(taken, Duration::ZERO) {
            taken += 1;
            times.push(at);
        }
        assert_eq!(taken, 30);
        assert!(times.iter().all(|t| t.is_some() == crate::util::arrival::clock().is_some()), "{times:?}");
        // The session ends: the rest, then the end.
        print(&mut sink, 31..=40);
        drop(sink);
        let mut rest = names(31..=40);
        rest.push("closed".into());
        assert_eq!(drain(&mut feed, &mut taken), rest);
        let _ = std::fs::remove_dir_all(&home);
    }

    fn drain_one(feed: &mut Feed, taken: &mut u64) -> String {
        match feed.next(*taken, Duration::ZERO) {
            Got::Line(b, _) => {
                *taken += 1;
                String::from_utf8(b).unwrap()
            }
            _ => panic!("a line expected"),
        }
    }

    /// Not recorded: what the channel dropped is a gap the run is told
    /// about (its exact lines), never a silent skip; the rest streams.
    #[test]
    fn unrecorded_lines_the_channel_dropped_are_a_gap() {
        let (mut sink, mut feed) = tapped(4, usize::MAX, None);
        let mut taken = 0;
        print(&mut sink, 1..=6);
        let mut want = names(1..=4);
        want.push("gap 5-6".into());
        assert_eq!(drain(&mut feed, &mut taken), want);
        print(&mut sink, 7..=12);
        assert_eq!(drain_one(&mut feed, &mut taken), "l7");
        print(&mut sink, 13..=13);
        let mut want = names(8..=10);
        want.push("gap 11-12".into());
        want.push("l13".into());
        assert_eq!(drain(&mut feed, &mut taken), want);
    }

    /// The channel is bounded in bytes too: big lines are dropped past
    /// the budget (and re-read or shown as a gap), and one line larger than
    /// the budget still goes through an empty channel.
    #[test]
    fn the_channel_holds_a_bounded_number_of_bytes() {
        let (mut sink, mut feed) = tapped(100, 10, None);
        for l in ["aaaa", "bbbb", "cccc", "dddddddddddddddd", "e"] {
            sink.line(l.as_bytes()).unwrap();
        }
        assert_eq!(sink.tap.queued.load(Ordering::SeqCst), 9);
        let mut taken = 0;
        assert_eq!(drain(&mut feed, &mut taken), ["aaaa", "bbbb", "gap 3-4", "e"]);
        assert_eq!(feed.tap.queued.load(Ordering::SeqCst), 0);
        sink.line(b"dddddddddddddddd").unwrap();
        assert_eq!(drain(&mut feed, &mut taken), ["dddddddddddddddd"]);
    }
}
