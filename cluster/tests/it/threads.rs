//! A thread's node is kept in the cluster (KV `runwire-threads`), so any
//! hub continues a thread another hub started (issue 37, item 7): node
//! `beta`'s agent asks on the first prompt through hub 1; hub 2, which never
//! saw the thread, takes the resume without being told the node, and the
//! agent gets the answer once. Before: 400 at hub 2 ("new to this hub").

use crate::common::*;
use crate::hub_studio::{agent_input, beta};
use serde_json::{json, Value};

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
