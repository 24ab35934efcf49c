//! `runwire-serve` end to end: the server runs as a child process on
//! 127.0.0.1:0, the tests speak raw HTTP/1.1 over TCP, and agents are the
//! contract-following stub in `fixtures/stub-wrapper/agent.sh`. Every socket
//! read has a timeout and every wait a deadline, so no test can hang.

use crate::support;
use support::server::{Response, Server};

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const IO_TIMEOUT: Duration = Duration::from_secs(15);
const SESSION: &str = "d8785ba1-3fa6-4606-b465-f13165cc441f";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn stub() -> String {
    root().join("fixtures/stub-wrapper/agent.sh").display().to_string()
}

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/claude").join(name)
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runwire-serve-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Removed when the tests end, unless this test failed.
    crate::support::keep_on_failure(&dir);
    dir.join(name)
}

/// [`tmp`], emptied: pids wrap (32,768 here), and a record file an earlier
/// test process of the same pid left would add its lines to this test's.
fn fresh(name: &str) -> PathBuf {
    let p = tmp(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// A harness home of its own for each server: a recorded runId is never
/// recorded again (spec/LAYOUT.md), so tests that reuse `r1` must not share one.
fn home() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let h = tmp(&format!("harness-{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&h);
    h
}

/// runwire-serve with `args` and `envs`; the runs it records (POST /agui)
/// go to a temp dir, not ~/.harness.
fn start(args: &[&str], envs: &[(&str, &str)]) -> Server {
    let mut cmd = Server::command();
    cmd.args(args).env("RUNWIRE_REPLAY_DELAY_MS", "0").env_remove("SOURCE_DATE_EPOCH");
    cmd.env("HARNESS_HOME", home()).envs(envs.iter().copied());
    Server::spawn(cmd)
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The response, whose chunked body must end with its last chunk.
fn parse_response(raw: &[u8]) -> Response {
    let r = Response::parse(raw);
    assert!(r.complete, "the chunked body must end with 0 CRLF CRLF: {}", String::from_utf8_lossy(raw));
    r
}

/// Sends raw bytes, reads to EOF.
fn raw_request(port: u16, raw: &[u8]) -> Response {
    let mut s = connect(port);
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the response");
    parse_response(&out)
}

fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    raw_request(port, &build(port, method, path, headers, body))
}

fn build(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut h = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        h.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (n, v) in headers {
        h.push_str(&format!("{n}: {v}\r\n"));
    }
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding")) && method == "POST" {
        h.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    h.push_str("\r\n");
    let mut out = h.into_bytes();
    out.extend_from_slice(body);
    out
}

fn run_body(thread: &str, run: &str, prompt: &str) -> String {
    serde_json::json!({
        "threadId": thread, "runId": run, "protocolVersion": "1.0", "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": "u1", "role": "user", "content": prompt}]
    })
    .to_string()
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

fn post_run(port: u16, thread: &str, run: &str) -> Response {
    request(port, "POST", "/agui", &[JSON], run_body(thread, run, "hello").as_bytes())
}

fn types(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["type"].as_str().unwrap_or_default().to_string()).collect()
}

/// Opens a streaming POST and returns the socket once `n` frames arrived.
fn open_stream(port: u16, thread: &str, run: &str, n: usize) -> (TcpStream, Vec<u8>) {
    let mut s = connect(port);
    s.write_all(&build(port, "POST", "/agui", &[JSON], run_body(thread, run, "hi").as_bytes())).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.windows(6).filter(|w| w == b"data: ").count() < n {
        let k = s.read(&mut buf).expect("read the stream");
        assert!(k > 0, "the stream ended early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..k]);
    }
    (s, got)
}

fn record_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The process group of the stub's last invocation (the group of the
/// run's reaper, which the stub shares).
fn wait_for_record(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(l) = record_lines(path).last() {
            let pid: i32 = l.split(' ').next().unwrap().parse().unwrap();
            // A stub already gone has no group left to look at.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return pid };
            return stat.rsplit_once(')').unwrap().1.split_whitespace().nth(2).unwrap().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the stub never recorded its pid");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn group_alive(pgid: i32) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
}

/// Waits until the group is gone; returns how long that took.
fn wait_group_gone(pgid: i32, limit: Duration) -> Duration {
    let t = Instant::now();
    while group_alive(pgid) {
        assert!(t.elapsed() < limit, "process group {pgid} still alive after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.elapsed()
}

// ---------------------------------------------------------------------------

#[test]
fn healthz_and_help() {
    let s = start(&[], &[]);
    let r = request(s.port, "GET", "/healthz", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), serde_json::json!({"ok": true}));
    assert_eq!(r.header("content-type"), Some("application/json"));

    let out = Command::new(env!("CARGO_BIN_EXE_runwire-serve")).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--allow-origin"));
}

#[test]
fn usage_and_startup_errors_exit_2_or_3() {
    let bin = env!("CARGO_BIN_EXE_runwire-serve");
    let short = tmp("short.token");
    std::fs::write(&short, "  too-short \n").unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let cases: &[(&[&str], i32)] = &[
        (&["--bogus"], 2),
        (&["--allow-origin", "http://localhost:3000/"], 2),
        (&["--allow-origin", "localhost:3000"], 2),
        (&["--listen", "0.0.0.0:0"], 2),
        (&["--listen", "0.0.0.0:0", "--allow-remote"], 2),
        (&["--listen", "127.0.0.1:0", "--token-file", short.to_str().unwrap()], 2),
        (&["--listen", "127.0.0.1:0", "--token-file", "/nonexistent/token"], 3),
        (&["--listen", &taken_addr], 3),
        (&["--agent-cmd", "/bin/true"], 2),
    ];
    for (args, code) in cases {
        let mut child = Command::new(bin).args(*args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?} did not exit");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(*code), "{args:?}");
    }
}

#[test]
fn demo_replay_streams_a_valid_run_incrementally() {
    let s = start(&[], &[("RUNWIRE_REPLAY_DELAY_MS", "20")]);
    let mut sock = connect(s.port);
    let t0 = Instant::now();
    sock.write_all(&build(s.port, "POST", "/agui", &[JSON], run_body("th", "run-1", "hi").as_bytes())).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let (mut first, mut last) = (None, None);
    loop {
        // A stop and continue of the test process (SIGSTOP, a freezer) fails a
        // read with a timeout with EINTR: read again.
        let k = match sock.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.expect("read"),
        };
        if k == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..k]);
        if first.is_none() && find(&raw, b"RUN_STARTED").is_some() {
            first = Some(t0.elapsed());
        }
        if last.is_none() && find(&raw, b"RUN_FINISHED").is_some() {
            last = Some(t0.elapsed());
        }
    }
    let r = parse_response(&raw);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    let events = r.events();
    support::verify::verify(&events).unwrap();
    let t = types(&events);
    assert_eq!(t.first().map(String::as_str), Some("RUN_STARTED"));
    assert_eq!(t.last().map(String::as_str), Some("RUN_FINISHED"));
    assert_eq!(events[0]["threadId"], "th");
    assert_eq!(events[0]["runId"], "run-1");
    assert_eq!(events.last().unwrap()["runId"], "run-1");
    assert!(r.text().split("\n\n").all(|f| f.is_empty() || f.starts_with("data: {")), "{}", r.text());
    let (first, last) = (first.unwrap(), last.unwrap());
    // 50 lines at 20 ms: about a second from first frame to last.
    assert!(last >= first + Duration::from_millis(500), "not incremental: first {first:?}, last {last:?}");
    assert!(first < Duration::from_millis(500), "first frame came late: {first:?}");
}

#[test]
fn browser_boundary() {
    let s = start(&["--allow-origin", "https://app.example"], &[]);
    let p = s.port;
    let good = run_body("t", "r-ok", "hi");

    // Media type.
    let r = request(p, "POST", "/agui", &[("Content-Type", "text/plain")], good.as_bytes());
    assert_eq!(r.status, 415);
    assert!(r.error().contains("application/json"));
    assert_eq!(request(p, "POST", "/agui", &[], good.as_bytes()).status, 415);
    let r = request(p, "POST", "/agui", &[("Content-Type", "application/json; charset=utf-8")], good.as_bytes());
    assert_eq!(r.status, 200);

    // Size: Content-Length and chunked, the response still arrives.
    let big = vec![b' '; 1024 * 1024 + 1];
    let r = request(p, "POST", "/agui", &[JSON], &big);
    assert_eq!(r.status, 413);
    assert!(r.error().contains("larger"));
    let mut chunked = Vec::new();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n", 64 * 1024).as_bytes());
        chunked.extend_from_slice(&vec![b' '; 64 * 1024]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let r = request(p, "POST", "/agui", &[JSON, ("Transfer-Encoding", "chunked")], &chunked);
    assert_eq!(r.status, 413);
    assert!(r.error().contains("larger"));
    // A small chunked body is fine.
    let chunk = good.replace("r-ok", "r-chunked");
    let mut small = format!("{:x}\r\n", chunk.len()).into_bytes();
    small.extend_from_slice(chunk.as_bytes());
    small.extend_from_slice(b"\r\n0\r\n\r\n");
    let r = request(p, "POST", "/agui", &[JSON, ("Transfer-Encoding", "chunked")], &small);
    assert_eq!(r.status, 200);
    assert_eq!(types(&r.events()).last().map(String::as_str), Some("RUN_FINISHED"));

    // Malformed input names the problem.
    for (body, needle) in [
        ("not json", "not valid JSON"),
        (r#"{"runId":"r","messages":[]}"#, "threadId"),
        (r#"{"threadId":"t","messages":[]}"#, "runId"),
        (r#"{"threadId":"t","runId":"r","messages":[]}"#, "no user message"),
        (r#"{"threadId":"t","runId":"r","messages":{}}"#, "messages"),
        (r#"{"threadId":"t","runId":"r","messages":[{"role":"user","content":7}]}"#, "content"),
    ] {
        let r = request(p, "POST", "/agui", &[JSON], body.as_bytes());
        assert_eq!(r.status, 400, "{body}");
        assert!(r.error().contains(needle), "{body}: {}", r.error());
    }
    // Lenient: state null, parts array, unknown keys.
    let lenient = r#"{"threadId":"t2","runId":"r-len","state":null,"x":1,"messages":[{"id":"1","role":"user","content":[{"type":"text","text":"hi"}]}]}"#;
    assert_eq!(request(p, "POST", "/agui", &[JSON], lenient.as_bytes()).status, 200);

    // Origins: none passes; own loopback origins pass with exact CORS; others 403.
    let own = format!("http://localhost:{p}");
    for origin in [format!("http://127.0.0.1:{p}"), own.clone(), format!("http://[::1]:{p}")] {
        let r = request(p, "GET", "/healthz", &[("Origin", &origin)], b"");
        assert_eq!(r.status, 200, "{origin}");
        assert_eq!(r.header("access-control-allow-origin"), Some(origin.as_str()));
        assert_eq!(r.header("vary"), Some("Origin"));
    }
    let r =
        request(p, "POST", "/agui", &[JSON, ("Origin", "https://app.example")], good.replace("r-ok", "r-o").as_bytes());
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    // What a page of that origin must read to follow the docs: when to retry, and a keyed replay.
    assert_eq!(r.header("access-control-expose-headers"), Some("Retry-After, Idempotent-Replayed"));
    for origin in ["http://evil.example", "null", &format!("http://localhost:{}", p.wrapping_add(1))] {
        let r = request(p, "POST", "/agui", &[JSON, ("Origin", origin)], good.as_bytes());
        assert_eq!(r.status, 403, "{origin}");
        assert!(r.header("access-control-allow-origin").is_none());
        r.error();
    }
    // Preflight.
    let pre = [("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST")];
    let r = request(p, "OPTIONS", "/agui", &pre, b"");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    assert!(r.header("access-control-allow-methods").unwrap().contains("POST"));
    // Every header a client sends, `Last-Event-ID` of a resumed stream too.
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("content-type, authorization, idempotency-key, last-event-id")
    );
    let r = request(p, "OPTIONS", "/agui", &[("Origin", "http://evil.example")], b"");
    assert_eq!(r.status, 403);
    assert!(r.header("access-control-allow-origin").is_none());

    // DNS rebinding: a foreign Host is refused even with an allowed Origin.
    let r = request(p, "POST", "/agui", &[JSON, ("Host", "evil.example"), ("Origin", &own)], good.as_bytes());
    assert_eq!(r.status, 403);
    assert!(r.error().contains("Host"));
    assert_eq!(request(p, "GET", "/healthz", &[("Host", &format!("evil.example:{p}"))], b"").status, 403);
    assert_eq!(request(p, "GET", "/healthz", &[("Host", &format!("localhost:{p}"))], b"").status, 200);

    // Bounds on the head.
    let huge = "x".repeat(20 * 1024);
    assert_eq!(request(p, "GET", "/healthz", &[("X-Big", &huge)], b"").status, 431);
    let many: Vec<(String, String)> = (0..100).map(|i| (format!("X-H{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(request(p, "GET", "/healthz", &many, b"").status, 431);
    // Routes.
    assert_eq!(request(p, "GET", "/nope", &[], b"").status, 404);
    assert_eq!(request(p, "GET", "/agui", &[], b"").status, 405);
}

#[test]
fn slow_client_gets_408() {
    let s = start(&[], &[("RUNWIRE_READ_TIMEOUT_MS", "300")]);
    let mut sock = connect(s.port);
    let t = Instant::now();
    sock.write_all(b"POST /agui HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    let mut out = Vec::new();
    sock.read_to_end(&mut out).unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    let r = parse_response(&out);
    assert_eq!(r.status, 408);
    r.error();

    // A body that stops short.
    let mut sock = connect(s.port);
    sock.write_all(
        b"POST /agui HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .unwrap();
    let mut out = Vec::new();
    sock.read_to_end(&mut out).unwrap();
    assert_eq!(parse_response(&out).status, 408);

    // A head trickled a byte at a time, each within the idle timeout, still
    // hits the request deadline (3 idle timeouts).
    let mut sock = connect(s.port);
    let t = Instant::now();
    let mut out = Vec::new();
    for b in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter() {
        if sock.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        if t.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    sock.read_to_end(&mut out).unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(parse_response(&out).status, 408);
}

#[test]
fn token_guards_every_route_but_healthz() {
    let token = "s3cret-token-0123456789";
    let f = tmp("good.token");
    std::fs::write(&f, format!("\n {token}\n")).unwrap();
    let s = start(&["--token-file", f.to_str().unwrap()], &[]);
    let p = s.port;
    let body = run_body("t", "r1", "hi");
    assert_eq!(request(p, "GET", "/healthz", &[], b"").status, 200);
    let r = request(p, "POST", "/agui", &[JSON], body.as_bytes());
    assert_eq!(r.status, 401);
    r.error();
    let wrong = format!("Bearer {token}x");
    assert_eq!(request(p, "POST", "/agui", &[JSON, ("Authorization", &wrong)], body.as_bytes()).status, 401);
    let right = format!("Bearer {token}");
    let r = request(p, "POST", "/agui", &[JSON, ("Authorization", &right)], body.as_bytes());
    assert_eq!(r.status, 200);
    assert_eq!(types(&r.events()).last().map(String::as_str), Some("RUN_FINISHED"));
    // GET routes also take ?token=; POST does not.
    assert_eq!(request(p, "GET", "/api/info", &[], b"").status, 401);
    assert_eq!(request(p, "GET", &format!("/api/info?token={token}"), &[], b"").status, 200);
    assert_eq!(request(p, "GET", "/api/info?token=nope-nope-nope-nope", &[], b"").status, 401);
    assert_eq!(request(p, "GET", "/runs", &[], b"").status, 401);
    // A thread's messages (its threadId is the client's, not a secret).
    assert_eq!(request(p, "GET", "/agui/thread?threadId=t", &[], b"").status, 401);
    assert_eq!(request(p, "GET", &format!("/agui/thread?threadId=t&token={token}"), &[], b"").status, 200);
    // The studio page holds no data: it loads without the token (and then sends it on each call).
    assert_eq!(request(p, "GET", "/", &[], b"").status, 200);
    let r = request(p, "POST", &format!("/agui?token={token}"), &[JSON], run_body("t", "r2", "x").as_bytes());
    assert_eq!(r.status, 401);
}

#[test]
fn allow_remote_lifts_the_host_check_but_not_the_token() {
    let token = "another-token-0123456789";
    let f = tmp("remote.token");
    std::fs::write(&f, token).unwrap();
    let s = start(&["--allow-remote", "--token-file", f.to_str().unwrap()], &[]);
    let p = s.port;
    let host = ("Host", "runwire.example:8787");
    assert_eq!(request(p, "GET", "/healthz", &[host], b"").status, 200);
    let body = run_body("t", "r", "hi");
    assert_eq!(request(p, "POST", "/agui", &[JSON, host], body.as_bytes()).status, 401);
    let auth = format!("Bearer {token}");
    let r = request(p, "POST", "/agui", &[JSON, host, ("Authorization", &auth)], body.as_bytes());
    assert_eq!(r.status, 200);
    // Origins are still checked.
    let r =
        request(p, "POST", "/agui", &[JSON, host, ("Authorization", &auth), ("Origin", "http://evil.example")], b"{}");
    assert_eq!(r.status, 403);
}

#[test]
fn spawn_failure_is_run_started_then_run_error() {
    let s = start(&["--agent", "claude", "--agent-cmd", "/nonexistent/agent.sh"], &[]);
    let r = post_run(s.port, "t", "r");
    assert_eq!(r.status, 200);
    let ev = r.events();
    assert_eq!(types(&ev), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(ev[1]["message"].as_str().unwrap().contains("127"), "{}", ev[1]);
    support::verify::verify(&ev).unwrap();
}

/// A server started inside a supervised step (its environment has
/// `RUNWIRE_SUPERVISED=1`) gives its agents none of it: a session such
/// an agent starts is an operator's (spec/SUPERVISOR.md): neither a batch
/// run's agent nor an interactive session's.
#[test]
fn a_servers_agents_never_inherit_the_supervised_flag() {
    use std::os::unix::fs::PermissionsExt;
    let seen = fresh("supervised-env.txt");
    let agent = fresh("supervised-env-agent.sh");
    std::fs::write(&agent, format!("#!/bin/sh\nenv > {}\n", seen.display())).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A batch run, then an interactive session's agent.
    for extra in [&[][..], &["--interactive"][..]] {
        let _ = std::fs::remove_file(&seen);
        let mut args = vec!["--agent", "claude", "--agent-cmd", agent.to_str().unwrap()];
        args.extend_from_slice(extra);
        let s = start(&args, &[("RUNWIRE_SUPERVISED", "1")]);
        let _ = post_run(s.port, "t", "r").events();
        let env = std::fs::read_to_string(&seen).unwrap_or_else(|_| panic!("the agent ran: {extra:?}"));
        assert!(env.lines().any(|l| l.starts_with("PATH=")), "{extra:?}: {env}");
        assert!(!env.contains("RUNWIRE_SUPERVISED"), "{extra:?}: {env}");
    }
}

#[test]
fn missing_engine_and_failure_end_in_run_error() {
    let stub = stub();
    let s = start(&["--agent", "claude", "--agent-cmd", &stub], &[("STUB_MODE", "missing")]);
    let ev = post_run(s.port, "t", "r").events();
    assert_eq!(types(&ev), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(ev[1]["message"].as_str().unwrap().contains("127"), "{}", ev[1]);

    let s = start(&["--agent", "claude", "--agent-cmd", &stub], &[("STUB_MODE", "fail")]);
    let ev = post_run(s.port, "t", "r").events();
    support::verify::verify(&ev).unwrap();
    assert!(ev.len() > 2);
    assert_eq!(ev.last().unwrap()["type"], "RUN_ERROR");
    assert!(ev.last().unwrap()["message"].as_str().unwrap().contains("stub engine failed"));
}

#[test]
fn disconnect_stops_the_agent_group_with_sigterm() {
    let rec = fresh("disconnect.rec");
    let stub = stub();
    let s = start(
        &["--agent", "claude", "--agent-cmd", &stub],
        &[("STUB_MODE", "hang"), ("STUB_RECORD", rec.to_str().unwrap())],
    );
    let (sock, _) = open_stream(s.port, "t", "r", 2);
    let pgid = wait_for_record(&rec);
    assert!(group_alive(pgid));
    drop(sock);
    let took = wait_group_gone(pgid, Duration::from_secs(5));
    assert!(took < Duration::from_millis(1800), "SIGTERM should have been enough, took {took:?}");
    assert!(!Path::new(&format!("/proc/{pgid}")).exists(), "the stub is a zombie");
    // The run is over: its thread is free again, once its handler has
    // finished after the group (a new connection may be taken first).
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let mut c = connect(s.port);
        c.write_all(&build(s.port, "POST", "/agui", &[JSON], run_body("t", "r2", "hi").as_bytes())).unwrap();
        let mut head = [0u8; 12];
        c.read_exact(&mut head).unwrap();
        if &head == b"HTTP/1.1 200" {
            break;
        }
        assert!(&head == b"HTTP/1.1 409" && std::time::Instant::now() < deadline, "{}", String::from_utf8_lossy(&head));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_agent_ignoring_sigterm_is_killed_after_the_grace() {
    let rec = fresh("ignore-term.rec");
    let stub = stub();
    let s = start(
        &["--agent", "claude", "--agent-cmd", &stub],
        &[("STUB_MODE", "ignore-term"), ("STUB_RECORD", rec.to_str().unwrap())],
    );
    let (sock, _) = open_stream(s.port, "t", "r", 2);
    let pgid = wait_for_record(&rec);
    sock.shutdown(Shutdown::Both).unwrap();
    drop(sock);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(group_alive(pgid), "an agent that ignores SIGTERM must survive until the grace ends");
    let took = wait_group_gone(pgid, Duration::from_secs(6));
    assert!(took > Duration::from_millis(500), "killed too early: {took:?} after the first check");
    assert!(!Path::new(&format!("/proc/{pgid}")).exists(), "the stub is a zombie");
}

#[test]
fn the_status_line_ends_the_stream_even_if_the_agent_lingers() {
    let rec = fresh("linger.rec");
    let stub = stub();
    let s = start(
        &["--agent", "claude", "--agent-cmd", &stub],
        &[("STUB_MODE", "linger"), ("STUB_RECORD", rec.to_str().unwrap())],
    );
    let t = Instant::now();
    let r = post_run(s.port, "t", "r");
    assert!(t.elapsed() < Duration::from_secs(5), "the stream waited for the agent: {:?}", t.elapsed());
    let ev = r.events();
    support::verify::verify(&ev).unwrap();
    assert_eq!(ev.last().unwrap()["type"], "RUN_FINISHED");
    let pgid = wait_for_record(&rec);
    wait_group_gone(pgid, Duration::from_secs(3));
}

#[test]
fn busy_thread_is_409_and_keepalive_flows() {
    let stub = stub();
    let s =
        start(&["--agent", "claude", "--agent-cmd", &stub], &[("STUB_MODE", "hang"), ("RUNWIRE_KEEPALIVE_MS", "100")]);
    let (mut sock, _) = open_stream(s.port, "busy", "r1", 1);
    let r = post_run(s.port, "busy", "r2");
    assert_eq!(r.status, 409);
    assert!(r.error().contains("active run"));
    // The same runId while it streams is refused too.
    assert_eq!(post_run(s.port, "busy", "r1").status, 409);
    // Idle stream: keep-alive comments arrive.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while find(&got, b": keep-alive\n\n").is_none() {
        assert!(Instant::now() < deadline, "no keep-alive comment");
        let k = sock.read(&mut buf).unwrap();
        assert!(k > 0);
        got.extend_from_slice(&buf[..k]);
    }
}

#[test]
fn a_later_run_on_the_thread_resumes_the_session() {
    let rec = fresh("resume.rec");
    let stub = stub();
    let s = start(&["--agent", "claude", "--agent-cmd", &stub], &[("STUB_RECORD", rec.to_str().unwrap())]);
    assert_eq!(post_run(s.port, "th", "r1").status, 200);
    assert_eq!(post_run(s.port, "th", "r2").status, 200);
    assert_eq!(post_run(s.port, "other", "r3").status, 200);
    let lines = record_lines(&rec);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].contains("--prompt hello") && !lines[0].contains("--resume"), "{}", lines[0]);
    assert!(lines[1].contains(&format!("--resume {SESSION}")), "{}", lines[1]);
    assert!(!lines[2].contains("--resume"), "{}", lines[2]);
}

#[test]
fn reposting_a_finished_run_replays_it_without_the_agent() {
    let rec = fresh("idem.rec");
    let stub = stub();
    let s = start(&["--agent", "claude", "--agent-cmd", &stub], &[("STUB_RECORD", rec.to_str().unwrap())]);
    let a = post_run(s.port, "t", "r1");
    let b = post_run(s.port, "t", "r1");
    assert_eq!(a.status, 200);
    assert_eq!(b.status, 200);
    assert!(!a.body.is_empty());
    assert_eq!(a.body, b.body);
    assert_eq!(record_lines(&rec).len(), 1, "the agent ran again");
    let r = request(s.port, "POST", "/agui", &[JSON], run_body("t", "r1", "something else").as_bytes());
    assert_eq!(r.status, 409);
    assert!(r.error().contains("different request"));
}

fn pipeline(adapter: &str, input: &Path, thread: &str, run: &str, epoch: &str) -> Vec<u8> {
    let bin = |name: &str| {
        let mut c = Command::new(match name {
            "normalize-events" => env!("CARGO_BIN_EXE_normalize-events"),
            "agui-translate" => env!("CARGO_BIN_EXE_agui-translate"),
            _ => env!("CARGO_BIN_EXE_sse-encode"),
        });
        c.env("SOURCE_DATE_EPOCH", epoch);
        c
    };
    let events = bin("normalize-events").arg(adapter).arg("--input").arg(input).output().unwrap();
    assert!(events.status.success());
    let mut tr = bin("agui-translate")
        .args(["--thread-id", thread, "--run-id", run])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    tr.stdin.take().unwrap().write_all(&events.stdout).unwrap();
    let agui = tr.wait_with_output().unwrap();
    let mut enc = bin("sse-encode").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    enc.stdin.take().unwrap().write_all(&agui.stdout).unwrap();
    enc.wait_with_output().unwrap().stdout
}

#[test]
fn server_bytes_equal_the_pipeline_binaries() {
    let epoch = "1754166531";
    for name in ["bb-turn-tools.partial.jsonl", "bb-subagent.partial.jsonl", "bb-auth-failure.jsonl"] {
        let f = fixture(name);
        let s = start(&["--agent", "claude", "--replay", f.to_str().unwrap()], &[("SOURCE_DATE_EPOCH", epoch)]);
        let r = post_run(s.port, "T", "R");
        assert_eq!(r.status, 200);
        let want = pipeline("claude", &f, "T", "R", epoch);
        assert!(!want.is_empty());
        assert_eq!(r.text(), String::from_utf8(want).unwrap(), "{name}");
    }
    // An agent run too: the stub's output (fixture + status line) through the binaries.
    let stub = stub();
    let s = start(&["--agent", "claude", "--agent-cmd", &stub], &[("SOURCE_DATE_EPOCH", epoch)]);
    let r = post_run(s.port, "T", "R");
    let out = Command::new(&stub).args(["--prompt", "hello"]).output().unwrap();
    let log = fresh("stub-output.jsonl");
    std::fs::write(&log, out.stdout).unwrap();
    assert_eq!(r.text(), String::from_utf8(pipeline("claude", &log, "T", "R", epoch)).unwrap());
}

#[test]
fn shutdown_stops_running_agents_and_exits_0() {
    let rec = fresh("shutdown.rec");
    let stub = stub();
    let mut s = start(
        &["--agent", "claude", "--agent-cmd", &stub],
        &[("STUB_MODE", "hang"), ("STUB_RECORD", rec.to_str().unwrap())],
    );
    let (mut sock, mut got) = open_stream(s.port, "t", "r", 2);
    let pgid = wait_for_record(&rec);
    assert_eq!(s.terminate(Duration::from_secs(10)).1, Some(0));
    assert!(!group_alive(pgid));
    sock.read_to_end(&mut got).unwrap();
    let r = parse_response(&got);
    let ev = r.events();
    support::verify::verify(&ev).unwrap();
    assert_eq!(ev.last().unwrap()["type"], "RUN_ERROR");
    assert!(ev.last().unwrap()["message"].as_str().unwrap().contains("shutting down"));
}

#[test]
fn studio_page_is_served_with_a_strict_policy_and_revalidates() {
    let s = start(&[], &[]);
    let p = s.port;
    let r = request(p, "GET", "/", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let expected = std::fs::read(root().join("studio/app/index.html")).unwrap();
    assert_eq!(r.body, expected, "the page is the embedded studio/app/index.html");
    let csp = r.header("content-security-policy").expect("a CSP on the page");
    for directive in
        ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]
    {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval") && !csp.contains('*'), "{csp}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    let etag = r.header("etag").expect("an ETag").to_string();
    let again = request(p, "GET", "/", &[("If-None-Match", &etag)], b"");
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(request(p, "GET", "/", &[("If-None-Match", "\"other\"")], b"").status, 200);
    // Every file under studio/app/ is served at /studio/<path>, with its own type.
    let mut files = Vec::new();
    let app = root().join("studio/app");
    let mut dirs = vec![app.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if !path.file_name().unwrap().to_string_lossy().starts_with('.') {
                files.push(path);
            }
        }
    }
    for f in &files {
        let rel = f.strip_prefix(&app).unwrap().to_string_lossy().into_owned();
        let r = request(p, "GET", &format!("/studio/{rel}"), &[], b"");
        assert_eq!(r.status, 200, "{rel}");
        assert_eq!(r.body, std::fs::read(f).unwrap(), "{rel}");
        if rel.ends_with(".js") {
            assert_eq!(r.header("content-type"), Some("text/javascript; charset=utf-8"), "{rel}");
        }
    }
    // Nothing outside the embedded table, however the path is spelled.
    for bad in
        ["/studio/", "/studio/nope.js", "/studio/../Cargo.toml", "/studio/%2e%2e/Cargo.toml", "/studio//index.html"]
    {
        let r = request(p, "GET", bad, &[], b"");
        assert_eq!(r.status, 404, "{bad}");
        r.error();
    }
    assert_eq!(request(p, "POST", "/", &[JSON], b"{}").status, 405);
    // What `GET /` used to answer lives at /api/info.
    let info = request(p, "GET", "/api/info", &[], b"").json();
    assert_eq!(info["agui"], "/agui");
    assert_eq!(info["mode"], "replay");
    assert_eq!(info["evidence"], false);
}

#[test]
fn evidence_route_checks_the_directory_on_every_request() {
    let s = start(&[], &[]);
    let r = request(s.port, "GET", "/api/evidence", &[], b"");
    assert_eq!(r.status, 404);
    assert!(r.error().contains("--evidence"));
    drop(s);

    let dir = tmp("evidence-dir");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sample = std::fs::read(root().join("fixtures/verdict/accept.verdict.json")).unwrap();
    std::fs::write(dir.join("verdict.json"), &sample).unwrap();
    let s = start(&["--evidence", dir.to_str().unwrap()], &[]);
    let p = s.port;
    assert_eq!(request(p, "GET", "/api/info", &[], b"").json()["evidence"], true);
    let r = request(p, "GET", "/api/evidence", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    // The summary is verdict-check's own --format json, plus policy, trials and the source.
    let cli = Command::new(env!("CARGO_BIN_EXE_verdict-check"))
        .args(["--format", "json", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(2), "verdict-check --dir needs H0/H1; the server checks them only when present");
    let cli = Command::new(env!("CARGO_BIN_EXE_verdict-check"))
        .args(["--format", "json"])
        .arg(dir.join("verdict.json"))
        .output()
        .unwrap();
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    for key in ["status", "reason", "baseline", "candidate", "evidence"] {
        assert_eq!(body[key], cli[key], "{key}");
    }
    let raw: Value = serde_json::from_slice(&sample).unwrap();
    assert_eq!(body["trials"], raw["trials"]);
    assert_eq!(body["ok"], true);

    // Swapped for a malformed verdict: a readable 422 naming the finding, at once.
    let edited = String::from_utf8(sample.clone()).unwrap().replacen("\"passedTrials\": 2", "\"passedTrials\": 1", 1);
    std::fs::write(dir.join("verdict.json"), edited).unwrap();
    let r = request(p, "GET", "/api/evidence", &[], b"");
    assert_eq!(r.status, 422);
    let body = r.json();
    assert_eq!(body["ok"], false);
    assert!(body["error"].as_str().unwrap().contains("passedTrials"), "{body}");
    assert!(body["findings"].as_array().unwrap().iter().any(|f| f["path"] == "candidate.passedTrials"), "{body}");
    std::fs::write(dir.join("verdict.json"), b"not json").unwrap();
    let r = request(p, "GET", "/api/evidence", &[], b"");
    assert_eq!(r.status, 422);
    assert!(!r.error().is_empty());
    assert_eq!(request(p, "POST", "/api/evidence", &[JSON], b"{}").status, 405);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Polls `/healthz` until it answers 200 (not the 503 of a full server); how long that took.
fn wait_for_a_free_slot(port: u16, limit: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let mut s = connect(port);
        let _ = s.write_all(&build(port, "GET", "/healthz", &[], b""));
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        if raw.starts_with(b"HTTP/1.1 200 ") {
            return t.elapsed();
        }
        assert!(t.elapsed() < limit, "the slot is still held after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_client_trickling_bytes_after_its_response_does_not_hold_its_slot() {
    let s = start(&["--max-connections", "2"], &[]);
    let p = s.port;
    let (tx, rx) = mpsc::channel();
    let tricklers: Vec<_> = (0..2)
        .map(|_| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut sock = connect(p);
                sock.write_all(&build(p, "GET", "/healthz", &[], b"")).unwrap();
                let mut out = Vec::new();
                sock.read_to_end(&mut out).unwrap();
                assert_eq!(parse_response(&out).status, 200);
                tx.send(()).unwrap();
                // One byte every 0.4 s: each within any per-read timeout.
                for _ in 0..10 {
                    if sock.write_all(b"x").is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(400));
                }
            })
        })
        .collect();
    rx.recv_timeout(IO_TIMEOUT).unwrap();
    rx.recv_timeout(IO_TIMEOUT).unwrap();
    // Both slots are lingering; the whole linger is bounded (about a second).
    let took = wait_for_a_free_slot(p, Duration::from_secs(3));
    assert!(took < Duration::from_secs(3));
    for t in tricklers {
        t.join().unwrap();
    }
}

#[test]
fn a_client_that_sent_extra_bytes_and_left_is_noticed_at_once() {
    let rec = fresh("extra-bytes.rec");
    let stub = stub();
    let s = start(
        &["--agent", "claude", "--agent-cmd", &stub],
        &[("STUB_MODE", "hang"), ("STUB_RECORD", rec.to_str().unwrap())],
    );
    let mut sock = connect(s.port);
    sock.write_all(&build(s.port, "POST", "/agui", &[JSON], run_body("t", "r", "hi").as_bytes())).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while find(&got, b"data: ").is_none() {
        let k = sock.read(&mut buf).unwrap();
        assert!(k > 0);
        got.extend_from_slice(&buf[..k]);
    }
    let pgid = wait_for_record(&rec);
    assert!(group_alive(pgid));
    // The client sends 42 bytes after its body and leaves (FIN): they sit
    // before the end of its stream, where a peek would see them and not the end.
    sock.write_all(&[b'z'; 42]).unwrap();
    sock.shutdown(Shutdown::Write).unwrap();
    let took = wait_group_gone(pgid, Duration::from_secs(10));
    assert!(took < Duration::from_millis(1800), "the agent was stopped {took:?} after the client left");
}

/// A wrapper that floods its stdout with text deltas until it is killed.
fn flooding_agent(name: &str) -> PathBuf {
    let path = tmp(name);
    // Up to an open text block (line 31), then its first text delta forever.
    let fixture = fixture("bb-approval-deny.partial.jsonl");
    let delta = std::fs::read_to_string(&fixture).unwrap().lines().nth(31).unwrap().to_string();
    assert!(delta.contains("text_delta"));
    let script = format!(
        "#!/bin/sh\necho \"$$\" >>\"{rec}\"\nhead -n 31 \"{fix}\"\nexec yes '{delta}'\n",
        rec = fresh(&format!("{name}.rec")).display(),
        fix = fixture.display(),
    );
    std::fs::write(&path, script).unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).unwrap();
    path
}

#[test]
fn a_post_agui_client_that_reads_nothing_is_dropped_after_the_write_timeout() {
    let agent = flooding_agent("flood.sh");
    let s = start(
        &["--agent", "claude", "--agent-cmd", agent.to_str().unwrap(), "--max-connections", "1"],
        &[("RUNWIRE_WRITE_TIMEOUT_MS", "1000")],
    );
    let mut sock = connect(s.port);
    sock.write_all(&build(s.port, "POST", "/agui", &[JSON], run_body("t", "r", "hi").as_bytes())).unwrap();
    let pgid = wait_for_record(&tmp("flood.sh.rec"));
    // Never read: about a second after the client stopped taking bytes, its slot is free
    // and its agent stopped (before: ~97 s, a timeout per write call).
    let took = wait_for_a_free_slot(s.port, Duration::from_secs(10));
    assert!(took >= Duration::from_millis(500), "dropped before the write timeout: {took:?}");
    wait_group_gone(pgid, Duration::from_secs(5));
    drop(sock);
}

#[test]
fn a_bare_lf_head_is_refused_at_once() {
    let s = start(&[], &[]);
    // Not a 408 after the read timeout (10 s).
    let t = Instant::now();
    let r = raw_request(s.port, b"GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("CRLF"), "{}", r.error());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn a_host_with_an_impossible_port_is_refused() {
    let s = start(&[], &[]);
    let p = s.port;
    // No socket has port 99999 (or 0).
    for host in ["localhost:99999", "127.0.0.1:0", "[::1]:65536"] {
        assert_eq!(request(p, "GET", "/healthz", &[("Host", host)], b"").status, 403, "{host}");
    }
}

#[test]
fn two_host_or_two_origin_headers_are_400() {
    let s = start(&[], &[]);
    let p = s.port;
    let own = format!("http://127.0.0.1:{p}");
    let r = request(p, "GET", "/healthz", &[("Host", "127.0.0.1"), ("Host", "evil.example")], b"");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("Host"));
    let r = request(p, "GET", "/healthz", &[("Origin", &own), ("Origin", "http://evil.example")], b"");
    assert_eq!(r.status, 400);
    assert!(r.error().contains("Origin"));
}

#[test]
fn origin_null_is_refused_without_suggesting_a_flag_that_refuses_it() {
    let s = start(&[], &[]);
    let p = s.port;
    let r = request(p, "GET", "/healthz", &[("Origin", "null")], b"");
    assert_eq!(r.status, 403);
    assert!(!r.error().contains("--allow-origin null"), "{}", r.error());
    let bin = env!("CARGO_BIN_EXE_runwire-serve");
    let out = Command::new(bin).args(["--listen", "127.0.0.1:0", "--allow-origin", "null"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_unknown_expectation_is_417() {
    let s = start(&[], &[]);
    let p = s.port;
    let r = request(p, "GET", "/healthz", &[("Expect", "200-ok")], b"");
    assert_eq!(r.status, 417);
    r.error();
    let r = request(p, "POST", "/agui", &[JSON, ("Expect", "200-ok")], run_body("t", "r", "hi").as_bytes());
    assert_eq!(r.status, 417);
    assert_eq!(post_run(p, "t", "r").status, 200, "nothing was started by the 417");
}

#[test]
fn a_server_on_another_loopback_address_accepts_its_own_pages() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runwire-serve"))
        .args(["--listen", "127.0.0.2:0"])
        .env("RUNWIRE_REPLAY_DELAY_MS", "0")
        .env("HARNESS_HOME", tmp("harness-127-0-0-2"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().strip_prefix("listening on http://127.0.0.2:").unwrap().parse().unwrap();
    let page = format!("http://127.0.0.2:{port}");
    let host = format!("127.0.0.2:{port}");
    let ask = |method: &str, path: &str, body: &[u8]| {
        let mut s = TcpStream::connect(("127.0.0.2", port)).unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.write_all(&build(port, method, path, &[("Host", &host), ("Origin", &page), JSON], body)).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        parse_response(&out)
    };
    // What the studio's scripts send when the page was loaded from the listen address.
    let r = ask("GET", "/api/info", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some(page.as_str()));
    let r = ask("POST", "/agui", run_body("t", "r", "hi").as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(types(&r.events()).last().map(String::as_str), Some("RUN_FINISHED"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn an_installed_binary_without_a_checkout_uses_its_embedded_wrappers() {
    // The binary alone, outside the repository, as `cargo install` leaves it.
    let base = tmp("installed");
    let _ = std::fs::remove_dir_all(&base);
    let bin_dir = base.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("runwire-serve");
    std::fs::copy(env!("CARGO_BIN_EXE_runwire-serve"), &bin).unwrap();
    let home = base.join("home");
    let start = || {
        let mut child = Command::new(&bin)
            .args(["--listen", "127.0.0.1:0", "--agent", "claude"])
            .current_dir(&base)
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("PREFIX")
            .env("HARNESS_HOME", base.join("harness"))
            .env("RUNWIRE_CLAUDE_BIN", root().join("fixtures/stub-engines/claude"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line.trim().rsplit(':').next().unwrap().parse().unwrap();
        (child, port)
    };
    let (mut child, port) = start();
    let r = post_run(port, "t", "r1");
    assert_eq!(r.status, 200);
    let ev = r.events();
    assert_eq!(ev.last().unwrap()["type"], "RUN_FINISHED", "{}", r.text());
    // Written on first use under ~/.cache/runwire, in a directory named by their content hash.
    let cache = home.join(".cache/runwire");
    let dirs: Vec<PathBuf> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = &dirs[0];
    let name = dir.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("wrappers-") && name.len() == "wrappers-".len() + 16, "{name}");
    for f in ["_common.sh", "claude.sh", "codex.sh", "cursor.sh"] {
        assert_eq!(std::fs::read(dir.join(f)).unwrap(), std::fs::read(root().join("wrappers").join(f)).unwrap(), "{f}");
    }
    let _ = child.kill();
    let _ = child.wait();
    // A cached copy changed since is never used: it is written again.
    std::fs::write(dir.join("claude.sh"), "#!/bin/sh\nexit 42\n").unwrap();
    let (mut child, port) = start();
    let r = post_run(port, "t", "r2");
    assert_eq!(r.events().last().unwrap()["type"], "RUN_FINISHED", "{}", r.text());
    assert_eq!(
        std::fs::read(dir.join("claude.sh")).unwrap(),
        std::fs::read(root().join("wrappers/claude.sh")).unwrap()
    );
    let _ = child.kill();
    let _ = child.wait();
    // The binary's copy is tens of MB: not left in the temp dir on every run.
    let _ = std::fs::remove_dir_all(&base);
}

/// The server's first stdout line, and its stderr up to its start-up line
/// (the one naming the studio's address); the server is stopped after.
fn startup(args: &[&str], envs: &[(&str, &str)]) -> (String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-serve"));
    cmd.arg("--listen")
        .arg("127.0.0.1:0")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.env("HARNESS_HOME", home()).env_remove("RUNWIRE_CLAUDE_BIN");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start runwire-serve");
    let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send((true, line));
    });
    std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
            if line.contains("for the studio") {
                break;
            }
        }
        let _ = tx2.send((false, text));
    });
    let (mut first, mut stderr) = (None, None);
    while first.is_none() || stderr.is_none() {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok((true, l)) => first = Some(l),
            Ok((false, t)) => stderr = Some(t),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    (first.unwrap_or_default(), stderr.expect("the start-up line on stderr within 10 s"))
}

#[test]
fn a_missing_agent_is_a_warning_at_start_not_a_refusal() {
    let empty = fresh("no-agents");
    std::fs::create_dir_all(&empty).unwrap();
    let path = [("PATH", empty.to_str().unwrap())];
    // Batch and interactive alike: the server starts, and says what it will not find.
    for extra in [&[][..], &["--interactive"]] {
        let args: Vec<&str> = ["--agent", "claude"].iter().copied().chain(extra.iter().copied()).collect();
        let (first, err) = startup(&args, &path);
        assert!(first.starts_with("listening on http://127.0.0.1:"), "{first:?}");
        assert!(
            err.contains(r#"runwire-serve: warning: the claude CLI (set $RUNWIRE_CLAUDE_BIN or put it on PATH): "claude" not found or not executable"#),
            "{args:?}: {err}"
        );
    }
    let (_, err) = startup(&["--agent", "claude", "--interactive"], &[("RUNWIRE_CLAUDE_BIN", "/nonexistent/claude")]);
    assert!(err.contains(r#"warning: $RUNWIRE_CLAUDE_BIN: "/nonexistent/claude" not found"#), "{err}");
    let (_, err) = startup(&["--agent", "claude", "--interactive", "--agent-cmd", "/nonexistent/agent"], &[]);
    assert!(err.contains(r#"warning: --agent-cmd: "/nonexistent/agent" not found"#), "{err}");
    // Found (the stub engines are a `claude` on PATH): nothing said; nor for the demo.
    let stubs =
        format!("{}:{}", root().join("fixtures/stub-engines").display(), std::env::var("PATH").unwrap_or_default());
    for args in [&["--agent", "claude"][..], &["--agent", "claude", "--interactive"], &[], &["--demo"]] {
        let (_, err) = startup(args, &[("PATH", &stubs)]);
        assert!(!err.contains("warning"), "{args:?}: {err}");
    }
}

#[test]
fn with_a_token_the_start_up_line_gives_the_studio_address_with_it() {
    let f = tmp("url.token");
    std::fs::write(&f, "s3cret/token+0123456789\n").unwrap();
    let (first, err) = startup(&["--token-file", f.to_str().unwrap()], &[]);
    // stdout's first line stays exactly the address, for scripts.
    let addr = first.trim_end().strip_prefix("listening on ").expect("the listening line").to_string();
    assert!(first.ends_with('\n') && !addr.contains(' '), "{first:?}");
    assert!(err.contains(&format!("open {addr}/#token=s3cret%2Ftoken%2B0123456789 for the studio")), "{err}");
    let (_, err) = startup(&[], &[]);
    assert!(err.contains("/ for the studio") && !err.contains("token"), "{err}");
}

/// A connection the server cannot start a thread for (its address space
/// full, here by `prlimit` on the running server: the stack does not fit)
/// is answered 503 and said on stderr, not closed unanswered; with room
/// again, the next one is served.
#[test]
fn a_connection_no_thread_can_be_started_for_is_answered_503_and_said() {
    let s = start(&[], &[]);
    let healthz = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    // Served once first: its thread's stack is kept for the next one.
    assert_eq!(raw_request(s.port, healthz).status, 200);
    // No room for a new thread's stack.
    let squeezed = support::squeeze_address_space(s.pid() as u32);
    // A thread that ended leaves its stack to the next one (glibc keeps a
    // few), which needs no new room: connections whose head never ends
    // hold those, until one gets no thread.
    let mut held = Vec::new();
    let mut answered = None;
    for _ in 0..32 {
        let mut c = connect(s.port);
        c.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        if out.is_empty() {
            held.push(c);
        } else {
            answered = Some(parse_response(&out));
            break;
        }
    }
    drop(squeezed);
    drop(held);
    let r = answered.expect("every connection got a thread under the limit");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.error().contains("no thread for this connection"), "{}", r.error());
    let deadline = Instant::now() + IO_TIMEOUT;
    while !s.stderr().contains("runwire-serve: accept: no thread for a connection") {
        assert!(Instant::now() < deadline, "not said: {}", s.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(raw_request(s.port, healthz).status, 200, "served again: {}", s.stderr());
}

/// `--cluster` with no `runwire-cluster` next to the server or on PATH (the
/// root package built alone): a usage error naming how to get it, before
/// anything is served, not a server that serves on cut off from its cluster.
#[test]
fn cluster_mode_without_its_sidecar_binary_refuses_to_start() {
    let dir = fresh("no-sidecar");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_runwire-serve"), bin.join("runwire-serve")).unwrap();
    let o = Command::new(bin.join("runwire-serve"))
        .args(["--cluster", "nats://127.0.0.1:9", "--node", "alpha", "--listen", "127.0.0.1:0"])
        .env("HARNESS_HOME", dir.join("home"))
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty(), "nothing listened: {}", String::from_utf8_lossy(&o.stdout));
    assert!(err.starts_with("runwire-serve: --cluster: runwire-cluster is neither next to"), "{err}");
    assert!(err.contains("cargo build --release --workspace"), "{err}");
}

/// What a line's events carry, without ids and times (a run's live stream
/// and its record's task stream name the thread and run differently).
fn event_shape(e: &Value) -> Value {
    let mut o = serde_json::Map::new();
    for k in ["type", "delta", "name", "value", "content", "role", "toolCallName", "message", "code"] {
        if let Some(v) = e.get(k) {
            o.insert(k.into(), without_ids(v));
        }
    }
    Value::Object(o)
}

fn without_ids(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "id" && !k.ends_with("Id"))
                .map(|(k, v)| (k.clone(), without_ids(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_ids).collect()),
        v => v.clone(),
    }
}

/// `got` is `want`, or the first event where they part.
fn same_events(got: &[Value], want: &[Value], what: &str) {
    let cut = |e: &Value| e.to_string().chars().take(600).collect::<String>();
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        let (g, w) = (got.get(i).map(cut), want.get(i).map(cut));
        panic!(
            "{what}: event {i} of {} differs from the live run's (of {}):\n{g:?}\nlive: {w:?}",
            got.len(),
            want.len()
        );
    }
}

/// An agent line between the pipeline's line cap (4 MiB) and the 16 MiB a
/// run takes whole (a 5 MiB assistant text): the run's live stream makes
/// the events its record makes read back (the task stream, and the same
/// runId posted again, answered from the record): skimmed, its text cut, in
/// every path.
#[test]
fn an_agent_line_over_the_line_cap_makes_the_same_events_live_and_replayed() {
    let big = tmp("bigline.jsonl");
    let text = "w".repeat(5 << 20);
    let line = json!({"type": "assistant", "message": {"id": "msg_big", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": text}]}, "session_id": "d8785ba1-3fa6-4606-b465-f13165cc441f"});
    std::fs::write(&big, format!("{line}\n")).unwrap();
    let agent = tmp("bigline.sh");
    let script = format!(
        "#!/bin/sh\ncat \"{fix}\" \"{big}\"\necho '{{\"type\":\"runwire.status\",\"ok\":true,\"rc\":0,\"session_id\":\"d8785ba1-3fa6-4606-b465-f13165cc441f\",\"detail\":\"\",\"files\":[]}}'\n",
        fix = fixture("bb-turn-tools.partial.jsonl").display(),
        big = big.display(),
    );
    std::fs::write(&agent, script).unwrap();
    let mut perm = std::fs::metadata(&agent).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&agent, perm).unwrap();
    let s = start(&["--agent", "claude", "--agent-cmd", agent.to_str().unwrap()], &[]);
    let shapes = |r: &Response| -> Vec<Value> {
        let ev = r.events();
        assert!(ev.last().is_some_and(|e| e["type"] == "RUN_FINISHED"), "{:?}", ev.last());
        ev.iter()
            .filter(|e| !matches!(e["type"].as_str(), Some("RUN_STARTED" | "RUN_FINISHED")))
            .map(event_shape)
            .collect()
    };
    let live = shapes(&post_run(s.port, "t", "r1"));
    // The line was skimmed: its text cut, and said so.
    let texts: Vec<&str> = live.iter().filter_map(|e| e["delta"].as_str()).filter(|d| d.starts_with("www")).collect();
    assert_eq!(texts.len(), 1, "one text from the big line");
    assert!(texts[0].len() < 1 << 20, "the text is cut as the record's reader cuts it: {} bytes", texts[0].len());
    let listing = request(s.port, "GET", "/runs", &[], b"").json();
    let rec = listing["runs"][0]["runId"].as_str().expect("the run's record").to_string();
    let task = request(s.port, "GET", &format!("/runs/{rec}/tasks/agent/stream?format=agui"), &[], b"");
    assert_eq!(task.status, 200, "{}", task.text());
    same_events(&shapes(&task), &live, "the task stream of the record");
    // The same runId again: answered from the record (the run was too long to keep).
    same_events(&shapes(&post_run(s.port, "t", "r1")), &live, "the runId posted again");
    let _ = std::fs::remove_file(&big);
}
