//! Issue 39: people, not a server, answer (named tokens), and approval
//! links. `runwire-serve --interactive` over `examples/trust-agent` (Claude
//! Code's control protocol), which logs every line runwire writes to it,
//! so each test sees exactly what reached the agent.

use crate::support;
use support::Server;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const ANA: &str = "0123456789abcdef-ana";
const BOB: &str = "0123456789abcdef-bob";

/// runwire-serve over the trust stand-in, asking once to run `npm test`.
fn start(test: &str, args: &[&str]) -> Server {
    let dir = support::scratch(test);
    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"}}]);
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .args(args)
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", requests.to_string());
    Server::spawn(cmd).owning(dir)
}

/// The permission answers that reached the agent: (behavior, message).
fn answers(s: &Server) -> Vec<(String, String)> {
    std::fs::read_to_string(s.dir().join("agent-input.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["line"].clone())
        .filter(|l| l["type"] == "control_response")
        .map(|l| {
            let r = &l["response"]["response"];
            (r["behavior"].as_str().unwrap_or("?").to_string(), r["message"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

/// One HTTP request: status, headers' text and body.
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut h = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (n, v) in headers {
        h.push_str(&format!("{n}: {v}\r\n"));
    }
    if method == "POST" {
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
            h.push_str("Content-Type: application/json\r\n");
        }
        h.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    h.push_str("\r\n");
    h.push_str(body);
    s.write_all(h.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let r = support::server::Response::parse(&raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let head = text.split("\r\n\r\n").next().unwrap_or_default().to_string();
    (r.status, head, String::from_utf8_lossy(&r.body).to_string())
}

/// POST /agui with `headers`: the run's events.
fn agui(port: u16, headers: &[(&str, &str)], body: Value) -> Vec<Value> {
    let (status, _, body) = http(port, "POST", "/agui", headers, &body.to_string());
    assert_eq!(status, 200, "{body}");
    support::sse::events(&body)
}

fn run(thread: &str, run: &str, prompt: &str) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [{"id": format!("m-{run}"), "role": "user", "content": prompt}]})
}

/// The run's interrupts (it must end with them).
fn interrupts(ev: &[Value]) -> Vec<Value> {
    let end = ev.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    end["outcome"]["interrupts"].as_array().unwrap().clone()
}

fn session_run(ev: &[Value]) -> String {
    ev.iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session")
        .and_then(|e| e["value"]["run"].as_str())
        .expect("runwire.session names the recorded run")
        .to_string()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// A token file of two people: ana starts the run, bob answers on the task
/// route naming someone else in the body; the journal says bob, and the
/// message ana sent is hers. A token of neither is refused.
#[test]
fn an_answer_with_a_named_token_is_journaled_with_that_name() {
    let dir = support::scratch("links-named");
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("ana:{ANA}\nbob:{BOB}\n")).unwrap();
    let s = start("links-named-srv", &["--token-file", tokens.to_str().unwrap()]);
    let ana = format!("Bearer {ANA}");
    let bob = format!("Bearer {BOB}");
    let ev = agui(s.port, &[("Authorization", &ana)], run("t", "r1", "test it"));
    let i = interrupts(&ev)[0].clone();
    let path = format!("/runs/{}/tasks/agent/answer", session_run(&ev));
    let body = json!({"request": i["id"], "decision": "allow", "by": "mallory"}).to_string();
    let (status, _, _) = http(s.port, "POST", &path, &[("Authorization", "Bearer ana:0123456789abcdef-ana")], &body);
    assert_eq!(status, 401, "NAME:TOKEN is the file's line, not a token");
    let (status, _, text) = http(s.port, "POST", &path, &[("Authorization", &bob)], &body);
    assert_eq!(status, 200, "{text}");
    wait_for("the answer journaled", Duration::from_secs(10), || s.journal().iter().any(|r| r["input"] == "answered"));
    let answered: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!((answered[0]["by"].as_str(), answered[0]["decision"].as_str()), (Some("bob"), Some("allow")));
    assert_eq!(answers(&s), [("allow".to_string(), String::new())]);
}
