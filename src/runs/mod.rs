//! Runs: the durable tier. Everything here is a pure function of files on
//! disk (see `spec/LAYOUT.md`): a run's append-only journal
//! ([`journal`], `runstate/v1`), the plan it executes ([`plan`]), the
//! per-task logfiles, an ephemeral liveness sidecar ([`liveness`],
//! `liveness/v1`), and the global registry of runs ([`registry`]). The
//! views ([`view`]) are what `runs` prints and what `runwire-serve`'s
//! `GET /runs…` routes answer, computed by the same functions.

pub mod feed;
pub mod human;
pub mod index;
pub mod journal;
pub mod link_prefixes;
pub mod list;
pub mod liveness;
pub mod marks;
pub mod nodes;
pub mod plan;
pub mod record;
pub mod registry;
pub mod remove;
pub mod safe;
pub mod sha256;
pub mod stamp;
pub mod thread;
pub mod view;

use std::path::{Path, PathBuf};

/// FNV-1a for the listing's own tables: keys are ids, file names and paths,
/// short and many, where SipHash's setup cost shows. Not for tables keyed by
/// what a remote peer sends.
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(crate::util::hash::FNV_OFFSET)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = crate::util::hash::fnv1a64_extend(self.0, bytes);
    }
}

pub(crate) type FastHash = std::hash::BuildHasherDefault<Fnv>;

