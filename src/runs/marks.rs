//! Open marks, `<home>/index/open/<runId>`: the signal that lets a listing
//! trust the run index without `stat`ing every run (`spec/LAYOUT.md`,
//! "The run index").
//!
//! A mark says "this run's files may differ from its last index row". Every
//! runwire writer of a run (its pointer, plan, journal records, a hub's
//! mirror of its files) holds the run's mark, a shared `flock` on the file,
//! from before its first write until it is done with the run ([`hold`]);
//! the kernel lets go of it when the writer closes it or dies, so a writer
//! killed at any point leaves a mark no one holds, never a changed run
//! without one. A listing reads the runs of marks from their files; a mark
//! no one holds it takes ([`take`], exclusive and non-blocking: no writer
//! can start meanwhile), makes the run's row from its files, makes that
//! row durable, and only then removes the mark. So a run without a mark has
//! not changed since its last row, and a listing may trust that row.
//!
//! A writer holds its marks in this process's table ([`HELD`] at most; the
//! least recently used is let go first, and taken back, with one `open`
//! and `flock`, at its next write). Holding costs a writer one `open` a
//! run, not one a record: a journal append stays an append.

use nix::fcntl::{Flock, FlockArg};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Most marks one process holds at once (each an open file: a server's
/// descriptors are also its clients' and its agents').
pub const HELD: usize = 64;

/// `<home>/index/open`.
pub fn dir(home: &Path) -> PathBuf {
    home.join("index").join("open")
}

fn path(home: &Path, run_id: &str) -> PathBuf {
    dir(home).join(run_id)
}

/// A run's identity for its writers: the home whose index lists it, and its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Run {
    pub home: PathBuf,
    pub id: String,
}

impl Run {
    pub fn new(home: &Path, id: &str) -> Run {
        Run { home: home.to_path_buf(), id: id.to_string() }
    }

    /// Holds this run's mark ([`hold`]).
    pub fn hold(&self) -> io::Result<()> {
        hold(&self.home, &self.id)
    }
}

struct Table {
    held: HashMap<PathBuf, (Flock<File>, u64)>,
    tick: u64,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// Holds `run_id`'s mark for this process (made if absent), from now until
/// [`release`], the process's exit, or (past [`HELD`] marks) until it is the
/// least recently used. Call it before every write that changes what a
/// listing shows of the run. An error (the mark could not be made: a full
/// disk, no permission) must stop the write: a change without a mark would
/// be trusted unseen.
pub fn hold(home: &Path, run_id: &str) -> io::Result<()> {
    if !super::valid_run_id(run_id) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("run id {run_id:?} is not a valid run id")));
    }
    let p = path(home, run_id);
    if Table::with(|t| t.touch(&p)) {
        return Ok(());
    }
    // Locked with the table let go: a listing taking this run's mark makes
    // this wait (a few ms), and the process's other writers must not.
    let f = lock_current(&p)?;
    Table::with(|t| {
        // Another thread may have taken it meanwhile: one hold is kept.
        if !t.touch(&p) {
            if t.held.len() >= HELD {
                if let Some(old) = t.held.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone()) {
                    t.held.remove(&old);
                }
            }
            t.held.insert(p, (f, t.tick));
        }
    });
    Ok(())
}

impl Table {
    /// `f` on this process's table.
    fn with<R>(f: impl FnOnce(&mut Table) -> R) -> R {
        let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        f(t.get_or_insert_with(|| Table { held: HashMap::new(), tick: 0 }))
    }

    /// Whether `p` is held; the clock moves on, and `p`'s use with it.
    fn touch(&mut self, p: &Path) -> bool {
        self.tick += 1;
        let tick = self.tick;
        self.held.get_mut(p).map(|h| h.1 = tick).is_some()
    }
}

