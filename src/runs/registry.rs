//! The global registry: one pointer file per run,
//! `$HARNESS_HOME/runs/<runId>.json` (`spec/registry-pointer.schema.json`),
//! with `runId = hex(sha256(repoRoot + "\0" + worktree))[:12] + "--" + slug`
//! so equal slugs in two repos or worktrees never collide. Readers never
//! delete a pointer: one whose `runstateDir` is gone is listed as `missing`;
//! [`Registry::reap`] (`runs reap`) removes such pointers, on request.
//!
//! Beside each pointer, `$HARNESS_HOME/journals/<runId>.jsonl` is a link to
//! the run's journal (`<runstateDir>/<slug>.jsonl`, created empty at
//! registration): a hard link (the journal's own inode, so one `stat` gives
//! its time) or, across filesystems, a symlink. A listing learns a run's
//! latest activity from it with no read of the pointer. The link is a hint,
//! only ever `stat`ed: the journal is always opened through the pointer's
//! `runstateDir`, and for the runs a listing shows, a link that is not the
//! journal (another inode) is not used.

use super::safe::Unreadable;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pointer {
    pub run_id: String,
    pub slug: String,
    pub repo_root: String,
    pub project: String,
    pub repo: String,
    pub branch: Option<String>,
    pub worktree: String,
    pub runstate_dir: String,
    /// RFC 3339 UTC.
    pub created: String,
}

/// A pointer's fields, borrowed. Serializes as a [`Pointer`] does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fields<'a> {
    pub run_id: &'a str,
    pub slug: &'a str,
    pub repo_root: &'a str,
    pub project: &'a str,
    pub repo: &'a str,
    pub branch: Option<&'a str>,
    pub worktree: &'a str,
    pub runstate_dir: &'a str,
    pub created: &'a str,
}

impl Pointer {
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            run_id: &self.run_id,
            slug: &self.slug,
            repo_root: &self.repo_root,
            project: &self.project,
            repo: &self.repo,
            branch: self.branch.as_deref(),
            worktree: &self.worktree,
            runstate_dir: &self.runstate_dir,
            created: &self.created,
        }
    }
}

/// The run id of `slug` in this repo root and worktree.
pub fn run_id(repo_root: &str, worktree: &str, slug: &str) -> String {
    let mut key = repo_root.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(worktree.as_bytes());
    format!("{}--{slug}", &super::sha256::hex(&key)[..12])
}

/// What `register` needs; unset fields get defaults from the repo root.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub slug: String,
    pub repo_root: String,
    pub worktree: Option<String>,
    pub project: Option<String>,
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub runstate_dir: Option<String>,
}

impl NewRun {
    /// The pointer: worktree defaults to the repo root, project and repo to
    /// its last path component, runstateDir to `<worktree>/runstate`.
    pub fn pointer(&self, created: String) -> Result<Pointer, String> {
        super::check_id("slug", &self.slug)?;
        if self.repo_root.is_empty() || self.repo_root.contains('\0') {
            return Err("--repo-root must be a non-empty path".into());
        }
        let worktree = self.worktree.clone().unwrap_or_else(|| self.repo_root.clone());
        let base = Path::new(&self.repo_root)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.repo_root.clone());
        let runstate_dir =
            self.runstate_dir.clone().unwrap_or_else(|| Path::new(&worktree).join("runstate").display().to_string());
        Ok(Pointer {
            run_id: run_id(&self.repo_root, &worktree, &self.slug),
            slug: self.slug.clone(),
            project: self.project.clone().unwrap_or_else(|| base.clone()),
            repo: self.repo.clone().unwrap_or(base),
            branch: self.branch.clone(),
            repo_root: self.repo_root.clone(),
            worktree,
            runstate_dir,
            created,
        })
    }
}

/// The registry directory under a harness home.
#[derive(Debug, Clone)]
pub struct Registry {
    pub dir: PathBuf,
}

