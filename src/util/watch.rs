//! The crate's one inotify watcher: one instance per process, read by one
//! thread, shared by everything that waits on files.
//!
//! Linux allows 128 inotify instances per user by default, so a server
//! following a task from a thousand clients cannot give each its own. Here
//! every wait is a [`Sub`]: a watch on one path with its own mask, whose
//! events bump a [`Signal`] (a change counter and a condition variable,
//! waited on with a timeout so the waiter still gets to look at its client
//! and the clock). A signal can be shared by many subscriptions and can
//! record what happened (each event's tag and name), which is what a
//! watcher of many directories needs ([`crate::runs::feed::Watcher`]).

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// What a follower of a growing file is woken by: writes, the writer
/// closing it, and the file going away (deleted, renamed, truncated).
pub const FILE_CHANGES: AddWatchFlags = AddWatchFlags::IN_MODIFY
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ATTRIB);

/// Files appearing in a directory and writers closing theirs, and the
/// directory going away: what a stream waiting for a task's log to exist
/// needs. Not writes to files kept open, so a busy directory does not wake
/// its waiters on every line.
pub const DIR_ENTRIES: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF);

/// Most events a recording [`Signal`] keeps before it reports an overflow
/// instead (its reader then looks at everything, as after the kernel's own).
const MAX_RECORDED: usize = 4096;

/// Adds to an inode's existing mask instead of replacing it (not in nix's flags).
const MASK_ADD: AddWatchFlags = AddWatchFlags::from_bits_retain(nix::libc::IN_MASK_ADD);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One event as a recording signal keeps it.
#[derive(Debug, Clone)]
pub struct Event {
    /// The tag of the subscription it came through.
    pub tag: u64,
    /// The entry's name, for a watched directory.
    pub name: Option<OsString>,
    /// What happened (`IN_IGNORED` when the watch is gone: the path was removed).
    pub mask: AddWatchFlags,
}

/// What a [`Signal`] has seen since its reader last took it.
#[derive(Debug, Default)]
pub struct Taken {
    pub events: Vec<Event>,
    /// Events were lost (the kernel's queue or ours overflowed): look at everything.
    pub overflow: bool,
}

#[derive(Default)]
struct State {
    gen: u64,
    recording: bool,
    events: VecDeque<Event>,
    overflow: bool,
}

