//! The views: what `runs list|show` prints and what `GET /runs`,
//! `GET /runs/:runId` and `GET /runs/:runId/tasks/:tid` answer. One function
//! per view, used by both, so the two can never disagree.

use super::journal::{is_terminal, Journal};
use super::plan::Plan;
use super::registry::{Pointer, Reaped, Registry};
use super::{check_id, liveness, RunFiles};
use crate::events::Data;
use crate::normalize::{Adapter, Normalizer, Options};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why a view could not be given.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewError {
    /// A malformed id (HTTP 400, exit 2).
    Bad(String),
    /// No such run or task (HTTP 404, exit 1).
    NotFound(String),
}

/// Everything read for one run.
pub struct Loaded {
    pub pointer: Pointer,
    pub files: RunFiles,
    pub journal: Journal,
    pub plan: Option<Plan>,
}

/// Reads a run's journal and plan (a missing or invalid plan is `None`).
pub fn load(pointer: Pointer) -> Loaded {
    let files = RunFiles::new(&pointer.runstate_dir, &pointer.slug);
    let journal = Journal::read(&files.journal()).unwrap_or_default();
    load_with(pointer, files, journal)
}

fn load_with(pointer: Pointer, files: RunFiles, journal: Journal) -> Loaded {
    let plan = super::read_small(&files.plan()).ok().and_then(|b| Plan::parse(&b).ok());
    Loaded { pointer, files, journal, plan }
}

pub use super::list::ListCache;

/// Every run status, the one list of `spec/LAYOUT.md` (filters are checked against it).
pub const STATUSES: [&str; 8] =
    ["registered", "running", "needs_input", "paused", "done", "failed", "missing", "unreadable"];

/// A summary as written, keys sorted.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct SummaryOut<'a> {
    branch: &'a Option<String>,
    cost_usd: Option<f64>,
    counts: BTreeMap<&'a str, u64>,
    project: &'a str,
    repo: &'a str,
    repo_root: &'a str,
    run_id: &'a str,
    slug: &'a str,
    status: &'static str,
    tokens: Option<Tokens>,
    wave: Option<usize>,
    worktree: &'a str,
}

#[derive(serde::Serialize)]
struct Tokens {
    input: u64,
    output: u64,
}

