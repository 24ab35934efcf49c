//! What the translator keeps open per agent ([`Slots`]) and per subagent
//! ([`OpenSub`]): an AG-UI 1.0 subagent per events/v1 invocation
//! (`parent`), opened with `SUBAGENT_STARTED` before its first event and
//! ended (`SUBAGENT_FINISHED` / `SUBAGENT_ERROR`) when its spawning call
//! returns, its turn ends, or the run stops. A leaf: the translator
//! (mod.rs) holds these and opens and ends the subagents.

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

/// How the subagents still open end (see `Translator::end_subs`).
pub(super) enum SubEnd<'a> {
    Success,
    Error(&'a str, &'a str),
}

/// What one agent (the main one, or one subagent) has open between events.
#[derive(Debug, Default)]
pub(super) struct Slots {
    /// Namespaced id of the open text message.
    pub(super) text: Option<String>,
    /// Namespaced id of the open reasoning span (and its message: same id).
    pub(super) reasoning: Option<String>,
    /// Last text message of the current turn, the default tool-call parent.
    pub(super) turn_text: Option<String>,
}

/// The first non-empty line of `text` (at most 200 characters), else `fallback`:
/// a subagent error's message, from its call's output or its run's end.
pub(super) fn first_line(text: &str, fallback: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or(fallback);
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}
