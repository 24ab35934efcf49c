//! The supervisor's steps as its loop sees them: the process a task's step
//! runs (`spec/SUPERVISOR.md`), starting it ([`super::runner`] runs it),
//! and the reports of its threads: what a turn's session said, and its end
//! through the state machine's edges.

use super::awaiting::{acked, Asked};
use super::runner::{launch_step, turn_adapter, Event, Kill, Launch, Report, Running, Seen};
use super::state::{now_ts, Sup};
use super::waves::{End, Phase, Step, ACTOR};
use crate::control::links::LINK_NAME;
use crate::control::Reply;
use crate::runs::liveness::Entry;
use crate::session::proc::{self, Spec};
use crate::session::record::InputRecord;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

impl Sup {
    /// A turn's prompt: the task's own, or a steer message resuming its session.
    fn prompt_args(&self, c: &mut Spec, id: &str, resume: Option<&str>, prompt: &str) {
        match resume {
            Some(msg) => {
                let sid = self.waves.slot(id).and_then(|s| s.session.clone()).unwrap_or_default();
                c.arg("--prompt").arg(msg).arg("--resume").arg(sid);
            }
            None => {
                c.arg("--prompt").arg(prompt);
            }
        }
    }

    /// `<slug>.<task>.<what>.log`: a gate's or a review's log.
    fn step_log(&self, id: &str, what: &str) -> PathBuf {
        self.rec.files.dir.join(format!("{}.{id}.{what}.log", self.rec.files.slug))
    }

    /// A path as a person finds it from the run's directory: relative to
    /// the working directory when it lies beneath it.
    fn shown(&self, p: &Path) -> String {
        let wd = self.opts.workdir.canonicalize().unwrap_or_else(|_| self.opts.workdir.clone());
        p.strip_prefix(&wd).unwrap_or(p).display().to_string()
    }

    /// The process of a step, as `spec/SUPERVISOR.md` says; `Err` halts the task.
    fn spec(&self, id: &str, step: &Step) -> Result<(Spec, Phase, PathBuf), String> {
        let def = self.waves.def(id);
        let wrapper_env = |c: &mut Spec, grace: Duration| {
            // The wrapper's own grace is shorter than ours, so it can still
            // stop its engine (in a session of its own) before our SIGKILL.
            c.env("RUNWIRE_KILL_GRACE", (grace.as_secs() / 2).max(1).to_string());
        };
        // Every adapter's wrapper has --interactive (claude, codex app-server,
        // cursor ACP); what differs between them is the session layer's.
        let live = self.opts.interactive && turn_adapter(&def.adapter).is_some();
        Ok(match step {
            // An ACP agent given as a command line: its session is the turn
            // (`runwire-session acp`, what cursor.sh --interactive runs for
            // cursor-agent), its stdin the session input.
            Step::Turn { resume } if def.adapter == "acp" => {
                let mut c = Spec::new(self.session_bin.clone().unwrap_or_default());
                c.arg("acp");
                // Its requests' generation on its status lines: the task's count of turns.
                let generation = self.interrupts.get(id).map_or(0, |i| i.generation) + 1;
                c.arg("--generation").arg(generation.to_string());
                self.prompt_args(&mut c, id, resume.as_deref(), &def.prompt);
                let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
                c.arg("--answer-timeout").arg(var("RUNWIRE_ANSWER_TIMEOUT").unwrap_or_else(|| "300s".into()));
                if let Some(m) = var("RUNWIRE_ACP_MODE") {
                    c.arg("--mode").arg(m);
                }
                c.arg("--");
                for a in def.cmd.iter().flatten() {
                    c.arg(a);
                }
                c.stdin = proc::Input::Piped;
                (c, Phase::Turn, self.rec.files.log(id))
            }
            Step::Turn { resume } => {
                let w = self.wrappers.get(&def.adapter).cloned().unwrap_or_default();
                crate::session::wrappers::recheck(&w)?;
                let mut c = Spec::new(w);
                if live {
                    c.arg("--interactive");
                    c.stdin = proc::Input::Piped;
                }
                self.prompt_args(&mut c, id, resume.as_deref(), &def.prompt);
                wrapper_env(&mut c, self.opts.kill_grace);
                (c, Phase::Turn, self.rec.files.log(id))
            }
            Step::Gate => {
                let mut c = Spec::new("/bin/sh");
                c.arg("-c").arg(def.gate.clone().unwrap_or_default());
                // Its log says why it failed: a gate's errors are on stderr.
                c.merge_stderr = true;
                (c, Phase::Gate, self.step_log(id, "gate"))
            }
            Step::Review => {
                let seat = def.review.clone().unwrap_or_default();
                let Some(w) = self.wrappers.get(&seat).cloned() else {
                    return Err(format!("review seat {seat:?} is not an adapter the supervisor can run"));
                };
                crate::session::wrappers::recheck(&w)?;
                let mut c = Spec::new(w);
                c.arg("--prompt").arg(format!("Review the work of task {id}. The task was: {}", def.prompt));
                wrapper_env(&mut c, self.opts.kill_grace);
                (c, Phase::Review, self.step_log(id, "review"))
            }
            Step::Commit => unreachable!("a commit runs no process"),
        })
    }

