//! The AG-UI 1.0 events the translator writes, and the values of its
//! `CUSTOM` events: typed, camelCase on the wire, never a `null`.

use crate::pipeline::events::{Event, Usage};
use serde::Serialize;

/// AG-UI `TokenUsage`: every field optional, camelCase on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// `inputTokens + outputTokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
}

impl TokenUsage {
    pub(super) fn from_usage(u: &Usage) -> TokenUsage {
        TokenUsage {
            input_tokens: Some(u.input_tokens),
            output_tokens: Some(u.output_tokens),
            cached_input_tokens: u.cached_input_tokens,
            cache_write_input_tokens: u.cache_write_input_tokens,
            reasoning_tokens: u.reasoning_tokens,
            total_tokens: Some(u.input_tokens.saturating_add(u.output_tokens)),
        }
    }

    /// Sums field by field; a field stays absent only if absent on both sides.
    pub(super) fn add(&mut self, o: &TokenUsage) {
        fn sum(a: &mut Option<u64>, b: Option<u64>) {
            *a = match (*a, b) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
            };
        }
        sum(&mut self.input_tokens, o.input_tokens);
        sum(&mut self.output_tokens, o.output_tokens);
        sum(&mut self.cached_input_tokens, o.cached_input_tokens);
        sum(&mut self.cache_write_input_tokens, o.cache_write_input_tokens);
        sum(&mut self.reasoning_tokens, o.reasoning_tokens);
        sum(&mut self.total_tokens, o.total_tokens);
    }
}

/// One AG-UI 1.0 event, serialized as the client expects: `type` in
/// SCREAMING_SNAKE, camelCase keys, optional fields omitted (never `null`),
/// `timestamp` in integer epoch milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE", rename_all_fields = "camelCase")]
pub enum AguiEvent {
    RunStarted {
        thread_id: String,
        run_id: String,
        protocol_version: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    RunFinished {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
        /// Absent means success (what the pipeline always writes); the server
        /// sets it for interrupted and cancelled runs.
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<RunOutcome>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    /// No `threadId`/`runId`: the client strips them from `RUN_ERROR` with a warning.
    RunError {
        message: String,
        code: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    TextMessageStart {
        message_id: String,
        role: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    TextMessageContent {
        message_id: String,
        delta: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    TextMessageEnd {
        message_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ReasoningStart {
        message_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ReasoningMessageStart {
        message_id: String,
        role: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ReasoningMessageContent {
        message_id: String,
        delta: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ReasoningMessageEnd {
        message_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ReasoningEnd {
        message_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ToolCallEnd {
        tool_call_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: String,
        role: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    Custom {
        name: &'static str,
        value: CustomValue,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    /// A subagent invocation begins: everything it produces afterwards
    /// carries its `subagentRunId`.
    SubagentStarted {
        subagent_run_id: String,
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    /// The invocation's segment of this run ended: its work is done, or it
    /// waits on the run's interrupts (`suspended`).
    SubagentFinished {
        subagent_run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<SubagentOutcome>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    /// The invocation failed (or was cut off with its run).
    SubagentError {
        subagent_run_id: String,
        message: String,
        code: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    /// An events/v1 `custom` event, passed through: also `CUSTOM` on the wire.
    #[serde(rename = "CUSTOM")]
    Passthrough {
        name: String,
        value: serde_json::Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
}

impl AguiEvent {
    /// Compact JSON, one line, no trailing newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("AG-UI events serialize infallibly")
    }

    /// The event as one SSE frame (`data: JSON`), written from the typed
    /// event: compact JSON has no raw CR or LF, so nothing is re-parsed.
    pub fn to_frame(&self) -> String {
        crate::pipeline::encode::frame(None, None, &self.to_json())
    }

    /// True for `RUN_FINISHED` and `RUN_ERROR`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, AguiEvent::RunFinished { .. } | AguiEvent::RunError { .. })
    }
}

/// `RUN_FINISHED.outcome` other than success: the run stopped to ask
/// (`interrupts` are AG-UI `Interrupt` objects, at least one), or it was
/// stopped by whoever ran it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RunOutcome {
    Interrupt { interrupts: Vec<serde_json::Value> },
    Cancelled,
}

/// `SUBAGENT_FINISHED.outcome`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase", rename_all_fields = "camelCase")]
pub enum SubagentOutcome {
    Success,
    Suspended {
        #[serde(skip_serializing_if = "Option::is_none")]
        interrupt_ids: Option<Vec<String>>,
    },
}

/// Ids to use instead of the derived defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TranslateOptions {
    pub thread_id: Option<String>,
    pub run_id: Option<String>,
}

/// Parses one raw input line as an `events/v1` record.
pub fn parse_line(line: &[u8]) -> Result<Event, String> {
    Event::parse(line)
}

/// An agent's own fields as AG-UI carries values: keys in camelCase
/// (`elapsed_time_seconds` → `elapsedTimeSeconds`), no `null` anywhere
/// (a null field or element is left out), like every other runwire event.
pub fn wire_value(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    fn camel(k: &str) -> String {
        let mut out = String::with_capacity(k.len());
        let mut up = false;
        for c in k.chars() {
            if !c.is_ascii_alphanumeric() {
                up = !out.is_empty();
            } else if up {
                out.push(c.to_ascii_uppercase());
                up = false;
            } else if out.is_empty() {
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        if out.starts_with(|c: char| c.is_ascii_digit()) || out.is_empty() {
            out.insert(0, 'k');
        }
        out
    }
    match v {
        Value::Object(o) => {
            Value::Object(o.iter().filter(|(_, x)| !x.is_null()).map(|(k, x)| (camel(k), wire_value(x))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().filter(|x| !x.is_null()).map(wire_value).collect()),
        other => other.clone(),
    }
}

/// The `value` of a `CUSTOM` event: typed so that no `null` can slip in and
/// keys keep their declared order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CustomValue {
    /// `runwire.tool_result`: the status the UI shows on the tool card.
    ToolResult(ToolResultValue),
    /// `runwire.turn_start`.
    TurnStart(TurnStartValue),
    /// `runwire.turn_end`.
    TurnEnd(TurnEndValue),
    /// `runwire.error` (a non-fatal error; the run goes on).
    Error(ErrorValue),
    /// Any other `runwire.*` value (the server's warnings about resume
    /// entries, for one); the caller keeps it free of `null`.
    Json(serde_json::Value),
    /// `runwire.input_request`: the agent waits for a person (the
    /// `input_request` data as is). Plain translation has no interrupt to
    /// end the run with: the server's interactive runs do that.
    InputRequest(crate::pipeline::events::InputRequest),
    /// `runwire.input_answer`: the request was answered or closed.
    InputAnswer(crate::pipeline::events::InputAnswer),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultValue {
    pub tool_call_id: String,
    pub is_error: bool,
    pub truncated: bool,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartValue {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEndValue {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_turns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorValue {
    pub reason: String,
    pub code: String,
    pub raw: String,
}
