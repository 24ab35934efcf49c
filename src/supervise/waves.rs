//! The plan's waves as a pure state machine (`spec/SUPERVISOR.md`, "Task
//! states"): which task runs which step next, and what each end of a step
//! means. No IO: every method changes the state and returns the
//! [`Effect`]s the supervisor's loop carries out (journal a state, start a
//! process), so the edges are unit-tested here without a process.

use crate::runs::journal::is_terminal;
use crate::runs::plan::{Plan, Task};
use std::collections::{BTreeMap, VecDeque};

/// The journal's actor for the supervisor's own records.
pub const ACTOR: &str = "runwire-supervise";

/// Which process a running task has now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Turn,
    Gate,
    Review,
}

/// What a task does next once nothing of it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A turn: a new session, or `--resume` with a steer message.
    Turn {
        resume: Option<String>,
    },
    Gate,
    Review,
    Commit,
}

impl Step {
    /// The phase of the process that runs the step (`None`: a commit runs nothing).
    pub fn phase(&self) -> Option<Phase> {
        match self {
            Step::Turn { .. } => Some(Phase::Turn),
            Step::Gate => Some(Phase::Gate),
            Step::Review => Some(Phase::Review),
            Step::Commit => None,
        }
    }
}

/// What the loop must do for the machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Journal (report, liveness) a task's new state, already taken here.
    /// `steer`: this `leased` takes the oldest steer queued for the task
    /// (its record says so: a restart must not apply it again).
    State { actor: String, task: String, state: String, rc: Option<i64>, detail: Option<String>, steer: bool },
    /// Start the process of a step (the task counts as running from now;
    /// [`Waves::not_started`] when it cannot be started).
    Start { task: String, step: Step },
}

/// One task as the machine sees it.
#[derive(Debug, Clone, Default)]
pub struct Slot {
    /// The journal's state, or `None` before the first record.
    pub state: Option<String>,
    /// The detail of its last state (for the run's last line).
    pub detail: Option<String>,
    /// The agent's session, for a steer at the turn boundary.
    pub session: Option<String>,
    /// Steer messages queued for the turn boundary.
    pub steer: VecDeque<String>,
    pub next: Option<Step>,
    /// The phase of its process running now.
    pub running: Option<Phase>,
}

/// How a step's process ended, as the loop saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// Killed (by a person, or by the supervisor with a reason), ended with `rc`.
    Killed { actor: String, detail: String, rc: i64 },
    /// Stopped to apply an interrupting steer; judged as [`End::Exited`]
    /// when no steer is left to apply.
    ForSteer { rc: i64, why: String },
    /// Exited by itself with `rc`; `why` is the halt's detail when `rc` ≠ 0.
    Exited { rc: i64, why: String },
    /// Its output could not be written: it cannot count as done.
    Lost { rc: i64, why: String },
}

/// Why a task in flight at a restart goes where it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumed {
    pub task: String,
    pub was: String,
    /// `true`: it continues with its next step; `false`: it starts again.
    pub continues: bool,
}

/// The run's tasks, wave by wave.
pub struct Waves {
    plan: Plan,
    order: Vec<String>,
    slots: BTreeMap<String, Slot>,
    /// `pause`: nothing new is started until `resume`.
    pub held: bool,
    max_parallel: usize,
}

impl Waves {
    /// Every task of `plan` unstarted, in wave order.
    pub fn new(plan: Plan, max_parallel: usize) -> Waves {
        let order: Vec<String> = plan.waves().into_iter().flatten().collect();
        let slots = order.iter().map(|id| (id.clone(), Slot::default())).collect();
        Waves { plan, order, slots, held: false, max_parallel: max_parallel.max(1) }
    }

    /// The task ids in wave order.
    pub fn order(&self) -> &[String] {
        &self.order
    }

    pub fn slot(&self, id: &str) -> Option<&Slot> {
        self.slots.get(id)
    }

    pub fn slot_mut(&mut self, id: &str) -> Option<&mut Slot> {
        self.slots.get_mut(id)
    }

    pub fn state(&self, id: &str) -> Option<&str> {
        self.slots.get(id).and_then(|s| s.state.as_deref())
    }

    /// The plan's task (a default claude task for an id the plan lacks).
    pub fn def(&self, id: &str) -> Task {
        self.plan.task(id).cloned().unwrap_or_else(|| Task {
            id: id.into(),
            adapter: "claude".into(),
            prompt: String::new(),
            deps: vec![],
            gate: None,
            review: None,
            cmd: None,
        })
    }

