//! `runstate/v1`: a run's append-only journal, one JSON record a line
//! (`spec/runstate.schema.json`). Task records move a task through
//! `leased → implemented → gated → [reviewed] → committed`, or end it
//! `halted`/`failed` with an `rc`; run records (`paused`, `resumed`,
//! `steer-queued`, `steer-dropped`, `supervisor-gone`, …) concern the whole run. Every record has `ts` and
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
pub const RUN_EVENTS: [&str; 9] =
    ["started", "paused", "resumed", "steer-queued", "steer-dropped", "supervisor-gone", "finished", "aborted", "idle"];

/// The run records that say nothing of the run's state (spec/LAYOUT.md,
/// "Run statuses"): something happened in the run, and its state is what
/// the run record before said.
pub const NO_STATE: [&str; 3] = ["steer-queued", "steer-dropped", "supervisor-gone"];

/// The run record `runwire-serve` writes when it finds that the process a
/// run's owner record names is gone (spec/LAYOUT.md, "Who runs a run").
pub const SUPERVISOR_GONE: &str = "supervisor-gone";

/// Input record kinds: a task waits for a person, or no longer does.
pub const INPUT_EVENTS: [&str; 2] = ["requested", "answered"];
/// What an input request asks for.
pub const INPUT_KINDS: [&str; 3] = ["tool_approval", "question", "plan_approval"];
/// How an input request was closed.
pub const INPUT_DECISIONS: [&str; 5] = ["allow", "deny", "answer", "cancelled", "expired"];

/// States after which a task does nothing more.
pub fn is_terminal(state: &str) -> bool {
    matches!(state, "committed" | "halted" | "failed")
}

/// Why a run failed, in one line: `<task> <state>: <detail>` of its first
/// halted or failed task (given in plan order, as `(id, state, detail)`),
/// preferring one that ran over a dependent that never started (whose
/// detail is the supervisor's `not started: …`). `None` when none failed.
pub fn failure_reason<'a>(
    tasks: impl IntoIterator<Item = (&'a str, Option<&'a str>, Option<&'a str>)>,
) -> Option<String> {
    let failed: Vec<_> = tasks.into_iter().filter(|(_, s, _)| matches!(s, Some("halted" | "failed"))).collect();
    let (id, state, detail) =
        failed.iter().find(|(_, _, d)| !d.is_some_and(|d| d.starts_with("not started:"))).or(failed.first())?;
    let state = state.unwrap_or_default();
    Some(match detail.filter(|d| !d.is_empty()) {
        Some(d) => format!("{id} {state}: {d}"),
        None => format!("{id} {state}"),
    })
}

/// Whether a task with this last state and (`open`) an open input request
/// waits for a person: the request counts only while the task is not done.
pub fn waits(state: Option<&str>, open: bool) -> bool {
    open && !state.is_some_and(is_terminal)
}

/// One journal line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Input records: `requested` or `answered`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub input: Option<String>,
    /// Input records: the request's id.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub request: Option<String>,
    /// `requested`: `tool_approval`, `question` or `plan_approval`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kind: Option<String>,
    /// `requested`: the tool asking for approval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool: Option<String>,
    /// `requested`: RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expires_at: Option<String>,
    /// `answered`: `allow`, `deny`, `answer`, `cancelled` or `expired`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub decision: Option<String>,
    /// `answered`: who answered.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub by: Option<String>,
    /// Input records: runwire's interrupt id of the request.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interrupt: Option<String>,
    /// A person's command: the door it came through (`crate::control::Door`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub door: Option<String>,
    /// Written when a turn ends: each named task's cost and tokens, its log's
    /// `turn_end`s summed up to here ([`TaskTotals`]).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub totals: Option<BTreeMap<String, TaskTotals>>,
    /// A steer held for a task's next turn boundary ([`SteerNote`]): on its
    /// `steer-queued` record (with its text), its `steer-dropped` one, and
    /// the `leased` record of the turn that takes it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub steer: Option<SteerNote>,
}

/// The steer a record is about, so that one the supervisor accepted for a
/// task's next turn boundary outlives the supervisor: queued (`msg`, its
/// text, on the `steer-queued` run record), taken (the task's `leased`
/// record of the turn it prompts: the oldest still queued) or dropped
/// (`steer-dropped`, the oldest still queued, not delivered: `detail` says
/// why). A task's terminal record drops whatever is queued for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SteerNote {
    pub task: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub msg: Option<String>,
}