    /// Starts a step's process; a step that cannot start halts its task.
    pub(super) fn dispatch(&mut self, id: &str, step: Step) {
        let halt = |s: &mut Sup, rc: Option<i64>, why: String| {
            s.waves.not_started(id);
            s.set_state(ACTOR, id, "halted", rc, Some(why));
        };
        let (mut spec, phase, log) = match self.spec(id, &step) {
            Ok(x) => x,
            Err(why) => return halt(self, None, why),
        };
        let out = match std::fs::OpenOptions::new().create(true).append(true).open(&log) {
            Ok(f) => f,
            Err(e) => return halt(self, None, format!("{}: {e}", log.display())),
        };
        spec.cwd = Some(self.opts.workdir.clone());
        spec.kill_grace = self.opts.kill_grace;
        spec.env("RUNWIRE_RUN_ID", &self.rec.run_id).env("RUNWIRE_TASK", id);
        let turn = phase == Phase::Turn;
        // A turn's session (`runwire-session`, itself or under a wrapper) is
        // under this runner: a stop signal there is the reaper's, this
        // process's death or its stop, never an operator's end of the
        // session, and answers nothing (the requests it leaves open are this
        // process's to close, `close_left_open`). Only a turn runs one: a
        // gate or a review that starts a session starts its own, and the
        // session keeps the flag from its agent.
        if turn {
            spec.env(proc::SUPERVISED_ENV, "1");
        } else {
            spec.env_remove(proc::SUPERVISED_ENV);
        }
        if let Some(s) = self.waves.slot(id).and_then(|s| s.session.clone()) {
            spec.env("RUNWIRE_SESSION_ID", s);
        }
        self.steps += 1;
        let launch = Launch {
            task: id.to_string(),
            step: self.steps,
            spec,
            out,
            log,
            // Arrival times for the task log, unless SOURCE_DATE_EPOCH pins time.
            times: turn && crate::util::arrival::clock().is_some(),
            reader: turn.then(|| turn_adapter(&self.waves.def(id).adapter)).flatten(),
        };
        let started = match launch_step(launch, &self.events) {
            Ok(s) => s,
            Err(why) => return halt(self, Some(127), why),
        };
        self.rec.record_group(id, crate::util::procid::Ident::of(started.pgid));
        self.rec.live(
            id,
            Entry {
                pid: Some(started.pid),
                pgid: Some(started.pgid),
                logfile: Some(self.rec.files.log(id).display().to_string()),
                started_ts: Some(now_ts()),
                ..Entry::default()
            },
        );
        if turn {
            // A new agent process: its requests are its own.
            self.interrupts.entry(id.to_string()).or_default().generation += 1;
        }
        let r = Running {
            step: self.steps,
            phase,
            signaller: started.signaller,
            stopping: None,
            killed: false,
            input: started.input,
            written: 0,
            idle: None,
            pending: BTreeSet::new(),
            detail: None,
            hold: false,
            for_steer: false,
            kill: None,
            awaiting: Vec::new(),
            lost: None,
        };
        self.running.insert(id.to_string(), r);
    }

