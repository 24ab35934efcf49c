//! The cluster end to end: a 3-server NATS JetStream cluster on loopback
//! (streams and buckets with 3 replicas), nodes with their own harness
//! homes, and a hub. Needs `nats-server` (the one skip rule:
//! tests/support/tools.rs; `.ci/run` installs it); `runwire-serve` is built
//! when missing. `cargo test -p runwire-cluster --test it cluster::`.

use crate::common::*;
use runwire_cluster::names;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn agui(srv: &Serve, run: &str) {
    let body = serde_json::json!({
        "threadId": format!("th-{run}"), "runId": run, "protocolVersion": "1.0", "state": {}, "tools": [],
        "context": [], "forwardedProps": {}, "messages": [{"id": "u1", "role": "user", "content": "hi"}]
    })
    .to_string();
    let (code, out) = srv.request("POST", "/agui", &body);
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&out).contains("RUN_FINISHED"), "{}", String::from_utf8_lossy(&out));
}

/// `runwire-cluster control`: the answer, as JSON.
fn control(url: &str, node: &str, path: &str, body: &str, timeout_ms: u64) -> Value {
    let out = Command::new(cluster_bin())
        .args(["control", "--url", url, "--node", node, "--path", path, "--body", body])
        .args(["--timeout-ms", &timeout_ms.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fwd_status(v: &Value) -> u64 {
    v["status"].as_u64().unwrap()
}

fn run_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> =
        list["runs"].as_array().unwrap().iter().map(|r| r["runId"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_lists_every_node_run_and_serves_their_task_streams_as_the_nodes_do() {
    let (dir, nats) = nats_cluster("cluster-hub");
    let (ha, hb, hh) = (dir.join("home-a"), dir.join("home-b"), dir.join("home-hub"));
    let mut a = Serve::start(&ha, &["--cluster", &nats.url, "--node", "alpha"], &[]);
    let b = Serve::start(&hb, &["--cluster", &nats.url, "--node", "beta"], &[]);
    let mut hub = Serve::start(&hh, &["--cluster", &nats.url, "--hub"], &[]);
    // Runs recorded by the nodes' own servers (the bundled replay agent).
    agui(&a, "r1");
    agui(&a, "r.2");
    agui(&b, "r1");
    let (ids_a, ids_b) = (run_ids(&a.get_json("/runs")), run_ids(&b.get_json("/runs")));
    assert_eq!((ids_a.len(), ids_b.len()), (2, 1));
    let mut want: Vec<String> = ids_a.iter().map(|i| names::hub_run_id("alpha", i)).collect();
    want.extend(ids_b.iter().map(|i| names::hub_run_id("beta", i)));
    want.sort();
    // Every run of both nodes, listed at the hub, each as done as on its node.
    let listed = wait_for("every run at the hub, done", 60, || {
        let l = hub.get_json("/runs");
        let done = l["runs"].as_array().unwrap().iter().all(|r| r["status"] == "done");
        (run_ids(&l) == want && done).then_some(l)
    });
    let by_id: BTreeMap<String, Value> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["runId"].as_str().unwrap().to_string(), r.clone()))
        .collect();
    for (node, srv, ids) in [("alpha", &a, &ids_a), ("beta", &b, &ids_b)] {
        let own = srv.get_json("/runs");
        for id in ids {
            let mine = own["runs"].as_array().unwrap().iter().find(|r| r["runId"] == id.as_str()).unwrap();
            let at_hub = &by_id[&names::hub_run_id(node, id)];
            for k in ["slug", "status", "repo", "project", "costUsd", "tokens", "needsInput", "wave", "reason"] {
                assert_eq!(at_hub.get(k), mine.get(k), "{node} {id} {k}");
            }
            // The task stream through the hub: the node's own, event for event.
            let path = format!("/runs/{id}/tasks/agent/stream");
            let mine = srv.stream(&path);
            assert!(mine.len() > 10, "{node} {id}: {mine:?}");
            // Event for event, the run's id aside: the hub names it `<node>.<run>`.
            let hub_id = names::hub_run_id(node, id);
            let theirs: Vec<String> = hub
                .stream(&format!("/runs/{hub_id}/tasks/agent/stream"))
                .into_iter()
                .map(|l| l.replace(&format!(r#""run":"{hub_id}""#), &format!(r#""run":"{id}""#)))
                .collect();
            assert_eq!(theirs, mine, "{node} {id}: the hub's task stream differs from the node's");
        }
    }
    // A client resumes by id after the hub restarts: exactly the events after it.
    let hub_id = names::hub_run_id("alpha", &ids_a[0]);
    let path = format!("/runs/{hub_id}/tasks/agent/stream");
    let before = hub.stream(&path);
    drop(hub);
    hub = Serve::start(&hh, &["--cluster", &nats.url, "--hub"], &[]);
    // Each frame is an `id:` line, then its `data:` line.
    let ids: Vec<usize> = (0..before.len()).filter(|&k| before[k].starts_with("id: ")).collect();
    assert!(ids.len() > 4, "{before:?}");
    for k in [ids[0], ids[ids.len() / 2], ids[ids.len() - 2]] {
        let id = &before[k]["id: ".len()..];
        assert_eq!(hub.stream_after(&path, Some(id)), before[k + 2..], "resumed after {id} at the restarted hub");
    }
    // Control forwarded to the owning node answers as the node's own route does.
    let path = format!("/runs/{}/tasks/agent/steer", ids_a[0]);
    let (code, body) = a.request("POST", &path, r#"{"msg":"try the other API"}"#);
    let fwd = control(&nats.url, "alpha", &path, r#"{"msg":"try the other API"}"#, 5000);
    assert_eq!(fwd["status"], code, "{fwd}");
    assert_eq!(fwd["body"].as_str().unwrap().as_bytes(), body.as_slice(), "{fwd}");
    // The same through the hub's own route.
    let at_hub = format!("/runs/{}/tasks/agent/steer", names::hub_run_id("alpha", &ids_a[0]));
    let (hcode, hbody) = hub.request("POST", &at_hub, r#"{"msg":"try the other API"}"#);
    assert_eq!((hcode, String::from_utf8_lossy(&hbody)), (code, String::from_utf8_lossy(&body)));
    let t = Instant::now();
    let (hcode, hbody) = hub.request("POST", "/runs/omega.0123456789ab--x/tasks/agent/kill", "");
    assert_eq!(hcode, 503, "{}", String::from_utf8_lossy(&hbody));
    assert!(String::from_utf8_lossy(&hbody).contains("omega") && t.elapsed() < Duration::from_secs(3));
    // A node nobody answers for: 503 at once, naming it.
    let t = Instant::now();
    let gone = control(&nats.url, "nobody", &path, "{}", 5000);
    assert_eq!(fwd_status(&gone), 503, "{gone}");
    assert!(gone["body"].as_str().unwrap().contains("nobody") && t.elapsed() < Duration::from_secs(3), "{gone}");
    // A node that is there but does not answer (stopped): 504 within the timeout, naming it.
    let mut zeta = Proc(
        Command::new(cluster_bin())
            .args(["node", "--url", &nats.url, "--node", "zeta", "--local", "127.0.0.1:1", "--home"])
            .arg(dir.join("home-z"))
            .stderr(std::fs::File::create(dir.join("home-z.stderr")).unwrap())
            .spawn()
            .unwrap(),
    );
    // First it answers (its server is not there: 502), so it is subscribed.
    wait_for("zeta to answer", 30, || {
        (fwd_status(&control(&nats.url, "zeta", &path, "{}", 1000)) == 502).then_some(())
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(zeta.0.id() as i32), nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let late = control(&nats.url, "zeta", &path, "{}", 1000);
    assert_eq!(fwd_status(&late), 504, "{late}");
    assert!(late["body"].as_str().unwrap().contains("zeta") && t.elapsed() < Duration::from_secs(5), "{late}");
    zeta.kill();
    // The heartbeats: both nodes, fresh.
    let out = Command::new(cluster_bin()).args(["nodes", "--url", &nats.url]).output().unwrap();
    assert!(out.status.success());
    let beats: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // (zeta, stopped right after it answered once, may or may not have beaten.)
    let live: Vec<&Value> = beats.iter().filter(|b| b["node"] != "zeta").collect();
    let names: Vec<&str> = live.iter().map(|b| b["node"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert!(live.iter().all(|b| b["ageMs"].as_u64().unwrap() < 10_000), "{beats:?}");
    // A server's sidecar ends with it, even killed (SIGKILL) without a word.
    let sidecars = children(a.proc.0.id());
    assert_eq!(sidecars.len(), 1, "{sidecars:?}");
    a.proc.kill();
    wait_for("alpha's sidecar to end with its server", 10, || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", sidecars[0])).unwrap_or_default();
        // Gone, or a zombie nobody has reaped yet.
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    });
    drop((b, hub, nats));
}

/// The hub's mirror of the run equals the node's files, and the run is listed.
fn mirrored(run: &FakeRun, hub_home: &Path, node: &str) {
    run.mirrored(hub_home, node, 90);
    let id = names::hub_run_id(node, &run.pointer.run_id);
    assert!(hub_home.join("runs").join(format!("{id}.json")).is_file());
}

/// Nothing published twice or lost, and the node's whole feed (8 events at least).
fn published_once(run: &FakeRun, url: &str, home: &Path, node: &str) {
    let feed = run.published_once(|stream, prefix| messages(url, stream, prefix), home, node);
    assert!(feed.len() >= 8, "{feed:?}");
}

fn hub_proc(url: &str, home: &Path) -> Proc {
    Proc(
        Command::new(cluster_bin())
            .args(["hub", "--url", url, "--home"])
            .arg(home)
            .stdin(Stdio::null())
            // Its retries while servers are cut off are said on stderr: kept beside its home
            // (to read when a test fails), not printed in a passing run.
            .stderr(std::fs::File::create(home.with_extension("hub-stderr")).unwrap())
            .spawn()
            .unwrap(),
    )
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_killed_mid_run_catches_up_with_nothing_lost_or_duplicated() {
    let (dir, nats) = nats_cluster("cluster-restart");
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    let _hub = hub_proc(&nats.url, &hh);
    let mut n = Some(node(&nats.url, "gamma", &home, 50));
    run.agent(600, |i| match i {
        // Killed (SIGKILL) mid-run, mid-publish; the agent goes on.
        200 => n = None,
        // Back: it resumes from the cluster's position.
        400 => n = Some(node(&nats.url, "gamma", &home, 50)),
        _ => {}
    });
    mirrored(&run, &hh, "gamma");
    published_once(&run, &nats.url, &home, "gamma");
    drop(n);
    drop(nats);
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_nats_server_and_the_hub_killed_mid_stream_lose_and_duplicate_nothing() {
    let (dir, mut nats) = nats_cluster("cluster-faults");
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    // The node knows only server 0 (it learns the others from it), so
    // killing server 0 takes its connection for certain.
    let _n = node(&nats.urls[0], "delta", &home, 50);
    let mut hub = Some(hub_proc(&nats.url, &hh));
    let rest = nats.urls[1..].join(",");
    run.agent(700, |i| match i {
        150 => hub = None,
        250 => nats.servers[0].kill(),
        500 => hub = Some(hub_proc(&rest, &hh)),
        _ => {}
    });
    mirrored(&run, &hh, "delta");
    published_once(&run, &rest, &home, "delta");
    drop(hub);
    drop(nats);
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_cut_from_the_cluster_while_its_agent_works_catches_up_in_order() {
    let (dir, mut nats) = nats_cluster("cluster-cut");
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    let _n = node(&nats.url, "eps", &home, 50);
    let _hub = hub_proc(&nats.url, &hh);
    let (mut cut_at, mut gone) = (Instant::now(), Duration::ZERO);
    run.agent(900, |i| match i {
        // The whole cluster goes (the node is cut off: it keeps its files
        // and retries) and comes back on the same ports and stores.
        150 => {
            for s in &mut nats.servers {
                s.kill();
            }
            cut_at = Instant::now();
        }
        750 => {
            gone = cut_at.elapsed();
            nats.servers = (0..3).map(|i| nats.server(i)).collect();
        }
        _ => {}
    });
    mirrored(&run, &hh, "eps");
    published_once(&run, &nats.url, &home, "eps");
    // 600 lines of the agent's, a few ms apart, while no server was up.
    assert!(gone > Duration::from_millis(1800), "the cluster was gone for {gone:?} only");
    drop(nats);
}

/// A burst: 3,000 lines a little over 0.1 ms apart, only task files. The
/// live tail sends each file at most once a millisecond (its messages,
/// counted by a subscriber, are no more than the milliseconds they span);
/// the stream's rounds wait for a pause, 250 ms at most (the log's chunks
/// in the stream are no more than the burst's length over 250 ms, and
/// more than one: not held to its end). The mirror stays the node's files
/// exactly, the stream holding each byte once. (What is not put off:
/// wake.rs's unit test.)
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_burst_goes_live_once_a_millisecond_and_into_the_stream_after_a_pause_and_stays_exact() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (dir, nats) = nats_cluster("cluster-burst");
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    let _n = node(&nats.urls[0], "zeta", &home, 50);
    let _hub = hub_proc(&nats.urls[0], &hh);
    run.write(Duration::from_millis(3), |n| n >= 20);
    run.mirrored(&hh, "zeta", 90);
    let log = "feat.x.impl.1.log";
    let live_log = names::live_subject("zeta", &run.pointer.run_id, log);
    let rid = run.pointer.run_id.clone();
    let subject = |f: &str| names::file_subject("zeta", &rid, f);
    // A file's chunks in the stream from `from` on (not its arrival times':
    // `<log>=2Eat` has the log's subject as its prefix).
    let chunks = |f: &str, from: u64| {
        messages(&nats.url, names::FILES_STREAM, &subject(f))
            .into_iter()
            .filter(|(s, h, _)| *s == subject(f) && h["Rw-Offset"].parse::<u64>().unwrap() >= from)
            .count()
    };
    // Every live message's subject and arrival, as a hub would get them.
    let (stop, subscribed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let listener = {
        let (stop, subscribed, url) = (stop.clone(), subscribed.clone(), nats.urls[0].clone());
        std::thread::spawn(move || {
            block_on(async move {
                use futures_util::StreamExt;
                let client = async_nats::connect(url.as_str()).await.unwrap();
                let mut sub = client.subscribe("rwlive.zeta.>").await.unwrap();
                client.flush().await.unwrap();
                subscribed.store(true, Ordering::SeqCst);
                let mut got = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(50), sub.next()).await {
                        got.push((Instant::now(), m.subject.to_string()));
                    }
                }
                got
            })
        })
    };
    wait_for("the subscriber", 10, || subscribed.load(Ordering::SeqCst).then_some(()));
    let before = std::fs::metadata(run.dir.join(log)).unwrap().len();
    let t0 = Instant::now();
    let pauses = run.burst(Duration::from_micros(100), |n| n >= 3020);
    let burst = t0.elapsed();
    run.mirrored(&hh, "zeta", 60);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    let got = listener.join().unwrap();
    let times: Vec<Instant> = got.iter().filter(|(_, s)| *s == live_log).map(|(t, _)| *t).collect();
    assert!(times.len() >= 2, "the burst did not go live: {} messages of the log", times.len());
    let span = (*times.last().unwrap() - times[0]).as_secs_f64() * 1000.0;
    // One message a millisecond at most, as sent; here the first may have
    // come late (this thread not running) and the next on time: 10 spare.
    assert!(times.len() as f64 <= span + 10.0, "{} live messages of the log in {span:.1} ms", times.len());
    // A round each 250 ms, and one after each pause of the writer's (a
    // busy machine not running it) that the node saw as the burst's end.
    let (n, most) = (chunks(log, before), burst.as_millis() as usize / 250 + pauses + 3);
    assert!(n <= most, "{n} stream chunks of the log for a burst of {burst:?} ({pauses} pauses; at most {most})");
    assert!(n >= 2, "{n} stream chunk of the log for a burst of {burst:?}: held back to its end");
    run.finish();
    mirrored(&run, &hh, "zeta");
    // Each byte once in the stream, and the feed (leased, gated, committed, finished).
    let feed = run.published_once(|stream, prefix| messages(&nats.url, stream, prefix), &home, "zeta");
    assert!(feed.len() >= 4, "{feed:?}");
    drop(nats);
}

/// The live tail (spec/CLUSTER.md, "Live tail"): with two servers of three
/// gone, the stream cannot store a chunk (no quorum), yet the agent's lines
/// reach the hub's mirror through the one server left, byte for byte; when
/// the servers are back the stream catches up and the mirror is still the
/// node's files exactly (no byte written twice by the two paths).
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_gets_a_nodes_lines_live_while_the_stream_cannot_store_them_and_stays_exact() {
    let (dir, mut nats) = nats_cluster("cluster-live");
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    // Both on server 0, the one that stays.
    let _n = node(&nats.urls[0], "zeta", &home, 50);
    let _hub = hub_proc(&nats.urls[0], &hh);
    run.write(Duration::from_millis(3), |n| n >= 20);
    run.mirrored(&hh, "zeta", 90);
    nats.servers[1].kill();
    nats.servers[2].kill();
    let log = "feat.x.impl.1.log";
    let mirror = run.mirror(&hh, "zeta");
    // Meanwhile, at every look, each line the hub has of the log it has
    // with its arrival time (the agent writes the time first).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checker = {
        let (stop, mirror) = (stop.clone(), mirror.clone());
        std::thread::spawn(move || {
            let lines = |f: &str| std::fs::read(mirror.join(f)).map(|b| b.iter().filter(|c| **c == b'\n').count());
            let (mut looks, mut ahead) = (0, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let (Ok(l), Ok(a)) = (lines(log), lines("feat.x.impl.1.log.at")) {
                    looks += 1;
                    if l > a {
                        ahead.push((l, a));
                    }
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            (looks, ahead)
        })
    };
    run.write(Duration::from_millis(5), |n| n >= 60);
    let node_log = std::fs::read(run.dir.join(log)).unwrap();
    let node_at = std::fs::read(run.dir.join(format!("{log}.at"))).unwrap();
    wait_for("the lines written without a quorum, at the hub", 20, || {
        (std::fs::read(mirror.join(log)).ok() == Some(node_log.clone())
            && std::fs::read(mirror.join(format!("{log}.at"))).ok() == Some(node_at.clone()))
        .then_some(())
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (looks, ahead) = checker.join().unwrap();
    assert!(looks > 100, "{looks} looks only");
    assert_eq!(ahead, vec![], "log lines at the hub without their arrival times (lines, times)");
    // Not through the stream: it could not store a chunk meanwhile.
    let stored = block_on(async {
        let mut js = async_nats::jetstream::new(async_nats::connect(nats.urls[0].as_str()).await.unwrap());
        js.set_timeout(Duration::from_secs(2));
        match js.publish("rwfile.probe.r.f", "x".into()).await {
            Ok(ack) => ack.await.is_ok(),
            Err(_) => false,
        }
    });
    assert!(!stored, "the stream stored a chunk with two servers of three gone");
    nats.servers[1] = nats.server(1);
    nats.servers[2] = nats.server(2);
    run.write(Duration::from_millis(3), |n| n >= 100);
    run.finish();
    mirrored(&run, &hh, "zeta");
    // Both streams answer again (their leaders elected after the restart) before they are read.
    wait_for("the streams to answer", 60, || {
        block_on(async {
            let js = async_nats::jetstream::new(async_nats::connect(nats.urls[0].as_str()).await.ok()?);
            for name in [names::FILES_STREAM, names::FEED_STREAM] {
                js.get_stream(name).await.ok()?.get_info().await.ok()?;
            }
            Some(())
        })
    });
    // Each file in the stream once, byte for byte (the live tail adds nothing there).
    let feed = run.published_once(|stream, prefix| messages(&nats.url, stream, prefix), &home, "zeta");
    assert!(feed.len() >= 4, "{feed:?}");
    drop(nats);
}
