//! What wakes the node: inotify on the registry, the feed's directory and
//! every run's runstate directory, and what a round looks at.

use nix::sys::inotify::AddWatchFlags;
use runwire::runs::registry::{Pointer, Registry};
use runwire::util::watch;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What wakes the node: inotify (a paced watcher, `runwire::util::watch`)
/// on the registry, the feed's directory and every run's runstate
/// directory, so a line an agent writes is published at once, not at the
/// next look. A full look every `--poll-ms` stays as the safety net
/// (directories not there yet, a lost event).
pub(crate) struct Wake {
    hub: Arc<watch::Hub>,
    signal: Arc<watch::Signal>,
    _fixed: Vec<watch::Sub>,
    /// Runstate directories by their subscription's tag.
    dirs: HashMap<u64, (PathBuf, watch::Sub)>,
    by_dir: HashMap<PathBuf, u64>,
    /// The runs of each runstate directory: `(slug, run)`.
    runs_in: HashMap<PathBuf, BTreeSet<(String, String)>>,
    next: u64,
}

/// What a round looks at.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    /// Every registered run (the first round, the safety net, an overflow).
    pub(crate) all: bool,
    /// These runs' files.
    pub(crate) runs: BTreeSet<String>,
    /// Something changed that the live tail does not carry (a journal, a
    /// plan, a pointer, the feed): the round is not put off for a pause.
    pub(crate) urgent: bool,
}

impl Dirty {
    pub(crate) fn merge(&mut self, o: Dirty) {
        self.all |= o.all;
        self.urgent |= o.urgent;
        self.runs.extend(o.runs);
    }
}

/// What the node's loop waits on: what the watcher saw, taken when the
/// loop asks. Its reader thread wakes the loop directly ([`watch::Signal::on_fire`]).
pub(crate) struct Wakes {
    /// `None`: no watcher (inotify failed); the full looks alone.
    signal: Option<Arc<watch::Signal>>,
    notify: Arc<tokio::sync::Notify>,
}

impl Wakes {
    /// No watcher: [`Wakes::recv`] is `None` at once.
    pub(crate) fn none() -> Wakes {
        Wakes { signal: None, notify: Arc::new(tokio::sync::Notify::new()) }
    }

    /// What the watcher saw since the last take, waited for; `None` without a watcher.
    pub(crate) async fn recv(&mut self) -> Option<watch::Taken> {
        self.signal.as_ref()?;
        loop {
            // A fire between this take and the wait leaves its permit:
            // the wait then ends at once, and nothing is missed.
            if let Some(t) = self.try_recv() {
                return Some(t);
            }
            self.notify.notified().await;
        }
    }

    /// What the watcher saw since the last take, if anything.
    pub(crate) fn try_recv(&mut self) -> Option<watch::Taken> {
        let t = self.signal.as_ref()?.take(Some(std::time::Duration::ZERO));
        (!t.events.is_empty() || t.overflow).then_some(t)
    }
}

/// Subscription tags: the registry, the feed; runstate directories count up from `FIRST_DIR`.
const REG: u64 = 1;
const FEED: u64 = 2;
const FIRST_DIR: u64 = 3;

/// A runstate directory: files appearing, written, closed or renamed in.
const RUN_DIR: AddWatchFlags = AddWatchFlags::IN_MODIFY
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_ONLYDIR);

/// The registry: pointers written (by rename), removed.
const REG_DIR: AddWatchFlags = AddWatchFlags::IN_MOVED_TO
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_ONLYDIR);

