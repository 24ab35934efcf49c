//! Journaling: everything durable the supervisor writes goes through
//! [`Records`] (the journal is the truth, a restart folds it and
//! continues; liveness only says which process runs what now; the owner
//! record outside the worktree says who may answer and which groups are
//! ours), and what a restart rebuilds from it: each task's runwire
//! interrupt ids, which process raised which request and how it was closed
//! ([`Interrupts`], [`restore`]).

use super::socket::{self, Owner};
use crate::control::Door;
use crate::pipeline::events::{Decision, InputAnswer};
use crate::runs::journal::{self, is_terminal, Record, SteerNote, TaskTotals};
use crate::runs::liveness::{self, Entry};
use crate::runs::RunFiles;
use crate::session::record::InputRecord;
use crate::util::lines::{read_capped, Capped, Rest};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// The journal's actor for the supervisor's own records.
pub use super::waves::ACTOR;

/// The journal size a `steer-queued` record (which carries the steer's
/// text, up to [`crate::control::MAX_TEXT`]) may not take the journal past:
/// half of what a view of the run reads ([`crate::runs::safe::MAX_JOURNAL`]),
/// so that steers never make the run's journal unreadable, and leave room
/// for the rest of its records. A steer past it is refused at every door
/// (they all come through [`Records::steer_queued`]). A run without a
/// supervisor keeps the same budget for its steer inbox, which
/// `runwire-serve` refuses to take past it (`serve::supervisor`).
pub const STEER_BUDGET: u64 = crate::runs::safe::MAX_JOURNAL / 2;

/// Where a run's records go.
pub struct Records {
    pub files: RunFiles,
    pub run_id: String,
    /// `$HARNESS_HOME`, absolute.
    pub home: PathBuf,
    /// This supervisor's registration and the groups it started, as recorded.
    pub owner: Owner,
    /// The run's report for a person, a line at a time.
    pub report: fn(&str),
    /// A task whose turn just ended, with its cost and tokens so far: its
    /// next record carries them (`journal::TaskTotals`).
    pub turn_totals: Option<(String, TaskTotals)>,
    /// The first journal write that failed (a full disk), and how many
    /// did: the run goes on (its tasks' work is not lost), and the
    /// supervisor's exit says the journal is short ([`Records::lost`]).
    pub lost: std::sync::Mutex<Option<(String, usize)>>,
}

impl Records {
    fn journal(&self, rec: &impl serde::Serialize) {
        let run = crate::runs::marks::Run::new(&self.home, &self.run_id);
        if let Err(e) = journal::append(&run, &self.files.journal(), rec) {
            crate::util::cli::report(ACTOR, format!("{}: {e}", self.files.journal().display()));
            let mut l = self.lost.lock().unwrap_or_else(|p| p.into_inner());
            match l.as_mut() {
                Some((_, n)) => *n += 1,
                None => *l = Some((e.to_string(), 1)),
            }
        }
    }

    /// Why the journal lacks records this supervisor wrote (the first
    /// failure and their number), if it does.
    pub fn lost(&self) -> Option<(String, usize)> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn run_rec(&self, actor: &str, what: &str, detail: Option<String>) {
        let mut r = Record::run(actor, what);
        r.detail = detail;
        self.journal(&r);
    }

    /// A run record of what a person's command did, with its door.
    pub fn command_rec(&self, actor: &str, door: Door, what: &str, detail: Option<String>) {
        let mut r = Record::run(actor, what);
        r.detail = detail;
        r.door = Some(door.as_str().into());
        self.journal(&r);
    }

    /// A request raised or closed (an input record).
    pub fn input(&self, rec: &InputRecord) {
        self.journal(rec);
    }

    pub fn live(&self, task: &str, e: Entry) {
        let _ = liveness::update(&self.files, |l| l.tasks.entry(task.to_string()).or_default().merge(e));
    }