/// A change counter that wakes its waiters; optionally a record of events.
#[derive(Default)]
pub struct Signal {
    state: Mutex<State>,
    cv: Condvar,
    /// Told once a read that fired it ([`Signal::on_fire`]).
    hook: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Signal {
    /// A signal that only counts.
    pub fn new() -> Arc<Signal> {
        Arc::new(Signal::default())
    }

    /// A signal that also keeps each event (bounded) for [`Signal::take`].
    pub fn recording() -> Arc<Signal> {
        let s = Signal::default();
        lock(&s.state).recording = true;
        Arc::new(s)
    }

    /// Calls `f` (on the watcher's reader thread) once a read of the
    /// watcher gave this signal events, after all of them are counted and
    /// recorded: a waiter that is not a thread (an async task) is woken by
    /// it directly, with no thread of its own between the reader and it,
    /// and takes each read whole (a waiter woken per event would take a
    /// read's events in parts, each part a wake of its own). `f` must not
    /// block. Set once; a second hook is refused.
    pub fn on_fire(&self, f: impl Fn() + Send + Sync + 'static) -> Result<(), &'static str> {
        self.hook.set(Box::new(f)).map_err(|_| "this signal is hooked already")
    }

    fn fire(&self, e: Option<Event>) {
        let mut st = lock(&self.state);
        st.gen += 1;
        if st.recording {
            match e {
                Some(_) if st.events.len() >= MAX_RECORDED => {
                    st.events.clear();
                    st.overflow = true;
                }
                Some(e) => st.events.push_back(e),
                None => st.overflow = true,
            }
        }
        self.cv.notify_all();
    }

    /// The change counter, read before looking at what is watched.
    pub fn generation(&self) -> u64 {
        lock(&self.state).gen
    }

    /// Waits until the counter moves past `seen`, or `timeout` (`None`: no limit).
    pub fn wait(&self, seen: u64, timeout: Option<Duration>) {
        let g = lock(&self.state);
        if g.gen != seen {
            return;
        }
        match timeout {
            Some(t) => drop(self.cv.wait_timeout_while(g, t, |g| g.gen == seen)),
            None => drop(self.cv.wait_while(g, |g| g.gen == seen)),
        }
    }

    /// Waits as [`Signal::wait`] for anything recorded, then takes it all.
    pub fn take(&self, timeout: Option<Duration>) -> Taken {
        let mut g = lock(&self.state);
        let idle = |g: &mut State| g.events.is_empty() && !g.overflow;
        g = match timeout {
            Some(t) => self.cv.wait_timeout_while(g, t, idle).unwrap_or_else(|e| e.into_inner()).0,
            None => self.cv.wait_while(g, idle).unwrap_or_else(|e| e.into_inner()),
        };
        Taken { events: g.events.drain(..).collect(), overflow: std::mem::take(&mut g.overflow) }
    }
}

struct Entry {
    id: u64,
    mask: AddWatchFlags,
    tag: u64,
    signal: Arc<Signal>,
}

#[derive(Default)]
struct Watches {
    by_wd: HashMap<WatchDescriptor, Vec<Entry>>,
    next_id: u64,
}

/// The process's watcher (or one of its own, [`Hub::paced`]).
pub struct Hub {
    inotify: Inotify,
    watches: Mutex<Watches>,
    /// How long the reader waits after each read ([`Hub::paced`]).
    pace: Duration,
}

impl Hub {
    /// The process's one hub, started (with its reader thread) on first use.
    pub fn global() -> io::Result<Arc<Hub>> {
        static HUB: OnceLock<Result<Arc<Hub>, (io::ErrorKind, String)>> = OnceLock::new();
        HUB.get_or_init(|| Hub::start(Duration::ZERO).map_err(|e| (e.kind(), e.to_string())))
            .clone()
            .map_err(|(k, m)| io::Error::new(k, m))
    }

    /// A watcher of its own (not the process's one) whose reader waits
    /// `pace` after each read: a burst of writes wakes its waiters at most
    /// once a `pace`, not once a write. While the reader waits, the kernel
    /// merges each event into an identical one still unread (inotify(7)),
    /// so a file written a thousand times in that while is one event, read
    /// once. The first event after a quiet spell is read at once. For a
    /// waiter whose work per wake is costly and whose readers can take a
    /// batch (the cluster node's live tail), not for a server's followers.
    /// Its reader thread, like the process's, lasts as long as the process.
    pub fn paced(pace: Duration) -> io::Result<Arc<Hub>> {
        Hub::start(pace)
    }

    fn start(pace: Duration) -> io::Result<Arc<Hub>> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(io::Error::from)?;
        let hub = Arc::new(Hub { inotify, watches: Mutex::new(Watches::default()), pace });
        let h = hub.clone();
        std::thread::Builder::new().name("inotify".into()).spawn(move || h.read_loop())?;
        Ok(hub)
    }

    fn read_loop(&self) {
        loop {
            let events = match self.inotify.read_events() {
                Ok(e) => e,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            };
            let mut w = lock(&self.watches);
            // The hooked signals this read fired: told once, when all of it is recorded.
            let mut hooked: Vec<Arc<Signal>> = Vec::new();
            let mut fired = |signal: &Arc<Signal>| {
                if signal.hook.get().is_some() && !hooked.iter().any(|s| Arc::ptr_eq(s, signal)) {
                    hooked.push(signal.clone());
                }
            };
            for e in events {
                if e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    for entry in w.by_wd.values().flatten() {
                        entry.signal.fire(None);
                        fired(&entry.signal);
                    }
                    continue;
                }
                let gone = e.mask.contains(AddWatchFlags::IN_IGNORED);
                // The kernel may hand a removed watch's number to the next
                // watch added: forget it now, so no later subscription is
                // mistaken for it (or removed with it).
                let entries = if gone { w.by_wd.remove(&e.wd).unwrap_or_default() } else { Vec::new() };
                let list = if gone { &entries } else { w.by_wd.get(&e.wd).map_or(&entries, |l| l) };
                for entry in list {
                    if gone || entry.mask.intersects(e.mask) {
                        entry.signal.fire(Some(Event { tag: entry.tag, name: e.name.clone(), mask: e.mask }));
                        fired(&entry.signal);
                    }
                }
            }
            drop(w);
            for signal in hooked {
                if let Some(hook) = signal.hook.get() {
                    hook();
                }
            }
            if !self.pace.is_zero() {
                std::thread::sleep(self.pace);
            }
        }
    }