impl Wake {
    /// Watches the registry and the feed's directory; what it sees, the
    /// node's loop takes from the [`Wakes`] returned with it.
    pub(crate) fn start(home: &Path, pace: std::time::Duration) -> std::io::Result<(Wake, Wakes)> {
        let reg = Registry::at(home);
        let feed = runwire::runs::feed::Paths::at(home);
        std::fs::create_dir_all(&reg.dir)?;
        std::fs::create_dir_all(&feed.dir)?;
        // A watcher of its own, paced: the process has no other.
        let hub = watch::Hub::paced(pace)?;
        let signal = watch::Signal::recording();
        let notify = Arc::new(tokio::sync::Notify::new());
        let n = notify.clone();
        // The reader thread wakes the loop itself: a thread between them
        // was one more wake per sending, and on a busy machine each wake
        // may wait behind another process for its time slice.
        signal.on_fire(move || n.notify_one()).map_err(std::io::Error::other)?;
        let fixed = vec![
            hub.watch(&reg.dir, REG_DIR, &signal, REG)?,
            hub.watch(&feed.dir, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_ONLYDIR, &signal, FEED)?,
        ];
        let wakes = Wakes { signal: Some(signal.clone()), notify };
        let wake = Wake {
            hub,
            signal,
            _fixed: fixed,
            dirs: HashMap::new(),
            by_dir: HashMap::new(),
            runs_in: HashMap::new(),
            next: FIRST_DIR,
        };
        Ok((wake, wakes))
    }

    /// Follows a run's runstate directory (again after it was removed: its
    /// watch went with it). A directory that cannot be watched (not there
    /// yet, no watch left) is looked at by the full rounds.
    pub(crate) fn track(&mut self, run: &str, p: &Pointer) {
        let dir = PathBuf::from(&p.runstate_dir);
        let slug = (p.slug.clone(), run.to_string());
        if !self.by_dir.contains_key(&dir) {
            match self.hub.watch(&dir, RUN_DIR, &self.signal, self.next) {
                Ok(sub) => {
                    self.by_dir.insert(dir.clone(), self.next);
                    self.dirs.insert(self.next, (dir.clone(), sub));
                    self.next += 1;
                }
                Err(_) => return,
            }
        }
        self.runs_in.entry(dir).or_default().insert(slug);
    }

    /// A run gone: its directory unwatched when it was the last run there.
    pub(crate) fn forget(&mut self, run: &str) {
        let mut empty = Vec::new();
        for (dir, runs) in &mut self.runs_in {
            runs.retain(|(_, r)| r != run);
            if runs.is_empty() {
                empty.push(dir.clone());
            }
        }
        for dir in empty {
            self.runs_in.remove(&dir);
            if let Some(tag) = self.by_dir.remove(&dir) {
                self.dirs.remove(&tag);
            }
        }
    }

