//! The session's state machine: pending requests, expiry, fail-closed
//! denial, checking answers and the record, over one agent's protocol
//! ([`Agent`]). No IO: each call returns a [`Step`] to apply.

use super::input::{self, Input};
use super::types::*;
use crate::control::AnswerInput;
use crate::pipeline::events::{Decision, InputAnswer, InputKind, InputRequest, Question, QuestionOption, Scope};
use serde_json::Value;
use std::collections::VecDeque;

/// Closed requests remembered (to tell a replay from a conflict).
const MAX_CLOSED: usize = 1024;

/// An interactive session over one agent protocol.
pub struct Session<A: Agent> {
    agent: A,
    opts: Options,
    /// Open requests with their expiry (epoch ms), in the order raised.
    pending: Vec<(InputRequest, i64)>,
    /// Closed requests: runwire's interrupt id of each, and how it was closed.
    closed: VecDeque<(Option<String>, InputAnswer)>,
    phase: Phase,
    input_closed: bool,
    session_id: Option<String>,
    /// Session inputs taken so far (refused and unreadable lines included).
    inputs: u64,
    /// The input count of the `runwire.idle` line last written, while the
    /// session has stayed idle since.
    said_idle: Option<u64>,
    /// Stops that stopped something ([`Ack::Stopped`]) so far: a reader that
    /// noted the count when its input was taken sees its turn was stopped.
    stops: u64,
    /// Why the session failed ([`Signal::Failed`]), once it has.
    failure: Option<String>,
    /// Turns begun and ended so far ([`Session::turn`], [`Session::turns_ended`]).
    turns: u64,
    turns_ended: u64,
}

impl<A: Agent> Session<A> {
    pub fn new(agent: A, opts: Options) -> Session<A> {
        Session {
            agent,
            opts,
            pending: Vec::new(),
            closed: VecDeque::new(),
            phase: Phase::Idle,
            input_closed: false,
            session_id: None,
            inputs: 0,
            said_idle: None,
            stops: 0,
            failure: None,
            turns: 0,
            turns_ended: 0,
        }
    }

    /// Why the session failed: the agent refused a request the session
    /// cannot go on without ([`Signal::Failed`]).
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    pub fn agent(&self) -> &A {
        &self.agent
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The session id the agent announced (resumable).
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Requests waiting for an answer, oldest first.
    pub fn pending(&self) -> impl Iterator<Item = &InputRequest> {
        self.pending.iter().map(|(r, _)| r)
    }

    /// How a closed request was closed (the last 1024 are kept).
    pub fn closed(&self, id: &str) -> Option<&InputAnswer> {
        self.closed.iter().rev().find(|(_, a)| a.id == id).map(|(_, a)| a)
    }

    /// An answer's request named by runwire's interrupt id, read as the
    /// agent's id: `Ok((answer, None))` for an open request (or an answer
    /// that names the agent's id itself), `Ok((answer, Some(prev)))` for a
    /// request of this session already closed (`prev`: how), and
    /// [`Refused::Unknown`] for an interrupt id this session never minted:
    /// another process's (an earlier process of the same task may have used
    /// the same agent id), so nothing may be sent for it.
    fn resolve(&self, mut a: AnswerInput) -> Result<(AnswerInput, Option<InputAnswer>), Refused> {
        if !crate::control::is_interrupt_id(&a.id) {
            return Ok((a, None));
        }
        if let Some((r, _)) = self.pending.iter().find(|(r, _)| r.interrupt_id.as_deref() == Some(a.id.as_str())) {
            a.id = r.id.clone();
            return Ok((a, None));
        }
        match self.closed.iter().rev().find(|(i, _)| i.as_deref() == Some(a.id.as_str())) {
            Some((_, prev)) => {
                a.id = prev.id.clone();
                Ok((a, Some(prev.clone())))
            }
            None => Err(Refused::Unknown(a.id)),
        }
    }

    /// Stops that stopped a turn or cancelled a request, so far.
    pub fn stops(&self) -> u64 {
        self.stops
    }

    /// The number of the running turn, else of the last one (0: none yet).
    /// Turns are numbered as they begin (`spec/INTERRUPTS.md`, "Turns"): a
    /// message while none runs, a message that interrupts or cancels the
    /// running one, a turn the agent starts on its own, and the turn the
    /// agent still owed when one ended (a codex steer it refused).
    pub fn turn(&self) -> u64 {
        self.turns
    }

    /// Turns that ended so far: turn `n` is over once this is `n` or more.
    pub fn turns_ended(&self) -> u64 {
        self.turns_ended
    }

    /// Session inputs taken so far: every [`input`](Session::input) call,
    /// refused ones included, and every [`unreadable`](Session::unreadable)
    /// line.
    pub fn inputs(&self) -> u64 {
        self.inputs
    }

    /// A session input line that could not be read as an input: counted
    /// like one (it was consumed), nothing else happens.
    pub fn unreadable(&mut self) {
        self.inputs += 1;
    }

    /// Idle: no turn runs or is owed and no request waits, so nothing will
    /// happen until the next input (or the agent acts on its own).
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle && self.pending.is_empty()
    }