    /// A steer queued for `task`'s next turn boundary, its text with it
    /// (`steer-queued`, `what` its detail), so that it outlives this
    /// supervisor. Written before the steer is queued and its caller told
    /// `ok`: `Err` (the journal cannot take it: a write error, or the
    /// record would take the journal past [`STEER_BUDGET`]) and the steer
    /// is refused.
    /// `door`: the way a person's steer came in (none: queued again by a
    /// restarted supervisor).
    pub fn steer_queued(
        &self,
        actor: &str,
        door: Option<Door>,
        task: &str,
        msg: &str,
        what: String,
    ) -> std::io::Result<()> {
        let mut r = Record::run(actor, "steer-queued");
        r.detail = Some(what);
        r.door = door.map(|d| d.as_str().into());
        r.steer = Some(SteerNote { task: task.into(), msg: Some(msg.into()) });
        let line = serde_json::to_vec(&r).map_err(std::io::Error::other)?;
        let have = std::fs::metadata(self.files.journal()).map_or(0, |m| m.len());
        if have + line.len() as u64 + 1 > STEER_BUDGET {
            return Err(std::io::Error::other(format!(
                "it holds {have} bytes and this steer's record is {} more: a steer's text is kept in the journal, \
                 which steers may fill only to {STEER_BUDGET} bytes (half of the {} a view of the run reads)",
                line.len() + 1,
                crate::runs::safe::MAX_JOURNAL
            )));
        }
        let run = crate::runs::marks::Run::new(&self.home, &self.run_id);
        journal::append(&run, &self.files.journal(), &r)
    }

    /// A steer queued for `task` that will not be delivered, and why
    /// (`steer-dropped`): the oldest still queued for it.
    pub fn steer_dropped(&self, task: &str, msg: &str, why: &str) {
        let mut r = Record::run(ACTOR, "steer-dropped");
        r.detail = Some(format!("task {task}: {} bytes not delivered: {why}", msg.len()));
        r.steer = Some(SteerNote { task: task.into(), msg: None });
        crate::util::cli::report(ACTOR, r.detail.clone().unwrap_or_default());
        self.journal(&r);
    }

    /// A task's new state: the report's line when it ends, the journal's
    /// record (with the totals of a turn that just ended), liveness.
    /// `steer`: this `leased` takes the oldest steer queued for the task.
    pub fn state(
        &mut self,
        actor: &str,
        task: &str,
        state: &str,
        rc: Option<i64>,
        detail: Option<String>,
        steer: bool,
    ) {
        if is_terminal(state) {
            // One line per task as it ends: the run's report.
            match detail.as_deref().filter(|d| !d.is_empty()) {
                Some(d) => (self.report)(&format!("{task} {state}: {d}")),
                None => (self.report)(&format!("{task} {state}")),
            }
        }
        let totals = self.turn_totals.take_if(|(t, _)| t == task).map(|(_, t)| t);
        let mut r = Record::task(actor, task, state, rc).with_totals(task, totals);
        r.detail = detail;
        r.steer = steer.then(|| SteerNote { task: task.into(), msg: None });
        self.journal(&r);
        if is_terminal(state) {
            // Liveness says who runs now; a finished task runs nothing.
            let _ = liveness::update(&self.files, |l| {
                l.tasks.remove(task);
            });
        } else {
            self.live(task, Entry { state: Some(state.into()), ..Entry::default() });
        }
    }

    /// Records (or forgets) the group a task's process runs in.
    pub fn record_group(&mut self, task: &str, leader: Option<crate::util::procid::Ident>) {
        match leader {
            Some(l) => self.owner.groups.insert(task.to_string(), l),
            None => self.owner.groups.remove(task),
        };
        self.save_owner();
    }

    pub fn save_owner(&self) {
        if let Err(e) = self.owner.write(&self.home, &self.run_id) {
            crate::util::cli::report(ACTOR, format!("{}: {e}", socket::owner_path(&self.home, &self.run_id).display()));
        }
    }
}

/// One request of one agent process of a task, named by runwire's id.
pub struct Bound {
    pub interrupt: String,
    /// The agent process (the task's count of turns started; 0 for a
    /// process of an earlier supervisor, rebuilt from the journal).
    pub generation: u64,
    /// The agent's own id for it.
    pub request: String,
    pub answer: Option<InputAnswer>,
    /// Rebuilt from the journal, whose answered record keeps the decision
    /// but not every part of the answer (scope, an edited input).
    pub restored: bool,
}

/// Requests remembered per task.
const MAX_BOUND: usize = 1024;

/// The requests a task's agent processes raised, by runwire's interrupt id
/// (bounded, oldest dropped first): which process asked which request, and
/// how it was closed, so that an answer naming a request of an earlier
/// process is never sent to the current one.
#[derive(Default)]
pub struct Interrupts {
    /// Agent processes (turns) started so far: the current one's generation.
    pub generation: u64,
    bound: VecDeque<Bound>,
}