    /// What `t` says changed, into `d`.
    pub(crate) fn absorb(&mut self, t: watch::Taken, d: &mut Dirty) {
        d.all |= t.overflow;
        d.urgent |= t.overflow;
        for e in t.events {
            if e.mask.contains(AddWatchFlags::IN_IGNORED) {
                // A runstate directory removed: watched again when a round finds it back.
                if let Some((dir, _)) = self.dirs.remove(&e.tag) {
                    d.urgent = true;
                    self.by_dir.remove(&dir);
                    if let Some(runs) = self.runs_in.remove(&dir) {
                        d.runs.extend(runs.into_iter().map(|(_, r)| r));
                    }
                }
                continue;
            }
            let Some(name) = e.name.as_ref().and_then(|n| n.to_str()) else { continue };
            match e.tag {
                // The feed's own log written by another writer: published by any round.
                FEED => d.urgent = true,
                REG => {
                    d.urgent = true;
                    if let Some(id) = name.strip_suffix(".json").filter(|id| runwire::runs::valid_id(id)) {
                        d.runs.insert(id.to_string());
                    }
                }
                tag => {
                    let Some((dir, _)) = self.dirs.get(&tag) else { continue };
                    // A new file (a task's first log line) is the live tail's
                    // once a round has looked at it.
                    // (The gate's and reviewer's logs are written once: nothing waits for them.)
                    d.urgent |= !crate::names::live_file(name) || e.mask.contains(AddWatchFlags::IN_CREATE);
                    for (slug, run) in self.runs_in.get(dir).into_iter().flatten() {
                        if name.strip_prefix(slug.as_str()).is_some_and(|rest| rest.starts_with('.')) {
                            d.runs.insert(run.clone());
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    /// The node's loop is woken by the watcher's reader itself: a write
    /// made while it waits ends the wait, and one made before it waits is
    /// not lost.
    #[test]
    fn the_loop_is_woken_by_a_write_whenever_it_comes() {
        let tmp = std::env::temp_dir().join(format!("rw-wake-recv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let home = tmp.join("home");
        let (_w, mut wakes) = Wake::start(&home, Duration::from_millis(1)).unwrap();
        let feed = runwire::runs::feed::Paths::at(&home).dir.join("feed.jsonl");
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let append = move || {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&feed).unwrap();
            f.write_all(b"{}\n").unwrap();
        };
        // While it waits.
        let a = append.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            a();
        });
        let t = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), wakes.recv()).await });
        writer.join().unwrap();
        let t = t.expect("a write while the loop waited did not wake it").expect("a watcher");
        assert!(t.events.iter().any(|e| e.tag == FEED), "{t:?}");
        // Before it waits: seen by the next wait, at once.
        append();
        std::thread::sleep(Duration::from_millis(100));
        let t = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), wakes.recv()).await });
        let t = t.expect("a write made before the wait was lost").expect("a watcher");
        assert!(t.events.iter().any(|e| e.tag == FEED), "{t:?}");
        // Nothing more: the next wait waits.
        while wakes.try_recv().is_some() {}
        let t = rt.block_on(async { tokio::time::timeout(Duration::from_millis(300), wakes.recv()).await });
        assert!(t.is_err(), "woken with nothing written: {t:?}");
        assert!(rt.block_on(Wakes::none().recv()).is_none(), "no watcher: no wait");
        let _ = std::fs::remove_dir_all(&tmp);
    }

    /// What inotify says of each file of a run, in a round's terms: a task's
    /// new lines may wait for a pause (the live tail carries them); its
    /// first line (a new file), a journal record, a plan, a new pointer may
    /// not.
    #[test]
    fn only_lines_appended_to_a_tasks_known_files_may_put_a_round_off() {
        use runwire::runs::registry::NewRun;
        let tmp = std::env::temp_dir().join(format!("rw-wake-urgent-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let (home, repo) = (tmp.join("home"), tmp.join("repo"));
        let new = NewRun { slug: "feat".into(), repo_root: repo.display().to_string(), ..Default::default() };
        let p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
        let dir = PathBuf::from(&p.runstate_dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (mut w, mut rx) = Wake::start(&home, std::time::Duration::ZERO).unwrap();
        w.track(&p.run_id, &p);
        let append = |f: &str| {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(f)).unwrap();
            f.write_all(b"{}\n").unwrap();
        };
        // What the writes of `f` say, once they have all been told.
        let mut after = |f: &dyn Fn()| {
            while rx.try_recv().is_some() {}
            f();
            std::thread::sleep(Duration::from_millis(50));
            let mut d = Dirty::default();
            while let Some(t) = rx.try_recv() {
                w.absorb(t, &mut d);
            }
            assert!(d.runs.contains(&p.run_id), "the run's change was not seen");
            d.urgent
        };
        assert!(after(&|| append("feat.t.log")), "a task's log made: the live tail knows it after a round");
        assert!(after(&|| append("feat.t.log.at")), "arrival times made");
        assert!(!after(&|| append("feat.t.log")), "a line appended to a known log");
        assert!(!after(&|| append("feat.t.log.at")), "an arrival time appended");
        assert!(after(&|| append("feat.jsonl")), "a journal record");
        assert!(after(&|| append("feat.plan.json")), "a plan");
        assert!(after(&|| append("feat.jsonl")), "a journal record, again");
        assert!(!after(&|| append("feat.t.log")), "a line");
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
