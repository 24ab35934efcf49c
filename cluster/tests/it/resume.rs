//! Resumes that survive a server's loss (issue #37, item 5): a feed client
//! and a task-stream client resuming at a hub (`Last-Event-ID`) get the
//! event they wait for within 2 s of it being in the stream, right after
//! each one of the three servers is killed and again a few seconds later
//! (still down). Before: the hub's ordered consumers noticed a lost server
//! only after two missed 15 s heartbeats, and a feed resume could stay
//! silent for more than 12 s.

use crate::common::*;
use runwire_cluster::names;
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The frames of an SSE answer as they come: `(id, data)`.
fn frames(srv: &Serve, path: &str, last_id: &str) -> mpsc::Receiver<(String, serde_json::Value)> {
    let c = srv.send("GET", path, &format!("Last-Event-ID: {last_id}\r\n"), "");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut id = String::new();
        for line in BufReader::new(c).lines() {
            let Ok(line) = line else { return };
            if let Some(i) = line.strip_prefix("id: ") {
                id = i.to_string();
            } else if let Some(d) = line.strip_prefix("data: ").and_then(|d| serde_json::from_str(d).ok()) {
                if tx.send((id.clone(), d)).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A stream, asked for again while the cluster elects new leaders.
async fn stream(js: &async_nats::jetstream::Context, name: &str) -> async_nats::jetstream::stream::Stream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match js.get_stream(name).await {
            Ok(s) => return s,
            Err(e) => assert!(Instant::now() < deadline, "stream {name}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (from one surviving server) until the node's newest feed event
/// (a sequence past `feed_after`) and the log's last `size` bytes are in
/// the streams: when each was first seen there, and the event's sequence.
fn in_streams(url: &str, feed_after: u64, log: &str, size: u64) -> (Instant, u64, Instant) {
    block_on(async {
        let c = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(c);
        let (feed, files) = (stream(&js, names::FEED_STREAM).await, stream(&js, names::FILES_STREAM).await);
        let (mut f, mut l) = (None, None);
        let deadline = Instant::now() + Duration::from_secs(60);
        while f.is_none() || l.is_none() {
            assert!(Instant::now() < deadline, "the node's event and line never reached the streams");
            if f.is_none() {
                if let Ok(m) = feed.get_last_raw_message_by_subject("rwfeed.n1").await {
                    if m.sequence > feed_after {
                        f = Some((Instant::now(), m.sequence));
                    }
                }
            }
            if l.is_none() {
                if let Ok(m) = files.get_last_raw_message_by_subject(log).await {
                    let off: u64 = m.headers.get("Rw-Offset").unwrap().as_str().parse().unwrap();
                    if off + m.payload.len() as u64 == size {
                        l = Some(Instant::now());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (ft, seq) = f.unwrap();
        (ft, seq, l.unwrap())
    })
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_client_resuming_at_a_hub_gets_its_event_within_2_s_while_any_one_server_is_lost() {
    let (dir, mut nats) = nats_cluster("resume-loss");
    let (home, repo, hub_home) = (dir.join("home-n1"), dir.join("repo"), dir.join("home-hub"));
    std::fs::create_dir_all(&home).unwrap();
    let _node = node(&nats.url, "n1", &home, 200);
    let hub = Serve::start(&hub_home, &["--cluster", &nats.url, "--hub"], &[]);
    let mut run = FakeRun::new(&home, &repo);
    run.write(Duration::from_millis(2), |n| n >= 5);
    run.mirrored(&hub_home, "n1", 60);
    let hub_id = names::hub_run_id("n1", &run.pointer.run_id);
    let task = format!("/runs/{hub_id}/tasks/impl.1/stream");
    let log = names::file_subject("n1", &run.pointer.run_id, "feat.x.impl.1.log");
    // The task stream's id of the last line so far.
    let mut task_id = {
        let rx = frames(&hub, &task, "0");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (id, ev) = rx.recv_timeout(deadline - Instant::now()).expect("the task stream's events");
            if ev.to_string().contains(r#"\"n\":5"#) || ev.to_string().contains(r#""n":5"#) {
                break id;
            }
        }
    };
    let mut feed_id = 0;
    for lost in 0..3 {
        nats.servers[lost].kill();
        let url = &nats.urls[(lost + 1) % 3];
        for phase in ["just after", "3 s after"] {
            if phase != "just after" {
                std::thread::sleep(Duration::from_secs(3));
            }
            let before = block_on(async {
                let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
                let s = stream(&js, names::FEED_STREAM).await;
                loop {
                    match s.get_last_raw_message_by_subject("rwfeed.n1").await {
                        Ok(m) => break m.sequence,
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            });
            let want = run.n + 1;
            run.write(Duration::ZERO, |n| n >= want);
            run.journal("implemented");
            let size = std::fs::metadata(run.dir.join("feat.x.impl.1.log")).unwrap().len();
            let (feed_at, seq, log_at) = in_streams(url, before.max(feed_id), &log, size);
            feed_id = seq;
            let what = format!("server {lost} lost, {phase}");
            // The feed, resumed at the hub from the event before.
            let rx = frames(&hub, "/runs/events", &before.to_string());
            loop {
                let (id, _) =
                    rx.recv_timeout(Duration::from_secs(2).saturating_sub(feed_at.elapsed())).unwrap_or_else(|e| {
                        panic!("{what}: the feed's event {seq} not within 2 s of it in the stream: {e}")
                    });
                if id.parse::<u64>().unwrap() >= seq {
                    break;
                }
            }
            // The task stream, resumed at the hub after the line before.
            let rx = frames(&hub, &task, &task_id);
            loop {
                let (id, ev) =
                    rx.recv_timeout(Duration::from_secs(2).saturating_sub(log_at.elapsed())).unwrap_or_else(|e| {
                        panic!("{what}: the task stream's line {want} not within 2 s of it in the stream: {e}")
                    });
                if ev.to_string().contains(&format!(r#"\"n\":{want},"#))
                    || ev.to_string().contains(&format!(r#""n":{want},"#))
                {
                    task_id = id;
                    break;
                }
            }
        }
        nats.servers[lost] = nats.server(lost);
        // Back in the cluster (its streams caught up) before the next one goes.
        std::thread::sleep(Duration::from_secs(4));
    }
}
