//! Issue 36: one loop owns each live session, so whatever many callers
//! send at once, the agent's input and the session's output follow the
//! order the session decided. The agent is `examples/trust-agent` speaking
//! Claude Code's control protocol: one message raises every request of
//! `TRUST_REQUESTS` at once, and it logs every line runwire writes to it
//! (`TRUST_LOG`), so a test sees exactly what reached it and in which order.
//!
//! - Through the server: many HTTP clients answer (and replay answers to)
//!   the open requests of one session at the same time, on the task route
//!   and the AG-UI resume; the `runwire.answer` lines of the task log, in
//!   the log's order (the line numbers the loop assigned), name the
//!   requests in the order their answers reached the agent, and so does
//!   the journal.
//! - Through `runwire-session`: many writers write answers into its input
//!   FIFO at once; the output's `runwire.answer` lines, its acks and its
//!   status lines (`seq`: the loop's numbering) agree with the order the
//!   agent read the answers.

use crate::support;
use support::server::{agui_events as agui, request as http};
use support::Server;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);
/// Requests open at once, and callers answering them at once.
const REQUESTS: usize = 48;
const CALLERS: usize = 8;

fn requests() -> Value {
    (0..REQUESTS)
        .map(|i| json!({"request_id": format!("q{i}"), "tool_name": "Bash", "input": {"command": format!("echo {i}")}}))
        .collect()
}

/// The agent ids of the answers that reached the stand-in, in the order it read them.
fn answers_read(log: &Path) -> Vec<String> {
    support::complete_json_lines(log)
        .into_iter()
        .filter(|v| v["line"]["type"] == "control_response")
        .filter_map(|v| v["line"]["response"]["request_id"].as_str().map(str::to_string))
        .filter(|id| id.starts_with('q'))
        .collect()
}

/// The agent ids of a session output's `runwire.answer` lines, in order.
fn answer_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    lines
        .filter(|l| l.starts_with(r#"{"type":"runwire.answer""#))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect()
}

fn until(what: &str, f: impl Fn() -> bool, why: impl Fn() -> String) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < LIMIT, "{what} did not happen; {}", why());
        std::thread::sleep(Duration::from_millis(30));
    }
}

