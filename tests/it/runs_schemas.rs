//! The runs contracts in `spec/` checked against what the code writes: each
//! record the library produces is validated against its JSON Schema's
//! `type`, `required`, `const`, `enum`, `additionalProperties` and nested
//! `properties`/`items` (a subset of JSON Schema that needs no regex engine;
//! patterns are checked by the id tests instead).

use crate::support;

use runwire::runs::journal::{self, Record};
use runwire::runs::liveness;
use runwire::runs::plan::Plan;
use runwire::runs::registry::NewRun;
use runwire::runs::RunFiles;
use serde_json::Value;
use std::path::PathBuf;

fn schema(name: &str) -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec").join(name);
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn check(s: &Value, v: &Value, at: &str) -> Result<(), String> {
    match s.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => return Err(format!("{at}: not {t}: {v}")),
        Some(Value::Array(ts)) if !ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)) => {
            return Err(format!("{at}: none of {ts:?}: {v}"))
        }
        _ => {}
    }
    if let Some(c) = s.get("const") {
        if c != v {
            return Err(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        if !e.contains(v) {
            return Err(format!("{at}: {v} not in {e:?}"));
        }
    }
    if let Value::Object(o) = v {
        for r in s.get("required").and_then(Value::as_array).into_iter().flatten() {
            if !o.contains_key(r.as_str().unwrap()) {
                return Err(format!("{at}: missing required {r}"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(ps, x, &format!("{at}.{k}"))?,
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => return Err(format!("{at}: unknown key {k}")),
                    Some(ap @ Value::Object(_)) => check(ap, x, &format!("{at}.{k}"))?,
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(a), Some(items)) = (v, s.get("items")) {
        for (i, x) in a.iter().enumerate() {
            check(items, x, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

#[test]
fn journal_records_fit_runstate_v1() {
    let s = schema("runstate.schema.json");
    let mut states: Vec<&str> =
        s["properties"]["state"]["enum"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    states.sort();
    let mut code = journal::TASK_STATES.to_vec();
    code.sort();
    assert_eq!(states, code, "the schema's states are the code's");
    let runs: Vec<&str> =
        s["properties"]["run"]["enum"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(runs, journal::RUN_EVENTS.to_vec());
    let enum_of = |k: &str| -> Vec<String> {
        s["properties"][k]["enum"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
    };
    assert_eq!(enum_of("input"), journal::INPUT_EVENTS.to_vec());
    assert_eq!(enum_of("kind"), journal::INPUT_KINDS.to_vec());
    assert_eq!(enum_of("decision"), journal::INPUT_DECISIONS.to_vec());
    let mut asked = Record::input("claude-session", "a", "requested", "r1", "tool_approval");
    asked.tool = Some("Bash".into());
    asked.expires_at = Some("2026-01-01T00:10:00.000Z".into());
    let mut answered = Record::input("claude-session", "a", "answered", "r1", "deny");
    answered.by = Some("ana".into());
    let t = journal::TaskTotals { cost_usd: Some(0.25), tokens: Some(journal::TokenCount { input: 1, output: 2 }) };
    let ended = Record::task("runner", "a", "implemented", None).with_totals("a", Some(t));
    let idle = Record::run("runwire-serve", "idle").with_totals("agent", Some(journal::TaskTotals::default()));
    for r in [
        Record::task("runner", "a", "failed", Some(2)),
        Record::run("user", "steer-queued"),
        Record {
            detail: Some("its supervisor (pid 7) is gone".into()),
            ..Record::run("runwire-serve", "supervisor-gone")
        },
        asked,
        answered,
        ended,
        idle,
    ] {
        check(&s, &serde_json::to_value(&r).unwrap(), "record").unwrap();
    }
    // An interactive session's input records, as the library writes them.
    let req: runwire::pipeline::events::InputRequest = serde_json::from_value(serde_json::json!(
        {"id":"r1","kind":"question","questions":[{"question":"Tabs?","options":[{"label":"tabs"}],"multi_select":false}],
         "expires_at":"2026-01-01T00:05:00.000Z"}))
    .unwrap();
    let ans: runwire::pipeline::events::InputAnswer =
        serde_json::from_value(serde_json::json!({"id":"r1","decision":"answer","answers":{"Tabs?":"tabs"},"by":"ana","at":"2026-01-01T00:01:00.000Z"}))
            .unwrap();
    let requested = runwire::session::record::InputRecord::requested("runner", "a", &req, 0);
    let answered = runwire::session::record::InputRecord::answered("runner", "a", &ans, 0);
    // An approval's link (runwire-serve --public-url) and an answer through it.
    let mut linked = requested.clone();
    linked.links = Some(vec!["https://rw.example.net/a/eyJyIjoiYSJ9.c2ln".into()]);
    let by_link = runwire::pipeline::events::InputAnswer { door: Some("link".into()), ..ans.clone() };
    let by_link = runwire::session::record::InputRecord::answered("runner", "a", &by_link, 0);
    assert_eq!(serde_json::to_value(&by_link).unwrap()["door"], "link");
    let doors = s["properties"]["door"]["enum"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string());
    let code: Vec<String> = runwire::control::Door::ALL.iter().map(|d| d.as_str().to_string()).collect();
    assert_eq!(doors.collect::<Vec<_>>(), code, "the schema's doors are the code's");
    for r in [&requested, &answered, &linked, &by_link] {
        check(&s, &serde_json::to_value(r).unwrap(), "input record").unwrap();
    }
    assert_eq!(requested.kind.as_deref(), Some("question"));
    assert_eq!(answered.decision.as_deref(), Some("answer"));
    let inputs: Vec<&str> =
        s["properties"]["input"]["enum"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(inputs, ["requested", "answered"]);
    let bad = serde_json::json!({"v":"runstate/v1","ts":"x","actor":"a","task":"t","state":"done"});
    assert!(check(&s, &bad, "bad").is_err());
}

#[test]
fn plans_liveness_and_pointers_fit_their_schemas() {
    let plan = Plan::parse(
        br#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p","gate":"make","review":"codex"},
            {"id":"b","adapter":"codex","prompt":"q","deps":["a"]},
            {"id":"c","adapter":"acp","prompt":"r","cmd":["opencode","acp"]}],"waves":[["a","c"],["b"]]}"#,
    )
    .unwrap();
    check(&schema("plan.schema.json"), &serde_json::to_value(&plan).unwrap(), "plan").unwrap();

    let dir = support::scratch("runwire-schemas");
    let f = RunFiles::new(&dir, "s");
    let full = r#"{"pid":5,"pgid":5,"session_id":"x","logfile":"/l","state":"leased","started_ts":"2026-01-01T00:00:00.000Z"}"#;
    liveness::set(&f, liveness::parse_patch("a", full).unwrap()).unwrap();
    liveness::set(&f, liveness::parse_patch("-", r#"{"sock":"/s"}"#).unwrap()).unwrap();
    let on_disk: Value = serde_json::from_slice(&std::fs::read(f.live()).unwrap()).unwrap();
    check(&schema("liveness.schema.json"), &on_disk, "liveness").unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let p = NewRun { slug: "s".into(), repo_root: "/r".into(), ..NewRun::default() }
        .pointer("2026-01-01T00:00:00.000Z".into())
        .unwrap();
    check(&schema("registry-pointer.schema.json"), &serde_json::to_value(&p).unwrap(), "pointer").unwrap();
}

/// The one list of run statuses: `spec/LAYOUT.md`'s "Run statuses" section
/// names exactly the statuses the code gives and filters accept.
#[test]
fn the_layout_lists_exactly_the_run_statuses() {
    let layout = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec/LAYOUT.md")).unwrap();
    let section = layout.split("\n## Run statuses\n").nth(1).expect("a Run statuses section");
    let section = section.split("\n## ").next().unwrap();
    let listed: Vec<&str> =
        section.lines().filter_map(|l| l.strip_prefix("- `")).map(|l| l.split('`').next().unwrap()).collect();
    assert_eq!(listed, runwire::runs::view::STATUSES.to_vec());
    // The run records that say nothing of the state: the section's line names the code's.
    let line = section
        .lines()
        .find_map(|l| l.strip_prefix("Run records that say nothing of the run's state: "))
        .expect("the line naming the run records that say nothing of the state");
    let named: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
    assert_eq!(named, runwire::runs::journal::NO_STATE.to_vec());
    for s in runwire::runs::view::STATUSES {
        assert!(runwire::runs::list::Query::parse(None, None, Some(s), None).is_ok(), "{s}");
    }
}
