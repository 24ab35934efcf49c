//! One inotify instance for every followed file, shared by all streams.
//!
//! `pipe::Follow` owns an inotify instance per reader; a server following a
//! task from a thousand clients cannot (Linux allows 128 instances per user
//! by default). Here one thread reads the single instance and bumps a
//! generation counter per watched file; each stream waits on that file's
//! condition variable with a timeout, so it wakes at once on a write and
//! still gets to look at its client and the clock.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

struct Watched {
    gen: Mutex<u64>,
    cv: Condvar,
    subscribers: Mutex<usize>,
}

/// The shared watcher.
pub struct Hub {
    inotify: Inotify,
    watches: Mutex<HashMap<WatchDescriptor, Arc<Watched>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Hub {
    /// Starts the hub and its reader thread.
    pub fn start() -> std::io::Result<Arc<Hub>> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(std::io::Error::from)?;
        let hub = Arc::new(Hub { inotify, watches: Mutex::new(HashMap::new()) });
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
            let watches = lock(&self.watches);
            for e in events {
                if let Some(w) = watches.get(&e.wd) {
                    *lock(&w.gen) += 1;
                    w.cv.notify_all();
                }
            }
        }
    }

    /// Watches the file `path` for writes (before the caller's first read,
    /// so no write between that read and a wait is missed).
    pub fn subscribe(self: &Arc<Hub>, path: &Path) -> std::io::Result<Sub> {
        self.add(path, crate::pipe::FILE_CHANGES)
    }

    /// Watches the directory `path` for files appearing in it (created or
    /// renamed in) and for writers closing theirs: what a stream waiting for
    /// a task's log to exist needs (the log, liveness and journal all live
    /// there). Not for writes to files kept open, so a busy directory does
    /// not wake its waiters on every line.
    pub fn subscribe_dir(self: &Arc<Hub>, path: &Path) -> std::io::Result<Sub> {
        self.add(
            path,
            AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_MOVE_SELF
                | AddWatchFlags::IN_ONLYDIR,
        )
    }

    // One inode gets one watch and one mask per inotify instance; files and
    // directories are never the same inode, so the two masks never clash.
    fn add(self: &Arc<Hub>, path: &Path, mask: AddWatchFlags) -> std::io::Result<Sub> {
        let mut watches = lock(&self.watches);
        let wd = self.inotify.add_watch(path, mask).map_err(std::io::Error::from)?;
        let w = watches
            .entry(wd)
            .or_insert_with(|| Arc::new(Watched { gen: Mutex::new(0), cv: Condvar::new(), subscribers: Mutex::new(0) }))
            .clone();
        *lock(&w.subscribers) += 1;
        Ok(Sub { hub: self.clone(), wd, w })
    }
}

/// One stream's interest in one file; dropping it removes the watch when it
/// was the last.
pub struct Sub {
    hub: Arc<Hub>,
    wd: WatchDescriptor,
    w: Arc<Watched>,
}

impl Sub {
    /// The change counter, read before reading the file.
    pub fn generation(&self) -> u64 {
        *lock(&self.w.gen)
    }

    /// Waits until the counter moves past `seen`, or `timeout`.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        let g = lock(&self.w.gen);
        if *g != seen {
            return;
        }
        let _ = self.w.cv.wait_timeout_while(g, timeout, |g| *g == seen);
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        let mut watches = lock(&self.hub.watches);
        let mut n = lock(&self.w.subscribers);
        *n -= 1;
        if *n == 0 {
            watches.remove(&self.wd);
            let _ = self.hub.inotify.rm_watch(self.wd);
        }
    }
}
