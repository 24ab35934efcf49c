//! runwire against the schema codex 0.169.0 generates for its app-server
//! protocol (`fixtures/codex-schema/`, from `codex app-server
//! generate-json-schema --experimental`): what runwire writes validates, and
//! every notification, server request and item type it defines is in
//! `spec/adapters.md`'s table and handled as the table says.
//!
//! No JSON Schema library is a dependency (and none is installed next to
//! the project's node tools), so [`check`] is a small checker of the subset
//! codex's schema uses (`$ref`, `type`, `enum`, `const`, `oneOf`, `anyOf`,
//! `allOf`, `properties`, `required`, `additionalProperties`, `items`). It is
//! stricter than the schema in one way: an object whose schema names its
//! properties takes no other (codex's serde ignores an unknown field
//! silently, which is how `dynamicTools` on `thread/resume` went unnoticed).

use crate::support;

use runwire::pipeline::events::{Data, InputAnswer, InputRequest};
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};
use runwire::session::codex::{Codex, CodexOptions};
use runwire::session::{Agent, Signal};
use runwire::util::time::Clock;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn schema_dir() -> PathBuf {
    Path::new(ROOT).join("fixtures/codex-schema")
}

fn schema(file: &str) -> Value {
    let p = schema_dir().join(file);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

// ---- the checker -----------------------------------------------------------

/// The errors of `v` against `s` (a schema inside the document `root`), each
/// with its JSON path.
fn check(root: &Value, s: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(o) = s.as_object() else {
        if s == &json!(false) {
            errors.push(format!("{path}: nothing is allowed here"));
        }
        return;
    };
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/definitions/").unwrap_or_else(|| panic!("unsupported $ref {r}"));
        let target = &root["definitions"][name];
        assert!(!target.is_null(), "dangling $ref {r}");
        check(root, target, v, path, errors);
    }
    if let Some(t) = o.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let fits = |t: &str| match t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            other => panic!("unsupported type {other}"),
        };
        if !types.iter().any(|t| fits(t)) {
            return errors.push(format!("{path}: {v} is not of type {t}"));
        }
    }
    if let Some(e) = o.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errors.push(format!("{path}: {v} is not one of {}", Value::Array(e.clone())));
        }
    }
    if let Some(c) = o.get("const") {
        if c != v {
            errors.push(format!("{path}: {v} is not {c}"));
        }
    }
    let fits = |s: &Value| {
        let mut e = Vec::new();
        check(root, s, v, path, &mut e);
        e
    };
    if let Some(all) = o.get("allOf").and_then(Value::as_array) {
        for s in all {
            errors.extend(fits(s));
        }
    }
    for (k, exactly_one) in [("oneOf", true), ("anyOf", false)] {
        let Some(alts) = o.get(k).and_then(Value::as_array) else { continue };
        let results: Vec<Vec<String>> = alts.iter().map(fits).collect();
        let ok = results.iter().filter(|e| e.is_empty()).count();
        if ok == 0 || (exactly_one && ok > 1) {
            let why: Vec<String> = results.into_iter().flatten().collect();
            errors.push(format!("{path}: {ok} of the {k} alternatives fit ({})", why.join("; ")));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = o.get("properties").and_then(Value::as_object);
        for r in o.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !obj.contains_key(r) {
                errors.push(format!("{path}: {r:?} is required"));
            }
        }
        for (k, x) in obj {
            let sub = format!("{path}.{k}");
            match (props.and_then(|p| p.get(k)), o.get("additionalProperties")) {
                (Some(ps), _) => check(root, ps, x, &sub, errors),
                (None, Some(a)) if a.is_object() => check(root, a, x, &sub, errors),
                (None, Some(Value::Bool(true))) => {}
                (None, _) if props.is_some() || o.get("additionalProperties") == Some(&json!(false)) => {
                    errors.push(format!("{sub}: not a property the schema names"))
                }
                (None, _) => {}
            }
        }
    }
    if let (Some(items), Some(a)) = (o.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            check(root, items, x, &format!("{path}[{i}]"), errors);
        }
    }
}

