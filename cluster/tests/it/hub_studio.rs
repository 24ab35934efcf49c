//! AG-UI and the studio at a cluster's hub (issue 29): a 3-server NATS
//! JetStream cluster on loopback, two `runwire-serve` nodes, and a hub.
//! Node `beta` runs interactive sessions of `examples/trust-agent` (a
//! stand-in speaking Claude Code's control protocol that asks to run a
//! command and logs every line runwire writes to it); node `alpha` runs the
//! bundled replay agent.
//!
//! - `POST /agui` at the hub: a new thread names its node
//!   (`forwardedProps.node`, else 400), an unknown node is 503 at once;
//!   the run streams from the node, its interrupt is answered by a resume
//!   at the hub (the thread's node remembered), the agent gets the
//!   approval once, a retried resume (same runId) answers nothing twice.
//! - The studio at the hub (Chromium, studio/e2e/hub.mjs) lists both
//!   nodes' runs, finds beta's run that needs the person, approves there,
//!   and beta's agent gets the approval.
//!
//! `cargo test -p runwire-cluster --test it hub_studio::`.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// The request the stand-in raises on each prompt.
pub(crate) const REQUEST_ID: &str = "req-hub-1";

pub(crate) fn requests() -> String {
    json!([{"request_id": REQUEST_ID, "tool_name": "Bash", "input": {"command": "touch approved-at-the-hub"}}])
        .to_string()
}

/// Node `beta`: interactive sessions of the stand-in agent.
pub(crate) fn beta(dir: &Path, url: &str) -> Serve {
    beta_asking(dir, url, &requests())
}

/// Node `beta` whose agent raises `reqs` on each prompt (none: its turn
/// never ends).
pub(crate) fn beta_asking(dir: &Path, url: &str, reqs: &str) -> Serve {
    let log = dir.join("agent-input.jsonl");
    let state = dir.join("agent-processes");
    let agent = built("examples/trust-agent").display().to_string();
    let args = ["--agent", "claude", "--interactive", "--agent-cmd", &agent, "--cluster", url, "--node", "beta"];
    let env = [
        ("TRUST_PROTO", "claude"),
        ("TRUST_LOG", log.to_str().unwrap()),
        ("TRUST_STATE", state.to_str().unwrap()),
        ("TRUST_REQUESTS", reqs),
    ];
    Serve::start(&dir.join("home-beta"), &args, &env)
}

/// Every line runwire wrote to beta's agent.
pub(crate) fn agent_input(dir: &Path) -> Vec<Value> {
    // Lossy: read while the agent appends, the file may end inside a
    // character; a strict read would drop every line.
    String::from_utf8_lossy(&std::fs::read(dir.join("agent-input.jsonl")).unwrap_or_default())
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["line"].clone())
        .collect()
}

/// beta's sidecar (the one `runwire-cluster` child of its server).
pub(crate) fn sidecar_of(srv: &Serve) -> nix::unistd::Pid {
    let sidecar: Vec<u32> = children(srv.proc.0.id())
        .into_iter()
        .filter(|c| std::fs::read_link(format!("/proc/{c}/exe")).is_ok_and(|e| e.ends_with("runwire-cluster")))
        .collect();
    assert_eq!(sidecar.len(), 1, "{sidecar:?}");
    nix::unistd::Pid::from_raw(sidecar[0] as i32)
}

/// Every `control_response` runwire wrote to beta's agent for the request.
pub(crate) fn answers_to_agent(dir: &Path) -> Vec<Value> {
    agent_input(dir)
        .into_iter()
        .filter(|l| l["type"] == "control_response" && l.pointer("/response/request_id") == Some(&json!(REQUEST_ID)))
        .collect()
}

/// A resume of `thread` in run `run` answering interrupt `id`.
pub(crate) fn answer(thread: &str, run: &str, id: &str, approved: bool) -> String {
    let resume = json!([{"interruptId": id, "status": "resolved", "payload": {"approved": approved}}]);
    run_input(thread, run, "", resume, Value::Null)
}

fn last_type(ev: &[Value]) -> String {
    ev.last().map(|e| e["type"].as_str().unwrap_or_default().to_string()).unwrap_or_default()
}

