//! Data that outlives retention (issue #37, item 3), on a real 3-server
//! cluster: `setup`'s replicas and per-stream limits, a hub that finds a
//! file's start expired asking its node for the file whole (and getting
//! it, in ids of a new generation the duplicate window does not drop), and
//! `runs rm` at a node taking the run out of the streams and the bucket.

use crate::common::*;
use runwire_cluster::names;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn setup(url: &str, args: &[&str]) -> Output {
    Command::new(cluster_bin()).args(["setup", "--url", url]).args(args).output().unwrap()
}

/// `(replicas, max_bytes, max_age in s)` of a stream.
fn config(url: &str, stream: &str) -> (usize, i64, u64) {
    block_on(async {
        let c = async_nats::connect(url).await.unwrap();
        let mut s = async_nats::jetstream::new(c).get_stream(stream).await.unwrap();
        let i = s.info().await.unwrap();
        (i.config.num_replicas, i.config.max_bytes, i.config.max_age.as_secs())
    })
}

fn hub_sidecar(url: &str, home: &Path) -> Proc {
    std::fs::create_dir_all(home).unwrap();
    Proc(
        Command::new(cluster_bin())
            .args(["hub", "--url", url, "--home"])
            .arg(home)
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(home.with_extension("hub-stderr")).unwrap())
            .spawn()
            .unwrap(),
    )
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn setup_replicates_to_the_clusters_size_by_default_and_refuses_one_replica_unless_asked() {
    let (_dir, nats) = nats_cluster("retention-setup");
    // The cluster's own setup (common.rs) said 3; again without --replicas, with limits per stream.
    let out = setup(&nats.url, &["--files-max-bytes", "5000000", "--feed-max-age-days", "2", "--max-age-days", "9"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("stream RUNWIRE_FILES: ready (3 replicas"), "{said}");
    assert_eq!(config(&nats.urls[0], names::FILES_STREAM), (3, 5_000_000, 9 * 86_400));
    assert_eq!(config(&nats.urls[0], names::FEED_STREAM), (3, -1, 2 * 86_400));
    assert_eq!(config(&nats.urls[1], "KV_runwire-runs").0, 3);
    // One replica on three servers: refused (usage), nothing changed.
    let out = setup(&nats.url, &["--replicas", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("runwire-cluster: ") && err.contains("--allow-single-replica"), "{err}");
    assert_eq!(config(&nats.urls[2], names::FILES_STREAM).0, 3);
    // A byte limit too small for the streams' messages: refused (usage), nothing changed.
    for (flag, bytes) in [("--files-max-bytes", "65535"), ("--feed-max-bytes", "100000")] {
        let out = setup(&nats.url, &[flag, bytes]);
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with(&format!("runwire-cluster: {flag} {bytes}: ")), "{err}");
    }
    assert_eq!(config(&nats.urls[0], names::FILES_STREAM).1, 5_000_000);
    assert_eq!(config(&nats.urls[0], names::FEED_STREAM).1, -1);
}

/// The start of a run's files expires (the files stream keeps 256 KiB, and
/// another run's files follow them); a hub started afterwards finds the
/// gap, asks the node, and ends with every file byte-identical to the
/// node's. Before: the mirror's log stayed
/// empty (a gap was an error, and nothing asked for the file again).
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_that_finds_a_files_start_expired_gets_the_file_whole_from_its_node() {
    let (dir, nats) = nats_cluster("retention-gap");
    let out = setup(&nats.url, &["--files-max-bytes", "262144"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (home, repo, hub_home) = (dir.join("home-n1"), dir.join("repo"), dir.join("home-hub"));
    std::fs::create_dir_all(&home).unwrap();
    let _node = node(&nats.url, "n1", &home, 200);
    let mut run = FakeRun::new(&home, &repo);
    run.write(Duration::from_millis(1), |n| n >= 900);
    run.finish();
    // Another run's files after it: together past the stream's 256 KiB
    // (each run's alone is under it, so either can be published again whole).
    let mut other = FakeRun::new(&home, &dir.join("repo-other"));
    other.write(Duration::from_millis(1), |n| n >= 900);
    other.finish();
    let log = names::file_subject("n1", &run.pointer.run_id, "feat.x.impl.1.log");
    // Published to its end, and its first chunks gone.
    let size = std::fs::metadata(run.dir.join("feat.x.impl.1.log")).unwrap().len();
    let first = wait_for("the log published to its end with its start expired", 60, || {
        let mut msgs = messages(&nats.urls[0], names::FILES_STREAM, &log);
        msgs.retain(|(s, _, _)| *s == log); // not the sidecar's (`<log>=2Eat`)
        let (_, h, p) = msgs.last()?;
        (h["Rw-Offset"].parse::<u64>().unwrap() + p.len() as u64 == size).then_some(())?;
        Some(msgs[0].1["Rw-Offset"].parse::<u64>().unwrap())
    });
    assert!(first > 0, "the stream still holds the log's start: the test would not test a gap");
    let _hub = hub_sidecar(&nats.url, &hub_home);
    run.mirrored(&hub_home, "n1", 60);
    // Published again in a generation of its own, whole, in chunks of at
    // most a sixteenth of the stream's byte limit. Before: as one message
    // of up to 1 MiB whatever the limit (a file larger than the limit then
    // emptied the stream).
    let msgs = messages(&nats.urls[0], names::FILES_STREAM, &log);
    let again: Vec<_> = msgs.iter().filter(|(s, h, _)| *s == log && h.contains_key("Rw-Republish")).collect();
    let gen = &again.first().expect("a republished chunk").1["Rw-Gen"];
    assert!(gen.parse::<u64>().unwrap() > 0 && again[0].1["Rw-Whole"] == size.to_string());
    let again: Vec<_> = again.into_iter().filter(|(_, h, _)| &h["Rw-Gen"] == gen).collect();
    assert!(again.len() > 1, "the {size}-byte log went again as {} message(s)", again.len());
    assert!(again.iter().all(|(_, _, p)| p.len() <= 262_144 / 16), "a chunk larger than a sixteenth of the stream");
    // The node goes on appending after it: the hub follows.
    run.write(Duration::from_millis(1), |n| n >= 950);
    run.mirrored(&hub_home, "n1", 30);
}

/// `runs rm` at a node: the run's key leaves the bucket, each of its file
/// subjects is one empty tombstone, the hub that mirrored it drops it and a
/// hub started afterwards never has it. Before: its chunks stayed in the
/// stream and a new hub rebuilt its files.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn runs_rm_at_a_node_takes_the_run_out_of_the_streams_and_the_bucket() {
    let (dir, nats) = nats_cluster("retention-rm");
    let (home, repo) = (dir.join("home-n1"), dir.join("repo"));
    std::fs::create_dir_all(&home).unwrap();
    let _node = node(&nats.url, "n1", &home, 200);
    let mut run = FakeRun::new(&home, &repo);
    run.agent(50, |_| {});
    let hub1 = dir.join("home-hub1");
    let _h1 = hub_sidecar(&nats.url, &hub1);
    run.mirrored(&hub1, "n1", 60);
    // The hub's home's own feed (`runs watch` there), started now: the run's `created`, its node named.
    let hub_id = names::hub_run_id("n1", &run.pointer.run_id);
    let before = watched(&hub1, &["--run", &hub_id]);
    assert_eq!(
        (before.len(), before[0]["type"].as_str(), before[0]["node"].as_str()),
        (1, Some("created"), Some("n1"))
    );
    runs_rm(&home, &run.pointer.run_id);
    taken_out(&dir, &nats, &run, &hub1);
    // It says the run was removed, once, with its node, as the node's own feed does.
    let after = watched(&hub1, &["--run", &hub_id]);
    let types: Vec<_> = after.iter().map(|e| e["type"].as_str().unwrap_or("")).collect();
    assert_eq!(types, ["created", "removed"], "{after:?}");
    assert_eq!((after[1]["node"].as_str(), after[1]["runId"].as_str()), (Some("n1"), Some(hub_id.as_str())));
    let at_node = watched(&home, &["--run", &run.pointer.run_id, "--type", "removed"]);
    assert_eq!((at_node.len(), &at_node[0]["previous"]), (1, &after[1]["previous"]), "{at_node:?}");
}

/// The same `runs rm` while the node's sidecar is down: when it starts
/// again it finds the run it published gone and takes it out as a live
/// node does. Before: a restarted node knew only the runs it found in the
/// registry, so the removed run stayed in the stream, the bucket and every
/// hub's listing for good.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_run_removed_while_its_node_was_down_leaves_the_streams_when_the_node_is_back() {
    // Bound in this order so that they drop in the reverse: processes first.
    let TwoRuns { dir, nats, home, hub1, kept, run, mut n1, h1: _h1 } = two_runs_mirrored("retention-rm-down");
    n1.kill();
    runs_rm(&home, &run.pointer.run_id);
    // Nothing takes the run out while the node is down.
    std::thread::sleep(Duration::from_secs(2));
    assert!(run.mirror(&hub1, "n1").exists(), "the run left the hub with its node down: the test would test nothing");
    let _n1 = node(&nats.url, "n1", &home, 200);
    taken_out(&dir, &nats, &run, &hub1);
    assert!(kept.mirror(&hub1, "n1").exists(), "the run kept left the hub too");
    let key = block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(&nats.urls[0]).await.unwrap());
        js.get_key_value(names::RUNS_BUCKET)
            .await
            .unwrap()
            .get(names::run_key("n1", &kept.pointer.run_id))
            .await
            .unwrap()
    });
    assert!(key.is_some(), "the run kept left the bucket");
}

