//! Recording a run the server starts itself (`POST /agui`) the way a runner
//! records one: a registry pointer, a plan of one task (`agent`), a journal,
//! and the raw agent output as the task's logfile, all under
//! `$HARNESS_HOME/serve/`. So server runs appear in `GET /runs` and their
//! streams can be re-read and resumed like any other.

use super::journal::{self, Record};
use super::registry::{NewRun, Registry};
use super::{RunFiles, MAX_ID};
use std::io::Write;
use std::path::Path;

/// The one task of a recorded server run.
pub const TASK: &str = "agent";
/// The journal's actor for records the server writes.
pub const ACTOR: &str = "runwire-serve";

/// The slug for an AG-UI runId: `agui-<runId>` when that is a valid id,
/// else `agui-` and 16 hex digits of its SHA-256.
pub fn slug_for(agui_run_id: &str) -> String {
    let s = format!("agui-{agui_run_id}");
    if super::valid_id(&s) && s.len() <= MAX_ID / 2 {
        s
    } else {
        format!("agui-{}", &super::sha256::hex(agui_run_id.as_bytes())[..16])
    }
}

/// An open recording.
pub struct Recorder {
    pub run_id: String,
    /// The run as its writers name it (the journal's mark, `super::marks`).
    run: super::marks::Run,
    files: RunFiles,
    log: std::fs::File,
    /// Each line's arrival time (`crate::util::arrival`), when times are kept.
    times: Option<crate::util::arrival::Writer>,
    /// The task's adapter (for its cost and tokens at a turn's end).
    adapter: String,
    /// The owner record to remove when the end is journaled.
    owner: Option<std::path::PathBuf>,
}

/// How the `started` record's `detail` names the request the run was
/// recorded for (followed by [`request_digest`]).
pub const REQUEST: &str = "request ";

/// The digest of what makes two `POST /agui` requests the same run: the
/// thread, the runId, the prompt and the resume answers (hex SHA-256 of
/// their JSON). A runId posted again is replayed only for the same digest.
pub fn request_digest(thread_id: &str, run_id: &str, prompt: &str, resume: &serde_json::Value) -> String {
    let v = serde_json::json!([thread_id, run_id, prompt, resume]);
    super::sha256::hex(v.to_string().as_bytes())
}

/// A run already recorded for an AG-UI runId, as its files say.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub run_id: String,
    pub files: RunFiles,
    /// The request digest its `started` record names (`None`: a record of
    /// an older version, which kept none).
    pub request: Option<String>,
    /// Its end is journaled (`finished`, or its task is terminal).
    pub ended: bool,
    /// The task's last state and its record's rc and detail.
    pub state: Option<String>,
    pub rc: Option<i64>,
    pub detail: Option<String>,
}

/// The run recorded for `agui_run_id` under `home`, if any: its journal
/// exists (a run removed with `runs rm` is no longer recorded).
pub fn recorded(home: &Path, agui_run_id: &str) -> Option<Recorded> {
    let root = home.join("serve");
    let dir = root.join("runstate");
    let slug = slug_for(agui_run_id);
    let root_s = root.display().to_string();
    let files = RunFiles::new(&dir, &slug);
    let name = format!("{slug}.jsonl");
    let run_id = super::registry::run_id(&root_s, &root_s, &slug);
    let bytes = match super::safe::read_in(&dir, &name, super::safe::MAX_JOURNAL) {
        Err(e) if e.absent => return None,
        // Claimed by [`Recorder::start`], before its first record and its
        // pointer (empty as read, unregistered): a claim under way (its
        // claimer holds the journal's lock until that record is written) or
        // one a crash cut short. Not a recorded run either way. (Judged by
        // the bytes read, not the file's size after: a claim's first record
        // may land in between.)
        Ok(b) if b.is_empty() && !Registry::at(home).path(&run_id).exists() => return None,
        r => r.unwrap_or_default(),
    };
    let j = journal::Journal::parse(&bytes);
    // The first `started` run record names the request.
    let request = bytes.split(|&b| b == b'\n').find_map(|l| {
        let r: Record = serde_json::from_slice(l).ok()?;
        (r.task.is_none() && r.run.as_deref() == Some("started")).then_some(r.detail)?
    });
    let request = request.and_then(|d| d.strip_prefix(REQUEST).map(str::to_string));
    let task = j.tasks.get(TASK);
    let state = task.and_then(|r| r.state.clone());
    let ended = j.last_run.as_ref().and_then(|r| r.run.as_deref()) == Some("finished")
        || state.as_deref().is_some_and(journal::is_terminal);
    Some(Recorded {
        run_id,
        files,
        request,
        ended,
        state,
        rc: task.and_then(|r| r.rc),
        detail: task.and_then(|r| r.detail.clone()),
    })
}