/// The interrupts of a run's last event (`RUN_FINISHED` with the interrupt outcome).
pub(crate) fn interrupts(ev: &[Value]) -> Vec<Value> {
    let last = ev.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "RUN_FINISHED", "{ev:?}");
    last.pointer("/outcome/interrupts").and_then(Value::as_array).cloned().unwrap_or_default()
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn agui_at_a_hub_runs_on_the_threads_node_and_answers_its_interrupts_once() {
    let (dir, nats) = nats_cluster("hub-agui");
    let b = beta(&dir, &nats.url);
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);

    // A new thread that names no node: 400, saying how to name one (once the
    // hub's sidecar answers: no hub of the cluster started it either).
    let (code, body) = wait_for("the hub's sidecar", 30, || {
        let (code, body) = hub.request("POST", "/agui", &run_input("t1", "r1", "go", Value::Null, json!({})));
        (code != 503).then_some((code, body))
    });
    let text = String::from_utf8_lossy(&body).to_string();
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("forwardedProps.node"), "{text}");
    // A node that is not there: 503 at once, naming it.
    let t = Instant::now();
    let (code, body) =
        hub.request("POST", "/agui", &run_input("t0", "r0", "go", Value::Null, json!({"node": "omega"})));
    let text = String::from_utf8_lossy(&body).to_string();
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("omega") && t.elapsed() < Duration::from_secs(4), "{text} in {:?}", t.elapsed());
    // A node name that is not one: 400.
    let (code, _) = hub.request("POST", "/agui", &run_input("t0", "r0", "go", Value::Null, json!({"node": "a.b"})));
    assert_eq!(code, 400);

    // The thread on beta, through the hub: the agent asks, the run ends with the interrupt.
    // (beta's sidecar may still be subscribing: 503 until it answers.)
    let first = run_input("t1", "r1", "go", Value::Null, json!({"node": "beta"}));
    let body = wait_for("beta to take the run", 30, || {
        let (code, body) = hub.request("POST", "/agui", &first);
        assert!(code == 200 || code == 503, "{code} {}", String::from_utf8_lossy(&body));
        (code == 200).then_some(body)
    });
    let ev = events(&body);
    assert_eq!(ev[0]["type"], "RUN_STARTED", "{ev:?}");
    let ints = interrupts(&ev);
    assert_eq!(ints.len(), 1, "{ev:?}");
    let id = ints[0]["id"].as_str().unwrap().to_string();
    assert_eq!(ints[0]["metadata"]["runwire"]["tool"], "Bash", "{}", ints[0]);
    assert!(answers_to_agent(&dir).is_empty());

    // The open interrupt is visible at the hub: beta's run needs input there.
    let hub_run = wait_for("beta's run to need input at the hub", 60, || {
        let l = hub.get_json("/runs");
        l["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["runId"].as_str().unwrap_or_default().starts_with("beta.") && r["status"] == "needs_input")
            .map(|r| r["runId"].as_str().unwrap().to_string())
    });
    assert!(hub_run.starts_with("beta."), "{hub_run}");

    // A message that does not answer the open interrupt answers nothing: the node's rule.
    let (code, body) =
        hub.request("POST", "/agui", &run_input("t1", "r1b", "something else", Value::Null, Value::Null));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let again = interrupts(&events(&body));
    assert_eq!(again.iter().map(|i| i["id"].as_str().unwrap()).collect::<Vec<_>>(), [id.as_str()]);
    assert!(answers_to_agent(&dir).is_empty());

    // The resume at the hub, without naming the node (the thread is beta's): approved once.
    let resume = answer("t1", "r2", &id, true);
    let (code, body) = hub.request("POST", "/agui", &resume);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let ev = events(&body);
    assert_eq!(last_type(&ev), "RUN_FINISHED", "{ev:?}");
    assert!(ev.last().unwrap().get("outcome").is_none(), "a success: {ev:?}");
    let sent = answers_to_agent(&dir);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].pointer("/response/response/behavior"), Some(&json!("allow")), "{}", sent[0]);
    // The same resume again (a client retrying): the node's replay, nothing answered twice.
    let (code, body2) = hub.request("POST", "/agui", &resume);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body2));
    assert_eq!(events(&body2), ev, "a retried runId is the first run's replay");
    // The same interrupt answered in a new run: refused by the node, still once.
    let late = answer("t1", "r3", &id, false);
    let (_, body3) = hub.request("POST", "/agui", &late);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(answers_to_agent(&dir).len(), 1, "{}", String::from_utf8_lossy(&body3));

    // A body the routes take (up to 1 MiB: a long thread's messages) but
    // one NATS message cannot hold JSON-escaped: the node reads it from the
    // hub in pieces, takes the run as its own server would, and its agent
    // gets the thread's new prompt.
    let mut messages: Vec<Value> = (0..9)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"id": format!("h{i}"), "role": role, "content": format!("h{i}-{}", "y\"".repeat(30_000))})
        })
        .collect();
    messages.push(json!({"id": "m-big", "role": "user", "content": "big-prompt-end"}));
    let big = json!({"threadId": "t-big", "runId": "r-big", "state": {}, "tools": [], "context": [],
        "forwardedProps": {"node": "beta"}, "messages": messages})
    .to_string();
    assert!(big.len() > 800_000 && big.len() < 1024 * 1024, "{}", big.len());
    let (code, body) = hub.request("POST", "/agui", &big);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(events(&body)[0]["type"], "RUN_STARTED");
    let log = std::fs::read_to_string(dir.join("agent-input.jsonl")).unwrap_or_default();
    assert_eq!(log.lines().filter(|l| l.contains("big-prompt-end")).count(), 1, "the agent got the prompt once");

    // beta's sidecar there but not answering (stopped): 504 within the timeout, naming beta.
    let pid = sidecar_of(&b);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let (code, body) = hub.request("POST", "/agui", &run_input("t1", "r4", "more", Value::Null, Value::Null));
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
    let text = String::from_utf8_lossy(&body).to_string();
    assert_eq!(code, 504, "{text}");
    assert!(text.contains("beta") && t.elapsed() < Duration::from_secs(10), "{text} in {:?}", t.elapsed());
    drop((b, hub, nats));
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
#[cfg_attr(not(tool = "chromium"), ignore = "needs Chromium: apt-get install chromium (or STUDIO_CHROMIUM=/path)")]
#[cfg_attr(all(tool = "chromium", not(tool = "playwright")), ignore = "needs node and npm: apt-get install nodejs npm")]
fn the_studio_at_a_hub_answers_a_run_of_another_node_that_needs_the_person() {
    need(&["nats-server", "node", "playwright", "chromium"]);
    let (dir, nats) = nats_cluster("hub-studio");
    let a = Serve::start(&dir.join("home-alpha"), &["--cluster", &nats.url, "--node", "alpha"], &[]);
    let b = beta(&dir, &nats.url);
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);
    // alpha: a finished run of the replay agent.
    let (code, body) = a.request("POST", "/agui", &run_input("ta", "ra", "hi", Value::Null, json!({})));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    // beta: a session whose agent waits for an approval (started at the hub).
    let first = run_input("tb", "rb", "go", Value::Null, json!({"node": "beta"}));
    let body = wait_for("beta to take the run", 30, || {
        let (code, body) = hub.request("POST", "/agui", &first);
        (code == 200).then_some(body)
    });
    assert_eq!(interrupts(&events(&body)).len(), 1);
    // /api/info at the hub: each node and its liveness (the chat's node picker).
    let nodes = wait_for("both nodes up in the hub's /api/info", 30, || {
        let n = hub.get_json("/api/info")["nodes"].clone();
        let up = |name: &str| n.as_array()?.iter().find(|x| x["node"] == name).map(|x| x["state"] == "up");
        (up("alpha")? && up("beta")?).then_some(n)
    });
    assert!(nodes.as_array().unwrap().iter().all(|x| x["since"].as_u64().is_some()), "{nodes}");
    assert!(a.get_json("/api/info").get("nodes").is_none(), "a node's /api/info lists nodes");
    let browser = tools::chromium().expect("found by need");
    let mut script = std::process::Command::new("node")
        .arg("e2e/hub.mjs")
        .current_dir(root().join("studio"))
        .env("HUB_URL", hub.url())
        .env("NODES", "alpha,beta")
        .env("ASKING", "beta")
        .env("CHAT_NODE", "alpha")
        .env("LOSE", "1")
        .env("STUDIO_CHROMIUM", &browser)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The script watches beta's run page and says so; then beta's server is
    // SIGKILLed (its sidecar dies with it), and the page must say lost.
    let mut b = Some(b);
    let mut err = script.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let mut stdout = String::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(script.stdout.take().unwrap())) {
        let line = line.unwrap_or_default();
        if line.contains("\"watching\"") {
            if let Some(mut b) = b.take() {
                b.proc.kill();
            }
        }
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let stderr = stderr.join().unwrap_or_default();
    let status = script.wait().unwrap();
    assert!(status.success(), "e2e/hub.mjs failed:\n{stdout}\n{stderr}\nhub: {}", hub.stderr());
    assert!(b.is_none(), "the script never watched the run page: {stdout}");
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
    eprintln!("the studio at the hub answered: {seen}");
    assert!(seen["run"].as_str().unwrap().starts_with("beta."), "{seen}");
    // The chat's new thread ran on the node picked: alpha has a second run.
    assert_eq!(seen["chat"], "finished", "{seen}");
    let runs = a.get_json("/runs")["runs"].as_array().unwrap().len();
    assert_eq!(runs, 2, "alpha's runs after the chat at the hub: {}", a.get_json("/runs"));
    // The approval reached beta's agent, once.
    let sent = wait_for("the approval at beta's agent", 30, || {
        let s = answers_to_agent(&dir);
        (!s.is_empty()).then_some(s)
    });
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].pointer("/response/response/behavior"), Some(&json!("allow")), "{}", sent[0]);
    // The request the page answered is the one the agent raised (unique ids end to end).
    let journal = std::fs::read_dir(dir.join("home-beta/serve/runstate"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    let answered: Vec<Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["input"] == "answered")
        .collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["request"], seen["request"], "{answered:?} {seen}");
    assert_eq!(answered[0]["decision"], "allow", "{answered:?}");
    // The run page said beta lost, with no reload, once beta was killed.
    let lost = seen["lost"].as_str().unwrap_or_default();
    assert!(lost.contains("beta · lost") && lost.contains("node beta lost: no heartbeat since"), "{seen}");
    drop((a, hub, nats));
}

