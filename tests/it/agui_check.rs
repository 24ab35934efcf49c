//! `agui-check`, the producer conformance checker, through its binary: the
//! labelled corpus (`conformance/producer-corpus/`, labels by the official
//! `@ag-ui/client` 1.0.0 and `@ag-ui/core` 1.0.0 via `conformance/label.mjs`),
//! its man page's rule list, the Unix contract (help, errors, exit codes, a
//! closed pipe, bounded frames), and `--url` against a live `runwire-serve`.

use crate::support;

use runwire::aguicheck::RULES;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_agui-check");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpus() -> PathBuf {
    root().join("conformance/producer-corpus")
}

/// Every stream of the corpus, as `good/NAME` or `bad/NAME`.
fn corpus_files() -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["good", "bad"] {
        for e in std::fs::read_dir(corpus().join(dir)).unwrap() {
            files.push(format!("{dir}/{}", e.unwrap().file_name().to_string_lossy()));
        }
    }
    files.sort();
    files
}

/// The committed labels, by `good/NAME` / `bad/NAME`.
fn committed_labels() -> BTreeMap<String, Value> {
    std::fs::read_to_string(corpus().join("labels.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["file"].as_str().unwrap().trim_start_matches("producer-corpus/").to_string(), v))
        .collect()
}

/// The rule a bad stream is a case of: its name up to `--`.
fn rule_of(file: &str) -> &str {
    file.trim_start_matches("bad/").split("--").next().unwrap()
}

/// agui-check on a corpus file: exit code and the rules it found.
fn check(file: &str) -> (i32, BTreeSet<String>, String) {
    let mut cmd = Command::new(BIN);
    if rule_of(file) == "run.one-run" {
        cmd.arg("--one-run");
    }
    let out = cmd.arg(corpus().join(file)).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let rules =
        text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["rule"].as_str().unwrap().to_string()).collect();
    (out.status.code().unwrap_or(-1), rules, text)
}

/// Holds agui-check to `labels` on every corpus file: a good stream (the
/// official checks accept it) has no finding; a bad one is flagged for the
/// rule its name gives, and every stream the official checks flag is flagged.
fn hold_to(labels: &BTreeMap<String, Value>) {
    let files = corpus_files();
    assert_eq!(files, labels.keys().cloned().collect::<Vec<_>>(), "the labels name exactly the corpus files");
    let mut official_bad = 0;
    for f in &files {
        let label = &labels[f];
        let (code, rules, text) = check(f);
        if f.starts_with("good/") {
            assert_eq!(label["official"], "ok", "{f}: a good stream the official checks reject: {label}");
            assert!(code == 0 && rules.is_empty(), "{f}: agui-check flags a good stream (exit {code}):\n{text}");
            continue;
        }
        if label["official"] == "bad" {
            official_bad += 1;
        }
        assert_eq!(code, 1, "{f}: agui-check does not flag it (official: {label}):\n{text}");
        assert!(rules.contains(rule_of(f)), "{f}: expected {}, found {rules:?}", rule_of(f));
    }
    assert!(official_bad >= 25, "only {official_bad} bad streams the official checks flag");
}

#[test]
fn agui_check_holds_to_the_committed_labels_of_the_corpus() {
    hold_to(&committed_labels());
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn the_official_client_labels_the_corpus_as_committed_and_agui_check_agrees() {
    support::need(&["agui-client"]);
    let files = corpus_files();
    let out = Command::new("node")
        .arg("label.mjs")
        .args(files.iter().map(|f| format!("producer-corpus/{f}")))
        .current_dir(root().join("conformance"))
        .output()
        .expect("run node");
    assert!(out.status.success(), "label.mjs: {}", String::from_utf8_lossy(&out.stderr));
    let fresh: BTreeMap<String, Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["file"].as_str().unwrap().trim_start_matches("producer-corpus/").to_string(), v))
        .collect();
    let committed = committed_labels();
    for (f, label) in &fresh {
        let was = &committed[f];
        for k in ["official", "verifyEvents", "schemas", "client"] {
            assert_eq!(
                label[k].is_null(),
                was[k].is_null(),
                "{f}: {k} changed: now {}, committed {}",
                label[k],
                was[k]
            );
        }
    }
    hold_to(&fresh);
}

/// The rule ids in man/agui-check.1's RULES section, in order.
fn man_rules() -> Vec<String> {
    let man = std::fs::read_to_string(root().join("man/agui-check.1")).unwrap();
    let section = man.split(".SH RULES").nth(1).expect("a RULES section").split("\n.SH ").next().unwrap().to_string();
    let lines: Vec<&str> = section.lines().collect();
    lines.windows(2).filter(|w| w[0] == ".TP").filter_map(|w| w[1].strip_prefix(".B ")).map(str::to_string).collect()
}