    /// Takes the journal's word for each task (`state`, `detail` of its last
    /// record; `session` the stale liveness's): a task in flight when the
    /// last supervisor stopped redoes its turn, or continues with the step
    /// after a finished turn (spec/SUPERVISOR.md, "Start and restart").
    pub fn restore(
        &mut self,
        last: impl Fn(&str) -> (Option<String>, Option<String>),
        session: impl Fn(&str) -> Option<String>,
    ) -> Vec<Resumed> {
        let mut out = Vec::new();
        for id in self.order.clone() {
            let (state, detail) = last(&id);
            let def = self.def(&id);
            let slot = self.slots.get_mut(&id).expect("task of the plan");
            slot.state = state;
            slot.detail = detail;
            let Some(s) = slot.state.clone().filter(|s| !is_terminal(s)) else { continue };
            let next = match s.as_str() {
                "implemented" if def.gate.is_some() => Some(Step::Gate),
                "implemented" | "gated" if def.review.is_some() => Some(Step::Review),
                "implemented" | "gated" | "reviewed" => Some(Step::Commit),
                _ => None,
            };
            let continues = next.is_some();
            match next {
                Some(step) => {
                    slot.next = Some(step);
                    slot.session = session(&id);
                }
                None => slot.state = None,
            }
            out.push(Resumed { task: id, was: s, continues });
        }
        out
    }

    /// Takes a task's new state; the effect journals it. A task that ends
    /// keeps the steers queued for it until [`Waves::drop_steers`] takes
    /// them (the journal says they were not delivered).
    pub fn set(&mut self, actor: &str, task: &str, state: &str, rc: Option<i64>, detail: Option<String>) -> Effect {
        if let Some(t) = self.slots.get_mut(task) {
            t.state = Some(state.to_string());
            t.detail = detail.clone();
            if is_terminal(state) {
                t.next = None;
            }
        }
        Effect::State { actor: actor.into(), task: task.into(), state: state.into(), rc, detail, steer: false }
    }

    /// The oldest steer queued for `id` starts its next turn: `leased`,
    /// its record saying it takes that steer.
    fn take_steer(&mut self, id: &str, why: &str) -> Option<Effect> {
        let slot = self.slots.get_mut(id)?;
        let msg = slot.steer.pop_front()?;
        slot.next = Some(Step::Turn { resume: Some(msg) });
        let mut e = self.set(ACTOR, id, "leased", None, Some(why.into()));
        if let Effect::State { steer, .. } = &mut e {
            *steer = true;
        }
        Some(e)
    }

    /// The steers queued for `id`, taken out: none will be delivered (the
    /// task ended, or a restart cannot resume its session).
    pub fn drop_steers(&mut self, id: &str) -> Vec<String> {
        self.slots.get_mut(id).map(|s| s.steer.drain(..).collect()).unwrap_or_default()
    }

    /// The steers a restarted supervisor found queued for `id` in the
    /// journal, queued again in their order. A task about to commit (its
    /// last step had ended) takes the first at once, as it would have then;
    /// one redoing its turn or continuing with its gate or review takes
    /// them at the boundary after it. `session`: the session a steer
    /// resumes; without one (and no turn of its own to come, which would
    /// name one), they cannot be delivered: `Err` with them.
    pub fn restore_steers(&mut self, id: &str, queued: VecDeque<String>) -> Result<Option<Effect>, Vec<String>> {
        let Some(slot) = self.slots.get_mut(id) else { return Err(queued.into()) };
        if queued.is_empty() || slot.state.as_deref().is_some_and(is_terminal) {
            return Err(queued.into());
        }
        let turn_to_come = slot.state.is_none() || matches!(slot.next, Some(Step::Turn { .. }));
        if slot.session.is_none() && !turn_to_come {
            return Err(queued.into());
        }
        slot.steer = queued;
        if slot.next == Some(Step::Commit) {
            return Ok(self.take_steer(id, "steered: resuming the session"));
        }
        Ok(None)
    }

    /// A task whose `leased` took a steer whose turn never started (the
    /// run was paused, or the last supervisor died first), the steer queued
    /// again first: it takes it now, resuming `session`, instead of
    /// starting afresh.
    pub fn redo_steered(&mut self, id: &str, session: String) -> Option<Effect> {
        let slot = self.slots.get_mut(id)?;
        slot.state = Some("leased".into());
        slot.session = Some(session);
        slot.next = None;
        self.take_steer(id, "steered: resuming the session (its turn had not started when the last supervisor stopped)")
    }

    /// A step's process could not be started: nothing runs.
    pub fn not_started(&mut self, task: &str) {
        if let Some(t) = self.slots.get_mut(task) {
            t.running = None;
        }
    }