/// `GET /runs/events` (with `Last-Event-ID` when given) read until its
/// `ready` frame: each frame's (`event`, `id`, data).
fn feed_until_ready(srv: &Serve, last_id: Option<u64>, query: &str) -> (u16, Vec<(String, u64, Value)>) {
    use std::io::Read;
    let resume = last_id.map(|i| format!("Last-Event-ID: {i}\r\n")).unwrap_or_default();
    let mut c = srv.send("GET", &format!("/runs/events{query}"), &resume, "");
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = String::from_utf8_lossy(&raw).to_string();
        if let Some(i) = text.find("\r\n\r\n") {
            let code: u16 = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
            let body = &text[i + 4..];
            if code != 200 || body.contains("event: ready\n") && body.ends_with("\n\n") {
                let frames = body
                    .split("\n\n")
                    .filter(|b| b.contains("data:"))
                    .map(|b| {
                        let (mut ev, mut id, mut data) = ("message".to_string(), 0, Value::Null);
                        for l in b.lines() {
                            if let Some(v) = l.strip_prefix("event: ") {
                                ev = v.to_string();
                            } else if let Some(v) = l.strip_prefix("id: ") {
                                id = v.parse().unwrap();
                            } else if let Some(v) = l.strip_prefix("data: ") {
                                data = serde_json::from_str(v).unwrap();
                            }
                        }
                        (ev, id, data)
                    })
                    .collect();
                return (code, frames);
            }
        }
        assert!(Instant::now() < deadline, "no ready frame: {}", String::from_utf8_lossy(&raw));
        let n = c.read(&mut buf).unwrap_or(0);
        if n == 0 {
            let text = String::from_utf8_lossy(&raw).to_string();
            let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
            return (code, vec![("closed".into(), 0, Value::String(text))]);
        }
        raw.extend_from_slice(&buf[..n]);
    }
}