#[test]
fn the_man_page_lists_every_rule_with_its_source_and_the_corpus_covers_them() {
    let man = std::fs::read_to_string(root().join("man/agui-check.1")).unwrap();
    let ids: Vec<String> = RULES.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(man_rules(), ids, "man/agui-check.1's RULES are the library's, in its order");
    for r in RULES {
        let entry = man.split(&format!(".B {}\n", r.id)).nth(1).unwrap().split(".TP").next().unwrap();
        assert!(entry.contains("Source:"), "{}: the man page names no source", r.id);
        assert!(!r.spec.is_empty() && !r.what.is_empty(), "{}", r.id);
    }
    // Each rule has a bad stream in the corpus, but those a file cannot show:
    // an HTTP answer, a 10 MiB frame and a million ids (tested below or not at all).
    let covered: BTreeSet<String> =
        corpus_files().iter().filter(|f| f.starts_with("bad/")).map(|f| rule_of(f).to_string()).collect();
    for r in RULES {
        if !["http.response", "framing.too-large", "limit.tracking"].contains(&r.id) {
            assert!(covered.contains(r.id), "no bad stream in the corpus for {}", r.id);
        }
    }
}

fn run_with(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const CLEAN: &str = "{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"protocolVersion\":\"1.0\"}\n{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n";

#[test]
fn help_usage_errors_and_exit_codes() {
    let dir = support::scratch("help");
    let (code, out, err) = run_with(&["--help"], b"");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Exit status: 0 no finding; 1 findings; 2 usage"), "{out}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "--help wrote nothing");
    let (code, _, err) = run_with(&["--bogus"], b"");
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = run_with(&["/nonexistent/stream.sse"], b"");
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.starts_with("agui-check: /nonexistent/stream.sse: "), "{err}");
    let (code, _, err) = run_with(&["--url", "https://example.invalid/agui"], b"");
    assert_eq!(code, 2);
    assert!(err.starts_with("agui-check: --url: ") && err.contains("only http://"), "{err}");
    let (code, _, err) = run_with(&["--input", "x.json"], b"");
    assert_eq!(code, 2, "--input needs --url: {err}");
    // With a FILE too (clap let that pass, and --input was ignored).
    let (code, out, err) = run_with(&["--input", "x.json", "-"], b"");
    assert_eq!((code, out.is_empty()), (2, true), "--input needs --url, FILE or not: {err}");
    assert!(err.starts_with("agui-check: usage: --input"), "{err}");
    // Clean input: 0 and no output, in either framing, auto-detected or told.
    assert_eq!(run_with(&[], CLEAN.as_bytes()).0, 0);
    assert_eq!(run_with(&["--format", "jsonl", "-"], CLEAN.as_bytes()).0, 0);
    let sse: String = CLEAN.lines().map(|l| format!("data: {l}\n\n")).collect();
    assert_eq!(run_with(&["--format", "sse"], sse.as_bytes()).0, 0);
    // Told the wrong framing, it says so.
    let (code, out, _) = run_with(&["--format", "sse"], CLEAN.as_bytes());
    assert_eq!(code, 1);
    assert!(out.contains("run.unterminated"), "{out}");
    // A finding is one JSON object with the five fields.
    let (code, out, _) = run_with(&[], b"{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n");
    assert_eq!(code, 1);
    let line = out.lines().next().unwrap();
    assert!(line.starts_with(r#"{"rule":"run.first","index":1,"event":"TEXT_MESSAGE_END","message":"#), "{line}");
    let first: Value = serde_json::from_str(line).unwrap();
    assert_eq!(first["rule"], "run.first");
    assert_eq!(first["index"], 1);
    assert_eq!(first["event"], "TEXT_MESSAGE_END");
    assert!(first["message"].as_str().unwrap().contains("TEXT_MESSAGE_END"));
    assert!(first["spec"].as_str().unwrap().contains("verifyEvents"), "{first}");
    // --one-run: runwire's own stricter rule, off by default (AG-UI admits a late RUN_ERROR).
    let late = format!("{CLEAN}{{\"type\":\"RUN_ERROR\",\"message\":\"late\"}}\n");
    assert_eq!(run_with(&[], late.as_bytes()).0, 0);
    let (code, out, _) = run_with(&["--one-run"], late.as_bytes());
    assert_eq!(code, 1);
    assert!(out.contains("\"rule\":\"run.one-run\""), "{out}");
}

#[test]
fn a_closed_pipe_is_a_quiet_end_and_an_oversized_frame_is_a_finding() {
    // Many findings, and a reader that leaves at once.
    let bad = "data: nope\n\n".repeat(200_000);
    let mut child =
        Command::new(BIN).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let w = std::thread::spawn(move || {
        let _ = stdin.write_all(bad.as_bytes());
    });
    let mut first = [0u8; 16];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    w.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));

    // A frame over the official client's 10 MiB buffer: one finding, and the
    // frames after it are still read.
    let mut big =
        b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"protocolVersion\":\"1.0\"}\n\ndata: \""
            .to_vec();
    big.resize(big.len() + 11 * 1024 * 1024, b'x');
    big.extend_from_slice(b"\"\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n");
    let (code, out, _) = run_with(&[], &big);
    assert_eq!(code, 1);
    let rules: Vec<String> =
        out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["rule"].to_string()).collect();
    assert_eq!(rules, ["\"framing.too-large\""], "{out}");
    let line = serde_json::from_str::<Value>(out.lines().next().unwrap()).unwrap();
    assert_eq!(line["index"], 2);
}