/// Looks a run up by id, checking the id first.
pub fn find(reg: &Registry, run_id: &str, reaped: &mut Vec<Reaped>) -> Result<Loaded, ViewError> {
    check_id("runId", run_id).map_err(ViewError::Bad)?;
    match reg.get(run_id) {
        (Some(p), _) => Ok(load(p)),
        (None, r) => {
            reaped.extend(r);
            Err(ViewError::NotFound(format!("no run {run_id:?}")))
        }
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

/// Normalizes a log and sums its `turn_end` costs and tokens; a missing log
/// adds nothing.
pub fn log_totals(path: &Path, adapter: Adapter) -> Totals {
    let mut t = Totals::default();
    let Ok(file) = std::fs::File::open(path) else { return t };
    let mut norm = Normalizer::new(adapter, Options::default());
    let _ = crate::pipe::drive(file, &mut std::io::sink(), |_, line, _| {
        for ev in norm.push(line) {
            match ev.data {
                Data::TurnEnd(te) => {
                    if let Some(c) = te.cost_usd {
                        *t.cost_usd.get_or_insert(0.0) += c;
                    }
                    if let Some(u) = te.usage {
                        *t.input_tokens.get_or_insert(0) += u.input_tokens;
                        *t.output_tokens.get_or_insert(0) += u.output_tokens;
                    }
                }
                Data::Exit(x) => t.exit = Some(x.rc),
                _ => {}
            }
        }
        crate::pipe::Flow::Continue
    });
    t.session = norm.session().map(str::to_string);
    t
}

impl Loaded {
    /// Task ids: the plan's in order, then any only the journal names.
    pub fn task_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.plan.iter().flat_map(|p| p.tasks.iter().map(|t| t.id.clone())).collect();
        for t in self.journal.tasks.keys() {
            if !ids.contains(t) {
                ids.push(t.clone());
            }
        }
        ids
    }

    /// The task's logfile: liveness may name one; else `<slug>.<task>.log`.
    pub fn log_path(&self, task: &str, live: Option<&liveness::Entry>) -> PathBuf {
        live.and_then(|e| e.logfile.as_ref()).map(PathBuf::from).unwrap_or_else(|| self.files.log(task))
    }

    pub fn adapter_of(&self, task: &str) -> Option<Adapter> {
        self.plan.as_ref().and_then(|p| p.task(task)).and_then(|t| adapter(&t.adapter))
    }

    /// `registered`, `running`, `paused`, `done` or `failed`.
    pub fn status(&self) -> &'static str {
        self.status_of(&self.task_ids())
    }

    /// [`Loaded::status`], given the task ids.
    fn status_of(&self, ids: &[String]) -> &'static str {
        if self.journal.records == 0 {
            return "registered";
        }
        let states: Vec<Option<&str>> = ids.iter().map(|t| self.journal.state(t)).collect();
        if !states.is_empty() && states.iter().all(|s| s.is_some_and(is_terminal)) {
            return if states.iter().any(|s| matches!(s, Some("failed" | "halted"))) { "failed" } else { "done" };
        }
        match self.journal.last_run.as_ref().and_then(|r| r.run.as_deref()) {
            Some("paused") => "paused",
            Some("aborted") => "failed",
            _ => "running",
        }
    }

    /// The 1-based wave holding the first unfinished task.
    pub fn wave(&self) -> Option<usize> {
        let plan = self.plan.as_ref()?;
        plan.tasks
            .iter()
            .zip(plan.wave_indices())
            .filter(|(t, _)| !self.journal.state(&t.id).is_some_and(is_terminal))
            .filter_map(|(_, w)| w)
            .min()
            .map(|i| i + 1)
    }

    /// `GET /runs` item / `runs list` line, as a value.
    pub fn summary(&self) -> Value {
        serde_json::from_str(&self.summary_string()).unwrap_or(Value::Null)
    }

    /// `GET /runs` item / `runs list` line, as JSON text.
    pub fn summary_string(&self) -> String {
        self.summary_string_with(|t, a| {
            let log = self.files.log(t);
            log.exists().then(|| log_totals(&log, a))
        })
    }

    /// The summary, with `totals(task, adapter)` giving what the task's log
    /// (`<slug>.<task>.log`) adds up to (`None`: no log). A listing answers
    /// it from one directory read per runstate directory. Written straight
    /// to text (no `Value` tree): listings build thousands of these.
    pub fn summary_string_with(&self, mut totals: impl FnMut(&str, Adapter) -> Option<Totals>) -> String {
        let p = &self.pointer;
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        let (mut cost, mut tin, mut tout) = (None::<f64>, None::<u64>, None::<u64>);
        let ids = self.task_ids();
        for t in &ids {
            *counts.entry(self.journal.state(t).unwrap_or("pending")).or_default() += 1;
            if let Some(a) = self.adapter_of(t) {
                if let Some(s) = totals(t, a) {
                    if let Some(c) = s.cost_usd {
                        *cost.get_or_insert(0.0) += c;
                    }
                    if let Some(i) = s.input_tokens {
                        *tin.get_or_insert(0) += i;
                    }
                    if let Some(o) = s.output_tokens {
                        *tout.get_or_insert(0) += o;
                    }
                }
            }
        }
        let tokens =
            (tin.is_some() || tout.is_some()).then(|| Tokens { input: tin.unwrap_or(0), output: tout.unwrap_or(0) });
        // Keys in the order a serde_json map sorts them, as `show` prints its `run`.
        let s = SummaryOut {
            branch: &p.branch,
            cost_usd: cost,
            counts,
            project: &p.project,
            repo: &p.repo,
            repo_root: &p.repo_root,
            run_id: &p.run_id,
            slug: &p.slug,
            status: self.status_of(&ids),
            tokens,
            wave: self.wave(),
            worktree: &p.worktree,
        };
        serde_json::to_string(&s).unwrap_or_default()
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
                }),
            );
        }
        json!({
            "run": self.summary(),
            "meta": self.pointer,
            "plan": plan,
            "tasks": tasks,
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
        let log = self.log_path(tid, entry);
        let plan_task = self.plan.as_ref().and_then(|p| p.task(tid));
        let totals = self.adapter_of(tid).map(|a| log_totals(&log, a)).unwrap_or_default();
        let now = now_ms();
        let pid = entry.and_then(|e| e.pid);
        let alive = pid.map(liveness::pid_alive);
        let started = entry.and_then(|e| e.started_ts.as_deref()).and_then(crate::time::parse_rfc3339_ms);
        let idle = std::fs::metadata(&log)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| (now - d.as_millis() as i64).max(0) as f64 / 1000.0);
        let r = self.journal.tasks.get(tid);
        Ok(json!({
            "runId": self.pointer.run_id,
            "task": tid,
            "adapter": plan_task.map(|t| t.adapter.clone()),
            "deps": plan_task.map(|t| t.deps.clone()).unwrap_or_default(),
            "state": r.and_then(|r| r.state.clone()).unwrap_or_else(|| "pending".into()),
            "rc": r.and_then(|r| r.rc),
            "sessionId": entry.and_then(|e| e.session_id.clone()).or(totals.session),
            "pid": pid,
            "pgid": entry.and_then(|e| e.pgid),
            "alive": alive,
            "startedTs": entry.and_then(|e| e.started_ts.clone()),
            "runtimeS": started.filter(|_| alive == Some(true)).map(|s| (now - s).max(0) as f64 / 1000.0),
            "idleS": idle,
            "logfile": log.display().to_string(),
            "costUsd": totals.cost_usd,
        }))
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The stderr line for a reaped pointer.
pub fn reaped_message(r: &Reaped) -> String {
    format!("registry: reaped {}: its runstateDir {} is gone", r.run_id, r.runstate_dir)
}