/// The same `runs rm` while a hub is down: when it starts again it drops
/// the run it mirrored and says so in its home's feed, once (a second
/// restart says nothing more).
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_run_removed_while_the_hub_was_down_leaves_it_at_its_start_said_once() {
    let TwoRuns { dir: _dir, nats, home, hub1, kept, run, n1: _n1, mut h1 } =
        two_runs_mirrored("retention-rm-hub-down");
    let hub_id = names::hub_run_id("n1", &run.pointer.run_id);
    assert_eq!(watched(&hub1, &["--run", &hub_id]).len(), 1, "its created");
    h1.kill();
    runs_rm(&home, &run.pointer.run_id);
    let prefix = format!("rwfile.n1.{}.", names::token(&run.pointer.run_id));
    wait_for("every file of the run a tombstone", 90, || {
        let msgs = messages(&nats.urls[1], names::FILES_STREAM, &prefix);
        (msgs.len() == FILES.len() && msgs.iter().all(|(_, _, p)| p.is_empty())).then_some(())
    });
    assert!(run.mirror(&hub1, "n1").exists(), "the run left the hub while it was down: the test would test nothing");
    for restart in 0..2 {
        let mut h = hub_sidecar(&nats.url, &hub1);
        wait_for("the restarted hub to drop the run", 30, || {
            (!run.mirror(&hub1, "n1").exists() && !hub1.join("runs").join(format!("{hub_id}.json")).exists())
                .then_some(())
        });
        wait_for("the restarted hub to catch up", 30, || hub1.join("cluster/files.seq").exists().then_some(()));
        std::thread::sleep(Duration::from_secs(1));
        let said = watched(&hub1, &["--run", &hub_id]);
        let types: Vec<_> = said.iter().map(|e| e["type"].as_str().unwrap_or("")).collect();
        assert_eq!(types, ["created", "removed"], "restart {restart}: {said:?}");
        let at_node = watched(&home, &["--run", &run.pointer.run_id, "--type", "removed"]);
        assert_eq!((said[1]["node"].as_str(), &said[1]["previous"]), (Some("n1"), &at_node[0]["previous"]), "{said:?}");
        assert!(kept.mirror(&hub1, "n1").exists(), "the run kept left the hub too");
        h.kill();
    }
}

