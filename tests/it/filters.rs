//! What the three filters share: a failed write names stdout and exits 3, and
//! a stream of bad lines is reported line by line only up to a bound.

use assert_cmd::Command;
use std::fs::OpenOptions;

const EVENT: &str = r#"{"v":"events/v1","seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"turn_start","data":{}}"#;

#[test]
fn a_failed_write_names_stdout_and_exits_3() {
    for (bin, args, input) in [
        ("normalize-events", vec!["codex"], r#"{"type":"turn.started"}"#.to_string()),
        ("agui-translate", vec![], EVENT.to_string()),
        ("sse-encode", vec![], EVENT.to_string()),
    ] {
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin(bin))
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(full)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), format!("{input}\n").as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{bin}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with(&format!("{bin}: stdout: ")), "{bin}: {err}");
    }
}

#[test]
fn bad_lines_are_reported_up_to_a_bound_then_counted() {
    let garbage = "not json\n".repeat(1000);
    for bin in ["agui-translate", "sse-encode"] {
        let out = Command::cargo_bin(bin).unwrap().write_stdin(garbage.clone()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{bin}");
        let err = String::from_utf8(out.stderr).unwrap();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 101, "{bin}");
        assert!(lines[0].starts_with(&format!("{bin}: stdin:1: ")), "{}", lines[0]);
        assert_eq!(lines[100], format!("{bin}: stdin: 1000 bad lines in all; only the first 100 were reported"));
    }
}