    fn start(&mut self, task: &str, step: Step) -> Effect {
        if let Some(t) = self.slots.get_mut(task) {
            t.next = None;
            t.running = step.phase();
        }
        Effect::Start { task: task.into(), step }
    }

    /// Dispatches what can be: next steps of started tasks, then new tasks
    /// whose dependencies are committed, up to `max_parallel`.
    pub fn advance(&mut self) -> Vec<Effect> {
        let mut out = Vec::new();
        for id in self.order.clone() {
            let slot = &self.slots[&id];
            if slot.running.is_some() {
                continue;
            }
            let Some(step) = slot.next.clone() else { continue };
            if step == Step::Commit {
                out.push(self.set(ACTOR, &id, "committed", Some(0), None));
                continue;
            }
            if !self.held {
                out.push(self.start(&id, step));
            }
        }
        for id in self.order.clone() {
            if self.slots[&id].state.is_some() {
                continue;
            }
            let def = self.def(&id);
            let blocked = def.deps.iter().find_map(|d| {
                let s = self.state(d).filter(|s| *s == "halted" || *s == "failed");
                s.map(|s| (d.clone(), s.to_string()))
            });
            if let Some((d, s)) = blocked {
                // Fail-closed: a dependent of a halted task never starts.
                out.push(self.set(ACTOR, &id, "halted", None, Some(format!("not started: dependency {d} is {s}"))));
                continue;
            }
            let ready = def.deps.iter().all(|d| self.state(d) == Some("committed"));
            let busy = self.slots.values().filter(|t| t.state.as_deref().is_some_and(|s| !is_terminal(s))).count();
            if !ready || self.held || busy >= self.max_parallel {
                continue;
            }
            out.push(self.set(ACTOR, &id, "leased", None, None));
            out.push(self.start(&id, Step::Turn { resume: None }));
        }
        out
    }

    /// A task's process of `phase` ended: the state machine's edges.
    pub fn ended(&mut self, id: &str, phase: Phase, end: End) -> Vec<Effect> {
        let def = self.def(id);
        if let Some(t) = self.slots.get_mut(id) {
            t.running = None;
        }
        let (actor, after) = match phase {
            Phase::Turn => ("runner", "implemented"),
            Phase::Gate => ("gate", "gated"),
            Phase::Review => ("reviewer", "reviewed"),
        };
        let (rc, why, for_steer) = match end {
            End::Lost { rc, why } => return vec![self.set(ACTOR, id, "halted", Some(rc), Some(why))],
            End::Killed { actor, detail, rc } => return vec![self.set(&actor, id, "halted", Some(rc), Some(detail))],
            End::ForSteer { rc, why } => (rc, why, true),
            End::Exited { rc, why } => (rc, why, false),
        };
        if for_steer {
            if let Some(e) = self.take_steer(id, "steered: resuming after an interrupt") {
                return vec![e];
            }
        }
        if rc != 0 {
            return vec![self.set(actor, id, "halted", Some(rc), Some(why))];
        }
        let mut out = vec![self.set(actor, id, after, None, None)];
        // A queued steer is applied at this boundary: the task goes back to
        // leased and its gate and review run again after the new turn.
        if let Some(e) = self.take_steer(id, "steered: resuming the session") {
            out.push(e);
            return out;
        }
        let slot = self.slots.get_mut(id).expect("task of the plan");
        slot.next = Some(match phase {
            Phase::Turn if def.gate.is_some() => Step::Gate,
            Phase::Turn | Phase::Gate if def.review.is_some() => Step::Review,
            _ => Step::Commit,
        });
        out
    }

    /// A steer for the turn boundary (`--resume`): queued; a task between
    /// steps with nothing pending takes it at once (its `leased`).
    pub fn queue_steer(&mut self, id: &str, msg: String) -> Option<Effect> {
        let slot = self.slots.get_mut(id)?;
        slot.steer.push_back(msg);
        if slot.running.is_some() || slot.next.is_some() || slot.state.is_none() {
            return None;
        }
        self.take_steer(id, "steered: resuming the session")
    }

    /// `kill` of a task with no process running: halted at once (an
    /// already terminal task: `Err` with its state).
    pub fn kill_idle(&mut self, id: &str, actor: &str) -> Result<Effect, String> {
        let state = self.state(id).map(str::to_string);
        if let Some(s) = state.as_deref().filter(|s| is_terminal(s)) {
            return Err(s.to_string());
        }
        let detail = match state {
            None => format!("killed by {actor} before it started"),
            Some(_) => format!("killed by {actor} between steps"),
        };
        Ok(self.set(actor, id, "halted", None, Some(detail)))
    }

