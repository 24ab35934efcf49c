//! The cluster's row of issue 34's table (tests/it/control_doors.rs has the
//! others): a replayed, a stale (an earlier agent process's), an expired
//! (its budget ran out before the node took it), a duplicate answer and
//! one naming the request by the agent's own id,
//! each sent through a hub to node `beta`, whose agent stand-in
//! (examples/trust-agent) logs every line runwire writes to it: none of
//! them reaches the agent, on either door of the hub (the AG-UI resume,
//! the task route), while the answers that are due do, once each.

use crate::common::*;
use crate::hub_studio::{beta, sidecar_of};
use serde_json::{json, Value};
use std::time::Duration;

/// A row: door, case, and what the hub answered when nothing reached the
/// agent (`Ok`), or what reached it (`Err`).
type Row = (&'static str, &'static str, Result<String, String>);

/// The `control_response` lines runwire wrote to the agent (answers).
fn answers(dir: &std::path::Path) -> usize {
    crate::hub_studio::agent_input(dir).iter().filter(|l| l["type"] == "control_response").count()
}

fn interrupt_ids(ev: &[Value]) -> Vec<String> {
    let last = ev.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "RUN_FINISHED", "{ev:?}");
    let ints = last.pointer("/outcome/interrupts").and_then(Value::as_array).cloned().unwrap_or_default();
    ints.iter().map(|i| i["id"].as_str().unwrap().to_string()).collect()
}

