//! Issue 11's lossy lines, each exactly as the issue states it, and the
//! surrogate repair as a property: no line of real agent output is silently
//! lost or misreported.

use proptest::prelude::*;
use runwire::pipeline::events::{Data, Event};
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};
use runwire::util::time::Clock;

fn run(adapter: Adapter, lines: &[&str]) -> Vec<Event> {
    let mut n = Normalizer::new(adapter, Options { clock: Clock::Fixed(0), ..Options::default() });
    lines.iter().flat_map(|l| n.push(l.as_bytes())).collect()
}

fn errors(evs: &[Event]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| match &e.data {
            Data::Error(x) => Some(x.code.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lone_surrogate_in_claude_tool_output_is_read_as_a_replacement_character() {
    let evs = run(
        Adapter::Claude,
        &[
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"Make Videos \ud83c\n..."}]}}"#,
        ],
    );
    match &evs[..] {
        [e] => match &e.data {
            Data::ToolResult(r) => {
                assert_eq!(r.id, "t1");
                assert_eq!(r.output, "Make Videos \u{FFFD}\n...");
                assert_eq!(r.bytes, "Make Videos \u{FFFD}\n...".len() as u64);
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_lone_surrogate_in_a_claude_result_keeps_the_turn_end() {
    let evs = run(
        Adapter::Claude,
        &[r#"{"type":"result","subtype":"success","is_error":false,"result":"Done \ud83d","total_cost_usd":0.1}"#],
    );
    assert!(matches!(&evs[0].data, Data::TokenDelta(d) if d.text == "Done \u{FFFD}"), "{evs:?}");
    assert!(matches!(&evs[1].data, Data::TurnEnd(t) if t.ok && t.cost_usd == Some(0.1)), "{evs:?}");
    assert_eq!(evs.len(), 2);
}

#[test]
fn a_lone_surrogate_in_a_codex_message_keeps_the_text() {
    let evs = run(
        Adapter::Codex,
        &[r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"ok \ud83d"}}"#],
    );
    assert!(
        matches!(&evs[..], [e] if matches!(&e.data, Data::TokenDelta(d) if d.text == "ok \u{FFFD}" && d.message == "item_0")),
        "{evs:?}"
    );
}

#[test]
fn a_lone_surrogate_in_a_cursor_line_keeps_the_text() {
    let evs = run(
        Adapter::Cursor,
        &[r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"hi \udc00"}]}}"#],
    );
    assert!(matches!(&evs[..], [e] if matches!(&e.data, Data::TokenDelta(d) if d.text == "hi \u{FFFD}")), "{evs:?}");
}

