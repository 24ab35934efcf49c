//! `runstate/v1`: a run's append-only journal, one JSON record a line
//! (`spec/runstate.schema.json`). Task records move a task through
//! `leased → implemented → gated → [reviewed] → committed`, or end it
//! `halted`/`failed` with an `rc`; run records (`paused`, `resumed`,
//! `steer-queued`, …) concern the whole run. Every record has `ts` and
//! `actor`.
//!
//! Reading is tolerant: a line that does not parse (a crash mid-write leaves
//! a truncated last line) is counted and skipped, never fatal.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

pub const VERSION: &str = "runstate/v1";

/// Task states, in their usual order.
pub const TASK_STATES: [&str; 7] = ["leased", "implemented", "gated", "reviewed", "committed", "halted", "failed"];

/// Run-level record kinds.
pub const RUN_EVENTS: [&str; 6] = ["started", "paused", "resumed", "steer-queued", "finished", "aborted"];

/// States after which a task does nothing more.
pub fn is_terminal(state: &str) -> bool {
    matches!(state, "committed" | "halted" | "failed")
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub v: String,
    /// RFC 3339 UTC, milliseconds.
    pub ts: String,
    /// Who wrote it (`runner`, `gate`, `reviewer`, `runwire-serve`, a user…).
    pub actor: String,
    /// Set on task records.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task: Option<String>,
    /// The task's new state (task records).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub state: Option<String>,
    /// What happened to the run (run records).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub run: Option<String>,
    /// Exit code, on `halted`/`failed` (and optionally `committed`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rc: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
}

impl Record {
    pub fn task(actor: &str, task: &str, state: &str, rc: Option<i64>) -> Record {
        Record {
            v: VERSION.into(),
            ts: crate::time::format_ms(now_ms()),
            actor: actor.into(),
            task: Some(task.into()),
            state: Some(state.into()),
            run: None,
            rc,
            detail: None,
        }
    }

    pub fn run(actor: &str, what: &str) -> Record {
        Record {
            v: VERSION.into(),
            ts: crate::time::format_ms(now_ms()),
            actor: actor.into(),
            task: None,
            state: None,
            run: Some(what.into()),
            rc: None,
            detail: None,
        }
    }

    /// Checks the record against the contract (version, enums, exactly one of task/run).
    pub fn validate(&self) -> Result<(), String> {
        check_record(&self.v, self.task.as_deref(), self.state.as_deref(), self.run.as_deref())
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A journal line as parsed, borrowing what it can: the same fields and
/// types as [`Record`], so exactly the same lines are accepted.
#[derive(Deserialize)]
struct RecordRef<'a> {
    #[serde(borrow)]
    v: Str<'a>,
    #[serde(borrow)]
    ts: Str<'a>,
    #[serde(borrow)]
    actor: Str<'a>,
    #[serde(borrow, default)]
    task: Option<Str<'a>>,
    #[serde(borrow, default)]
    state: Option<Str<'a>>,
    #[serde(borrow, default)]
    run: Option<Str<'a>>,
    #[serde(default)]
    rc: Option<i64>,
    #[serde(borrow, default)]
    detail: Option<Str<'a>>,
}

/// A JSON string borrowed from the input unless it has escapes. (A plain
/// `Cow<str>` inside an `Option` is always copied by serde.)
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
        }
        d.deserialize_str(V).map(Str)
    }
}

fn opt<'a>(s: &'a Option<Str>) -> Option<&'a str> {
    s.as_ref().map(|s| &*s.0)
}

impl RecordRef<'_> {
    fn validate(&self) -> Result<(), String> {
        check_record(&self.v.0, opt(&self.task), opt(&self.state), opt(&self.run))
    }

    fn to_owned(&self) -> Record {
        let s = |c: &Option<Str>| opt(c).map(str::to_string);
        Record {
            v: self.v.0.to_string(),
            ts: self.ts.0.to_string(),
            actor: self.actor.0.to_string(),
            task: s(&self.task),
            state: s(&self.state),
            run: s(&self.run),
            rc: self.rc,
            detail: s(&self.detail),
        }
    }
}

/// The contract's checks, shared by [`Record`] and [`RecordRef`].
fn check_record(v: &str, task: Option<&str>, state: Option<&str>, run: Option<&str>) -> Result<(), String> {
    if v != VERSION {
        return Err(format!("v is {v:?}, expected {VERSION:?}"));
    }
    match (task, state, run) {
        (Some(t), Some(s), None) => {
            super::check_id("task", t)?;
            if !TASK_STATES.contains(&s) {
                return Err(format!("unknown task state {s:?}"));
            }
        }
        (None, None, Some(r)) => {
            if !RUN_EVENTS.contains(&r) {
                return Err(format!("unknown run event {r:?}"));
            }
        }
        _ => return Err("a record is either a task record (task, state) or a run record (run)".into()),
    }
    Ok(())
}

/// Appends one record (a [`Record`], or an interactive session's input
/// record) as one `write` of one line (O_APPEND: concurrent appenders never
/// interleave within a line).
pub fn append(path: &Path, rec: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(rec).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(&line)
}