fn now() -> String {
    crate::util::time::format_ms(super::stamp::now_ns() / 1_000_000)
}

/// Why a journal cannot be claimed: it is recorded, or being recorded.
/// Its own type inside an `AlreadyExists` error, so that [`is_taken`]
/// tells it from any other `AlreadyExists` (a file where the registry's
/// directory should be), which is a failure to record, not a record.
fn taken(run_id: &str, live: bool) -> std::io::Error {
    let m = match live {
        true => format!("run {run_id} is being recorded by another process"),
        false => format!("run {run_id} is already recorded"),
    };
    std::io::Error::new(std::io::ErrorKind::AlreadyExists, Taken(m))
}

#[derive(Debug)]
struct Taken(String);

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Taken {}

/// True when [`Recorder::start_owned`] failed because the runId is
/// recorded, or being recorded, already (not for any other failure).
pub fn is_taken(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<Taken>())
}

/// Claims the run's journal for a new recording: an exclusive `flock` on
/// it, held until the first record is written through it (the claim is
/// the lock and that record, never the file alone). The journal is
/// created exclusively and locked (blocking: a claimer that took it over
/// in between holds it a moment); it must still be empty once locked, else
/// that other claimer has it. An existing journal is another claim's:
/// locked (a non-blocking try fails), a live claimer is writing its first
/// record; not empty or registered, a recorded run; empty, unregistered and
/// not locked, a claim a crash cut short (before its first record):
/// nothing to lose, taken over under the lock. `AlreadyExists` when it is
/// not this claimer's.
fn claim(home: &Path, files: &RunFiles, run_id: &str) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = files.journal();
    let (f, new) = match std::fs::OpenOptions::new().append(true).create_new(true).open(&path) {
        Ok(f) => (f, true),
        // Not a file this claimer may take (a link, another's) is recorded.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let existing = std::fs::OpenOptions::new().append(true).custom_flags(nix::libc::O_NOFOLLOW).open(&path);
            (existing.map_err(|_| taken(run_id, false))?, false)
        }
        Err(e) => return Err(e),
    };
    lock_claim(f, new, home, files, run_id)
}

/// [`claim`]'s lock on the journal `f` it opened (`new`: created it).
fn lock_claim(
    f: std::fs::File,
    new: bool,
    home: &Path,
    files: &RunFiles,
    run_id: &str,
) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::MetadataExt;
    let path = files.journal();
    let how = if new { FlockArg::LockExclusive } else { FlockArg::LockExclusiveNonblock };
    let f = match Flock::lock(f, how) {
        Ok(f) => f,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Err(taken(run_id, true)),
        Err((_, e)) => return Err(e.into()),
    };
    let m = f.metadata()?;
    // Still the file at the path (not one `runs rm` removed meanwhile).
    let current = std::fs::symlink_metadata(&path).is_ok_and(|p| p.dev() == m.dev() && p.ino() == m.ino());
    if !current || !m.is_file() || m.len() != 0 {
        return Err(taken(run_id, false));
    }
    if !new && Registry::at(home).path(run_id).exists() {
        return Err(taken(run_id, false));
    }
    Ok(f)
}