#[test]
fn a_rejected_cursor_tool_call_is_an_error_with_its_reason() {
    let line = r#"{"type":"tool_call","subtype":"completed","call_id":"c1","tool_call":{"shellToolCall":{"args":{"command":"echo hi"},"result":{"rejected":{"command":"echo hi","workingDirectory":"","reason":""}}}}}"#;
    let evs = run(Adapter::Cursor, &[line]);
    assert!(
        matches!(&evs[1].data, Data::ToolResult(r) if r.id == "c1" && r.is_error && r.output == "rejected"),
        "{evs:?}"
    );
    let why = line.replace(r#""reason":"""#, r#""reason":"denied by policy""#);
    let evs = run(Adapter::Cursor, &[&why]);
    assert!(
        matches!(&evs[1].data, Data::ToolResult(r) if r.is_error && r.output == "rejected: denied by policy"),
        "{evs:?}"
    );
    // Any other variant than success fails too, with its output.
    let timeout = r#"{"type":"tool_call","subtype":"completed","call_id":"c2","tool_call":{"shellToolCall":{"args":{"command":"sleep 9"},"result":{"timeout":{"stdout":"partial","stderr":"","exitCode":null}}}}}"#;
    let evs = run(Adapter::Cursor, &[timeout]);
    assert!(matches!(&evs[1].data, Data::ToolResult(r) if r.is_error && r.output == "partial"), "{evs:?}");
}

#[test]
fn cursor_usage_fills_the_turn_end() {
    let evs = run(
        Adapter::Cursor,
        &[
            r#"{"type":"result","subtype":"success","duration_ms":7489,"duration_api_ms":7489,"is_error":false,"result":"ok","session_id":"s","request_id":"r","usage":{"inputTokens":14795,"outputTokens":39,"cacheReadTokens":5248,"cacheWriteTokens":0}}"#,
        ],
    );
    match &evs.last().unwrap().data {
        Data::TurnEnd(t) => {
            let u = t.usage.as_ref().expect("usage");
            assert_eq!(
                (u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_input_tokens),
                (14795 + 5248, 39, Some(5248), Some(0))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_claude_line_with_an_odd_field_shape_keeps_its_events() {
    let line = r#"{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"toolu_A2","message":"Permission to use Write has been denied.","uuid":"u","session_id":"s"}"#;
    let evs = run(Adapter::Claude, &[line]);
    match &evs[..] {
        [e] => match &e.data {
            Data::Custom(c) => {
                assert_eq!(c.name, "runwire.permission_denied");
                assert_eq!(c.value["tool_use_id"], "toolu_A2");
                assert_eq!(c.value["message"], "Permission to use Write has been denied.");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // A known kind whose `message` is not an object is not failed whole: its text still comes out.
    let odd = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"},"stray",{"type":"text","text":" there"}]},"event":"not an object"}"#;
    let evs = run(Adapter::Claude, &[odd]);
    let text: String = evs
        .iter()
        .filter_map(|e| match &e.data {
            Data::TokenDelta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "hi there", "{evs:?}");
}

#[test]
fn a_tool_result_without_a_tool_id_is_a_visible_error_never_an_empty_id() {
    let evs = run(Adapter::Claude, &[r#"{"type":"user","message":{"content":[{"type":"tool_result"}]}}"#]);
    assert_eq!(errors(&evs), ["missing_id"]);
    assert!(matches!(&evs[0].data, Data::Error(x) if !x.fatal));
    for (a, line) in [
        (Adapter::Cursor, r#"{"type":"tool_call","subtype":"started","tool_call":{"shellToolCall":{"args":{}}}}"#),
        (Adapter::Codex, r#"{"id":"1","msg":{"type":"exec_command_begin","command":["ls"]}}"#),
        (Adapter::Codex, r#"{"type":"item.started","item":{"type":"command_execution","command":"ls"}}"#),
        (
            Adapter::Claude,
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","name":"Bash","input":{}}]}}"#,
        ),
    ] {
        let evs = run(a, &[line]);
        assert_eq!(errors(&evs), ["missing_id"], "{line}");
        assert!(!evs.iter().any(|e| matches!(&e.data, Data::ToolCall(_) | Data::ToolResult(_))), "{line}");
    }
}

#[test]
fn a_leading_byte_order_mark_is_ignored() {
    let line = "\u{FEFF}{\"type\":\"turn.started\"}";
    let evs = run(Adapter::Codex, &[line]);
    assert!(matches!(&evs[..], [e] if matches!(e.data, Data::TurnStart(_))), "{evs:?}");
    // Only before the first line: later, it is junk like any other.
    let evs = run(Adapter::Codex, &["{\"type\":\"turn.started\"}", line]);
    assert_eq!(errors(&evs), ["not_json"]);
}

#[test]
fn claude_text_deltas_with_no_open_message_are_errors_not_dropped() {
    let delta = r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lost words"}}}"#;
    let evs = run(Adapter::Claude, &[delta]);
    assert_eq!(errors(&evs), ["orphan_delta"]);
    assert!(matches!(&evs[0].data, Data::Error(x) if x.reason.contains("10 bytes") && x.raw.contains("lost words")));
    // A block index never started within an open message is reported too.
    let start = r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}"#;
    let other = delta.replace(r#""index":0"#, r#""index":3"#);
    assert_eq!(errors(&run(Adapter::Claude, &[start, &other])), ["orphan_delta"]);
}

#[test]
fn codex_web_search_carries_its_query() {
    let evs = run(
        Adapter::Codex,
        &[
            r#"{"type":"item.started","item":{"id":"ws","type":"web_search","query":"","action":{"type":"other"}}}"#,
            r#"{"type":"item.completed","item":{"id":"ws","type":"web_search","query":"rust serde","action":{"type":"search","query":"rust serde"}}}"#,
            r#"{"id":"1","msg":{"type":"web_search_begin","call_id":"w2"}}"#,
            r#"{"id":"1","msg":{"type":"web_search_end","call_id":"w2","query":"legacy query"}}"#,
        ],
    );
    let calls: Vec<_> = evs
        .iter()
        .filter_map(|e| match &e.data {
            Data::ToolCall(c) => Some((c.id.as_str(), c.args["query"].as_str().unwrap_or("").to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [("ws", "rust serde".to_string()), ("w2", "legacy query".to_string())]);
}

#[test]
fn cursor_mcp_calls_are_named_by_provider_and_tool() {
    let evs = run(
        Adapter::Cursor,
        &[
            r#"{"type":"tool_call","subtype":"started","call_id":"c2","tool_call":{"mcpToolCall":{"args":{"name":"gh-search","args":{"q":"x"},"providerIdentifier":"gh","toolName":"search"}}}}"#,
        ],
    );
    assert!(
        matches!(&evs[0].data, Data::ToolCall(c) if c.name == "mcp__gh__search" && c.args == serde_json::json!({"q":"x"})),
        "{evs:?}"
    );
}

#[test]
fn claude_non_text_result_blocks_are_described_not_replaced_by_placeholders() {
    let line = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"AAAA"}},{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},{"type":"web_search_result","title":"T","url":"https://example.com/"},{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"mystery","x":1}]}]}}"#;
    let evs = run(Adapter::Claude, &[line]);
    match &evs[0].data {
        Data::ToolResult(r) => assert_eq!(
            r.output,
            "[image image/jpeg 3 bytes]\n[image https://example.com/a.png]\n[web_search_result \"T\" https://example.com/]\n[resource_link \"a\" file:///a]\n{\"type\":\"mystery\",\"x\":1}"
        ),
        other => panic!("{other:?}"),
    }
}

/// A JSON string literal holding `units` (UTF-16 code units), escaped as
/// `\uXXXX` where a unit is a surrogate, and the string it should read as.
fn literal(units: &[(bool, u16)]) -> (String, String) {
    let mut lit = String::from("\"");
    let mut want = String::new();
    let mut i = 0;
    while i < units.len() {
        let (escaped, u) = units[i];
        if (0xD800..0xDC00).contains(&u) && i + 1 < units.len() && (0xDC00..0xE000).contains(&units[i + 1].1) {
            let lo = units[i + 1].1;
            lit.push_str(&format!("\\u{u:04x}\\u{lo:04X}"));
            let c = 0x10000 + ((u32::from(u) - 0xD800) << 10) + (u32::from(lo) - 0xDC00);
            want.push(char::from_u32(c).unwrap());
            i += 2;
            continue;
        }
        if (0xD800..0xE000).contains(&u) {
            lit.push_str(&format!("\\u{u:04x}"));
            want.push('\u{FFFD}');
        } else {
            let c = char::from_u32(u32::from(u)).unwrap();
            if escaped || c == '"' || c == '\\' || c.is_control() {
                lit.push_str(&format!("\\u{u:04x}"));
            } else {
                lit.push(c);
            }
            want.push(c);
        }
        i += 1;
    }
    lit.push('"');
    (lit, want)
}

proptest! {
    /// Any mix of plain characters, escapes, surrogate pairs and lone
    /// surrogates: each lone one reads as U+FFFD, everything else unchanged,
    /// in every dialect's text.
    #[test]
    fn lone_surrogates_read_as_replacement_characters(units in proptest::collection::vec(
        prop_oneof![
            (any::<bool>(), 0x20u16..0x7f),
            (any::<bool>(), 0xa0u16..0xd800),
            (Just(true), 0xd800u16..0xe000),
            (Just(true), 0xd800u16..0xdc00),
        ],
        1..24,
    )) {
        let (lit, want) = literal(&units);
        let lines = [
            (Adapter::Codex, format!(r#"{{"type":"item.completed","item":{{"id":"i","type":"agent_message","text":{lit}}}}}"#)),
            (Adapter::Cursor, format!(r#"{{"type":"assistant","message":{{"content":[{{"type":"text","text":{lit}}}]}}}}"#)),
            (Adapter::Claude, format!(r#"{{"type":"assistant","message":{{"id":"m","content":[{{"type":"text","text":{lit}}}]}}}}"#)),
        ];
        for (a, line) in lines {
            let evs = run(a, &[&line]);
            let text: String = evs.iter().filter_map(|e| match &e.data { Data::TokenDelta(d) => Some(d.text.as_str()), _ => None }).collect();
            prop_assert_eq!(&text, &want, "{:?} {}", a, line);
            prop_assert!(errors(&evs).is_empty(), "{:?} {}", a, line);
        }
    }
}
