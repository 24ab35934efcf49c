//! Event shapes of `@ag-ui/core` 1.0.0, restated from its generated zod
//! schemas (`dist/schemas.mjs`, `EventSchema`) and read the way the official
//! client's enforcement stage reads them (`@ag-ui/client` 1.0.0,
//! `src/enforce/strip.ts`): a malformed value on a described field is fatal
//! (`schema.field`); an unknown key on a described object, or a union member
//! the schema does not name, is stripped with a warning (`schema.unknown-key`,
//! `schema.unknown-member`); an event type the protocol does not know is
//! dropped with a warning (`schema.unknown-type`). Every one of them is a
//! finding: a producer must not send what a conforming consumer has to repair.

use serde_json::{Map, Value};

/// JavaScript's safe integer range, `z.int()`'s bounds.
const SAFE: f64 = 9_007_199_254_740_991.0;

/// What a field holds.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    /// `z.int()`: a number with no fraction, within the safe range.
    Int,
    /// `z.int().min(0)`.
    Count,
    Bool,
    /// `z.any().refine(v => v !== undefined)`: present, null allowed.
    Any,
    /// `z.any().refine(v => v !== null)`: any value but null.
    NonNull,
    /// `MetadataSchema` and the other `z.custom` objects: an object, never null
    /// or an array; its insides are opaque.
    OpaqueObject,
    Literal(&'static str),
    Enum(&'static [&'static str]),
    /// RFC 6901 pointer: `^(/([^/~]|~[01])*)*$`.
    Pointer,
    Obj(&'static Shape),
    Arr(&'static Ty),
    /// At least one element.
    NonEmptyArr(&'static Ty),
    /// A discriminated union: the key, and one shape per tag.
    Union(&'static str, &'static [(&'static str, &'static Shape)]),
    /// `string | ContentPart[]`.
    StrOrParts,
}

/// An object's fields; `open` is `specOpen` (the RFC 6902 operations keep
/// members they do not define).
struct Shape {
    fields: &'static [(&'static str, Ty, bool)],
    open: bool,
}

const fn shape(fields: &'static [(&'static str, Ty, bool)]) -> Shape {
    Shape { fields, open: false }
}

const REQ: bool = true;
const OPT: bool = false;

// Content parts (`ContentPartSchema`, `PartSourceSchema`).
static DATA_SOURCE: Shape =
    shape(&[("type", Ty::Literal("data"), REQ), ("value", Ty::Str, REQ), ("mimeType", Ty::Str, REQ)]);
static URL_SOURCE: Shape =
    shape(&[("type", Ty::Literal("url"), REQ), ("value", Ty::Str, REQ), ("mimeType", Ty::Str, OPT)]);
static FILE_SOURCE: Shape = shape(&[
    ("type", Ty::Literal("file"), REQ),
    ("value", Ty::Str, REQ),
    ("provider", Ty::Str, OPT),
    ("mimeType", Ty::Str, OPT),
]);
const SOURCE: Ty = Ty::Union("type", &[("data", &DATA_SOURCE), ("url", &URL_SOURCE), ("file", &FILE_SOURCE)]);
static TEXT_PART: Shape = shape(&[
    ("type", Ty::Literal("text"), REQ),
    ("id", Ty::Str, OPT),
    ("text", Ty::Str, REQ),
    ("metadata", Ty::NonNull, OPT),
]);
macro_rules! media_part {
    ($name:ident, $tag:literal) => {
        static $name: Shape = shape(&[
            ("type", Ty::Literal($tag), REQ),
            ("id", Ty::Str, OPT),
            ("source", SOURCE, REQ),
            ("metadata", Ty::NonNull, OPT),
        ]);
    };
}
media_part!(IMAGE_PART, "image");
media_part!(AUDIO_PART, "audio");
media_part!(VIDEO_PART, "video");
media_part!(DOCUMENT_PART, "document");
const PART: Ty = Ty::Union(
    "type",
    &[
        ("text", &TEXT_PART),
        ("image", &IMAGE_PART),
        ("audio", &AUDIO_PART),
        ("video", &VIDEO_PART),
        ("document", &DOCUMENT_PART),
    ],
);