    /// The session's `runwire.idle` line, when it is idle and has not said
    /// so since it last took an input or was busy: call it after every step
    /// (the driver does, under the same lock) and write it after the step's
    /// lines. A runner that counts the input lines it wrote knows from it,
    /// without guessing from the turns in the log, that everything it wrote
    /// has been applied and nothing more will come: the moment to close the
    /// input (`spec/SESSION-INPUT.md`).
    pub fn idle_line(&mut self) -> Option<Vec<u8>> {
        if !self.is_idle() {
            self.said_idle = None;
            return None;
        }
        if self.said_idle == Some(self.inputs) {
            return None;
        }
        self.said_idle = Some(self.inputs);
        Some(input::idle_line(self.inputs))
    }

    /// The earliest expiry among pending requests (epoch ms): call
    /// [`tick`](Session::tick) then.
    pub fn deadline(&self) -> Option<i64> {
        self.pending.iter().map(|(_, t)| *t).min()
    }

    /// The process runs: the opening lines, then `first` as the first message.
    pub fn open(&mut self, first: Option<&str>) -> Step {
        let mut s = Step::default();
        self.agent.open(&mut s.to_agent);
        if let Some(text) = first {
            self.agent.message(text, &mut s.to_agent);
            self.phase = Phase::Turn;
            self.turns += 1;
        }
        s
    }

    /// One line from the agent: forwarded to the output as is, followed by
    /// the session's lines for what it raised or closed.
    pub fn agent_line(&mut self, line: &[u8], now_ms: i64) -> Step {
        let mut s = Step::default();
        s.output.push(line.to_vec());
        for sig in self.agent.line(line, &mut s.to_agent) {
            match sig {
                Signal::Request(r) => {
                    let mut r = *r;
                    let exp = now_ms.saturating_add(self.opts.answer_timeout_ms);
                    r.expires_at = Some(crate::util::time::format_ms(exp));
                    // runwire's own id: this request of this process, on every door.
                    r.interrupt_id = Some(crate::control::new_interrupt_id());
                    // A request id the agent reuses replaces the stale one.
                    self.pending.retain(|(p, _)| p.id != r.id);
                    s.output.push(input::request_line(&r));
                    s.requested.push(r.clone());
                    if self.input_closed || self.phase == Phase::Ended {
                        // Nobody can answer any more: refused at once (fail closed).
                        let a = self.own_answer(
                            &r,
                            Decision::Cancelled,
                            "the session input ended: nobody can answer",
                            now_ms,
                        );
                        self.agent.answer(&r, &a, None, &mut s.to_agent);
                        self.close(&r, a, &mut s);
                    } else {
                        self.pending.push((r, exp));
                    }
                }
                Signal::Withdrawn(id) => {
                    if let Some(i) = self.pending.iter().position(|(p, _)| p.id == id) {
                        let (r, _) = self.pending.remove(i);
                        let a = self.own_answer(&r, Decision::Cancelled, "the agent withdrew the request", now_ms);
                        // The agent no longer waits: nothing is written to it.
                        self.close(&r, a, &mut s);
                    }
                }
                Signal::TurnActive => {
                    if self.phase == Phase::Idle {
                        self.phase = Phase::Turn;
                        self.turns += 1;
                    }
                }
                Signal::TurnEnded { .. } => {
                    // A request still open when its turn ended is moot.
                    for (r, _) in std::mem::take(&mut self.pending) {
                        let a = self.own_answer(&r, Decision::Cancelled, "the turn ended before an answer", now_ms);
                        self.close(&r, a, &mut s);
                    }
                    // A turn that ends while the agent owes another (codex: a
                    // refused steer starts the next) leaves the session mid-turn.
                    if self.phase == Phase::Turn && !self.agent.working() {
                        self.phase = Phase::Idle;
                    }
                    self.turn_ended();
                    self.maybe_end(&mut s);
                }
                Signal::SessionId(id) => self.session_id = Some(id),
                Signal::Failed(why) => {
                    if self.failure.is_none() {
                        // The status line every reader of a task log takes as
                        // the run's end: an `exit` event that is not ok.
                        let status = serde_json::json!({"type": crate::pipeline::normalize::STATUS_TYPE, "ok": false,
                            "rc": 1, "session_id": self.session_id, "detail": why});
                        s.output.push(status.to_string().into_bytes());
                        self.failure = Some(why);
                    }
                    if self.phase != Phase::Ended {
                        self.cancel_all("the session failed", now_ms, &mut s);
                        self.phase = Phase::Ended;
                        s.close_agent_input = true;
                    }
                }
            }
        }
        s
    }

