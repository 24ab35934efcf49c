//! `agui-translate` end to end: fixtures in `fixtures/events/`, expected
//! output in `fixtures/golden/agui/` (regenerate with `UPDATE_GOLDEN=1`).
//! Every output is also checked by the independent verifier in `support::verify`.

use crate::support;
use assert_cmd::Command;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Stdio;

const BIN: &str = "agui-translate";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    events: Vec<Value>,
}

/// Runs a fixture through stdin, compares stdout with its golden file and
/// verifies it as an AG-UI stream.
fn golden(name: &str, args: &[&str]) -> Run {
    golden_as(name, name, args)
}

/// Like [`golden`], with a golden file name of its own (same fixture, other flags).
fn golden_as(name: &str, golden_name: &str, args: &[&str]) -> Run {
    let input = std::fs::read(root().join(format!("fixtures/events/{name}.jsonl"))).expect("fixture");
    let out = Command::cargo_bin(BIN).unwrap().args(args).write_stdin(input).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let path = root().join(format!("fixtures/golden/agui/{golden_name}.jsonl"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &stdout).unwrap();
    } else {
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()));
        assert_eq!(stdout, want, "{name}: output differs from {}\nstderr: {stderr}", path.display());
    }
    let events = support::verify::verify_lines(&stdout)
        .unwrap_or_else(|e| panic!("{name}: invalid AG-UI stream: {e}\n{stdout}"));
    Run { code: out.status.code().unwrap_or(-1), stdout, stderr, events }
}