/// What a journal says, folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Journal {
    /// The last record of each task.
    pub tasks: BTreeMap<String, Record>,
    /// The last run-level record.
    pub last_run: Option<Record>,
    /// Lines that did not parse (a truncated last line, junk).
    pub skipped: usize,
    pub records: usize,
}

impl Journal {
    /// Folds journal bytes; never fails.
    pub fn parse(bytes: &[u8]) -> Journal {
        // Lines are parsed borrowing from `bytes` and only each task's last
        // record is made owned: listings fold thousands of journals.
        let mut j = Journal::default();
        // Records stay where they were parsed; the map holds indices.
        let mut recs: Vec<RecordRef> = Vec::new();
        let mut last: BTreeMap<&str, usize> = BTreeMap::new();
        let mut last_run: Option<usize> = None;
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<RecordRef>(line) {
                Ok(r) if r.validate().is_ok() => {
                    j.records += 1;
                    recs.push(r);
                }
                _ => j.skipped += 1,
            }
        }
        for (i, r) in recs.iter().enumerate() {
            match opt(&r.task) {
                Some(t) => {
                    last.insert(t, i);
                }
                None => last_run = Some(i),
            }
        }
        j.tasks = last.into_iter().map(|(t, i)| (t.to_string(), recs[i].to_owned())).collect();
        j.last_run = last_run.map(|i| recs[i].to_owned());
        j
    }

    /// Reads a journal; a missing file is an empty journal.
    pub fn read(path: &Path) -> std::io::Result<Journal> {
        Ok(Journal::read_opt(path)?.unwrap_or_default())
    }

    /// Reads a journal; `None` when the file does not exist.
    pub fn read_opt(path: &Path) -> std::io::Result<Option<Journal>> {
        match super::read_small(path) {
            Ok(b) => Ok(Some(Journal::parse(&b))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The task's last state.
    pub fn state(&self, task: &str) -> Option<&str> {
        self.tasks.get(task).and_then(|r| r.state.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_state_per_task_and_truncated_tail_tolerated() {
        let dir = std::env::temp_dir().join(format!("runwire-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.jsonl");
        let _ = std::fs::remove_file(&p);
        append(&p, &Record::task("runner", "a", "leased", None)).unwrap();
        append(&p, &Record::task("runner", "a", "implemented", None)).unwrap();
        append(&p, &Record::task("runner", "b", "failed", Some(2))).unwrap();
        append(&p, &Record::run("user", "paused")).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"v":"runstate/v1","ts":"2026-01-01T00:0"#).unwrap();
        let j = Journal::read(&p).unwrap();
        assert_eq!(j.state("a"), Some("implemented"));
        assert_eq!(j.tasks["b"].rc, Some(2));
        assert_eq!(j.last_run.as_ref().and_then(|r| r.run.as_deref()), Some("paused"));
        assert_eq!((j.records, j.skipped), (4, 1));
        assert_eq!(Journal::read(&dir.join("none.jsonl")).unwrap(), Journal::default());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn parsing_borrowed_or_escaped_gives_what_record_gives() {
        // Escapes (which cannot be borrowed), a non-string where a string
        // belongs, a missing field, extra fields: the borrowing parser must
        // accept and fold exactly as the owned `Record` does.
        let lines = [
            r#"{"v":"runstate/v1","ts":"t1","actor":"r\u00e9viewer \"x\"","task":"\u0061","state":"leased","detail":"a\nb"}"#,
            r#"{"v":"runstate/v1","ts":"t2","actor":"runner","task":"a","state":"committed","rc":0,"extra":[1,{"k":null}]}"#,
            r#"{"v":"runstate/v1","ts":"t3","actor":7,"task":"b","state":"leased"}"#,
            r#"{"v":"runstate/v1","ts":"t4","task":"b","state":"leased"}"#,
            r#"{"v":"runstate/v1","ts":"t5","actor":"u","run":"paus\u0065d"}"#,
            r#"{"v":"runstate/v1","ts":"t6","actor":"u","task":"c","state":"bogus"}"#,
        ];
        let text = lines.join("\n");
        let j = Journal::parse(text.as_bytes());
        let owned: Vec<Record> = lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Record>(l).ok())
            .filter(|r| r.validate().is_ok())
            .collect();
        assert_eq!((j.records, j.skipped), (owned.len(), lines.len() - owned.len()));
        assert_eq!((j.records, j.skipped), (3, 3));
        assert_eq!(j.tasks.len(), 1);
        assert_eq!(j.tasks["a"], owned[1]);
        assert_eq!(j.last_run.as_ref(), Some(&owned[2]));
        assert_eq!(j.last_run.as_ref().and_then(|r| r.run.as_deref()), Some("paused"));
        let first = Journal::parse(lines[0].as_bytes());
        assert_eq!(first.tasks["a"], owned[0]);
        assert_eq!(first.tasks["a"].actor, "r\u{e9}viewer \"x\"");
        assert_eq!(first.tasks["a"].detail.as_deref(), Some("a\nb"));
    }
}
