//! Removing runs, safely: the one removal path of `runs reap`, `runs rm`
//! and `runs prune`.
//!
//! Whatever is deleted under `$HARNESS_HOME` is deleted beneath a directory
//! descriptor: each directory below the home (`runs/`, `journals/`,
//! `serve/runstate/`) is opened relative to the one before with
//! `O_NOFOLLOW | O_DIRECTORY`, and files are removed with `unlinkat`. So a
//! directory replaced by a symlink (`journals/` pointing at someone's
//! files) is refused, never followed, and a file that is a symlink is
//! removed itself, never what it points to. The home itself is the trust
//! anchor (it may be a symlink, as `~/.harness` often is).
//!
//! A run is removed only when nothing runs it: see [`live`].

use super::registry::Registry;
use super::view::Loaded;
use super::{liveness, RunFiles};
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

pub use super::safe::{open_below as open_dir, remove, unlink};

/// What removing one run did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    pub run_id: String,
    pub slug: String,
    /// The run's status when it was removed.
    pub status: String,
    /// Files removed besides the pointer, relative to `$HARNESS_HOME`.
    pub files: Vec<String>,
    /// What could not be removed, and why (a directory that is a symlink,
    /// a permission). A run directory outside `$HARNESS_HOME/serve` is its
    /// owner's and is never touched: not listed here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
}

/// Regular files some process holds open, by (device, inode), with the
/// pid of one that does: read from `/proc/*/fd` (another user's processes
/// cannot be read; their files are not seen). A server's chat turn or a
/// supervisor's task keeps its log open while it runs.
pub fn open_files() -> HashMap<(u64, u64), i32> {
    use std::os::unix::fs::MetadataExt;
    let mut out = HashMap::new();
    let me = std::process::id() as i32;
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            // The magic link, followed: the open file itself, wherever it is.
            if let Ok(m) = std::fs::metadata(fd.path()) {
                if m.is_file() {
                    out.entry((m.dev(), m.ino())).or_insert(pid);
                }
            }
        }
    }
    out
}