/// Whether `s` is a cluster node's name: `[A-Za-z0-9_-]`, 1 to 64 bytes (no
/// `.`: a hub's run ids are `<node>.<run>`). The one rule of every door that
/// takes one (`--node`, `?node=`, `forwardedProps.node`, the sidecar's
/// flags, a hub's mirror paths), said as [`NODE_RULE`].
pub fn valid_node(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// The node of a hub's run id (`<node>.<run>`), if it names a valid one.
pub fn node_of(run_id: &str) -> Option<&str> {
    run_id.split_once('.').map(|(n, _)| n).filter(|n| valid_node(n))
}

/// [`valid_node`]'s rule, in words for messages.
pub const NODE_RULE: &str = "1 to 64 of A-Z a-z 0-9 _ -";

/// Longest slug, task id or run id accepted.
pub const MAX_ID: usize = 128;

/// Longest run id a registry holds: a node's run id ([`MAX_ID`]) named at a
/// hub as `<node>.<run>` (a node name is at most 64 bytes), so every run a
/// node can record is mirrored (spec/LAYOUT.md, "Ids").
pub const MAX_RUN_ID: usize = MAX_ID + 1 + 64;

/// The strict character set every slug, task id and run id must match before
/// it becomes part of a path: `[A-Za-z0-9._-]`, 1 to [`MAX_ID`] bytes, not
/// starting with a dot (so never `.`, `..` or a hidden file), no `..` inside.
pub fn valid_id(s: &str) -> bool {
    s.len() <= MAX_ID && valid_chars(s)
}

/// An id's characters and shape, whatever its length limit.
fn valid_chars(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && !s.contains("..")
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `s` is a run id a registry may hold: [`valid_id`]'s characters,
/// 1 to [`MAX_RUN_ID`] bytes (a hub's `<node>.<run>`). Slugs, task ids and
/// the runs a node records itself stay within [`MAX_ID`].
pub fn valid_run_id(s: &str) -> bool {
    s.len() <= MAX_RUN_ID && valid_chars(s)
}

/// Checks a run id ([`valid_run_id`]), naming what it is in the error.
pub fn check_run_id(what: &str, s: &str) -> Result<(), String> {
    checked(what, s, "run id", MAX_RUN_ID)
}

/// Checks an id, naming what it is in the error.
pub fn check_id(what: &str, s: &str) -> Result<(), String> {
    checked(what, s, "id", MAX_ID)
}

fn checked(what: &str, s: &str, noun: &str, max: usize) -> Result<(), String> {
    if s.len() <= max && valid_chars(s) {
        return Ok(());
    }
    Err(format!(
        "{what} {s:?} is not a valid {noun}: 1 to {max} characters of A-Z a-z 0-9 . _ -, not starting with a dot, no \"..\""
    ))
}

/// `$HARNESS_HOME`, else `~/.harness`.
pub fn harness_home() -> PathBuf {
    match std::env::var_os("HARNESS_HOME").filter(|v| !v.is_empty()) {
        Some(h) => PathBuf::from(h),
        None => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/")).join(".harness"),
    }
}

/// The files of one run inside its runstate directory.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub dir: PathBuf,
    pub slug: String,
}

impl RunFiles {
    pub fn new(dir: impl Into<PathBuf>, slug: &str) -> RunFiles {
        RunFiles { dir: dir.into(), slug: slug.to_string() }
    }
    /// `<slug>.jsonl`: the journal.
    pub fn journal(&self) -> PathBuf {
        self.dir.join(format!("{}.jsonl", self.slug))
    }
    /// `<slug>.plan.json`: the plan.
    pub fn plan(&self) -> PathBuf {
        self.dir.join(format!("{}.plan.json", self.slug))
    }
    /// `<slug>.live.json`: liveness.
    pub fn live(&self) -> PathBuf {
        self.dir.join(format!("{}.live.json", self.slug))
    }
    /// `<slug>.live.lock`: the lock serializing liveness updates.
    pub fn live_lock(&self) -> PathBuf {
        self.dir.join(format!("{}.live.lock", self.slug))
    }
    /// `<slug>.<task>.log`: a task's raw agent output (the wrapper's stdout).
    pub fn log(&self, task: &str) -> PathBuf {
        self.dir.join(format!("{}.{task}.log", self.slug))
    }
}

/// Below this many items, [`par_map`] uses one thread.
const PAR_MIN: usize = 512;

/// `f` of each item, in order, on a few threads for many items; each
/// thread's calls share one `S`. (A listing of thousands of runs parses
/// their rows and `stat`s their journals: a core each halves the wait.)
pub(crate) fn par_map<T: Sync, R: Send, S: Default>(items: &[T], f: impl Fn(&mut S, &T) -> R + Sync) -> Vec<R> {
    let threads = match items.len() {
        n if n < PAR_MIN => 1,
        _ => std::thread::available_parallelism().map_or(1, |t| t.get()).clamp(1, 4),
    };
    let chunk = items.len().div_ceil(threads).max(1);
    let run = |part: &[T]| {
        let mut s = S::default();
        part.iter().map(|t| f(&mut s, t)).collect::<Vec<R>>()
    };
    std::thread::scope(|s| {
        let mut parts = items.chunks(chunk);
        let first = parts.next();
        let run = &run;
        let rest: Vec<_> = parts.map(|part| s.spawn(move || run(part))).collect();
        let mut out: Vec<R> = first.map(run).unwrap_or_default();
        for h in rest {
            out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        out
    })
}

/// Opens (creating) `path` and takes an exclusive `flock` on it, held while
/// the result lives.
pub(crate) fn lock_exclusive(path: &Path) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    use nix::fcntl::{Flock, FlockArg};
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path)?;
    Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| std::io::Error::from(e))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsynced, then renamed over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    let r = f.write_all(bytes).and_then(|_| f.sync_all()).and_then(|_| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strict() {
        for ok in ["a", "run-1", "abc123def456--my.slug", "T_2"] {
            assert!(valid_id(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a..b", ".hidden", "a/b", "a\0b", "a b", "é", &"x".repeat(MAX_ID + 1)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_run_id_may_be_a_hubs_name_for_a_node_run_at_both_limits() {
        let hub = format!("{}.{}", "n".repeat(64), "r".repeat(MAX_ID));
        assert!(valid_run_id(&hub) && !valid_id(&hub));
        assert!(check_run_id("run", &hub).is_ok());
        let long = format!("{hub}x");
        assert!(!valid_run_id(&long));
        assert!(check_run_id("run", &long).unwrap_err().contains(&MAX_RUN_ID.to_string()));
        for bad in ["", ".", "..", "a..b", ".hidden", "a/b", "a b", "é"] {
            assert!(!valid_run_id(bad), "{bad:?}");
        }
    }
}
