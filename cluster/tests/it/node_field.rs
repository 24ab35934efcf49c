//! A hub's listing names each run's node (`GET /runs` → `node`, and
//! `?node=NAME`), and a node publishes what its agents write when inotify
//! says so, not at its next full look: nodes here run with the longest
//! `--poll-ms` (60 s), and every line must reach a client of the hub
//! before that first safety-net look could have come.
//!
//! On a 3-server NATS JetStream cluster on loopback (as the `cluster`
//! module). Needs `nats-server` (the one skip rule: tests/support/tools.rs).
//! `cargo test -p runwire-cluster --test it node_field::`.

use crate::common::*;
use runwire::runs::registry::{NewRun, Pointer, Registry};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A registered run with one Claude task `t` (plan, journal, empty log),
/// written by runwire's own code.
fn run(home: &Path, repo: &Path, slug: &str) -> Pointer {
    let new = NewRun { slug: slug.into(), repo_root: repo.display().to_string(), ..Default::default() };
    let p = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
    let dir = PathBuf::from(&p.runstate_dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{slug}.plan.json")),
        r#"{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"}]}"#,
    )
    .unwrap();
    std::fs::write(dir.join(format!("{slug}.t.log")), "").unwrap();
    Registry::at(home).register(&p).unwrap();
    runwire::runs::journal::append(
        &runwire::runs::marks::Run::new(home, &p.run_id),
        &dir.join(format!("{slug}.jsonl")),
        &runwire::runs::journal::Record::task("runner", "t", "leased", None),
    )
    .unwrap();
    p
}

/// A node with the longest safety-net interval: only inotify can wake it before 60 s.
fn slow_node(url: &str, name: &str, home: &Path) -> Proc {
    node(url, name, home, 60_000)
}

fn ids(list: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["node"].as_str().unwrap_or("-").to_string(), r["runId"].as_str().unwrap().to_string()))
        .collect();
    v.sort();
    v
}

const SESSION: &str = "node-field";

fn claude(line: &str) -> String {
    format!("{line}\n")
}