/// Node n1 with two finished runs, one to remove and one to keep (what
/// takes the first out must not take the second), both mirrored at the hub
/// `hub1` (its sidecar `h1`). A test binds the fields scratch directory
/// first, sidecar last, so that they drop processes first.
struct TwoRuns {
    dir: Scratch,
    nats: Nats,
    home: PathBuf,
    hub1: PathBuf,
    kept: FakeRun,
    run: FakeRun,
    n1: Proc,
    h1: Proc,
}

fn two_runs_mirrored(name: &str) -> TwoRuns {
    let (dir, nats) = nats_cluster(name);
    let home = dir.join("home-n1");
    std::fs::create_dir_all(&home).unwrap();
    let n1 = node(&nats.url, "n1", &home, 200);
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    run.agent(50, |_| {});
    let mut kept = FakeRun::new(&home, &dir.join("repo-kept"));
    kept.agent(20, |_| {});
    let hub1 = dir.join("home-hub1");
    let h1 = hub_sidecar(&nats.url, &hub1);
    run.mirrored(&hub1, "n1", 60);
    kept.mirrored(&hub1, "n1", 60);
    TwoRuns { dir, nats, home, hub1, kept, run, n1, h1 }
}

fn runs_rm(home: &Path, id: &str) {
    let out = Command::new(built("runs")).args(["rm", id]).env("HARNESS_HOME", home).output().unwrap();
    assert!(out.status.success(), "runs rm: {}", String::from_utf8_lossy(&out.stderr));
}