// JSON Patch (`JsonPatchSchema`), spec-open operations.
static OP_ADD: Shape = Shape {
    fields: &[("op", Ty::Literal("add"), REQ), ("path", Ty::Pointer, REQ), ("value", Ty::Any, REQ)],
    open: true,
};
static OP_REMOVE: Shape =
    Shape { fields: &[("op", Ty::Literal("remove"), REQ), ("path", Ty::Pointer, REQ)], open: true };
static OP_REPLACE: Shape = Shape {
    fields: &[("op", Ty::Literal("replace"), REQ), ("path", Ty::Pointer, REQ), ("value", Ty::Any, REQ)],
    open: true,
};
static OP_MOVE: Shape = Shape {
    fields: &[("op", Ty::Literal("move"), REQ), ("from", Ty::Pointer, REQ), ("path", Ty::Pointer, REQ)],
    open: true,
};
static OP_COPY: Shape = Shape {
    fields: &[("op", Ty::Literal("copy"), REQ), ("from", Ty::Pointer, REQ), ("path", Ty::Pointer, REQ)],
    open: true,
};
static OP_TEST: Shape = Shape {
    fields: &[("op", Ty::Literal("test"), REQ), ("path", Ty::Pointer, REQ), ("value", Ty::Any, REQ)],
    open: true,
};
const OP: Ty = Ty::Union(
    "op",
    &[
        ("add", &OP_ADD),
        ("remove", &OP_REMOVE),
        ("replace", &OP_REPLACE),
        ("move", &OP_MOVE),
        ("copy", &OP_COPY),
        ("test", &OP_TEST),
    ],
);
const PATCH: Ty = Ty::Arr(&OP);