/// A shared lock on the file at `p` that is still the one at `p` once
/// locked (a listing removes a mark while it holds it exclusively: a file
/// opened just before that removal is locked after it, and made again).
fn lock_current(p: &Path) -> io::Result<Flock<File>> {
    for _ in 0..100 {
        let f = match nofollow().create(true).truncate(false).write(true).open(p) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(p.parent().unwrap_or(Path::new(".")))?;
                continue;
            }
            Err(e) => return Err(e),
        };
        let f = Flock::lock(f, FlockArg::LockShared).map_err(|(_, e)| io::Error::from(e))?;
        let mine = f.metadata()?;
        if std::fs::metadata(p).is_ok_and(|m| m.ino() == mine.ino() && m.dev() == mine.dev()) {
            return Ok(f);
        }
    }
    Err(io::Error::other(format!("{}: removed again and again while being held", p.display())))
}

/// Options that never follow a symlink put where a mark goes (a mark is
/// only ever a file of its own; one that is not is refused: `ELOOP`).
fn nofollow() -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits());
    o
}

/// Lets go of this process's hold of `run_id`'s mark (a writer done with
/// the run; the next listing makes its row and removes the mark).
pub fn release(home: &Path, run_id: &str) {
    let p = path(home, run_id);
    Table::with(|t| t.held.remove(&p));
}

/// Makes `run_id`'s mark without holding it: a run whose files changed
/// without one (written by something other than runwire's writers), or
/// that can have no row, which listings must read from its files.
pub fn put(home: &Path, run_id: &str) -> io::Result<()> {
    let p = path(home, run_id);
    let open = || nofollow().create(true).truncate(false).write(true).open(&p);
    match open() {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir(home))?;
            open().map(|_| ())
        }
        Err(e) => Err(e),
    }
}

/// The ids of the marked runs.
pub fn scan(home: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir(home)) else { return Vec::new() };
    rd.flatten().filter_map(|e| e.file_name().to_str().filter(|n| super::valid_run_id(n)).map(str::to_string)).collect()
}

/// A mark a listing took: no writer holds it, and none can start while
/// this lives (a writer's [`hold`] waits).
pub struct Taken {
    lock: Flock<File>,
    path: PathBuf,
    pub id: String,
}

/// Takes `run_id`'s mark when no one holds it (`None`: a writer does, or
/// there is no mark).
pub fn take(home: &Path, run_id: &str) -> Option<Taken> {
    let p = path(home, run_id);
    let f = nofollow().write(true).open(&p).ok()?;
    let lock = Flock::lock(f, FlockArg::LockExclusiveNonblock).ok()?;
    Some(Taken { lock, path: p, id: run_id.to_string() })
}

impl Taken {
    /// Removes the mark (the run's row made from its files since it was
    /// taken is durable in the index), then lets go of it.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.lock);
    }
}

/// The run unit tests name when they append to a journal of no home's
/// (its mark is made in one scratch home of their own).
#[cfg(test)]
pub(crate) fn test_run() -> Run {
    Run::new(&std::env::temp_dir().join("rw-unit-marks"), "t")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_mark_cannot_be_taken_and_a_released_one_is_taken_and_removed() {
        let home = std::env::temp_dir().join(format!("rw-marks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        hold(&home, "r1").unwrap();
        hold(&home, "r1").unwrap();
        assert_eq!(scan(&home), vec!["r1".to_string()]);
        assert!(take(&home, "r1").is_none(), "held by this process");
        release(&home, "r1");
        let t = take(&home, "r1").expect("no one holds it");
        t.remove();
        assert!(scan(&home).is_empty());
        // Held again after its removal: made again.
        hold(&home, "r1").unwrap();
        assert_eq!(scan(&home), vec!["r1".to_string()]);
        release(&home, "r1");
        put(&home, "r2").unwrap();
        assert!(take(&home, "r2").is_some());
        assert!(hold(&home, "../x").is_err());
        // A symlink where a mark goes is never followed (nothing made through it).
        std::os::unix::fs::symlink(home.join("elsewhere"), dir(&home).join("r3")).unwrap();
        assert!(hold(&home, "r3").is_err());
        assert!(put(&home, "r3").is_err());
        assert!(take(&home, "r3").is_none());
        assert!(!home.join("elsewhere").exists());
        std::fs::remove_dir_all(&home).unwrap();
    }
}