/// `run` removed at node n1: every file subject a tombstone, its key out of
/// the bucket, `hub1` (which mirrored it) drops it, and a hub started now
/// never has it.
fn taken_out(dir: &Path, nats: &Nats, run: &FakeRun, hub1: &Path) {
    let id = run.pointer.run_id.clone();
    let prefix = format!("rwfile.n1.{}.", names::token(&id));
    wait_for("every file of the run a tombstone", 90, || {
        let msgs = messages(&nats.urls[1], names::FILES_STREAM, &prefix);
        (msgs.len() == FILES.len() && msgs.iter().all(|(_, h, p)| p.is_empty() && h.contains_key("Rw-Removed")))
            .then_some(())
    });
    let key = block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(&nats.urls[1]).await.unwrap());
        js.get_key_value(names::RUNS_BUCKET).await.unwrap().get(names::run_key("n1", &id)).await.unwrap()
    });
    assert_eq!(key, None, "the run's summary is still in the bucket");
    let hub_id = names::hub_run_id("n1", &id);
    wait_for("the first hub to drop the run", 30, || {
        (!run.mirror(hub1, "n1").exists() && !hub1.join("runs").join(format!("{hub_id}.json")).exists()).then_some(())
    });
    // A hub started now replays the stream and the bucket: nothing of the run.
    let hub2 = dir.join("home-hub2");
    let _h2 = hub_sidecar(&nats.url, &hub2);
    wait_for("the second hub to catch up", 30, || hub2.join("cluster/files.seq").exists().then_some(()));
    std::thread::sleep(Duration::from_secs(1));
    assert!(!run.mirror(&hub2, "n1").exists(), "the new hub rebuilt the removed run's files");
    assert!(!hub2.join("runs").join(format!("{hub_id}.json")).exists());
}

