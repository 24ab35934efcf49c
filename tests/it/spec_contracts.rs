//! The contracts in `spec/` checked against the code: the adapter kind tables
//! and the events/v1 schema's enums.

use runwire::pipeline::events::Data;
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};
use runwire::util::time::Clock;
use serde_json::Value;
use std::path::PathBuf;

fn spec(name: &str) -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec").join(name)).unwrap()
}

/// `(adapter, kind, example line, expected event types)` for every table row.
fn adapter_rows() -> Vec<(String, String, String, Vec<String>)> {
    let mut rows = Vec::new();
    for line in spec("adapters.md").lines() {
        let cells: Vec<&str> = line.split(" | ").map(|c| c.trim_matches(|ch| ch == '|' || ch == ' ')).collect();
        if cells.len() != 4 || !["any", "claude", "cursor", "codex"].contains(&cells[0]) {
            continue;
        }
        let example = cells[2].trim_matches('`').to_string();
        let events = if cells[3] == "-" { Vec::new() } else { cells[3].split(' ').map(str::to_string).collect() };
        rows.push((cells[0].to_string(), cells[1].to_string(), example, events));
    }
    rows
}

#[test]
fn every_row_of_the_adapter_tables_holds() {
    let rows = adapter_rows();
    assert!(rows.len() > 80, "the tables were not read ({} rows)", rows.len());
    for (adapter, kind, example, want) in rows {
        let adapters = match adapter.as_str() {
            "claude" => vec![Adapter::Claude],
            "cursor" => vec![Adapter::Cursor],
            "codex" => vec![Adapter::Codex],
            _ => vec![Adapter::Claude, Adapter::Cursor, Adapter::Codex],
        };
        serde_json::from_str::<Value>(&example).unwrap_or_else(|e| panic!("{kind}: example is not JSON: {e}"));
        for a in adapters {
            let mut n = Normalizer::new(a, Options { clock: Clock::Fixed(0), ..Options::default() });
            let got: Vec<String> = n
                .push(example.as_bytes())
                .iter()
                .map(|e| match &e.data {
                    Data::Custom(c) => format!("custom({})", c.name),
                    d => d.type_name().to_string(),
                })
                .collect();
            assert_eq!(got, want, "{adapter} {kind}: {example}");
        }
    }
}

#[test]
fn every_claude_sdk_message_kind_the_spec_names_has_a_row() {
    let text = spec("adapters.md");
    assert!(
        text.contains("@anthropic-ai/claude-agent-sdk` **0.3.328**"),
        "the spec names the SDK version it was checked against"
    );
    let list = text.split("SDK members:").nth(1).expect("the SDK member list").split("(`tests/").next().unwrap();
    let members: Vec<&str> =
        list.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| w.starts_with("SDK") && w.len() > 3).collect();
    assert_eq!(members.len(), 40, "SDKMessage has 40 members in 0.3.328: {members:?}");
    let rows = adapter_rows();
    for m in members {
        assert!(
            rows.iter().any(
                |(a, kind, _, _)| a == "claude" && kind.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == m)
            ),
            "no claude row for {m}"
        );
    }
}

#[test]
fn a_kind_missing_from_the_tables_is_reported_not_dropped() {
    for a in [Adapter::Claude, Adapter::Cursor, Adapter::Codex] {
        let mut n = Normalizer::new(a, Options::default());
        let evs = n.push(br#"{"type":"never_seen_before","x":1}"#);
        assert!(
            matches!(&evs[..], [e] if matches!(&e.data, Data::Error(d) if d.code == "unknown_kind" && !d.fatal)),
            "{a:?}"
        );
    }
}

#[test]
fn the_schema_names_exactly_the_event_types_and_error_codes() {
    let schema: Value = serde_json::from_str(&spec("events.schema.json")).unwrap();
    let types: Vec<&str> =
        schema["properties"]["type"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "turn_start",
            "token_delta",
            "tool_call",
            "tool_result",
            "turn_end",
            "error",
            "exit",
            "custom",
            "input_request",
            "input_answer"
        ]
    );
    // Each type has its data definition.
    for t in &types {
        assert!(schema["$defs"][t].is_object(), "no $defs/{t}");
    }
    // Every error code the normalizer can emit is in the schema's enum.
    let codes: Vec<&str> = schema["$defs"]["error"]["properties"]["code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let src = [
        "src/pipeline/normalize/mod.rs",
        "src/pipeline/normalize/claude.rs",
        "src/pipeline/normalize/cursor.rs",
        "src/pipeline/normalize/codex.rs",
        "src/util/pipe.rs",
    ]
    .iter()
    .map(|p| std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p)).unwrap())
    .collect::<String>();
    for cap in src.split("error(\"").skip(1) {
        let code = &cap[..cap.find('"').unwrap()];
        assert!(codes.contains(&code), "error code {code:?} is not in the schema");
    }
}