/// A Claude session's first lines up to an open text block, which [`delta`]s then fill.
fn text_block_head() -> String {
    [
        serde_json::json!({"type": "system", "subtype": "init", "cwd": "/", "session_id": SESSION, "model": "m", "tools": []}),
        serde_json::json!({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": null, "event": {
            "type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [], "model": "m"}}}),
        serde_json::json!({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": null, "event": {
            "type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}}),
    ]
    .iter()
    .map(|h| claude(&h.to_string()))
    .collect()
}

fn delta(text: &str) -> String {
    claude(
        &serde_json::json!({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": null,
        "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}})
        .to_string(),
    )
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_names_each_runs_node_filters_by_it_and_gets_lines_without_waiting_for_a_poll() {
    let (dir, nats) = nats_cluster("node-field");
    let url = nats.url.clone();
    let (ha, hb, hh) = (dir.join("home-a"), dir.join("home-b"), dir.join("home-hub"));
    let a1 = run(&ha, &dir.join("repo-a"), "live");
    let b1 = run(&hb, &dir.join("repo-b"), "one");
    let b2 = run(&hb, &dir.join("repo-b2"), "two.x");
    let started = Instant::now();
    let _na = slow_node(&url, "alpha", &ha);
    let _nb = slow_node(&url, "beta", &hb);
    let hub = Serve::start(&hh, &["--cluster", &url, "--hub"], &[]);
    let hub_id = |n: &str, p: &Pointer| runwire_cluster::names::hub_run_id(n, &p.run_id);
    let mut want = vec![
        ("alpha".to_string(), hub_id("alpha", &a1)),
        ("beta".to_string(), hub_id("beta", &b1)),
        ("beta".to_string(), hub_id("beta", &b2)),
    ];
    want.sort();
    // Every run, each with its node.
    let all = wait_for("the three runs at the hub", 30, || {
        let l = hub.get_json("/runs");
        (ids(&l) == want).then_some(l)
    });
    assert_eq!(all["total"], 3, "{all}");
    // Only one node's runs, paged as any listing is.
    let beta = hub.get_json("/runs?node=beta&limit=1");
    assert_eq!((beta["total"].as_u64(), beta["runs"].as_array().unwrap().len()), (Some(2), 1), "{beta}");
    assert_eq!(beta["runs"][0]["node"], "beta");
    let cursor = beta["next"].as_str().expect("a next page").to_string();
    let rest = hub.get_json(&format!("/runs?node=beta&limit=1&cursor={cursor}"));
    assert_eq!(rest["runs"].as_array().unwrap().len(), 1);
    assert_eq!(rest["runs"][0]["node"], "beta");
    assert_ne!(rest["runs"][0]["runId"], beta["runs"][0]["runId"]);
    assert_eq!(ids(&hub.get_json("/runs?node=alpha")), want[..1]);
    assert_eq!(ids(&hub.get_json("/runs?node=alpha&status=running")), want[..1]);
    let none = hub.get_json("/runs?node=gamma");
    assert_eq!((none["total"].as_u64(), none["runs"].as_array().unwrap().len()), (Some(0), 0));
    let (code, body) = hub.request("GET", "/runs?node=al.pha", "");
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    // A server that is not a hub: no node field, and no node filter.
    let local = Serve::start(&ha, &[], &[]);
    let own = local.get_json("/runs");
    assert!(own["runs"][0].get("node").is_none(), "{own}");
    let (code, body) = local.request("GET", "/runs?node=alpha", "");
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("only a hub"), "{}", String::from_utf8_lossy(&body));

    // Lines written on alpha reach a client of the hub, one by one, before
    // the node's first full look after its start (60 s) could have come.
    let events = hub.follow(&format!("/runs/{}/tasks/t/stream", hub_id("alpha", &a1)));
    let log = PathBuf::from(&a1.runstate_dir).join("live.t.log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(text_block_head().as_bytes()).unwrap();
    for i in 0..5 {
        let text = format!("line-{i}");
        f.write_all(delta(&text).as_bytes()).unwrap();
        let t = Instant::now();
        loop {
            let left = Duration::from_secs(20).saturating_sub(t.elapsed());
            let ev = events.recv_timeout(left).unwrap_or_else(|_| {
                let mirror = hh.join("cluster/nodes/alpha").join(&a1.run_id).join("live.t.log");
                panic!(
                    "{text} never reached the hub's client (the hub's mirror of the log: {:?})",
                    std::fs::read_to_string(&mirror).map(|s| s.len())
                )
            });
            if ev["type"] == "token_delta" && ev["data"]["text"] == text.as_str() {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(58),
            "{text} came after {:?}: the node's poll, not inotify, may have carried it",
            started.elapsed()
        );
    }
    // A run registered now: listed at the hub without a poll either.
    let a2 = run(&ha, &dir.join("repo-a2"), "later");
    wait_for("alpha's new run at the hub", 20, || {
        ids(&hub.get_json("/runs?node=alpha")).iter().any(|(_, id)| *id == hub_id("alpha", &a2)).then_some(())
    });
    assert!(started.elapsed() < Duration::from_secs(58), "the new run came after {:?}", started.elapsed());
    drop((hub, local, nats));
}

/// A node's run at both limits (a 64-byte node name, a 128-byte run id) is
/// mirrored: its hub id (193 bytes) is listed, shown, streamed and taken
/// by the control routes, the journal's record route and `runs show`.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_run_at_the_id_limits_on_a_node_at_the_name_limit_is_mirrored_and_served() {
    let (dir, nats) = nats_cluster("long-ids");
    let url = nats.url.clone();
    let (hn, hh) = (dir.join("home-n"), dir.join("home-hub"));
    let name = "n".repeat(64);
    // `<12 hex>--<slug>`: 128 bytes, the longest run id a node records.
    let slug = format!("long.{}", "s".repeat(runwire::runs::MAX_ID - 14 - 5));
    let p = run(&hn, &dir.join("repo"), &slug);
    assert_eq!(p.run_id.len(), runwire::runs::MAX_ID);
    let _node = slow_node(&url, &name, &hn);
    let hub = Serve::start(&hh, &["--cluster", &url, "--hub"], &[]);
    let id = runwire_cluster::names::hub_run_id(&name, &p.run_id);
    assert_eq!(id.len(), runwire::runs::MAX_RUN_ID);
    wait_for("the run at the hub", 30, || ids(&hub.get_json("/runs")).iter().any(|(_, r)| *r == id).then_some(()));
    let shown = hub.get_json(&format!("/runs/{id}"));
    let r = &shown["run"];
    assert_eq!((r["runId"].as_str(), r["node"].as_str()), (Some(id.as_str()), Some(name.as_str())), "{shown}");
    let (code, body) = hub.request("GET", &format!("/runs/{id}/tasks/t"), "");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let journal = hh.join("cluster/nodes").join(&name).join(&p.run_id).join(format!("{slug}.jsonl"));
    let first = std::fs::read_to_string(&journal).unwrap().lines().next().unwrap().len();
    let (code, body) = hub.request("GET", &format!("/runs/{id}/journal?offset=0&length={first}"), "");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    // The control routes take the id (what the node answers is theirs to say).
    let (code, body) = hub.request("POST", &format!("/runs/{id}/tasks/t/pause"), "");
    assert_ne!(code, 400, "{}", String::from_utf8_lossy(&body));
    // One byte longer is no run id anywhere.
    let (code, _) = hub.request("GET", &format!("/runs/{id}x"), "");
    assert_eq!(code, 400);
    let out = std::process::Command::new(built("runs")).args(["show", &id]).env("HARNESS_HOME", &hh).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A line the node's agent writes reaches the hub's client.
    let events = hub.follow(&format!("/runs/{id}/tasks/t/stream"));
    let log = PathBuf::from(&p.runstate_dir).join(format!("{slug}.t.log"));
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(text_block_head().as_bytes()).unwrap();
    f.write_all(delta("at the limits").as_bytes()).unwrap();
    let t = Instant::now();
    loop {
        let ev = events.recv_timeout(Duration::from_secs(20).saturating_sub(t.elapsed())).expect("the line at the hub");
        if ev["type"] == "token_delta" && ev["data"]["text"] == "at the limits" {
            break;
        }
    }
    drop((hub, nats));
}
