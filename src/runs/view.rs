//! The views: what `runs list|show` prints and what `GET /runs`,
//! `GET /runs/:runId` and `GET /runs/:runId/tasks/:tid` answer. One function
//! per view, used by both, so the two can never disagree.

use super::journal::{is_terminal, waits, Fold, Journal, TaskTotals, TokenCount};
use super::plan::{self, Plan};
use super::registry::{Fields, Pointer, Registry};
use super::safe::{self, Unreadable};
use super::stamp::Stamp;
use super::{check_id, liveness, RunFiles};
use crate::pipeline::events::Data;
use crate::pipeline::normalize::{Adapter, Normalizer, Options};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Every run status, the one list (`spec/LAYOUT.md`, "Run statuses"):
/// filters accept these and views give nothing else.
pub const STATUSES: [&str; 9] =
    ["registered", "running", "idle", "needs_input", "paused", "done", "failed", "missing", "unreadable"];

/// The statuses of a run still going (a process behind it, or to come).
pub const GOING: [&str; 5] = ["registered", "running", "idle", "needs_input", "paused"];

/// The status `s` from [`STATUSES`]; `None` for another.
pub fn status(s: &str) -> Option<&'static str> {
    STATUSES.iter().copied().find(|k| *k == s)
}

/// Why a view could not be given.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewError {
    /// A malformed id (HTTP 400, exit 2).
    Bad(String),
    /// No such run or task (HTTP 404, exit 1).
    NotFound(String),
    /// The run's files cannot be read, or a path it names is refused
    /// (HTTP 409, exit 3).
    Unreadable(String),
}

/// What keeps a run's files from being shown.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// The runstate directory is gone (status `missing`).
    Missing,
    /// A file cannot be read, or is refused (status `unreadable`).
    Unreadable(String),
}

/// Everything read for one run.
pub struct Loaded {
    /// Shared: a listing keeps the pointer it read for its cache.
    pub pointer: Arc<Pointer>,
    /// False when the pointer itself could not be read: only `run_id` is real.
    pub pointer_ok: bool,
    pub files: RunFiles,
    pub journal: Journal,
    pub plan: Option<Plan>,
    pub problem: Option<Problem>,
    /// The runstate directory, opened (`None` when it could not be).
    pub dir: Option<OwnedFd>,
    /// The journal's stamp as it was opened (`None`: absent or refused).
    pub journal_stamp: Option<Stamp>,
    /// The home's approval link prefixes ([`find`] reads them): links are shown only under them.
    pub link_prefixes: super::link_prefixes::LinkPrefixes,
}

/// Answers `runs show` lists at most (the latest).
pub const MAX_ANSWERS: usize = 200;