/// agui-check's peak resident memory (VmHWM), read while its input is still
/// open so the process is alive to be read.
#[cfg(target_os = "linux")]
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("a VmHWM line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Memory is bounded by bytes, not by a count of ids: 6,000 text messages
/// with 16 KB ids (96 MB of ids, each kept in three places before the
/// bound counted bytes) keep agui-check's peak memory well under what
/// holding them takes, and the bound is reported once.
#[test]
#[cfg(target_os = "linux")]
fn memory_stays_bounded_by_bytes_however_long_the_ids() {
    let mut child = Command::new(BIN)
        .args(["--format", "jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).unwrap();
        out
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\",\"protocolVersion\":\"1.0\"}\n")
        .unwrap();
    let pad = "x".repeat(16 * 1024);
    for i in 0..6_000 {
        let line = format!("{{\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m{i}-{pad}\",\"role\":\"assistant\"}}\n");
        stdin.write_all(line.as_bytes()).unwrap();
    }
    // All but the pipe's buffer is read: the peak so far is the run's.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let peak = peak_rss_kib(child.id());
    drop(stdin);
    let status = child.wait().unwrap();
    let out = reader.join().unwrap();
    assert!(peak < 160 * 1024, "peak RSS {peak} KiB for 96 MB of ids");
    assert_eq!(status.code(), Some(1));
    let rules: Vec<String> =
        out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["rule"].as_str().unwrap().to_string()).collect();
    assert_eq!(rules, ["limit.tracking", "run.unterminated"], "{}", &out[..out.len().min(2000)]);
    assert!(out.contains("MiB"), "the bound is named in bytes: {}", &out[..out.len().min(2000)]);
}

/// `--url` against a live `runwire-serve` (its bundled demo replay): the
/// default input and one given with `--input`; then a producer that answers
/// JSON, and one nobody listens on.
#[test]
fn url_mode_checks_a_live_runwire_serve() {
    let dir = support::scratch("url");
    let mut cmd = support::Server::command();
    cmd.env("RUNWIRE_REPLAY_DELAY_MS", "1").env("HARNESS_HOME", dir.join("home"));
    let server = support::Server::spawn(cmd);
    let url = server.url("/agui");
    let (code, out, err) = run_with(&["--url", &url, "--timeout", "30"], b"");
    assert_eq!((code, out.as_str()), (0, ""), "{err}\nserver: {}", server.stderr());
    let input = dir.join("input.json");
    std::fs::write(
        &input,
        r#"{"threadId":"agui-check-t","runId":"agui-check-r","messages":[{"id":"m1","role":"user","content":"hi"}]}"#,
    )
    .unwrap();
    let (code, out, err) = run_with(&["--url", &url, "--input", input.to_str().unwrap(), "--one-run"], b"");
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    // Not a run at all: a JSON error answer (the server's body limit, Content-Type checks...).
    let (code, out, _) = run_with(&["--url", &server.url("/runs")], b"");
    assert_eq!(code, 1);
    assert!(out.contains("\"rule\":\"http.response\""), "{out}");
    // Nobody there: no verdict, exit 2.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (code, out, err) = run_with(&["--url", &format!("http://127.0.0.1:{free}/agui")], b"");
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.starts_with(&format!("agui-check: http://127.0.0.1:{free}/agui: ")), "{err}");
}