/// What a task's log adds up to when a turn ends, as the journal keeps it
/// (`"totals":{"<task>":{"costUsd":…,"tokens":{"input":…,"output":…}}}`):
/// the `turn_end` events of its log (`<slug>.<task>.log`, normalized with
/// the task's adapter) summed, `null` where none carries them. A reader
/// takes a task's cost and tokens from its last record that has them, and
/// sums its log only when none does (journals of older writers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskTotals {
    pub cost_usd: Option<f64>,
    pub tokens: Option<TokenCount>,
}

/// Input and output tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenCount {
    pub input: u64,
    pub output: u64,
}

impl Record {
    pub fn task(actor: &str, task: &str, state: &str, rc: Option<i64>) -> Record {
        Record { task: Some(task.into()), state: Some(state.into()), rc, ..Record::empty(actor) }
    }

    pub fn run(actor: &str, what: &str) -> Record {
        Record { run: Some(what.into()), ..Record::empty(actor) }
    }

    fn empty(actor: &str) -> Record {
        let ts = crate::util::time::format_ms(super::stamp::now_ns() / 1_000_000);
        Record { v: VERSION.into(), ts, actor: actor.into(), ..Record::default() }
    }

    /// This record with `task`'s totals at a turn's end (see [`TaskTotals`]).
    pub fn with_totals(mut self, task: &str, t: Option<TaskTotals>) -> Record {
        if let Some(t) = t {
            self.totals.get_or_insert_with(BTreeMap::new).insert(task.to_string(), t);
        }
        self
    }

    /// An input record: task `task` waits for a person (`requested`, with
    /// the request's `kind`) or no longer does (`answered`, with `decision`).
    pub fn input(actor: &str, task: &str, input: &str, request: &str, kind_or_decision: &str) -> Record {
        let (kind, decision) = match input {
            "requested" => (Some(kind_or_decision.into()), None),
            _ => (None, Some(kind_or_decision.into())),
        };
        Record {
            task: Some(task.into()),
            input: Some(input.into()),
            request: Some(request.into()),
            kind,
            decision,
            ..Record::empty(actor)
        }
    }

    /// Checks the record against the contract (version, enums, exactly one of task/run).
    pub fn validate(&self) -> Result<(), String> {
        check_record(&Fields {
            v: &self.v,
            task: self.task.as_deref(),
            state: self.state.as_deref(),
            run: self.run.as_deref(),
            input: self.input.as_deref(),
            request: self.request.as_deref(),
            kind: self.kind.as_deref(),
            decision: self.decision.as_deref(),
            totals: self.totals.as_ref(),
        })
    }
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
    #[serde(borrow, default)]
    input: Option<Str<'a>>,
    #[serde(borrow, default)]
    request: Option<Str<'a>>,
    #[serde(borrow, default)]
    kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    tool: Option<Str<'a>>,
    #[serde(borrow, default)]
    expires_at: Option<Str<'a>>,
    #[serde(borrow, default)]
    decision: Option<Str<'a>>,
    #[serde(borrow, default)]
    by: Option<Str<'a>>,
    #[serde(borrow, default)]
    interrupt: Option<Str<'a>>,
    #[serde(borrow, default)]
    door: Option<Str<'a>>,
    #[serde(default)]
    totals: Option<BTreeMap<String, TaskTotals>>,
    /// `requested`: its approval links (`runwire-serve --public-url`).
    #[serde(default)]
    links: Option<Vec<String>>,
    /// `requested` of kind `question`: its questions, as journaled.
    #[serde(default)]
    questions: Option<serde_json::Value>,
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
        check_record(&Fields {
            v: &self.v.0,
            task: opt(&self.task),
            state: opt(&self.state),
            run: opt(&self.run),
            input: opt(&self.input),
            request: opt(&self.request),
            kind: opt(&self.kind),
            decision: opt(&self.decision),
            totals: self.totals.as_ref(),
        })
    }

    /// The open request this (`requested`) record of task `t` asks, by its id.
    fn open_request(&self, t: &str, id: &str) -> OpenRequest {
        OpenRequest {
            task: t.to_string(),
            request: id.to_string(),
            kind: opt(&self.kind).unwrap_or_default().to_string(),
            tool: opt(&self.tool).map(str::to_string),
            detail: opt(&self.detail).map(str::to_string),
            expires_at: opt(&self.expires_at).map(str::to_string),
            interrupt: opt(&self.interrupt).map(str::to_string),
            ts: self.ts.0.to_string(),
            links: self.links.clone().unwrap_or_default(),
            questions: self.questions.clone(),
        }
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
            input: s(&self.input),
            request: s(&self.request),
            kind: s(&self.kind),
            tool: s(&self.tool),
            expires_at: s(&self.expires_at),
            decision: s(&self.decision),
            by: s(&self.by),
            interrupt: s(&self.interrupt),
            door: s(&self.door),
            totals: self.totals.clone(),
            // Only a restarting supervisor reads it (`supervise::records::steers`).
            steer: None,
        }
    }
}