fn types(r: &Run) -> Vec<&str> {
    r.events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn last(r: &Run) -> &Value {
    r.events.last().unwrap()
}

#[test]
fn a_successful_run_finishes_with_usage() {
    let r = golden("finished", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    assert_eq!(
        types(&r),
        [
            "RUN_STARTED",
            "CUSTOM",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "CUSTOM",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "CUSTOM",
            "RUN_FINISHED"
        ]
    );
    let start = &r.events[0];
    assert_eq!(start["threadId"], "job-42", "the first event's run is the default thread");
    let run_id = start["runId"].as_str().unwrap();
    assert!(run_id.starts_with("run-") && run_id.len() == 20, "{run_id}");
    assert_eq!(r.events[6]["parentMessageId"], format!("{run_id}:m:msg_1"));
    assert_eq!(r.events[9]["messageId"], format!("{run_id}:tr:toolu_1"));
    let fin = last(&r);
    assert_eq!(fin["runId"], run_id);
    assert_eq!(fin["usage"][0]["inputTokens"], 120);
    assert_eq!(fin["usage"][0]["totalTokens"], 150);
    assert!(r.events.iter().all(|e| e["timestamp"].is_i64()));
}

#[test]
fn flags_override_the_ids() {
    let r = golden_as("exit_nonzero", "exit_nonzero.ids", &["--thread-id", "T1", "--run-id", "R1"]);
    assert_eq!(r.events[0]["threadId"], "T1");
    assert_eq!(r.events[0]["runId"], "R1");
    assert!(r.stdout.contains(r#""messageId":"R1:m:msg_1""#));
}

#[test]
fn a_nonzero_exit_is_a_run_error() {
    let r = golden("exit_nonzero", &[]);
    assert_eq!(r.code, 0);
    let e = last(&r);
    assert_eq!(e["type"], "RUN_ERROR");
    assert_eq!(e["code"], "exit_nonzero");
    assert_eq!(e["message"], "the agent exited with status 1: killed by SIGTERM");
    assert!(e.get("threadId").is_none() && e.get("runId").is_none());
}

#[test]
fn a_failed_last_turn_is_a_run_error() {
    let r = golden("turn_failed", &[]);
    let e = last(&r);
    assert_eq!((e["code"].as_str(), e["message"].as_str()), (Some("turn_failed"), Some("max turns reached")));
}

#[test]
fn a_killed_stream_is_incomplete() {
    let r = golden("killed", &[]);
    assert_eq!(r.code, 0);
    assert_eq!(types(&r)[types(&r).len() - 2..], ["TEXT_MESSAGE_END", "RUN_ERROR"]);
    assert_eq!(last(&r)["code"], "incomplete");
    assert_eq!(last(&r)["message"], "the agent's stream ended before the run finished");
}

#[test]
fn a_fatal_error_ends_the_run_and_later_events_are_ignored() {
    let r = golden("fatal_error", &[]);
    assert_eq!(r.code, 0, "ignoring late events is not an error");
    assert_eq!(
        (last(&r)["code"].as_str(), last(&r)["message"].as_str()),
        (Some("agent_error"), Some("API key invalid"))
    );
    assert_eq!(r.stderr, "agui-translate: stdin: ignored 2 event(s) after the run's terminal event\n");
}

#[test]
fn a_nonfatal_error_is_custom_and_the_run_goes_on() {
    let r = golden("nonfatal_error", &[]);
    let err = r.events.iter().find(|e| e["name"] == "runwire.error").expect("runwire.error");
    assert_eq!(err["value"], serde_json::json!({"reason":"retrying request","code":"api_retry","raw":"{\"retry\":1}"}));
    assert_eq!(last(&r)["type"], "RUN_FINISHED");
    let starts = r.events.iter().filter(|e| e["type"] == "TEXT_MESSAGE_START").count();
    assert_eq!(starts, 2, "the message is closed at the error and reopened after it");
}

#[test]
fn events_after_the_terminal_are_counted_on_stderr() {
    let r = golden("after_terminal", &[]);
    assert_eq!(r.code, 0);
    assert_eq!(last(&r)["type"], "RUN_FINISHED");
    assert_eq!(r.stderr, "agui-translate: stdin: ignored 2 event(s) after the run's terminal event\n");
}

#[test]
fn reasoning_spans_and_repeated_results() {
    let r = golden("reasoning", &[]);
    assert_eq!(r.code, 0);
    let t = types(&r);
    assert_eq!(
        t[1..7],
        [
            "CUSTOM",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END"
        ]
    );
    let run_id = r.events[0]["runId"].as_str().unwrap();
    let results: Vec<_> =
        r.events.iter().filter(|e| e["type"] == "TOOL_CALL_RESULT").map(|e| e["messageId"].clone()).collect();
    assert_eq!(results, [format!("{run_id}:tr:toolu_7"), format!("{run_id}:tr:toolu_7:2")]);
    // The call has no `message`: its parent is the turn's last text message.
    let call = r.events.iter().find(|e| e["type"] == "TOOL_CALL_START").unwrap();
    assert_eq!(call["parentMessageId"], format!("{run_id}:m:msg_1"));
    let status = r.events.iter().find(|e| e["name"] == "runwire.tool_result").unwrap();
    assert_eq!(
        status["value"],
        serde_json::json!({"toolCallId": format!("{run_id}:t:toolu_7"), "isError": true, "truncated": true, "bytes": 9000})
    );
    // No exit: the successful last turn_end decides.
    assert_eq!(last(&r)["type"], "RUN_FINISHED");
}

#[test]
fn empty_input_is_a_started_then_incomplete_run() {
    let r = golden("empty", &[]);
    assert_eq!(r.code, 0);
    assert_eq!(types(&r), ["RUN_STARTED", "RUN_ERROR"]);
    assert_eq!(r.events[0]["runId"], "run-cbf29ce484222325");
}

#[test]
fn a_bad_line_is_reported_skipped_and_flagged() {
    let r = golden("bad_line", &[]);
    assert_eq!(r.code, 1);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    assert!(lines[0].starts_with("agui-translate: stdin:2: not an events/v1 object"), "{}", lines[0]);
    assert_eq!(lines[1], r#"agui-translate: stdin:5: type: unknown event type "bogus""#);
    assert_eq!(last(&r)["type"], "RUN_FINISHED");
}

#[test]
fn input_flag_reads_a_file_and_names_it() {
    let path = root().join("fixtures/events/bad_line.jsonl");
    let out = Command::cargo_bin(BIN).unwrap().arg("--input").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with(&format!("agui-translate: {}:2: ", path.display())), "{stderr}");
    let missing = Command::cargo_bin(BIN).unwrap().args(["--input", "/nonexistent/x.jsonl"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(3));
    assert!(String::from_utf8(missing.stderr)
        .unwrap()
        .starts_with("agui-translate: /nonexistent/x.jsonl: No such file"));
}

#[test]
fn help_and_version_exit_zero_without_reading() {
    for flag in ["--help", "--version"] {
        // Had it read stdin, the bad line would be reported and a run emitted.
        let out = Command::cargo_bin(BIN).unwrap().arg(flag).write_stdin("not json\n").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(!stdout.is_empty() && !stdout.contains("\"type\""), "{stdout}");
        assert!(out.stderr.is_empty());
    }
    let out = Command::cargo_bin(BIN).unwrap().arg("--bogus").write_stdin("").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut junk: Vec<u8> = (0..=255u8).collect();
    junk.extend_from_slice(b"\n\xff\xfe{\"v\":\"events/v1\"}\n\0\r\n{}\n[1,2]\n\"s\"\n");
    let out = Command::cargo_bin(BIN).unwrap().write_stdin(junk).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    support::verify::verify_lines(&String::from_utf8(out.stdout).unwrap()).unwrap();
}

#[test]
fn a_closed_pipe_is_a_quiet_success() {
    let line = std::fs::read_to_string(root().join("fixtures/events/finished.jsonl")).unwrap();
    let delta = line.lines().nth(1).unwrap().to_string() + "\n";
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin(BIN))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for _ in 0..20_000 {
            if stdin.write_all(delta.as_bytes()).is_err() {
                break; // the child left early, as it should
            }
        }
    });
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    writer.join().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(stderr, "");
}

/// Its memory of tool calls is bounded by bytes: 2,500 calls with 16 KB
/// ids (each closed by its result) keep agui-translate under 32 MB (it
/// kept every id in five maps: about 400 MB here, 3 GB for 50,000), and
/// every call still gets its result under its own toolCallId.
#[test]
fn many_calls_with_long_ids_keep_its_memory_bounded() {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agui-translate"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let calls = 2_500;
    let (done, done_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let pad = "x".repeat(16_000);
        let mut seq = 1;
        for i in 0..calls {
            let id = format!("{pad}{i:08}");
            let ev = |seq: u64, kind: &str, data: Value| serde_json::json!({"v": "events/v1", "seq": seq, "ts": "2026-01-01T00:00:00.000Z", "type": kind, "data": data});
            let call = ev(seq, "tool_call", serde_json::json!({"id": id, "name": "B", "args": {}}));
            let result = ev(
                seq + 1,
                "tool_result",
                serde_json::json!({"id": id, "output": "ok", "is_error": false, "truncated": false, "bytes": 2}),
            );
            seq += 2;
            writeln!(stdin, "{call}\n{result}").unwrap();
        }
        // Held open until the peak is read: the process is still alive then.
        let _ = done_rx.recv();
        drop(stdin);
    });
    let mut out = std::io::BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let (mut results, mut matched) = (0, 0);
    let mut calls_seen = std::collections::HashSet::new();
    let mut line = Vec::new();
    let mut read =
        |out: &mut std::io::BufReader<std::process::ChildStdout>, results: &mut usize, matched: &mut usize| {
            use std::io::BufRead;
            line.clear();
            if out.read_until(b'\n', &mut line).unwrap() == 0 {
                return false;
            }
            // Only the frames this test counts are parsed (the rest is most of the bytes).
            let (start, result) =
                (line.starts_with(br#"{"type":"TOOL_CALL_START""#), line.starts_with(br#"{"type":"TOOL_CALL_RESULT""#));
            if start || result {
                let e: Value = serde_json::from_slice(&line).unwrap();
                let id = e["toolCallId"].as_str().unwrap().to_string();
                if start {
                    calls_seen.insert(id);
                } else {
                    *results += 1;
                    *matched += usize::from(calls_seen.remove(&id));
                }
            }
            true
        };
    // Most of the output (the rest may wait in its buffer for the input's end).
    while results < calls - 100 {
        assert!(read(&mut out, &mut results, &mut matched), "the output ended after {results} results");
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let peak: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    drop(done);
    while read(&mut out, &mut results, &mut matched) {}
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!((results, matched), (calls, calls), "each result names its own call");
    assert!(peak <= 32 * 1024, "agui-translate peaked at {peak} kB");
}
