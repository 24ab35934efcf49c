//! A thread's node is kept in the cluster (KV `runwire-threads`), so any
//! hub continues a thread another hub started (issue 37, item 7): node
//! `beta`'s agent asks on the first prompt through hub 1; hub 2, which never
//! saw the thread, takes the resume without being told the node, and the
//! agent gets the answer once. Before: 400 at hub 2 ("new to this hub").
//!
//! A thread is read at a hub (`GET /agui/thread`) from its node, so a
//! thread opened at a hub shows its conversation at once. Before: 404 at
//! every hub ("a hub holds no thread").

use crate::common::*;
use crate::hub_studio::{agent_input, beta, sidecar_of};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_thread_started_at_one_hub_is_continued_at_another() {
    let (dir, nats) = nats_cluster("threads-two-hubs");
    let b = beta(&dir, &nats.url);
    let h1 = Serve::start(&dir.join("home-hub1"), &["--cluster", &nats.url, "--hub"], &[]);
    let h2 = Serve::start(&dir.join("home-hub2"), &["--cluster", &nats.url, "--hub"], &[]);
    let first = run_input("t-shared", "r1", "go", Value::Null, json!({"node": "beta"}));
    let body = wait_for("beta to take the run at hub 1", 30, || {
        let (code, body) = h1.request("POST", "/agui", &first);
        (code == 200).then_some(body)
    });
    let ev = events(&body);
    let id = ev.last().and_then(|e| e.pointer("/outcome/interrupts/0/id")).and_then(Value::as_str).unwrap().to_string();
    // A thread no hub knows: still 400, naming forwardedProps.node, and
    // saying why (no hub ran it: a thread a node's own server ran is in
    // no bucket), not that the thread is new.
    let (code, body) = h2.request("POST", "/agui", &run_input("t-unknown", "r0", "go", Value::Null, Value::Null));
    let said = String::from_utf8_lossy(&body);
    assert_eq!(code, 400, "{said}");
    assert!(said.contains("forwardedProps.node") && said.contains("no hub has run it"), "{said}");
    // The resume at hub 2, naming no node: the thread's node from the cluster.
    let resume = json!([{"interruptId": id, "status": "resolved", "payload": {"approved": true}}]);
    let (code, body) = h2.request("POST", "/agui", &run_input("t-shared", "r2", "", resume, Value::Null));
    let ev = events(&body);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(ev.last().map(|e| e["type"].clone()), Some(json!("RUN_FINISHED")), "{ev:?}");
    let answers: Vec<Value> = agent_input(&dir).into_iter().filter(|l| l["type"] == "control_response").collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    drop((b, h1, h2, nats));
}

