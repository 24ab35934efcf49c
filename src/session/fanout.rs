//! One producer, any number of readers, each with its own cursor: what lets
//! several viewers of one live session share one normalizer and translator.
//!
//! The producer (the one run that drains a session's [`super::tap::Feed`]
//! and normalizes, translates and frames its lines) pushes each line's
//! frames, numbered by the line's ordinal in the task log. Readers (the
//! viewers' connections) take them with their own cursor and only copy
//! bytes. The producer never waits for a reader: the ring keeps at most
//! `max_bytes` (the newest item always), dropping the oldest. A reader the
//! ring left behind is told which lines it missed ([`Next::Behind`]) and
//! reads those from the task log with a reader and normalizer of its own,
//! then rejoins ([`Reader::caught_up`]); it never holds the others back.
//! What it cannot re-read (an unrecorded session) is its gap to report.
//!
//! Not wired yet: `src/serve/agui/interactive.rs` runs one feed per run. To
//! share it, the thread's run loop pushes each normalized line's frames
//! here instead of writing them to its one client, and each `/agui` client
//! of the thread holds a [`Reader`] (see this module's tests for the loop).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared ring (see the module's doc).
pub struct Fanout<T> {
    ring: Mutex<Ring<T>>,
    /// Signalled at each push and at the close.
    cv: Condvar,
    max_bytes: usize,
}

struct Ring<T> {
    /// (line ordinal, item, its size), ordinals increasing.
    items: VecDeque<(u64, Arc<T>, usize)>,
    bytes: usize,
    /// The last line ordinal dropped from the front (0: none).
    dropped_through: u64,
    /// The last line ordinal pushed (0: none).
    head: u64,
    closed: bool,
}

/// What [`Reader::next`] found.
#[derive(Debug, PartialEq)]
pub enum Next<T> {
    /// The frames of line `.0`.
    Item(u64, Arc<T>),
    /// Lines `from..=to` fell out of the ring before this reader took
    /// them: read them from the task log, then [`Reader::caught_up`]`(to)`.
    Behind { from: u64, to: u64 },
    /// Nothing new within the wait.
    Idle,
    /// The producer closed the ring and this reader took everything.
    Closed,
}

impl<T> Fanout<T> {
    /// A ring keeping at most `max_bytes` of items (and always the newest).
    pub fn new(max_bytes: usize) -> Arc<Fanout<T>> {
        let ring = Ring { items: VecDeque::new(), bytes: 0, dropped_through: 0, head: 0, closed: false };
        Arc::new(Fanout { ring: Mutex::new(ring), cv: Condvar::new(), max_bytes })
    }

    /// Adds the frames of line `line` (ordinals only grow; an older one is
    /// ignored), `size` bytes. Never waits: the oldest items go.
    pub fn push(&self, line: u64, item: T, size: usize) {
        let mut r = lock(&self.ring);
        if line <= r.head || r.closed {
            return;
        }
        r.head = line;
        r.bytes += size;
        r.items.push_back((line, Arc::new(item), size));
        while r.bytes > self.max_bytes && r.items.len() > 1 {
            if let Some((l, _, s)) = r.items.pop_front() {
                r.bytes -= s;
                r.dropped_through = l;
            }
        }
        drop(r);
        self.cv.notify_all();
    }

    /// The producer is done (the session ended): readers see [`Next::Closed`]
    /// once they took what is left.
    pub fn close(&self) {
        lock(&self.ring).closed = true;
        self.cv.notify_all();
    }

    /// Bytes the ring holds now.
    pub fn bytes(&self) -> usize {
        lock(&self.ring).bytes
    }

    /// A reader that has lines `..=after` already (0: none).
    pub fn reader(self: &Arc<Self>, after: u64) -> Reader<T> {
        Reader { fan: self.clone(), after }
    }
}

/// One reader's cursor.
pub struct Reader<T> {
    fan: Arc<Fanout<T>>,
    /// The last line ordinal taken (or caught up to from the log).
    after: u64,
}

impl<T> Reader<T> {
    /// The last line ordinal this reader has.
    pub fn after(&self) -> u64 {
        self.after
    }

    /// It read lines up to `through` from the task log itself.
    pub fn caught_up(&mut self, through: u64) {
        self.after = self.after.max(through);
    }

