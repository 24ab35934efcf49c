//! `liveness/v1`: `<slug>.live.json`, which process runs which task right
//! now (`spec/liveness.schema.json`). Mutable and ephemeral: never the
//! source of truth (where it disagrees with the journal, the journal wins)
//! and deleting it loses only liveness. It lies in the run's worktree, where
//! the run's agent can write: control never connects to its `sock` nor
//! signals its `pgid` (`spec/SUPERVISOR.md`, "Trust"); they are for people.
//!
//! Every update takes an exclusive `flock` on `<slug>.live.lock`, reads,
//! changes, and replaces the file by rename, so concurrent setters lose no
//! update and readers never see a half-written file.

use super::journal::Journal;
use super::RunFiles;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const VERSION: &str = "liveness/v1";

/// One task's process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pgid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub logfile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub state: Option<String>,
    /// RFC 3339 UTC.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub started_ts: Option<String>,
}

impl Entry {
    /// Copies every field `patch` sets.
    pub fn merge(&mut self, patch: Entry) {
        macro_rules! take {
            ($($f:ident),*) => { $( if patch.$f.is_some() { self.$f = patch.$f; } )* };
        }
        take!(pid, pgid, session_id, logfile, state, started_ts);
    }
}

/// The whole sidecar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Liveness {
    pub v: String,
    /// The supervisor's control socket.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sock: Option<String>,
    #[serde(default)]
    pub tasks: BTreeMap<String, Entry>,
}

impl Default for Liveness {
    fn default() -> Liveness {
        Liveness { v: VERSION.into(), sock: None, tasks: BTreeMap::new() }
    }
}

/// The run-level pseudo task of `set`: its JSON may only carry `sock`.
pub const RUN_LEVEL: &str = "-";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunPatch {
    sock: Option<String>,
}

/// Reads the sidecar; a missing or unreadable one is empty (it is only
/// liveness, and a torn file cannot exist thanks to rename). Read like
/// every file of a run (`super::safe`): a FIFO or a device there is not read.
pub fn get(files: &RunFiles) -> Liveness {
    let name = format!("{}.live.json", files.slug);
    super::safe::read_in(&files.dir, &name, super::safe::MAX_PLAN)
        .ok()
        .and_then(|b| serde_json::from_slice::<Liveness>(&b).ok())
        .filter(|l| l.v == VERSION)
        .unwrap_or_default()
}

/// Runs `f` on the sidecar under the exclusive lock, then writes it back
/// atomically.
pub fn update<T>(files: &RunFiles, f: impl FnOnce(&mut Liveness) -> T) -> std::io::Result<T> {
    let _guard = super::lock_exclusive(&files.live_lock())?;
    let mut live = get(files);
    let out = f(&mut live);
    let bytes = serde_json::to_vec_pretty(&live).map_err(std::io::Error::other)?;
    super::write_atomic(&files.live(), &bytes)?;
    Ok(out)
}

/// Why a `set` was refused before touching anything.
pub fn parse_patch(task: &str, json: &str) -> Result<Patch, String> {
    // serde reads a JSON array into the structs by position: `[777, 3]`
    // would set pid and pgid. A patch is an object of known keys.
    if !json.trim_start().starts_with('{') {
        return Err("JSON that is not an object: a patch is an object of known keys".into());
    }
    if task == RUN_LEVEL {
        let p: RunPatch = serde_json::from_str(json).map_err(|e| format!("run-level JSON: {e} (only \"sock\")"))?;
        return Ok(Patch::Run { sock: p.sock });
    }
    super::check_id("task", task)?;
    let e: Entry = serde_json::from_str(json)
        .map_err(|e| format!("task JSON: {e} (keys: pid, pgid, session_id, logfile, state, started_ts)"))?;
    Ok(Patch::Task(task.to_string(), e))
}

/// A checked change.
#[derive(Debug, Clone)]
pub enum Patch {
    Run { sock: Option<String> },
    Task(String, Entry),
}

/// Applies a patch under the lock; returns the sidecar as written.
pub fn set(files: &RunFiles, patch: Patch) -> std::io::Result<Liveness> {
    update(files, |l| {
        match patch {
            Patch::Run { sock } => {
                if sock.is_some() {
                    l.sock = sock;
                }
            }
            Patch::Task(t, e) => l.tasks.entry(t).or_default().merge(e),
        }
        l.clone()
    })
}

/// One entry dropped by [`reap`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reaped {
    pub task: String,
    pub pid: i32,
    /// The journal's last state for the task (the truth), if any.
    pub last_state: Option<String>,
    pub rc: Option<i64>,
}

/// True while a process with this pid exists (signal 0; EPERM means it
/// exists but is not ours).
pub fn pid_alive(pid: i32) -> bool {
    use nix::errno::Errno;
    if pid <= 0 {
        return false;
    }
    !matches!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

/// Drops every entry whose pid is gone and reports it with the journal's
/// last state.
pub fn reap(files: &RunFiles) -> std::io::Result<Vec<Reaped>> {
    let journal = Journal::read(&files.journal())?;
    update(files, |l| {
        let dead: Vec<(String, i32)> =
            l.tasks.iter().filter_map(|(t, e)| e.pid.filter(|&p| !pid_alive(p)).map(|p| (t.clone(), p))).collect();
        dead.into_iter()
            .map(|(task, pid)| {
                l.tasks.remove(&task);
                let rec = journal.tasks.get(&task);
                Reaped { last_state: rec.and_then(|r| r.state.clone()), rc: rec.and_then(|r| r.rc), task, pid }
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_merges_and_reap_drops_dead_pids() {
        let dir = std::env::temp_dir().join(format!("runwire-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = RunFiles::new(&dir, "s");
        set(&f, parse_patch("a", r#"{"pid":1,"state":"leased"}"#).unwrap()).unwrap();
        set(&f, parse_patch("a", r#"{"session_id":"x"}"#).unwrap()).unwrap();
        set(&f, parse_patch("-", r#"{"sock":"/tmp/s.sock"}"#).unwrap()).unwrap();
        // A pid far above pid_max never exists.
        set(&f, parse_patch("b", r#"{"pid":2147483000}"#).unwrap()).unwrap();
        let l = get(&f);
        assert_eq!(l.tasks["a"].session_id.as_deref(), Some("x"));
        assert_eq!(l.tasks["a"].state.as_deref(), Some("leased"));
        assert_eq!(l.sock.as_deref(), Some("/tmp/s.sock"));
        super::super::journal::append(
            &crate::runs::marks::test_run(),
            &f.journal(),
            &super::super::journal::Record::task("t", "b", "failed", Some(9)),
        )
        .unwrap();
        let r = reap(&f).unwrap();
        assert_eq!(
            r,
            vec![Reaped { task: "b".into(), pid: 2147483000, last_state: Some("failed".into()), rc: Some(9) }]
        );
        assert!(get(&f).tasks.contains_key("a") && !get(&f).tasks.contains_key("b"));
        assert!(parse_patch("a", r#"{"bogus":1}"#).is_err());
        assert!(parse_patch("a", "[777, 3]").unwrap_err().contains("not an object"), "an array by position");
        assert!(parse_patch("-", r#"["/x.sock"]"#).is_err());
        assert!(parse_patch("../a", "{}").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