/// The fields the contract constrains.
struct Fields<'a> {
    v: &'a str,
    task: Option<&'a str>,
    state: Option<&'a str>,
    run: Option<&'a str>,
    input: Option<&'a str>,
    request: Option<&'a str>,
    kind: Option<&'a str>,
    decision: Option<&'a str>,
    totals: Option<&'a BTreeMap<String, TaskTotals>>,
}

/// The contract's checks, shared by [`Record`] and [`RecordRef`]: a record
/// is a task record (task, state), a run record (run) or an input record
/// (task, input, request, and kind or decision).
fn check_record(f: &Fields) -> Result<(), String> {
    if f.v != VERSION {
        return Err(format!("v is {:?}, expected {VERSION:?}", f.v));
    }
    for t in f.totals.into_iter().flat_map(BTreeMap::keys) {
        super::check_id("totals: task", t)?;
    }
    match (f.task, f.state, f.run, f.input) {
        (Some(t), Some(s), None, None) => {
            super::check_id("task", t)?;
            if !TASK_STATES.contains(&s) {
                return Err(format!("unknown task state {s:?}"));
            }
        }
        (None, None, Some(r), None) => {
            if !RUN_EVENTS.contains(&r) {
                return Err(format!("unknown run event {r:?}"));
            }
        }
        (Some(t), None, None, Some(i)) => {
            super::check_id("task", t)?;
            if f.request.is_none() || f.request == Some("") {
                return Err("an input record needs a request id".into());
            }
            match i {
                "requested" if f.kind.is_some_and(|k| INPUT_KINDS.contains(&k)) => {}
                "requested" => return Err(format!("input requested: kind {:?} is not one of {INPUT_KINDS:?}", f.kind)),
                "answered" if f.decision.is_some_and(|d| INPUT_DECISIONS.contains(&d)) => {}
                "answered" => {
                    return Err(format!("input answered: decision {:?} is not one of {INPUT_DECISIONS:?}", f.decision))
                }
                _ => return Err(format!("unknown input event {i:?}")),
            }
        }
        _ => {
            return Err(
                "a record is a task record (task, state), a run record (run) or an input record (task, input)".into()
            )
        }
    }
    Ok(())
}

/// Appends one record (a [`Record`], or an interactive session's input
/// record) as one `write` of one line (O_APPEND: concurrent appenders never
/// interleave within a line). Every journal writer (the
/// supervisor, `runwire-serve`, `runs`, the session layer) goes through
/// here.
///
/// `run` names the run whose journal it is: its mark is held first
/// ([`super::marks::hold`], one `open` the first time, nothing after), so a
/// listing reads the run from its files until the writer lets go. Nothing
/// else is written: the run index is not told, so an append costs the same
/// at record 100 and 100,000 and takes no lock shared with another run's
/// writers. A mark that cannot be held (a full disk) fails the append
/// before a byte is written: a record no listing would see is never made.
pub fn append(run: &super::marks::Run, path: &Path, rec: &impl Serialize) -> std::io::Result<()> {
    let line = serde_json::to_vec(rec).map_err(std::io::Error::other)?;
    run.hold()?;
    append_line(path, &line)
}

/// Changes the journal's stamp without writing a byte (its ctime; the
/// mtime, the run's activity, is set to what it was): for a writer that
/// changes what a run's summary is made of without a record (a hub's
/// mirror writing a node's new plan), so that listings read the run's
/// files again instead of trusting its index row. `NotFound` when there
/// is no journal.
pub fn touch(run: &super::marks::Run, path: &Path) -> std::io::Result<()> {
    run.hold()?;
    let f = std::fs::OpenOptions::new().append(true).open(path)?;
    let mtime = f.metadata()?.modified()?;
    f.set_times(std::fs::FileTimes::new().set_modified(mtime))
}

/// Appends `line` and a newline to a JSON-lines file in one `write`. When
/// the file does not end with a newline (a writer killed mid-write, or a
/// full disk, left a torn last line), a newline goes first, so the torn
/// line stays the only casualty and this record is a line of its own
/// (readers skip the torn one).
///
/// The check and the write hold an exclusive `flock` on the file: another
/// appender's write in flight grows the file a page at a time, so without
/// it a last byte read mid-write looks like a torn line and an empty line
/// would be left. The lock is this journal's own (other runs' writers never
/// wait on it) and is dropped with the file, also when a writer dies.
pub fn append_line(path: &Path, line: &[u8]) -> std::io::Result<()> {
    append_line_unless(path, line, None).map(|_| ())
}

