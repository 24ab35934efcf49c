//! The session engine under `runwire-serve --interactive`, against agents
//! that misbehave as real processes do: one that stops reading its input
//! mid-turn (deaf), one stopped with SIGSTOP mid-turn, and many that print
//! without pause after their turn. Nothing may wedge a request, the kill
//! route or the server's shutdown, and memory stays bounded.
//! Real processes, sockets and signals throughout.

use crate::support;
use support::Server;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A request that gets no answer within this has wedged.
const WEDGED: Duration = Duration::from_secs(8);

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A fake claude that reads the opening line and the first message, says it
/// is working, writes its pid to `pidfile`, then never reads its input again
/// (and ignores SIGTERM: only SIGKILL ends it).
fn deaf_agent(dir: &Path) -> PathBuf {
    let pid = dir.join("agent.pid");
    script(
        dir,
        "deaf.sh",
        &format!(
            r#"trap '' TERM
read -r a; read -r b
echo '{{"type":"system","subtype":"init","session_id":"s-deaf","tools":[],"model":"m"}}'
echo '{{"type":"assistant","message":{{"id":"m1","role":"assistant","content":[{{"type":"text","text":"working"}}]}},"session_id":"s-deaf"}}'
echo $$ > {pid}.tmp && mv {pid}.tmp {pid}
while :; do sleep 1; done
"#,
            pid = pid.display()
        ),
    )
}

/// A fake claude that reads every line it is sent, mid-turn forever; the
/// test stops it with SIGSTOP.
fn reading_agent(dir: &Path) -> PathBuf {
    let pid = dir.join("agent.pid");
    script(
        dir,
        "reading.sh",
        &format!(
            r#"read -r a; read -r b
echo '{{"type":"system","subtype":"init","session_id":"s-read","tools":[],"model":"m"}}'
echo '{{"type":"assistant","message":{{"id":"m1","role":"assistant","content":[{{"type":"text","text":"working"}}]}},"session_id":"s-read"}}'
echo $$ > {pid}.tmp && mv {pid}.tmp {pid}
while read -r l; do :; done
"#,
            pid = pid.display()
        ),
    )
}

/// runwire-serve over the claude agent `agent` writes into the test's directory.
fn start(test: &str, agent: impl FnOnce(&Path) -> PathBuf, args: &[&str]) -> Server {
    let dir = support::scratch(test);
    let eng = agent(&dir);
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(&eng)
        .args(args)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000");
    Server::spawn(cmd).owning(dir)
}

/// The agent's pid, once it wrote it.
fn agent_pid(s: &Server) -> i32 {
    let p = s.dir().join("agent.pid");
    let deadline = Instant::now() + WEDGED;
    loop {
        if let Some(pid) = std::fs::read_to_string(&p).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "the agent never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// Whether `pid` is gone (or a zombie nobody will run again).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
    }
}

struct Response {
    status: u16,
    head: String,
    body: String,
}

/// One request; `None` when no answer came within [`WEDGED`].
fn request(port: u16, method: &str, path: &str, body: &str) -> Option<Response> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WEDGED)).unwrap();
    let h = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(h.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    if s.read_to_end(&mut raw).is_err() && raw.is_empty() {
        return None;
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some(Response { status, head: head.to_string(), body: body.to_string() })
}

/// Starts a turn on `thread` and reads its stream until the session's
/// record id is announced; the stream stays open (the turn never ends).
fn start_turn(port: u16, thread: &str) -> (String, TcpStream) {
    let body = json!({"threadId": thread, "runId": format!("r-{thread}"), "messages": [{"id": "m", "role": "user", "content": "go"}]})
        .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WEDGED)).unwrap();
    let h = format!(
        "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(h.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).expect("the run streams");
        assert!(n > 0, "the run ended: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(i) = text.find("\"runwire.session\"") {
            let rest = &text[i..];
            if let Some(j) = rest.find("\"run\":\"") {
                let id = &rest[j + 7..];
                if let Some(k) = id.find('"') {
                    return (id[..k].to_string(), s);
                }
            }
        }
    }
}

/// Sends big steers until one is refused; each must be answered at once.
/// Returns the refusal.
fn steer_until_refused(port: u16, run: &str) -> Response {
    let big = "x".repeat(60 * 1024);
    let body = json!({ "msg": big }).to_string();
    for i in 1..=4 {
        let t = Instant::now();
        let r = request(port, "POST", &format!("/runs/{run}/tasks/agent/steer"), &body)
            .unwrap_or_else(|| panic!("steer {i} got no answer within {WEDGED:?}: the request wedged"));
        assert!(t.elapsed() < Duration::from_secs(1), "steer {i} took {:?}", t.elapsed());
        if r.status == 503 {
            return r;
        }
        assert_eq!(r.status, 200, "steer {i}: {}", r.body);
        // Let the writer hand what it can to the pipe.
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("four 60 KiB steers to an agent that reads nothing were all taken");
}

fn assert_not_reading(r: &Response) {
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.head.to_ascii_lowercase().contains("\r\nretry-after: 1"), "{}", r.head);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["code"], "agent_not_reading", "{v}");
    assert!(v["detail"].as_str().unwrap().contains("not reading its input"), "{v}");
}