fn resume(thread: &str, run: &str, id: &str) -> String {
    run_input(
        thread,
        run,
        "",
        json!([{"interruptId": id, "status": "resolved", "payload": {"approved": true}}]),
        Value::Null,
    )
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn nothing_reaches_the_agent_for_a_replayed_stale_expired_or_duplicate_answer_through_a_hub() {
    let (dir, nats) = nats_cluster("doors-cluster");
    let b = beta(&dir, &nats.url);
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);
    let mut rows: Vec<Row> = Vec::new();
    // Each case: the answers the agent had before, the hub's answer, and after a while the count again.
    let check = |rows: &mut Vec<Row>, door: &'static str, case: &'static str, before: usize, said: String| {
        std::thread::sleep(Duration::from_millis(700));
        let after = answers(&dir);
        rows.push((door, case, if after == before { Ok(said) } else { Err(format!("{said}: {after} answers")) }));
    };
    let agui = |body: &str| {
        let (code, out) = hub.request("POST", "/agui", body);
        (code, events(&out))
    };

    // The agent's first process asks; the answer through the hub reaches it once.
    let first = run_input("t1", "r1", "go", Value::Null, json!({"node": "beta"}));
    let ev = wait_for("beta to take the run", 30, || {
        let (code, ev) = agui(&first);
        (code == 200).then_some(ev)
    });
    let old = interrupt_ids(&ev)[0].clone();
    let (code, ev) = agui(&resume("t1", "r2", &old));
    assert_eq!((code, ev.last().map(|e| e["type"].clone())), (200, Some(json!("RUN_FINISHED"))), "{ev:?}");
    wait_for("the answer at the agent", 10, || (answers(&dir) == 1).then_some(()));
    let hub_run = wait_for("beta's run at the hub", 60, || {
        hub.get_json("/runs")["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|r| r["runId"].as_str().filter(|i| i.starts_with("beta.")).map(str::to_string))
    });
    let answer = |hub_run: &str, headers: &str, request: &str| {
        let body = json!({"request": request, "decision": "allow"}).to_string();
        let (code, out) = hub.request_with("POST", &format!("/runs/{hub_run}/tasks/agent/answer"), headers, &body);
        format!("{code} {}", String::from_utf8_lossy(&out))
    };

    // Replayed: the answered request answered again, on each door.
    let n = answers(&dir);
    let (code, ev) = agui(&resume("t1", "r3", &old));
    check(&mut rows, "hub agui-resume", "replayed", n, format!("{code} {:?}", ev.last()));
    let said = answer(&hub_run, "", &old);
    check(&mut rows, "hub task-route", "replayed", n, said);
    // Duplicate: the same resume again (a retried runId).
    let (code, ev) = agui(&resume("t1", "r2", &old));
    check(&mut rows, "hub agui-resume", "duplicate", n, format!("{code} {:?}", ev.last()));

    // The agent's second process (killed through the hub, prompted again) asks its own.
    let (code, out) = hub.request("POST", &format!("/runs/{hub_run}/tasks/agent/kill"), "");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&out));
    let (code, ev) = agui(&run_input("t1", "r4", "again", Value::Null, Value::Null));
    assert_eq!(code, 200, "{ev:?}");
    let new = interrupt_ids(&ev)[0].clone();
    assert_ne!(new, old, "each process's request has its own runwire id");
    let hub_run2 = wait_for("the second process's run at the hub", 60, || {
        let l = hub.get_json("/runs");
        l["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["runId"].as_str().unwrap_or_default().starts_with("beta.") && r["status"] == "needs_input")
            .map(|r| r["runId"].as_str().unwrap().to_string())
    });

    // Stale: the first process's request answered while the second asks.
    let n = answers(&dir);
    let (code, ev) = agui(&resume("t1", "r5", &old));
    check(&mut rows, "hub agui-resume", "stale", n, format!("{code} {:?}", ev.last()));
    let said = answer(&hub_run2, "", &old);
    check(&mut rows, "hub task-route", "stale", n, said);
    // The open request named by the agent's own id (each process reuses
    // it): the node's route takes runwire's id only.
    let said = answer(&hub_run2, "", crate::hub_studio::REQUEST_ID);
    assert!(said.starts_with("400 "), "{said}");
    check(&mut rows, "hub task-route", "agent's own id", n, said);
    let (code, ev) = agui(&resume("t1", "r5b", crate::hub_studio::REQUEST_ID));
    check(&mut rows, "hub agui-resume", "agent's own id", n, format!("{code} {:?}", ev.last()));

    // Expired: beta's sidecar stopped past the command's 5 s budget: 504, and never run after.
    let pid = sidecar_of(&b);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let said = answer(&hub_run2, "", &new);
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert!(said.starts_with("504 "), "{said}");
    std::thread::sleep(Duration::from_secs(3));
    check(&mut rows, "hub task-route", "expired", n, said);
    // The same on the AG-UI door: a resume, then a new thread's first
    // prompt, each past its 5 s while beta's sidecar is stopped: 504, and
    // once it goes on, nothing reaches the agent (no answer, no prompt, no
    // process started). Before, the node ran both as soon as it woke.
    let lines = crate::hub_studio::agent_input(&dir).len();
    for (case, body) in [
        ("expired", resume("t1", "r6", &new)),
        ("expired new run", run_input("t9", "r9", "late hello", Value::Null, json!({"node": "beta"}))),
    ] {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
        let (code, ev) = agui(&body);
        std::thread::sleep(Duration::from_millis(500));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
        assert_eq!(code, 504, "{case}: {ev:?}");
        std::thread::sleep(Duration::from_secs(3));
        check(&mut rows, "hub agui", case, n, format!("{code}"));
    }
    let late = crate::hub_studio::agent_input(&dir).len() - lines;
    assert_eq!(late, 0, "lines written to the agent after the hub's 504s");

    // Due: the second process's request answered once (a key of the studio's) ...
    let key = "Idempotency-Key: click-doors\r\n";
    let said = answer(&hub_run2, key, &new);
    assert!(said.starts_with("200 "), "{said}");
    wait_for("the second answer at the agent", 10, || (answers(&dir) == n + 1).then_some(()));
    // ... then duplicates: the same key (a retry), and the same answer with no key.
    let n = answers(&dir);
    let again = answer(&hub_run2, key, &new);
    assert_eq!(again, said, "a retried key is answered as the first time");
    check(&mut rows, "hub task-route", "duplicate (same key)", n, again);
    let said = answer(&hub_run2, "", &new);
    check(&mut rows, "hub task-route", "duplicate", n, said);

    for (door, case, r) in &rows {
        eprintln!(
            "{door:16} {case:22} {}",
            match r {
                Ok(s) => format!("nothing sent ({s})"),
                Err(s) => format!("SENT: {s}"),
            }
        );
    }
    assert!(rows.iter().all(|(_, _, r)| r.is_ok()), "{rows:#?}");
    assert_eq!(answers(&dir), 2, "one answer per process, no more");
    // Taken ("go" given) but beta's server stalled past the node's 30 s:
    // what it did is unknown, so 502 "may have started", never the 504
    // that says it will not run (it does run once the server goes on).
    let server = nix::unistd::Pid::from_raw(b.proc.0.id() as i32);
    nix::sys::signal::kill(server, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let (code, out) =
        hub.request("POST", "/agui", &run_input("t8", "r8", "taken", Value::Null, json!({"node": "beta"})));
    nix::sys::signal::kill(server, nix::sys::signal::Signal::SIGCONT).unwrap();
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 502, "{out}");
    assert!(out.contains("may have started"), "{out}");
    drop((b, hub, nats));
}
