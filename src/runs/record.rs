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
    files: RunFiles,
    log: std::fs::File,
    /// Each line's arrival time (`crate::arrival`), when times are kept.
    times: Option<crate::arrival::Writer>,
    /// The task's adapter (for its cost and tokens at a turn's end).
    adapter: String,
}

fn now() -> String {
    crate::time::format_ms(super::index::now_ns() / 1_000_000)
}

impl Recorder {
    /// Writes plan, journal start and pointer; opens the logfile afresh (a
    /// runId reused across server restarts replaces the earlier record).
    pub fn start(home: &Path, agui_run_id: &str, adapter: &str, prompt: &str) -> std::io::Result<Recorder> {
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
        let plan = serde_json::json!({
            "v": super::plan::VERSION,
            "tasks": [{"id": TASK, "adapter": adapter, "prompt": prompt}],
        });
        super::write_atomic(&files.plan(), plan.to_string().as_bytes())?;
        let log = std::fs::File::create(files.log(TASK))?;
        let times = match crate::arrival::clock() {
            Some(_) => Some(crate::arrival::Writer::create(&files.log(TASK))?),
            None => {
                let _ = std::fs::remove_file(crate::arrival::sidecar_path(&files.log(TASK)));
                None
            }
        };
        let _ = std::fs::remove_file(files.journal());
        journal::append(&files.journal(), &Record::run(ACTOR, "started"))?;
        journal::append(&files.journal(), &Record::task(ACTOR, TASK, "leased", None))?;
        Registry::at(home).register(&pointer)?;
        Ok(Recorder { run_id: pointer.run_id, files, log, times, adapter: adapter.to_string() })
    }

    /// The task's log (the raw output lines).
    pub fn log(&self) -> std::path::PathBuf {
        self.files.log(TASK)
    }

    /// The run's journal (input records are appended there too).
    pub fn journal(&self) -> std::path::PathBuf {
        self.files.journal()
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
        journal::append(&self.files.journal(), &r)?;
        journal::append(&self.files.journal(), &Record::run(ACTOR, "finished"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn slugs_are_valid_ids() {
        assert_eq!(super::slug_for("run-1"), "agui-run-1");
        for odd in ["../x", "a b", &"x".repeat(200), "é"] {
            let s = super::slug_for(odd);
            assert!(super::super::valid_id(&s) && s.len() == 21, "{s}");
        }
    }
}
