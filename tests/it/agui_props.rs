//! Property: whatever `events/v1` sequence comes in (any order, any kinds,
//! ids reused from small pools, errors, exits and turn boundaries anywhere),
//! the translator's output is a stream the official client accepts, as
//! judged by the independent verifier in `support::verify`.

use crate::support;
use proptest::prelude::*;
use runwire::pipeline::events::{
    Channel, Data, ErrorData, Event, Exit, Parent, Seq, Subagent, TokenDelta, ToolCall, ToolResult, TurnEnd, TurnStart,
    Usage,
};
use runwire::pipeline::translate::{TranslateOptions, Translator};
use serde_json::Value;

fn pick(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(pool).prop_map(str::to_string)
}

const MESSAGES: &[&str] = &["m1", "m2", "m3"];
const TOOLS: &[&str] = &["t1", "t2", "t3"];
const TEXTS: &[&str] = &["", "a", "hello world", "\n", "\"quoted\"", "ünï"];

fn usage() -> impl Strategy<Value = Option<Usage>> {
    proptest::option::of((0u64..1000, 0u64..1000, proptest::option::of(0u64..100)).prop_map(|(i, o, c)| Usage {
        input_tokens: i,
        output_tokens: o,
        cached_input_tokens: c,
        cache_write_input_tokens: None,
        reasoning_tokens: c,
    }))
}

/// The main agent (half the time), or one of a few subagents: spawned by a
/// call from the tool pool, one nested in another, one named by a call that
/// never streamed; so subagents run at once, nest, end when their call's
/// result comes, and act again after they ended.
fn parent() -> impl Strategy<Value = Parent> {
    let sub = |call: &str, id: &str, outer: Option<&str>| Subagent {
        tool_call: call.into(),
        id: id.into(),
        name: "Explore".into(),
        description: Some("d".into()),
        parent_id: outer.map(String::from),
    };
    prop_oneof![
        4 => Just(None),
        1 => Just(Some(Box::new(sub("t1", "t1", None)))),
        1 => Just(Some(Box::new(sub("t2", "t2", None)))),
        1 => Just(Some(Box::new(sub("t3", "t3", Some("t1"))))),
        1 => Just(Some(Box::new(sub("tx", "thread-9", None)))),
    ]
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![
        6 => (pick(TEXTS), any::<bool>(), pick(MESSAGES), parent()).prop_map(|(text, reasoning, message, parent)| {
            Data::TokenDelta(TokenDelta {
                text,
                channel: if reasoning { Channel::Reasoning } else { Channel::Text },
                message,
                parent,
            })
        }),
        2 => (pick(TOOLS), proptest::option::of(pick(MESSAGES)), parent()).prop_map(|(id, message, parent)| {
            Data::ToolCall(ToolCall { id, name: "Bash".into(), args: serde_json::json!({"cmd": "ls"}), message, parent })
        }),
        2 => (pick(TOOLS), any::<bool>(), proptest::option::of(-1i64..3), parent()).prop_map(|(id, is_error, exit_code, parent)| {
            Data::ToolResult(ToolResult {
                id,
                output: "out".into(),
                is_error,
                truncated: false,
                bytes: 3,
                exit_code,
                parent,
            })
        }),
        1 => proptest::option::of(pick(&["opus", "sonnet"]))
            .prop_map(|model| Data::TurnStart(TurnStart { model, cwd: None })),
        1 => (any::<bool>(), usage(), proptest::option::of(0.0f64..5.0)).prop_map(|(ok, usage, cost_usd)| {
            Data::TurnEnd(TurnEnd {
                ok,
                reason: (!ok).then(|| "failed".to_string()),
                cost_usd,
                usage,
                ..Default::default()
            })
        }),
        1 => any::<bool>().prop_map(|fatal| Data::Error(ErrorData {
            reason: "oops".into(),
            code: "agent_error".into(),
            raw: "{}".into(),
            fatal,
        })),
        1 => (proptest::sample::select(&[0i64, 0, 1, 2, 137][..]), proptest::option::of(pick(&["x"])))
            .prop_map(|(rc, detail)| Data::Exit(Exit { rc, ok: rc == 0, detail })),
        1 => (pick(&["runwire.tool_progress", "runwire.notification"]), parent()).prop_map(|(name, parent)| {
            Data::Custom(runwire::pipeline::events::Custom { name, value: serde_json::json!({"elapsed_time_seconds": 2, "parent_tool_use_id": null}), parent })
        }),
    ]
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    (proptest::option::of(pick(&["job-1"])), proptest::collection::vec(data(), 0..40)).prop_map(|(run, ds)| {
        ds.into_iter()
            .enumerate()
            .map(|(i, data)| Event {
                run: run.clone(),
                task: None,
                session: None,
                seq: Seq { line: i as u64 + 1, sub: 0 },
                ts_ms: 1_700_000_000_000 + i as i64 * 7,
                data,
            })
            .collect()
    })
}