/// Reads `name` in the run's directory whole, with a bound. `Ok(None)`
/// when it does not exist.
pub fn read_opt(dir: BorrowedFd, name: &str, cap: u64, buf: &mut Vec<u8>) -> Result<Option<usize>, Unreadable> {
    match safe::open_beneath(dir, Path::new(name)) {
        Ok((mut f, st)) => safe::read_capped(&mut f, &st, buf, cap, name).map(Some),
        Err(e) if e.absent => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a run's journal and plan (a missing or invalid plan is `None`),
/// safely: see [`safe`]. What cannot be read is the run's [`Problem`].
pub fn load(pointer: Pointer) -> Loaded {
    load_raw(pointer).0
}

/// [`load`], and the journal's bytes as read (for readers that fold it
/// record by record, as the change feed does).
pub fn load_raw(pointer: Pointer) -> (Loaded, Vec<u8>) {
    let files = RunFiles::new(&pointer.runstate_dir, &pointer.slug);
    let mut l = Loaded::empty(pointer, files, None);
    let dir = match safe::open_dir(&l.files.dir) {
        Ok(d) => d,
        Err(nix::errno::Errno::ENOENT) => {
            l.problem = Some(Problem::Missing);
            return (l, Vec::new());
        }
        Err(e) => {
            let why = format!("runstateDir {}: {}", l.files.dir.display(), e.desc().to_lowercase());
            l.problem = Some(Problem::Unreadable(why));
            return (l, Vec::new());
        }
    };
    let mut journal = Vec::new();
    let slug = l.pointer.slug.clone();
    let name = format!("{slug}.jsonl");
    let read = safe::open_beneath(dir.as_fd(), Path::new(&name)).and_then(|(mut f, st)| {
        l.journal_stamp = Some(Stamp::of(&st));
        safe::read_capped(&mut f, &st, &mut journal, safe::MAX_JOURNAL, &name)
    });
    match read {
        Ok(n) => {
            journal.truncate(n);
            l.journal = Journal::parse(&journal);
        }
        Err(e) => {
            journal.clear();
            l.journal_stamp = None;
            if !e.absent {
                l.problem = Some(Problem::Unreadable(e.to_string()))
            }
        }
    }
    let mut buf = Vec::new();
    match read_opt(dir.as_fd(), &format!("{slug}.plan.json"), safe::MAX_PLAN, &mut buf) {
        Ok(Some(n)) => l.plan = Plan::read(&buf[..n]).ok(),
        Ok(None) => {}
        Err(e) => {
            if l.problem.is_none() {
                l.problem = Some(Problem::Unreadable(e.to_string()))
            }
        }
    }
    l.dir = Some(dir);
    (l, journal)
}

/// A run whose pointer file cannot be read: listed by its id, with why.
pub fn unreadable_pointer(run_id: &str, why: String) -> Loaded {
    let pointer = Pointer { run_id: run_id.to_string(), ..Pointer::default() };
    let mut l = Loaded::empty(pointer, RunFiles::new("", ""), Some(Problem::Unreadable(why)));
    l.pointer_ok = false;
    l
}

/// A summary as written, keys sorted.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct SummaryOut<'a> {
    /// Milliseconds since the epoch of the run's latest activity (see
    /// `spec/LAYOUT.md`), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    activity_ms: Option<i64>,
    branch: Option<&'a str>,
    cost_usd: Option<f64>,
    counts: Counts<'a>,
    needs_input: u64,
    project: Option<&'a str>,
    reason: Option<&'a str>,
    repo: Option<&'a str>,
    repo_root: Option<&'a str>,
    run_id: &'a str,
    slug: Option<&'a str>,
    status: &'static str,
    /// `"gone"` when the journal says so ([`Digest::supervisor_gone`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    supervisor: Option<&'static str>,
    tokens: Option<Tokens>,
    wave: Option<usize>,
    worktree: Option<&'a str>,
}

/// Tasks by state, sorted by state, serialized as a map.
struct Counts<'a>(&'a [(String, u64)]);

impl serde::Serialize for Counts<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, n)| (k, n)))
    }
}

#[derive(serde::Serialize)]
struct Tokens {
    input: u64,
    output: u64,
}

/// Looks a run up by id, checking the id first. A pointer that cannot be
/// read gives a run with status `unreadable`, never an error.
pub fn find(reg: &Registry, run_id: &str) -> Result<Loaded, ViewError> {
    super::check_run_id("runId", run_id).map_err(ViewError::Bad)?;
    match reg.read(run_id) {
        Ok(p) => Ok(Loaded { link_prefixes: super::link_prefixes::LinkPrefixes::read(reg.home()), ..load(p) }),
        Err(e) if e.absent => Err(ViewError::NotFound(format!("no run {run_id:?}"))),
        Err(e) => Ok(unreadable_pointer(run_id, e.to_string())),
    }
}

/// Adapter by name.
pub fn adapter(name: &str) -> Option<Adapter> {
    match name {
        "claude" => Some(Adapter::Claude),
        "cursor" => Some(Adapter::Cursor),
        "codex" => Some(Adapter::Codex),
        _ => None,
    }
}

/// What a task's log adds up to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub session: Option<String>,
    pub exit: Option<i64>,
}

impl Totals {
    /// Adds the cost and tokens of `t`, those it has.
    pub fn add(&mut self, t: &Totals) {
        if let Some(c) = t.cost_usd {
            *self.cost_usd.get_or_insert(0.0) += c;
        }
        if let Some(i) = t.input_tokens {
            *self.input_tokens.get_or_insert(0) += i;
        }
        if let Some(o) = t.output_tokens {
            *self.output_tokens.get_or_insert(0) += o;
        }
    }