/// `GET PATH` at `srv`: its status and what came within `secs` (all of it
/// when the server ends the answer; a stream that waits is cut there, its
/// status whatever it was).
fn answer_within(srv: &Serve, path: &str, headers: &str, secs: u64) -> (u16, String) {
    use std::io::Read;
    let mut c = srv.send("GET", path, headers, "");
    c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let (mut raw, mut buf) = (Vec::new(), [0u8; 65536]);
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text.split_once("\r\n\r\n").map_or(text.clone(), |(_, b)| b.to_string()))
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn the_hubs_feed_ids_are_stream_sequences_so_any_hub_resumes_any_client() {
    let (dir, nats) = nats_cluster("hub-feed");
    let a = Serve::start(&dir.join("home-alpha"), &["--cluster", &nats.url, "--node", "alpha"], &[]);
    let h1 = Serve::start(&dir.join("home-hub1"), &["--cluster", &nats.url, "--hub"], &[]);
    let h2 = Serve::start(&dir.join("home-hub2"), &["--cluster", &nats.url, "--hub"], &[]);
    for run in ["ra", "rb"] {
        let (code, body) = a.request("POST", "/agui", &run_input(run, run, "hi", Value::Null, json!({})));
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    // The node's own feed, from its start.
    let (code, own) = feed_until_ready(&a, Some(0), "");
    assert_eq!(code, 200);
    let own: Vec<Value> = own.into_iter().filter(|f| f.0 == "message").map(|f| f.2).collect();
    assert!(own.len() >= 4, "{own:?}");
    // At hub 1, from the start: every event of the node, in its order, once (they arrive as published).
    let all = wait_for("the node's feed at hub 1", 60, || {
        let (code, f) = feed_until_ready(&h1, Some(0), "");
        assert_eq!(code, 200, "{f:?}");
        let ev: Vec<(u64, Value)> = f.into_iter().filter(|f| f.0 == "message").map(|f| (f.1, f.2)).collect();
        (ev.len() >= own.len()).then_some(ev)
    });
    assert_eq!(all.len(), own.len(), "{all:?}");
    for ((id, hub_ev), mine) in all.iter().zip(&own) {
        // Its id is its stream sequence; the event the node's, its run the hub's, its node named.
        assert_eq!(hub_ev["id"].as_u64(), Some(*id));
        assert_eq!(hub_ev["node"], "alpha");
        let mut back = hub_ev.clone();
        let o = back.as_object_mut().unwrap();
        o.remove("node");
        o.insert("id".into(), mine["id"].clone());
        if let Some(r) = mine["runId"].as_str() {
            assert_eq!(hub_ev["runId"], format!("alpha.{r}"));
            o.insert("runId".into(), r.into());
        }
        assert_eq!(&back, mine);
    }
    let ids: Vec<u64> = all.iter().map(|e| e.0).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    // A client of hub 1 that got the first half resumes at hub 2: exactly the rest, the same frames.
    let half = all.len() / 2;
    let (code, rest) = feed_until_ready(&h2, Some(all[half - 1].0), "");
    assert_eq!(code, 200);
    let rest: Vec<(u64, Value)> = rest.into_iter().filter(|f| f.0 == "message").map(|f| (f.1, f.2)).collect();
    assert_eq!(rest, all[half..].to_vec());
    // The ready frame names where a reconnect resumes: the last id.
    let (_, f) = feed_until_ready(&h2, None, "");
    let ready = f.iter().find(|f| f.0 == "ready").unwrap();
    assert_eq!(ready.1, *ids.last().unwrap(), "{f:?}");
    // Filters as the local feed's, on the hub's run ids.
    let one = all.iter().find(|e| e.1["runId"].is_string()).unwrap().1["runId"].as_str().unwrap().to_string();
    let (code, f) = feed_until_ready(&h2, Some(0), &format!("?run={one}"));
    assert_eq!(code, 200);
    let only: Vec<&Value> = f.iter().filter(|f| f.0 == "message").map(|f| &f.2).collect();
    assert!(!only.is_empty() && only.iter().all(|e| e["runId"] == one.as_str()), "{only:?}");
    // A resume point past the stream's end: 400 at once (the studio then starts from now),
    // from Last-Event-ID or ?since=, up to the largest id, saying which ids the feed takes.
    let last = *ids.last().unwrap();
    let past = [
        (format!("Last-Event-ID: {}\r\n", last + 1000), String::new()),
        (String::new(), format!("?since={}", last + 1)),
        (String::new(), format!("?since={}", u64::MAX)),
        (format!("Last-Event-ID: {}\r\n", u64::MAX), String::new()),
    ];
    for (header, query) in past {
        let (code, body) = answer_within(&h1, &format!("/runs/events{query}"), &header, 10);
        assert_eq!(code, 400, "{header}{query}: {body}");
        assert!(body.contains("is not an event id of this feed") && body.contains("stream sequences"), "{body}");
    }
    // Two feeds, two id spaces (spec/CLUSTER.md): hub 1's home has its own feed (`runs watch`
    // there), the same runs' events under its log's offsets. A cursor from one door is refused
    // at the other, saying so, not read as a position of the other.
    let home1 = dir.join("home-hub1");
    let home_ids = wait_for("the runs in hub 1's home feed", 30, || {
        let w = watched(&home1, &["--type", "created"]);
        (w.len() >= 2).then(|| feed_ids(&home1))
    });
    let home_end = *home_ids.last().unwrap();
    // Offsets count bytes, sequences events: the home's end is past the stream's.
    assert!(home_end > last, "home {home_end}, stream {last}");
    let (code, body) = answer_within(&h1, "/runs/events", &format!("Last-Event-ID: {home_end}\r\n"), 10);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("not the offsets of a home's own feed log"), "{body}");
    // A stream sequence that is not the end of a line of the home's log, at the home: exit 2.
    let seq = ids.iter().find(|s| !home_ids.contains(s)).expect("a stream id that is no home id");
    for cmd in [&["watch", "--no-follow"][..], &["notify", "--webhook", "http://127.0.0.1:9/"]] {
        let out = std::process::Command::new(built("runs"))
            .args(cmd)
            .args(["--since", &seq.to_string()])
            .env("HARNESS_HOME", &home1)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?} --since {seq}: {err}");
        assert!(err.contains("not the cluster feed's stream sequences"), "{cmd:?}: {err}");
    }
    drop((a, h1, h2, nats));
}

