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
    crate::support::complete_json_lines(&s.dir().join("agent-input.jsonl"))
        .into_iter()
        .map(|v| v["line"].clone())
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
    let mut h = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        h.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
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
    assert_eq!(answered[0]["door"], "task-route", "{answered:?}");
    wait_for("the allow to reach the agent", Duration::from_secs(10), || !answers(&s).is_empty());
    assert_eq!(answers(&s), [("allow".to_string(), String::new())]);
    // `runs show` says who answered what, when.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_runs"))
        .env("HARNESS_HOME", s.home())
        .args(["show", &session_run(&ev)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = &shown["answers"][0];
    assert_eq!(
        (a["by"].as_str(), a["decision"].as_str(), a["interrupt"].as_str()),
        (Some("bob"), Some("allow"), i["id"].as_str()),
        "{shown}"
    );
    assert!(a["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{a}");
    // ana kills the session: the record that ends the run is hers.
    let kill = format!("/runs/{}/tasks/agent/kill", session_run(&ev));
    let (status, _, text) = http(s.port, "POST", &kill, &[("Authorization", &ana)], "");
    assert_eq!(status, 200, "{text}");
    wait_for("the kill journaled", Duration::from_secs(10), || {
        s.journal().iter().any(|r| {
            r["state"].is_string()
                && r["actor"] == "ana"
                && r["detail"].as_str().is_some_and(|d| d.contains("killed by ana") || d.contains("by ana through"))
        })
    });
}

const PUBLIC: &str = "https://rw.example.test";

/// A link secret file in a scratch dir.
fn secret(test: &str) -> String {
    let f = support::scratch(test).join("link-secret");
    std::fs::write(&f, "0123456789abcdef0123456789abcdef-secret\n").unwrap();
    f.to_str().unwrap().to_string()
}

/// The link journaled with the run's requested record, as a path `/a/<token>`.
fn link_path(s: &Server) -> String {
    let mut link = None;
    wait_for("the requested record", Duration::from_secs(10), || {
        link = s
            .journal()
            .into_iter()
            .find(|r| r["input"] == "requested")
            .and_then(|r| r["links"][0].as_str().map(str::to_string));
        link.is_some()
    });
    let link = link.unwrap();
    assert!(link.starts_with(&format!("{PUBLIC}/a/")), "{link}");
    link[PUBLIC.len()..].to_string()
}

/// `runs watch --no-follow ARGS` over the server's home.
fn feed(s: &Server, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_runs"))
        .env("HARNESS_HOME", s.home())
        .args(["watch", "--no-follow"])
        .args(args)
        .output()
        .unwrap()
}

fn form(port: u16, path: &str, body: &str) -> (u16, String) {
    let (status, _, text) = http(port, "POST", path, &[("Content-Type", "application/x-www-form-urlencoded")], body);
    (status, text)
}

/// The link's page names the tool and acts on nothing; a tampered token is
/// refused; one POST approves and the agent receives exactly one allow; a
/// second POST is refused and sends nothing; the public name is accepted as
/// Host and Origin, another is not; link routes are rate-limited.
#[test]
fn one_post_of_a_link_approves_once_and_nothing_else_acts() {
    let sec = secret("links-once");
    let s = start("links-once-srv", &["--public-url", PUBLIC, "--link-secret-file", &sec]);
    // The feed begins before the run, so that the run's records are news.
    assert!(feed(&s, &[]).status.success());
    let ev = agui(s.port, &[], run("t", "r1", "test it"));
    let i = interrupts(&ev)[0].clone();
    let path = link_path(&s);
    let requested = s.journal().into_iter().find(|r| r["input"] == "requested").unwrap();
    assert_eq!(requested["interrupt"], i["id"], "{requested}");
    // The change feed's needs_input event carries the link.
    let o = feed(&s, &["--since", "0", "--type", "needs_input"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let feed = String::from_utf8_lossy(&o.stdout).to_string();
    let ev: Vec<Value> = feed.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        ev.iter().any(|e| e["type"] == "needs_input" && e["links"][0] == requested["links"][0] && e["tool"] == "Bash"),
        "{feed}"
    );
    for _ in 0..2 {
        let (status, head, page) = http(s.port, "GET", &path, &[], "");
        assert_eq!(status, 200, "{page}");
        assert!(
            head.contains("text/html") && head.contains("Referrer-Policy: same-origin") && head.contains("no-store"),
            "{head}"
        );
        assert!(page.contains("<b>Bash</b>") && page.contains("npm test"), "{page}");
        assert!(page.contains("value=\"allow\"") && page.contains("name=\"reason\"") && !page.contains("<script"));
    }
    // Through the proxy's name; never another.
    let (status, _, _) = http(s.port, "GET", &path, &[("Host", "rw.example.test"), ("Origin", PUBLIC)], "");
    assert_eq!(status, 200);
    for other in [("Host", "evil.example"), ("Origin", "https://evil.example")] {
        assert_eq!(http(s.port, "GET", &path, &[other], "").0, 403, "{other:?}");
    }
    assert!(answers(&s).is_empty(), "GET never acts: {:?}", answers(&s));
    // A tampered token: another character in its claims.
    let (head, tail) = path.split_at(10);
    let flipped = if tail.starts_with('A') { 'B' } else { 'A' };
    let tampered = format!("{head}{flipped}{}", &tail[1..]);
    let (status, page) = form(s.port, &tampered, "decision=allow");
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("not valid"), "{page}");
    assert!(answers(&s).is_empty(), "a tampered token sends nothing");
    let (status, page) = form(s.port, &path, "decision=allow");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Approved"), "{page}");
    wait_for("the allow to reach the agent", Duration::from_secs(10), || !answers(&s).is_empty());
    let (status, page) = form(s.port, &path, "decision=allow");
    assert_eq!(status, 410, "{status} {page}");
    let (status, _, page) = http(s.port, "POST", &path, &[], r#"{"decision":"deny","reason":"changed my mind"}"#);
    assert_eq!(status, 410, "{status} {page}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(answers(&s), [("allow".to_string(), String::new())], "exactly one allow reached the agent");
    let answered: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!((answered[0]["by"].as_str(), answered[0]["decision"].as_str()), (Some("link"), Some("allow")));
    assert_eq!(answered[0]["door"], "link", "{answered:?}");
    // 30 requests a minute per token: this token has had 6 (three GETs, three POSTs); the 31st is refused,
    // another token is not.
    let codes: Vec<u16> = (0..25).map(|_| http(s.port, "GET", &path, &[], "").0).collect();
    assert!(codes[..24].iter().all(|&c| c == 410) && codes[24] == 429, "{codes:?}");
    assert_eq!(http(s.port, "GET", &tampered, &[], "").0, 403);
}

/// With named tokens the link is minted for the person who sent the
/// message; a deny by JSON, with no bearer token, reaches the agent as a
/// denial with its reason and is journaled with that person's name.
#[test]
fn a_deny_by_json_reaches_the_agent_with_its_reason() {
    let dir = support::scratch("links-deny");
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("ana:{ANA}\nbob:{BOB}\n")).unwrap();
    let sec = secret("links-deny-secret");
    let s = start(
        "links-deny-srv",
        &["--token-file", tokens.to_str().unwrap(), "--public-url", PUBLIC, "--link-secret-file", &sec],
    );
    let ana = format!("Bearer {ANA}");
    let ev = agui(s.port, &[("Authorization", &ana)], run("t", "r1", "test it"));
    let _ = interrupts(&ev);
    let run_id = session_run(&ev);
    let path = link_path(&s);
    // The link grants nothing else: its token is no bearer token, for a listing, a run or a steer.
    let token = &path["/a/".len()..];
    let bearer = format!("Bearer {token}");
    let steer = format!("/runs/{run_id}/tasks/agent/steer");
    for (m, p, b) in [
        ("GET", "/runs".to_string(), ""),
        ("GET", format!("/runs/{run_id}/tasks/agent/stream?token={token}"), ""),
        ("POST", steer, r#"{"msg":"go on"}"#),
    ] {
        assert_eq!(http(s.port, m, &p, &[("Authorization", &bearer)], b).0, 401, "{m} {p}");
    }
    let (status, _, text) = http(s.port, "POST", &path, &[], r#"{"decision":"deny","reason":"not on main"}"#);
    assert_eq!(status, 200, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["ok"], true, "{text}");
    wait_for("the deny to reach the agent", Duration::from_secs(10), || !answers(&s).is_empty());
    let got = answers(&s);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "deny");
    assert!(got[0].1.contains("not on main"), "{got:?}");
    wait_for("the answer journaled", Duration::from_secs(10), || {
        s.journal()
            .iter()
            .any(|r| r["input"] == "answered" && r["by"] == "ana" && r["decision"] == "deny" && r["door"] == "link")
    });
}

/// An expired interrupt's link is refused and sends nothing; the request
/// was denied when it expired, as without links.
#[test]
fn an_expired_interrupts_link_is_refused() {
    let sec = secret("links-expired");
    let s = start("links-expired-srv", &["--public-url", PUBLIC, "--link-secret-file", &sec, "--answer-timeout", "1"]);
    let _ = interrupts(&agui(s.port, &[], run("t", "r1", "test it")));
    let path = link_path(&s);
    wait_for("the expiry journaled", Duration::from_secs(10), || {
        s.journal().iter().any(|r| r["input"] == "answered" && r["decision"] == "expired")
    });
    // The expiry's deny is written to the agent by the session's writer
    // thread, after the journal may have it: wait until the agent read it.
    wait_for("the expiry's deny to reach the agent", Duration::from_secs(10), || !answers(&s).is_empty());
    let before = answers(&s);
    assert!(before.iter().all(|(b, _)| b == "deny"), "{before:?}");
    let (status, page) = form(s.port, &path, "decision=allow");
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("time ran out"), "{page}");
    let (status, _, page) = http(s.port, "GET", &path, &[], "");
    assert_eq!(status, 410, "{page}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(answers(&s), before, "nothing more reached the agent");
}

/// A question (AskUserQuestion) gets a link too: its page lists the
/// choices, a form POST answers it once, and the agent receives exactly
/// that answer, journaled as the link's; a second POST sends nothing.
#[test]
fn a_questions_link_answers_it_once() {
    let sec = secret("links-question");
    let dir = support::scratch("links-question-srv");
    let ask = json!([{"request_id": "q1", "tool_name": "AskUserQuestion", "requires_user_interaction": true,
        "input": {"questions": [{"question": "Tabs or spaces?", "header": "Indent",
            "options": [{"label": "tabs"}, {"label": "spaces"}], "multiSelect": false}]}}]);
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .args(["--public-url", PUBLIC, "--link-secret-file", &sec])
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", ask.to_string());
    let s = Server::spawn(cmd).owning(dir);
    let ev = agui(s.port, &[], run("t", "r1", "ask me"));
    assert_eq!(interrupts(&ev)[0]["reason"], "input_required", "{ev:?}");
    let path = link_path(&s);
    let (status, _, page) = http(s.port, "GET", &path, &[], "");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Indent: Tabs or spaces?") && page.contains(r#"value="spaces""#), "{page}");
    let responses = || crate::support::control_responses(&s.dir().join("agent-input.jsonl"));
    // An answer to a question not asked, or none to the one asked: refused, nothing sent.
    for bad in ["decision=answer&q0=spaces&q1=x", "decision=answer"] {
        let (status, page) = form(s.port, &path, bad);
        assert_eq!(status, 400, "{bad}: {page}");
    }
    // The same by JSON, refused by the session's own check: 400 with what
    // to correct, not 410 "no longer valid" (the link still works).
    for bad in [
        r#"{"decision":"answer","answers":{"Other question?":"x"}}"#,
        r#"{"decision":"answer","answers":{"Tabs or spaces?":["tabs","spaces"]}}"#,
    ] {
        let (status, _, body) = http(s.port, "POST", &path, &[("Content-Type", "application/json")], bad);
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.contains("Nothing was done"), "{body}");
    }
    // Claude takes the person's own words ("Other"): the page offers the box.
    assert!(page.contains(r#"name="q0-own""#), "{page}");
    let (status, page) = form(s.port, &path, "decision=answer&q0=spaces");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Answered"), "{page}");
    wait_for("the answer at the agent", Duration::from_secs(10), || !responses().is_empty());
    let (status, _) = form(s.port, &path, "decision=answer&q0=tabs");
    assert_eq!(status, 410, "{status}");
    std::thread::sleep(Duration::from_millis(300));
    crate::support::answered_spaces_once(&responses(), s.journal());
}

/// Issue 36: a route waits for the session's loop with no lock of the
/// thread held. Another process's writer (here, this test) holds the run
/// journal's lock: the loop replies to an answer, then waits for that lock
/// to journal it, so a stop sent next waits for the loop's turn at it.
/// Meanwhile a request of the same thread that needs no reply of the loop
/// (the link's page) is served, while the stop still waits; the stop is
/// answered once the journal's lock is let go.
#[test]
fn a_route_waiting_for_the_loop_holds_no_lock_of_the_thread() {
    let sec = secret("links-nolock");
    let s = start("links-nolock-srv", &["--public-url", PUBLIC, "--link-secret-file", &sec]);
    let ev = agui(s.port, &[], run("t", "r1", "test it"));
    let i = interrupts(&ev)[0].clone();
    let run_id = session_run(&ev);
    let path = link_path(&s);
    // The run's journal: the one that holds its requested record.
    let journal = std::fs::read_dir(s.home().join("serve/runstate"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(r#""input":"requested""#)))
        .expect("the run's journal");
    let file = std::fs::OpenOptions::new().append(true).open(&journal).unwrap();
    let held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).expect("the journal's flock");
    // Taken and replied to; the loop then waits for the journal's lock.
    let answer = format!("/runs/{run_id}/tasks/agent/answer");
    let body = json!({"request": i["id"], "decision": "allow"}).to_string();
    let (status, _, text) = http(s.port, "POST", &answer, &[], &body);
    assert_eq!(status, 200, "{text}");
    let (port, stop) = (s.port, format!("/runs/{run_id}/tasks/agent/stop"));
    let (tx, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(http(port, "POST", &stop, &[], ""));
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(stopped.try_recv().is_err(), "the stop waits for the loop, which waits for the journal's lock");
    // The link's page, on the same thread: the request was answered, so the link is used.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", s.port).unwrap();
    let mut raw = Vec::new();
    let read = c.read_to_end(&mut raw);
    let waiting = stopped.try_recv().is_err();
    drop(held);
    assert!(read.is_ok(), "the link's page waited behind the stop's wait for the loop: {read:?}");
    let page = support::server::Response::parse(&raw);
    assert_eq!(page.status, 410, "{}", String::from_utf8_lossy(&page.body));
    assert!(waiting, "the loop still waited for the journal when the page was served");
    let (status, _, text) = stopped.recv_timeout(Duration::from_secs(30)).expect("the stop is answered");
    assert_eq!(status, 200, "{text}");
    wait_for("the answer journaled", Duration::from_secs(10), || s.journal().iter().any(|r| r["input"] == "answered"));
    wait_for("the allow to reach the agent", Duration::from_secs(10), || !answers(&s).is_empty());
    assert_eq!(answers(&s), [("allow".to_string(), String::new())]);
}

/// A client address may make 120 link requests a minute; a caller holding
/// one of the server's tokens is not limited by address (a cluster node's
/// sidecar forwards every hub's link requests from one address, and the
/// hub limited each of its own clients), though each link still is.
#[test]
fn a_client_address_is_limited_but_a_caller_with_the_servers_token_is_not() {
    let sec = secret("links-address");
    let tokens = support::scratch("links-address-tokens").join("tokens");
    std::fs::write(&tokens, format!("ana:{ANA}\n")).unwrap();
    let s = start(
        "links-address-srv",
        &["--token-file", tokens.to_str().unwrap(), "--public-url", PUBLIC, "--link-secret-file", &sec],
    );
    let bearer = format!("Bearer {ANA}");
    // Distinct made-up tokens: no link's own limit is reached.
    let known: Vec<u16> =
        (0..130).map(|i| http(s.port, "GET", &format!("/a/k{i}.x"), &[("Authorization", &bearer)], "").0).collect();
    assert!(known.iter().all(|&c| c == 403), "{known:?}");
    let anon: Vec<u16> = (0..121).map(|i| http(s.port, "GET", &format!("/a/a{i}.x"), &[], "").0).collect();
    assert!(anon[..120].iter().all(|&c| c == 403) && anon[120] == 429, "{anon:?}");
    // A wrong token is no caller of this server's: limited as the address.
    let (code, head, _) = http(s.port, "GET", "/a/w.x", &[("Authorization", "Bearer not-a-token-of-this-server")], "");
    assert_eq!(code, 429);
    assert!(head.starts_with("HTTP/1.1 429 Too Many Requests\r\n"), "its reason phrase: {head}");
}

/// A made-up link token keeps nothing at a server that mints links: its
/// MAC is checked first, so its POST's idempotency key is not kept (a
/// flood of them from many loopback addresses evicted people's keys, and a
/// keyed steer retried after it ran twice) and it takes no token's window
/// (a flood filled the limiter's table and every genuine link got 429).
/// Only its address's count is kept.
#[test]
fn a_made_up_link_token_keeps_no_key_and_no_window() {
    let sec = secret("links-forged");
    let tokens = support::scratch("links-forged-tokens").join("tokens");
    std::fs::write(&tokens, format!("ana:{ANA}\n")).unwrap();
    let s = start(
        "links-forged-srv",
        &["--token-file", tokens.to_str().unwrap(), "--public-url", PUBLIC, "--link-secret-file", &sec],
    );
    let key = [("Idempotency-Key", "flood-1")];
    let first = http(s.port, "POST", "/a/junk.x", &key, r#"{"decision":"deny"}"#);
    let again = http(s.port, "POST", "/a/junk.x", &key, r#"{"decision":"deny"}"#);
    assert_eq!((first.0, again.0), (403, 403), "{first:?} {again:?}");
    assert!(
        !again.1.to_ascii_lowercase().contains("idempotent-replayed"),
        "a forged link's reply was kept: {}",
        again.1
    );
    // One made-up token, more often than a link's own limit (30 a minute),
    // by a caller the address limit does not hold: refused each time as
    // not valid, never as "too many for this link".
    let bearer = format!("Bearer {ANA}");
    let codes: Vec<u16> =
        (0..40).map(|_| http(s.port, "GET", "/a/same.x", &[("Authorization", &bearer)], "").0).collect();
    assert!(codes.iter().all(|&c| c == 403), "{codes:?}");
}

/// `--public-url` alone (a hub behind a proxy: it mints no links, it
/// serves its nodes'): the public name is taken as Host and Origin, and
/// the link route says this server mints none. Before, clap refused it
/// without `--link-secret-file`.
#[test]
fn a_public_url_without_a_link_secret_is_a_name_and_mints_nothing() {
    let s = start("links-public-only-srv", &["--public-url", PUBLIC]);
    let (status, _, body) = http(s.port, "GET", "/api/info", &[("Host", "rw.example.test"), ("Origin", PUBLIC)], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(http(s.port, "GET", "/api/info", &[("Host", "evil.example")], "").0, 403);
    let (status, _, page) = http(s.port, "GET", "/a/anything.x", &[], "");
    assert_eq!(status, 404, "{page}");
    assert!(page.contains("mints no approval links"), "{page}");
    // Its sessions' requests carry no link.
    let ev = agui(s.port, &[], run("t", "r1", "test it"));
    assert_eq!(interrupts(&ev).len(), 1);
    wait_for("the requested record", Duration::from_secs(10), || s.journal().iter().any(|r| r["input"] == "requested"));
    let requested = s.journal().into_iter().find(|r| r["input"] == "requested").unwrap();
    assert!(requested.get("links").is_none_or(|l| l.as_array().is_some_and(|a| a.is_empty())), "{requested}");
}