    /// Watches the file `path` for writes, with a signal of its own (before
    /// the caller's first read, so no write between that read and a wait is missed).
    pub fn subscribe(self: &Arc<Hub>, path: &Path) -> io::Result<Sub> {
        self.watch(path, FILE_CHANGES, &Signal::new(), 0)
    }

    /// Watches the directory `path` for entries appearing and closing
    /// ([`DIR_ENTRIES`]), with a signal of its own.
    pub fn subscribe_dir(self: &Arc<Hub>, path: &Path) -> io::Result<Sub> {
        self.watch(path, DIR_ENTRIES | AddWatchFlags::IN_ONLYDIR, &Signal::new(), 0)
    }

    /// Watches `path` for `mask`, firing `signal` with `tag`. One inode has
    /// one kernel watch whose mask is the union of its subscriptions'; each
    /// subscription only sees the events of its own mask.
    pub fn watch(self: &Arc<Hub>, path: &Path, mask: AddWatchFlags, signal: &Arc<Signal>, tag: u64) -> io::Result<Sub> {
        let mut w = lock(&self.watches);
        let wd = self.inotify.add_watch(path, mask | MASK_ADD).map_err(io::Error::from)?;
        w.next_id += 1;
        let id = w.next_id;
        let only = mask & !(AddWatchFlags::IN_ONLYDIR | MASK_ADD);
        w.by_wd.entry(wd).or_default().push(Entry { id, mask: only, tag, signal: signal.clone() });
        Ok(Sub { hub: self.clone(), wd, id, signal: signal.clone() })
    }
}

/// One interest in one path; dropping it removes the kernel's watch when it
/// was the last on that path.
pub struct Sub {
    hub: Arc<Hub>,
    wd: WatchDescriptor,
    id: u64,
    signal: Arc<Signal>,
}

impl Sub {
    /// The change counter, read before reading the file.
    pub fn generation(&self) -> u64 {
        self.signal.generation()
    }