/// `GET /agui/thread` at a hub: the thread's node answers, over the
/// cluster, with exactly its own answer (at the hub that ran the thread,
/// and at a hub that never saw it: the node from the cluster's bucket); a
/// thread of megabytes comes whole, as the node gives it; a node that does not
/// answer (its sidecar stopped) is 504 and one that is gone 503, each
/// naming it and within the forward's deadline, never a hang.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_thread_is_read_at_a_hub_from_its_node() {
    let (dir, nats) = nats_cluster("threads-read-at-hub");
    let mut b = beta(&dir, &nats.url);
    let h1 = Serve::start(&dir.join("home-hub1"), &["--cluster", &nats.url, "--hub"], &[]);
    let h2 = Serve::start(&dir.join("home-hub2"), &["--cluster", &nats.url, "--hub"], &[]);
    // A chat turn through hub 1: the agent asks, the resume finishes it.
    let thread = "t read/\u{e9}";
    let q = "/agui/thread?threadId=t%20read%2F%C3%A9";
    let first = run_input(thread, "r1", "hello from the hub", Value::Null, json!({"node": "beta"}));
    let body = wait_for("beta to take the run at hub 1", 30, || {
        let (code, body) = h1.request("POST", "/agui", &first);
        (code == 200).then_some(body)
    });
    let ev = events(&body);
    let id = ev.last().and_then(|e| e.pointer("/outcome/interrupts/0/id")).and_then(Value::as_str).unwrap().to_string();
    let resume = json!([{"interruptId": id, "status": "resolved", "payload": {"approved": true}}]);
    let (code, body) = h1.request("POST", "/agui", &run_input(thread, "r2", "", resume, Value::Null));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(events(&body).last().map(|e| e["type"].clone()), Some(json!("RUN_FINISHED")));

    // The node's own answer, and each hub's: the same.
    let (code, own) = b.request("GET", q, "");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&own));
    let own: Value = serde_json::from_slice(&own).unwrap();
    assert_eq!(own["threadId"], thread);
    let msgs = own["messages"].as_array().expect("messages");
    assert!(msgs.iter().any(|m| m["role"] == "user" && m["content"] == "hello from the hub"), "{own}");
    for (name, hub) in [("hub 1", &h1), ("hub 2", &h2)] {
        let (code, got) = hub.request("GET", q, "");
        let text = String::from_utf8_lossy(&got).to_string();
        assert_eq!(code, 200, "{name}: {text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), own, "{name}");
    }

    // A thread far larger than one message or a request's 1 MiB: the hub
    // relays it whole as the node's server gives it, plain on HTTP/1.0 and
    // chunked (ending with its last chunk) on HTTP/1.1. Before, it was a
    // 502 past 1 MiB.
    let file = runwire::runs::thread::path(&dir.join("home-beta"), thread);
    let mut more = String::new();
    for i in 0..40 {
        let m = json!({"id": format!("big-{i}"), "role": "user", "content": format!("{i}").repeat(100 * 1024)});
        more.push_str(&format!("{}\n", json!({"run": "r-big", "input": true, "message": m})));
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&file).unwrap();
    std::io::Write::write_all(&mut f, more.as_bytes()).unwrap();
    let (code, own) = b.request("GET", q, "");
    assert!(code == 200 && own.len() > 4 * 1024 * 1024, "{code}: {} bytes", own.len());
    let (code, got) = h1.request("GET", q, "");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&got[..got.len().min(300)]));
    assert!(got == own, "the hub's body ({} bytes) is the node's ({} bytes)", got.len(), own.len());
    let (head, chunked) = h2.request_http11("GET", q);
    assert!(
        head.starts_with("HTTP/1.1 200") && head.to_ascii_lowercase().contains("transfer-encoding: chunked"),
        "{head}"
    );
    assert!(dechunk(&chunked).is_some_and(|whole| whole == own), "a whole chunked body, the node's bytes");

    // A node whose sidecar does not answer: 504 once the forward's 5 s are
    // spent, naming it.
    let sidecar = sidecar_of(&b);
    nix::sys::signal::kill(sidecar, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let (code, got) = h1.request("GET", q, "");
    let took = t.elapsed();
    nix::sys::signal::kill(sidecar, nix::sys::signal::Signal::SIGCONT).unwrap();
    let text = String::from_utf8_lossy(&got).to_string();
    assert_eq!(code, 504, "{text}");
    assert!(text.contains("beta") && took < Duration::from_secs(12), "{text} in {took:?}");

    // The node gone: 503 at each hub (no responders), naming it, at once.
    b.proc.stop();
    for (name, hub) in [("hub 1", &h1), ("hub 2", &h2)] {
        let (code, text, took) = wait_for("the node's absence to reach the hub", 30, || {
            let t = Instant::now();
            let (code, got) = hub.request("GET", q, "");
            let took = t.elapsed();
            (code != 504).then(|| (code, String::from_utf8_lossy(&got).to_string(), took))
        });
        assert_eq!(code, 503, "{name}: {text}");
        assert!(text.contains("node beta") && took < Duration::from_secs(4), "{name}: {text} in {took:?}");
    }
    drop((b, h1, h2, nats));
}

/// At a hub, a thread the cluster has no node for is 404 saying so (not
/// that a hub holds none); one whose node is not there is 503 at once,
/// naming the node.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn at_a_hub_a_thread_without_a_node_is_404_and_one_whose_node_is_gone_503() {
    let (dir, nats) = nats_cluster("threads-read-no-node");
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);
    let (code, text) = wait_for("the hub's sidecar", 30, || {
        let (code, got) = hub.request("GET", "/agui/thread?threadId=t-nobody", "");
        (code != 503).then(|| (code, String::from_utf8_lossy(&got).to_string()))
    });
    assert_eq!(code, 404, "{text}");
    assert!(text.contains("t-nobody") && text.contains("knows no node"), "{text}");
    // A thread started on node omega, which is not there: the run is 503,
    // and so is its read, at once.
    let (code, _) =
        hub.request("POST", "/agui", &run_input("t-omega", "r1", "go", Value::Null, json!({"node": "omega"})));
    assert_eq!(code, 503);
    let t = Instant::now();
    let (code, got) = hub.request("GET", "/agui/thread?threadId=t-omega", "");
    let text = String::from_utf8_lossy(&got).to_string();
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("node omega") && t.elapsed() < Duration::from_secs(4), "{text} in {:?}", t.elapsed());
    drop((hub, nats));
}

/// A chunked body's bytes, when it ends with its last chunk (`None`: cut
/// short, or not chunked).
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let i = raw.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..i]).ok()?.trim(), 16).ok()?;
        raw = &raw[i + 2..];
        if size == 0 {
            return (raw == b"\r\n").then_some(out);
        }
        out.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size..)?.strip_prefix(b"\r\n")?;
    }
}
