//! `sse-encode` end to end: byte-exact frames, resumption with `--after`,
//! no CR on the wire, bad lines reported, closed pipe.

use assert_cmd::Command;
use std::io::{Read, Write};
use std::process::Stdio;

const BIN: &str = "sse-encode";

fn run(args: &[&str], input: &[u8]) -> (i32, String, String) {
    let out = Command::cargo_bin(BIN).unwrap().args(args).write_stdin(input.to_vec()).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn frames_are_byte_exact() {
    let input = b"{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}";
    let (code, out, err) = run(&[], input);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
         data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n"
    );
}

#[test]
fn ids_come_from_the_named_field() {
    let input = b"{\"seq\":1,\"x\":\"a\"}\n{\"seq\":\"1.2\"}\n{\"other\":true}\n";
    let (code, out, _) = run(&["--id-from", "seq"], input);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "id: 1\ndata: {\"seq\":1,\"x\":\"a\"}\n\nid: 1.2\ndata: {\"seq\":\"1.2\"}\n\ndata: {\"other\":true}\n\n"
    );
}

#[test]
fn after_a_seq_resumes_exactly() {
    let input = b"{\"seq\":\"12.1\"}\n{\"seq\":\"12.2\"}\n{\"seq\":13}\n";
    let (code, out, err) = run(&["--id-from", "seq", "--after", "12.1"], input);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(out, "id: 12.2\ndata: {\"seq\":\"12.2\"}\n\nid: 13\ndata: {\"seq\":13}\n\n");
}

#[test]
fn after_a_plain_id_resumes_after_it() {
    let input = b"{\"id\":\"x\"}\n{\"id\":\"y\"}\n{\"id\":\"z\"}\n";
    let (_, out, _) = run(&["--id-from", "id", "--after", "y"], input);
    assert_eq!(out, "id: z\ndata: {\"id\":\"z\"}\n\n");
}

#[test]
fn after_needs_id_from() {
    let (code, out, err) = run(&["--after", "3"], b"{}\n");
    assert_eq!(code, 2);
    assert_eq!(out, "");
    assert!(err.contains("--id-from"), "{err}");
}

#[test]
fn cr_never_reaches_the_wire() {
    let input = b"{\"a\":\r1}\r\n{\"b\" : \"\\r\\n\"}\r\n";
    let (code, out, _) = run(&[], input);
    assert_eq!(code, 0);
    assert!(!out.contains('\r'), "{out:?}");
    assert_eq!(out, "data: {\"a\":1}\n\ndata: {\"b\" : \"\\r\\n\"}\n\n");
}

#[test]
fn a_bad_line_is_reported_skipped_and_flagged() {
    let input = b"{\"a\":1}\nnot json\n{\"seq\":\"a\\nb\"}\n\xff\xfe\n{\"b\":2}\n";
    let (code, out, err) = run(&["--id-from", "seq"], input);
    assert_eq!(code, 1);
    assert_eq!(out, "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with("sse-encode: stdin:2: not JSON"), "{}", lines[0]);
    assert!(lines[1].starts_with("sse-encode: stdin:3: seq: "), "{}", lines[1]);
    assert!(lines[2].starts_with("sse-encode: stdin:4: not JSON"), "{}", lines[2]);
}

#[test]
fn help_and_version_exit_zero_without_reading() {
    for flag in ["--help", "--version"] {
        let out = Command::cargo_bin(BIN).unwrap().arg(flag).write_stdin("{\"marker\":1}\n").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(!String::from_utf8(out.stdout).unwrap().contains("marker"));
        assert!(out.stderr.is_empty());
    }
}

#[test]
fn a_closed_pipe_is_a_quiet_success() {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin(BIN))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let line = b"{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"xxxxxxxxxxxxxxxx\"}\n";
        for _ in 0..20_000 {
            if stdin.write_all(line).is_err() {
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

mod props {
    use proptest::prelude::*;
    use runwire::pipeline::encode::{Encoder, SseOptions};

    /// Lines built from JSON-ish pieces, CR and whitespace included, so that
    /// many of them are valid JSON and many are not.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let piece = proptest::sample::select(
            &[
                "{",
                "}",
                "[",
                "]",
                ",",
                ":",
                "\"k\"",
                "\"seq\"",
                "\"a\\r\\nb\"",
                "1",
                "12.5",
                "-3",
                "true",
                "null",
                " ",
                "\t",
                "\r",
                "\"\u{e9}\"",
                "\\",
                "\"",
            ][..],
        );
        proptest::collection::vec(piece, 0..16).prop_map(|ps| ps.concat().into_bytes())
    }

    proptest! {
        #[test]
        fn frames_are_well_formed_and_carry_the_same_json(l in line(), raw in proptest::collection::vec(any::<u8>(), 0..64), with_id in any::<bool>()) {
            let opts = SseOptions { id_from: with_id.then(|| "seq".to_string()), after: None };
            let mut enc = Encoder::new(opts);
            // Arbitrary bytes: never a panic, whatever the verdict.
            let _ = enc.push(&raw);
            if let Ok(Some(frame)) = enc.push(&l) {
                prop_assert!(!frame.contains('\r'), "{frame:?}");
                prop_assert!(frame.ends_with("\n\n"));
                let body = frame.strip_suffix("\n\n").unwrap();
                let data = body.lines().last().unwrap();
                prop_assert_eq!(body.lines().count(), if body.starts_with("id: ") { 2 } else { 1 });
                let json = data.strip_prefix("data: ").unwrap();
                let got: serde_json::Value = serde_json::from_str(json).unwrap();
                let want: serde_json::Value = serde_json::from_slice(&l).unwrap();
                prop_assert_eq!(got, want);
            }
        }

        #[test]
        fn valid_json_with_cr_whitespace_is_minified_losslessly(v in json_value(), cr_only in any::<bool>()) {
            // Pretty output has line breaks only between tokens; turning them
            // into CR (or CR plus spaces) keeps it valid JSON on one line.
            let sep = if cr_only { "\r" } else { "\r \t" };
            let line = serde_json::to_string_pretty(&v).unwrap().replace('\n', sep);
            let frame = Encoder::new(SseOptions::default()).push(line.as_bytes()).unwrap().unwrap();
            prop_assert!(!frame.contains('\r'));
            let json = frame.strip_prefix("data: ").unwrap().strip_suffix("\n\n").unwrap();
            if line.contains('\r') {
                prop_assert_eq!(json, serde_json::to_string(&v).unwrap());
            } else {
                prop_assert_eq!(json, line.as_str());
            }
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[ a-z\"\\\r\n\u{e9}]{0,8}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map("[a-z ]{1,4}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
