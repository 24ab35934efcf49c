//! True, deterministic timestamps: the processes that see an agent's lines
//! arrive (the server's recorder for `POST /agui`, the supervisor) keep each
//! line's arrival time beside the log (`<log>.at`), and every re-read of the
//! finished log, in any process, from the start or resumed, gives the same
//! bytes, `ts` included, within 10 ms of when the wrapper wrote each line.
//! The wrapper (`fixtures/timed-wrapper`) writes that time into each line.

use crate::support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    support::scratch(name)
}

fn normalize(log: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_normalize-events"))
        .args(["claude", "--input"])
        .arg(log)
        .args(extra)
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn ts_ms(e: &Value) -> i64 {
    let s = e["ts"].as_str().unwrap();
    runwire::util::time::parse_rfc3339_ms(s).unwrap_or_else(|| panic!("bad ts {s}"))
}

/// Re-reads `log` as every reader does and checks the rule on it: two
/// reads are byte-identical, a resumed read is the same suffix, `ts` never
/// goes back and is within 10 ms of each line's `written_ms`.
fn check_rereads(log: &Path) {
    assert!(runwire::util::arrival::sidecar_path(log).exists(), "no arrival times beside {}", log.display());
    let a = normalize(log, &[]);
    let b = normalize(log, &[]);
    assert_eq!(a, b, "two reads of the same log differ");
    let events: Vec<Value> = a.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(events.len() >= 6, "{a}");
    let mid = &events[events.len() / 2];
    let after = match &mid["seq"] {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let resumed = normalize(log, &["--after", &after]);
    let tail: String = a.lines().skip(events.len() / 2 + 1).map(|l| format!("{l}\n")).collect();
    assert_eq!(resumed, tail, "a resumed read is not the same suffix");
    let lines: Vec<Value> =
        std::fs::read_to_string(log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut prev = i64::MIN;
    let mut late = Vec::new();
    for e in &events {
        let ts = ts_ms(e);
        assert!(ts >= prev, "ts went back: {e}");
        prev = ts;
        let line = match &e["seq"] {
            Value::String(s) => s.split('.').next().unwrap().parse::<usize>().unwrap(),
            v => v.as_u64().unwrap() as usize,
        };
        let written = lines[line - 1]["written_ms"].as_i64().expect("the wrapper's write time");
        // Never before the write (both are truncated to the millisecond).
        assert!(ts >= written, "line {line}: ts {ts} is before its write at {written}");
        late.push(ts - written);
    }
    // Within 10 ms of the write; a loaded 2-core CI machine may delay the
    // reading thread now and then, so one line in a few may be later, but
    // never by 100 ms (a read time or a file time would be seconds off).
    late.sort_unstable();
    assert!(late[late.len() / 2] <= 10, "median {} ms after the write: {late:?}", late[late.len() / 2]);
    assert!(*late.last().unwrap() < 100, "a line {} ms after its write: {late:?}", late.last().unwrap());
    eprintln!("ms from write to ts, sorted: {late:?}");
}

/// The body of a `200` response to `req`, de-chunked: frames are
/// compared, not how writes were cut.
fn http(port: u16, req: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    let r = support::server::Response::parse(&got);
    assert!(r.status == 200 && r.complete, "{}", String::from_utf8_lossy(&got));
    r.body
}

fn get(port: u16, path: &str, last_id: Option<&str>) -> String {
    let extra = last_id.map(|id| format!("Last-Event-ID: {id}\r\n")).unwrap_or_default();
    let body =
        http(port, &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Connection: close\r\n\r\n"));
    String::from_utf8(body).unwrap()
}

#[test]
fn a_recorded_post_agui_run_rereads_identically_with_true_times() {
    let dir = tmp("serve");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-serve"));
    cmd.args(["--agent", "claude", "--agent-cmd"])
        .arg(root().join("fixtures/timed-wrapper/claude.sh"))
        .env("HARNESS_HOME", dir.join("home"))
        .env_remove("SOURCE_DATE_EPOCH")
        .stderr(Stdio::null());
    let s = support::Server::spawn(cmd);
    let body = r#"{"threadId":"t","runId":"r1","messages":[{"id":"u","role":"user","content":"hi"}]}"#;
    let live = http(
        s.port,
        &format!(
            "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            s.port,
            body.len()
        ),
    );
    assert!(String::from_utf8_lossy(&live).contains("RUN_FINISHED"));
    let log = dir.join("home/serve/runstate/agui-r1.agent.log");
    check_rereads(&log);

    // The server's task stream: read twice, and resumed from the middle.
    let pointer = std::fs::read_dir(dir.join("home/runs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with("--agui-r1.json"))
        .expect("the run's pointer");
    let id = pointer.trim_end_matches(".json");
    let path = format!("/runs/{id}/tasks/agent/stream");
    let first = get(s.port, &path, None);
    let second = get(s.port, &path, None);
    assert_eq!(first, second, "two reads of the task stream differ");
    let frames = support::sse::frames(&first);
    assert!(frames.len() >= 6, "{first}");
    let mid = frames.len() / 2;
    let mid_id = frames[mid].id.as_deref().expect("frames carry ids");
    let resumed = get(s.port, &path, Some(mid_id));
    assert_eq!(support::sse::frames(&resumed), frames[mid + 1..], "a resumed task stream is not the same frames");
    // The stream's events are the re-read's, ts included.
    let events: Vec<&str> = frames.iter().map(|f| f.data.as_str()).collect();
    let reread = normalize(&log, &[]);
    let reread_ts: Vec<Value> =
        reread.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["ts"].clone()).collect();
    let stream_ts: Vec<Value> =
        events.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["ts"].clone()).collect();
    assert_eq!(stream_ts, reread_ts);
}

#[test]
fn a_supervised_task_rereads_identically_with_true_times() {
    let dir = tmp("sup");
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    std::fs::write(dir.join("p.plan.json"), r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#)
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"))
        .current_dir(&dir)
        .args(["--plan", "p.plan.json"])
        .env("HARNESS_HOME", dir.join("home"))
        .env("RUNWIRE_WRAPPER_DIR", root().join("fixtures/timed-wrapper"))
        .env_remove("SOURCE_DATE_EPOCH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < until, "the supervisor did not finish");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    check_rereads(&dir.join("runstate/p.a.log"));
}

#[test]
fn a_log_without_arrival_times_is_timed_by_its_own_times_and_its_mtime_never_the_read_time() {
    let dir = tmp("old");
    let log = dir.join("old.log");
    std::fs::write(
        &log,
        concat!(
            r#"{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[],"cwd":"/"}"#,
            "\n",
            r#"{"type":"user","timestamp":"2020-01-01T00:00:10.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"after"}]}}"#,
            "\n",
            r#"{"type":"user","timestamp":"2020-01-01T00:00:05.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"y"}]}}"#,
            "\n",
        ),
    )
    .unwrap();
    // mtime: 2019-12-31T23:00:00Z, before every line's own time.
    let mtime = std::time::UNIX_EPOCH + Duration::from_secs(1_577_833_200);
    std::fs::File::options().write(true).open(&log).unwrap().set_modified(mtime).unwrap();
    let a = normalize(&log, &[]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(a, normalize(&log, &[]));
    let ts: Vec<String> =
        a.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["ts"].as_str().unwrap().to_string()).collect();
    assert_eq!(
        ts.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "2019-12-31T23:00:00.000Z",
            "2020-01-01T00:00:10.000Z",
            "2020-01-01T00:00:10.000Z",
            // Its own time is earlier: ts does not go back.
            "2020-01-01T00:00:10.000Z",
        ]
    );
}