    /// A report of a step; one of a step that is over is late and dropped.
    pub(super) fn on_task(&mut self, e: Event) {
        let id = e.task;
        if self.running.get(&id).is_none_or(|r| r.step != e.step) {
            return;
        }
        match e.report {
            Report::Seen(s) => self.seen(&id, *s),
            Report::Lost(why) => {
                let r = self.running.get_mut(&id).expect("checked");
                if r.kill.is_none() {
                    // Its output is being lost: stop the step, say why.
                    r.terminate();
                    let detail = Some(format!("the output could not be written: {why}"));
                    r.kill = Some(Kill { actor: ACTOR.into(), detail, replies: vec![] });
                }
                r.lost.get_or_insert(why);
            }
            Report::Exited(rc) => {
                let r = self.running.remove(&id).expect("checked");
                self.rec.record_group(&id, None);
                self.finished(&id, r, rc);
            }
        }
    }

    /// What a turn's session said. Its requests and answers go into the
    /// journal (input records); each acknowledgement answers the control
    /// request that wrote its line; and once the session has said it is idle
    /// with every line written to it applied and no request open, its input
    /// is closed so that the session ends (unless `stop` holds it open for a
    /// steer). This runs on the thread that writes the input, so no line can
    /// be written between the look and the close: a steer after it finds
    /// the input closed and waits for the turn boundary; one before it makes
    /// the counts differ until the session has applied it.
    fn seen(&mut self, id: &str, s: Seen) {
        let now = || crate::util::time::Clock::from_env().now_ms();
        let state = self.waves.state(id).map(str::to_string);
        let r = self.running.get_mut(id).expect("checked by on_task");
        let ints = self.interrupts.entry(id.to_string()).or_default();
        match s {
            Seen::Session(sid) => {
                // Into liveness as soon as the turn names a session the task did not have.
                if let Some(slot) = self.waves.slot_mut(id).filter(|t| t.session.as_ref() != Some(&sid)) {
                    slot.session = Some(sid.clone());
                    self.rec.live(id, Entry { session_id: Some(sid), ..Entry::default() });
                }
            }
            Seen::Request(q) => {
                r.pending.insert(q.id.clone());
                if let Some(i) = &q.interrupt_id {
                    ints.raised(i, &q.id);
                }
                let mut rec = InputRecord::requested("runner", id, &q, now());
                // Its link (the record keeps a question's choices for the link's page).
                if let Some(keys) = &self.opts.links {
                    let mut claims = crate::control::links::claims_for(&self.rec.run_id, id, &q, LINK_NAME);
                    // Beside a cluster node (no --node given), the node this home is now:
                    // a hub forwards the link there (spec/SUPERVISOR.md, approval links).
                    if let Some(c) = claims.as_mut().filter(|_| keys.node.is_none()) {
                        c.o = crate::runs::nodes::home_node(&self.opts.home);
                    }
                    rec.links = claims.map(|c| vec![keys.link(&c)]);
                }
                self.rec.input(&rec);
            }
            Seen::Answer(a) => {
                r.pending.remove(&a.id);
                let mut rec = InputRecord::answered("runner", id, &a, now());
                if let Some(b) = ints.closed_by(&a) {
                    b.answer = Some(a.clone());
                    rec.interrupt = Some(b.interrupt.clone());
                    // The line that closed it: the session takes its input
                    // in order, and acknowledges each line after its step,
                    // so it is the oldest answer to this request still
                    // awaiting its acknowledgement (one refused before it
                    // was acknowledged first). Doors that answered at once
                    // each wrote a line: the winner's is the journal's door.
                    // An answer no line gave (the session's own expiry) has none.
                    rec.door =
                        a.by.as_ref()
                            .and_then(|_| {
                                r.awaiting.iter().find(
                                    |w| matches!(&w.what, Asked::Answer(x) if *x == b.interrupt || *x == b.request),
                                )
                            })
                            .map(|w| w.door.as_str().to_string());
                }
                self.rec.input(&rec);
            }
            Seen::Ack(a) => {
                let Some(i) = r.awaiting.iter().position(|w| w.line == a.line) else { return };
                let w = r.awaiting.remove(i);
                if matches!(w.what, Asked::Steer(_)) && a.refused.is_none() {
                    // A steer taken goes on: the session is no longer held for one.
                    r.hold = false;
                }
                let (reply, steered) = acked(id, &w, Some(&a), state);
                if let Some(tx) = &w.reply {
                    let _ = tx.send(reply);
                }
                if let Some(d) = steered {
                    self.rec.command_rec(&w.actor, w.door, "steer-queued", Some(d));
                }
            }
            Seen::Idle(n) => r.idle = Some(n),
            Seen::Busy => r.idle = None,
            Seen::Detail(d) => r.detail = d,
        }
        let r = self.running.get_mut(id).expect("checked by on_task");
        if r.input.is_some() && !r.hold && r.idle == Some(r.written) && r.pending.is_empty() {
            r.input = None;
        }
    }