/// [`append`], unless `done` says, of the journal's bytes as they are
/// under its `flock` (up to [`super::safe::MAX_JOURNAL`]), that the record
/// is already there: a note that must be written once however many
/// processes notice (two servers on one home). Whether it wrote.
pub fn append_unless(run: &super::marks::Run, path: &Path, rec: &impl Serialize, done: Done) -> std::io::Result<bool> {
    let line = serde_json::to_vec(rec).map_err(std::io::Error::other)?;
    run.hold()?;
    append_line_unless(path, &line, Some(done))
}

/// What [`append_unless`] asks of a journal's bytes: whether its record is there already.
type Done<'a> = &'a dyn Fn(&[u8]) -> bool;

/// [`append_line`], the check `done` made under the lock first (see
/// [`append_unless`]).
fn append_line_unless(path: &Path, line: &[u8], done: Option<Done>) -> std::io::Result<bool> {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::FileExt;
    use std::os::unix::fs::OpenOptionsExt;
    // The file lies in the run's directory, which its agent can write: a
    // link there is not followed (the append would land wherever it
    // points), and a FIFO neither blocks the writer nor is written.
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => std::io::Error::other(format!(
                "{}: a symbolic link (refused: a journal is written only as a regular file)",
                path.display()
            )),
            _ => e,
        })?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{}: not a regular file (refused: a journal is written only as one)",
            path.display()
        )));
    }
    // nix's flock, not `File::lock`: that is Rust 1.89, past this crate's rust-version.
    let f = Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| std::io::Error::from(e))?;
    let len = f.metadata()?.len();
    if let Some(done) = done {
        let mut bytes = vec![0; len.min(super::safe::MAX_JOURNAL) as usize];
        f.read_exact_at(&mut bytes, 0)?;
        if done(&bytes) {
            return Ok(false);
        }
    }
    let mut last = [b'\n'];
    if len > 0 {
        f.read_exact_at(&mut last, len - 1)?;
    }
    let mut out = Vec::with_capacity(line.len() + 2);
    if last[0] != b'\n' {
        out.push(b'\n');
    }
    out.extend_from_slice(line);
    out.push(b'\n');
    if let Err(e) = (&*f).write_all(&out) {
        // A short write (a full disk) leaves part of this record: cut back
        // to where it began (under the lock, so only this writer's bytes),
        // and the journal still ends with a whole line.
        let _ = f.set_len(len);
        return Err(e);
    }
    Ok(true)
}

/// An input request still waiting for its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRequest {
    pub task: String,
    pub request: String,
    pub kind: String,
    pub tool: Option<String>,
    pub detail: Option<String>,
    pub expires_at: Option<String>,
    /// runwire's interrupt id of the request (what an answer names it by).
    pub interrupt: Option<String>,
    /// When it was asked.
    pub ts: String,
    /// Its approval links (`runwire-serve --public-url`), for the studio to copy.
    pub links: Vec<String>,
    /// A question's questions and choices (records of older writers have none).
    pub questions: Option<serde_json::Value>,
}

/// What a journal says, folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Journal {
    /// The last task state record of each task (input records are not
    /// task states).
    pub tasks: BTreeMap<String, Record>,
    /// The last run-level record that says the run's state (not one of
    /// [`NO_STATE`]).
    pub last_run: Option<Record>,
    /// The detail of the last `supervisor-gone` record (a line saying so
    /// when it has none) when no `started` followed it: nothing has run the
    /// run since its supervisor died.
    pub supervisor_gone: Option<String>,
    /// Input requests `requested` and not (yet) `answered`, in the order
    /// they were asked.
    pub open: Vec<OpenRequest>,
    /// Each task's totals from the last record that gave them ([`TaskTotals`]).
    pub totals: BTreeMap<String, TaskTotals>,
    /// Lines that did not parse (a truncated last line, junk).
    pub skipped: usize,
    pub records: usize,
}

/// Whether a run record says what state the run is in (`started`,
/// `paused`, `resumed`, `idle`, `finished`, `aborted`), not only that
/// something happened in it: a `steer-queued` while paused left the run
/// paused, but as the last run record it read as `running` (and a restart
/// took the pause for lifted). Nor does a `steer-dropped`, nor a
/// `supervisor-gone` (a run whose supervisor died is as it was: [`NO_STATE`]).
fn is_run_state(run: Option<&str>) -> bool {
    !run.is_some_and(|r| NO_STATE.contains(&r))
}

