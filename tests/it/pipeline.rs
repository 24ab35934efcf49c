//! The three binaries chained through real pipes over every fixture: the SSE
//! bytes are golden, every frame is one well-formed AG-UI event, and each run
//! has exactly one terminal event whose kind matches how the agent's run ended.

use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin(name: &str) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin(name));
    c.env("SOURCE_DATE_EPOCH", "1788000000");
    c
}

/// `normalize-events A --input F | agui-translate | sse-encode`, through OS pipes.
/// Each stage's stderr (a noise line's report) is shown only when the test fails.
fn pipeline(adapter: &str, file: &std::path::Path) -> Vec<u8> {
    let mut n = bin("normalize-events")
        .args([adapter, "--input"])
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _n_err = crate::support::Quiet::capture(&format!("normalize-events {}", file.display()), &mut n);
    let mut t = bin("agui-translate")
        .stdin(n.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _t_err = crate::support::Quiet::capture("agui-translate", &mut t);
    let s = bin("sse-encode").stdin(t.stdout.take().unwrap()).stdout(Stdio::piped()).output().unwrap();
    // normalize-events exits 1 on a fixture with noise lines on purpose (spec/exit-codes.md): they are error events.
    let n_code = n.wait().unwrap().code();
    assert!(matches!(n_code, Some(0 | 1)) && t.wait().unwrap().success() && s.status.success(), "{}", file.display());
    s.stdout
}

fn fixtures() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for a in ["claude", "cursor", "codex"] {
        let mut fs: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures").join(a))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        fs.sort();
        out.extend(fs.into_iter().map(|f| (a.to_string(), f)));
    }
    out
}

#[test]
fn sse_goldens_over_every_fixture() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    for (a, f) in fixtures() {
        let got = pipeline(&a, &f);
        let golden = root()
            .join("fixtures/golden/sse")
            .join(&a)
            .join(f.file_name().unwrap().to_string_lossy().replace(".jsonl", ".sse"));
        if update {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::File::create(&golden).unwrap().write_all(&got).unwrap();
            continue;
        }
        let want =
            std::fs::read(&golden).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", golden.display()));
        assert!(got == want, "{} differs from {}", f.display(), golden.display());
    }
}

/// How each fixture's run must end: the terminal event and, for errors, its code.
fn expected_end(name: &str) -> (&'static str, Option<&'static str>) {
    match name {
        "bb-auth-failure" | "bb-app-server.auth-failure" => ("RUN_ERROR", Some("turn_failed")),
        "bb-stop-interrupt.killed-midstream.partial" | "synthetic.subagent-cut-off.partial" => {
            ("RUN_ERROR", Some("incomplete"))
        }
        "synthetic.resume-miss" | "synthetic.turn-failed-noise" => ("RUN_ERROR", Some("exit_nonzero")),
        "legacy-msg.vk.real-example-missing-api-key" => ("RUN_ERROR", Some("agent_error")),
        // Fragments cut from longer runs: no turn end, so the run is incomplete.
        "legacy-msg.vk.agent-message" | "legacy-msg.vk.mcp-tool-call" | "legacy-msg.vk.patch-apply" => {
            ("RUN_ERROR", Some("incomplete"))
        }
        _ => ("RUN_FINISHED", None),
    }
}

#[test]
fn every_frame_is_one_event_and_the_run_ends_as_the_agent_did() {
    for (a, f) in fixtures() {
        let sse = String::from_utf8(pipeline(&a, &f)).unwrap();
        assert!(!sse.contains('\r'));
        assert!(sse.ends_with("\n\n"));
        let events: Vec<Value> = sse
            .split_terminator("\n\n")
            .map(|frame| {
                let data = frame.strip_prefix("data: ").unwrap_or_else(|| panic!("{}: frame {frame:?}", f.display()));
                assert!(!data.contains('\n'));
                serde_json::from_str(data).unwrap()
            })
            .collect();
        assert_eq!(events[0]["type"], "RUN_STARTED", "{}", f.display());
        let terminals: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e["type"] == "RUN_FINISHED" || e["type"] == "RUN_ERROR")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(terminals, vec![events.len() - 1], "{}", f.display());
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let (kind, code) = expected_end(&name);
        let last = events.last().unwrap();
        assert_eq!(last["type"], kind, "{name}");
        if let Some(code) = code {
            assert_eq!(last["code"], code, "{name}");
        }
    }
}