    /// One session input. `Err` refuses it and nothing is written.
    pub fn input(&mut self, input: Input, now_ms: i64) -> Result<Step, Refused> {
        self.inputs += 1;
        if self.phase == Phase::Ended {
            return Err(Refused::Ended);
        }
        let mut s = Step::default();
        match input {
            Input::Message(m) => s.ack = self.message(&m.text, false, &mut s),
            Input::Steer(m) => {
                // A non-blocking request (codex `isBlocking: false`) does not hold the agent.
                if self.pending.iter().any(|(r, _)| r.blocking != Some(false)) {
                    return Err(Refused::RequestOpen);
                }
                // Meant for a turn that is over: nothing is sent.
                if let Some(t) = m.turn.filter(|t| *t != self.turns) {
                    return Err(Refused::StaleTurn { expected: t, now: self.turns });
                }
                s.ack = self.message(&m.text, m.interrupt, &mut s);
            }
            Input::Stop(who) => {
                if self.phase != Phase::Turn && self.pending.is_empty() {
                    s.ack = Ack::NothingRunning;
                    return Ok(s);
                }
                let by = who.by.unwrap_or_else(|| self.opts.actor.clone());
                // Open requests are cancelled (the agent is not left waiting)
                // before the turn is interrupted; the record says who stopped.
                for (r, _) in std::mem::take(&mut self.pending) {
                    let mut a = self.own_answer(&r, Decision::Cancelled, STOPPED, now_ms);
                    a.by = Some(by.clone());
                    self.agent.answer(&r, &a, None, &mut s.to_agent);
                    self.close(&r, a, &mut s);
                }
                if self.phase == Phase::Turn {
                    self.agent.interrupt(&mut s.to_agent);
                }
                self.stops += 1;
                s.ack = Ack::Stopped;
            }
            Input::Answer(a) => {
                return self.answer(a, now_ms).map(|mut s| {
                    s.ack = if s.replayed { Ack::Replay } else { Ack::Taken };
                    s
                })
            }
            Input::Answers(all) => {
                return self.answers(all, now_ms).map(|mut s| {
                    s.ack = if s.replayed { Ack::Replay } else { Ack::Taken };
                    s
                })
            }
            Input::Interrupt(_) => {
                if self.phase == Phase::Turn {
                    self.agent.interrupt(&mut s.to_agent);
                } else {
                    // Nothing was sent: the ack says so, as a stop's does.
                    s.ack = Ack::NothingRunning;
                }
            }
            Input::End(who) => {
                // As a stop: the agent is told the session ended, the record
                // says who ended it (`by` is never sent to the agent).
                let by = who.by.unwrap_or_else(|| self.opts.actor.clone());
                for (r, _) in std::mem::take(&mut self.pending) {
                    let mut a = self.own_answer(&r, Decision::Cancelled, ENDED, now_ms);
                    a.by = Some(by.clone());
                    self.agent.answer(&r, &a, None, &mut s.to_agent);
                    self.close(&r, a, &mut s);
                }
                if self.phase == Phase::Turn {
                    self.agent.interrupt(&mut s.to_agent);
                }
                self.phase = Phase::Ended;
                s.close_agent_input = true;
            }
        }
        self.closed_by_agent(now_ms, &mut s);
        Ok(s)
    }