/// What a run record does to [`Journal::supervisor_gone`]: a
/// `supervisor-gone` sets it (to its detail), a `started` (a supervisor on
/// the run again) clears it, any other leaves it.
fn fold_gone(gone: &mut Option<String>, run: Option<&str>, detail: Option<&str>) {
    match run {
        Some(SUPERVISOR_GONE) => {
            *gone =
                Some(detail.filter(|d| !d.is_empty()).unwrap_or("its supervisor is gone: nothing runs it").to_string())
        }
        Some("started") => *gone = None,
        _ => {}
    }
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
        // Open requests by (task, request id), folded in journal order.
        let mut open: Vec<(&str, &str, usize)> = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            if let Some(t) = &r.totals {
                j.totals.extend(t.iter().map(|(k, v)| (k.clone(), *v)));
            }
            match (opt(&r.task), opt(&r.input)) {
                (Some(t), Some(input)) => {
                    let id = opt(&r.request).unwrap_or("");
                    open.retain(|(ot, oid, _)| !(*ot == t && *oid == id));
                    if input == "requested" {
                        open.push((t, id, i));
                    }
                }
                (Some(t), None) => {
                    last.insert(t, i);
                }
                (None, _) => {
                    fold_gone(&mut j.supervisor_gone, opt(&r.run), opt(&r.detail));
                    if is_run_state(opt(&r.run)) {
                        last_run = Some(i);
                    }
                }
            }
        }
        j.tasks = last.into_iter().map(|(t, i)| (t.to_string(), recs[i].to_owned())).collect();
        j.last_run = last_run.map(|i| recs[i].to_owned());
        j.open = open.into_iter().map(|(t, id, i)| recs[i].open_request(t, id)).collect();
        j
    }

    /// Folds one more line (without its newline) into what [`Journal::parse`]
    /// gave for the lines before it, so that `parse(a + line + "\n")` equals
    /// `parse(a)` then `push(line)`: the change feed follows a journal line by
    /// line without folding the whole journal again for each.
    pub fn push(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let r = match serde_json::from_slice::<RecordRef>(line) {
            Ok(r) if r.validate().is_ok() => r,
            _ => {
                self.skipped += 1;
                return;
            }
        };
        self.records += 1;
        if let Some(t) = &r.totals {
            self.totals.extend(t.iter().map(|(k, v)| (k.clone(), *v)));
        }
        match (opt(&r.task), opt(&r.input)) {
            (Some(t), Some(input)) => {
                let id = opt(&r.request).unwrap_or("");
                self.open.retain(|o| !(o.task == t && o.request == id));
                if input == "requested" {
                    self.open.push(r.open_request(t, id));
                }
            }
            (Some(t), None) => {
                self.tasks.insert(t.to_string(), r.to_owned());
            }
            (None, _) => {
                fold_gone(&mut self.supervisor_gone, opt(&r.run), opt(&r.detail));
                if is_run_state(opt(&r.run)) {
                    self.last_run = Some(r.to_owned());
                }
            }
        }
    }

    /// Reads a journal; a missing file is an empty journal.
    pub fn read(path: &Path) -> std::io::Result<Journal> {
        Ok(Journal::read_opt(path)?.unwrap_or_default())
    }

    /// Reads a journal; `None` when the file does not exist. Through the
    /// safe reader: a regular file inside its directory, size-bounded.
    pub fn read_opt(path: &Path) -> std::io::Result<Option<Journal>> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        match super::safe::read_in(dir, name, super::safe::MAX_JOURNAL) {
            Ok(b) => Ok(Some(Journal::parse(&b))),
            Err(e) if e.absent => Ok(None),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }

    /// The task's last state.
    pub fn state(&self, task: &str) -> Option<&str> {
        self.tasks.get(task).and_then(|r| r.state.as_deref())
    }
}