impl Recorder {
    /// [`Recorder::start_owned`] with no owner record.
    pub fn start(
        home: &Path,
        agui_run_id: &str,
        adapter: &str,
        prompt: &str,
        request: &str,
    ) -> std::io::Result<Recorder> {
        Recorder::start_owned(home, agui_run_id, adapter, prompt, request, |_| None)
    }

    /// Claims the run's journal (the claim, `claim`: a runId already recorded, or
    /// being recorded, is never recorded again, whichever process recorded
    /// it; `AlreadyExists` then), then, under the claim, writes the plan,
    /// the logfile, the owner record (`owner`: given the run id, writes it
    /// and returns its path, removed once the run's end is journaled: a run
    /// whose owner record outlives its owner was left unfinished by a
    /// crash, `supervise::socket::recover`) and the journal's start (naming
    /// the request's digest, see [`request_digest`]); then the task's lease
    /// and the pointer. So whoever finds the run recorded finds its owner.
    pub fn start_owned(
        home: &Path,
        agui_run_id: &str,
        adapter: &str,
        prompt: &str,
        request: &str,
        owner: impl FnOnce(&str) -> Option<std::path::PathBuf>,
    ) -> std::io::Result<Recorder> {
        let root = home.join("serve");
        let dir = root.join("runstate");
        std::fs::create_dir_all(&dir)?;
        let new = NewRun {
            slug: slug_for(agui_run_id),
            repo_root: root.display().to_string(),
            project: Some("runwire-serve".into()),
            repo: Some("runwire-serve".into()),
            runstate_dir: Some(dir.display().to_string()),
            ..NewRun::default()
        };
        let pointer = new.pointer(now()).map_err(std::io::Error::other)?;
        let files = RunFiles::new(&dir, &pointer.slug);
        let run = super::marks::Run::new(home, &pointer.run_id);
        // Held before any file of the run is written (`super::marks`).
        run.hold()?;
        // The claim: no journal is ever truncated, replaced or re-recorded.
        let journal = claim(home, &files, &pointer.run_id)?;
        let mut owned = None;
        let made = (|| {
            let plan = serde_json::json!({
                "v": super::plan::VERSION,
                "tasks": [{"id": TASK, "adapter": adapter, "prompt": prompt}],
            });
            super::write_atomic(&files.plan(), plan.to_string().as_bytes())?;
            // The journal is ours (claimed), so any log here is a leftover
            // of a run removed before (`runs rm` of an older version), or
            // of a claim a crash cut short: replaced.
            let log = std::fs::File::create(files.log(TASK))?;
            let times = match crate::util::arrival::clock() {
                Some(_) => Some(crate::util::arrival::Writer::create(&files.log(TASK))?),
                None => {
                    let _ = std::fs::remove_file(crate::util::arrival::sidecar_path(&files.log(TASK)));
                    None
                }
            };
            owned = owner(&pointer.run_id);
            let mut started = Record::run(ACTOR, "started");
            started.detail = Some(format!("{REQUEST}{request}"));
            // The first record, through the locked descriptor (the claim's
            // end: `journal::append` opens and locks its own, which this
            // lock would refuse); one write of the line, as every append.
            let mut line = serde_json::to_vec(&started).map_err(std::io::Error::other)?;
            line.push(b'\n');
            run.hold()?;
            (&*journal).write_all(&line)?;
            drop(journal);
            journal::append(&run, &files.journal(), &Record::task(ACTOR, TASK, "leased", None))?;
            Registry::at(home).register(&pointer)?;
            Ok((log, times))
        })();
        let (log, times) = match made {
            Ok(x) => x,
            Err(e) => {
                // Nobody will end the run: no owner says it is being recorded.
                if let Some(o) = &owned {
                    let _ = std::fs::remove_file(o);
                }
                // Nor is it recorded: a claim that wrote its first records
                // and could not register (a full disk) would otherwise stay
                // "recorded" for ever, a runId no listing shows and no
                // `runs rm` frees. Its files are this claim's own (the
                // journal was created or taken over empty under its lock),
                // so they go, the journal last, and the runId is free again.
                let registry = Registry::at(home);
                if !registry.path(&pointer.run_id).exists() {
                    let _ = std::fs::remove_file(registry.link_path(&pointer.run_id));
                    let _ = std::fs::remove_file(crate::util::arrival::sidecar_path(&files.log(TASK)));
                    let _ = std::fs::remove_file(files.log(TASK));
                    let _ = std::fs::remove_file(files.plan());
                    let _ = std::fs::remove_file(files.journal());
                }
                super::marks::release(home, &pointer.run_id);
                return Err(e);
            }
        };
        Ok(Recorder { run_id: pointer.run_id, run, files, log, times, adapter: adapter.to_string(), owner: owned })
    }