    /// Requests the agent's protocol answered itself while this input was
    /// applied (ACP cancels them with the turn: [`Agent::holds`]): closed
    /// here as cancelled, so that the record says what the agent got and a
    /// later answer is refused.
    fn closed_by_agent(&mut self, now_ms: i64, s: &mut Step) {
        if self.pending.iter().all(|(r, _)| self.agent.holds(r)) {
            return;
        }
        let (gone, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|(r, _)| !self.agent.holds(r));
        self.pending = kept;
        for (r, _) in gone {
            let a = self.own_answer(&r, Decision::Cancelled, INTERRUPTED, now_ms);
            self.close(&r, a, s);
        }
    }

    /// A message: starts a turn, or (a turn running) joins it, or cancels
    /// it and prompts again where the protocol cannot steer; `interrupt`
    /// first interrupts a running turn.
    fn message(&mut self, text: &str, interrupt: bool, s: &mut Step) -> Ack {
        let running = self.phase == Phase::Turn;
        if running && interrupt {
            self.agent.interrupt(&mut s.to_agent);
        }
        self.agent.message(text, &mut s.to_agent);
        self.phase = Phase::Turn;
        let ack = match (running, interrupt, self.agent.mid_turn()) {
            (false, _, _) => Ack::Started,
            (true, true, _) => Ack::InterruptedThenStarted,
            (true, false, MidTurn::CancelsAndPrompts) => Ack::CancelledThenPrompted,
            (true, false, MidTurn::Joins) if self.agent.pending_steer() => Ack::Pending,
            (true, false, MidTurn::Joins) => Ack::Joined { may_start_next: self.agent.steer_may_start_next() },
        };
        if !matches!(ack, Ack::Joined { .. }) {
            // The interrupted or cancelled turn is over once the agent says so.
            self.turns += 1;
        }
        ack
    }

    /// The session input ended (EOF): no more answers can come. Pending
    /// requests are cancelled (fail closed) and the session ends once the
    /// running turn is over.
    pub fn input_closed(&mut self, now_ms: i64) -> Step {
        let mut s = Step::default();
        self.input_closed = true;
        if self.phase != Phase::Ended {
            self.cancel_all("the session input ended: nobody can answer", now_ms, &mut s);
            self.maybe_end(&mut s);
        }
        s
    }

    /// Expires requests past their time: each is denied to the agent and
    /// recorded as `expired`.
    pub fn tick(&mut self, now_ms: i64) -> Step {
        let mut s = Step::default();
        let (gone, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|(_, t)| *t <= now_ms);
        self.pending = keep;
        for (r, _) in gone {
            let t = self.opts.answer_timeout_ms;
            let within = if t % 1000 == 0 { format!("{} s", t / 1000) } else { format!("{t} ms") };
            let a = self.own_answer(&r, Decision::Expired, &format!("no answer within {within}: denied"), now_ms);
            self.agent.answer(&r, &a, None, &mut s.to_agent);
            self.close(&r, a, &mut s);
        }
        s
    }

    /// The agent exited: what was pending is closed (`cancelled`), nothing
    /// more is written to it.
    pub fn agent_exited(&mut self, now_ms: i64) -> Step {
        let mut s = Step::default();
        for (r, _) in std::mem::take(&mut self.pending) {
            let a = self.own_answer(&r, Decision::Cancelled, "the agent exited", now_ms);
            self.close(&r, a, &mut s);
        }
        self.phase = Phase::Ended;
        s
    }

    fn answer(&mut self, a: AnswerInput, now_ms: i64) -> Result<Step, Refused> {
        self.answers(vec![a], now_ms)
    }

    /// Checks one answer without changing anything: `None` for a replay
    /// (nothing to send), else the record of it.
    fn check_one(
        &self,
        a: &AnswerInput,
        closed: Option<&InputAnswer>,
        now_ms: i64,
    ) -> Result<Option<InputAnswer>, Refused> {
        let at = if closed.is_some() { None } else { self.pending.iter().position(|(p, _)| p.id == a.id) };
        let Some(i) = at else {
            return match closed.or_else(|| self.closed(&a.id)) {
                None => Err(Refused::Unknown(a.id.clone())),
                Some(prev) if prev.decision == Decision::Expired && a.decision != input::Decision::Cancelled => {
                    Err(Refused::Expired(a.id.clone()))
                }
                // Abandoning what is already closed changes nothing.
                Some(_) if a.decision == input::Decision::Cancelled => Ok(None),
                Some(prev) if same_answer(prev, a) => Ok(None),
                Some(prev) => Err(Refused::Decided { id: a.id.clone(), previous: prev.decision }),
            };
        };
        let req = &self.pending[i].0;
        let answer = self.check(req, a, now_ms)?;
        let named = |why: String| Refused::Invalid(format!("request {:?}: {why}", a.id));
        if let Some(m) = &a.mode {
            self.agent.check_mode(m).map_err(named)?;
        }
        self.agent.check_answer(req, a).map_err(named)?;
        Ok(Some(answer))
    }