/// The errors of `v` against the schema file `file`.
fn errors_of(file: &str, v: &Value) -> Vec<String> {
    let root = schema(file);
    let mut errors = Vec::new();
    check(&root, &root, v, "$", &mut errors);
    errors
}

#[track_caller]
fn assert_valid(file: &str, v: &Value) {
    let errors = errors_of(file, v);
    assert!(errors.is_empty(), "not a valid {file}: {v}\n{}", errors.join("\n"));
}

#[test]
fn the_checker_refuses_what_the_schema_does_not_allow() {
    let file = "v2/TurnInterruptParams.json";
    assert_valid(file, &json!({"threadId": "th", "turnId": "t1"}));
    for bad in [
        json!({"threadId": "th"}),
        json!({"threadId": 1, "turnId": "t1"}),
        json!({"threadId": "th", "turnId": "t1", "extra": true}),
    ] {
        assert!(!errors_of(file, &bad).is_empty(), "{bad} passed");
    }
    let decision = "CommandExecutionRequestApprovalResponse.json";
    assert_valid(decision, &json!({"decision": "accept"}));
    assert!(!errors_of(decision, &json!({"decision": "allow"})).is_empty());
}

// ---- what runwire writes -----------------------------------------------------

fn parse(l: &[u8]) -> Value {
    serde_json::from_slice(l).unwrap()
}

/// The one line of `w` that is the request `method`.
fn request<'a>(w: &'a [Value], method: &str) -> &'a Value {
    let found: Vec<&Value> = w.iter().filter(|l| l["method"] == method).collect();
    assert_eq!(found.len(), 1, "{method} in {w:?}");
    found[0]
}

