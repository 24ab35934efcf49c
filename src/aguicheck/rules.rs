//! The rules agui-check applies, each with where it comes from
//! (`man/agui-check.1` lists the same).

/// One rule: its id, where it comes from, and what it asks.
pub struct Rule {
    pub id: &'static str,
    pub spec: &'static str,
    pub what: &'static str,
}

pub(super) const VERIFY: &str = "@ag-ui/client 1.0.0 verifyEvents (src/verify/verify.ts)";

/// Every rule agui-check applies; `man/agui-check.1` lists the same.
pub const RULES: &[Rule] = &[
    Rule {
        id: "framing.crlf",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (a producer MUST frame the stream with LF); @ag-ui/client 1.0.0 src/transform/sse.ts splits frames on \"\\n\\n\" only",
        what: "a CR byte in an SSE stream",
    },
    Rule {
        id: "framing.not-json",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (each data payload is exactly one protocol event as a JSON object); @ag-ui/client 1.0.0 src/transform/sse.ts (JSON.parse of a frame fails the run)",
        what: "a frame's data (or a line of JSON lines) is not JSON",
    },
    Rule {
        id: "framing.not-object",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (each data payload is exactly one protocol event as a JSON object)",
        what: "a payload is JSON but not an object",
    },
    Rule {
        id: "framing.too-large",
        spec: "@ag-ui/client 1.0.0 src/transform/sse.ts (MAX_BUFFER_SIZE, 10 MiB: a longer frame fails the stream)",
        what: "a frame or line over 10 MiB",
    },
    Rule {
        id: "framing.unterminated",
        spec: "WHATWG HTML, Server-sent events, Interpreting an event stream (an event is dispatched at a blank line; at the end of the stream an unfinished one is discarded)",
        what: "the stream ends inside a frame (data lines with no blank line after them)",
    },
    Rule {
        id: "framing.id",
        spec: "WHATWG HTML, Server-sent events, Processing the field (an id containing U+0000 is ignored)",
        what: "an id: field holding a NUL character",
    },
    Rule {
        id: "schema.unknown-type",
        spec: "@ag-ui/core 1.0.0 EventType; @ag-ui/client 1.0.0 src/enforce/enforce.ts (an unknown type is dropped with a warning) and src/middleware/compatibility-boundary.ts (THINKING_* translated with a warning); AG-UI 1.0 spec, Processing",
        what: "an event type @ag-ui/core 1.0.0 does not define",
    },
    Rule {
        id: "schema.field",
        spec: "@ag-ui/core 1.0.0 EventSchemas (dist/schemas.mjs); @ag-ui/client 1.0.0 src/enforce/enforce.ts (a malformed known field is fatal); AG-UI 1.0 spec, The event model (absent means absent, never null)",
        what: "a required field missing, or a field of the wrong type or value (null included)",
    },
    Rule {
        id: "schema.unknown-key",
        spec: "@ag-ui/core 1.0.0 EventSchemas; @ag-ui/client 1.0.0 src/enforce/strip.ts (an unknown key is stripped with a warning)",
        what: "a key the event's (or a nested object's) schema does not name",
    },
    Rule {
        id: "schema.unknown-member",
        spec: "@ag-ui/core 1.0.0 EventSchemas (discriminated unions); @ag-ui/client 1.0.0 src/enforce/strip.ts (an unrecognised member is dropped with a warning); AG-UI 1.0 spec, Runs and Steps (a producer MUST NOT send an outcome value the schema does not describe)",
        what: "an outcome, message role, content part or patch op the schema does not name",
    },
    Rule {
        id: "run.first",
        spec: "AG-UI 1.0 spec, Runs and Steps, The run (a stream MUST begin with RUN_STARTED or RUN_ERROR); VERIFY",
        what: "the first event is neither RUN_STARTED nor RUN_ERROR",
    },
    Rule {
        id: "run.after-close",
        spec: "AG-UI 1.0 spec, Runs and Steps, After a run closes; VERIFY",
        what: "an event after RUN_FINISHED other than RUN_STARTED or RUN_ERROR, or after RUN_ERROR other than RUN_STARTED",
    },
    Rule {
        id: "run.nested",
        spec: "AG-UI 1.0 spec, Runs and Steps, Several runs on one stream (a RUN_STARTED while a run is active is a violation); VERIFY",
        what: "RUN_STARTED while a run is active",
    },
    Rule {
        id: "run.open-at-finish",
        spec: "AG-UI 1.0 spec, Runs and Steps (RUN_FINISHED requires everything the run opened to be closed), Subagents, Termination; VERIFY",
        what: "RUN_FINISHED with a text message, tool call, reasoning message or span, step or subagent still open",
    },
    Rule {
        id: "run.unterminated",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE (the producer closes the body after the last run's terminal event; a drop without one is a truncated run); runwire conformance/README.md check 4 (terminal)",
        what: "the stream ends with a run still active, or with no run at all",
    },
    Rule {
        id: "run.one-run",
        spec: "runwire conformance/README.md check 4 (exactly one RUN_FINISHED or RUN_ERROR, and it is the last event): only with --one-run",
        what: "more than one terminal event, or anything after the first one",
    },
    Rule {
        id: "run.protocol-version",
        spec: "AG-UI 1.0 spec, Versioning and Compatibility, Version negotiation (an implementation of this version MUST send its declaration, RUN_STARTED.protocolVersion; each replayed run declares its own, so only the last run's is required; a value outside the MAJOR.MINOR grammar is handled like a newer one); @ag-ui/client 1.0.0 src/agent/agent.ts (compareDeclaredProtocol: a warning for a declaration not /^\\d+\\.\\d+$/ or newer than 1.0)",
        what: "the stream's last RUN_STARTED declares no protocolVersion, or a RUN_STARTED declares one that is not MAJOR.MINOR (\"1.0.0\", \"\") or is newer than 1.0 (\"2.0\")",
    },
    Rule {
        id: "run.ids",
        spec: "AG-UI 1.0 spec, Runs and Steps (RUN_FINISHED closes the run RUN_STARTED opened) and Transports: HTTP + SSE (the requested run comes last, after any replayed runs); runwire conformance/live.mjs",
        what: "RUN_FINISHED names another threadId/runId than its RUN_STARTED; with --url, the last run is not the requested one",
    },
    Rule {
        id: "text.pairing",
        spec: "AG-UI 1.0 spec, Text messages and Streaming pattern; VERIFY (TEXT_MESSAGE_START/CONTENT/END)",
        what: "TEXT_MESSAGE_START for an open id, or CONTENT/END for an id not open",
    },
    Rule {
        id: "tool.pairing",
        spec: "AG-UI 1.0 spec, Tool calls; VERIFY (TOOL_CALL_START/ARGS/END)",
        what: "TOOL_CALL_START for an open id, or ARGS/END for an id not open",
    },
    Rule {
        id: "reasoning.pairing",
        spec: "AG-UI 1.0 spec, Reasoning; VERIFY (REASONING_START/END spans, REASONING_MESSAGE_START/CONTENT/END messages)",
        what: "a reasoning span or message opened twice, or continued or closed while not open",
    },
    Rule {
        id: "step.pairing",
        spec: "AG-UI 1.0 spec, Runs and Steps, Steps, and Subagents, Ownership (steps are per owner); VERIFY",
        what: "STEP_STARTED for a step its owner has open, or STEP_FINISHED for one its owner has not",
    },
    Rule {
        id: "chunk.sequence",
        spec: "AG-UI 1.0 spec, Streaming pattern (first chunks carry what opening requires; a conflicting continuation is fatal); @ag-ui/client 1.0.0 src/chunks/transform.ts",
        what: "a first *_CHUNK without its id (or tool name), a continuation that contradicts its opener, or an ambiguous untagged chunk",
    },
    Rule {
        id: "subagent.pairing",
        spec: "AG-UI 1.0 spec, Subagents, Lifecycle and Nesting; VERIFY (SUBAGENT_STARTED/FINISHED/ERROR)",
        what: "SUBAGENT_STARTED for an active or finished id or under a parent never started, or FINISHED/ERROR for an id not active",
    },
    Rule {
        id: "subagent.owner",
        spec: "AG-UI 1.0 spec, Subagents, Ownership (a continuation MUST agree with its opener; a tool call belongs to its message's owner); VERIFY",
        what: "a subagentRunId that disagrees with the owner of the message, tool call, reasoning or activity it continues",
    },
    Rule {
        id: "subagent.announce-late",
        spec: "AG-UI 1.0 spec, Subagents, Lifecycle (an announced invocation MUST be announced before any event attributed to it)",
        what: "SUBAGENT_STARTED after an event of the same run already carried its subagentRunId",
    },
    Rule {
        id: "message.held",
        spec: "AG-UI 1.0 spec, State, MESSAGES_SNAPSHOT (a held message absent from the snapshot is dropped); @ag-ui/client 1.0.0 src/apply/default.ts (\"No message found\", \"No tool call found\" warnings; an ACTIVITY_SNAPSHOT replaces the message under its id, whatever its kind)",
        what: "a text or reasoning CONTENT/END, or a TOOL_CALL_ARGS/END, for a message or call a MESSAGES_SNAPSHOT (or an ACTIVITY_SNAPSHOT replacing the call's message) has since dropped from the client",
    },
    Rule {
        id: "message.role",
        spec: "@ag-ui/client 1.0.0 src/apply/default.ts (its warnings: message ids are unique across activity, text and reasoning messages; a tool call's parentMessageId names an assistant message; a restarted call keeps its name)",
        what: "a text or reasoning event on an activity message's id (an ACTIVITY_SNAPSHOT over a message makes it one), ACTIVITY_DELTA on another kind of message, a TOOL_CALL_START under a non-assistant parent message (the first message under an id is the one the client finds: a tool message sharing an assistant message's id goes after it), or one renaming a call the client holds",
    },
    Rule {
        id: "state.delta-applies",
        spec: "AG-UI 1.0 spec, State, STATE_DELTA (the baseline is the input's state, then what the run's snapshots and deltas made of it) and Snapshots pattern (a patch that does not apply is warned about and skipped); @ag-ui/client 1.0.0 src/apply/default.ts (\"Failed to apply state patch\")",
        what: "a STATE_DELTA that does not apply to the state it amends, when that state is known (a STATE_SNAPSHOT, RUN_STARTED.input.state, or the state --url posted)",
    },
    Rule {
        id: "activity.delta-applies",
        spec: "@ag-ui/client 1.0.0 src/apply/default.ts (ACTIVITY_DELTA applies its patch to the activity message's content, as snapshots and earlier deltas made it, with fast-json-patch; \"Failed to apply activity patch\": warned about and skipped)",
        what: "an ACTIVITY_DELTA whose patch does not apply to the activity's content as the snapshots and earlier deltas made it",
    },
    Rule {
        id: "interrupt.id-unique",
        spec: "AG-UI 1.0 spec, Interrupts and Resume, Interrupting (each interrupt's id MUST be unique within the run)",
        what: "two interrupts of one RUN_FINISHED outcome with the same id",
    },
    Rule {
        id: "interrupt.suspended",
        spec: "@ag-ui/core 1.0.0 SubagentFinishedSuspendedOutcome (interruptIds: the run-level interrupts this subagent raised itself); AG-UI 1.0 spec, Subagents (a suspended invocation is paused awaiting outside input) and Interrupts and Resume (a producer MUST NOT report an interrupted run as success)",
        what: "a SUBAGENT_FINISHED suspended in a run that does not end with the interrupt outcome, or whose interruptIds name no interrupt of that outcome raised by the subagent",
    },
    Rule {
        id: "http.response",
        spec: "AG-UI 1.0 spec, Transports: HTTP + SSE, Response (a run that starts answers 200 with Content-Type: text/event-stream)",
        what: "with --url: a status other than 200, or another Content-Type",
    },
    Rule {
        id: "limit.tracking",
        spec: "agui-check's own bound (memory stays bounded whatever the input)",
        what: "over 32 MiB of ids tracked in one run, over 24 MiB of the client's messages and tool calls modelled (the oldest forgotten), over 8 MiB of one activity's content, or over 64 MiB of state: what goes unrecorded goes unchecked",
    },
];

/// The rule named `id` (every id agui-check reports is in [`RULES`]).
pub fn rule(id: &str) -> &'static Rule {
    RULES.iter().find(|r| r.id == id).unwrap_or(&RULES[RULES.len() - 1])
}