/// A pointer removed (or, in a dry run, to be removed) by [`Registry::reap`]
/// because its runstate directory is gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Reaped {
    pub run_id: String,
    pub runstate_dir: String,
    /// The journal link could not be removed (why): it was left.
    pub kept: Option<String>,
}

/// Checks a pointer read from `<run_id>.json` like anything from a URL:
/// it names itself, its slug is an id, its runstate directory is absolute.
pub fn check_pointer(p: Fields, run_id: &str) -> Result<(), String> {
    if p.run_id != run_id {
        return Err(format!("names runId {:?}, not its file name's {run_id:?}", p.run_id));
    }
    super::check_id("slug", p.slug)?;
    if !Path::new(&p.runstate_dir).is_absolute() || p.runstate_dir.contains('\0') {
        return Err(format!("runstateDir {:?} is not an absolute path", p.runstate_dir));
    }
    Ok(())
}

/// Parses and checks pointer bytes read from `<run_id>.json`.
pub fn parse_pointer(bytes: &[u8], run_id: &str) -> Result<Pointer, String> {
    let p: Pointer = serde_json::from_slice(bytes).map_err(|e| format!("not a registry pointer: {e}"))?;
    check_pointer(p.fields(), run_id)?;
    Ok(p)
}

/// The journal link's file name: `<run_id>.jsonl`.
pub fn link_name(run_id: &str) -> String {
    format!("{run_id}.jsonl")
}

/// Where a run's journal link points: the journal its pointer names,
/// `<runstateDir>/<slug>.jsonl`, exactly as [`super::RunFiles::journal`] builds it.
pub fn link_target(p: &Pointer) -> PathBuf {
    super::RunFiles::new(&p.runstate_dir, &p.slug).journal()
}

/// Whether two pointers name one journal: the same path, or paths that
/// resolve to one file (a runstate directory reached through a symlink).
fn same_journal(a: &Pointer, b: &Pointer) -> bool {
    let (a, b) = (link_target(a), link_target(b));
    a == b || a.canonicalize().is_ok_and(|a| b.canonicalize().is_ok_and(|b| a == b))
}

impl Registry {
    /// `<home>/runs`.
    pub fn at(home: &Path) -> Registry {
        Registry { dir: home.join("runs") }
    }

    pub fn path(&self, run_id: &str) -> PathBuf {
        self.dir.join(format!("{run_id}.json"))
    }

    /// `<home>/journals`: the journal links.
    pub fn links_dir(&self) -> PathBuf {
        self.dir.with_file_name("journals")
    }

    /// `<home>/journals/<run_id>.jsonl`: the run's journal link.
    pub fn link_path(&self, run_id: &str) -> PathBuf {
        self.links_dir().join(link_name(run_id))
    }

    /// Links the run's journal (creating it empty when it does not exist)
    /// from `journals/<run_id>.jsonl`: a hard link, or a symlink where a hard
    /// link cannot be made (another filesystem). Temp name + rename, so a
    /// reader sees the old link or the new one.
    /// Errors name the file they are about: the journal, or the link.
    fn link(&self, p: &Pointer) -> std::io::Result<()> {
        let at =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", self.link_path(&p.run_id).display()));
        self.link_unnamed(p).map_err(at)?
    }

