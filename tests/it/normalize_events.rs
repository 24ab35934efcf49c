//! normalize-events, end to end through the binary: goldens over every
//! fixture, seq purity and exact resume, de-duplication, hostile input,
//! closed pipes, --follow on a growing file, and the CLI contract.

use crate::support;

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const EPOCH: &str = "1788000000";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every fixture, with its adapter (the directory name).
fn fixtures() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for adapter in ["claude", "cursor", "codex"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures").join(adapter))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no fixtures for {adapter}");
        out.extend(files.into_iter().map(|f| (adapter.to_string(), f)));
    }
    out
}

fn normalize(adapter: &str, input: &[u8], extra: &[&str]) -> (String, String, i32) {
    let out = Command::cargo_bin("normalize-events")
        .unwrap()
        .arg(adapter)
        .args(extra)
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .write_stdin(input.to_vec())
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).expect("output is UTF-8"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// The exit code spec/exit-codes.md gives for this output: 1 when a line
/// was unusable (an error event of one of these codes), else 0.
fn exit_for(stdout: &str) -> i32 {
    const UNUSABLE: [&str; 5] = ["not_json", "unknown_kind", "invalid_line", "missing_id", "line_too_long"];
    let flagged =
        events(stdout).iter().any(|e| e["type"] == "error" && UNUSABLE.iter().any(|c| e["data"]["code"] == *c));
    i32::from(flagged)
}

fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad output line {l}: {e}"))).collect()
}

/// (line, sub) of an event's seq.
fn seq(e: &Value) -> (u64, u32) {
    match &e["seq"] {
        Value::Number(n) => (n.as_u64().unwrap(), 0),
        Value::String(s) => {
            let (l, k) = s.split_once('.').expect("string seq has a dot");
            (l.parse().unwrap(), k.parse().unwrap())
        }
        other => panic!("bad seq {other}"),
    }
}

#[test]
fn goldens_match_for_every_fixture() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    for (adapter, path) in fixtures() {
        let input = std::fs::read(&path).unwrap();
        let (out, err, code) = normalize(&adapter, &input, &["--run", "run-1", "--task", "t1"]);
        assert_eq!(code, exit_for(&out), "{}: {err}", path.display());
        let name = path.file_name().unwrap().to_string_lossy().replace(".jsonl", ".events.jsonl");
        let golden = root().join("fixtures/golden/events").join(&adapter).join(name);
        if update {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::write(&golden, &out).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&golden)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create)", golden.display()));
        assert!(out == want, "{} differs from {}", path.display(), golden.display());
    }
}

#[test]
fn every_event_has_the_envelope_and_a_line_derived_seq() {
    for (adapter, path) in fixtures() {
        let input = std::fs::read(&path).unwrap();
        let lines = input.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() as u64;
        let (out, _, _) = normalize(&adapter, &input, &["--run", "R", "--task", "T"]);
        let evs = events(&out);
        let mut per_line: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        let mut last = (0, 0);
        for e in &evs {
            assert_eq!(e["v"], "events/v1");
            assert_eq!(e["run"], "R");
            assert_eq!(e["task"], "T");
            let s = seq(e);
            assert!(s > last, "{}: seq not increasing at {s:?}", path.display());
            assert!(s.0 >= 1 && s.0 <= lines, "{}: seq {s:?} outside 1..={lines}", path.display());
            last = s;
            per_line.entry(s.0).or_default().push(s.1);
        }
        for (line, subs) in per_line {
            let want: Vec<u32> = if subs.len() == 1 { vec![0] } else { (1..=subs.len() as u32).collect() };
            assert_eq!(subs, want, "{} line {line}", path.display());
        }
    }
}