fn options() -> impl Strategy<Value = TranslateOptions> {
    (proptest::option::of(pick(&["T"])), proptest::option::of(pick(&["R"])))
        .prop_map(|(thread_id, run_id)| TranslateOptions { thread_id, run_id })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn output_is_a_valid_agui_stream(evs in events(), opts in options()) {
        let mut t = Translator::new(opts);
        let mut out = Vec::new();
        let mut terminal_at = None;
        for (i, e) in evs.iter().enumerate() {
            // Round-trip through the wire form, as the binary does.
            let parsed = runwire::pipeline::translate::parse_line(e.to_json().as_bytes()).unwrap();
            let produced = t.push(&parsed);
            if terminal_at.is_none() && produced.iter().any(|a| a.is_terminal()) {
                terminal_at = Some(i);
            }
            out.extend(produced);
        }
        out.extend(t.finish());
        let json: Vec<Value> = out.iter().map(|a| serde_json::from_str(&a.to_json()).unwrap()).collect();
        if let Err(e) = support::verify::verify(&json) {
            let lines: Vec<String> = out.iter().map(|a| a.to_json()).collect();
            prop_assert!(false, "{e}\n{}", lines.join("\n"));
        }
        let after = terminal_at.map_or(0, |i| evs.len() - i - 1) as u64;
        prop_assert_eq!(t.ignored_after_terminal(), after);
        prop_assert!(t.finish().is_empty());
    }
}

#[test]
fn verifier_rejects_what_the_client_rejects() {
    let v = |s: &str| support::verify::verify_lines(s).map(|_| ());
    let start = r#"{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"}"#;
    let fin = r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#;
    let ok = format!("{start}\n{fin}\n");
    let sa = r#"{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}"#;
    let sa_end = r#"{"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"success"}}"#;
    assert!(v(&ok).is_ok());
    let cases = [
        format!("{fin}\n"),
        format!("{start}\n"),
        format!("{start}\n{fin}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"x\"}}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\"}}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"TOOL_CALL_END\",\"toolCallId\":\"t\"}}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"REASONING_START\",\"messageId\":\"m\"}}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"t\",\"toolCallName\":\"x\",\"parentMessageId\":null}}\n"),
        format!("{start}\n{{\"type\":\"RUN_ERROR\",\"message\":\"m\",\"runId\":\"r\"}}\n"),
        format!("{start}\n{{\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":{{\"snake_key\":1}}}}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":1,\"timestamp\":1.5}}\n{fin}\n"),
        // Subagents: a name is required, an id is never reused, nothing is
        // left active at RUN_FINISHED, only an active one ends or is named,
        // and a message stays its opener's.
        format!("{start}\n{{\"type\":\"SUBAGENT_STARTED\",\"subagentRunId\":\"s\"}}\n{fin}\n"),
        format!("{start}\n{sa}\n{fin}\n"),
        format!("{start}\n{sa}\n{sa_end}\n{sa}\n{sa_end}\n{fin}\n"),
        format!("{start}\n{sa_end}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":1,\"subagentRunId\":\"s\"}}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"SUBAGENT_STARTED\",\"subagentRunId\":\"s\",\"name\":\"n\",\"parentSubagentRunId\":\"q\"}}\n{sa_end}\n{fin}\n"),
        format!("{start}\n{sa}\n{{\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"subagentRunId\":\"s\"}}\n{{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}}\n{sa_end}\n{fin}\n"),
        format!("{start}\n{sa}\n{{\"type\":\"SUBAGENT_FINISHED\",\"subagentRunId\":\"s\",\"outcome\":{{\"type\":\"interrupt\"}}}}\n{fin}\n"),
        format!("{start}\n{{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\",\"subagentRunId\":\"s\"}}\n"),
    ];
    let good = format!("{start}\n{sa}\n{{\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"subagentRunId\":\"s\"}}\n{{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\",\"subagentRunId\":\"s\"}}\n{sa_end}\n{fin}\n");
    assert!(v(&good).is_ok(), "{:?}", v(&good));
    for c in &cases {
        assert!(v(c).is_err(), "should be rejected:\n{c}");
    }
}
