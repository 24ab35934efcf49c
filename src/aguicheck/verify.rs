//! The sequence checks of `@ag-ui/client` 1.0.0's `verifyEvents`
//! (`src/verify/verify.ts`), in its order, plus the spec's own MUSTs.

use super::*;

impl Checker {
    /// The sequence checks of `verifyEvents`, plus the spec's own.
    pub(super) fn verify(&mut self, ty: &str, ev: &Map<String, Value>, out: &mut Vec<Finding>) {
        let at = |c: &Checker, rule, m: String| c.at(rule, Some(ty), m);
        // The run lifecycle first, as verify.ts orders it.
        if self.phase == Phase::Errored && ty != "RUN_STARTED" {
            return out.push(at(
                self,
                "run.after-close",
                format!("{ty} after RUN_ERROR: only RUN_STARTED may follow it"),
            ));
        }
        if self.phase == Phase::Finished && ty != "RUN_STARTED" && ty != "RUN_ERROR" {
            return out.push(at(
                self,
                "run.after-close",
                format!("{ty} after RUN_FINISHED: only RUN_STARTED (a new run) or a late RUN_ERROR may follow it"),
            ));
        }
        if self.phase == Phase::Start && ty != "RUN_STARTED" && ty != "RUN_ERROR" {
            let first = if ty.is_empty() { "an event with no type".to_string() } else { ty.to_string() };
            out.push(at(self, "run.first", format!("the stream begins with {first}, not RUN_STARTED or RUN_ERROR")));
            // Read on as if a run had started, to check what follows.
            self.phase = Phase::Active;
        }
        if self.opts.one_run && self.terminals > 0 {
            out.push(at(
                self,
                "run.one-run",
                format!("{ty} after the run's terminal event: --one-run allows one run, its terminal last"),
            ));
        }
        let tag: Owner = s(ev, "subagentRunId").map(str::to_string);
        if let Some(t) = &tag {
            if !matches!(ty, "SUBAGENT_STARTED" | "SUBAGENT_FINISHED" | "SUBAGENT_ERROR")
                && !self.run.tagged.contains(t)
                && self.track(out, ty, t.len())
            {
                self.run.tagged.insert(t.clone());
            }
        }
        let id = |k: &str| s(ev, k).unwrap_or_default().to_string();
        match ty {
            "RUN_STARTED" => {
                if self.phase == Phase::Active {
                    return out.push(at(self, "run.nested", "RUN_STARTED while a run is active".into()));
                }
                self.run = Run::default();
                self.phase = Phase::Active;
                let ids = s(ev, "threadId").zip(s(ev, "runId")).map(|(t, r)| (t.to_string(), r.to_string()));
                self.run.ids = ids.clone();
                self.last_run = ids;
                self.undeclared = (!ev.contains_key("protocolVersion")).then_some(self.n);
                let input = ev.get("input").and_then(|i| i.get("messages"));
                self.seed_owners(input, false, out, ty);
                // The input's state is the run's baseline (null means absent).
                if let Some(st) = ev.get("input").and_then(|i| i.get("state")).filter(|s| !s.is_null()) {
                    self.set_state(st.clone());
                }
            }
            "RUN_FINISHED" => {
                let mut open = Vec::new();
                let mut steps: Vec<String> = Vec::new();
                for (o, names) in &self.run.steps {
                    for n in names {
                        steps.push(match o {
                            Some(o) => format!("{n} (subagent '{o}')"),
                            None => n.clone(),
                        });
                    }
                }
                let list = |set: &HashSet<String>| {
                    let mut v: Vec<&str> = set.iter().map(String::as_str).collect();
                    v.sort_unstable();
                    v.join(", ")
                };
                steps.sort();
                for (what, names) in [
                    ("steps", steps.join(", ")),
                    ("text messages", list(&self.run.text)),
                    ("reasoning messages", list(&self.run.reasoning)),
                    ("reasoning spans", list(&self.run.spans)),
                    ("tool calls", list(&self.run.tools)),
                    ("subagents", list(&self.run.subagents)),
                ] {
                    if !names.is_empty() {
                        open.push(format!("{what} {names}"));
                    }
                }
                if !open.is_empty() {
                    out.push(at(
                        self,
                        "run.open-at-finish",
                        format!("RUN_FINISHED while still active: {}", open.join("; ")),
                    ));
                }
                let ids = (id("threadId"), id("runId"));
                if let Some(started) = &self.run.ids {
                    if *started != ids {
                        out.push(at(
                            self,
                            "run.ids",
                            format!(
                                "RUN_FINISHED names thread {:?} run {:?}, but the run started as thread {:?} run {:?}",
                                ids.0, ids.1, started.0, started.1
                            ),
                        ));
                    }
                }
                if let Some(ints) = ev.get("outcome").and_then(|o| o.get("interrupts")).and_then(Value::as_array) {
                    let mut seen = HashSet::new();
                    for i in ints {
                        if let Some(iid) = i.get("id").and_then(Value::as_str) {
                            if !seen.insert(iid) {
                                out.push(at(
                                    self,
                                    "interrupt.id-unique",
                                    format!("interrupt id {iid:?} appears twice in the run's outcome"),
                                ));
                            }
                        }
                    }
                }
                let outcome = ev.get("outcome");
                let interrupted = outcome.and_then(|o| o.get("type")).and_then(Value::as_str) == Some("interrupt");
                let raised: HashMap<&str, Option<&str>> = outcome
                    .and_then(|o| o.get("interrupts"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|i| Some((i.get("id")?.as_str()?, i.get("subagentRunId").and_then(Value::as_str))))
                    .collect();
                for (sid, ids) in &self.run.suspended {
                    if !interrupted {
                        out.push(at(
                            self,
                            "interrupt.suspended",
                            format!("subagent '{sid}' finished suspended, awaiting input, but the run does not end with the interrupt outcome"),
                        ));
                        continue;
                    }
                    for iid in ids {
                        match raised.get(iid.as_str()) {
                            None => out.push(at(
                                self,
                                "interrupt.suspended",
                                format!(
                                    "subagent '{sid}' names interrupt {iid:?}, which the run's outcome does not carry"
                                ),
                            )),
                            Some(Some(by)) if *by != sid => out.push(at(
                                self,
                                "interrupt.suspended",
                                format!("subagent '{sid}' names interrupt {iid:?}, raised by subagent '{by}'"),
                            )),
                            Some(_) => {}
                        }
                    }
                }
                self.phase = Phase::Finished;
                self.terminals += 1;
            }
            "RUN_ERROR" => {
                self.phase = Phase::Errored;
                self.terminals += 1;
            }
            "TEXT_MESSAGE_START" => {
                let mid = id("messageId");
                if self.run.text.contains(&mid) {
                    return out.push(at(
                        self,
                        "text.pairing",
                        format!("TEXT_MESSAGE_START for '{mid}', a text message already open"),
                    ));
                }
                let existing = self.run.own_message.get(&mid).cloned();
                if let Some(f) = self.tag_error(ty, &tag, existing.as_ref(), "message", &mid) {
                    return out.push(f);
                }
                if self.track(out, ty, 2 * mid.len() + tag.as_ref().map_or(0, String::len)) {
                    self.run.text.insert(mid.clone());
                    if existing.is_none() {
                        self.run.own_message.insert(mid, tag);
                    }
                }
            }
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" => {
                let mid = id("messageId");
                if !self.run.text.contains(&mid) && !self.run.over {
                    return out.push(at(
                        self,
                        "text.pairing",
                        format!("{ty} for '{mid}', no text message open under that id"),
                    ));
                }
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_message.get(&mid), "message", &mid) {
                    return out.push(f);
                }
                if ty == "TEXT_MESSAGE_END" {
                    self.run.text.remove(&mid);
                }
            }
            "TOOL_CALL_START" => {
                let tid = id("toolCallId");
                if self.run.tools.contains(&tid) {
                    return out.push(at(
                        self,
                        "tool.pairing",
                        format!("TOOL_CALL_START for '{tid}', a tool call already open"),
                    ));
                }
                let mut inherited: Option<Owner> = None;
                if let Some(parent) = s(ev, "parentMessageId") {
                    if let Some(po) = self.run.own_message.get(parent) {
                        if tag.is_some() && tag != *po {
                            let m = format!(
                                "TOOL_CALL_START '{tid}' has subagentRunId {}, but its parent message '{parent}' belongs to {}",
                                owner_name(&tag),
                                owner_name(po)
                            );
                            return out.push(at(self, "subagent.owner", m));
                        }
                        inherited = Some(po.clone());
                    }
                }
                let existing = self.run.own_tool.get(&tid).cloned();
                if let Some(ex) = &existing {
                    if let Some(f) = self.tag_error(ty, &tag, Some(ex), "tool call", &tid) {
                        return out.push(f);
                    }
                    if tag.is_none() && inherited.as_ref().is_some_and(|i| i != ex) {
                        let m = format!(
                            "tool call '{tid}' belongs to {} but its parent message to another owner",
                            owner_name(ex)
                        );
                        return out.push(at(self, "subagent.owner", m));
                    }
                }
                if self.track(out, ty, 2 * tid.len() + tag.as_ref().map_or(0, String::len)) {
                    self.run.tools.insert(tid.clone());
                    if existing.is_none() {
                        let o = if tag.is_some() { tag } else { inherited.unwrap_or(None) };
                        self.run.own_tool.insert(tid, o);
                    }
                }
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let tid = id("toolCallId");
                if !self.run.tools.contains(&tid) && !self.run.over {
                    return out.push(at(
                        self,
                        "tool.pairing",
                        format!("{ty} for '{tid}', no tool call open under that id"),
                    ));
                }
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_tool.get(&tid), "tool call", &tid) {
                    return out.push(f);
                }
                if ty == "TOOL_CALL_END" {
                    self.run.tools.remove(&tid);
                }
            }
            "TOOL_CALL_RESULT" => {
                // It mints a tool message: its id is on record, the newest minter owning it.
                let mid = id("messageId");
                if self.run.own_message.contains_key(&mid)
                    || self.track(out, ty, mid.len() + tag.as_ref().map_or(0, String::len))
                {
                    self.run.own_message.insert(mid, tag);
                }
            }
            "STEP_STARTED" => {
                let name = id("stepName");
                if self.run.steps.get(&tag).is_some_and(|n| n.contains(&name)) {
                    return out.push(at(
                        self,
                        "step.pairing",
                        format!("step {name:?} is already open for {}", owner_name(&tag)),
                    ));
                }
                if self.track(out, ty, name.len() + tag.as_ref().map_or(0, String::len)) {
                    self.run.steps.entry(tag).or_default().insert(name);
                }
            }
            "STEP_FINISHED" => {
                let name = id("stepName");
                if !self.run.steps.get_mut(&tag).is_some_and(|n| n.remove(&name)) {
                    let other =
                        self.run.steps.iter().find(|(o, n)| **o != tag && n.contains(&name)).map(|(o, _)| o.clone());
                    let m = match other {
                        Some(o) => format!(
                            "STEP_FINISHED for {name:?} attributed to {}, but the step is open under {}: a step is finished by whoever started it",
                            owner_name(&tag),
                            owner_name(&o)
                        ),
                        None => format!("STEP_FINISHED for {name:?}, a step that was not started"),
                    };
                    out.push(at(self, "step.pairing", m));
                }
            }
            "ACTIVITY_SNAPSHOT" => {
                let mid = id("messageId");
                let new = !self.run.own_activity.contains_key(&mid);
                let cost = mid.len() + tag.as_ref().map_or(0, String::len);
                if (!new && ev.get("replace") != Some(&Value::Bool(false))) || (new && self.track(out, ty, cost)) {
                    self.run.own_activity.insert(mid, tag);
                }
            }
            "ACTIVITY_DELTA" => {
                let mid = id("messageId");
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_activity.get(&mid), "activity", &mid) {
                    out.push(f);
                }
            }
            "REASONING_START" | "REASONING_MESSAGE_START" => {
                let mid = id("messageId");
                let span = ty == "REASONING_START";
                let open = if span { &self.run.spans } else { &self.run.reasoning };
                if open.contains(&mid) {
                    let what = if span { "reasoning span" } else { "reasoning message" };
                    return out.push(at(self, "reasoning.pairing", format!("{ty} for '{mid}', a {what} already open")));
                }
                let existing = self.run.own_reasoning.get(&mid).cloned();
                if let Some(f) = self.tag_error(ty, &tag, existing.as_ref(), "reasoning message", &mid) {
                    return out.push(f);
                }
                if self.track(out, ty, 2 * mid.len() + tag.as_ref().map_or(0, String::len)) {
                    if span { &mut self.run.spans } else { &mut self.run.reasoning }.insert(mid.clone());
                    if existing.is_none() {
                        self.run.own_reasoning.insert(mid, tag);
                    }
                }
            }
            "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" | "REASONING_END" => {
                let mid = id("messageId");
                let span = ty == "REASONING_END";
                let open = if span { &self.run.spans } else { &self.run.reasoning };
                if !open.contains(&mid) && !self.run.over {
                    let what = if span { "reasoning span" } else { "reasoning message" };
                    return out.push(at(
                        self,
                        "reasoning.pairing",
                        format!("{ty} for '{mid}', no {what} open under that id"),
                    ));
                }
                if let Some(f) = self.tag_error(ty, &tag, self.run.own_reasoning.get(&mid), "reasoning message", &mid) {
                    return out.push(f);
                }
                if ty != "REASONING_MESSAGE_CONTENT" {
                    if span { &mut self.run.spans } else { &mut self.run.reasoning }.remove(&mid);
                }
            }
            "REASONING_ENCRYPTED_VALUE" => {
                let eid = id("entityId");
                let owner = match s(ev, "subtype") {
                    Some("tool-call") => self.run.own_tool.get(&eid),
                    _ => self.run.own_message.get(&eid).or_else(|| self.run.own_reasoning.get(&eid)),
                };
                if let Some(f) = self.tag_error(ty, &tag, owner, "entity", &eid) {
                    out.push(f);
                }
            }
            "SUBAGENT_STARTED" => {
                let sid = id("subagentRunId");
                if self.run.subagents.contains(&sid) {
                    return out.push(at(
                        self,
                        "subagent.pairing",
                        format!("SUBAGENT_STARTED for '{sid}', a subagent already active"),
                    ));
                }
                if self.run.closed_subagents.contains(&sid) {
                    return out.push(at(
                        self,
                        "subagent.pairing",
                        format!(
                            "SUBAGENT_STARTED for '{sid}', which already finished in this run: ids are per invocation"
                        ),
                    ));
                }
                if let Some(p) = s(ev, "parentSubagentRunId") {
                    if !self.run.subagents.contains(p) && !self.run.closed_subagents.contains(p) {
                        return out.push(at(
                            self,
                            "subagent.pairing",
                            format!(
                                "SUBAGENT_STARTED '{sid}' names parentSubagentRunId '{p}', not started in this run"
                            ),
                        ));
                    }
                }
                if self.run.tagged.contains(&sid) {
                    out.push(at(
                        self,
                        "subagent.announce-late",
                        format!("SUBAGENT_STARTED for '{sid}' after events already attributed to it"),
                    ));
                }
                if self.track(out, ty, sid.len()) {
                    self.run.subagents.insert(sid);
                }
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let sid = id("subagentRunId");
                if !self.run.subagents.remove(&sid) {
                    return out.push(at(
                        self,
                        "subagent.pairing",
                        format!("{ty} for '{sid}', no subagent active under that id"),
                    ));
                }
                let outcome = ev.get("outcome");
                if outcome.and_then(|o| o.get("type")).and_then(Value::as_str) == Some("suspended") {
                    let ids: Vec<String> = outcome
                        .and_then(|o| o.get("interruptIds"))
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                        .unwrap_or_default();
                    let cost = sid.len() + ids.iter().map(|i| i.len() + ENTRY).sum::<usize>();
                    if self.track(out, ty, cost) {
                        self.run.suspended.push((sid.clone(), ids));
                    }
                }
                self.run.closed_subagents.insert(sid);
            }
            "MESSAGES_SNAPSHOT" => self.seed_owners(ev.get("messages"), true, out, ty),
            "STATE_SNAPSHOT" => self.set_state(ev.get("snapshot").cloned().unwrap_or(Value::Null)),
            "STATE_DELTA" => {
                let (Some(st), Some(delta)) = (&self.state, ev.get("delta").and_then(Value::as_array)) else { return };
                match patch::apply(st, delta) {
                    Ok(next) => {
                        self.state_bytes += serde_json::to_string(delta).map_or(0, |d| d.len());
                        self.state = Some(next);
                        if self.state_bytes > MAX_STATE {
                            self.state = None;
                            if !self.limit_reported {
                                self.limit_reported = true;
                                out.push(at(
                                    self,
                                    "limit.tracking",
                                    "over 64 MiB of state: later deltas go unchecked".into(),
                                ));
                            }
                        }
                    }
                    Err(e) => out.push(at(
                        self,
                        "state.delta-applies",
                        format!("the patch does not apply to the state (the client warns and skips it): {e}"),
                    )),
                }
            }
            _ => {}
        }
    }
}