    /// The next item past this reader's cursor, waiting up to `wait`.
    pub fn next(&mut self, wait: Duration) -> Next<T> {
        let fan = self.fan.clone();
        let mut r = lock(&fan.ring);
        loop {
            if r.dropped_through > self.after {
                // What follows is partly gone: from the log, up to what the ring still has.
                return Next::Behind { from: self.after + 1, to: r.dropped_through };
            }
            let i = r.items.partition_point(|(l, _, _)| *l <= self.after);
            if let Some((l, item, _)) = r.items.get(i) {
                self.after = *l;
                return Next::Item(*l, item.clone());
            }
            if r.closed {
                return Next::Closed;
            }
            if wait.is_zero() {
                return Next::Idle;
            }
            let head = r.head;
            let (g, t) =
                fan.cv.wait_timeout_while(r, wait, |r| r.head == head && !r.closed).unwrap_or_else(|e| e.into_inner());
            r = g;
            if t.timed_out() {
                return Next::Idle;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The "task log": every line's frames, as a reader of its own would
    /// make them again.
    fn frames(line: u64) -> String {
        format!("frames of line {line}")
    }

    /// A viewer's loop: from the ring, and from the log where it fell behind.
    fn view(mut r: Reader<String>, pace: Duration) -> Vec<String> {
        let mut got = Vec::new();
        loop {
            match r.next(Duration::from_millis(50)) {
                Next::Item(l, f) => {
                    assert_eq!(*f, frames(l));
                    got.push((*f).clone());
                    std::thread::sleep(pace);
                }
                Next::Behind { from, to } => {
                    got.extend((from..=to).map(frames));
                    r.caught_up(to);
                }
                Next::Idle => {}
                Next::Closed => return got,
            }
        }
    }

    #[test]
    fn every_reader_gets_every_line_once_in_order_and_none_holds_the_producer() {
        const LINES: u64 = 2000;
        let fan = Fanout::<String>::new(4 * 1024);
        // A fast reader, a slow one (falls behind: catches up from the log),
        // and one that joins late, having the first 100 lines already.
        let readers = [
            (fan.reader(0), Duration::ZERO),
            (fan.reader(0), Duration::from_micros(300)),
            (fan.reader(100), Duration::ZERO),
        ];
        let handles: Vec<_> = readers.into_iter().map(|(r, pace)| std::thread::spawn(move || view(r, pace))).collect();
        // A reader that never reads holds nothing either.
        let _idle = fan.reader(0);
        let mut most = 0;
        for l in 1..=LINES {
            let f = frames(l);
            let n = f.len();
            fan.push(l, f, n);
            most = most.max(fan.bytes());
        }
        fan.close();
        assert!(most <= 4 * 1024, "the ring held {most} bytes");
        let all: Vec<String> = (1..=LINES).map(frames).collect();
        let got: Vec<Vec<String>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(got[0], all);
        assert_eq!(got[1], all, "the slow reader caught up from the log");
        assert_eq!(got[2], all[100..], "the late reader from where it was");
    }

    #[test]
    fn a_reader_is_told_exactly_what_it_missed() {
        let fan = Fanout::<u64>::new(30);
        let mut r = fan.reader(0);
        for l in [1, 2, 5, 6] {
            fan.push(l, l, 10);
        }
        // 40 bytes over a bound of 30: line 1 went.
        assert_eq!(r.next(Duration::ZERO), Next::Behind { from: 1, to: 1 });
        r.caught_up(1);
        assert_eq!(r.next(Duration::ZERO), Next::Item(2, Arc::new(2)));
        assert_eq!(r.next(Duration::ZERO), Next::Item(5, Arc::new(5)));
        // An ordinal already pushed is ignored.
        fan.push(4, 4, 10);
        assert_eq!(r.next(Duration::ZERO), Next::Item(6, Arc::new(6)));
        assert_eq!(r.next(Duration::ZERO), Next::Idle);
        // One item larger than the bound is still kept (the newest always is).
        fan.push(7, 7, 100);
        assert_eq!(r.next(Duration::ZERO), Next::Item(7, Arc::new(7)));
        fan.close();
        assert_eq!(r.next(Duration::from_secs(5)), Next::Closed);
    }
}