/// A line over the line cap (runwire::util::pipe::MAX_LINE) is skimmed as it
/// streams past: normalize-events reads it with its long strings cut and
/// reports its size; agui-translate and sse-encode report it with its size.
/// The lines around it go through.
#[test]
fn a_line_over_the_cap_is_reported_with_its_size_and_the_stream_goes_on() {
    let size = runwire::util::pipe::MAX_LINE + 1;
    let text = "a".repeat(size - 100);
    let huge_claude =
        format!(r#"{{"type":"assistant","message":{{"id":"m","content":[{{"type":"text","text":"{text}"}}]}}}}"#);
    let huge_claude = format!("{huge_claude}{}", " ".repeat(size - huge_claude.len()));
    assert_eq!(huge_claude.len(), size);
    let input = format!("{{\"type\":\"turn.started\"}}\n{huge_claude}\n{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"after\"}}\n");
    let out = Command::cargo_bin("normalize-events")
        .unwrap()
        .arg("claude")
        .env("SOURCE_DATE_EPOCH", "0")
        .write_stdin(input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a line not used flags the run (spec/exit-codes.md)");
    let evs: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let at_2: Vec<&serde_json::Value> = evs.iter().filter(|e| e["seq"].to_string().starts_with("\"2.")).collect();
    assert_eq!(at_2.len(), 2, "{evs:?}");
    assert_eq!(at_2[0]["type"], "token_delta");
    assert_eq!(at_2[0]["data"]["text"].as_str().unwrap(), "a".repeat(64 * 1024), "its text, cut to 64 KiB");
    assert_eq!(at_2[1]["type"], "error");
    assert_eq!(at_2[1]["data"]["code"], "line_too_long");
    let reason = at_2[1]["data"]["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("line of {size} bytes")) && reason.contains("cut"), "{reason}");
    assert!(!at_2[1]["data"]["fatal"].as_bool().unwrap());
    assert!(evs.iter().any(|e| e["seq"] == "3.1" && e["data"]["text"] == "after"), "the stream goes on");

    let huge_event = format!(
        r#"{{"v":"events/v1","seq":2,"ts":"2026-01-01T00:00:00.000Z","type":"token_delta","data":{{"text":"{}","channel":"text","message":"m"}}}}"#,
        "b".repeat(size)
    );
    let after = r#"{"v":"events/v1","seq":3,"ts":"2026-01-01T00:00:00.000Z","type":"exit","data":{"rc":0,"ok":true}}"#;
    for bin in ["agui-translate", "sse-encode"] {
        let out =
            Command::cargo_bin(bin).unwrap().write_stdin(format!("{EVENT}\n{huge_event}\n{after}\n")).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{bin}: a skipped line flags the run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("stdin:2: line of {} bytes is over the", huge_event.len())), "{bin}: {err}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.len() < 10_000, "{bin}: nothing of the long line is written");
        assert!(
            stdout.contains("RUN_FINISHED") || stdout.contains("\"exit\""),
            "{bin}: the line after it went through: {stdout}"
        );
    }
}

/// spec/exit-codes.md's one rule for the three filters: 1 when any line was
/// unusable, every usable line still written.
#[test]
fn every_filter_exits_1_on_an_unusable_line_and_writes_the_rest() {
    let codex_ok = r#"{"type":"turn.started"}"#;
    for (bin, args, good) in [
        ("normalize-events", vec!["codex"], codex_ok),
        ("agui-translate", vec![], EVENT),
        ("sse-encode", vec![], EVENT),
    ] {
        let out =
            Command::cargo_bin(bin).unwrap().args(&args).write_stdin(format!("garbage\n{good}\n")).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{bin}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with(&format!("{bin}: stdin:1: ")), "{bin}: {err}");
        assert!(!out.stdout.is_empty(), "{bin}: the usable line is still written");
        let out = Command::cargo_bin(bin).unwrap().args(&args).write_stdin(format!("{good}\n")).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{bin}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let garbage = "not json\n".repeat(1000);
    let out = Command::cargo_bin("normalize-events").unwrap().arg("claude").write_stdin(garbage).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 101, "{err}");
    assert_eq!(lines[100], "normalize-events: stdin: 1000 bad lines in all; only the first 100 were reported");
}

/// A file argument, as jq and rg take one; `-` is stdin; one source only.
#[test]
fn every_filter_reads_a_file_argument_and_dash_is_stdin() {
    let dir = std::env::temp_dir().join(format!("runwire-filters-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let claude = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/claude/bb-turn-tools.partial.jsonl");
    let events = dir.join("events.jsonl");
    let run = |bin: &str, args: &[&std::ffi::OsStr], stdin: &[u8]| {
        Command::cargo_bin(bin).unwrap().args(args).env("SOURCE_DATE_EPOCH", "0").write_stdin(stdin).output().unwrap()
    };
    let by_flag = run("normalize-events", &["claude".as_ref(), "--input".as_ref(), claude.as_os_str()], b"");
    assert_eq!(by_flag.status.code(), Some(0));
    let by_arg = run("normalize-events", &["claude".as_ref(), claude.as_os_str()], b"");
    assert_eq!((by_arg.status.code(), &by_arg.stdout), (Some(0), &by_flag.stdout));
    let by_dash = run("normalize-events", &["claude".as_ref(), "-".as_ref()], &std::fs::read(&claude).unwrap());
    assert_eq!(by_dash.status.code(), Some(0));
    assert_eq!(by_dash.stdout.len(), by_flag.stdout.len(), "stdin: the same events, timed the same");
    std::fs::write(&events, &by_arg.stdout).unwrap();
    for bin in ["agui-translate", "sse-encode"] {
        let by_arg = run(bin, &[events.as_os_str()], b"");
        let by_stdin = run(bin, &[], &by_flag.stdout);
        assert_eq!((by_arg.status.code(), &by_arg.stdout), (Some(0), &by_stdin.stdout), "{bin}");
        let both = run(bin, &["--input".as_ref(), events.as_os_str(), events.as_os_str()], b"");
        assert_eq!(both.status.code(), Some(2), "{bin}: one source");
    }
    let both =
        run("normalize-events", &["claude".as_ref(), "--input".as_ref(), claude.as_os_str(), claude.as_os_str()], b"");
    assert_eq!(both.status.code(), Some(2));
    let missing = run("normalize-events", &["claude".as_ref(), dir.join("nope").as_os_str()], b"");
    assert_eq!(missing.status.code(), Some(3));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Most lines JSON of another agent: said on stderr, with the adapter that reads them.
#[test]
fn a_log_of_another_agent_gets_a_hint_naming_the_right_adapter() {
    let claude =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/claude/bb-turn-tools.partial.jsonl")).unwrap();
    let n = claude.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
    let out =
        Command::cargo_bin("normalize-events").unwrap().arg("codex").write_stdin(claude.clone()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.lines().last().unwrap(),
        format!("normalize-events: stdin: {n} of {n} lines were not codex events; is this a claude log? (normalize-events claude)")
    );
    let out = Command::cargo_bin("normalize-events").unwrap().arg("claude").write_stdin(claude).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8(out.stderr).unwrap().contains("lines were not"));
    // Not JSON at all: no guess at an agent.
    let out = Command::cargo_bin("normalize-events").unwrap().arg("codex").write_stdin("a\nb\n").output().unwrap();
    assert!(!String::from_utf8(out.stderr).unwrap().contains("lines were not"));
}

/// The other binaries that write a listing or a record to stdout say where
/// a failed write failed too (`<bin>: stdout: …`, exit 3): `runs list`,
/// `liveness set`, and `runwire-session`, whose error named the agent's
/// program instead.
#[test]
fn the_other_writers_name_stdout_when_a_write_fails() {
    let dir = crate::support::scratch("full-stdout");
    let home = dir.join("home");
    let registered = std::process::Command::new(assert_cmd::cargo::cargo_bin("runs"))
        .env("HARNESS_HOME", &home)
        .args(["register", "--slug", "x", "--repo-root"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(registered.status.success(), "{registered:?}");
    let rs = dir.join("rs");
    std::fs::create_dir_all(&rs).unwrap();
    let rs = rs.to_str().unwrap();
    for (bin, args) in [
        ("runs", vec!["list", "--json"]),
        ("liveness", vec!["--runstate", rs, "set", "feat", "t1", r#"{"pid":1}"#]),
        ("runwire-session", vec!["claude", "--input", "/dev/null", "--", "/bin/true"]),
    ] {
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin(bin))
            .env("HARNESS_HOME", &home)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{bin}: {err}");
        assert!(err.starts_with(&format!("{bin}: stdout: ")), "{bin}: {err}");
    }
}