/// Why `l` must not be removed now, if it must not: its owner ([`owner`])
/// is alive, however long the run has been quiet (removed, a live
/// supervisor lost its socket and owner record, and nobody could reach
/// it); a process in its liveness sidecar is alive; a process holds its
/// journal or a task log open (`open`, from [`open_files`]); it waits for a
/// person (`needs_input`, `paused`, `idle`) and its owner is not known to
/// be gone; or it is `running` or `registered` and its files changed less
/// than `idle_ms` ago. `last_ms` is the run's latest activity.
pub fn live(
    l: &Loaded,
    status: &str,
    last_ms: i64,
    now_ms: i64,
    idle_ms: i64,
    open: &HashMap<(u64, u64), i32>,
    owner: Option<&crate::util::procid::Ident>,
) -> Option<String> {
    let owner_gone = match owner.map(|i| i.mismatch()) {
        Some(None) => {
            let pid = owner.map_or(0, |i| i.pid);
            return Some(format!("its owner, process {pid}, is live (it supervises or records the run)"));
        }
        Some(Some(_)) => true,
        None => false,
    };
    if let Some(d) = &l.dir {
        let lv = liveness::get(&l.files);
        if let Some((t, pid)) =
            lv.tasks.iter().find_map(|(t, e)| e.pid.filter(|&p| liveness::pid_alive(p)).map(|p| (t, p)))
        {
            return Some(format!("task {t}'s process {pid} is alive"));
        }
        for name in run_file_names(l) {
            let Ok(st) =
                nix::sys::stat::fstatat(Some(d.as_raw_fd()), name.as_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            if let Some(pid) = open.get(&(st.st_dev, st.st_ino)) {
                return Some(format!("process {pid} has {name} open"));
            }
        }
    }
    match status {
        // Nobody is left to answer or resume it: its owner is gone.
        "needs_input" | "paused" | "idle" if !owner_gone => Some(format!("it is {status}")),
        "running" | "registered" if now_ms - last_ms < idle_ms => {
            Some(format!("it is {status} and changed {} ago", super::human::age(now_ms - last_ms)))
        }
        _ => None,
    }
}

/// The node whose run `runstate_dir` is when it is a hub's mirror of it
/// (`$HARNESS_HOME/cluster/nodes/<node>/<run>`, spec/CLUSTER.md): such a
/// run is not this home's to remove. Removed here, it would only vanish
/// from this hub while it stays in the cluster (and at every other hub);
/// it goes everywhere when it is removed at its node.
pub fn mirrored_from(home: &Path, runstate_dir: &str) -> Option<String> {
    let dir = Path::new(runstate_dir);
    let nodes = dir.parent()?.parent()?;
    (nodes == home.join("cluster").join("nodes")).then_some(())?;
    let node = dir.parent()?.file_name()?.to_str()?;
    // A node name as the cluster spells them; anything else is no mirror of ours.
    super::valid_node(node).then(|| node.to_string())
}

/// The process the run's owner record names (`$HARNESS_HOME/sock/<runId>.owner.json`,
/// written by its supervisor or by the server that records it), if it has
/// one: alive, it holds the run; gone (a crash, a SIGKILL), nobody answers
/// or resumes it, whatever its journal last said ([`live`]).
pub fn owner(home: &Path, run_id: &str) -> Option<crate::util::procid::Ident> {
    let bytes = super::safe::read_in(&home.join("sock"), &format!("{run_id}.owner.json"), 1 << 20).ok()?;
    let v = serde_json::from_slice::<serde_json::Value>(&bytes).ok()?;
    serde_json::from_value::<crate::util::procid::Ident>(v.get("supervisor")?.clone()).ok()
}

/// The files of a run that live in `$HARNESS_HOME/serve/runstate` (the
/// server's own runs), by name: what `runs rm` removes with the pointer.
/// A run directory elsewhere (a repository's `runstate/`) is its owner's
/// and is left alone.
fn run_file_names(l: &Loaded) -> Vec<String> {
    let f = RunFiles::new("", &l.pointer.slug);
    let name = |p: std::path::PathBuf| p.display().to_string();
    let slug = &l.pointer.slug;
    let mut names =
        vec![name(f.journal()), name(f.plan()), name(f.live()), name(f.live_lock()), format!("{slug}.steer.jsonl")];
    for t in l.task_ids() {
        let log = name(f.log(&t));
        names.push(format!("{log}.at"));
        names.push(log);
        names.push(format!("{slug}.{t}.gate.log"));
        names.push(format!("{slug}.{t}.review.log"));
    }
    names
}

/// Removes a run the caller found not [`live`]: its journal link, its
/// supervisor socket, its files when they are the server's own (under
/// `$HARNESS_HOME/serve/runstate`), then its pointer, all beneath the home
/// (see the module's doc). With `dry_run`, only says what it would do.
pub fn remove_run(reg: &Registry, l: &Loaded, status: &str, dry_run: bool) -> io::Result<Removed> {
    let home = reg.home();
    let id = l.pointer.run_id.as_str();
    let mut out = Removed {
        run_id: id.to_string(),
        slug: l.pointer.slug.clone(),
        status: status.to_string(),
        ..Removed::default()
    };
    // What cannot be removed (a symlinked directory, a permission) is left, and said.
    let try_remove = |dirs: &[&str], name: &str, out: &mut Removed| {
        let rel = dirs.iter().chain([&name]).copied().collect::<Vec<_>>().join("/");
        if dry_run {
            let at = open_dir(home, dirs);
            let exists = at.as_ref().ok().and_then(Option::as_ref).is_some_and(|d| {
                nix::sys::stat::fstatat(Some(d.as_raw_fd()), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
            });
            match at {
                Err(e) => out.kept.push(e.to_string()),
                Ok(_) if exists => out.files.push(rel),
                Ok(_) => {}
            }
            return;
        }
        match remove(home, dirs, name) {
            Ok(true) => out.files.push(rel),
            Ok(false) => {}
            Err(e) => out.kept.push(e.to_string()),
        }
    };
    try_remove(&["journals"], &super::registry::link_name(id), &mut out);
    try_remove(&["sock"], &format!("{id}.sock"), &mut out);
    try_remove(&["sock"], &format!("{id}.owner.json"), &mut out);
    let server_dir = home.join("serve").join("runstate");
    // Only the server's own run of the slug owns those files: a run
    // registered elsewhere that names the server's directory (refused at
    // registration now, possible before) takes its pointer and link only.
    let root = home.join("serve").display().to_string();
    let own = l.pointer.run_id == super::registry::run_id(&root, &root, &l.pointer.slug);
    if Path::new(&l.pointer.runstate_dir) == server_dir && own {
        for name in run_file_names(l) {
            try_remove(&["serve", "runstate"], &name, &mut out);
        }
    }
    // The pointer last: until it goes, the run still lists and can be removed again.
    if !dry_run {
        remove(home, &["runs"], &format!("{id}.json"))?;
    }
    Ok(out)
}

/// The run's latest activity, epoch ms: the newest modification time of its
/// pointer, journal and task logs (as `stat` says; nothing is read).
pub fn last_activity_ms(reg: &Registry, l: &Loaded) -> i64 {
    let ms = |st: nix::sys::stat::FileStat| st.st_mtime * 1000 + st.st_mtime_nsec / 1_000_000;
    let mut last = nix::sys::stat::lstat(&reg.path(&l.pointer.run_id)).map_or(0, ms);
    if let Some(d) = &l.dir {
        let slug = &l.pointer.slug;
        let names =
            std::iter::once(format!("{slug}.jsonl")).chain(l.task_ids().into_iter().map(|t| format!("{slug}.{t}.log")));
        for n in names {
            let st = nix::sys::stat::fstatat(Some(d.as_raw_fd()), n.as_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW);
            last = last.max(st.map_or(0, ms));
        }
    }
    last
}

/// Appends a `removed` event (the run's summary as it was, `type`,
/// `previous` and `ts`) to the change feed, under the feed's lock, in one
/// write, as every feed writer does (`spec/LAYOUT.md`). Only onto a feed
/// that exists: the first writer of a home starts it from now, and a log
/// it did not begin would make it take every journal's history as news.
pub fn feed_removed(home: &Path, mut summary: serde_json::Value, ts: &str) -> io::Result<()> {
    use std::io::Write;
    let paths = super::feed::Paths::at(home);
    let started = std::fs::metadata(&paths.log).is_ok_and(|m| m.len() > 0) || paths.state.exists();
    if !started {
        return Ok(());
    }
    if let Some(o) = summary.as_object_mut() {
        let status = o.get("status").cloned().unwrap_or_default();
        o.insert("type".into(), "removed".into());
        o.insert("previous".into(), status);
        o.insert("ts".into(), ts.into());
    }
    let mut line = serde_json::to_vec(&summary).map_err(io::Error::other)?;
    line.push(b'\n');
    let _held = super::lock_exclusive(&paths.lock)?;
    let mut log = std::fs::OpenOptions::new().append(true).open(&paths.log)?;
    log.write_all(&line)
}

#[cfg(test)]
mod mirror_tests {
    use super::mirrored_from;
    use std::path::Path;

    #[test]
    fn a_hubs_mirror_of_a_nodes_run_is_named_by_its_node_and_nothing_else_is() {
        let home = Path::new("/h");
        assert_eq!(mirrored_from(home, "/h/cluster/nodes/alpha/0123456789ab--x").as_deref(), Some("alpha"));
        for dir in [
            "/h/serve/runstate",
            "/repo/runstate",
            "/h/cluster/nodes/alpha",
            "/h/cluster/nodes/al.pha/r",
            "/other/cluster/nodes/alpha/r",
            "/h/cluster/nodes/alpha/r/deeper",
        ] {
            assert_eq!(mirrored_from(home, dir), None, "{dir}");
        }
    }
}