    /// Requests a step's process left open when it ended (killed, or gone
    /// before its turn ended them) are closed in the journal, withdrawn: no
    /// one can answer them now, so no link, studio or hub may offer them,
    /// and an answer naming one is refused as for any closed request.
    fn close_left_open(&mut self, id: &str, pending: &BTreeSet<String>) {
        use crate::pipeline::events::{Decision, InputAnswer};
        let now = crate::util::time::Clock::from_env().now_ms();
        let ints = self.interrupts.entry(id.to_string()).or_default();
        for request in pending {
            let mut a = InputAnswer {
                id: request.clone(),
                interrupt_id: None,
                decision: Decision::Cancelled,
                scope: None,
                updated_input: None,
                answers: None,
                message: Some("the process that asked ended before an answer".into()),
                mode: None,
                by: None,
                at: crate::util::time::format_ms(now),
                door: None,
            };
            if let Some(b) = ints.closed_by(&a) {
                a.interrupt_id = Some(b.interrupt.clone());
                b.answer = Some(a.clone());
            }
            let mut rec = InputRecord::answered("runner", id, &a, now);
            rec.interrupt = a.interrupt_id.clone();
            self.rec.input(&rec);
        }
    }

    /// One process of a task ended with `rc`: its replies, then the state machine's edges.
    fn finished(&mut self, id: &str, r: Running, rc: i64) {
        let def = self.waves.def(id);
        // An agent's turn ended: the task's next record (whichever edge)
        // says what its log adds up to now.
        if r.phase == Phase::Turn {
            self.rec.turn_totals =
                crate::runs::view::turn_totals(&self.rec.files, id, &def.adapter).map(|t| (id.to_string(), t));
            // A turn that names no session keeps the one the task had.
            if let Some(s) = self.waves.slot(id).and_then(|s| s.session.clone()) {
                self.rec.live(id, Entry { session_id: Some(s), ..Entry::default() });
            }
        }
        self.close_left_open(id, &r.pending);
        let state = self.waves.state(id).map(str::to_string);
        for tx in r.awaiting.iter().filter_map(|w| w.reply.as_ref()) {
            let why = format!("task {id}: its session ended before it took the line written for this request");
            let _ = tx.send(Reply::refuse(why, state.clone()));
        }
        let why = match r.phase {
            // This turn's own detail: none when it wrote no status line.
            Phase::Turn => {
                let who = if def.adapter == "acp" { "runwire-session" } else { "wrapper" };
                match r.detail.filter(|d| !d.is_empty()) {
                    Some(d) => format!("{who} exited {rc}: {d}"),
                    None => format!("{who} exited {rc}"),
                }
            }
            Phase::Gate => format!(
                "gate {:?} exited {rc} ({})",
                def.gate.as_deref().unwrap_or_default(),
                self.shown(&self.step_log(id, "gate"))
            ),
            Phase::Review => format!("review exited {rc} ({})", self.shown(&self.step_log(id, "review"))),
        };
        let end = match (r.kill, r.lost) {
            // Its log is incomplete: the step cannot count as done.
            (None, Some(e)) => End::Lost { rc, why: format!("the output could not be written: {e}") },
            (Some(k), _) => {
                let detail = k.detail.unwrap_or_else(|| format!("killed by {}", k.actor));
                for reply in k.replies {
                    let _ = reply.send(Reply::ok(format!("{detail}: rc {rc}"), Some("halted".into())));
                }
                End::Killed { actor: k.actor, detail, rc }
            }
            (None, None) if r.for_steer => End::ForSteer { rc, why },
            (None, None) => End::Exited { rc, why },
        };
        let effects = self.waves.ended(id, r.phase, end);
        self.apply(effects);
    }
}