/// Every message of the files stream expired (a short max_age) past the
/// position of a hub started afterwards: it reads on, quietly, with one
/// consumer, and gets what comes next. Before: the stream's last sequence
/// past the position looked like a stalled consumer, made again every
/// second forever (`its consumer stalled (a server lost?)`), the dropped
/// consumers piling up.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_whose_streams_messages_all_expired_reads_on_without_remaking_its_consumer() {
    let (dir, nats) = nats_cluster("retention-all-expired");
    let out = setup(&nats.url, &["--max-age-secs", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (home, hub_home) = (dir.join("home-n1"), dir.join("home-hub"));
    std::fs::create_dir_all(&home).unwrap();
    let _node = node(&nats.url, "n1", &home, 200);
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    run.agent(20, |_| {});
    let state = || {
        block_on(async {
            let js = async_nats::jetstream::new(async_nats::connect(&nats.urls[0]).await.unwrap());
            let i = js.get_stream(names::FILES_STREAM).await.unwrap().info().await.unwrap().clone();
            (i.state.messages, i.state.last_sequence, i.state.consumer_count)
        })
    };
    let last = wait_for("every message of the files stream expired", 60, || {
        let (n, last, _) = state();
        (n == 0 && last > 0).then_some(last)
    });
    let _hub = hub_sidecar(&nats.url, &hub_home);
    std::thread::sleep(Duration::from_secs(6));
    let stderr = std::fs::read_to_string(hub_home.with_extension("hub-stderr")).unwrap_or_default();
    assert!(!stderr.contains("stalled"), "{stderr}");
    assert!(state().2 <= 1, "{} consumers on the files stream", state().2);
    // What the node publishes next reaches the hub.
    run.write(Duration::from_millis(1), |n| n >= 40);
    wait_for("the hub to read past the expired messages", 30, || {
        let seq = std::fs::read_to_string(hub_home.join("cluster/files.seq")).unwrap_or_default();
        seq.trim().parse::<u64>().ok().filter(|s| *s > last)
    });
}

/// Every file of `run` in the files stream to its end (its last message's
/// offset and length its size at the node).
fn published(nats: &Nats, run: &FakeRun) {
    wait_for("the run's files published to their end", 60, || {
        FILES
            .iter()
            .all(|f| {
                let subject = names::file_subject("n1", &run.pointer.run_id, f);
                let size = std::fs::metadata(run.dir.join(f)).unwrap().len();
                let mut msgs = messages(&nats.urls[0], names::FILES_STREAM, &subject);
                msgs.retain(|(s, _, _)| *s == subject);
                msgs.last().is_some_and(|(_, h, p)| h["Rw-Offset"].parse::<u64>().unwrap() + p.len() as u64 == size)
            })
            .then_some(())
    });
}

/// The distinct `Rw-Gen`s of the messages of one subject (republishes).
fn generations(nats: &Nats, subject: &str) -> BTreeSet<String> {
    let mut msgs = messages(&nats.urls[0], names::FILES_STREAM, subject);
    msgs.retain(|(s, _, _)| s == subject);
    msgs.iter().filter_map(|(_, h, _)| h.get("Rw-Gen").cloned()).collect()
}

/// Every chunk of a finished run gone from the files stream (purged, as
/// when all expired) while its summary stays in the bucket: a hub started
/// afterwards lists it with an empty journal, asks its node for it once
/// caught up, and ends byte-identical to the node, asking once (the run
/// is not published again and again). Before: the mirror's empty journal
/// counted as a journal, so the run was never asked for and stayed
/// `registered` with 0 bytes.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_run_whose_every_chunk_expired_is_asked_for_once_and_mirrored_whole() {
    let (dir, nats) = nats_cluster("retention-run-expired");
    let (home, hub_home) = (dir.join("home-n1"), dir.join("home-hub"));
    std::fs::create_dir_all(&home).unwrap();
    let _node = node(&nats.url, "n1", &home, 200);
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    run.agent(30, |_| {});
    published(&nats, &run);
    block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(&nats.urls[0]).await.unwrap());
        js.get_stream(names::FILES_STREAM).await.unwrap().purge().await.unwrap();
    });
    assert!(messages(&nats.urls[0], names::FILES_STREAM, "rwfile.").is_empty());
    let _hub = hub_sidecar(&nats.url, &hub_home);
    run.mirrored(&hub_home, "n1", 60);
    let jsubject = names::file_subject("n1", &run.pointer.run_id, "feat.x.jsonl");
    assert_eq!(generations(&nats, &jsubject).len(), 1);
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(generations(&nats, &jsubject).len(), 1, "the run was asked for again once it was whole");
}