/// POST /agui at `srv`, read until `until` is in the body (or it ends):
/// the open connection and what was read.
pub(crate) fn agui_until(srv: &Serve, body: &str, until: &str, secs: u64) -> (std::net::TcpStream, String) {
    use std::io::Read;
    let mut c = srv.send("POST", "/agui", "", body);
    c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline && !String::from_utf8_lossy(&raw).contains(until) {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    (c, String::from_utf8_lossy(&raw).into_owned())
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_client_leaving_is_a_client_leaving_the_node_and_a_lost_node_ends_the_run() {
    let (dir, nats) = nats_cluster("hub-leave");
    // No request: the agent's turn goes on until it is interrupted.
    let b = beta_asking(&dir, &nats.url, "[]");
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);
    let first = run_input("t1", "r1", "work on", Value::Null, json!({"node": "beta"}));
    let (c, text) = wait_for("beta to take the run", 30, || {
        let (c, text) = agui_until(&hub, &first, "RUN_STARTED", 10);
        text.contains("RUN_STARTED").then_some((c, text))
    });
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let interrupts =
        || agent_input(&dir).iter().filter(|l| l.pointer("/request/subtype") == Some(&json!("interrupt"))).count();
    wait_for("the prompt at beta's agent", 30, || agent_input(&dir).iter().any(|l| l["type"] == "user").then_some(()));
    assert_eq!(interrupts(), 0);
    // The hub's client leaves mid-turn: beta's server sees its client leave and
    // interrupts the turn, at once (the cancel, not the 5 s ping).
    drop(c);
    let t = Instant::now();
    wait_for("the turn interrupted at beta", 20, || (interrupts() > 0).then_some(()));
    assert!(t.elapsed() < Duration::from_millis(2500), "interrupted after {:?}", t.elapsed());

    // beta's sidecar stops answering mid-run: the hub ends the run with an error naming beta.
    let next = run_input("t1", "r2", "again", Value::Null, Value::Null);
    let (mut c, text) = agui_until(&hub, &next, "RUN_STARTED", 30);
    assert!(text.contains("RUN_STARTED"), "{text}");
    let pid = sidecar_of(&b);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let mut rest = Vec::new();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let _ = std::io::Read::read_to_end(&mut c, &mut rest);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
    let ev = events(&rest);
    let last = ev.last().cloned().unwrap_or_default();
    assert_eq!((last["type"].as_str(), last["code"].as_str()), (Some("RUN_ERROR"), Some("node_lost")), "{ev:?}");
    assert!(last["message"].as_str().unwrap().contains("beta"), "{last}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    drop((b, hub, nats));
}