    /// Answers as one unit: every one is checked first (a refusal of any
    /// refuses all, and nothing is written), then each is written, in order,
    /// in one step (so the writer queues them as one piece).
    fn answers(&mut self, all: Vec<AnswerInput>, now_ms: i64) -> Result<Step, Refused> {
        let mut s = Step::default();
        let mut checked = Vec::with_capacity(all.len());
        let given: Vec<String> = all.iter().map(|a| a.id.clone()).collect();
        let mut all_raw = Vec::with_capacity(all.len());
        for a in all {
            all_raw.push(self.resolve(a)?);
        }
        let all: Vec<AnswerInput> = all_raw.iter().map(|(a, _)| a.clone()).collect();
        for (n, (a, closed)) in all_raw.iter().enumerate() {
            if all[..n].iter().any(|b| b.id == a.id) {
                return Err(Refused::Invalid(format!("request {:?} is answered twice in one input", given[n])));
            }
            checked.push(self.check_one(a, closed.as_ref(), now_ms)?);
        }
        let mut sent = false;
        for (a, answer) in all.into_iter().zip(checked) {
            let Some(answer) = answer else { continue };
            let Some(i) = self.pending.iter().position(|(p, _)| p.id == a.id) else { continue };
            let (req, _) = self.pending.remove(i);
            let mut answer = answer;
            // The record says what an approved plan switched the agent to.
            if req.kind == InputKind::PlanApproval && answer.decision == Decision::Allow {
                answer.mode = self.agent.plan_mode(a.mode.as_deref());
            }
            self.agent.answer(&req, &answer, a.mode.as_deref(), &mut s.to_agent);
            self.close(&req, answer, &mut s);
            sent = true;
        }
        s.replayed = !sent;
        Ok(s)
    }

    /// Checks an answer against its request and builds the record of it.
    fn check(&self, req: &InputRequest, a: &AnswerInput, now_ms: i64) -> Result<InputAnswer, Refused> {
        answer_of(req, a, now_ms)
    }

    fn own_answer(&self, r: &InputRequest, decision: Decision, why: &str, now_ms: i64) -> InputAnswer {
        InputAnswer {
            interrupt_id: None,
            id: r.id.clone(),
            decision,
            scope: None,
            updated_input: None,
            answers: None,
            message: Some(why.to_string()),
            mode: None,
            by: Some(self.opts.actor.clone()),
            at: crate::util::time::format_ms(now_ms),
            door: None,
        }
    }

    fn cancel_all(&mut self, why: &str, now_ms: i64, s: &mut Step) {
        for (r, _) in std::mem::take(&mut self.pending) {
            let a = self.own_answer(&r, Decision::Cancelled, why, now_ms);
            self.agent.answer(&r, &a, None, &mut s.to_agent);
            self.close(&r, a, s);
        }
    }

    fn close(&mut self, r: &InputRequest, mut a: InputAnswer, s: &mut Step) {
        a.interrupt_id = r.interrupt_id.clone();
        s.output.push(input::answer_line(&a));
        s.answered.push(a.clone());
        if self.closed.len() == MAX_CLOSED {
            self.closed.pop_front();
        }
        self.closed.push_back((r.interrupt_id.clone(), a));
    }

    /// Counts a turn's end: idle, every turn begun is over; still mid-turn
    /// (the agent owes one), the turn it owes runs as the next.
    fn turn_ended(&mut self) {
        self.turns_ended = (self.turns_ended + 1).min(self.turns);
        if self.phase != Phase::Turn {
            self.turns_ended = self.turns;
        } else if self.turns_ended == self.turns {
            self.turns += 1;
        }
    }

    /// After the input ended, the session ends at the first idle moment.
    fn maybe_end(&mut self, s: &mut Step) {
        if self.input_closed && self.phase == Phase::Idle && self.pending.is_empty() {
            self.phase = Phase::Ended;
            s.close_agent_input = true;
        }
    }
}