    /// The task's log (the raw output lines).
    pub fn log(&self) -> std::path::PathBuf {
        self.files.log(TASK)
    }

    /// The run's journal (input records are appended there too).
    pub fn journal(&self) -> std::path::PathBuf {
        self.files.journal()
    }

    /// The run as its writers name it (for [`journal::append`]).
    pub fn run(&self) -> &super::marks::Run {
        &self.run
    }

    /// Appends one raw output line, and first its arrival time.
    pub fn line(&mut self, line: &[u8], at_ms: Option<i64>) -> std::io::Result<()> {
        if let Some(t) = &mut self.times {
            match at_ms {
                Some(ms) => t.line(ms)?,
                None => t.skip(),
            }
        }
        let mut b = Vec::with_capacity(line.len() + 1);
        b.extend_from_slice(line);
        b.push(b'\n');
        self.log.write_all(&b)
    }

    /// `r` with the task's cost and tokens so far (its log's), for a
    /// record written as a turn ends (`journal::TaskTotals`).
    pub fn with_totals(&self, r: Record) -> Record {
        r.with_totals(TASK, super::view::turn_totals(&self.files, TASK, &self.adapter))
    }

    /// Journals the end: `committed` (rc 0: the run finished; a server run
    /// has nothing else to commit), `failed` with its rc, or `halted` when
    /// it was stopped (client gone, shutdown), with the task's cost and
    /// tokens.
    pub fn finish(&self, state: &str, rc: Option<i64>, detail: Option<String>) -> std::io::Result<()> {
        self.finish_as(ACTOR, state, rc, detail)
    }

