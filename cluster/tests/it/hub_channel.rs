//! The channel between a hub's runwire-serve and its sidecar when the
//! sidecar stops answering (SIGSTOP), on a real 3-server JetStream cluster:
//!
//! - a command, and an AG-UI run, sent through the hub while its sidecar
//!   is stopped answer 504 ("will not run"), and nothing runs at the node
//!   when the sidecar is continued: each frame carries its deadline, and
//!   a sidecar that has not taken it by then is killed, never to forward it;
//! - a stopped sidecar is killed and another started within seconds: the
//!   feed answers and commands go through again, the stopped one is gone,
//!   and the hub's word on its nodes is current again (a node that dies
//!   meanwhile is said lost, not `up` on the stopped one's word).
//!
//! `cargo test -p runwire-cluster --test it hub_channel::`.

use crate::common::*;
use crate::hub_studio::{agent_input, agui_until, beta_asking, sidecar_of};
use serde_json::{json, Value};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// POST at `srv`: status and body.
fn post(srv: &Serve, path: &str, body: &str) -> (u16, String) {
    let (code, body) = srv.request("POST", path, body);
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// The sidecar of `srv` other than `old`, once there is one.
fn new_sidecar(srv: &Serve, old: nix::unistd::Pid, secs: u64) -> nix::unistd::Pid {
    wait_for("a new sidecar", secs, || {
        children(srv.proc.0.id())
            .into_iter()
            .filter(|p| *p as i32 != old.as_raw())
            .find(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e.ends_with("runwire-cluster")))
            .map(|p| nix::unistd::Pid::from_raw(p as i32))
    })
}

/// Whether process `pid` is gone (or only a zombie).
fn gone(pid: nix::unistd::Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
}