    /// Every task terminal: the run is over.
    pub fn all_terminal(&self) -> bool {
        self.slots.values().all(|t| t.state.as_deref().is_some_and(is_terminal))
    }

    pub fn all_committed(&self) -> bool {
        self.slots.values().all(|t| t.state.as_deref() == Some("committed"))
    }

    /// The run's last line: how it ended and, when it failed, why (the
    /// same one-line reason `runs list` gives).
    pub fn last_line(&self, slug: &str) -> String {
        let n = self.order.len();
        let committed = self.slots.values().filter(|t| t.state.as_deref() == Some("committed")).count();
        let tasks = self.order.iter().map(|id| {
            let t = &self.slots[id];
            (id.as_str(), t.state.as_deref(), t.detail.as_deref())
        });
        match crate::runs::journal::failure_reason(tasks) {
            Some(why) => format!("{slug} failed ({committed} of {n} tasks committed): {why}"),
            None => format!("{slug} done: {committed} of {n} tasks committed"),
        }
    }

    /// Each task's state, for `status`.
    pub fn states(&self) -> BTreeMap<&String, Option<String>> {
        self.slots.iter().map(|(k, s)| (k, s.state.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waves(plan: &str, max: usize) -> Waves {
        Waves::new(Plan::parse(plan.as_bytes()).unwrap(), max)
    }

    fn starts(e: &[Effect]) -> Vec<(String, Step)> {
        e.iter()
            .filter_map(|e| match e {
                Effect::Start { task, step } => Some((task.clone(), step.clone())),
                _ => None,
            })
            .collect()
    }

    fn states(e: &[Effect]) -> Vec<(String, String)> {
        e.iter()
            .filter_map(|e| match e {
                Effect::State { task, state, .. } => Some((task.clone(), state.clone())),
                _ => None,
            })
            .collect()
    }

    const CHAIN: &str = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gate":"true","review":"codex"},
        {"id":"b","adapter":"claude","prompt":"y"},{"id":"c","adapter":"claude","prompt":"z","deps":["a"]}]}"#;
    const TURN: Step = Step::Turn { resume: None };

    fn ok() -> End {
        End::Exited { rc: 0, why: String::new() }
    }

    #[test]
    fn waves_start_what_is_ready_up_to_the_parallel_limit_and_walk_gate_review_commit() {
        let mut w = waves(CHAIN, 1);
        let e = w.advance();
        assert_eq!(starts(&e), [("a".to_string(), TURN)]);
        assert_eq!(states(&e), [("a".to_string(), "leased".to_string())]);
        // Nothing more while a runs: one slot.
        assert!(w.advance().is_empty());
        assert_eq!(states(&w.ended("a", Phase::Turn, ok())), [("a".into(), "implemented".into())]);
        assert_eq!(starts(&w.advance()), [("a".to_string(), Step::Gate)]);
        w.ended("a", Phase::Gate, ok());
        assert_eq!(starts(&w.advance()), [("a".to_string(), Step::Review)]);
        w.ended("a", Phase::Review, ok());
        // Committed at the next look, which also frees the slot for b.
        let e = w.advance();
        assert_eq!(states(&e), [("a".into(), "committed".into()), ("b".into(), "leased".into())]);
        assert_eq!(starts(&e), [("b".to_string(), TURN)]);
        w.ended("b", Phase::Turn, ok());
        let e = w.advance();
        assert_eq!(states(&e), [("b".into(), "committed".into()), ("c".into(), "leased".into())]);
        w.ended("c", Phase::Turn, ok());
        w.advance();
        assert!(w.all_terminal() && w.all_committed());
        assert_eq!(w.last_line("p"), "p done: 3 of 3 tasks committed");
    }

    #[test]
    fn a_failed_step_halts_the_task_and_its_dependents_never_start() {
        let mut w = waves(CHAIN, 4);
        assert_eq!(starts(&w.advance()).len(), 2);
        let e = w.ended("a", Phase::Turn, End::Exited { rc: 3, why: "wrapper exited 3".into() });
        assert_eq!(
            e,
            [Effect::State {
                actor: "runner".into(),
                task: "a".into(),
                state: "halted".into(),
                rc: Some(3),
                detail: Some("wrapper exited 3".into()),
                steer: false,
            }]
        );
        let e = w.advance();
        assert_eq!(states(&e), [("c".into(), "halted".into())]);
        assert_eq!(w.slot("c").unwrap().detail.as_deref(), Some("not started: dependency a is halted"));
        w.ended("b", Phase::Turn, ok());
        w.advance();
        assert!(w.all_terminal() && !w.all_committed());
        assert!(w.last_line("p").starts_with("p failed (1 of 3 tasks committed): "), "{}", w.last_line("p"));
    }

    #[test]
    fn a_hold_starts_nothing_new_but_commits_and_a_steer_resumes_at_the_boundary() {
        let mut w = waves(CHAIN, 4);
        w.advance();
        w.held = true;
        w.ended("b", Phase::Turn, ok());
        // Commit is not a new process: it happens under the hold.
        assert_eq!(states(&w.advance()), [("b".into(), "committed".into())]);
        w.ended("a", Phase::Turn, ok());
        assert!(w.advance().is_empty(), "the gate waits for resume");
        // Between steps with a step pending: queued, taken at the boundary after it.
        assert_eq!(w.queue_steer("a", "more".into()), None);
        w.held = false;
        assert_eq!(starts(&w.advance()), [("a".to_string(), Step::Gate)]);
        let e = w.ended("a", Phase::Gate, ok());
        assert_eq!(states(&e), [("a".into(), "gated".into()), ("a".into(), "leased".into())]);
        assert_eq!(starts(&w.advance()), [("a".to_string(), Step::Turn { resume: Some("more".into()) })]);
        // An interrupting steer: the stopped turn resumes with the message.
        w.queue_steer("a", "now".into());
        let e = w.ended("a", Phase::Turn, End::ForSteer { rc: 143, why: String::new() });
        assert_eq!(states(&e), [("a".into(), "leased".into())]);
        assert_eq!(starts(&w.advance()), [("a".to_string(), Step::Turn { resume: Some("now".into()) })]);
    }

    #[test]
    fn kills_and_restarts_follow_the_journal() {
        let mut w = waves(CHAIN, 4);
        assert!(matches!(w.kill_idle("c", "ana"), Ok(Effect::State { ref state, .. }) if state == "halted"));
        assert_eq!(w.kill_idle("c", "ana"), Err("halted".into()));
        let e = w.ended("a", Phase::Turn, End::Killed { actor: "ana".into(), detail: "killed by ana".into(), rc: 143 });
        assert!(matches!(&e[..], [Effect::State { actor, state, .. }] if actor == "ana" && state == "halted"));
        // A restart: a's turn was in flight (redone), b had finished its turn.
        let mut w = waves(CHAIN, 4);
        let r = w.restore(
            |id| match id {
                "a" => (Some("leased".into()), None),
                "b" => (Some("implemented".into()), None),
                _ => (None, None),
            },
            |_| Some("s1".into()),
        );
        assert_eq!(r.iter().map(|r| (r.task.as_str(), r.continues)).collect::<Vec<_>>(), [("a", false), ("b", true)]);
        assert_eq!(w.slot("b").unwrap().session.as_deref(), Some("s1"));
        let e = w.advance();
        assert_eq!(states(&e), [("b".into(), "committed".into()), ("a".into(), "leased".into())]);
        assert_eq!(starts(&e), [("a".to_string(), TURN)]);
    }

    #[test]
    fn steers_a_restart_finds_are_taken_at_the_boundary_or_dropped() {
        let q = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<VecDeque<_>>();
        let mut w = waves(CHAIN, 4);
        w.restore(
            |id| match id {
                "a" => (Some("implemented".into()), None),
                "b" => (Some("implemented".into()), None),
                "c" => (Some("leased".into()), None),
                _ => (None, None),
            },
            |id| (id == "a").then(|| "s1".to_string()),
        );
        // a goes on with its gate and takes the steers after it, in order.
        assert_eq!(w.restore_steers("a", q(&["one", "two"])), Ok(None));
        assert_eq!(starts(&w.advance()), [("a".to_string(), Step::Gate)]);
        let e = w.ended("a", Phase::Gate, ok());
        assert!(matches!(&e[1], Effect::State { state, steer: true, .. } if state == "leased"), "{e:?}");
        assert_eq!(starts(&w.advance()), [("a".to_string(), Step::Turn { resume: Some("one".into()) })]);
        // b has no session to resume and no turn to come: not deliverable.
        assert_eq!(w.restore_steers("b", q(&["lost"])), Err(vec!["lost".to_string()]));
        // c redoes its turn, which will name a session: kept.
        assert_eq!(w.restore_steers("c", q(&["later"])), Ok(None));
        // A task that ends keeps them for the loop to drop, saying so.
        w.set(ACTOR, "c", "halted", None, None);
        assert_eq!(w.drop_steers("c"), ["later"]);
        assert!(w.drop_steers("c").is_empty());
    }
}