#[test]
fn concurrent_http_callers_reach_the_agent_and_the_log_in_the_order_the_session_decided() {
    let dir = support::scratch("order-serve");
    let log = dir.join("agent-input.jsonl");
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", &log)
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", requests().to_string());
    let s = Server::spawn(cmd).owning(dir.clone());
    let first = json!({"threadId": "t", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "go"}]});
    let ev = agui(s.port, first);
    let end = ev.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    let run = ev
        .iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session")
        .and_then(|e| e["value"]["run"].as_str())
        .expect("runwire.session names the recorded run")
        .to_string();
    let task_log = || {
        std::fs::read_dir(s.home().join("serve/runstate"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".agent.log"))
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .unwrap_or_default()
    };
    // The run ends at the first interrupt; the session raises them all (the
    // ones no run streamed are answered on the task route by runwire's id,
    // the log's `interrupt_id`, as every door outliving a process takes).
    let raised = || -> Vec<String> {
        task_log()
            .lines()
            .filter(|l| l.starts_with(r#"{"type":"runwire.request""#))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["interrupt_id"].as_str().map(str::to_string))
            .collect()
    };
    until("every request to be raised", || raised().len() == REQUESTS, task_log);
    let ids = raised();
    let port = s.port;
    // Each caller answers every CALLERS-th request on the task route, and
    // replays each answer (acknowledged, nothing sent again).
    let callers: Vec<_> = (0..CALLERS)
        .map(|c| {
            let mine: Vec<String> = ids.iter().skip(c).step_by(CALLERS).cloned().collect();
            let run = run.clone();
            std::thread::spawn(move || {
                let mut codes = Vec::new();
                for (k, id) in mine.iter().enumerate() {
                    let decision = if (c + k) % 3 == 0 { "deny" } else { "allow" };
                    let body = json!({"request": id, "decision": decision, "by": format!("caller-{c}")});
                    let route = format!("/runs/{run}/tasks/agent/answer");
                    let (code, said) = http(port, "POST", &route, &body.to_string());
                    codes.push((code, String::from_utf8_lossy(&said).into_owned()));
                    // The same answer again: a replay, acknowledged, nothing sent.
                    let (code, said) = http(port, "POST", &route, &body.to_string());
                    codes.push((code, String::from_utf8_lossy(&said).into_owned()));
                }
                codes
            })
        })
        .collect();
    let codes: Vec<(u16, String)> = callers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(codes.iter().all(|(c, _)| *c == 200), "every answer and replay was taken: {codes:?}");
    until(
        "every answer to reach the agent",
        || answers_read(&log).len() >= REQUESTS,
        || format!("{:?}", answers_read(&log)),
    );
    until("the turn's result in the task log", || task_log().contains(r#""type":"result""#), task_log);
    let read = answers_read(&log);
    let logged = answer_lines(task_log().lines());
    assert_eq!(read.len(), REQUESTS, "each answer reached the agent once: {read:?}");
    assert_eq!(logged.len(), REQUESTS, "each answer is in the log once: {logged:?}");
    // The order the agent read them is the order the session decided them
    // (the task log's line numbers are the loop's sequence numbers).
    assert_eq!(logged, read, "the log's answers and the agent's input in one order");
    let journaled: Vec<String> = s
        .journal()
        .iter()
        .filter(|r| r["input"] == "answered")
        .filter_map(|r| r["request"].as_str().map(str::to_string))
        .collect();
    assert_eq!(journaled, read, "the journal in the same order");
}

#[test]
fn concurrent_session_input_lines_are_taken_in_one_order_with_numbered_output() {
    let dir = support::scratch("order-session");
    let log = dir.join("agent-input.jsonl");
    let fifo = dir.join("input.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_runwire-session"))
        .args(["claude", "--prompt", "go", "--input"])
        .arg(&fifo)
        .arg("--")
        .arg(support::example("trust-agent"))
        .current_dir(&dir)
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", &log)
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", requests().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // A writer keeps the FIFO open so that the many writers' closes never end a read.
    let keep = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut out: Vec<String> = Vec::new();
    let read_until = |out: &mut Vec<String>, what: &str, f: &dyn Fn(&[String]) -> bool| {
        while !f(out) {
            match rx.recv_timeout(LIMIT) {
                Ok(l) => out.push(l),
                Err(_) => panic!("{what} did not come; output:\n{}", out.join("\n")),
            }
        }
    };
    let open = |out: &[String]| -> Vec<String> {
        out.iter()
            .filter(|l| l.starts_with(r#"{"type":"runwire.request""#))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["interrupt_id"].as_str().map(str::to_string))
            .collect()
    };
    read_until(&mut out, "every request", &|o| open(o).len() == REQUESTS);
    let ids = open(&out);
    // Many writers at once, each line one write (shorter than PIPE_BUF: never torn).
    let writers: Vec<_> = (0..CALLERS)
        .map(|c| {
            let mine: Vec<String> = ids.iter().skip(c).step_by(CALLERS).cloned().collect();
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                for (k, id) in mine.iter().enumerate() {
                    let decision = if (c + k) % 3 == 0 { "deny" } else { "allow" };
                    let line = format!("{}\n", json!({"type": "answer", "id": id, "decision": decision}));
                    f.write_all(line.as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    read_until(&mut out, "every line's ack", &|o| {
        o.iter().filter(|l| l.starts_with(r#"{"type":"runwire.ack""#)).count() == REQUESTS
    });
    writeln!(&keep, "{}", json!({"type": "end"})).unwrap();
    drop(keep);
    read_until(&mut out, "the exit's status line", &|o| {
        o.last().is_some_and(|l| {
            l.starts_with(r#"{"type":"runwire.session_status","seq""#) && !l.contains(r#""exit":null"#)
        })
    });
    let status = child.wait().unwrap();
    assert!(status.success(), "runwire-session exited {status}:\n{}", out.join("\n"));
    let read = answers_read(&log);
    let logged = answer_lines(out.iter().map(String::as_str));
    assert_eq!(read.len(), REQUESTS, "each answer reached the agent once: {read:?}");
    assert_eq!(logged, read, "the output's answers and the agent's input in one order");
    // Each status line's seq is its place in the output: the loop numbered
    // every line as it decided it; `applied` only grows.
    let mut applied = 0;
    for (i, l) in out.iter().enumerate().filter(|(_, l)| l.starts_with(r#"{"type":"runwire.session_status","seq""#)) {
        let v: Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["seq"].as_u64(), Some(i as u64 + 1), "{l}");
        let a = v["applied"].as_u64().unwrap();
        assert!(a >= applied, "applied went back: {l}");
        applied = a;
    }
    assert_eq!(applied, REQUESTS as u64 + 1, "every line (the answers and the end) applied");
    // Each line's ack follows its answer line, and the acks come in the
    // order of the lines the session read (their numbers).
    let acks: Vec<u64> = out
        .iter()
        .filter(|l| l.starts_with(r#"{"type":"runwire.ack""#))
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["line"].as_u64().unwrap())
        .collect();
    assert!(acks.windows(2).all(|w| w[0] < w[1]), "{acks:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 36: a thread's session is started (its record made, its agent
/// spawned) with no lock of the thread held. The thread's first agent is
/// killed; the next message starts another, whose registration waits: the
/// home's registry lock is held by another process (as a registration in
/// flight would). Meanwhile the thread's earlier run is answered at once on
/// its task route (its process is gone: nothing is sent), not queued
/// behind the start; the new run goes on once the lock is let go.
#[test]
fn a_route_of_a_thread_whose_session_is_starting_is_answered_without_waiting_for_the_start() {
    let dir = support::scratch("order-start");
    let home = dir.join("harness");
    let runstate = home.join("serve/runstate");
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .current_dir(&dir)
        .env("HARNESS_HOME", &home)
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env(
            "TRUST_REQUESTS",
            json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "ls"}}]).to_string(),
        );
    let s = Server::spawn(cmd).owning(dir.clone());
    let port = s.port;
    // Each run ends at the agent's request (an interrupt).
    let body = |run: &str| json!({"threadId": "t", "runId": run, "messages": [{"id": format!("m-{run}"), "role": "user", "content": "go"}]});
    let ev = agui(port, body("r1"));
    assert_eq!(ev.last().unwrap()["type"], "RUN_FINISHED", "{ev:?}");
    let r1 = ev
        .iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session")
        .and_then(|e| e["value"]["run"].as_str())
        .expect("runwire.session names the recorded run")
        .to_string();
    let (code, said) = http(port, "POST", &format!("/runs/{r1}/tasks/agent/kill"), "{}");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&said));

    let journal = runstate.join("agui-r2.jsonl");
    // Held by this test process, as another registration in flight would.
    let file = std::fs::OpenOptions::new().create(true).append(true).open(home.join("registry.lock")).unwrap();
    let holder = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| e).unwrap();
    let registered = || {
        std::fs::read_dir(home.join("runs"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with("--agui-r2.json"))
    };
    let (tx, second) = std::sync::mpsc::channel();
    let b = body("r2");
    std::thread::spawn(move || {
        let _ = tx.send(agui(port, b));
    });
    // The start has claimed its journal and is at its registration.
    until(
        "the new start to reach the locked registry",
        || support::complete_json_lines(&journal).len() >= 2,
        String::new,
    );
    std::thread::sleep(Duration::from_millis(200));
    let (tx, route) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let answer = json!({"request": "rw-0123456789abcdef0123456789abcdef", "decision": "allow"}).to_string();
        let _ = tx.send(http(port, "POST", &format!("/runs/{r1}/tasks/agent/answer"), &answer));
    });
    let route = route.recv_timeout(Duration::from_secs(15));
    let blocked = !registered();
    drop(holder);
    let (code, said) =
        route.expect("the earlier run's route answered while the new start waited for the registry's lock");
    assert!(blocked, "the new start was still waiting for the lock when the route answered");
    let said = String::from_utf8_lossy(&said);
    assert_eq!(code, 409, "{said}");
    assert!(said.contains("not running"), "{said}");
    // The new run goes on once the lock is let go: its record begins as
    // it was claimed, and its turn ends.
    let second = second.recv_timeout(LIMIT).expect("the new run ends once the lock is let go");
    assert_eq!(second.last().unwrap()["type"], "RUN_FINISHED", "{second:?}");
    let records = support::complete_json_lines(&journal);
    assert_eq!(records.first().map(|r| r["run"].clone()), Some(json!("started")), "{records:?}");
}