    /// [`Registry::link`]; `Ok(Err(_))` for a journal that cannot be created.
    fn link_unnamed(&self, p: &Pointer) -> std::io::Result<std::io::Result<()>> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        // Two registrations of one run in one process (two threads) never share a temp name.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = self.links_dir();
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            link_name(&p.run_id),
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&tmp);
        let journal = link_target(p);
        // Never blocks (a FIFO put there) nor follows a symlink; only a regular file is linked.
        let nonblock = (nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOFOLLOW).bits();
        let created = std::fs::OpenOptions::new().append(true).create(true).custom_flags(nonblock).open(&journal);
        // Something that is not a regular file has the journal's name (a link,
        // a FIFO, a directory): linked by name, and every reader refuses it
        // ("unreadable", spec/LAYOUT.md). Any other failure is the
        // registration's: a run whose journal cannot be created is not
        // registered with a dangling link.
        if let Err(e) = &created {
            if !matches!(e.raw_os_error(), Some(nix::libc::ELOOP | nix::libc::ENXIO | nix::libc::EISDIR)) {
                return Ok(Err(std::io::Error::new(e.kind(), format!("{}: {e}", journal.display()))));
            }
        }
        let regular = created.and_then(|f| f.metadata()).is_ok_and(|m| m.file_type().is_file());
        if !regular || std::fs::hard_link(&journal, &tmp).is_err() {
            std::os::unix::fs::symlink(&journal, &tmp)?;
        }
        std::fs::rename(&tmp, self.link_path(&p.run_id)).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        // A rename onto a hard link of the same file (the run registered
        // again: a restart) does nothing and succeeds (rename(2)), leaving
        // the temp name: one more link to the journal per start, which
        // `runs rm` never sees. Gone either way after a rename.
        let _ = std::fs::remove_file(&tmp);
        Ok(Ok(()))
    }

    /// `$HARNESS_HOME/registry.lock`: held across a registration's owner
    /// check and its writes ([`Registry::register`]).
    pub fn lock_path(&self) -> PathBuf {
        self.home().join("registry.lock")
    }

    /// Creates the runstate directory the pointer names (so no reader ever
    /// finds a fresh registration `missing`), then the journal link, then
    /// writes (or replaces) the pointer atomically: a reader that finds the
    /// pointer finds its link.
    ///
    /// Refused (`InvalidInput`) for a pointer whose ids or runstate
    /// directory fail [`check_pointer`] (every name from outside, a node's
    /// pointer at the hub included, is checked here before a path is built
    /// from it), and (`AlreadyExists`) when another registered run owns the
    /// journal it names ([`Registry::owner_of`]): two runs never share a
    /// runstate directory's files.
    ///
    /// The owner check and the writes are one step: both under an exclusive
    /// `flock` on [`Registry::lock_path`], so of registrations of one slug in
    /// one runstate directory made at once (two worktrees sharing it), one
    /// wins and every other is refused as a later one is, with nothing written.
    pub fn register(&self, p: &Pointer) -> std::io::Result<()> {
        self.register_checked(p, super::check_id("runId", &p.run_id), false)
    }

    /// [`Registry::register`] that may point a registered run id at another
    /// journal (its runstate directory moved: `runs register --repoint`);
    /// the journal it had is left where it is, no longer the run's.
    pub fn repoint(&self, p: &Pointer) -> std::io::Result<()> {
        self.register_checked(p, super::check_id("runId", &p.run_id), true)
    }

    /// [`Registry::register`] for a hub's mirror of a node's run: its id is
    /// `<node>.<run>`, up to [`super::MAX_RUN_ID`] bytes, so a node's run
    /// whose own id is at the [`super::MAX_ID`] limit is mirrored too.
    pub fn register_mirror(&self, p: &Pointer) -> std::io::Result<()> {
        let named = super::check_run_id("runId", &p.run_id).and_then(|()| match super::node_of(&p.run_id) {
            Some(_) => Ok(()),
            None => Err(format!("runId {:?} does not name a node (<node>.<run>)", p.run_id)),
        });
        self.register_checked(p, named, false)
    }

    /// `repoint`: a run id registered with another journal may be pointed
    /// at this one; else that is refused (`AlreadyExists`), nothing written.
    fn register_checked(&self, p: &Pointer, id_checked: Result<(), String>, repoint: bool) -> std::io::Result<()> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        id_checked.map_err(bad)?;
        check_pointer(p.fields(), &p.run_id).map_err(bad)?;
        std::fs::create_dir_all(&self.dir)?;
        let _one_at_a_time = super::lock_exclusive(&self.lock_path())
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", self.lock_path().display())))?;
        // A retried registration never re-points its run: the run's journal
        // would be orphaned, its history gone from every view.
        if let Some(had) = self.read(&p.run_id).ok().filter(|had| !repoint && !same_journal(had, p)) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "run {} is registered with its journal at {}: registering it with {} would re-point it and orphan that journal (give its runstate directory {}, or another --slug for a new run; `runs rm {}` first, or --repoint if the runstate directory moved)",
                    p.run_id,
                    link_target(&had).display(),
                    link_target(p).display(),
                    had.runstate_dir,
                    p.run_id
                ),
            ));
        }
        if let Some(owner) = self.owner_of(p) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "slug {:?} in {} is already owned by run {owner}: a runstate directory's files belong to one run (use another --slug or --runstate-dir, or `runs rm {owner}` first)",
                    p.slug, p.runstate_dir
                ),
            ));
        }
        // Held before the pointer changes: listings read the run from its
        // files until this process lets go (`super::marks`).
        super::marks::hold(self.home(), &p.run_id)?;
        std::fs::create_dir_all(&p.runstate_dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.runstate_dir)))?;
        self.link(p)?;
        let bytes = serde_json::to_vec_pretty(p).map_err(std::io::Error::other)?;
        super::write_atomic(&self.path(&p.run_id), &bytes)
    }

    /// The registered run whose journal `journal` is (its link in
    /// `journals/` is that file), looked through the links once: for a
    /// writer handed a journal's path alone (`runwire-session --journal`).
    pub fn run_of_journal(&self, journal: &Path) -> Option<String> {
        let jm = std::fs::symlink_metadata(journal).ok()?;
        self.linked_to(journal, &jm, |_| true)
    }

    /// The first registered run (its pointer exists) that `want` accepts
    /// and whose link in `journals/` is `journal` (`jm` its metadata): a
    /// hard link of the same file, or a symlink to it.
    fn linked_to(&self, journal: &Path, jm: &std::fs::Metadata, want: impl Fn(&str) -> bool) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let same = |m: &std::fs::Metadata| m.dev() == jm.dev() && m.ino() == jm.ino();
        for e in std::fs::read_dir(self.links_dir()).ok()?.flatten() {
            let name = e.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else { continue };
            if !want(id) || !super::valid_run_id(id) {
                continue;
            }
            let linked = match std::fs::symlink_metadata(e.path()) {
                // A symlink (another filesystem): to the journal's path, or
                // to another spelling of the same file.
                Ok(m) if m.file_type().is_symlink() => {
                    std::fs::read_link(e.path()).is_ok_and(|t| t == journal)
                        || std::fs::metadata(e.path()).is_ok_and(|m| same(&m))
                }
                Ok(m) => same(&m),
                Err(_) => false,
            };
            if linked && self.path(id).exists() {
                return Some(id.to_string());
            }
        }
        None
    }

    /// The registered run, other than `p`'s, whose journal link is the
    /// journal `p` names (`<runstateDir>/<slug>.jsonl`): that run owns the
    /// slug in that directory. Cheap in the usual cases: no journal yet, or
    /// the journal already linked as `p`'s. Otherwise the links are looked
    /// through only when another could be the journal's: it has another
    /// hard link, or it is on another filesystem than `journals/` (then
    /// links are symlinks to its path).
    pub fn owner_of(&self, p: &Pointer) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let journal = link_target(p);
        let jm = std::fs::symlink_metadata(&journal).ok()?;
        let same = |m: &std::fs::Metadata| m.dev() == jm.dev() && m.ino() == jm.ino();
        if std::fs::metadata(self.link_path(&p.run_id)).is_ok_and(|m| same(&m)) {
            return None;
        }
        let links = self.links_dir();
        let other_fs = std::fs::metadata(&links).is_ok_and(|m| m.dev() != jm.dev());
        if jm.nlink() < 2 && !other_fs {
            return None;
        }
        self.linked_to(&journal, &jm, |id| id != p.run_id)
    }

    /// One pointer, read safely and checked. The id must already have
    /// passed [`super::valid_id`]. `Err` with `absent` when there is none.
    pub fn read(&self, run_id: &str) -> Result<Pointer, Unreadable> {
        let name = format!("{run_id}.json");
        let bytes = super::safe::read_in(&self.dir, &name, super::safe::MAX_POINTER)?;
        parse_pointer(&bytes, run_id).map_err(|why| Unreadable::new(name, why))
    }

    /// The run ids with a pointer file, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        Registry::scan(&self.dir, |id, _| ids.push(id.to_string()));
        ids.sort_unstable();
        ids
    }

    /// Calls `f` with each run id that has a pointer file in the registry
    /// directory `dir`, and the file's inode, in directory order, as the
    /// directory is read.
    pub fn scan(dir: &Path, mut f: impl FnMut(&str, u64)) {
        use std::os::unix::fs::DirEntryExt;
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let name = e.file_name();
            if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) {
                if super::valid_run_id(id) {
                    f(id, e.ino());
                }
            }
        }
    }

    /// `$HARNESS_HOME`: where the registry directory is.
    pub fn home(&self) -> &Path {
        self.dir.parent().unwrap_or(Path::new("."))
    }

    /// Removes (unless `dry_run`) every pointer whose runstate directory is
    /// gone (`ENOENT`: not one that cannot be read, which may come back),
    /// and says which. Unreadable pointers are left alone. Removal goes
    /// through [`super::safe::remove`]: nothing is deleted through a symlink.
    pub fn reap(&self, dry_run: bool) -> std::io::Result<Vec<Reaped>> {
        let mut out = Vec::new();
        for id in self.ids() {
            let Ok(p) = self.read(&id) else { continue };
            match std::fs::metadata(&p.runstate_dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                _ => continue,
            }
            let mut kept = None;
            if !dry_run {
                // The link first: a pointer left without one still lists (by reading it).
                // A link that cannot be removed (journals/ a symlink) is left, and said.
                if let Err(e) = super::safe::remove(self.home(), &["journals"], &link_name(&id)) {
                    kept = Some(e.to_string());
                }
                super::safe::remove(self.home(), &["runs"], &format!("{id}.json"))?;
            }
            out.push(Reaped { run_id: p.run_id, runstate_dir: p.runstate_dir, kept });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_separate_worktrees() {
        let a = run_id("/r", "/r", "s");
        let b = run_id("/r", "/r/wt", "s");
        assert_ne!(a, b);
        assert!(a.ends_with("--s") && a.len() == 15 && super::super::valid_id(&a));
        // hex(sha256("/r\0/r"))[:12], computed independently (python hashlib).
        assert_eq!(&a[..12], &super::super::sha256::hex(b"/r\0/r")[..12]);
    }

    /// A hub's mirror may hold `<node>.<run>` past [`super::super::MAX_ID`];
    /// a run registered locally may not, nor a mirror id naming no node.
    #[test]
    fn a_mirror_takes_a_hubs_long_id_and_a_local_run_does_not() {
        let home = std::env::temp_dir().join(format!("rw-reg-mirror-{}", std::process::id()));
        let reg = Registry::at(&home);
        let pointer = |id: &str| Pointer {
            run_id: id.into(),
            slug: "s".into(),
            repo_root: "/r".into(),
            project: "r".into(),
            repo: "r".into(),
            branch: None,
            worktree: "/r".into(),
            runstate_dir: home.join("state").join(id).display().to_string(),
            created: "2026-01-01T00:00:00.000Z".into(),
        };
        let long = format!("{}.{}", "n".repeat(64), "r".repeat(super::super::MAX_ID));
        let e = reg.register(&pointer(&long)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        reg.register_mirror(&pointer(&long)).unwrap();
        assert_eq!(reg.read(&long).unwrap().run_id, long);
        assert_eq!(reg.ids(), vec![long.clone()]);
        for bad in [format!("{long}x"), format!("{}.run", "n".repeat(65)), "norun".into()] {
            let e = reg.register_mirror(&pointer(&bad)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
        std::fs::remove_dir_all(&home).unwrap();
    }
}