impl Interrupts {
    /// Request `request` of the current process, named `interrupt`.
    pub fn raised(&mut self, interrupt: &str, request: &str) {
        let generation = self.generation;
        self.push(Bound {
            interrupt: interrupt.into(),
            generation,
            request: request.into(),
            answer: None,
            restored: false,
        });
    }

    fn push(&mut self, b: Bound) {
        if self.bound.len() == MAX_BOUND {
            self.bound.pop_front();
        }
        self.bound.push_back(b);
    }

    /// The request named `interrupt` (the latest, should one repeat).
    pub fn find(&mut self, interrupt: &str) -> Option<&mut Bound> {
        self.bound.iter_mut().rev().find(|b| b.interrupt == interrupt)
    }

    /// The open request an answer closes: named by runwire's id (a log of
    /// an older session has none: the last one of this process with that
    /// agent id).
    pub fn closed_by(&mut self, a: &InputAnswer) -> Option<&mut Bound> {
        let generation = self.generation;
        let b = match &a.interrupt_id {
            Some(i) => self.bound.iter_mut().rev().find(|b| &b.interrupt == i),
            None => self.bound.iter_mut().rev().find(|b| b.generation == generation && b.request == a.id),
        };
        b.filter(|b| b.answer.is_none())
    }
}

/// Largest journal line read when rebuilding (records are small; a longer
/// line is no record of ours and is skipped).
const MAX_RECORD: usize = 1 << 20;

/// Each record of `journal` that reads as one, in order (a record over
/// [`MAX_RECORD`] or a line that is not one is passed over).
fn for_each_record(journal: &Path, mut each: impl FnMut(Record)) {
    let Ok(f) = std::fs::File::open(journal) else { return };
    let mut r = std::io::BufReader::new(f);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match read_capped(&mut r, &mut buf, MAX_RECORD, Rest::Skip) {
            Ok(Capped::End) | Err(_) => break,
            Ok(Capped::TooLong) => continue,
            Ok(Capped::Line | Capped::Last) => {}
        }
        if let Ok(rec) = serde_json::from_slice::<Record>(&buf) {
            each(rec);
        }
    }
}

/// Each task's interrupts as the journal's input records name them
/// (`interrupt` of `requested` and `answered`), all of processes that are
/// gone: an answer naming one after a restart is bound as before it (a
/// replay of its answer is acknowledged with nothing sent, anything else
/// refused), never taken for a request of the processes this supervisor
/// starts.
pub fn restore(journal: &Path) -> BTreeMap<String, Interrupts> {
    let mut out: BTreeMap<String, Interrupts> = BTreeMap::new();
    for_each_record(journal, |rec| {
        let (Some(task), Some(input), Some(iid), Some(request)) = (rec.task, rec.input, rec.interrupt, rec.request)
        else {
            return;
        };
        let t = out.entry(task).or_default();
        match input.as_str() {
            "requested" => t.push(Bound { interrupt: iid, generation: 0, request, answer: None, restored: true }),
            "answered" => {
                let Some(b) = t.find(&iid).filter(|b| b.answer.is_none()) else { return };
                let Some(decision) = rec.decision.and_then(|d| serde_json::from_value::<Decision>(d.into()).ok())
                else {
                    return;
                };
                let detail = rec.detail;
                b.answer = Some(InputAnswer {
                    id: request,
                    interrupt_id: Some(iid),
                    decision,
                    scope: None,
                    updated_input: None,
                    answers: detail
                        .as_deref()
                        .filter(|_| decision == Decision::Answer)
                        .and_then(|d| serde_json::from_str(d).ok()),
                    message: detail.filter(|_| decision == Decision::Deny),
                    mode: None,
                    by: rec.by,
                    at: rec.ts,
                    door: rec.door,
                });
            }
            _ => {}
        }
    });
    out
}

/// The steers the journal holds for each task's next turn boundary, as
/// a restarted supervisor finds them ([`journal::SteerNote`]).
#[derive(Debug, Default, PartialEq)]
pub struct Steers {
    /// Queued and neither taken by a turn nor dropped, oldest first.
    pub queued: VecDeque<String>,
    /// The steer the task's last state record (a `leased`) took: its turn
    /// may not have started before the last supervisor stopped.
    pub taken: Option<String>,
}

