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