    /// Input and output tokens, when either is known.
    pub fn tokens(&self) -> Option<(u64, u64)> {
        (self.input_tokens.is_some() || self.output_tokens.is_some())
            .then(|| (self.input_tokens.unwrap_or(0), self.output_tokens.unwrap_or(0)))
    }

    /// Adds a `turn_end`'s cost and tokens.
    pub fn add_turn(&mut self, te: &crate::pipeline::events::TurnEnd) {
        let (input, output) = te.usage.as_ref().map(|u| (u.input_tokens, u.output_tokens)).unzip();
        self.add(&Totals { cost_usd: te.cost_usd, input_tokens: input, output_tokens: output, ..Totals::default() });
    }
}

/// Normalizes an opened log and sums its `turn_end` costs and tokens, in
/// bounded memory: lines over [`safe::MAX_TOTALS_LINE`] are skipped.
pub fn log_totals(file: std::fs::File, adapter: Adapter) -> Totals {
    let mut t = Totals::default();
    let mut norm = Normalizer::new(adapter, Options::default());
    let _ = safe::bounded_lines(file, safe::MAX_TOTALS_LINE, |line| {
        for ev in norm.push(line) {
            match ev.data {
                Data::TurnEnd(te) => t.add_turn(&te),
                Data::Exit(x) => t.exit = Some(x.rc),
                _ => {}
            }
        }
    });
    t.session = norm.session().map(str::to_string);
    t
}

/// The totals of the log `rel` beneath `dir`: `Ok(None)` when it does not
/// exist, `Err` when it is refused.
pub fn log_totals_in(dir: BorrowedFd, rel: &Path, adapter: Adapter) -> Result<Option<Totals>, Unreadable> {
    match safe::open_beneath(dir, rel) {
        Ok((f, _)) => Ok(Some(log_totals(f, adapter))),
        Err(e) if e.absent => Ok(None),
        Err(e) => Err(e),
    }
}

/// The agent's session a task's log names (`acp` tasks' logs read as
/// cursor's): what a restarted supervisor resumes when the liveness entry
/// that held it is gone (`liveness reap` between a crash and the restart).
pub fn log_session(files: &RunFiles, task: &str, adapter_name: &str) -> Option<String> {
    let a = if adapter_name == "acp" { Adapter::Cursor } else { adapter(adapter_name)? };
    let dir = safe::open_dir(&files.dir).ok()?;
    log_totals_in(dir.as_fd(), Path::new(&format!("{}.{task}.log", files.slug)), a).ok()??.session
}

/// What a writer journals when a turn of `task` ends (see
/// [`TaskTotals`]): its log's totals as a listing would count them, read
/// as a listing reads the log. `None` when the adapter has no totals or the
/// log is refused (a reader then finds the problem itself).
pub fn turn_totals(files: &RunFiles, task: &str, adapter_name: &str) -> Option<TaskTotals> {
    let a = adapter(adapter_name)?;
    let dir = safe::open_dir(&files.dir).ok()?;
    let t = log_totals_in(dir.as_fd(), Path::new(&format!("{}.{task}.log", files.slug)), a).ok()?.unwrap_or_default();
    let tokens = t.tokens().map(|(input, output)| TokenCount { input, output });
    Some(TaskTotals { cost_usd: t.cost_usd, tokens })
}

/// A task as a summary sees it.
struct TaskView<'a> {
    id: &'a str,
    /// Its last state in the journal.
    state: Option<&'a str>,
    /// Not finished, with an input request open (as [`Fold::needs_input`]).
    needs_input: bool,
    /// Its plan's adapter (`None`: not in the plan, or an unknown one).
    adapter: Option<Adapter>,
}

/// What a run's summary is made of: a [`Loaded`]'s parts.
pub struct Parts<'a> {
    pub pointer: Fields<'a>,
    /// False when the pointer itself could not be read: only `run_id` is real.
    pub pointer_ok: bool,
    pub journal: &'a dyn Fold,
    pub plan: Option<&'a dyn plan::View>,
    pub problem: Option<&'a Problem>,
}

