//! `runwire-serve --demo`: the built-in demo agent, as a newcomer meets it:
//! its approval, question, steer and stop through the real routes, and the
//! server's modes in one vocabulary. (The README's quick-start blocks run in
//! `quickstart.rs`.)

use crate::support;
use support::Server;

use std::io::Read;
use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runwire-demo-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(name: &str) -> Server {
    start_with(name, &["--demo"])
}

/// `runwire-serve ARGS` on a free port with a home of its own.
fn start_with(name: &str, args: &[&str]) -> Server {
    let home = scratch(name);
    let mut cmd = Server::command();
    cmd.args(args).env("HARNESS_HOME", &home);
    Server::spawn(cmd).owning(home)
}

/// A scratch home, removed when dropped.
struct Home(PathBuf);

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `runwire-serve ARGS` with a home of its own (removed with the returned
/// [`Home`]) and its output piped, for a test that reads what it says at
/// start (or that it refused to start).
fn spawn_serve(args: &[&str], home: &str) -> (std::process::Child, Home) {
    let home = Home(scratch(home));
    let child = Command::new(env!("CARGO_BIN_EXE_runwire-serve"))
        .args(args)
        .env("HARNESS_HOME", &home.0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, home)
}

/// One POST; the whole response (the stream ends with the run).
fn post(s: &Server, path: &str, body: &str) -> String {
    let mut c = s.send("POST", path, "Content-Type: application/json\r\n", body);
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    r
}

fn agui(s: &Server, thread: &str, run: &str, extra: &str) -> String {
    post(
        s,
        "/agui",
        &format!(
            r#"{{"threadId":"{thread}","runId":"{run}","messages":[{{"id":"m1","role":"user","content":"hello demo"}}]{extra}}}"#
        ),
    )
}

fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let at = body.find(&format!("\"{key}\":\""))? + key.len() + 4;
    Some(&body[at..at + body[at..].find('"')?])
}

