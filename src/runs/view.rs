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
use std::collections::{BTreeMap, HashMap, HashSet};
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

/// The file names of each runstate directory met while listing (`None`:
/// the directory is gone), so that a listing of many runs reads each
/// directory once instead of probing every run's files.
type Dirs = HashMap<String, Option<HashSet<std::ffi::OsString>>>;

fn dir_names<'a>(dirs: &'a mut Dirs, dir: &str) -> Option<&'a HashSet<std::ffi::OsString>> {
    dirs.entry(dir.to_string())
        .or_insert_with(|| std::fs::read_dir(dir).ok().map(|rd| rd.flatten().map(|e| e.file_name()).collect()))
        .as_ref()
}

/// A listed run's summary, or its pointer reaped when its runstate
/// directory is gone.
fn summarize_listed(reg: &Registry, dirs: &mut Dirs, pointer: Pointer) -> Result<Value, Option<Reaped>> {
    let Some(names) = dir_names(dirs, &pointer.runstate_dir) else {
        return match reg.keep_or_reap(pointer) {
            (Some(p), _) => Ok(load(p).summary()),
            (None, r) => Err(r),
        };
    };
    let has = |p: &Path| p.file_name().is_some_and(|n| names.contains(n));
    let files = RunFiles::new(&pointer.runstate_dir, &pointer.slug);
    let journal =
        if has(&files.journal()) { Journal::read(&files.journal()).unwrap_or_default() } else { Journal::default() };
    let plan = if has(&files.plan()) {
        super::read_small(&files.plan()).ok().and_then(|b| Plan::parse(&b).ok())
    } else {
        None
    };
    let l = Loaded { pointer, files, journal, plan };
    // A log named by liveness elsewhere is not counted here: the default path is the task log.
    Ok(l.summary_with(|p| has(p)))
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
        let ids = self.task_ids();
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
        plan.waves()
            .iter()
            .position(|w| w.iter().any(|t| !self.journal.state(t).is_some_and(is_terminal)))
            .map(|i| i + 1)
    }

    /// `GET /runs` item / `runs list` line.
    pub fn summary(&self) -> Value {
        self.summary_with(|p| p.exists())
    }

    /// The summary, with `has_log` saying which logs exist (a listing of
    /// many runs answers it from one directory read per runstate directory).
    fn summary_with(&self, has_log: impl Fn(&Path) -> bool) -> Value {
        let p = &self.pointer;
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        let (mut cost, mut tin, mut tout) = (None::<f64>, None::<u64>, None::<u64>);
        for t in self.task_ids() {
            *counts.entry(self.journal.state(&t).unwrap_or("pending")).or_default() += 1;
            if let Some(a) = self.adapter_of(&t) {
                let log = self.files.log(&t);
                if has_log(&log) {
                    let s = log_totals(&log, a);
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
        let tokens = if tin.is_some() || tout.is_some() {
            json!({"input": tin.unwrap_or(0), "output": tout.unwrap_or(0)})
        } else {
            Value::Null
        };
        json!({
            "runId": p.run_id, "slug": p.slug, "repoRoot": p.repo_root, "project": p.project, "repo": p.repo,
            "branch": p.branch, "worktree": p.worktree, "status": self.status(), "wave": self.wave(),
            "counts": counts, "costUsd": cost, "tokens": tokens,
        })
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

/// `GET /runs` / `runs list`: every registered run's summary.
pub fn list(reg: &Registry) -> (Vec<Value>, Vec<Reaped>) {
    let ids = reg.ids();
    // Reading is syscall-bound: split the runs over a few threads.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let per = ids.len().div_ceil(workers).max(64);
    let parts: Vec<Vec<Result<Value, Option<Reaped>>>> = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .chunks(per)
            .map(|chunk| {
                s.spawn(move || {
                    let mut dirs = Dirs::new();
                    chunk
                        .iter()
                        .filter_map(|id| reg.read_unchecked(id))
                        .map(|p| summarize_listed(reg, &mut dirs, p))
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let mut out = Vec::with_capacity(ids.len());
    let mut reaped = Vec::new();
    for r in parts.into_iter().flatten() {
        match r {
            Ok(v) => out.push(v),
            Err(Some(r)) => reaped.push(r),
            Err(None) => {}
        }
    }
    (out, reaped)
}

/// The stderr line for a reaped pointer.
pub fn reaped_message(r: &Reaped) -> String {
    format!("registry: reaped {}: its runstateDir {} is gone", r.run_id, r.runstate_dir)
}

/// What identifies a file's content cheaply: length, mtime (ns) and inode.
/// A journal only grows and the other files are replaced by rename, so an
/// unchanged stamp means unchanged content.
type Stamp = Option<(u64, i128, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()), m.ino()))
}

struct Cached {
    pointer: Pointer,
    tasks: Vec<String>,
    /// Journal, plan, then each default task log.
    stamps: Vec<Stamp>,
    summary: String,
}

fn stamps_of(p: &Pointer, tasks: &[String]) -> Vec<Stamp> {
    let f = RunFiles::new(&p.runstate_dir, &p.slug);
    let mut s = vec![stamp(&f.journal()), stamp(&f.plan())];
    s.extend(tasks.iter().map(|t| stamp(&f.log(t))));
    s
}

/// A cache of run summaries for a long-lived reader (the server): a run is
/// summarized again only when its journal, plan or a task log changed
/// (checked by `stat`, a third of the syscalls of reading them), and the
/// pointers only when the registry directory changed. The summaries are the
/// very ones [`Loaded::summary`] gives, kept as JSON text.
#[derive(Default)]
pub struct ListCache {
    registry_stamp: Stamp,
    runs: HashMap<String, Cached>,
}

impl ListCache {
    /// `{"runs":[...]}` as [`list`] would give it, and the pointers reaped.
    pub fn list_json(&mut self, reg: &Registry) -> (String, Vec<Reaped>) {
        let now_stamp = stamp(&reg.dir);
        let ids = reg.ids();
        let fresh_pointers = now_stamp != self.registry_stamp || now_stamp.is_none();
        self.registry_stamp = now_stamp;
        let keep: HashSet<&String> = ids.iter().collect();
        self.runs.retain(|id, _| keep.contains(id));
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        let per = ids.len().div_ceil(workers).max(64);
        let this = &*self;
        type Out = Vec<(String, Result<Option<Cached>, Option<Reaped>>)>;
        let parts: Vec<Out> = std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .chunks(per)
                .map(|chunk| {
                    s.spawn(move || {
                        chunk
                            .iter()
                            .map(|id| {
                                let cached = this.runs.get(id).filter(|_| !fresh_pointers);
                                let pointer = match cached {
                                    Some(c) => c.pointer.clone(),
                                    None => match reg.read_unchecked(id) {
                                        Some(p) => p,
                                        None => return (id.clone(), Err(None)),
                                    },
                                };
                                if let Some(c) = cached {
                                    let stamps = stamps_of(&pointer, &c.tasks);
                                    if c.stamps == stamps && stamps[0].is_some() {
                                        return (id.clone(), Ok(None));
                                    }
                                }
                                let l = match reg.keep_or_reap(pointer) {
                                    (Some(p), _) => load(p),
                                    (None, r) => return (id.clone(), Err(r)),
                                };
                                let tasks = l.task_ids();
                                let summary = l.summary().to_string();
                                let stamps = stamps_of(&l.pointer, &tasks);
                                (id.clone(), Ok(Some(Cached { pointer: l.pointer, tasks, stamps, summary })))
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
        });
        let mut reaped = Vec::new();
        let mut body = String::from("{\"runs\":[");
        let mut first = true;
        for (id, r) in parts.into_iter().flatten() {
            match r {
                Ok(Some(c)) => {
                    self.runs.insert(id.clone(), c);
                }
                Ok(None) => {}
                Err(r) => {
                    self.runs.remove(&id);
                    reaped.extend(r);
                    continue;
                }
            }
            if let Some(c) = self.runs.get(&id) {
                if !first {
                    body.push(',');
                }
                first = false;
                body.push_str(&c.summary);
            }
        }
        body.push_str("]}");
        (body, reaped)
    }
}