impl<'a> Parts<'a> {
    /// Task ids: the plan's in order, then any only the journal names.
    pub fn task_ids(&self) -> Vec<&'a str> {
        self.tasks().into_iter().map(|t| t.id).collect()
    }

    /// The tasks ([`Parts::task_ids`]' order) with what the journal says of
    /// each, each asked once: a listing's summary asks every task's state
    /// several times (counts, status, wave).
    fn tasks(&self) -> Vec<TaskView<'a>> {
        let j = self.journal;
        let view = |id: &'a str, adapter: Option<Adapter>| {
            let state = j.state(id);
            TaskView { id, state, needs_input: waits(state, j.has_open(id)), adapter }
        };
        let mut tasks: Vec<TaskView<'a>> = match self.plan {
            Some(p) => (0..p.task_count()).map(|i| view(p.task_id(i), adapter(p.task_adapter(i)))).collect(),
            None => Vec::new(),
        };
        j.each_task(&mut |t| {
            if !tasks.iter().any(|v| v.id == t) {
                tasks.push(view(t, None));
            }
        });
        tasks
    }

    pub fn adapter_of(&self, task: &str) -> Option<Adapter> {
        let p = self.plan?;
        // Any ACP agent's log reads as cursor's (the ACP normalizer); `adapter`
        // itself keeps naming wrappers, which `acp` tasks have none of.
        let log_adapter = |a: &str| if a == "acp" { Some(Adapter::Cursor) } else { adapter(a) };
        (0..p.task_count()).find(|&i| p.task_id(i) == task).and_then(|i| log_adapter(p.task_adapter(i)))
    }

    /// One of [`STATUSES`], given the tasks and the problem found.
    fn status_of(&self, tasks: &[TaskView], problem: Option<&Problem>) -> &'static str {
        match problem {
            Some(Problem::Missing) => return "missing",
            Some(Problem::Unreadable(_)) => return "unreadable",
            None => {}
        }
        let j = self.journal;
        if j.records() == 0 {
            return "registered";
        }
        if !tasks.is_empty() && tasks.iter().all(|t| t.state.is_some_and(is_terminal)) {
            return if tasks.iter().any(|t| matches!(t.state, Some("failed" | "halted"))) { "failed" } else { "done" };
        }
        if tasks.iter().any(|t| t.needs_input) {
            return "needs_input";
        }
        match j.last_run() {
            Some("paused") => "paused",
            Some("idle") => "idle",
            Some("aborted") => "failed",
            // The supervisor's last word with tasks left unstarted (a plan of
            // none; dependents of a task that failed) or not in the plan.
            Some("finished") if tasks.iter().any(|t| matches!(t.state, Some("failed" | "halted"))) => "failed",
            Some("finished") => "done",
            _ => "running",
        }
    }

    /// The 1-based wave holding the first unfinished task.
    pub fn wave(&self) -> Option<usize> {
        self.wave_of(&self.tasks())
    }

    /// Why a failed run failed: its first halted task's state and detail
    /// ([`super::journal::failure_reason`]), else the abort's detail.
    fn failure(&self, tasks: &[TaskView]) -> Option<String> {
        let j = self.journal;
        super::journal::failure_reason(tasks.iter().map(|t| (t.id, t.state, j.detail(t.id)))).or_else(|| {
            (j.last_run() == Some("aborted")).then(|| match j.last_run_detail() {
                Some(d) => format!("aborted: {d}"),
                None => "aborted".to_string(),
            })
        })
    }

    /// [`Parts::wave`], given [`Parts::tasks`] (the plan's come first, in order).
    fn wave_of(&self, tasks: &[TaskView]) -> Option<usize> {
        let plan = self.plan?;
        tasks[..plan.task_count()]
            .iter()
            .zip(plan.wave_indices().iter())
            .filter(|(t, _)| !t.state.is_some_and(is_terminal))
            .filter_map(|(_, w)| *w)
            .min()
            .map(|i| i + 1)
    }

    /// The summary (`GET /runs` item, `runs list` line) as JSON text, and
    /// its status; `totals(task, adapter)` gives what the task's log
    /// (`<slug>.<task>.log`) adds up to (`Ok(None)`: no log; `Err`: the log
    /// is refused, and the run is `unreadable` with that reason).
    pub fn summary(
        &self,
        activity_ms: Option<i64>,
        totals: impl FnMut(&str, Adapter) -> Result<Option<Totals>, Unreadable>,
    ) -> (String, &'static str) {
        let d = self.digest(totals);
        let mut out = Vec::with_capacity(640);
        write_summary(&mut out, self.pointer, self.pointer_ok, &d, activity_ms);
        (String::from_utf8(out).unwrap_or_default(), d.status)
    }

    /// What the summary says beyond the pointer (see [`Digest`]).
    pub fn digest(&self, mut totals: impl FnMut(&str, Adapter) -> Result<Option<Totals>, Unreadable>) -> Digest {
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        let mut sum = Totals::default();
        let tasks = self.tasks();
        let mut problem = self.problem.cloned();
        let mut needs_input = 0;
        for t in &tasks {
            *counts.entry(t.state.unwrap_or("pending")).or_default() += 1;
            needs_input += u64::from(t.needs_input);
            if problem.is_some() {
                continue;
            }
            if let Some(a) = t.adapter {
                // What the journal says at the task's last turn end; its log
                // only for journals that do not say (older writers).
                let journaled = self.journal.totals(t.id).map(|j| {
                    Ok(Some(Totals {
                        cost_usd: j.cost_usd,
                        input_tokens: j.tokens.map(|t| t.input),
                        output_tokens: j.tokens.map(|t| t.output),
                        ..Totals::default()
                    }))
                });
                match journaled.unwrap_or_else(|| totals(t.id, a)) {
                    Ok(Some(s)) => sum.add(&s),
                    Ok(None) => {}
                    Err(e) => problem = Some(Problem::Unreadable(e.to_string())),
                }
            }
        }
        let status = self.status_of(&tasks, problem.as_ref());
        let reason = match &problem {
            Some(Problem::Unreadable(r)) => Some(r.clone()),
            Some(Problem::Missing) => Some(MISSING_REASON.to_string()),
            // A failed run says why: only failed runs pay for the text.
            None if status == "failed" => self.failure(&tasks),
            None => None,
        };
        // Still going, its supervisor's death journaled and none started since ("Who runs a run").
        let gone = self.journal.supervisor_gone().filter(|_| reason.is_none() && GOING.contains(&status));
        let (supervisor_gone, reason) = (gone.is_some(), gone.map(str::to_string).or(reason));
        Digest {
            status,
            counts: counts.into_iter().map(|(k, n)| (k.to_string(), n)).collect(),
            needs_input,
            cost_usd: sum.cost_usd,
            tokens: sum.tokens(),
            wave: self.wave_of(&tasks),
            reason,
            supervisor_gone,
            problem: problem.is_some(),
        }
    }
}