/// A task log larger than the files stream's byte limit (about 300 KiB
/// in 256 KiB), its start expired, and a hub started afterwards: the node
/// does not publish it whole again (it cannot fit) but says so, in the
/// stream, and the hub says so on stderr, once, and stops asking; the
/// rest of the run (its journal) and another run reach the hub, no message
/// is larger than a sixteenth of the limit, and the stream keeps its other
/// messages. Before: the node published the log whole as one message
/// larger than the limit, the stream was emptied (every run's chunks
/// gone), and the hub's log stayed empty without a word.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_file_too_big_for_the_streams_byte_limit_is_said_so_and_the_stream_keeps_the_rest() {
    let (dir, nats) = nats_cluster("retention-unfit");
    let out = setup(&nats.url, &["--files-max-bytes", "262144"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (home, hub_home) = (dir.join("home-n1"), dir.join("home-hub"));
    std::fs::create_dir_all(&home).unwrap();
    let _node = node(&nats.url, "n1", &home, 200);
    let mut big = FakeRun::new(&home, &dir.join("repo"));
    big.write(Duration::from_millis(1), |n| n >= 1900);
    big.finish();
    let size = std::fs::metadata(big.dir.join("feat.x.impl.1.log")).unwrap().len();
    assert!(size > 262_144, "the log ({size} bytes) fits the stream: the test would test nothing");
    let mut small = FakeRun::new(&home, &dir.join("repo-small"));
    small.agent(20, |_| {});
    published(&nats, &small);
    let _hub = hub_sidecar(&nats.url, &hub_home);
    let stderr = hub_home.with_extension("hub-stderr");
    let said = wait_for("the hub to say the log is too big for the stream", 60, || {
        let s = std::fs::read_to_string(&stderr).unwrap_or_default();
        s.lines()
            .any(|l| l.contains(&big.pointer.run_id) && l.contains("feat.x.impl.1.log") && l.contains("too big"))
            .then_some(s)
    });
    assert!(said.starts_with("runwire-cluster: mirror: "), "{said}");
    small.mirrored(&hub_home, "n1", 60);
    let journal = |h: &Path| std::fs::read(h.join("feat.x.jsonl")).ok();
    wait_for("the big run's journal at the hub", 60, || {
        (journal(&big.mirror(&hub_home, "n1")) == journal(&big.dir)).then_some(())
    });
    let node_said = std::fs::read_to_string(home.with_extension("node-stderr")).unwrap();
    assert!(node_said.contains("not published whole again"), "{node_said}");
    // The stream: its other messages kept, none larger than a sixteenth of the limit.
    let all = messages(&nats.urls[0], names::FILES_STREAM, "rwfile.");
    let small_prefix = format!("rwfile.n1.{}.", names::token(&small.pointer.run_id));
    assert!(all.iter().any(|(s, _, _)| s.starts_with(&small_prefix)), "the other run's chunks left the stream");
    assert!(all.iter().all(|(_, _, p)| p.len() <= 262_144 / 16), "a message larger than a sixteenth of the limit");
    // Asked for no more: no new republish of the run, one notice.
    let jsubject = names::file_subject("n1", &big.pointer.run_id, "feat.x.jsonl");
    let before = generations(&nats, &jsubject);
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(generations(&nats, &jsubject), before, "the run was published again, and again");
    let log = names::file_subject("n1", &big.pointer.run_id, "feat.x.impl.1.log");
    let notices = messages(&nats.urls[0], names::FILES_STREAM, &log);
    assert_eq!(notices.iter().filter(|(s, h, _)| *s == log && h.contains_key("Rw-Unfit")).count(), 1);
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert_eq!(said.matches("too big").count(), 1, "{said}");
}