/// Why a JSON-RPC agent refused runwire's `method`, from its error response
/// `v`: `"<who> refused <method>: <message> (code N)"`.
pub(crate) fn refusal(who: &str, method: &str, v: &Value) -> String {
    let e = v.get("error").unwrap_or(&Value::Null);
    let message = match e.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => e.to_string(),
    };
    let data = e.get("data").filter(|d| !d.is_null()).map(|d| format!(": {d}")).unwrap_or_default();
    match e.get("code").and_then(Value::as_i64) {
        Some(c) => format!("{who} refused {method}: {message}{data} (code {c})"),
        None => format!("{who} refused {method}: {message}{data}"),
    }
}

/// One agent line as JSON, read as every reader of agent output reads it
/// (leniently: a lone surrogate must not lose a request); `None` when it is
/// not JSON.
pub(crate) fn json_line(raw: &[u8]) -> Option<Value> {
    std::str::from_utf8(raw).ok().and_then(|t| crate::util::lenient::value(t).ok())
}

/// The questions of an `AskUserQuestion` input: claude's tool, and runwire's
/// question tool for codex, which copies its shape. A question with no text
/// is skipped. Every one takes free text: claude's tool always offers
/// "Other" (its options must not list one: "that will be provided
/// automatically"), and runwire's codex tool promises the same.
pub(crate) fn questions_of(input: &Value) -> Vec<Question> {
    let Some(qs) = input.get("questions").and_then(Value::as_array) else { return Vec::new() };
    qs.iter()
        .filter_map(|q| {
            let s = |k: &str| q.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Question {
                question: s("question")?,
                header: s("header"),
                options: options_of(q.get("options")),
                multi_select: q.get("multiSelect").and_then(Value::as_bool).unwrap_or(false),
                free_text: true,
            })
        })
        .collect()
}