/// The status of `GET path` at `srv`, read from its head (a feed's body does not end).
fn status_of(srv: &Serve, path: &str) -> u16 {
    let mut c = srv.send("GET", path, "", "");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&raw).split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn what_a_hub_sends_while_its_sidecar_is_stopped_answers_504_and_never_runs() {
    let (dir, nats) = nats_cluster("hub-channel-late");
    // A session on beta whose agent works on (its turn never ends).
    let b = beta_asking(&dir, &nats.url, "[]");
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);
    let first = run_input("t1", "r1", "work on", Value::Null, json!({"node": "beta"}));
    let (_client, _) = wait_for("beta to take the run", 30, || {
        let (c, text) = agui_until(&hub, &first, "RUN_STARTED", 10);
        text.contains("RUN_STARTED").then_some((c, text))
    });
    let run = wait_for("beta's run at the hub", 60, || {
        hub.get_json("/runs")["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|r| r["runId"].as_str().filter(|i| i.starts_with("beta.")).map(str::to_string))
    });
    let task = format!("/runs/{run}/tasks/agent");
    wait_for("the prompt at beta's agent", 30, || {
        agent_input(&dir).iter().any(|l| l.to_string().contains("work on")).then_some(())
    });
    std::thread::sleep(Duration::from_secs(1));
    let lines = agent_input(&dir).len();

    // The hub's own sidecar stopped: a kill, a steer and a new thread's
    // first prompt sent through the hub, at once.
    let pid = sidecar_of(&hub);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let sent = [
        (format!("{task}/kill"), String::new()),
        (format!("{task}/steer"), r#"{"msg":"steer-while-hub-stopped"}"#.to_string()),
        ("/agui".to_string(), run_input("t9", "r9", "late-hello", Value::Null, json!({"node": "beta"}))),
    ];
    let answers: Vec<(u16, String, Duration)> = std::thread::scope(|s| {
        let hs: Vec<_> = sent
            .iter()
            .map(|(path, body)| {
                let hub = &hub;
                s.spawn(move || {
                    let (code, text) = post(hub, path, body);
                    (code, text, t.elapsed())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Continued (when it still runs): it must not forward them now.
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
    for (code, text, took) in &answers {
        assert_eq!(*code, 504, "{text}");
        assert!(text.contains("will not run"), "{text}");
        assert!(*took < Duration::from_secs(12), "answered after {took:?}: {text}");
    }
    std::thread::sleep(Duration::from_secs(4));
    let late: Vec<Value> = agent_input(&dir)[lines..].to_vec();
    assert!(late.is_empty(), "written to beta's agent after the hub's 504s: {late:?}");
    // The kill did not run either: the session still takes a steer, through the hub's next sidecar.
    let ok = wait_for("a steer through the hub's next sidecar", 40, || {
        let a = post(&hub, &format!("{task}/steer"), r#"{"msg":"steer-after"}"#);
        (a.0 == 200).then_some(a)
    });
    assert_eq!(ok.0, 200, "{ok:?}");
    wait_for("the steer at beta", 15, || {
        agent_input(&dir).iter().any(|l| l.to_string().contains("steer-after")).then_some(())
    });
    assert!(
        !agent_input(&dir).iter().any(|l| l.to_string().contains("steer-while-hub-stopped")),
        "a steer the hub answered 504 for ran"
    );
    assert!(hub.stderr().contains("killed, starting it again"), "{}", hub.stderr());
    drop((b, hub, nats));
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_stopped_hub_sidecar_is_replaced_within_seconds_and_its_nodes_word_is_current_again() {
    let (dir, nats) = nats_cluster("hub-channel-stopped");
    let mut a = Serve::start(&dir.join("home-alpha"), &["--cluster", &nats.url, "--node", "alpha"], &[]);
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);
    let state = |hub: &Serve| {
        let n = hub.get_json("/api/info")["nodes"].clone();
        n.as_array()
            .and_then(|l| l.iter().find(|x| x["node"] == "alpha"))
            .and_then(|x| x["state"].as_str().map(str::to_string))
    };
    wait_for("alpha up at the hub", 30, || (state(&hub).as_deref() == Some("up")).then_some(()));
    assert_eq!(status_of(&hub, "/runs/events"), 200);

    // The hub's sidecar stopped: within seconds a new one serves, and the stopped one is gone.
    let old = sidecar_of(&hub);
    nix::sys::signal::kill(old, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let new = new_sidecar(&hub, old, 15);
    assert!(t.elapsed() < Duration::from_secs(10), "a new sidecar after {:?}", t.elapsed());
    wait_for("the stopped sidecar to be gone", 5, || gone(old).then_some(()));
    let _ = nix::sys::signal::kill(old, nix::sys::signal::Signal::SIGCONT);
    let feed = wait_for("the feed at the hub", 15, || Some(status_of(&hub, "/runs/events")).filter(|c| *c == 200));
    assert_eq!(feed, 200);
    // A command goes through: alpha's own route answers it.
    let own = post(&a, "/runs/nosuch/tasks/agent/steer", r#"{"msg":"x"}"#);
    let fwd = wait_for("a command through the hub", 15, || {
        Some(post(&hub, "/runs/alpha.nosuch/tasks/agent/steer", r#"{"msg":"x"}"#)).filter(|r| r.0 != 503)
    });
    assert_eq!(fwd, own);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());

    // Stopped again, and alpha dies meanwhile: the hub says alpha lost (its
    // new sidecar judges), never `up` on the stopped one's word.
    nix::sys::signal::kill(new, nix::sys::signal::Signal::SIGSTOP).unwrap();
    a.proc.stop();
    let t = Instant::now();
    let lost = wait_for("alpha lost at the hub", 40, || state(&hub).filter(|s| s == "lost"));
    assert_eq!(lost, "lost");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    wait_for("the second stopped sidecar to be gone", 10, || gone(new).then_some(()));
    let _ = nix::sys::signal::kill(new, nix::sys::signal::Signal::SIGCONT);
    assert!(Path::new(&dir.join("home-hub/cluster/nodes.json")).is_file());
    drop((hub, nats));
}