/// Every capture under `fixtures/{claude,cursor,codex}/` through the real
/// pipeline (`normalize-events | agui-translate | sse-encode --id-from seq`,
/// as the server frames it): agui-check finds nothing in any of them, with
/// runwire's one-run contract.
#[test]
fn every_fixture_through_the_pipeline_passes_agui_check() {
    let pipe = |bin: &str, args: &[&str], input: &[u8]| -> Vec<u8> {
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let data = input.to_vec();
        let w = std::thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
        let out = child.wait_with_output().unwrap();
        w.join().unwrap();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{bin} {args:?}: {:?}", out.status);
        out.stdout
    };
    let mut checked = 0;
    for adapter in ["claude", "cursor", "codex"] {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(root().join("fixtures").join(adapter)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let golden = [".events.jsonl", ".agui.jsonl", ".expected.jsonl", ".golden.jsonl", ".out.jsonl"];
            if !name.ends_with(".jsonl") || golden.iter().any(|g| name.ends_with(g)) {
                continue;
            }
            let raw = std::fs::read(&f).unwrap();
            let events = pipe(env!("CARGO_BIN_EXE_normalize-events"), &[adapter], &raw);
            let agui = pipe(env!("CARGO_BIN_EXE_agui-translate"), &[], &events);
            let sse = pipe(env!("CARGO_BIN_EXE_sse-encode"), &["--id-from", "seq"], &agui);
            let (code, out, err) = run_with(&["--one-run", "--format", "sse"], &sse);
            assert!(code == 0 && out.is_empty(), "{adapter}/{name}: agui-check exit {code}:\n{out}{err}");
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} fixtures checked");
}

mod props {
    use proptest::prelude::*;
    use runwire::aguicheck::stream::{check_bytes, Format, Stream};
    use runwire::aguicheck::{Options, RULES};

    /// Pieces of SSE and of AG-UI events, and stray bytes, so inputs reach
    /// past the JSON parser into the sequence checks.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        let words: Vec<&'static str> = vec![
            "data: ",
            "data:",
            "\n",
            "\r",
            "\r\n",
            "\n\n",
            ": c\n",
            "id: 1\n",
            "event: x\n",
            "{",
            "}",
            ",",
            r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
            r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            r#"{"type":"RUN_ERROR","message":"m"}"#,
            r#"{"type":"TEXT_MESSAGE_START","messageId":"m"}"#,
            r#"{"type":"TEXT_MESSAGE_CHUNK","delta":"d"}"#,
            r#"{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","subagentRunId":"s"}"#,
            r#"{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"n"}"#,
            r#"{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}"#,
            r#"{"type":"SUBAGENT_FINISHED","subagentRunId":"s"}"#,
            r#"{"type":"STEP_STARTED","stepName":"a","subagentRunId":"s"}"#,
            r#"{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"n","arguments":""}}]}]}"#,
            r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
            r#""type":"#,
            "null",
            "[1]",
            "\u{0}",
        ];
        prop_oneof![
            4 => proptest::sample::select(words).prop_map(|w| w.as_bytes().to_vec()),
            1 => proptest::collection::vec(any::<u8>(), 0..8),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        /// What the fuzz target asserts (fuzz/fuzz_targets/agui_check.rs), run
        /// here on every test run: no panic, known rules, findings that do not
        /// depend on where reads were cut.
        #[test]
        fn findings_do_not_depend_on_read_boundaries(pieces in proptest::collection::vec(piece(), 0..40), mode in 0u8..3, step in 1usize..17, one_run in any::<bool>()) {
            let input: Vec<u8> = pieces.concat();
            let format = [None, Some(Format::Sse), Some(Format::Jsonl)][mode as usize];
            let opts = Options { one_run, ..Options::default() };
            let whole = check_bytes(&input, format, opts.clone());
            let mut s = Stream::new(format, opts);
            let mut cut = Vec::new();
            for chunk in input.chunks(step) {
                cut.extend(s.feed(chunk));
            }
            cut.extend(s.finish());
            prop_assert_eq!(&whole, &cut);
            let events = s.checker().events();
            for f in &whole {
                prop_assert!(RULES.iter().any(|r| r.id == f.rule));
                prop_assert!(f.index.is_none_or(|i| i >= 1 && i <= events + 1), "{:?} of {}", f.index, events);
            }
        }
    }
}