/// A question's `[{"label", "description"?}]` options; one with no label is skipped.
pub(crate) fn options_of(v: Option<&Value>) -> Vec<QuestionOption> {
    v.and_then(Value::as_array)
        .map(|os| {
            os.iter()
                .filter_map(|o| {
                    Some(QuestionOption {
                        label: o.get("label")?.as_str()?.to_string(),
                        description: o.get("description").and_then(Value::as_str).map(str::to_string),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Checks an answer against the request it answers (the decision fits the
/// kind, answers name questions that were asked, labels are labels, …) and
/// builds the record of it. The same check [`Session::input`] makes, for a
/// runner that validates an answer before passing it on.
pub fn answer_of(req: &InputRequest, a: &AnswerInput, now_ms: i64) -> Result<InputAnswer, Refused> {
    use input::Decision as D;
    let bad = |why: String| Err(Refused::Invalid(format!("request {:?} ({}): {why}", req.id, req.kind.as_str())));
    match (req.kind, a.decision) {
        (InputKind::Question, D::Allow) => return bad("a question is answered with decision \"answer\"".into()),
        (InputKind::ToolApproval | InputKind::PlanApproval, D::Answer) => {
            return bad("only a question takes decision \"answer\"".into())
        }
        _ => {}
    }
    if a.decision != D::Allow && (a.updated_input.is_some() || a.scope.is_some() || a.mode.is_some()) {
        return bad("updated_input, scope and mode go with \"allow\" only".into());
    }
    if a.decision != D::Answer && a.answers.is_some() {
        return bad("answers go with \"answer\" only".into());
    }
    if req.kind != InputKind::PlanApproval && a.mode.is_some() {
        return bad("mode goes with a plan approval only".into());
    }
    let mut answers = None;
    if a.decision == D::Answer {
        let asked = req.questions.as_deref().unwrap_or_default();
        let Some(given) = a.answers.as_ref().filter(|m| !m.is_empty()) else {
            return bad("decision \"answer\" needs answers".into());
        };
        let mut out = serde_json::Map::new();
        for (q, v) in given {
            let Some(question) = asked.iter().find(|x| &x.question == q) else {
                return bad(format!("no question {q:?} was asked"));
            };
            let label = match answer_label(question, v) {
                Ok(l) => l,
                Err(why) => return bad(why),
            };
            out.insert(q.clone(), serde_json::Value::String(label));
        }
        answers = Some(out);
    }
    let scope = if a.decision == D::Allow { Some(a.scope.unwrap_or(Scope::Once)) } else { None };
    let message = match a.decision {
        D::Deny => Some(a.message.clone().unwrap_or_else(|| "Permission request denied".into())),
        D::Cancelled => Some(a.message.clone().unwrap_or_else(|| "The request was cancelled".into())),
        _ => a.message.clone(),
    };
    Ok(InputAnswer {
        interrupt_id: None,
        id: req.id.clone(),
        decision: a.decision.into(),
        scope,
        updated_input: a.updated_input.clone().map(serde_json::Value::Object),
        answers,
        message,
        mode: None,
        by: a.by.clone(),
        at: crate::util::time::format_ms(now_ms),
        door: a.door.map(|d| d.as_str().to_string()),
    })
}

/// What an answer to question `q` sends on: one of its options' labels, or
/// for a multi-select question a list of them (joined by `", "`). A
/// question that lists no options takes any text; one that takes free text
/// ([`Question::free_text`]) takes the person's own words (not blank)
/// instead of a label, and a multi-select one labels plus at most one text
/// of their own (claude's "Other" is one text box; the answer is joined as
/// claude joins it). The one check of an answer, made by the session on
/// every answer ([`answer_of`]), so a runner that checks first (the
/// supervisor) and the server's AG-UI resume refuse what the session
/// would, in the same words.
pub fn answer_label(q: &Question, v: &Value) -> Result<String, String> {
    let name = &q.question;
    let what = if q.free_text && !q.options.is_empty() { "a label or text" } else { "a label" };
    let labels: Vec<&str> = match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(xs) if q.multi_select => match xs.iter().map(Value::as_str).collect::<Option<Vec<&str>>>() {
            Some(l) if !l.is_empty() => l,
            _ => return Err(format!("the answer to {name:?} must be a list of {what}s (strings)")),
        },
        Value::Array(_) => return Err(format!("{name:?} takes one answer, not a list")),
        _ => return Err(format!("the answer to {name:?} must be {what}")),
    };
    if !q.options.is_empty() {
        let own: Vec<&&str> = labels.iter().filter(|l| !q.options.iter().any(|o| o.label == ***l)).collect();
        if let Some(bad) = own.first().filter(|_| !q.free_text) {
            let choices: Vec<&str> = q.options.iter().map(|o| o.label.as_str()).collect();
            return Err(format!("{bad:?} is not one of the choices of {name:?} ({})", choices.join(", ")));
        }
        if own.iter().any(|t| t.trim().is_empty()) {
            return Err(format!("an answer of {name:?} in the person's own words must not be blank"));
        }
        if own.len() > 1 {
            return Err(format!("{name:?} takes at most one answer in the person's own words, besides its choices"));
        }
    }
    Ok(labels.join(", "))
}

/// An answer repeated identically (a client retrying) is not a conflict.
/// Answers compare by what was sent on (a list of labels as joined), so a
/// different answer to the same questions is one (it used to compare the
/// questions only, which was enough while every answer had to be a label
/// and a wrong one was refused first; free text made it visible).
pub(crate) fn same_answer(prev: &InputAnswer, a: &AnswerInput) -> bool {
    let decision: Decision = a.decision.into();
    let sent = |v: &Value| match v {
        Value::Array(xs) => {
            xs.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<Vec<_>>>().map(|l| l.join(", ").into())
        }
        other => Some(other.clone()),
    };
    prev.decision == decision
        && prev.updated_input == a.updated_input.clone().map(serde_json::Value::Object)
        && (a.decision != input::Decision::Allow || prev.scope == Some(a.scope.unwrap_or(Scope::Once)))
        && (a.answers.is_none()
            || a.answers.as_ref().map(|m| m.iter().map(|(k, v)| Some((k.clone(), sent(v)?))).collect::<Option<_>>())
                == Some(prev.answers.clone()))
}

#[cfg(test)]
mod turn_tests {
    use super::*;
    use crate::session::core::claude::{Claude, ClaudeOptions};
    use crate::session::core::input::{MessageInput, SteerInput};

    const RESULT: &[u8] = br#"{"type":"result","subtype":"success","is_error":false,"session_id":"s"}"#;

    /// Turns are numbered as they begin and counted as they end
    /// (`spec/INTERRUPTS.md`, "Turns"): idle, every turn begun has ended.
    #[test]
    fn turns_are_numbered_as_they_begin_and_end() {
        let mut s = Session::new(Claude::new(ClaudeOptions::default()), Options::default());
        let _ = s.open(None);
        assert_eq!((s.turn(), s.turns_ended()), (0, 0));
        let m = |t: &str| Input::Message(MessageInput { text: t.into(), by: None });
        assert_eq!(s.input(m("one"), 0).unwrap().ack, Ack::Started);
        assert_eq!((s.turn(), s.turns_ended(), s.phase()), (1, 0, Phase::Turn));
        // A live steer joins turn 1.
        let steer = |interrupt| Input::Steer(SteerInput { text: "more".into(), interrupt, turn: None, by: None });
        assert!(matches!(s.input(steer(false), 0).unwrap().ack, Ack::Joined { .. }));
        assert_eq!(s.turn(), 1);
        let _ = s.agent_line(RESULT, 0);
        assert_eq!((s.turn(), s.turns_ended(), s.phase()), (1, 1, Phase::Idle));
        assert_eq!(s.input(m("two"), 0).unwrap().ack, Ack::Started);
        // Interrupting turn 2 starts turn 3; turn 2's end is not turn 3's.
        assert_eq!(s.input(steer(true), 0).unwrap().ack, Ack::InterruptedThenStarted);
        assert_eq!((s.turn(), s.turns_ended()), (3, 1));
        let _ = s.agent_line(RESULT, 0);
        let _ = s.agent_line(RESULT, 0);
        assert_eq!((s.turn(), s.turns_ended(), s.phase()), (3, 3, Phase::Idle));
        // A stray result while idle changes nothing.
        let _ = s.agent_line(RESULT, 0);
        assert_eq!((s.turn(), s.turns_ended()), (3, 3));
    }

    /// A steer that names the turn it expects is refused, with nothing
    /// written to the agent, once another turn has begun.
    #[test]
    fn a_steer_for_a_turn_that_is_over_is_refused() {
        let mut s = Session::new(Claude::new(ClaudeOptions::default()), Options::default());
        let _ = s.open(None);
        let m = |t: &str| Input::Message(MessageInput { text: t.into(), by: None });
        let steer =
            |turn| Input::Steer(SteerInput { text: "more".into(), interrupt: false, turn: Some(turn), by: None });
        let _ = s.input(m("one"), 0).unwrap();
        assert!(matches!(s.input(steer(1), 0).unwrap().ack, Ack::Joined { .. }));
        let _ = s.agent_line(RESULT, 0);
        let _ = s.input(m("two"), 0).unwrap();
        assert_eq!(s.input(steer(1), 0), Err(Refused::StaleTurn { expected: 1, now: 2 }));
        assert!(s.input(steer(2), 0).unwrap().to_agent.len() == 1);
    }

    /// Every request gets runwire's id; an answer may name it, and one that
    /// names an id this session never minted (another process's) is refused.
    #[test]
    fn answers_name_requests_by_runwires_id_and_a_foreign_id_sends_nothing() {
        const ASK: &[u8] = br#"{"type":"control_request","request_id":"0","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"t0"}}"#;
        let mut s = Session::new(Claude::new(ClaudeOptions::default()), Options::default());
        let _ = s.open(None);
        let _ = s.input(Input::Message(MessageInput { text: "go".into(), by: None }), 0).unwrap();
        let step = s.agent_line(ASK, 0);
        let iid = step.requested[0].interrupt_id.clone().unwrap();
        assert!(crate::control::is_interrupt_id(&iid));
        let answer = |id: &str| {
            Input::Answer(AnswerInput {
                id: id.into(),
                decision: input::Decision::Allow,
                scope: None,
                updated_input: None,
                answers: None,
                message: None,
                mode: None,
                by: None,
                door: None,
            })
        };
        let foreign = crate::control::new_interrupt_id();
        assert_eq!(s.input(answer(&foreign), 0), Err(Refused::Unknown(foreign)));
        let taken = s.input(answer(&iid), 0).unwrap();
        assert_eq!((taken.to_agent.len(), taken.answered[0].id.as_str()), (1, "0"));
        let again = s.input(answer(&iid), 0).unwrap();
        assert!(again.replayed && again.to_agent.is_empty());
        let mut deny = answer(&iid);
        if let Input::Answer(a) = &mut deny {
            a.decision = input::Decision::Deny;
        }
        assert!(matches!(s.input(deny, 0), Err(Refused::Decided { .. })));
    }
}