/// A denial with a reason reaches the demo agent: its tool result carries
/// the reason, the turn ends, and the prompt was echoed back.
#[test]
fn the_demo_agent_takes_any_prompt_and_a_denial_with_its_reason() {
    let s = start("deny");
    let first = agui(&s, "d", "r1", "");
    assert!(first.contains("hello demo"), "the prompt is played along with:\n{first}");
    let id = field(&first[first.find("\"interrupts\"").unwrap()..], "id").unwrap().to_string();
    let r2 = agui(
        &s,
        "d",
        "r2",
        &format!(
            r#","resume":[{{"interruptId":"{id}","status":"resolved","payload":{{"approved":false,"message":"not on my machine"}}}}]"#
        ),
    );
    assert!(r2.contains("Permission denied: not on my machine"), "{r2}");
    assert!(r2.contains(r#""type":"RUN_FINISHED""#) && !r2.contains(r#""type":"interrupt""#), "the turn ends:\n{r2}");
}

/// A steer while the demo agent streams joins its turn (the stream shows
/// the agent taking it); Stop then ends the turn and the run streaming it.
#[test]
fn the_demo_agent_takes_a_steer_mid_turn_and_stops() {
    use std::io::BufRead;
    let s = start("steer");
    let body = r#"{"threadId":"s","runId":"r1","messages":[{"id":"m1","role":"user","content":"hello demo"}]}"#;
    let c = s.send("POST", "/agui", "Content-Type: application/json\r\n", body);
    let mut r = std::io::BufReader::new(c);
    let mut seen = String::new();
    let mut line = String::new();
    // Read until the agent streams its greeting (its turn runs), then steer.
    while !seen.contains("TEXT_MESSAGE_CONTENT") {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the stream ended early:\n{seen}");
        seen.push_str(&line);
    }
    let steer = field(&seen, "steer").expect("the steer route").to_string();
    let reply = post(&s, &steer, r#"{"msg":"use the other file"}"#);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    let content: String =
        rest.lines().filter(|l| l.contains("TEXT_MESSAGE_CONTENT")).filter_map(|l| field(l, "delta")).collect();
    assert!(content.contains("Steer received while I work"), "the steer joined the turn:\n{rest}");
    assert!(rest.contains("Allow Bash?"), "the turn went on to its approval:\n{rest}");
    // Stop with the approval open: the request is cancelled and the turn ends.
    let stop = field(&seen, "stop").unwrap().to_string();
    let reply = post(&s, &stop, "{}");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let next = agui(&s, "s", "r2", "");
    assert!(next.contains(r#""type":"RUN_FINISHED""#), "{next}");
}

/// One vocabulary of modes: the start line, `/api/info`'s `mode` (and
/// `agent`) and `--help` say `replay` (no flags), `demo` (`--demo`), `agent`
/// with the agent's name, `hub`; "demo" names the demo agent only, and an ACP
/// agent is named by its command, never as a cursor session.
#[test]
fn the_start_line_api_info_and_help_say_the_mode_in_one_vocabulary() {
    use serde_json::{json, Value};
    let cases: [(&[&str], &str, Value, &str); 6] = [
        (
            &[],
            "replay",
            Value::Null,
            "runwire-serve: replay: each run replays a recorded Claude Code run (no agent runs);",
        ),
        (
            &["--demo"],
            "demo",
            Value::Null,
            "runwire-serve: demo: each thread holds an interactive session with runwire's built-in demo agent",
        ),
        (
            &["--agent", "codex"],
            "agent",
            json!("codex"),
            "runwire-serve: agent: codex: each run starts the codex wrapper;",
        ),
        (
            &["--agent", "claude", "--interactive"],
            "agent",
            json!("claude"),
            "runwire-serve: agent: claude, interactive: each thread holds a session",
        ),
        (
            &["--agent", "acp", "--interactive", "--listen", "127.0.0.1:0", "--", "/bin/cat", "-u"],
            "agent",
            json!("acp"),
            "runwire-serve: agent: acp (/bin/cat -u), interactive: each thread holds a session",
        ),
        (&["--cluster", "nats://127.0.0.1:1", "--hub"], "hub", Value::Null, "runwire-serve: hub: every node's runs"),
    ];
    for (args, mode, agent, line) in cases {
        let s = start_with("mode", args);
        let (status, info) = s.get("/api/info");
        assert_eq!(status, 200, "{args:?}");
        assert_eq!((info["mode"].as_str(), &info["agent"]), (Some(mode), &agent), "{args:?}: {info}");
        // The AG-UI capabilities say what the server is too: a hub names no
        // agent type of its own (its nodes' may differ) and carries their
        // interrupts; every other server's type is its agent's adapter.
        let (_, caps) = s.get("/agui/capabilities");
        assert_eq!(info["capabilities"], caps, "{args:?}");
        let hitl = caps["humanInTheLoop"]["supported"].as_bool();
        if mode == "hub" {
            assert_eq!(caps["identity"].get("type"), None, "{caps}");
            assert_eq!(hitl, Some(true), "{caps}");
            assert!(caps["identity"]["description"].as_str().is_some_and(|d| d.contains("node")), "{caps}");
        } else {
            assert!(caps["identity"]["type"].as_str().is_some(), "{args:?}: {caps}");
            assert_eq!(hitl, Some(info["interactive"] == true), "{args:?}: {caps}");
        }
        // The start line comes right after the address.
        let t = std::time::Instant::now();
        while !s.stderr().contains("for the studio") && t.elapsed() < support::server::IO_TIMEOUT {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let err = s.stderr();
        let start = err.lines().find(|l| l.contains("for the studio")).unwrap_or_else(|| panic!("{args:?}: {err}"));
        assert!(start.starts_with(line), "{args:?}: {start}");
        assert_eq!(start.contains("demo"), mode == "demo", "{args:?}: only the demo says demo: {start}");
        assert!(!start.contains("cursor"), "{args:?}: {start}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_runwire-serve")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let modes = &help[help.find("Modes").unwrap_or_else(|| panic!("--help has no Modes:\n{help}"))..];
    for word in ["replay  no --agent", "demo    --demo", "agent   --agent NAME", "hub     --cluster URL --hub"] {
        assert!(modes.contains(word), "--help's modes lack {word:?}:\n{modes}");
    }
    assert!(!help.contains("demo mode"), "{help}");
    // A hub runs no agent: an agent or the demo beside --hub is refused
    // before anything starts (it was taken, unused, and `--agent` warned
    // that every run would fail).
    let hub = ["--listen", "127.0.0.1:0", "--cluster", "nats://127.0.0.1:1", "--hub"];
    for extra in [&["--demo"][..], &["--agent", "claude"], &["--agent", "codex", "--interactive"]] {
        let (mut child, _home) = spawn_serve(&[&hub[..], extra].concat(), "hub-with-agent");
        // A hub that started serves until stopped: a bound, then a failure, not a hang.
        let t = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() && t.elapsed() < support::server::IO_TIMEOUT {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(out.stdout.is_empty(), "{extra:?}: a refused hub listened: {}", String::from_utf8_lossy(&out.stdout));
        assert!(err.contains("'--hub' cannot be used with"), "{extra:?}: {err}");
    }
}

/// A node takes its name before it listens. A cluster that takes a
/// connection and says nothing (a server hung, a proxy that holds it) is
/// waited for at most 10 s, said on stderr after a second (nothing listens
/// meanwhile, so silence looked like a hang), and then the server starts
/// anyway: its sidecar takes the name when the cluster answers.
#[test]
fn a_node_says_that_it_waits_for_a_silent_cluster_and_then_serves() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("nats://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let (mut child, _home) =
        spawn_serve(&["--listen", "127.0.0.1:0", "--cluster", &url, "--node", "zed"], "silent-cluster");
    let started = std::time::Instant::now();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    let took = started.elapsed();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(first.starts_with("listening on http://127.0.0.1:"), "{first:?}: {err}");
    assert!(took >= std::time::Duration::from_secs(1), "listened after {took:?}: before the cluster answered");
    let wait = err.find("cluster: waiting for the cluster to say whether the node's name is free");
    let then = err.find("could not be taken now").or_else(|| err.find("no answer about the node's name"));
    assert!(wait.is_some() && then.is_some() && wait < then, "{err}");
    drop(silent);
}

/// The demo takes `--answer-timeout` (clap asked for `--interactive` beside
/// `--demo`, which is its own mode): its interrupts expire when it says.
#[test]
fn the_demo_takes_an_answer_timeout() {
    let s = start_with("timeout", &["--demo", "--answer-timeout", "7"]);
    let first = agui(&s, "d", "r1", "");
    let at = first.find("\"interrupts\"").expect("an interrupt");
    let expires = field(&first[at..], "expiresAt").expect("expiresAt");
    let expires = runwire::util::time::parse_rfc3339_ms(expires).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!((0..=8_000).contains(&(expires - now)), "expires in {} ms, not within 7 s", expires - now);
    // Without a live session to time, the flag is still a usage error.
    let (child, _home) = spawn_serve(&["--answer-timeout", "7", "--listen", "127.0.0.1:0"], "timeout-alone");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