// Messages (`MessageSchema`).
static FUNCTION_CALL: Shape = shape(&[("name", Ty::Str, REQ), ("arguments", Ty::Str, REQ)]);
static TOOL_CALL: Shape = shape(&[
    ("id", Ty::Str, REQ),
    ("type", Ty::Literal("function"), REQ),
    ("function", Ty::Obj(&FUNCTION_CALL), REQ),
    ("encryptedValue", Ty::Str, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
]);
macro_rules! plain_message {
    ($name:ident, $role:literal) => {
        static $name: Shape = shape(&[
            ("subagentRunId", Ty::Str, OPT),
            ("id", Ty::Str, REQ),
            ("role", Ty::Literal($role), REQ),
            ("name", Ty::Str, OPT),
            ("encryptedValue", Ty::Str, OPT),
            ("metadata", Ty::OpaqueObject, OPT),
            ("content", Ty::Str, REQ),
        ]);
    };
}
plain_message!(DEVELOPER_MESSAGE, "developer");
plain_message!(SYSTEM_MESSAGE, "system");
static ASSISTANT_MESSAGE: Shape = shape(&[
    ("subagentRunId", Ty::Str, OPT),
    ("id", Ty::Str, REQ),
    ("role", Ty::Literal("assistant"), REQ),
    ("name", Ty::Str, OPT),
    ("encryptedValue", Ty::Str, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
    ("content", Ty::Str, OPT),
    ("toolCalls", Ty::Arr(&Ty::Obj(&TOOL_CALL)), OPT),
]);
static USER_MESSAGE: Shape = shape(&[
    ("subagentRunId", Ty::Str, OPT),
    ("id", Ty::Str, REQ),
    ("role", Ty::Literal("user"), REQ),
    ("name", Ty::Str, OPT),
    ("encryptedValue", Ty::Str, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
    ("content", Ty::StrOrParts, REQ),
]);
static TOOL_MESSAGE: Shape = shape(&[
    ("subagentRunId", Ty::Str, OPT),
    ("id", Ty::Str, REQ),
    ("role", Ty::Literal("tool"), REQ),
    ("content", Ty::StrOrParts, REQ),
    ("toolCallId", Ty::Str, REQ),
    ("error", Ty::Str, OPT),
    ("encryptedValue", Ty::Str, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
]);
static ACTIVITY_MESSAGE: Shape = shape(&[
    ("subagentRunId", Ty::Str, OPT),
    ("id", Ty::Str, REQ),
    ("role", Ty::Literal("activity"), REQ),
    ("activityType", Ty::Str, REQ),
    ("content", Ty::OpaqueObject, REQ),
    ("metadata", Ty::OpaqueObject, OPT),
]);
static REASONING_MESSAGE: Shape = shape(&[
    ("subagentRunId", Ty::Str, OPT),
    ("id", Ty::Str, REQ),
    ("role", Ty::Literal("reasoning"), REQ),
    ("content", Ty::Str, REQ),
    ("encryptedValue", Ty::Str, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
]);
const MESSAGE: Ty = Ty::Union(
    "role",
    &[
        ("developer", &DEVELOPER_MESSAGE),
        ("system", &SYSTEM_MESSAGE),
        ("assistant", &ASSISTANT_MESSAGE),
        ("user", &USER_MESSAGE),
        ("tool", &TOOL_MESSAGE),
        ("activity", &ACTIVITY_MESSAGE),
        ("reasoning", &REASONING_MESSAGE),
    ],
);

// The run input (`RunAgentInputSchema`), as RUN_STARTED.input echoes it.
static TOOL: Shape = shape(&[
    ("name", Ty::Str, REQ),
    ("description", Ty::Str, REQ),
    ("parameters", Ty::NonNull, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
]);
static CONTEXT: Shape = shape(&[("description", Ty::Str, REQ), ("value", Ty::Str, REQ)]);
static RESUME_ENTRY: Shape = shape(&[
    ("interruptId", Ty::Str, REQ),
    ("status", Ty::Enum(&["resolved", "cancelled"]), REQ),
    ("payload", Ty::NonNull, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
]);
/// `state` is `StateSchema.refine(v => v !== null).nullable()`: null is read as absent.
static RUN_AGENT_INPUT: Shape = shape(&[
    ("threadId", Ty::Str, REQ),
    ("runId", Ty::Str, REQ),
    ("protocolVersion", Ty::Str, OPT),
    ("parentRunId", Ty::Str, OPT),
    ("state", Ty::Any, OPT),
    ("messages", Ty::Arr(&MESSAGE), REQ),
    ("tools", Ty::Arr(&Ty::Obj(&TOOL)), OPT),
    ("context", Ty::Arr(&Ty::Obj(&CONTEXT)), OPT),
    ("forwardedProps", Ty::NonNull, OPT),
    ("resume", Ty::Arr(&Ty::Obj(&RESUME_ENTRY)), OPT),
]);

// Outcomes.
static INTERRUPT: Shape = shape(&[
    ("subagentRunId", Ty::Str, OPT),
    ("id", Ty::Str, REQ),
    ("reason", Ty::Str, REQ),
    ("message", Ty::Str, OPT),
    ("toolCallId", Ty::Str, OPT),
    ("responseSchema", Ty::OpaqueObject, OPT),
    ("expiresAt", Ty::Str, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
]);
static OUTCOME_SUCCESS: Shape =
    shape(&[("type", Ty::Literal("success"), REQ), ("pendingToolCallIds", Ty::Arr(&Ty::Str), OPT)]);
static OUTCOME_INTERRUPT: Shape =
    shape(&[("type", Ty::Literal("interrupt"), REQ), ("interrupts", Ty::NonEmptyArr(&Ty::Obj(&INTERRUPT)), REQ)]);
static OUTCOME_CANCELLED: Shape = shape(&[("type", Ty::Literal("cancelled"), REQ)]);
static SUB_SUCCESS: Shape = shape(&[("type", Ty::Literal("success"), REQ)]);
static SUB_SUSPENDED: Shape =
    shape(&[("type", Ty::Literal("suspended"), REQ), ("interruptIds", Ty::Arr(&Ty::Str), OPT)]);
static TOKEN_USAGE: Shape = shape(&[
    ("provider", Ty::Str, OPT),
    ("model", Ty::Str, OPT),
    ("inputTokens", Ty::Count, OPT),
    ("outputTokens", Ty::Count, OPT),
    ("totalTokens", Ty::Count, OPT),
    ("reasoningTokens", Ty::Count, OPT),
    ("cachedInputTokens", Ty::Count, OPT),
    ("cacheWriteInputTokens", Ty::Count, OPT),
]);
const USAGE: Ty = Ty::Arr(&Ty::Obj(&TOKEN_USAGE));

/// The fields every event has (`BaseEventSchema`), beside its own.
const BASE: &[(&str, Ty, bool)] = &[
    ("type", Ty::Str, REQ),
    ("timestamp", Ty::Int, OPT),
    ("rawEvent", Ty::NonNull, OPT),
    ("metadata", Ty::OpaqueObject, OPT),
];
const SUB: (&str, Ty, bool) = ("subagentRunId", Ty::Str, OPT);
const TEXT_ROLE: Ty = Ty::Enum(&["developer", "system", "assistant", "user"]);

/// An object's fields: name, type, required.
type Fields = &'static [(&'static str, Ty, bool)];

/// Every event type of `EventType` and its own fields (besides [`BASE`]).
static EVENTS: &[(&str, Fields)] = &[
    ("TEXT_MESSAGE_START", &[SUB, ("messageId", Ty::Str, REQ), ("role", TEXT_ROLE, OPT), ("name", Ty::Str, OPT)]),
    ("TEXT_MESSAGE_CONTENT", &[SUB, ("messageId", Ty::Str, REQ), ("delta", Ty::Str, REQ)]),
    ("TEXT_MESSAGE_END", &[SUB, ("messageId", Ty::Str, REQ)]),
    (
        "TEXT_MESSAGE_CHUNK",
        &[SUB, ("messageId", Ty::Str, OPT), ("role", TEXT_ROLE, OPT), ("delta", Ty::Str, OPT), ("name", Ty::Str, OPT)],
    ),
    (
        "TOOL_CALL_START",
        &[SUB, ("toolCallId", Ty::Str, REQ), ("toolCallName", Ty::Str, REQ), ("parentMessageId", Ty::Str, OPT)],
    ),
    ("TOOL_CALL_ARGS", &[SUB, ("toolCallId", Ty::Str, REQ), ("delta", Ty::Str, REQ)]),
    ("TOOL_CALL_END", &[SUB, ("toolCallId", Ty::Str, REQ)]),
    (
        "TOOL_CALL_CHUNK",
        &[
            SUB,
            ("toolCallId", Ty::Str, OPT),
            ("toolCallName", Ty::Str, OPT),
            ("parentMessageId", Ty::Str, OPT),
            ("delta", Ty::Str, OPT),
        ],
    ),
    (
        "TOOL_CALL_RESULT",
        &[
            SUB,
            ("messageId", Ty::Str, REQ),
            ("toolCallId", Ty::Str, REQ),
            ("content", Ty::StrOrParts, REQ),
            ("role", Ty::Literal("tool"), OPT),
        ],
    ),
    ("STATE_SNAPSHOT", &[SUB, ("snapshot", Ty::Any, REQ)]),
    ("STATE_DELTA", &[SUB, ("delta", PATCH, REQ)]),
    ("MESSAGES_SNAPSHOT", &[("messages", Ty::Arr(&MESSAGE), REQ)]),
    (
        "ACTIVITY_SNAPSHOT",
        &[
            SUB,
            ("messageId", Ty::Str, REQ),
            ("activityType", Ty::Str, REQ),
            ("content", Ty::OpaqueObject, REQ),
            ("replace", Ty::Bool, OPT),
        ],
    ),
    ("ACTIVITY_DELTA", &[SUB, ("messageId", Ty::Str, REQ), ("activityType", Ty::Str, REQ), ("patch", PATCH, REQ)]),
    ("RAW", &[SUB, ("event", Ty::Any, REQ), ("source", Ty::Str, OPT)]),
    ("CUSTOM", &[SUB, ("name", Ty::Str, REQ), ("value", Ty::Any, REQ)]),
    (
        "RUN_STARTED",
        &[
            ("threadId", Ty::Str, REQ),
            ("runId", Ty::Str, REQ),
            ("protocolVersion", Ty::Str, OPT),
            ("parentRunId", Ty::Str, OPT),
            ("input", Ty::Obj(&RUN_AGENT_INPUT), OPT),
        ],
    ),
    (
        "RUN_FINISHED",
        &[
            ("threadId", Ty::Str, REQ),
            ("runId", Ty::Str, REQ),
            ("result", Ty::NonNull, OPT),
            (
                "outcome",
                Ty::Union(
                    "type",
                    &[
                        ("success", &OUTCOME_SUCCESS),
                        ("interrupt", &OUTCOME_INTERRUPT),
                        ("cancelled", &OUTCOME_CANCELLED),
                    ],
                ),
                OPT,
            ),
            ("usage", USAGE, OPT),
        ],
    ),
    ("RUN_ERROR", &[("message", Ty::Str, REQ), ("code", Ty::Str, OPT), ("usage", USAGE, OPT)]),
    ("STEP_STARTED", &[SUB, ("stepName", Ty::Str, REQ)]),
    ("STEP_FINISHED", &[SUB, ("stepName", Ty::Str, REQ)]),
    ("REASONING_START", &[SUB, ("messageId", Ty::Str, REQ)]),
    ("REASONING_MESSAGE_START", &[SUB, ("messageId", Ty::Str, REQ), ("role", Ty::Literal("reasoning"), REQ)]),
    ("REASONING_MESSAGE_CONTENT", &[SUB, ("messageId", Ty::Str, REQ), ("delta", Ty::Str, REQ)]),
    ("REASONING_MESSAGE_END", &[SUB, ("messageId", Ty::Str, REQ)]),
    ("REASONING_MESSAGE_CHUNK", &[SUB, ("messageId", Ty::Str, OPT), ("delta", Ty::Str, OPT)]),
    ("REASONING_END", &[SUB, ("messageId", Ty::Str, REQ)]),
    (
        "REASONING_ENCRYPTED_VALUE",
        &[
            SUB,
            ("subtype", Ty::Enum(&["tool-call", "message"]), REQ),
            ("entityId", Ty::Str, REQ),
            ("encryptedValue", Ty::Str, REQ),
        ],
    ),
    (
        "SUBAGENT_STARTED",
        &[
            ("subagentRunId", Ty::Str, REQ),
            ("name", Ty::Str, REQ),
            ("description", Ty::Str, OPT),
            ("parentSubagentRunId", Ty::Str, OPT),
            ("parentToolCallId", Ty::Str, OPT),
            ("parentMessageId", Ty::Str, OPT),
        ],
    ),
    (
        "SUBAGENT_FINISHED",
        &[
            ("subagentRunId", Ty::Str, REQ),
            ("result", Ty::NonNull, OPT),
            ("outcome", Ty::Union("type", &[("success", &SUB_SUCCESS), ("suspended", &SUB_SUSPENDED)]), OPT),
        ],
    ),
    ("SUBAGENT_ERROR", &[("subagentRunId", Ty::Str, REQ), ("message", Ty::Str, REQ), ("code", Ty::Str, OPT)]),
];

/// The 0.x event types the client's compatibility boundary still translates
/// (with a warning): `middleware/compatibility-boundary.ts`.
const RETIRED: &[&str] = &[
    "THINKING_START",
    "THINKING_END",
    "THINKING_TEXT_MESSAGE_START",
    "THINKING_TEXT_MESSAGE_CONTENT",
    "THINKING_TEXT_MESSAGE_END",
];

/// One schema problem: its rule and what, with a JSON-pointer-like path.
pub struct Problem {
    pub rule: &'static str,
    pub message: String,
}

/// Checks one event object against its type's schema; an empty list when it parses.
pub fn check_event(ev: &Map<String, Value>) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(ty) = ev.get("type") else {
        out.push(Problem { rule: "schema.field", message: "/type: required, missing".into() });
        return out;
    };
    let Some(ty) = ty.as_str() else {
        out.push(Problem { rule: "schema.field", message: format!("/type: expected a string, got {}", kind(ty)) });
        return out;
    };
    let Some((_, own)) = EVENTS.iter().find(|(t, _)| *t == ty) else {
        let why = if RETIRED.contains(&ty) {
            "a retired 0.x event: the client translates it with a deprecation warning"
        } else {
            "not an event type of @ag-ui/core 1.0.0: the client drops it with a warning"
        };
        out.push(Problem { rule: "schema.unknown-type", message: format!("{ty:?} is {why}") });
        return out;
    };
    let fields = BASE.iter().chain(own.iter());
    check_fields(ev, fields, false, "", &mut out);
    out
}

fn check_fields<'a>(
    obj: &Map<String, Value>,
    fields: impl Iterator<Item = &'a (&'static str, Ty, bool)> + Clone,
    open: bool,
    path: &str,
    out: &mut Vec<Problem>,
) {
    for (name, ty, required) in fields.clone() {
        match obj.get(*name) {
            None if *required => {
                out.push(Problem { rule: "schema.field", message: format!("{path}/{name}: required, missing") })
            }
            None => {}
            Some(v) => check(v, ty, &format!("{path}/{name}"), out),
        }
    }
    if !open {
        for k in obj.keys() {
            if !fields.clone().any(|(n, _, _)| n == k) {
                out.push(Problem {
                    rule: "schema.unknown-key",
                    message: format!("{path}/{k}: not a field of this object in @ag-ui/core 1.0.0 (the client strips it with a warning)"),
                });
            }
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn bad(path: &str, want: &str, v: &Value, out: &mut Vec<Problem>) {
    let extra = if v.is_null() { " (an absent field is omitted, never null)" } else { "" };
    out.push(Problem { rule: "schema.field", message: format!("{path}: expected {want}, got {}{extra}", kind(v)) });
}

fn is_pointer(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    if !s.starts_with('/') {
        return false;
    }
    let b = s.as_bytes();
    b.iter().enumerate().all(|(i, &c)| c != b'~' || matches!(b.get(i + 1), Some(b'0' | b'1')))
}

fn check(v: &Value, ty: &Ty, path: &str, out: &mut Vec<Problem>) {
    match ty {
        Ty::Str => {
            if !v.is_string() {
                bad(path, "a string", v, out)
            }
        }
        Ty::Int | Ty::Count => {
            let ok = v.as_f64().is_some_and(|f| {
                f.fract() == 0.0 && f <= SAFE && f >= if matches!(ty, Ty::Count) { 0.0 } else { -SAFE }
            });
            if !ok {
                let want = if matches!(ty, Ty::Count) { "a non-negative safe integer" } else { "a safe integer" };
                bad(path, want, v, out)
            }
        }
        Ty::Bool => {
            if !v.is_boolean() {
                bad(path, "a boolean", v, out)
            }
        }
        Ty::Any => {}
        Ty::NonNull => {
            if v.is_null() {
                bad(path, "any value but null", v, out)
            }
        }
        Ty::OpaqueObject => {
            if !v.is_object() {
                bad(path, "an object", v, out)
            }
        }
        Ty::Literal(want) => {
            if v.as_str() != Some(want) {
                bad(path, &format!("{want:?}"), v, out)
            }
        }
        Ty::Enum(names) => {
            if !v.as_str().is_some_and(|s| names.contains(&s)) {
                bad(path, &format!("one of {names:?}"), v, out)
            }
        }
        Ty::Pointer => match v.as_str() {
            Some(s) if is_pointer(s) => {}
            Some(s) => out.push(Problem {
                rule: "schema.field",
                message: format!("{path}: {s:?} is not a JSON Pointer (RFC 6901)"),
            }),
            None => bad(path, "a JSON Pointer string", v, out),
        },
        Ty::Obj(shape) => match v.as_object() {
            Some(o) => check_fields(o, shape.fields.iter(), shape.open, path, out),
            None => bad(path, "an object", v, out),
        },
        Ty::Arr(el) | Ty::NonEmptyArr(el) => match v.as_array() {
            Some(a) => {
                if a.is_empty() && matches!(ty, Ty::NonEmptyArr(_)) {
                    out.push(Problem {
                        rule: "schema.field",
                        message: format!("{path}: must hold at least one element"),
                    });
                }
                for (i, x) in a.iter().enumerate() {
                    check(x, el, &format!("{path}/{i}"), out);
                }
            }
            None => bad(path, "an array", v, out),
        },
        Ty::Union(key, members) => {
            let Some(o) = v.as_object() else { return bad(path, "an object", v, out) };
            let tag = o.get(*key).and_then(Value::as_str);
            match members.iter().find(|(t, _)| Some(*t) == tag) {
                Some((_, shape)) => check_fields(o, shape.fields.iter(), shape.open, path, out),
                None => {
                    let names: Vec<&str> = members.iter().map(|(t, _)| *t).collect();
                    out.push(Problem {
                        rule: "schema.unknown-member",
                        message: format!(
                            "{path}/{key}: {} is not one of {names:?} (the client drops the member with a warning)",
                            o.get(*key).map_or("absent".to_string(), |t| t.to_string())
                        ),
                    })
                }
            }
        }
        Ty::StrOrParts => match v {
            Value::String(_) => {}
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    check(x, &PART, &format!("{path}/{i}"), out);
                }
            }
            _ => bad(path, "a string or an array of content parts", v, out),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: Value) -> Vec<&'static str> {
        check_event(v.as_object().unwrap()).iter().map(|p| p.rule).collect()
    }

    #[test]
    fn shapes_follow_the_official_schemas() {
        assert!(rules(json!({"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"})).is_empty());
        assert_eq!(rules(json!({"type":"RUN_STARTED","threadId":"t"})), ["schema.field"]);
        assert_eq!(rules(json!({"type":"TEXT_MESSAGE_START","messageId":"m","name":null})), ["schema.field"]);
        assert_eq!(rules(json!({"type":"TOOL_CALL_END","toolCallId":"t","extra":1})), ["schema.unknown-key"]);
        assert_eq!(rules(json!({"type":"TOKEN_DELTA"})), ["schema.unknown-type"]);
        assert_eq!(
            rules(json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"paused"}})),
            ["schema.unknown-member"]
        );
        assert_eq!(
            rules(
                json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[]}})
            ),
            ["schema.field"]
        );
        // An integral float is an integer to JSON.parse; a fraction is not.
        assert!(rules(json!({"type":"RAW","event":null,"timestamp":2.0})).is_empty());
        assert_eq!(rules(json!({"type":"RAW","event":1,"timestamp":1.5})), ["schema.field"]);
        // Patch operations keep members they do not define.
        assert!(rules(json!({"type":"STATE_DELTA","delta":[{"op":"remove","path":"/a","value":1}]})).is_empty());
        assert_eq!(rules(json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"a","value":1}]})), ["schema.field"]);
    }
}