/// What the views need of a folded journal: each task's last state, the
/// open input requests and the last run event.
pub trait Fold {
    /// Records that parsed.
    fn records(&self) -> usize;
    /// The task's last state.
    fn state(&self, task: &str) -> Option<&str>;
    /// Whether an input request of `task` is open.
    fn has_open(&self, task: &str) -> bool;
    /// The last run-level record's event.
    fn last_run(&self) -> Option<&str>;
    /// The `detail` of the task's last state record.
    fn detail(&self, task: &str) -> Option<&str>;
    /// The `detail` of the last run-level record.
    fn last_run_detail(&self) -> Option<&str>;
    /// The detail of the last `supervisor-gone` record no `started` followed
    /// ([`Journal::supervisor_gone`]).
    fn supervisor_gone(&self) -> Option<&str>;
    /// The tasks with a state (by id), then those with an open request (in
    /// the order asked, repeats included).
    fn each_task<'s>(&'s self, f: &mut dyn FnMut(&'s str));
    /// The task's cost and tokens from its last record that gave them.
    fn totals(&self, task: &str) -> Option<TaskTotals>;

    /// Whether `task` waits for a person: its last state is not terminal
    /// and it has an open input request.
    fn needs_input(&self, task: &str) -> bool {
        waits(self.state(task), self.has_open(task))
    }
}

impl Fold for Journal {
    fn records(&self) -> usize {
        self.records
    }

    fn state(&self, task: &str) -> Option<&str> {
        Journal::state(self, task)
    }

    fn has_open(&self, task: &str) -> bool {
        self.open.iter().any(|o| o.task == task)
    }

    fn last_run(&self) -> Option<&str> {
        self.last_run.as_ref().and_then(|r| r.run.as_deref())
    }

    fn detail(&self, task: &str) -> Option<&str> {
        self.tasks.get(task).and_then(|r| r.detail.as_deref())
    }

    fn last_run_detail(&self) -> Option<&str> {
        self.last_run.as_ref().and_then(|r| r.detail.as_deref())
    }

    fn supervisor_gone(&self) -> Option<&str> {
        self.supervisor_gone.as_deref()
    }

    fn each_task<'s>(&'s self, f: &mut dyn FnMut(&'s str)) {
        self.tasks.keys().chain(self.open.iter().map(|o| &o.task)).for_each(|t| f(t));
    }

