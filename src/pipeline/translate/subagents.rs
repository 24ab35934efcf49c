//! The translator's subagents: an AG-UI 1.0 subagent per events/v1
//! invocation (`parent`), opened with `SUBAGENT_STARTED` before its first
//! event and ended (`SUBAGENT_FINISHED` / `SUBAGENT_ERROR`) when its
//! spawning call returns, its turn ends, or the run stops.

use super::{first_line, AguiEvent, Slots, SubagentOutcome, Translator};
use crate::pipeline::events::Subagent;

/// A subagent invocation between its `SUBAGENT_STARTED` and its end.
#[derive(Debug)]
pub(super) struct OpenSub {
    /// The invocation's events/v1 id (`parent.id`).
    pub(super) raw: String,
    /// Its `subagentRunId`.
    pub(super) run_id: String,
    /// The events/v1 id of the call that spawned it (`parent.tool_call`).
    pub(super) call: String,
    /// The enclosing subagent's `subagentRunId`.
    pub(super) outer: Option<String>,
    /// What its `subagentRunId` is made of (`raw`, or `raw:<n>` for one
    /// that acts again after it ended): its messages' ids carry it.
    pub(super) key: String,
    pub(super) slots: Slots,
}

/// How the subagents still open end (see [`Translator::end_subs`]).
pub(super) enum SubEnd<'a> {
    Success,
    Error(&'a str, &'a str),
}

impl Translator {
    /// The open subagent an event of `p` belongs to (its index in
    /// `subs`), opened now with `SUBAGENT_STARTED` if it is not: named as
    /// the event names it, under the call that spawned it and that call's
    /// message, inside the subagent that made that call (or the one
    /// `parent_id` names).
    pub(super) fn enter(&mut self, p: &Subagent, ts: Option<i64>, out: &mut Vec<AguiEvent>) -> usize {
        if let Some(i) = self.subs.iter().position(|s| s.raw == p.id) {
            return i;
        }
        let key = match self.subs_ended.get(&p.id) {
            Some((n, _)) => format!("{}:{}", p.id, n + 1),
            None => p.id.clone(),
        };
        let run_id = self.ns("sa", &key);
        let call = self.tool_ids.get(&p.tool_call).filter(|c| self.tools_started.contains(*c)).cloned();
        let outer_of = |raw: &str| {
            self.subs
                .iter()
                .find(|s| s.raw == raw)
                .map(|s| s.run_id.clone())
                .or_else(|| self.subs_ended.get(raw).map(|(_, r)| r.clone()))
        };
        let outer = match &p.parent_id {
            Some(o) => outer_of(o),
            None => call.as_ref().and_then(|c| self.tool_owner.get(c)).cloned(),
        };
        out.push(AguiEvent::SubagentStarted {
            subagent_run_id: run_id.clone(),
            name: p.name.clone(),
            description: p.description.clone(),
            parent_subagent_run_id: outer.clone(),
            parent_message_id: call.as_ref().and_then(|c| self.tool_msgs.get(c)).cloned(),
            parent_tool_call_id: call,
            timestamp: ts,
        });
        self.subs.push(OpenSub {
            raw: p.id.clone(),
            run_id,
            call: p.tool_call.clone(),
            outer,
            key,
            slots: Slots::default(),
        });
        self.subs.len() - 1
    }

    /// Records that an invocation ended (a later event of it opens a new one).
    pub(super) fn ended(&mut self, raw: &str, run_id: &str) {
        let e = self.subs_ended.entry(raw.to_string()).or_insert((0, String::new()));
        e.0 += 1;
        e.1 = run_id.to_string();
    }

    /// Ends open subagents: those `call` spawned (and the ones inside
    /// them), or, with `None`, every one; the innermost first, each with
    /// its open text closed.
    pub(super) fn end_subs(&mut self, call: Option<&str>, how: SubEnd, ts: Option<i64>, out: &mut Vec<AguiEvent>) {
        if self.subs.is_empty() {
            return;
        }
        let mut doomed: Vec<String> = Vec::new();
        for s in &self.subs {
            let hit = match call {
                None => true,
                Some(c) => s.call == c || s.outer.as_ref().is_some_and(|o| doomed.contains(o)),
            };
            if hit {
                doomed.push(s.run_id.clone());
            }
        }
        while let Some(run_id) = doomed.pop() {
            let Some(i) = self.subs.iter().position(|s| s.run_id == run_id) else { continue };
            self.close_agent(Some(i), ts, out);
            let s = self.subs.remove(i);
            self.ended(&s.raw, &s.run_id);
            out.push(match how {
                SubEnd::Success => AguiEvent::SubagentFinished {
                    subagent_run_id: s.run_id,
                    outcome: Some(SubagentOutcome::Success),
                    timestamp: ts,
                },
                SubEnd::Error(message, code) => AguiEvent::SubagentError {
                    subagent_run_id: s.run_id,
                    message: first_line(message, "the subagent failed"),
                    code: code.to_string(),
                    timestamp: ts,
                },
            });
        }
    }

    /// The `subagentRunId` of the subagent that made an agent's tool call.
    pub(super) fn owner_of_raw(&self, call: Option<&str>) -> Option<String> {
        let id = self.tool_ids.get(call?)?;
        self.tool_owner.get(id).cloned()
    }
}