    /// Waits until the counter moves past `seen`, or `timeout`.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        self.signal.wait(seen, Some(timeout))
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        let mut w = lock(&self.hub.watches);
        let Some(list) = w.by_wd.get_mut(&self.wd) else { return };
        let before = list.len();
        list.retain(|e| e.id != self.id);
        // Not ours (the watch went and its number was reused): leave it be.
        if list.len() == before {
            return;
        }
        if list.is_empty() {
            w.by_wd.remove(&self.wd);
            let _ = self.hub.inotify.rm_watch(self.wd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("runwire-watch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const T: Option<Duration> = Some(Duration::from_secs(5));

    #[test]
    fn each_subscription_sees_its_own_mask_on_a_shared_inode() {
        let d = dir("masks");
        let hub = Hub::global().unwrap();
        let entries = hub.subscribe_dir(&d).unwrap();
        let rec = Signal::recording();
        let all = hub.watch(&d, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE, &rec, 7).unwrap();
        let seen = entries.generation();
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(d.join("log")).unwrap();
        let got = rec.take(T);
        assert_eq!(got.events[0].tag, 7);
        assert_eq!(got.events[0].name.as_deref(), Some(std::ffi::OsStr::new("log")));
        entries.wait(seen, Duration::from_secs(5));
        let seen = entries.generation();
        assert!(seen > 0, "the directory's own subscriber saw the creation");
        // A write to an open file is IN_MODIFY: the recording subscriber
        // sees it, the entries-only one (no IN_MODIFY) is not woken.
        f.write_all(b"x\n").unwrap();
        let got = rec.take(T);
        assert!(got.events.iter().any(|e| e.mask.contains(AddWatchFlags::IN_MODIFY)), "{got:?}");
        assert_eq!(entries.generation(), seen);
        drop(all);
        // The kernel watch stays for the remaining subscriber.
        drop(f);
        entries.wait(seen, Duration::from_secs(5));
        assert!(entries.generation() > seen, "the close still wakes the directory's subscriber");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_removed_directory_is_reported_and_its_number_never_confused() {
        let hub = Hub::global().unwrap();
        let d = dir("gone");
        let rec = Signal::recording();
        let sub = hub.watch(&d, AddWatchFlags::IN_CREATE | AddWatchFlags::IN_ONLYDIR, &rec, 3).unwrap();
        std::fs::remove_dir(&d).unwrap();
        let mut gone = false;
        for _ in 0..5 {
            let got = rec.take(T);
            if got.events.iter().any(|e| e.tag == 3 && e.mask.contains(AddWatchFlags::IN_IGNORED)) {
                gone = true;
                break;
            }
        }
        assert!(gone, "IN_IGNORED reaches the subscriber");
        // A new watch (which may get the old number) survives the old
        // subscription's drop.
        let d2 = dir("gone2");
        let sub2 = hub.subscribe_dir(&d2).unwrap();
        drop(sub);
        let seen = sub2.generation();
        std::fs::write(d2.join("f"), b"").unwrap();
        sub2.wait(seen, Duration::from_secs(5));
        assert!(sub2.generation() > seen);
        let _ = std::fs::remove_dir_all(&d2);
    }

    /// A fresh directory watched for writes by a paced watcher of its own,
    /// into a recording signal (`hook` sets it up first); the watch lasts
    /// as long as the returned subscription.
    fn paced_dir(
        name: &str,
        pace: Duration,
        hook: impl FnOnce(&Arc<Signal>),
    ) -> (std::path::PathBuf, Arc<Signal>, Sub) {
        let hub = Hub::paced(pace).unwrap();
        let d = dir(name);
        let rec = Signal::recording();
        hook(&rec);
        let sub = hub.watch(&d, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_ONLYDIR, &rec, 4).unwrap();
        (d, rec, sub)
    }

    #[test]
    fn a_paced_watcher_reads_a_burst_of_writes_as_a_few_merged_events() {
        let pace = Duration::from_millis(50);
        let (d, rec, _watched) = paced_dir("paced", pace, |_| {});
        let mut f = std::fs::File::create(d.join("log")).unwrap();
        let start = std::time::Instant::now();
        // A write a millisecond for twenty paces: an unpaced reader reads each.
        for i in 0..1000 {
            writeln!(f, "line {i}").unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let wrote_for = start.elapsed();
        // Everything the burst caused, until the reader has been quiet for two paces.
        let mut modified = 0;
        loop {
            let got = rec.take(Some(pace * 2));
            if got.events.is_empty() && !got.overflow {
                break;
            }
            modified += got.events.iter().filter(|e| e.mask.contains(AddWatchFlags::IN_MODIFY)).count();
        }
        // One read a pace, each with the writes since merged into one event
        // (give or take the first read and the last ones).
        let reads = (wrote_for.as_millis() / pace.as_millis()) as usize + 4;
        assert!(modified >= 1, "the burst was seen");
        assert!(modified <= reads, "{modified} events for 1,000 writes in {wrote_for:?} (at most {reads})");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_hook_is_told_once_a_read_however_many_events_it_brought() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pace = Duration::from_millis(100);
        let told = Arc::new(AtomicUsize::new(0));
        let t = told.clone();
        let (d, rec, _watched) = paced_dir("hooked", pace, |rec| {
            rec.on_fire(move || {
                t.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            assert!(rec.on_fire(|| {}).is_err(), "one hook");
        });
        // Two files written in turn: their events cannot be merged, so a
        // read brings many.
        let (mut a, mut b) = (std::fs::File::create(d.join("a")).unwrap(), std::fs::File::create(d.join("b")).unwrap());
        let start = std::time::Instant::now();
        for i in 0..200 {
            writeln!(a, "{i}").unwrap();
            writeln!(b, "{i}").unwrap();
            if i % 20 == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let wrote_for = start.elapsed();
        std::thread::sleep(pace * 3);
        let events = rec.take(Some(Duration::ZERO)).events.len();
        let told = told.load(Ordering::SeqCst);
        let reads = (wrote_for.as_millis() / pace.as_millis()) as usize + 4;
        assert!(told >= 1, "never told");
        assert!(told <= reads, "told {told} times for {events} events in {wrote_for:?} (reads: at most {reads})");
        assert!(events > told, "{events} events, told {told} times");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_recording_signal_is_bounded() {
        let s = Signal::recording();
        for _ in 0..MAX_RECORDED + 10 {
            s.fire(Some(Event { tag: 1, name: None, mask: AddWatchFlags::IN_MODIFY }));
        }
        let got = s.take(Some(Duration::ZERO));
        assert!(got.overflow);
        assert!(got.events.len() < MAX_RECORDED);
        assert!(!s.take(Some(Duration::ZERO)).overflow, "taken once");
    }
}