/// A codex session up to its running turn `t1`: every line runwire wrote.
fn running(opts: CodexOptions) -> (Codex, Vec<Value>) {
    let mut c = Codex::new(opts);
    let mut w = Vec::new();
    c.open(&mut w);
    c.line(br#"{"id":1,"result":{"userAgent":"codex"}}"#, &mut w);
    c.line(br#"{"id":2,"result":{"thread":{"id":"th"}}}"#, &mut w);
    c.message("hello", &mut w);
    c.line(br#"{"id":3,"result":{"turn":{"id":"t1","status":"inProgress"}}}"#, &mut w);
    c.line(br#"{"method":"turn/started","params":{"threadId":"th","turn":{"id":"t1"}}}"#, &mut w);
    c.message("and more", &mut w);
    c.interrupt(&mut w);
    (c, w.iter().map(|l| parse(l)).collect())
}

#[test]
fn every_request_runwire_writes_fits_codexs_schema() {
    let (_, w) = running(CodexOptions { cwd: Some("/w".into()), model: Some("gpt-5.5".into()), ..Default::default() });
    for (method, file) in [
        ("initialize", "v1/InitializeParams.json"),
        ("thread/start", "v2/ThreadStartParams.json"),
        ("turn/start", "v2/TurnStartParams.json"),
        ("turn/steer", "v2/TurnSteerParams.json"),
        ("turn/interrupt", "v2/TurnInterruptParams.json"),
    ] {
        assert_valid(file, &request(&w, method)["params"]);
    }
    for policy in ["untrusted", "on-request", "never"] {
        let (_, w) = running(CodexOptions { approval_policy: policy.into(), ..Default::default() });
        assert_valid("v2/ThreadStartParams.json", &request(&w, "thread/start")["params"]);
    }
    let (_, w) = running(CodexOptions { resume: Some("th".into()), ..Default::default() });
    let resume = &request(&w, "thread/resume")["params"];
    assert_valid("v2/ThreadResumeParams.json", resume);
    assert_eq!(resume["excludeTurns"], true, "without it every resume draws a deprecationNotice");
}

/// What the schema refused before: the question tool without `type`, and
/// `dynamicTools` on `thread/resume`.
#[test]
fn the_old_thread_requests_do_not_fit() {
    let (_, w) = running(CodexOptions::default());
    let mut start = request(&w, "thread/start")["params"].clone();
    start["dynamicTools"][0].as_object_mut().unwrap().remove("type");
    assert!(!errors_of("v2/ThreadStartParams.json", &start).is_empty(), "a tool without type passed");
    let (_, w) = running(CodexOptions { resume: Some("th".into()), ..Default::default() });
    let mut resume = request(&w, "thread/resume")["params"].clone();
    resume["dynamicTools"] = start["dynamicTools"].clone();
    assert!(!errors_of("v2/ThreadResumeParams.json", &resume).is_empty(), "dynamicTools on a resume passed");
    let on_failure = json!({"approvalPolicy": "on-failure"});
    assert!(!errors_of("v2/ThreadStartParams.json", &on_failure).is_empty(), "on-failure passed");
}

fn answer(req: &InputRequest, a: Value) -> InputAnswer {
    let mut a = a;
    a["id"] = json!(req.id);
    a["at"] = json!("2026-01-01T00:00:00Z");
    serde_json::from_value(a).unwrap()
}

/// Codex's request `line`, the person's answer `a`: what runwire wrote back.
fn answered(line: &str, a: Value) -> Value {
    let (mut c, _) = running(CodexOptions::default());
    let mut w = Vec::new();
    let signals = c.line(line.as_bytes(), &mut w);
    let Some(Signal::Request(req)) = signals.into_iter().find(|s| matches!(s, Signal::Request(_))) else {
        panic!("no request from {line}")
    };
    c.answer(&req, &answer(&req, a), None, &mut w);
    assert_eq!(w.len(), 1, "one reply");
    parse(&w[0])
}

#[test]
fn every_answer_runwire_writes_fits_codexs_schema() {
    let command = r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th","turnId":"t1","itemId":"e1","command":"touch x","availableDecisions":["accept","acceptForSession","decline","cancel"]}}"#;
    for a in [
        json!({"decision": "allow"}),
        json!({"decision": "allow", "scope": "session"}),
        json!({"decision": "deny", "message": "no"}),
        json!({"decision": "cancelled"}),
        json!({"decision": "expired"}),
    ] {
        assert_valid("CommandExecutionRequestApprovalResponse.json", &answered(command, a)["result"]);
    }
    let file =
        r#"{"method":"item/fileChange/requestApproval","id":1,"params":{"threadId":"th","turnId":"t1","itemId":"f1"}}"#;
    for a in
        [json!({"decision": "allow"}), json!({"decision": "allow", "scope": "session"}), json!({"decision": "deny"})]
    {
        assert_valid("FileChangeRequestApprovalResponse.json", &answered(file, a)["result"]);
    }
    let tool = r#"{"method":"item/tool/call","id":2,"params":{"threadId":"th","turnId":"t1","callId":"c1","tool":"AskUserQuestion","arguments":{"questions":[{"question":"Tabs or spaces?","options":[{"label":"tabs"},{"label":"spaces"}]}]}}}"#;
    for a in [json!({"decision": "answer", "answers": {"Tabs or spaces?": "spaces"}}), json!({"decision": "deny"})] {
        assert_valid("DynamicToolCallResponse.json", &answered(tool, a)["result"]);
    }
    let input = r#"{"method":"item/tool/requestUserInput","id":3,"params":{"threadId":"th","turnId":"t1","itemId":"u1","questions":[{"id":"q1","header":"Indent","question":"Tabs or spaces?","isOther":true,"options":[{"label":"tabs","description":"t"},{"label":"spaces","description":"s"}]}]}}"#;
    for a in [json!({"decision": "answer", "answers": {"Tabs or spaces?": "two spaces"}}), json!({"decision": "deny"})]
    {
        assert_valid("ToolRequestUserInputResponse.json", &answered(input, a)["result"]);
    }
    // What runwire answers on its own: an unregistered tool, a refused request.
    let (mut c, _) = running(CodexOptions::default());
    let mut w = Vec::new();
    c.line(br#"{"method":"item/tool/call","id":4,"params":{"threadId":"th","turnId":"t1","callId":"c2","tool":"other","arguments":{}}}"#, &mut w);
    c.line(br#"{"method":"attestation/generate","id":5,"params":{}}"#, &mut w);
    assert_valid("DynamicToolCallResponse.json", &parse(&w[0])["result"]);
    let mut refusal = parse(&w[1]);
    refusal.as_object_mut().unwrap().remove("jsonrpc");
    assert_valid("JSONRPCError.json", &refusal);
}

/// The elicitation params schema is serde's flattening: common
/// `properties` beside a `oneOf` of the modes. The checker takes an object's
/// named properties as all it may have, so each mode is checked with the
/// common properties merged in.
#[track_caller]
fn assert_elicitation_params(v: &Value) {
    let root = schema("McpServerElicitationRequestParams.json");
    let mut why = Vec::new();
    for alt in root["oneOf"].as_array().unwrap() {
        let mut merged = alt.clone();
        for (k, x) in root["properties"].as_object().unwrap() {
            merged["properties"][k] = x.clone();
        }
        let mut req = alt["required"].as_array().cloned().unwrap_or_default();
        req.extend(root["required"].as_array().cloned().unwrap_or_default());
        merged["required"] = Value::Array(req);
        let mut errors = Vec::new();
        check(&root, &merged, v, "$", &mut errors);
        if errors.is_empty() {
            return;
        }
        why.extend(errors);
    }
    panic!("no elicitation mode fits {v}: {}", why.join("; "));
}

/// The human asks added for issue 26: a permission-profile approval and
/// MCP elicitations. The request lines the tests use are codex's shape
/// (checked against the params schema), and every answer runwire writes
/// fits the response schema.
#[test]
fn permission_and_elicitation_answers_fit_codexs_schema() {
    let params = |l: &str| parse(l.as_bytes())["params"].clone();
    let permissions = r#"{"method":"item/permissions/requestApproval","id":6,"params":{"threadId":"th","turnId":"t1","itemId":"p1","cwd":"/w","startedAtMs":1,"reason":"write outside","permissions":{"fileSystem":{"write":["/etc/x"]},"network":{"enabled":true}}}}"#;
    assert_valid("PermissionsRequestApprovalParams.json", &params(permissions));
    for a in [
        json!({"decision": "allow"}),
        json!({"decision": "allow", "scope": "session"}),
        json!({"decision": "deny"}),
        json!({"decision": "cancelled"}),
        json!({"decision": "expired"}),
    ] {
        assert_valid("PermissionsRequestApprovalResponse.json", &answered(permissions, a)["result"]);
    }
    let form = r#"{"method":"mcpServer/elicitation/request","id":7,"params":{"threadId":"th","turnId":"t1","serverName":"deploy","mode":"form","message":"Where to?","requestedSchema":{"type":"object","required":["env"],"properties":{"env":{"type":"string","oneOf":[{"const":"prod","title":"Production"},{"const":"staging","title":"Staging"}]},"replicas":{"type":"number","title":"Replicas"},"dry":{"type":"boolean","title":"Dry run"}}}}}"#;
    let url = r#"{"method":"mcpServer/elicitation/request","id":8,"params":{"threadId":"th","turnId":null,"serverName":"docs","mode":"url","message":"Log in","url":"https://x.test","elicitationId":"e1"}}"#;
    let empty = r#"{"method":"mcpServer/elicitation/request","id":9,"params":{"threadId":"th","serverName":"s","mode":"form","message":"Go on?","requestedSchema":{"type":"object","properties":{}}}}"#;
    for l in [form, url, empty] {
        assert_elicitation_params(&params(l));
    }
    let accepted = answered(form, json!({"decision": "answer", "answers": {"Environment": "x", "Production": "y"}}))
        ["result"]
        .clone();
    assert_valid("McpServerElicitationRequestResponse.json", &accepted);
    let full = answered(
        form,
        json!({"decision": "answer", "answers": {"env": "Staging", "Replicas": "2.5", "Dry run": "yes"}}),
    )["result"]
        .clone();
    assert_eq!(full, json!({"action": "accept", "content": {"env": "staging", "replicas": 2.5, "dry": true}}));
    assert_valid("McpServerElicitationRequestResponse.json", &full);
    for l in [form, url, empty] {
        for a in [json!({"decision": "allow"}), json!({"decision": "deny"}), json!({"decision": "cancelled"})] {
            let a =
                if l == form && a["decision"] == "allow" { json!({"decision": "answer", "answers": {}}) } else { a };
            assert_valid("McpServerElicitationRequestResponse.json", &answered(l, a)["result"]);
        }
    }
    // Declined at once: a device verification runwire cannot give.
    let (mut c, _) = running(CodexOptions::default());
    let mut w = Vec::new();
    let verify = r#"{"method":"mcpServer/elicitation/request","id":10,"params":{"threadId":"th","serverName":"bank","mode":"openai/userVerification","title":"t","description":"d","challenge":"c"}}"#;
    assert_elicitation_params(&params(verify));
    assert!(c.line(verify.as_bytes(), &mut w).is_empty());
    assert_eq!(parse(&w[0])["result"], json!({"action": "decline"}));
    assert_valid("McpServerElicitationRequestResponse.json", &parse(&w[0])["result"]);
}

/// The machine requests: the time in codex's shape; auth refresh and
/// attestation refused with a JSON-RPC error.
#[test]
fn machine_request_answers_fit_codexs_schema() {
    let (mut c, _) = running(CodexOptions::default());
    let mut w = Vec::new();
    c.line(br#"{"method":"currentTime/read","id":11,"params":{"threadId":"th"}}"#, &mut w);
    c.line(br#"{"method":"account/chatgptAuthTokens/refresh","id":12,"params":{"reason":"unauthorized"}}"#, &mut w);
    c.line(br#"{"method":"attestation/generate","id":13,"params":{}}"#, &mut w);
    assert_eq!(w.len(), 3);
    assert_valid("CurrentTimeReadResponse.json", &parse(&w[0])["result"]);
    for l in &w[1..] {
        let mut e = parse(l);
        e.as_object_mut().unwrap().remove("jsonrpc");
        assert_valid("JSONRPCError.json", &e);
    }
}

// ---- what codex says: the adapters table -------------------------------------

/// `(kind, name) -> what runwire does` from `spec/adapters.md`'s codex 0.169.0 table.
fn table() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("spec/adapters.md")).unwrap();
    let mut rows = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        if cells.len() != 3 || !["notification", "server request", "item"].contains(&cells[0]) {
            continue;
        }
        if let Some(name) = cells[1].strip_prefix('`').and_then(|n| n.strip_suffix('`')) {
            rows.push((cells[0].to_string(), name.to_string(), cells[2].to_string()));
        }
    }
    rows
}

/// The names the schema defines: notification and server request methods,
/// thread item types.
fn defined() -> Vec<(String, String)> {
    let methods = |file: &str| -> Vec<String> {
        schema(file)["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["properties"]["method"]["enum"][0].as_str().unwrap().to_string())
            .collect()
    };
    let items: Vec<String> = schema("ServerNotification.json")["definitions"]["ThreadItem"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["properties"]["type"]["enum"][0].as_str().unwrap().to_string())
        .collect();
    let mut all = Vec::new();
    all.extend(methods("ServerNotification.json").into_iter().map(|m| ("notification".to_string(), m)));
    all.extend(methods("ServerRequest.json").into_iter().map(|m| ("server request".to_string(), m)));
    all.extend(items.into_iter().map(|t| ("item".to_string(), t)));
    all
}

#[test]
fn the_adapters_table_names_exactly_what_codex_0_169_0_defines() {
    let defined = defined();
    assert_eq!(defined.iter().filter(|(k, _)| k == "notification").count(), 86, "0.169.0 has 86 notifications");
    let listed: Vec<(String, String)> = table().into_iter().map(|(k, n, _)| (k, n)).collect();
    let missing: Vec<_> = defined.iter().filter(|d| !listed.contains(d)).collect();
    let extra: Vec<_> = listed.iter().filter(|l| !defined.contains(l)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "not in the table: {missing:?}\nnot in the schema: {extra:?}");
}

fn normalize(line: &Value) -> Vec<String> {
    let mut n = Normalizer::new(Adapter::Codex, Options { clock: Clock::Fixed(0), ..Options::default() });
    n.push(line.to_string().as_bytes())
        .iter()
        .map(|e| match &e.data {
            Data::Custom(c) => format!("custom({})", c.name),
            Data::Error(d) => format!("error({})", d.code),
            d => d.type_name().to_string(),
        })
        .collect()
}

#[test]
fn everything_codex_defines_is_handled_as_the_table_says() {
    for (kind, name, does) in table() {
        let class = does.split([':', ' ']).next().unwrap_or("");
        let (line, want): (Value, Option<Vec<&str>>) = match (kind.as_str(), class) {
            ("notification", "skipped") => (json!({"method": name, "params": {"threadId": "th"}}), Some(vec![])),
            ("notification", "notice") => (
                json!({"method": name, "params": {"message": "m", "summary": "m"}}),
                Some(vec!["custom(runwire.notice)"]),
            ),
            ("notification", _) => (json!({"method": name, "params": {}}), None),
            // (An elicitation with no mode nor form would be declined with a notice: a URL one is asked.)
            ("server request", _) => (
                json!({"method": name, "id": 9, "params": {"mode": "url", "url": "https://x.test", "message": "m"}}),
                Some(vec![]),
            ),
            ("item", c) => {
                let want = match c {
                    "skipped" | "text" => vec![],
                    "tool" => vec!["tool_call", "tool_result"],
                    "notice" => vec!["custom(runwire.subagent)"],
                    other => panic!("item {name}: unknown class {other:?} ({does})"),
                };
                (json!({"method": "item/completed", "params": {"item": {"type": name, "id": "i1"}}}), Some(want))
            }
            _ => unreachable!(),
        };
        let got = normalize(&line);
        match want {
            Some(want) => assert_eq!(got, want, "{kind} {name} ({does})"),
            // Mapped: whatever the (empty) params make of it, it is known.
            None => assert!(
                !got.iter().any(|g| g == "error(unknown_kind)" || g == "custom(runwire.notice)"),
                "{kind} {name} is mapped, yet: {got:?}"
            ),
        }
    }
}

#[test]
fn a_notification_of_a_newer_codex_is_a_notice_never_an_error() {
    let got = normalize(&json!({"method": "thread/brandNew/changed", "params": {"threadId": "th"}}));
    assert_eq!(got, ["custom(runwire.notice)"]);
}

// ---- the committed schema is the pinned binary's -----------------------------

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn the_committed_schema_is_what_the_pinned_codex_generates() {
    support::need(&["real-agents"]);
    let out = support::scratch("codex-schema");
    let codex = Path::new(ROOT).join("realagents/node_modules/.bin/codex");
    let st = std::process::Command::new(&codex)
        .args(["app-server", "generate-json-schema", "--experimental", "--out"])
        .arg(&out)
        .env("CODEX_HOME", &out)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", codex.display()));
    // Its stderr (a warning about the temp dir) only with a failure.
    assert!(
        st.status.success(),
        "codex app-server generate-json-schema: {}\n{}",
        st.status,
        String::from_utf8_lossy(&st.stderr)
    );
    let mut files = Vec::new();
    for d in ["", "v1", "v2"] {
        for e in std::fs::read_dir(schema_dir().join(d)).unwrap().flatten() {
            if e.path().is_file() {
                files.push(Path::new(d).join(e.file_name()));
            }
        }
    }
    assert!(files.len() >= 13, "{files:?}");
    for f in files {
        let committed = std::fs::read(schema_dir().join(&f)).unwrap();
        let generated = std::fs::read(out.join(&f)).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(committed == generated, "{} differs from what the pinned codex generates", f.display());
    }
}