/// An agent that stops reading its input mid-turn: big steers are answered
/// at once (the last with 503 + Retry-After), stop answers within a second,
/// kill ends its process group (it ignores SIGTERM) within the grace plus a
/// second, and the server then shuts down at once with status 0.
#[test]
fn a_deaf_agent_never_wedges_a_request_kill_or_shutdown() {
    let mut s = start("engine-deaf", deaf_agent, &[]);
    let (run, _stream) = start_turn(s.port, "deaf");
    let agent = agent_pid(&s);
    assert_not_reading(&steer_until_refused(s.port, &run));

    // Stop answers at once: 200 while its interrupt still fits the queue,
    // then 503 as the queue is full.
    for i in 1..=2 {
        let t = Instant::now();
        let r = request(s.port, "POST", &format!("/runs/{run}/tasks/agent/stop"), "{}").expect("stop answers");
        assert!(t.elapsed() < Duration::from_secs(1), "stop {i} took {:?}", t.elapsed());
        if r.status != 200 {
            assert_not_reading(&r);
        }
    }
    assert_not_reading(&steer_until_refused(s.port, &run));

    let t = Instant::now();
    let r = request(s.port, "POST", &format!("/runs/{run}/tasks/agent/kill"), "{}").expect("kill answers");
    assert_eq!(r.status, 200, "{}", r.body);
    let grace = Duration::from_secs(2);
    assert!(t.elapsed() < grace + Duration::from_secs(1), "kill took {:?}", t.elapsed());
    assert!(gone(agent), "the agent {agent} outlived the kill");

    let (took, code) = s.terminate(Duration::from_secs(20));
    assert_eq!(code, Some(0), "the server exits 0 (after {took:?})");
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
}

/// The same agent, never killed: SIGTERM to the server ends it (whatever
/// the agent does with SIGTERM) and the server exits 0 within the agent's
/// grace plus a second, although a request thread found it deaf.
#[test]
fn shutdown_ends_a_deaf_agent_within_its_grace() {
    let mut s = start("engine-deaf-shutdown", deaf_agent, &[]);
    let (run, _stream) = start_turn(s.port, "deaf");
    let agent = agent_pid(&s);
    assert_not_reading(&steer_until_refused(s.port, &run));
    let (took, code) = s.terminate(Duration::from_secs(20));
    assert_eq!(code, Some(0), "the server exits 0 (after {took:?})");
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
    assert!(gone(agent), "the agent {agent} outlived the server");
}

/// An agent stopped with SIGSTOP mid-turn: the same promptness, and kill
/// ends its group (SIGCONT lets the stopped agent take its SIGTERM).
#[test]
fn a_stopped_agent_never_wedges_and_is_killed() {
    let mut s = start("engine-stopped", reading_agent, &[]);
    let (run, mut stream) = start_turn(s.port, "stopped");
    let agent = agent_pid(&s);
    signal(agent, nix::sys::signal::Signal::SIGSTOP);
    assert_not_reading(&steer_until_refused(s.port, &run));
    let t = Instant::now();
    let r = request(s.port, "POST", &format!("/runs/{run}/tasks/agent/kill"), "{}").expect("kill answers");
    assert_eq!(r.status, 200, "{}", r.body);
    // It takes SIGTERM once continued: well within the grace.
    assert!(t.elapsed() < Duration::from_secs(2), "kill took {:?}", t.elapsed());
    assert!(gone(agent), "the stopped agent {agent} outlived the kill");
    // The run ends as its agent did: killed by SIGTERM (128 + 15), as the
    // journal says, not "exited with status 1".
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("RUN_ERROR") && rest.contains("status 143"), "{rest}");
    let (took, code) = s.terminate(Duration::from_secs(20));
    assert_eq!(code, Some(0), "the server exits 0 (after {took:?})");
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
}

/// A fake claude that finishes its turn, then, once `go` exists, prints
/// `noise` (megabytes) without pause and stays alive: an idle session whose
/// agent keeps printing.
fn printing_agent(dir: &Path) -> PathBuf {
    script(
        dir,
        "printing.sh",
        &format!(
            r#"read -r a; read -r b
echo '{{"type":"system","subtype":"init","session_id":"s-p$$","tools":[],"model":"m"}}'
echo '{{"type":"assistant","message":{{"id":"m1","role":"assistant","content":[{{"type":"text","text":"done"}}]}},"session_id":"s-p$$"}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-p$$"}}'
while [ ! -e {go} ]; do sleep 0.1; done
cat {noise}
touch {dir}/printed.$$
while read -r l; do :; done
"#,
            go = dir.join("go").display(),
            noise = dir.join("noise").display(),
            dir = dir.display()
        ),
    )
}