    /// [`Recorder::finish`] with the task record written by `actor` (the
    /// person who killed the session).
    pub fn finish_as(&self, actor: &str, state: &str, rc: Option<i64>, detail: Option<String>) -> std::io::Result<()> {
        let mut r = self.with_totals(Record::task(actor, TASK, state, rc));
        r.detail = detail;
        journal::append(&self.run, &self.files.journal(), &r)?;
        journal::append(&self.run, &self.files.journal(), &Record::run(ACTOR, "finished"))?;
        if let Some(o) = &self.owner {
            let _ = std::fs::remove_file(o);
        }
        // Done with the run: the next listing makes its row and removes its mark.
        super::marks::release(&self.run.home, &self.run.id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_recorded_run_is_never_recorded_again_and_a_cut_claim_is_taken_over() {
        let home = std::env::temp_dir().join(format!("rw-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let rec = super::Recorder::start(&home, "r1", "claude", "hi", "d1").unwrap();
        let journal = rec.journal();
        let before = std::fs::read(&journal).unwrap();
        let again = super::Recorder::start(&home, "r1", "claude", "other", "d2").err().unwrap();
        assert!(again.kind() == std::io::ErrorKind::AlreadyExists && super::is_taken(&again), "{again}");
        assert_eq!(std::fs::read(&journal).unwrap(), before, "untouched");
        let r = super::recorded(&home, "r1").unwrap();
        assert_eq!((r.request.as_deref(), r.ended, r.run_id.as_str()), (Some("d1"), false, rec.run_id.as_str()));
        rec.finish("committed", Some(0), None).unwrap();
        assert!(super::recorded(&home, "r1").unwrap().ended);
        // A claim a crash cut short (empty journal, no pointer) is no record, and is taken.
        let cut = home.join("serve/runstate/agui-r2.jsonl");
        std::fs::write(&cut, b"").unwrap();
        assert!(super::recorded(&home, "r2").is_none());
        super::Recorder::start(&home, "r2", "claude", "hi", "d3").unwrap();
        assert_eq!(super::recorded(&home, "r2").unwrap().request.as_deref(), Some("d3"));
        std::fs::remove_dir_all(&home).unwrap();
    }

    /// The claim is held, not only made: a second claimer (its own
    /// descriptor, another thread) that meets a journal still empty and
    /// unregistered while its claimer writes its first record is refused
    /// and touches nothing; a first claimer that finds its journal taken
    /// over in the window before its lock gives way; a journal a crash
    /// left empty (nobody holds it) is still taken over.
    #[test]
    fn a_live_claim_is_never_taken_over_and_a_cut_one_is() {
        use nix::fcntl::{Flock, FlockArg};
        let home = std::env::temp_dir().join(format!("rw-claim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let journal = home.join("serve/runstate/agui-r1.jsonl");
        let mut second = None;
        let mut rec = super::Recorder::start_owned(&home, "r1", "claude", "hi", "d1", |_| {
            // Claimed, its first record not written yet: as a crash would leave it.
            assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0);
            assert!(super::recorded(&home, "r1").is_none());
            let other = std::thread::scope(|s| {
                s.spawn(|| super::Recorder::start(&home, "r1", "claude", "hi", "d2").err()).join().unwrap()
            });
            second = other;
            None
        })
        .unwrap();
        let second = second.expect("the second claimer is refused");
        assert_eq!(second.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(second.to_string().contains("is being recorded"), "{second}");
        rec.line(b"{\"type\":\"x\"}", None).unwrap();
        // Recorded now: refused as such, the log not truncated.
        let again = super::Recorder::start(&home, "r1", "claude", "hi", "d2").err().unwrap();
        assert!(again.to_string().contains("already recorded"), "{again}");
        assert_eq!(std::fs::read(rec.log()).unwrap(), b"{\"type\":\"x\"}\n");
        let text = std::fs::read_to_string(&journal).unwrap();
        assert_eq!(text.matches("\"run\":\"started\"").count(), 1, "{text}");
        assert_eq!(super::recorded(&home, "r1").unwrap().request.as_deref(), Some("d1"));

        // An empty journal another process holds locked: a live claim.
        let cut = home.join("serve/runstate/agui-r2.jsonl");
        let held = Flock::lock(std::fs::File::create(&cut).unwrap(), FlockArg::LockExclusive).unwrap();
        let e = super::Recorder::start(&home, "r2", "claude", "hi", "d3").err().unwrap();
        assert!(e.kind() == std::io::ErrorKind::AlreadyExists && e.to_string().contains("being recorded"), "{e}");
        assert_eq!(std::fs::metadata(&cut).unwrap().len(), 0, "untouched");
        // Its claimer died (the lock went with it): a leftover, taken over.
        drop(held);
        super::Recorder::start(&home, "r2", "claude", "hi", "d3").unwrap();
        assert_eq!(super::recorded(&home, "r2").unwrap().request.as_deref(), Some("d3"));

        // A claimer that created its journal and, before it locked it, lost
        // it to one that took it for a leftover: it gives way once locked.
        let files = super::RunFiles::new(home.join("serve/runstate"), "agui-r3");
        let mine = std::fs::OpenOptions::new().append(true).create_new(true).open(files.journal()).unwrap();
        let other = super::Recorder::start(&home, "r3", "claude", "hi", "d4").unwrap();
        let id = other.run_id.clone();
        let e = super::lock_claim(mine, true, &home, &files, &id).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(super::recorded(&home, "r3").unwrap().request.as_deref(), Some("d4"));
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn slugs_are_valid_ids() {
        assert_eq!(super::slug_for("run-1"), "agui-run-1");
        for odd in ["../x", "a b", &"x".repeat(200), "é"] {
            let s = super::slug_for(odd);
            assert!(super::super::valid_id(&s) && s.len() == 21, "{s}");
        }
    }
}