/// `--url` against a producer that answers chunked, as a stock server does:
/// the request agui-check sends is the posted input, with the AG-UI headers;
/// the de-chunked stream is checked, and a last run that is not the
/// requested one is a finding.
#[test]
fn url_mode_posts_the_input_and_reads_a_chunked_answer() {
    use std::io::BufRead;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let mut head = Vec::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
            head.push(line);
        }
        let mut body = vec![0u8; length];
        r.read_exact(&mut body).unwrap();
        let sse =
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"other\",\"protocolVersion\":\"1.0\"}\n\n\
                   data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"other\"}\n\n";
        let mut w = s;
        write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        .unwrap();
        // Cut mid-frame and mid-line, as a network would.
        for part in [&sse[..10], &sse[10..70], &sse[70..]] {
            write!(w, "{:x}\r\n{part}\r\n", part.len()).unwrap();
        }
        write!(w, "0\r\n\r\n").unwrap();
        (head, body)
    });
    let dir = support::scratch("chunked");
    let input = dir.join("input.json");
    let posted = r#"{"threadId":"t","runId":"r1","messages":[],"state":{"n":1}}"#;
    std::fs::write(&input, posted).unwrap();
    let (code, out, err) =
        run_with(&["--url", &format!("http://127.0.0.1:{port}/agent"), "--input", input.to_str().unwrap()], b"");
    let (head, body) = server.join().unwrap();
    assert!(head[0].starts_with("POST /agent HTTP/1.1"), "{head:?}");
    let has = |h: &str| head.iter().any(|l| l.to_ascii_lowercase().starts_with(h));
    assert!(has("accept: text/event-stream") && has("content-type: application/json"), "{head:?}");
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), serde_json::from_str::<Value>(posted).unwrap());
    assert_eq!(code, 1, "{err}");
    let rules: Vec<String> =
        out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["rule"].as_str().unwrap().to_string()).collect();
    assert_eq!(rules, ["run.ids"], "{out}");
    assert!(out.contains("not the requested thread \\\"t\\\" run \\\"r1\\\""), "{out}");
}

/// Findings that cannot be written: exit 3, the error naming stdout.
#[test]
fn a_failed_write_names_stdout_and_exits_3() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let mut child = Command::new(BIN).stdin(Stdio::piped()).stdout(full).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"data: nope\n\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("agui-check: stdout: "), "{err}");
}

/// An interrupt and its resume through a live `runwire-serve --demo`: the
/// run that stops on the demo's approval, and the run that answers it (and
/// stops on the demo's question), both pass agui-check with `--url`.
#[test]
fn url_mode_checks_an_interrupt_and_its_resume_on_a_live_server() {
    let dir = support::scratch("resume");
    let mut cmd = support::Server::command();
    cmd.arg("--demo").env("HARNESS_HOME", dir.join("home"));
    let server = support::Server::spawn(cmd);
    let url = server.url("/agui");
    let input = |run: &str, extra: &str| {
        let p = dir.join(format!("{run}.json"));
        let body = format!(
            r#"{{"threadId":"d","runId":"{run}","messages":[{{"id":"m1","role":"user","content":"hello"}}]{extra}}}"#
        );
        std::fs::write(&p, body).unwrap();
        p
    };
    let (code, out, err) = run_with(&["--url", &url, "--input", input("r1", "").to_str().unwrap(), "--one-run"], b"");
    assert_eq!((code, out.as_str()), (0, ""), "{err}\nserver: {}", server.stderr());
    // The same thread again, read here, to learn the open interrupt's id.
    let mut c = server.send(
        "POST",
        "/agui",
        "Content-Type: application/json\r\n",
        &std::fs::read_to_string(input("r1b", "")).unwrap(),
    );
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    let events = support::sse::http_events(raw.as_bytes());
    let finished = events.iter().find(|e| e["type"] == "RUN_FINISHED").expect("a RUN_FINISHED");
    let id = finished["outcome"]["interrupts"][0]["id"].as_str().expect("an open interrupt").to_string();
    let resume = format!(r#","resume":[{{"interruptId":"{id}","status":"resolved","payload":{{"approved":true}}}}]"#);
    let (code, out, err) =
        run_with(&["--url", &url, "--input", input("r2", &resume).to_str().unwrap(), "--one-run"], b"");
    assert_eq!((code, out.as_str()), (0, ""), "{err}\nserver: {}", server.stderr());
}

/// The tests' one AG-UI verifier (`tests/support/verify.rs`) runs agui-check
/// on every stream it passes: a stream its own rules accept but AG-UI
/// forbids (one interrupt id twice in a run) fails there too.
#[test]
fn the_tests_verifier_runs_agui_check_on_every_stream() {
    let stream = |second: &str| {
        vec![
            serde_json::json!({"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"}),
            serde_json::json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[
                {"id":"i1","reason":"tool_call"},{"id":second,"reason":"input_required"}]}}),
        ]
    };
    support::verify::verify(&stream("i2")).unwrap();
    let err = support::verify::verify(&stream("i1")).unwrap_err();
    assert!(err.contains("agui-check found 1") && err.contains("\"rule\":\"interrupt.id-unique\""), "{err}");
}