fn status_kb(pid: i32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let l = s.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("{key} in /proc/{pid}/status"));
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// 64 live sessions (the most a server holds) whose agents print 8 MB each
/// without pause after their turn, while nobody streams them, unrecorded
/// (`--no-record`: no file holds their lines): the server's peak RSS stays
/// under 256 MB (it held every line before: over 512 MB); what it could not
/// hold is a reported gap, not memory.
#[test]
fn sixty_four_printing_sessions_stay_under_256_mb() {
    const SESSIONS: usize = 64;
    let mut s = start("engine-rss", printing_agent, &["--no-record"]);
    let line = format!("{{\"type\":\"noise\",\"x\":\"{}\"}}\n", "x".repeat(64 * 1024));
    let noise: String = std::iter::repeat_n(line.as_str(), 128).collect();
    std::fs::write(s.dir().join("noise"), noise).unwrap();
    for i in 0..SESSIONS {
        let body = json!({"threadId": format!("t{i}"), "runId": format!("r{i}"), "messages": [{"id": "m", "role": "user", "content": "go"}]});
        let r = request(s.port, "POST", "/agui", &body.to_string()).expect("the run answers");
        assert_eq!(r.status, 200);
        assert!(r.body.contains("RUN_FINISHED"), "run {i}: {}", r.body);
    }
    std::fs::write(s.dir().join("go"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let printed = std::fs::read_dir(s.dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("printed."))
            .count();
        if printed == SESSIONS {
            break;
        }
        assert!(Instant::now() < deadline, "only {printed} agents printed all their output");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Let the sessions take the last lines.
    std::thread::sleep(Duration::from_millis(500));
    let peak = status_kb(s.pid(), "VmHWM:");
    let now = status_kb(s.pid(), "VmRSS:");
    eprintln!("64 printing sessions: server VmHWM {} MB, VmRSS {} MB", peak / 1024, now / 1024);
    assert!(peak < 256 * 1024, "server peak RSS {} MB", peak / 1024);
    // A session's output is still streamed to the next run on its thread, with the gap reported.
    let body =
        json!({"threadId": "t0", "runId": "again", "messages": [{"id": "m2", "role": "user", "content": "more"}]});
    let mut st = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    st.set_read_timeout(Some(WEDGED)).unwrap();
    let b = body.to_string();
    write!(
        st,
        "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        s.port,
        b.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while !String::from_utf8_lossy(&seen).contains("runwire.lines_not_streamed") {
        let n = st.read(&mut buf).expect("the next run streams the backlog");
        assert!(n > 0, "the run ended without reporting the gap");
        seen.extend_from_slice(&buf[..n]);
        if seen.len() > 1 << 20 {
            seen.drain(..seen.len() - 4096);
        }
    }
    drop(st);
    let (_, code) = s.terminate(Duration::from_secs(20));
    assert_eq!(code, Some(0));
}

/// The AG-UI side of the same: the client streaming the deaf agent's turn
/// leaves, and a new message on the thread ends at once in a `RUN_ERROR`
/// with code `agent_not_reading` (once the previous turn had its settling
/// time), instead of waiting for a turn that cannot end.
#[test]
fn an_agui_message_to_a_deaf_agent_ends_agent_not_reading() {
    let s = start("engine-deaf-agui", deaf_agent, &[]);
    let (run, stream) = start_turn(s.port, "deaf");
    assert_not_reading(&steer_until_refused(s.port, &run));
    drop(stream);
    let body =
        json!({"threadId": "deaf", "runId": "r2", "messages": [{"id": "m2", "role": "user", "content": "hello?"}]});
    // The thread takes the run once the server has seen the first client go.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (r, t) = loop {
        let t = Instant::now();
        let r = request(s.port, "POST", "/agui", &body.to_string()).expect("the run answers");
        if r.status != 409 || Instant::now() > deadline {
            break (r, t);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(r.status, 200, "{}", r.body);
    let (body, _) = support::sse::dechunk(r.body.as_bytes());
    let events = support::sse::events(&String::from_utf8(body).unwrap());
    let end = events.last().expect("events");
    assert_eq!(end["type"], "RUN_ERROR", "{}", r.body);
    assert_eq!(end["code"], "agent_not_reading", "{end}");
    assert!(t.elapsed() < Duration::from_secs(6), "took {:?}", t.elapsed());
}
