//! What wakes a feed writer: the registry, each run's runstate directory
//! and the feed's directory, watched through the process's watcher.

use super::super::registry::Registry;
use super::paths::Paths;
use crate::util::watch::{Hub, Signal, Sub};
use nix::sys::inotify::AddWatchFlags;
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What woke a [`Watcher`].
#[derive(Debug, Default)]
pub struct Changes {
    /// Runs whose journal (or pointer) changed.
    pub runs: BTreeSet<String>,
    /// Look at every run (the event queue overflowed).
    pub all: bool,
    /// The feed log grew (another writer, or ours).
    pub feed: bool,
}

/// The registry, each run's runstate directory and the feed's directory,
/// watched through the process's watcher ([`crate::util::watch`]): which runs to
/// extend, and when the log grew.
pub struct Watcher {
    hub: std::sync::Arc<Hub>,
    signal: std::sync::Arc<Signal>,
    reg: Registry,
    _reg: Sub,
    _feed: Sub,
    /// Runstate directories by their subscription's tag.
    dirs: HashMap<u64, (PathBuf, Sub)>,
    watched: HashMap<PathBuf, u64>,
    next_tag: u64,
    /// `(runstate dir, journal file name)` → run ids.
    journals: HashMap<(PathBuf, String), BTreeSet<String>>,
    /// Runstate directories that could not be watched (not created yet, or
    /// no inotify watch left): tried again on each wake-up, at least once a second.
    pending: BTreeSet<PathBuf>,
    /// When they were last tried (at most once a second: busy directories wake us often).
    last_retry: std::time::Instant,
}

/// Files appearing, written or closed in a directory.
const DIR_CHANGES: AddWatchFlags = AddWatchFlags::IN_MODIFY
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_ONLYDIR);

/// Subscription tags of the registry and the feed directory; runstate
/// directories count up from [`FIRST_DIR`].
const REG: u64 = 1;
const FEED: u64 = 2;
const FIRST_DIR: u64 = 3;

impl Watcher {
    /// Watches the registry and the feed directory, and every registered run.
    /// Start it before the first [`super::Extender::extend`], so no change falls between.
    pub fn new(home: &Path) -> io::Result<Watcher> {
        let reg = Registry::at(home);
        let paths = Paths::at(home);
        std::fs::create_dir_all(&reg.dir)?;
        std::fs::create_dir_all(&paths.dir)?;
        let hub = Hub::global()?;
        let signal = Signal::recording();
        let reg_sub = hub.watch(&reg.dir, DIR_CHANGES, &signal, REG)?;
        let feed_sub = hub.watch(&paths.dir, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_ONLYDIR, &signal, FEED)?;
        let mut w = Watcher {
            hub,
            signal,
            reg,
            _reg: reg_sub,
            _feed: feed_sub,
            dirs: HashMap::new(),
            watched: HashMap::new(),
            next_tag: FIRST_DIR,
            journals: HashMap::new(),
            pending: BTreeSet::new(),
            last_retry: std::time::Instant::now(),
        };
        for id in w.reg.ids() {
            w.track(&id);
        }
        Ok(w)
    }

    /// Follows one run's journal (its pointer read now).
    fn track(&mut self, id: &str) {
        let Some(p) = self.reg.read(id).ok() else { return };
        let dir = PathBuf::from(&p.runstate_dir);
        self.journals.entry((dir.clone(), format!("{}.jsonl", p.slug))).or_default().insert(id.to_string());
        self.watch_dir(&dir);
    }

    fn watch_dir(&mut self, dir: &Path) -> bool {
        if self.watched.contains_key(dir) {
            return true;
        }
        match self.hub.watch(dir, DIR_CHANGES, &self.signal, self.next_tag) {
            Ok(sub) => {
                self.pending.remove(dir);
                self.watched.insert(dir.to_path_buf(), self.next_tag);
                self.dirs.insert(self.next_tag, (dir.to_path_buf(), sub));
                self.next_tag += 1;
                true
            }
            Err(_) => {
                self.pending.insert(dir.to_path_buf());
                false
            }
        }
    }

    /// Waits up to `timeout` (`None`: until something happens) for changes.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<Changes> {
        let mut ch = Changes::default();
        // A runstate directory not there yet is looked for on each wake-up
        // and, while one is missing, once a second (its creation is not
        // visible to any watch we hold).
        let second = Duration::from_secs(1);
        let timeout = if self.pending.is_empty() { timeout } else { Some(timeout.map_or(second, |t| t.min(second))) };
        let got = self.signal.take(timeout);
        self.retry_pending(&mut ch);
        ch.all |= got.overflow;
        for e in got.events {
            if e.mask.contains(AddWatchFlags::IN_IGNORED) {
                // A watched runstate directory was removed: watched again if it comes back.
                if let Some((dir, _)) = self.dirs.remove(&e.tag) {
                    self.watched.remove(&dir);
                    self.pending.insert(dir);
                }
                continue;
            }
            let Some(name) = e.name.as_ref().and_then(|n| n.to_str()) else { continue };
            if e.tag == FEED {
                ch.feed |= name == "events.log";
            } else if e.tag == REG {
                if let Some(id) = name.strip_suffix(".json").filter(|id| super::super::valid_run_id(id)) {
                    self.track(id);
                    ch.runs.insert(id.to_string());
                }
            } else if name.ends_with(".jsonl") {
                if let Some((dir, _)) = self.dirs.get(&e.tag) {
                    if let Some(ids) = self.journals.get(&(dir.clone(), name.to_string())) {
                        ch.runs.extend(ids.iter().cloned());
                    }
                }
            }
        }
        Ok(ch)
    }

    fn retry_pending(&mut self, ch: &mut Changes) {
        if self.pending.is_empty() || self.last_retry.elapsed() < Duration::from_millis(990) {
            return;
        }
        self.last_retry = std::time::Instant::now();
        let dirs: Vec<PathBuf> = self.pending.iter().cloned().collect();
        for d in dirs {
            // Watched now (created since): anything written before the watch is
            // looked at now. There but not watchable (out of inotify watches,
            // no permission): its runs are looked at on every wake-up instead,
            // at least once a second, a `stat` of each journal.
            if self.watch_dir(&d) || d.is_dir() {
                for ((dir, _), ids) in &self.journals {
                    if *dir == d {
                        ch.runs.extend(ids.iter().cloned());
                    }
                }
            }
        }
    }
}