/// Why a `missing` run is listed.
const MISSING_REASON: &str = "its runstate directory is gone (`runs reap` removes the pointer)";

/// What a run's summary says beyond its pointer, computed from its journal,
/// plan and task logs: what the run index keeps for each journal
/// (`runs::index`), and with the pointer all a listing shows of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Digest {
    /// One of [`STATUSES`].
    pub status: &'static str,
    /// Tasks by state, sorted by state.
    pub counts: Vec<(String, u64)>,
    pub needs_input: u64,
    pub cost_usd: Option<f64>,
    /// Input and output tokens.
    pub tokens: Option<(u64, u64)>,
    pub wave: Option<usize>,
    pub reason: Option<String>,
    /// Still going, its journal's last `supervisor-gone` with no `started`
    /// after it (`reason` its detail): `"supervisor":"gone"`.
    pub supervisor_gone: bool,
    /// The run's files could not all be read (`missing`, `unreadable`):
    /// never kept in the index.
    pub problem: bool,
}

/// A run's summary (`GET /runs` item, `runs list` line) from its pointer
/// and its digest, appended to `out`, keys sorted. `pointer_ok`: false
/// when the pointer could not be read (only its run id is real).
pub fn write_summary(out: &mut Vec<u8>, p: Fields, pointer_ok: bool, d: &Digest, activity_ms: Option<i64>) {
    fn known(ok: bool, s: &str) -> Option<&str> {
        ok.then_some(s)
    }
    let ok = pointer_ok;
    let summary = SummaryOut {
        activity_ms,
        branch: p.branch,
        cost_usd: d.cost_usd,
        counts: Counts(&d.counts),
        needs_input: d.needs_input,
        project: known(ok, p.project),
        reason: d.reason.as_deref(),
        repo: known(ok, p.repo),
        repo_root: known(ok, p.repo_root),
        run_id: p.run_id,
        slug: known(ok, p.slug),
        status: d.status,
        supervisor: d.supervisor_gone.then_some("gone"),
        tokens: d.tokens.map(|(input, output)| Tokens { input, output }),
        wave: d.wave,
        worktree: known(ok, p.worktree),
    };
    let _ = serde_json::to_writer(out, &summary);
}