#[test]
fn two_reads_give_identical_ids_and_data() {
    for (adapter, path) in fixtures() {
        let run = |_| {
            let out = Command::cargo_bin("normalize-events")
                .unwrap()
                .args([adapter.as_str(), "--input"])
                .arg(&path)
                .env_remove("SOURCE_DATE_EPOCH")
                .output()
                .unwrap();
            events(&String::from_utf8(out.stdout).unwrap())
                .into_iter()
                .map(|e| (e["seq"].clone(), e["type"].clone(), e["data"].clone(), e.get("session").cloned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(2), "{}", path.display());
    }
}

#[test]
fn after_resumes_exactly_at_every_cut() {
    for (adapter, path) in fixtures() {
        let input = std::fs::read(&path).unwrap();
        let (full, _, full_code) = normalize(&adapter, &input, &[]);
        let lines: Vec<&str> = full.lines().collect();
        // Every cut point for small outputs, a sample for long ones.
        let step = (lines.len() / 25).max(1);
        for i in (0..lines.len()).step_by(step) {
            let e: Value = serde_json::from_str(lines[i]).unwrap();
            let id = match &e["seq"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let (rest, _, code) = normalize(&adapter, &input, &["--after", &id]);
            assert_eq!(code, full_code, "the whole input is read, and judged, whatever --after");
            let want: String = lines[i + 1..].iter().map(|l| format!("{l}\n")).collect();
            assert_eq!(rest, want, "{} --after {id}", path.display());
        }
    }
}

/// Final text per message id, from the source's whole `assistant` blocks.
fn claude_final_texts(input: &str) -> BTreeMap<(String, String), String> {
    let mut m = BTreeMap::new();
    for l in input.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        if v["type"] != "assistant" {
            continue;
        }
        let id = v["message"]["id"].as_str().unwrap().to_string();
        for b in v["message"]["content"].as_array().unwrap() {
            let (chan, key) = match b["type"].as_str() {
                Some("text") => ("text", "text"),
                Some("thinking") => ("reasoning", "thinking"),
                _ => continue,
            };
            m.entry((id.clone(), chan.to_string())).or_insert_with(String::new).push_str(b[key].as_str().unwrap());
        }
    }
    m.retain(|_, t| !t.is_empty());
    m
}

fn emitted_texts(evs: &[Value]) -> BTreeMap<(String, String), String> {
    let mut m = BTreeMap::new();
    for e in evs.iter().filter(|e| e["type"] == "token_delta") {
        let d = &e["data"];
        m.entry((d["message"].as_str().unwrap().to_string(), d["channel"].as_str().unwrap().to_string()))
            .or_insert_with(String::new)
            .push_str(d["text"].as_str().unwrap());
    }
    m
}

#[test]
fn claude_partial_text_is_never_doubled() {
    for name in [
        "bb-turn-tools.partial",
        "bb-subagent.partial",
        "bb-approval-deny.partial",
        "bb-stop-interrupt.resumed.partial",
        "bb-auth-failure",
        "synthetic.non-partial-thinking",
    ] {
        let input = std::fs::read_to_string(root().join(format!("fixtures/claude/{name}.jsonl"))).unwrap();
        let (out, _, _) = normalize("claude", input.as_bytes(), &[]);
        let evs = events(&out);
        assert_eq!(emitted_texts(&evs), claude_final_texts(&input), "{name}");
        let tool_ids: Vec<&str> =
            evs.iter().filter(|e| e["type"] == "tool_call").map(|e| e["data"]["id"].as_str().unwrap()).collect();
        let mut uniq = tool_ids.clone();
        uniq.dedup();
        assert_eq!(tool_ids, uniq, "{name}: a tool call was emitted twice");
    }
}

#[test]
fn claude_killed_midstream_keeps_streamed_text_and_has_no_turn_end() {
    let input = std::fs::read(root().join("fixtures/claude/bb-stop-interrupt.killed-midstream.partial.jsonl")).unwrap();
    let (out, _, _) = normalize("claude", &input, &[]);
    let evs = events(&out);
    assert!(evs.iter().all(|e| e["type"] != "turn_end"));
    let text: String =
        evs.iter().filter(|e| e["type"] == "token_delta").map(|e| e["data"]["text"].as_str().unwrap()).collect();
    assert!(text.starts_with("# The History of the UNIX Shell"), "{}", &text[..40]);
}

#[test]
fn cursor_partial_output_equals_the_result_text_once() {
    for name in [
        "synthetic.partial-output",
        "cursor-hack-direct-sleep",
        "cursor-hack-parallel-sleep",
        "cursor-hack-subagent-sleep-v2",
    ] {
        let input = std::fs::read_to_string(root().join(format!("fixtures/cursor/{name}.jsonl"))).unwrap();
        let result =
            input.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|v| v["type"] == "result").unwrap()
                ["result"]
                .as_str()
                .unwrap()
                .to_string();
        let (out, _, _) = normalize("cursor", input.as_bytes(), &[]);
        let text: String = events(&out)
            .iter()
            .filter(|e| e["type"] == "token_delta" && e["data"]["channel"] == "text")
            .map(|e| e["data"]["text"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(text, result, "{name}");
    }
}

#[test]
fn codex_legacy_deltas_then_whole_message_add_only_the_missing_part() {
    let input = std::fs::read(root().join("fixtures/codex/synthetic.legacy-deltas.jsonl")).unwrap();
    let (out, _, _) = normalize("codex", &input, &[]);
    let texts = emitted_texts(&events(&out));
    assert_eq!(texts.values().cloned().collect::<Vec<_>>(), vec!["**Greeting**".to_string(), "Hi there!".to_string()]);
}

#[test]
fn sessions_are_captured_and_stamped() {
    let cases = [
        ("claude", "fixtures/claude/bb-turn-tools.partial.jsonl", "d8785ba1-3fa6-4606-b465-f13165cc441f"),
        ("cursor", "fixtures/cursor/cursor-hack-parallel-sleep.jsonl", "1e273e42-21dd-4b5e-9c2a-1cbbde35ae1c"),
        ("codex", "fixtures/codex/openai-docs-exec-sample.jsonl", "0199a213-81c0-7800-8aa1-bbab2a035a53"),
    ];
    for (adapter, file, session) in cases {
        let (out, _, _) = normalize(adapter, &std::fs::read(root().join(file)).unwrap(), &[]);
        let evs = events(&out);
        assert!(!evs.is_empty());
        assert!(evs.iter().all(|e| e["session"] == session), "{file}");
    }
}

#[test]
fn the_status_line_session_is_stamped_when_the_stream_named_none_in_every_adapter() {
    let status = r#"{"type":"runwire.status","ok":false,"rc":1,"session_id":"s9","detail":"d","files":[]}"#;
    let turn = [
        ("claude", r#"{"type":"keep_alive"}"#),
        ("cursor", r#"{"type":"thinking","subtype":"completed"}"#),
        ("codex", r#"{"type":"turn.started"}"#),
    ];
    for (adapter, line) in turn {
        let (out, _, code) = normalize(adapter, format!("{line}\n{status}\n").as_bytes(), &[]);
        assert_eq!(code, 0);
        let evs = events(&out);
        let exit = evs.last().unwrap();
        assert_eq!((exit["type"].as_str(), exit["session"].as_str()), (Some("exit"), Some("s9")), "{adapter}: {out}");
        // Earlier events were written before the id was known and stay without it.
        assert!(evs[..evs.len() - 1].iter().all(|e| e.get("session").is_none()), "{adapter}: {out}");
    }
    // A stream that named its session keeps it on the exit event too.
    let (out, _, _) =
        normalize("codex", format!("{{\"type\":\"thread.started\",\"thread_id\":\"th\"}}\n{status}\n").as_bytes(), &[]);
    assert_eq!(events(&out).last().unwrap()["session"], "th");
}

#[test]
fn secrets_never_reach_the_output() {
    let input = std::fs::read(root().join("fixtures/claude/synthetic.non-partial-thinking.jsonl")).unwrap();
    let (out, _, _) = normalize("claude", &input, &[]);
    for secret in ["sk-ant-api03-should-never-leave-the-box", "sk-proj-abcdefghijklmnopqrstuvwx"] {
        assert!(!out.contains(secret), "{secret} leaked");
    }
    assert!(out.contains("[REDACTED]"));
}

#[test]
fn hostile_lines_become_errors_and_the_stream_goes_on() {
    let init = r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#;
    let mut input = Vec::new();
    input.extend_from_slice(
        b"{\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"content\":[{\"type\":\"text\",\"text\":\"tru",
    ); // truncated
    input.push(b'\n');
    input.extend_from_slice(b"\x00\xff\xfe binary \x80\n");
    input.extend_from_slice(b"[1,2,3]\n");
    input.extend_from_slice(b"{\"type\":42}\n");
    input.extend_from_slice(b"{\"type\":\"brand_new_kind\"}\n");
    input.extend_from_slice(b"\n   \n");
    input.extend_from_slice(init.as_bytes());
    input.push(b'\n');
    let (out, err, code) = normalize("claude", &input, &[]);
    assert_eq!(code, 1, "unusable lines flag the run (spec/exit-codes.md): {err}");
    let evs = events(&out);
    let kinds: Vec<(String, String)> = evs
        .iter()
        .map(|e| (e["type"].as_str().unwrap().to_string(), e["data"]["code"].as_str().unwrap_or("").to_string()))
        .collect();
    let want = [
        ("error", "not_json"),
        ("error", "not_json"),
        ("error", "invalid_line"),
        ("error", "invalid_line"),
        ("error", "unknown_kind"),
        ("turn_start", ""),
    ];
    assert_eq!(kinds, want.map(|(a, b)| (a.to_string(), b.to_string())));
    assert!(evs[..5].iter().all(|e| e["data"]["fatal"] == false));
    // Blank lines consume their ordinals too.
    assert_eq!(seq(&evs[5]), (8, 0));
}

#[test]
fn crlf_input_normalizes_like_lf() {
    let lf = std::fs::read(root().join("fixtures/claude/bb-turn-tools.partial.jsonl")).unwrap();
    let crlf: Vec<u8> = lf.iter().flat_map(|&b| if b == b'\n' { vec![b'\r', b'\n'] } else { vec![b] }).collect();
    assert_eq!(normalize("claude", &lf, &[]).0, normalize("claude", &crlf, &[]).0);
}

#[test]
fn a_missing_final_newline_still_counts_as_a_line() {
    let (out, _, _) = normalize("claude", br#"{"type":"system","subtype":"init","session_id":"s"}"#, &[]);
    assert_eq!(events(&out).len(), 1);
}

#[test]
fn empty_input_is_empty_output() {
    let (out, err, code) = normalize("codex", b"", &[]);
    assert_eq!((out.as_str(), err.as_str(), code), ("", "", 0));
}

#[test]
fn huge_lines_are_capped() {
    // Under the 4 MiB line cap: read whole, the tool output cut at 64 KiB.
    let big = "x".repeat(3 * 1024 * 1024);
    let line = serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content": big}]}});
    let mut input = serde_json::to_vec(&line).unwrap();
    input.push(b'\n');
    input.extend_from_slice(big.as_bytes()); // a 3 MB line that is not JSON
                                             // Over the cap: skimmed, the tool result cut and closed with its id.
    let huge = "y".repeat(10 * 1024 * 1024);
    let over = serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content": huge}]}});
    let over = serde_json::to_vec(&over).unwrap();
    input.push(b'\n');
    input.extend_from_slice(&over);
    let (out, _, code) = normalize("claude", &input, &[]);
    assert_eq!(code, 1, "a line not JSON and one over the cap flag the run");
    let evs = events(&out);
    assert_eq!(evs[0]["data"]["truncated"], true);
    assert_eq!(evs[0]["data"]["bytes"], 3 * 1024 * 1024);
    assert_eq!(evs[0]["data"]["output"].as_str().unwrap().len(), 64 * 1024);
    assert_eq!(evs[1]["data"]["code"], "not_json");
    assert_eq!(evs[1]["data"]["raw"].as_str().unwrap().len(), 4096);
    assert_eq!(evs[2]["seq"], 3);
    assert_eq!(evs[2]["type"], "tool_result");
    assert_eq!(evs[2]["data"]["id"], "t2");
    assert_eq!(evs[2]["data"]["truncated"], true);
    assert_eq!(evs[2]["data"]["bytes"], 10 * 1024 * 1024);
    assert_eq!(evs[2]["data"]["output"].as_str().unwrap(), &huge[..64 * 1024]);
    assert_eq!(evs.len(), 3, "nothing else: every cut string is in the tool result");
    // Not a JSON object: reported with its size, as before.
    let mut input = vec![b'['; 5 * 1024 * 1024];
    input.extend_from_slice(b"\n{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\"}\n");
    let (out, _, code) = normalize("claude", &input, &[]);
    assert_eq!(code, 1, "an unusable line flags the run (spec/exit-codes.md)");
    let evs = events(&out);
    assert_eq!(evs[0]["data"]["code"], "line_too_long");
    assert!(evs[0]["data"]["reason"].as_str().unwrap().contains("line of 5242880 bytes"), "{}", evs[0]);
    assert!(evs[1..].iter().any(|e| e["data"]["text"] == "ok"), "the stream goes on");
}

#[test]
fn source_date_epoch_fixes_the_fallback_time_and_source_times_win() {
    let input = std::fs::read(root().join("fixtures/cursor/synthetic.partial-output.jsonl")).unwrap();
    let (out, _, _) = normalize("cursor", &input, &[]);
    let evs = events(&out);
    assert_eq!(evs[0]["ts"], "2026-08-29T10:40:00.000Z"); // init has no time of its own: SOURCE_DATE_EPOCH
    assert_eq!(evs[1]["ts"], "2026-08-29T10:40:00.100Z"); // timestamp_ms 1788000000100
}

#[test]
fn help_and_version_have_no_side_effects() {
    for flag in ["--help", "--version"] {
        let out =
            Command::cargo_bin("normalize-events").unwrap().args([flag, "--input", "/nonexistent/x"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(!out.stdout.is_empty());
    }
}

#[test]
fn usage_and_io_errors_have_their_codes_and_the_error_form() {
    let out = Command::cargo_bin("normalize-events").unwrap().arg("gemini").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::cargo_bin("normalize-events").unwrap().args(["claude", "--after", "1.0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::cargo_bin("normalize-events")
        .unwrap()
        .args(["claude", "--input", "/nonexistent/run.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("normalize-events: /nonexistent/run.log: "), "{err}");
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let fixture = std::fs::read(root().join("fixtures/claude/bb-subagent.partial.jsonl")).unwrap();
    let big: Vec<u8> = fixture.iter().copied().cycle().take(fixture.len() * 400).collect();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("normalize-events"))
        .arg("claude")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&big);
    });
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let _ = writer.join();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// `normalize-events --follow FILE | head -1`: once its reader is gone,
/// the follow ends quietly with 0 while the file is quiet, not at the
/// file's next line (there may be none). Before, it waited on for good.
#[test]
fn a_follow_ends_quietly_once_its_reader_is_gone_while_the_file_is_quiet() {
    let dir = support::scratch("runwire-follow-reader-gone");
    let log = dir.join("run.log");
    std::fs::write(&log, "{\"type\":\"thread.started\",\"thread_id\":\"th-1\"}\n{\"type\":\"turn.started\"}\n")
        .unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("normalize-events"))
        .args(["codex", "--follow", "--input"])
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains(r#""type":"turn_start""#), "{first}");
    let what = "normalize-events --follow, 5 s after its reader left, the file quiet";
    let (status, err) = support::exit_within(&mut child, std::time::Duration::from_secs(5), what);
    assert_eq!((status.code(), err.as_str()), (Some(0), ""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn follow_streams_a_growing_file_and_stops_at_the_status_line() {
    let dir = support::scratch("runwire-follow");
    let log = dir.join("run.log");
    let mut f = std::fs::File::create(&log).unwrap();
    writeln!(f, r#"{{"type":"thread.started","thread_id":"th-1"}}"#).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("normalize-events"))
        .args(["codex", "--follow", "--input"])
        .arg(&log)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let t0 = Instant::now();
    // Written after the reader started: must arrive without the file being closed.
    writeln!(f, r#"{{"type":"turn.started"}}"#).unwrap();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains(r#""type":"turn_start""#), "{first}");
    // A line written in two pieces is only read once complete.
    write!(f, r#"{{"type":"item.completed","item":{{"id":"i1","#).unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    writeln!(f, r#""type":"agent_message","text":"hi"}}}}"#).unwrap();
    let second = lines.next().unwrap().unwrap();
    assert!(second.contains(r#""text":"hi""#), "{second}");
    writeln!(f, r#"{{"type":"runwire.status","ok":true,"rc":0,"session_id":"th-1","detail":"","files":[]}}"#).unwrap();
    let third = lines.next().unwrap().unwrap();
    assert!(third.contains(r#""type":"exit""#), "{third}");
    assert!(lines.next().is_none());
    assert!(child.wait().unwrap().success());
    assert!(t0.elapsed() < Duration::from_secs(20));
    let _ = std::fs::remove_dir_all(dir);
    let _ = Path::new("");
}

/// The peak resident memory of a live process, in kB (`VmHWM`).
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A 5 MB tool result (a screenshot, a big file read) is over the 4 MiB
/// line cap: its line is skimmed as it streams, so the tool call is still
/// closed, with its id, cut to 64 KiB and flagged with its original size,
/// and normalize-events stays under 32 MB.
#[test]
fn a_5_mb_tool_result_closes_its_call_in_bounded_memory() {
    let size = 5_000_000;
    let call = serde_json::json!({"type":"assistant","message":{"id":"m1","role":"assistant","content":[
        {"type":"tool_use","id":"toolu_big","name":"Read","input":{"file_path":"/shot.png"}}]}});
    let result = serde_json::json!({"type":"user","message":{"role":"user","content":[
        {"type":"tool_result","tool_use_id":"toolu_big","is_error":false,"content":[{"type":"text","text":"z".repeat(size)}]}]}});
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("normalize-events"))
        .arg("claude")
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut input = format!("{call}\n{result}\n").into_bytes();
    input.extend_from_slice(b"{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\"}\n");
    let writer = std::thread::spawn(move || {
        stdin.write_all(&input).unwrap();
        // Held open until the peak is read: the process is still alive then.
        stdin
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut got = Vec::new();
    while let Some(Ok(l)) = lines.next() {
        let ev: Value = serde_json::from_str(&l).unwrap();
        let last = ev["type"] == "turn_end";
        got.push(ev);
        if last {
            break;
        }
    }
    let peak = peak_rss_kb(child.id());
    drop(writer.join().unwrap());
    assert!(child.wait().unwrap().success());
    let results: Vec<&Value> = got.iter().filter(|e| e["type"] == "tool_result").collect();
    assert_eq!(results.len(), 1, "{got:?}");
    let r = &results[0]["data"];
    assert_eq!(r["id"], "toolu_big");
    assert_eq!(r["truncated"], true);
    assert_eq!(r["bytes"], size);
    assert_eq!(r["output"].as_str().unwrap().len(), 64 * 1024);
    assert!(!got.iter().any(|e| e["type"] == "error"), "nothing lost, nothing to report: {got:?}");
    assert!(peak <= 32 * 1024, "normalize-events peaked at {peak} kB");
}

/// A Claude tool call whose input nests deeper than serde_json's 128 levels
/// keeps its input, as text, with exit 0: it was replaced by `{}`, unsaid.
#[test]
fn a_deeply_nested_tool_input_is_kept_as_text() {
    let d = 200;
    let input = format!("{{\"command\":{}{}}}", "[".repeat(d), "]".repeat(d));
    let line = format!(
        r#"{{"type":"assistant","message":{{"model":"m","id":"msg_1","type":"message","role":"assistant","content":[{{"type":"tool_use","id":"toolu_1","name":"Bash","input":{input}}}]}},"session_id":"s"}}"#
    );
    let (out, err, code) = normalize("claude", format!("{line}\n").as_bytes(), &[]);
    assert_eq!(code, 0, "{err}");
    let ev = events(&out);
    let call = ev.iter().find(|e| e["type"] == "tool_call").expect("the call");
    assert_eq!(call["data"]["args"].as_str(), Some(input.as_str()), "{call}");
}