    fn totals(&self, task: &str) -> Option<TaskTotals> {
        self.totals.get(task).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per task: its id, state, whether a request is open, whether it needs input, its detail.
    type TaskAnswers = Vec<(String, Option<String>, bool, bool, Option<String>)>;

    /// What a [`Fold`] answers, for comparing two.
    fn answers(f: &dyn Fold) -> (usize, Option<String>, Option<String>, Option<String>, TaskAnswers) {
        let mut names = Vec::new();
        f.each_task(&mut |t| names.push(t.to_string()));
        let per = names
            .iter()
            .map(|t| {
                let s = |o: Option<&str>| o.map(str::to_string);
                (t.clone(), s(f.state(t)), f.has_open(t), f.needs_input(t), s(f.detail(t)))
            })
            .collect();
        let s = |o: Option<&str>| o.map(str::to_string);
        (f.records(), s(f.last_run()), s(f.last_run_detail()), s(f.supervisor_gone()), per)
    }

    /// A journal line from pieces that are plain or not, valid or not.
    fn line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let task = prop::sample::select(vec!["a", "b", "c", "\\u0061", "b\\n", "", "../x"]);
        let state = prop::sample::select(vec!["leased", "committed", "failed", "halted", "weird", "le\\u0061sed"]);
        let run = prop::sample::select(vec![
            "started",
            "paused",
            "resumed",
            "aborted",
            "finished",
            "supervisor-gone",
            "steer-dropped",
            "nope",
        ]);
        let req = prop::sample::select(vec!["q1", "q2", "", "q\\u0031"]);
        let extra = prop::sample::select(vec![
            "",
            r#","rc":0"#,
            r#","rc":-3"#,
            r#","rc":1.5"#,
            r#","rc":null"#,
            r#","rc":"1""#,
            r#","detail":null"#,
            r#","detail":"x\"y""#,
            r#","tool":{"n":1}"#,
            r#","unknown":[1,2]"#,
            r#","ts":"again""#,
            r#", "by" : "me" "#,
            r#","expires_at":"2026-01-01T00:00:00Z""#,
            r#","totals":{"a":{"costUsd":0.5,"tokens":{"input":1,"output":2}}}"#,
            r#","totals":{"b":{"costUsd":null,"tokens":null},"c":{"costUsd":1e-3,"tokens":null}}"#,
            r#","totals":{"../x":{"costUsd":1,"tokens":null}}"#,
            r#","totals":{"a":{"cost":1}}"#,
        ]);
        let v = prop::sample::select(vec![r#""runstate/v1""#, r#""runstate/v2""#, "null", r#""runstate\\/v1""#]);
        let kind = prop::sample::select(vec![
            r#","input":"requested","kind":"question""#,
            r#","input":"requested","kind":"tool_approval""#,
            r#","input":"requested""#,
            r#","input":"answered","decision":"allow""#,
            r#","input":"answered","decision":"maybe""#,
            r#","input":"other","decision":"deny""#,
        ]);
        (0..4u8, v, task, state, run, req, kind, extra, 0..3u8).prop_map(
            |(shape, v, task, state, run, req, kind, extra, cut)| {
                let head = format!(r#"{{"v":{v},"ts":"t","actor":"r""#);
                let mut l = match shape {
                    0 => format!(r#"{head},"task":"{task}","state":"{state}"{extra}}}"#),
                    1 => format!(r#"{head},"run":"{run}"{extra}}}"#),
                    2 => format!(r#"{head},"task":"{task}","request":"{req}"{kind}{extra}}}"#),
                    _ => format!(r#"{head},"task":"{task}","state":"{state}","run":"{run}"{extra}}}"#),
                };
                // Now and then a torn line, or one in another layout.
                match cut {
                    1 if l.len() > 5 => l.truncate(l.len() / 2),
                    2 => l = l.replace(':', " : ").replace(',', "\t,"),
                    _ => {}
                }
                l
            },
        )
    }

    proptest::proptest! {
        #[test]
        fn pushing_generated_lines_folds_as_parsing_them(lines in proptest::collection::vec(line(), 0..12)) {
            let text = lines.join("\n");
            let full = Journal::parse(text.as_bytes());
            let mut pushed = Journal::default();
            lines.iter().for_each(|l| pushed.push(l.as_bytes()));
            proptest::prop_assert_eq!(answers(&full), answers(&pushed));
            proptest::prop_assert_eq!((full.records, full.skipped), (pushed.records, pushed.skipped));
        }
    }

    /// A supervisor's death journaled says nothing of the run's state (a
    /// paused run stays paused) and holds until a supervisor starts again.
    /// A journal the agent replaced with a link (out of the run, to a file
    /// the writer may write) or a FIFO is refused, never written through
    /// nor waited on; a regular one takes the line.
    #[test]
    fn a_linked_or_fifo_journal_is_refused_and_nothing_is_written_through_it() {
        let d = std::env::temp_dir().join(format!("runwire-journal-odd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("linked.jsonl")).unwrap();
        nix::unistd::mkfifo(&d.join("fifo.jsonl"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = append_line(&d.join("linked.jsonl"), b"{}").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let t = std::time::Instant::now();
        let e = append_line(&d.join("fifo.jsonl"), b"{}").unwrap_err();
        assert!(e.to_string().contains("not a regular file") && t.elapsed().as_secs() < 2, "{e}");
        append_line(&d.join("plain.jsonl"), b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(d.join("plain.jsonl")).unwrap(), "{}\n");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_supervisor_gone_record_keeps_the_state_and_a_start_clears_it() {
        let rec = |run: &str, detail: &str| {
            format!(r#"{{"v":"runstate/v1","ts":"t","actor":"runwire-serve","run":"{run}","detail":"{detail}"}}"#)
        };
        let mut lines = vec![rec("started", ""), rec("paused", "by ana"), rec("supervisor-gone", "pid 7 gone")];
        let j = Journal::parse(lines.join("\n").as_bytes());
        assert_eq!((j.last_run(), j.last_run_detail()), (Some("paused"), Some("by ana")));
        assert_eq!(j.supervisor_gone(), Some("pid 7 gone"));
        // Another run record that says nothing of the state keeps it gone; a start clears it.
        lines.push(rec("steer-dropped", "x"));
        assert_eq!(Journal::parse(lines.join("\n").as_bytes()).supervisor_gone(), Some("pid 7 gone"));
        lines.push(rec("started", "restarted"));
        let j = Journal::parse(lines.join("\n").as_bytes());
        assert_eq!((j.supervisor_gone(), j.last_run()), (None, Some("started")));
        // The record is one of the contract's.
        assert!(serde_json::from_str::<Record>(&rec("supervisor-gone", "d")).unwrap().validate().is_ok());
    }

    #[test]
    fn pushing_line_by_line_folds_as_parsing_the_whole() {
        let lines = [
            r#"{"v":"runstate/v1","ts":"t0","actor":"r","run":"started"}"#,
            r#"{"v":"runstate/v1","ts":"t1","actor":"r","task":"a","state":"leased"}"#,
            r#"{"v":"runstate/v1","ts":"t2","actor":"s","task":"a","input":"requested","request":"q1","kind":"tool_approval","tool":"Bash","detail":"rm"}"#,
            "junk",
            "",
            r#"{"v":"runstate/v1","ts":"t3","actor":"s","task":"b","input":"requested","request":"q1","kind":"question"}"#,
            r#"{"v":"runstate/v1","ts":"t4","actor":"s","task":"a","input":"requested","request":"q1","kind":"question","expires_at":"x"}"#,
            r#"{"v":"runstate/v1","ts":"t5","actor":"u","task":"a","input":"answered","request":"q1","decision":"allow"}"#,
            r#"{"v":"runstate/v1","ts":"t6","actor":"r","task":"a","state":"committed","rc":0}"#,
            r#"{"v":"runstate/v2","ts":"t7","actor":"r","task":"a","state":"failed"}"#,
            r#"{"v":"runstate/v1","ts":"t8","actor":"u","run":"paus\u0065d"}"#,
            r#"{"v":"runstate/v1","ts":"t9","actor":"u","task":"b","input":"answered","request":"q1","decision":"deny"}"#,
        ];
        let mut j = Journal::default();
        let mut text = String::new();
        for l in lines {
            j.push(l.as_bytes());
            text.push_str(l);
            text.push('\n');
            assert_eq!(j, Journal::parse(text.as_bytes()), "after {l}");
        }
    }

    #[test]
    fn last_state_per_task_and_truncated_tail_tolerated() {
        let dir = std::env::temp_dir().join(format!("runwire-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.jsonl");
        let _ = std::fs::remove_file(&p);
        append(&crate::runs::marks::test_run(), &p, &Record::task("runner", "a", "leased", None)).unwrap();
        append(&crate::runs::marks::test_run(), &p, &Record::task("runner", "a", "implemented", None)).unwrap();
        append(&crate::runs::marks::test_run(), &p, &Record::task("runner", "b", "failed", Some(2))).unwrap();
        append(&crate::runs::marks::test_run(), &p, &Record::run("user", "paused")).unwrap();
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
    fn an_append_after_a_torn_line_loses_no_record() {
        let dir = std::env::temp_dir().join(format!("runwire-journal-torn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.jsonl");
        let _ = std::fs::remove_file(&p);
        append(&crate::runs::marks::test_run(), &p, &Record::task("runner", "a", "leased", None)).unwrap();
        // kill -9 (or a full disk) mid-write: a torn last line, no newline.
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"v":"runstate/v1","ts":"2026-01-01T00:0"#).unwrap();
        drop(f);
        // The restart's records: each survives as a line of its own.
        append(&crate::runs::marks::test_run(), &p, &Record::task("runner", "a", "committed", Some(0))).unwrap();
        append(&crate::runs::marks::test_run(), &p, &Record::input("session", "b", "requested", "r1", "question"))
            .unwrap();
        let j = Journal::read(&p).unwrap();
        assert_eq!(j.state("a"), Some("committed"));
        assert_eq!(j.open.len(), 1);
        assert_eq!((j.records, j.skipped), (3, 1));
        // An empty file and a file ending in a newline get no extra line.
        let q = dir.join("t.jsonl");
        let _ = std::fs::remove_file(&q);
        append(&crate::runs::marks::test_run(), &q, &Record::run("u", "paused")).unwrap();
        append(&crate::runs::marks::test_run(), &q, &Record::run("u", "resumed")).unwrap();
        let text = std::fs::read_to_string(&q).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(!text.starts_with('\n') && !text.contains("\n\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn input_records_are_checked_and_fold_into_open_requests() {
        let r = Record::input("s", "a", "requested", "r1", "tool_approval");
        assert!(r.validate().is_ok());
        assert!(Record::input("s", "a", "requested", "r1", "bogus").validate().is_err());
        assert!(Record::input("s", "a", "answered", "r1", "maybe").validate().is_err());
        assert!(Record::input("s", "a", "answered", "", "allow").validate().is_err());
        let mut both = Record::input("s", "a", "answered", "r1", "allow");
        both.state = Some("leased".into());
        assert!(both.validate().is_err(), "an input record is not a task state record too");
        let lines: Vec<String> = [
            Record::task("r", "a", "leased", None),
            Record::input("s", "a", "requested", "r1", "question"),
            Record::input("s", "a", "requested", "r2", "plan_approval"),
            Record::input("s", "a", "answered", "r1", "answer"),
        ]
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
        let j = Journal::parse(lines.join("\n").as_bytes());
        assert_eq!(j.state("a"), Some("leased"));
        assert_eq!(j.open.iter().map(|o| o.request.as_str()).collect::<Vec<_>>(), ["r2"]);
        assert!(j.needs_input("a"));
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