/// Each task's [`Steers`], folded from the journal in its order: a
/// `steer-queued` record with its text queues it, the `leased` record of
/// the turn that takes it and a `steer-dropped` record take out the oldest,
/// and the task's terminal record drops them all.
pub fn steers(journal: &Path) -> BTreeMap<String, Steers> {
    let mut out: BTreeMap<String, Steers> = BTreeMap::new();
    for_each_record(journal, |rec| {
        if let (Some(task), Some(state)) = (&rec.task, &rec.state) {
            let t = out.entry(task.clone()).or_default();
            t.taken = None;
            if is_terminal(state) {
                t.queued.clear();
            } else if rec.steer.as_ref().is_some_and(|s| &s.task == task) {
                t.taken = t.queued.pop_front();
            }
            return;
        }
        let Some(note) = rec.steer.filter(|_| rec.task.is_none()) else { return };
        let t = out.entry(note.task).or_default();
        match (rec.run.as_deref(), note.msg) {
            (Some("steer-queued"), Some(msg)) => t.queued.push_back(msg),
            (Some("steer-dropped"), _) => {
                t.queued.pop_front();
            }
            _ => {}
        }
    });
    out.retain(|_, s| !s.queued.is_empty() || s.taken.is_some());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journals_input_records_rebuild_each_tasks_interrupts() {
        let dir = std::env::temp_dir().join(format!("rw-sup-restore-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let j = dir.join("p.journal.jsonl");
        let lines = [
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runner","task":"a","input":"requested","request":"0","kind":"tool_approval","interrupt":"rw-1"}"#,
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:01.000Z","actor":"runner","task":"a","input":"answered","request":"0","decision":"deny","by":"ana","detail":"no","interrupt":"rw-1","door":"task-route"}"#,
            "not a record",
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:02.000Z","actor":"runner","task":"a","input":"requested","request":"1","kind":"tool_approval","interrupt":"rw-2"}"#,
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:02.000Z","actor":"runner","task":"b","input":"requested","request":"0","kind":"question"}"#,
        ];
        std::fs::write(&j, lines.join("\n")).unwrap();
        let mut m = restore(&j);
        let a = m.get_mut("a").unwrap();
        let b1 = a.find("rw-1").unwrap();
        assert!(b1.restored && b1.generation == 0 && b1.request == "0");
        let ans = b1.answer.as_ref().unwrap();
        assert_eq!(
            (ans.decision, ans.message.as_deref(), ans.by.as_deref()),
            (Decision::Deny, Some("no"), Some("ana"))
        );
        assert!(a.find("rw-2").unwrap().answer.is_none());
        // A record without runwire's id binds nothing.
        assert!(!m.contains_key("b"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_journals_steer_records_rebuild_each_tasks_queue() {
        let dir = std::env::temp_dir().join(format!("rw-sup-steers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let j = dir.join("p.jsonl");
        let q = |t: &str, m: &str| {
            format!(
                r#"{{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"ana","run":"steer-queued","detail":"task {t}: 1 bytes","steer":{{"task":"{t}","msg":"{m}"}}}}"#
            )
        };
        let st = |t: &str, s: &str, steer: bool| {
            let note = if steer { format!(r#","steer":{{"task":"{t}"}}"#) } else { String::new() };
            format!(
                r#"{{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runwire-supervise","task":"{t}","state":"{s}"{note}}}"#
            )
        };
        let lines = [
            st("a", "leased", false),
            st("a", "implemented", false),
            q("a", "one"),
            q("a", "two"),
            // A live steer: no text kept, nothing to apply again.
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"ana","run":"steer-queued","detail":"task a: 3 bytes, live"}"#.into(),
            st("a", "gated", false),
            st("a", "leased", true),
            q("b", "lost"),
            st("b", "halted", false),
            q("c", "x"),
            r#"{"v":"runstate/v1","ts":"2026-01-01T00:00:00.000Z","actor":"runwire-supervise","run":"steer-dropped","steer":{"task":"c"}}"#.into(),
            q("d", "next"),
            st("d", "leased", true),
            "not a record".into(),
        ];
        std::fs::write(&j, lines.join("\n")).unwrap();
        let m = steers(&j);
        // a: "one" was taken by its leased, "two" waits; b ended, c's was dropped.
        assert_eq!(m["a"], Steers { queued: VecDeque::from(["two".to_string()]), taken: Some("one".into()) });
        assert_eq!(m["d"], Steers { queued: VecDeque::new(), taken: Some("next".into()) });
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "d"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