impl Loaded {
    /// A run with nothing read yet.
    fn empty(pointer: Pointer, files: RunFiles, problem: Option<Problem>) -> Loaded {
        Loaded {
            pointer: Arc::new(pointer),
            pointer_ok: true,
            files,
            journal: Journal::default(),
            plan: None,
            problem,
            dir: None,
            journal_stamp: None,
            link_prefixes: Default::default(),
        }
    }

    /// The parts a summary is made of.
    pub fn parts(&self) -> Parts<'_> {
        Parts {
            pointer: self.pointer.fields(),
            pointer_ok: self.pointer_ok,
            journal: &self.journal,
            plan: self.plan.as_ref().map(|p| p as &dyn plan::View),
            problem: self.problem.as_ref(),
        }
    }

    /// Task ids: the plan's in order, then any only the journal names.
    pub fn task_ids(&self) -> Vec<String> {
        self.parts().task_ids().into_iter().map(str::to_string).collect()
    }

    /// The task's logfile, relative to the run's directory: liveness may
    /// name one (it must lie inside the run's directory, else it is
    /// refused); else `<slug>.<task>.log`.
    pub fn log_rel(&self, task: &str, live: Option<&liveness::Entry>) -> Result<PathBuf, Unreadable> {
        let default = || PathBuf::from(format!("{}.{task}.log", self.pointer.slug));
        let Some(named) = live.and_then(|e| e.logfile.as_deref()) else { return Ok(default()) };
        let p = Path::new(named);
        let rel = if p.is_absolute() { p.strip_prefix(&self.files.dir).ok() } else { Some(p) };
        match rel {
            Some(r) if safe::plain_relative(r) => Ok(r.to_path_buf()),
            _ => Err(Unreadable::new(
                format!("liveness logfile of task {task}"),
                format!("{named} is outside the run's directory (refused)"),
            )),
        }
    }

    /// The task's logfile as a path (for display and watching).
    pub fn log_path(&self, task: &str, live: Option<&liveness::Entry>) -> Result<PathBuf, Unreadable> {
        self.log_rel(task, live).map(|r| self.files.dir.join(r))
    }

    pub fn adapter_of(&self, task: &str) -> Option<Adapter> {
        self.parts().adapter_of(task)
    }

    /// One of [`STATUSES`].
    pub fn status(&self) -> &'static str {
        let parts = self.parts();
        parts.status_of(&parts.tasks(), self.problem.as_ref())
    }

    /// The 1-based wave holding the first unfinished task.
    pub fn wave(&self) -> Option<usize> {
        self.parts().wave()
    }

    /// `GET /runs` item / `runs list` line, as a value.
    pub fn summary(&self) -> Value {
        serde_json::from_str(&self.summary_string(None)).unwrap_or(Value::Null)
    }

    /// `GET /runs` item / `runs list` line, as JSON text.
    pub fn summary_string(&self, activity_ms: Option<i64>) -> String {
        self.summary_string_with(activity_ms, |t, a| self.log_totals(t, a))
    }

    /// The run's [`Digest`], cost and tokens from its task logs.
    pub fn digest(&self) -> Digest {
        self.parts().digest(|t, a| self.log_totals(t, a))
    }

    /// What the log of `task` (`<slug>.<task>.log`) adds up to: `Ok(None)`
    /// when it does not exist (or the run's directory could not be opened).
    fn log_totals(&self, task: &str, a: Adapter) -> Result<Option<Totals>, Unreadable> {
        match &self.dir {
            Some(d) => log_totals_in(d.as_fd(), Path::new(&format!("{}.{task}.log", self.pointer.slug)), a),
            None => Ok(None),
        }
    }

    /// [`Parts::summary`]'s text.
    pub fn summary_string_with(
        &self,
        activity_ms: Option<i64>,
        totals: impl FnMut(&str, Adapter) -> Result<Option<Totals>, Unreadable>,
    ) -> String {
        self.parts().summary(activity_ms, totals).0
    }

    /// The open input requests, as the views show them.
    fn requests(&self, task: Option<&str>) -> Vec<Value> {
        self.journal
            .open
            .iter()
            .filter(|o| task.is_none_or(|t| o.task == t) && !self.journal.state(&o.task).is_some_and(is_terminal))
            .map(|o| {
                let mut r = json!({"task": o.task, "request": o.request, "kind": o.kind, "tool": o.tool,
                    "detail": o.detail, "expiresAt": o.expires_at, "ts": o.ts});
                // What an answer names the request by (absent in journals of older writers).
                if let Some(i) = &o.interrupt {
                    r["interrupt"] = i.clone().into();
                }
                // Its approval links (the studio's "Copy approval link"), runwire's own only.
                let links = self.link_prefixes.keep_strings(&o.links);
                if !links.is_empty() {
                    r["links"] = links.into();
                }
                r
            })
            .collect()
    }

    /// Who answered what, when, and what an allow granted: the journal's
    /// `answered` records, the last
    /// [`MAX_ANSWERS`] of them (read again here: the fold every listing
    /// runs keeps only what is open).
    fn answers(&self) -> Vec<Value> {
        let Some(dir) = self.dir.as_ref() else { return Vec::new() };
        let name = format!("{}.jsonl", self.pointer.slug);
        let mut buf = Vec::new();
        let Ok(Some(n)) = read_opt(dir.as_fd(), &name, safe::MAX_JOURNAL, &mut buf) else { return Vec::new() };
        let mut out: std::collections::VecDeque<Value> = std::collections::VecDeque::new();
        for line in buf[..n].split(|&b| b == b'\n') {
            let Ok(Value::Object(r)) = serde_json::from_slice::<Value>(line) else { continue };
            if r.get("input").and_then(Value::as_str) != Some("answered") {
                continue;
            }
            // What an allow granted too: its scope, the edited input, a plan's mode.
            let keep = [
                "ts",
                "task",
                "request",
                "interrupt",
                "decision",
                "by",
                "door",
                "detail",
                "scope",
                "updated_input",
                "mode",
            ];
            let a: Map<String, Value> = r.into_iter().filter(|(k, _)| keep.contains(&k.as_str())).collect();
            if out.len() == MAX_ANSWERS {
                out.pop_front();
            }
            out.push_back(Value::Object(a));
        }
        out.into()
    }

    /// `GET /runs/:runId` / `runs show`.
    pub fn show(&self) -> Value {
        let plan = self.plan.as_ref().map(|plan| {
            let waves = plan.waves();
            let wave_of = |id: &str| waves.iter().position(|w| w.iter().any(|t| t == id)).map(|i| i + 1);
            let tasks: Vec<Value> = plan
                .tasks
                .iter()
                .map(|t| {
                    json!({"id": t.id, "adapter": t.adapter, "deps": t.deps, "gate": t.gate, "review": t.review,
                           "wave": wave_of(&t.id)})
                })
                .collect();
            json!({"waves": waves, "tasks": tasks})
        });
        let mut tasks = Map::new();
        for t in self.task_ids() {
            let r = self.journal.tasks.get(&t);
            tasks.insert(
                t.clone(),
                json!({
                    "state": r.and_then(|r| r.state.clone()).unwrap_or_else(|| "pending".into()),
                    "rc": r.and_then(|r| r.rc), "ts": r.map(|r| r.ts.clone()), "actor": r.map(|r| r.actor.clone()),
                    "detail": r.and_then(|r| r.detail.clone()),
                    "needsInput": self.journal.needs_input(&t),
                }),
            );
        }
        json!({
            "run": self.summary(),
            "meta": self.pointer_ok.then_some(&*self.pointer),
            "plan": plan,
            "tasks": tasks,
            "inputRequests": self.requests(None),
            "answers": self.answers(),
            "lastRunRecord": self.journal.last_run,
            "journal": {"records": self.journal.records, "skipped": self.journal.skipped},
        })
    }

    /// `GET /runs/:runId/tasks/:tid` / `runs task`.
    pub fn task(&self, tid: &str) -> Result<Value, ViewError> {
        check_id("task", tid).map_err(ViewError::Bad)?;
        if !self.task_ids().iter().any(|t| t == tid) {
            return Err(ViewError::NotFound(format!("run {:?} has no task {tid:?}", self.pointer.run_id)));
        }
        let live = liveness::get(&self.files);
        let entry = live.tasks.get(tid);
        let plan_task = self.plan.as_ref().and_then(|p| p.task(tid));
        // A refused log (outside the run's directory, not a regular file) is named, never read.
        let mut refused: Option<String> = None;
        let rel = self.log_rel(tid, entry).map_err(|e| refused = Some(e.to_string())).ok();
        let log = rel.as_ref().map(|r| self.files.dir.join(r));
        let (mut totals, mut idle) = (Totals::default(), None);
        if let (Some(dir), Some(rel)) = (self.dir.as_ref(), rel.as_ref()) {
            match safe::open_beneath(dir.as_fd(), rel) {
                Ok((f, st)) => {
                    idle = Some((now_ms() - st.st_mtime * 1000 - st.st_mtime_nsec / 1_000_000).max(0) as f64 / 1000.0);
                    if let Some(a) = self.adapter_of(tid) {
                        totals = log_totals(f, a);
                    }
                }
                Err(e) if e.absent => {}
                Err(e) => refused = Some(e.to_string()),
            }
        }
        let now = now_ms();
        let pid = entry.and_then(|e| e.pid);
        let alive = pid.map(liveness::pid_alive);
        let started = entry.and_then(|e| e.started_ts.as_deref()).and_then(crate::util::time::parse_rfc3339_ms);
        let r = self.journal.tasks.get(tid);
        Ok(json!({
            "runId": self.pointer.run_id,
            "task": tid,
            "adapter": plan_task.map(|t| t.adapter.clone()),
            "deps": plan_task.map(|t| t.deps.clone()).unwrap_or_default(),
            "state": r.and_then(|r| r.state.clone()).unwrap_or_else(|| "pending".into()),
            "needsInput": self.journal.needs_input(tid),
            "inputRequests": self.requests(Some(tid)),
            "rc": r.and_then(|r| r.rc),
            "detail": r.and_then(|r| r.detail.clone()),
            "sessionId": entry.and_then(|e| e.session_id.clone()).or(totals.session),
            "pid": pid,
            "pgid": entry.and_then(|e| e.pgid),
            "alive": alive,
            "startedTs": entry.and_then(|e| e.started_ts.clone()),
            "runtimeS": started.filter(|_| alive == Some(true)).map(|s| (now - s).max(0) as f64 / 1000.0),
            "idleS": idle,
            // A refused log is named by its reason only: a path to it would
            // invite a reader to open what was refused (a FIFO, a link out).
            "logfile": log.filter(|_| refused.is_none()).map(|l| l.display().to_string()),
            "reason": refused,
            "costUsd": totals.cost_usd,
        }))
    }
}

fn now_ms() -> i64 {
    super::stamp::now_ns() / 1_000_000
}
