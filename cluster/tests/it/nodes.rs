//! Nodes: liveness and names (spec/CLUSTER.md, "Nodes"). A node whose
//! server and sidecar are SIGKILLed is `lost` at the hub (`GET /runs`, its
//! `?node=` listing, the feed's `node` event; `runs` and an operator's
//! `runs notify` at the hub's home) within 10 s, and `up` again
//! when it comes back; a node name is one machine's lease: a second machine
//! with the name refuses to start, naming the holder, until the first's
//! lease expires or an admin frees it (`runwire-cluster nodes --remove`).
//!
//! On a 3-server NATS JetStream cluster on loopback. Needs `nats-server`
//! (the one skip rule: tests/support/tools.rs).
//! `cargo test -p runwire-cluster --test it nodes::`.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// SIGKILL of a server and everything it started (its sidecar): a machine gone.
fn kill_all(s: &mut Serve) {
    let pid = s.proc.0.id();
    for c in children(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(c as i32), nix::sys::signal::Signal::SIGKILL);
    }
    s.proc.kill();
}

/// The hub's listing of node `node`'s runs (`?node=`).
fn runs_of(hub: &Serve, node: &str) -> Vec<Value> {
    hub.get_json(&format!("/runs?node={node}"))["runs"].as_array().cloned().unwrap_or_default()
}

/// `runs ARGS` at `home` (a script's view of the runs): its stdout, which must succeed.
fn runs_cli(home: &Path, args: &[&str]) -> String {
    let out = Command::new(built("runs")).args(args).env("HARNESS_HOME", home).output().unwrap();
    assert!(out.status.success(), "runs {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `runs list --json ARGS` at `home`: its JSON lines.
fn runs_listed(home: &Path, args: &[&str]) -> Vec<Value> {
    let text = runs_cli(home, &[&["list", "--json"], args].concat());
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `runwire-cluster nodes`: each node's last heartbeat.
fn nodes(url: &str) -> Vec<Value> {
    let out = Command::new(cluster_bin()).args(["nodes", "--url", url]).output().unwrap();
    assert!(out.status.success(), "nodes: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Runs `cmd` to its end within `secs` (killed and failed otherwise): exit code and stderr.
fn ends_within(cmd: Command, secs: u64) -> (Option<i32>, String) {
    let (code, _, err) = ends_within_saying(cmd, secs);
    (code, err)
}

/// Its exit code, stdout and stderr.
fn ends_within_saying(mut cmd: Command, secs: u64) -> (Option<i32>, String, String) {
    let tmp = std::env::temp_dir().join(format!("rw-nodes-{}-{}", std::process::id(), crate::common::free_port()));
    let (out, err) = (tmp.with_extension("out"), tmp.with_extension("err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {secs} s: {}", std::fs::read_to_string(&err).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = |p: &Path| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let _ = std::fs::remove_file(p);
        text
    };
    (status.code(), said(&out), said(&err))
}

/// An operator's `runs notify` (its default types) at `home`, POSTing to a
/// webhook receiver (fixtures/webhooks/receiver.py, not runwire's code):
/// each delivery arrives on the channel. Both are killed on drop.
struct Hook {
    receiver: std::process::Child,
    notify: std::process::Child,
    rx: std::sync::mpsc::Receiver<Value>,
}

impl Hook {
    fn start(home: &Path, dir: &Path) -> Hook {
        use std::io::BufRead;
        let mut receiver = Command::new("python3")
            .arg(root().join("fixtures/webhooks/receiver.py"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start python3");
        let mut out = std::io::BufReader::new(receiver.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let port: u16 = first.trim().strip_prefix("listening ").and_then(|p| p.parse().ok()).expect("its port");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                if tx.send(serde_json::from_str::<Value>(&l).unwrap()).is_err() {
                    return;
                }
            }
        });
        // It writes its state once it has brought the feed up to date: from then on nothing is missed.
        let state = dir.join("notify.state");
        let notify = Command::new(built("runs"))
            .args(["notify", "--webhook", &format!("http://127.0.0.1:{port}/hook"), "--state"])
            .arg(&state)
            .env("HARNESS_HOME", home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let hook = Hook { receiver, notify, rx };
        wait_for("runs notify's state file", 20, || state.is_file().then_some(()));
        hook
    }

    /// The next delivery's body (`{"type","timestamp","data"}`).
    fn next(&self) -> Value {
        let d = self.rx.recv_timeout(Duration::from_secs(15)).expect("a delivery in time");
        d["body"].clone()
    }
}

impl Drop for Hook {
    fn drop(&mut self) {
        for c in [&mut self.notify, &mut self.receiver] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn serve_cmd(home: &Path, url: &str, node: &str) -> Command {
    let mut c = Command::new(built("runwire-serve"));
    c.args(["--listen", "127.0.0.1:0", "--cluster", url, "--node", node]).env("HARNESS_HOME", home);
    c
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_dead_nodes_runs_are_lost_at_the_hub_and_the_feed_says_so_and_up_when_it_is_back() {
    let (dir, nats) = nats_cluster("nodes-lost");
    let (ha, hb, hh) = (dir.join("home-a"), dir.join("home-b"), dir.join("home-hub"));
    let run_a = FakeRun::new(&ha, &dir.join("repo-a"));
    let run_b = FakeRun::new(&hb, &dir.join("repo-b"));
    let args = |n: &'static str| ["--cluster".to_string(), nats.url.clone(), "--node".into(), n.into()];
    let aa = args("alpha");
    let ab = args("beta");
    let mut alpha = Serve::start(&ha, &aa.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let _beta = Serve::start(&hb, &ab.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let mut hub = Serve::start(&hh, &["--cluster", &nats.url, "--hub"], &[]);
    let id_a = format!("alpha.{}", run_a.pointer.run_id);
    let id_b = format!("beta.{}", run_b.pointer.run_id);
    let state = |node: &str, id: &str| {
        runs_of(&hub, node)
            .into_iter()
            .find(|r| r["runId"] == id)
            .map(|r| r["nodeState"].as_str().unwrap_or("").to_string())
    };
    wait_for("both runs listed, their nodes up", 30, || {
        (state("alpha", &id_a).as_deref() == Some("up") && state("beta", &id_b).as_deref() == Some("up")).then_some(())
    });
    let run = runs_of(&hub, "alpha").into_iter().find(|r| r["runId"] == id_a).unwrap();
    assert_eq!(run["status"], "running", "{run}");
    // The feed's node events, from now on.
    let feed = hub.follow("/runs/events?type=node");
    // A run's own feed (the studio's run page follows `?run=`) brings its node's events too, and
    // another node's run's feed does not.
    let feed_a = hub.follow(&format!("/runs/events?run={id_a}"));
    let feed_b = hub.follow(&format!("/runs/events?run={id_b}"));
    // An operator's webhook, from the hub's home (scripts and cron there read no stream).
    let hook = Hook::start(&hh, &dir);
    let killed_ms = now_ms();
    let killed = Instant::now();
    kill_all(&mut alpha);
    // Lost within 10 s (three missed 2 s beats), since its last beat; beta's stays up.
    let run = wait_for("alpha's run listed as lost", 10, || {
        runs_of(&hub, "alpha").into_iter().find(|r| r["runId"] == id_a && r["nodeState"] == "lost")
    });
    let lost_after = killed.elapsed();
    eprintln!("nodes: alpha listed lost {lost_after:?} after its SIGKILL");
    let since = run["nodeLostSince"].as_u64().unwrap();
    assert!(since <= killed_ms && since + 5_000 > killed_ms, "lost since its last beat: {since} vs killed {killed_ms}");
    assert!(lost_after >= Duration::from_secs(4), "lost after {lost_after:?}: before three beats were missed");
    assert_eq!(state("beta", &id_b).as_deref(), Some("up"));
    // `runwire-cluster nodes` says so too.
    wait_for("runwire-cluster nodes: alpha lost, beta up", 5, || {
        let n = nodes(&nats.url);
        let st =
            |name: &str| n.iter().find(|x| x["node"] == name).map(|x| x["state"].as_str().unwrap_or("").to_string());
        (st("alpha").as_deref() == Some("lost") && st("beta").as_deref() == Some("up")).then_some(())
    });
    // The whole listing says it too.
    let all = hub.get_json("/runs");
    let r = all["runs"].as_array().unwrap().iter().find(|r| r["runId"] == id_a).unwrap().clone();
    assert_eq!((r["node"].as_str(), r["nodeState"].as_str()), (Some("alpha"), Some("lost")), "{r}");
    // So does the run's own view (the studio's run page).
    let shown = hub.get_json(&format!("/runs/{id_a}"))["run"].clone();
    assert_eq!(
        (shown["node"].as_str(), shown["nodeState"].as_str(), shown["nodeLostSince"].as_u64()),
        (Some("alpha"), Some("lost"), Some(since)),
        "{shown}"
    );
    // And `runs` at the hub's home (scripts, cron): the same fields, `--node`,
    // and a table whose status says the node is lost.
    let listed = runs_listed(&hh, &[]);
    let r = listed.iter().find(|r| r["runId"] == id_a).unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(
        (r["node"].as_str(), r["nodeState"].as_str(), r["nodeLostSince"].as_u64()),
        (Some("alpha"), Some("lost"), Some(since)),
        "{r}"
    );
    let ids = |v: Vec<Value>| v.iter().map(|r| r["runId"].as_str().unwrap_or("").to_string()).collect::<Vec<_>>();
    assert_eq!(ids(runs_listed(&hh, &["--node", "beta"])), std::slice::from_ref(&id_b));
    let table = runs_cli(&hh, &["list", "--table"]);
    let row = table.lines().find(|l| l.contains(&id_a)).unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("node lost (running)"), "{table}");
    let shown: Value = serde_json::from_str(&runs_cli(&hh, &["show", &id_a])).unwrap();
    assert_eq!((shown["run"]["node"].as_str(), shown["run"]["nodeState"].as_str()), (Some("alpha"), Some("lost")));
    let ev = wait_for("the feed's node event (lost)", 10, || {
        feed.recv_timeout(Duration::from_millis(100)).ok().filter(|e| e["type"] == "node")
    });
    assert_eq!(
        (ev["node"].as_str(), ev["state"].as_str(), ev["since"].as_u64()),
        (Some("alpha"), Some("lost"), Some(since)),
        "{ev}"
    );
    assert!(ev["id"].as_u64().is_some(), "a feed event has its id: {ev}");
    let on_a = wait_for("alpha's node event on the feed of alpha's run", 10, || {
        feed_a.recv_timeout(Duration::from_millis(100)).ok().filter(|e| e["type"] == "node")
    });
    assert_eq!((on_a["node"].as_str(), on_a["state"].as_str(), &on_a["id"]), (Some("alpha"), Some("lost"), &ev["id"]));
    let on_b: Vec<Value> = feed_b.try_iter().filter(|e| e["type"] == "node").collect();
    assert!(on_b.is_empty(), "alpha's node event on the feed of beta's run: {on_b:?}");
    // The hub's home's own feed has it too: `runs watch` and the operator's webhook.
    let told = hook.next();
    assert_eq!(
        (told["type"].as_str(), told["data"]["node"].as_str(), told["data"]["state"].as_str()),
        (Some("node"), Some("alpha"), Some("lost")),
        "{told}"
    );
    assert_eq!(told["data"]["since"].as_u64(), Some(since), "{told}");
    let said = watched(&hh, &["--type", "node"]);
    let seen: Vec<_> = said.iter().map(|e| (e["node"].as_str(), e["state"].as_str(), e["since"].as_u64())).collect();
    assert_eq!(seen, [(Some("alpha"), Some("lost"), Some(since))], "{said:?}");
    // And its run's events there name their node, as the hub's server's do.
    let of_a = watched(&hh, &["--run", &id_a]);
    assert!(of_a.iter().any(|e| e["type"] == "created"), "{of_a:?}");
    assert!(of_a.iter().all(|e| e["node"] == "alpha"), "{of_a:?}");
    // Back: the same machine (its home) takes its name again; up at its first beat.
    let _alpha = Serve::start(&ha, &aa.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    wait_for("alpha's run up again", 15, || (state("alpha", &id_a).as_deref() == Some("up")).then_some(()));
    let ev = wait_for("the feed's node event (up)", 10, || {
        feed.recv_timeout(Duration::from_millis(100)).ok().filter(|e| e["type"] == "node")
    });
    assert_eq!((ev["node"].as_str(), ev["state"].as_str()), (Some("alpha"), Some("up")), "{ev}");
    let told = hook.next();
    assert_eq!((told["data"]["node"].as_str(), told["data"]["state"].as_str()), (Some("alpha"), Some("up")), "{told}");
    let states: Vec<_> = watched(&hh, &["--type", "node"]).iter().map(|e| e["state"].clone()).collect();
    assert_eq!(states, ["lost", "up"]);
    assert_eq!(runs_listed(&hh, &["--node", "alpha"])[0]["nodeState"], "up");
    // Stopped (SIGTERM), the hub's sidecar lets its home feed's writer end:
    // the checkpoint covers the whole log and no half-written one is left
    // (it exited mid-write, leaving `.state.json.<pid>.tmp` and a stale one).
    hub.proc.stop();
    let names: Vec<String> = std::fs::read_dir(hh.join("feed"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    let state: Value = serde_json::from_slice(&std::fs::read(hh.join("feed/state.json")).unwrap()).unwrap();
    let log_len = std::fs::metadata(hh.join("feed/events.log")).unwrap().len();
    assert_eq!(state["log_len"].as_u64(), Some(log_len), "the checkpoint is the log's end");
    // Started again, then killed (its file stays): nobody judges, and
    // `runs` says `unknown`, not the last judgement's `up`.
    let mut hub = Serve::start(&hh, &["--cluster", &nats.url, "--hub"], &[]);
    wait_for("the hub back", 30, || (!runs_of(&hub, "alpha").is_empty()).then_some(()));
    kill_all(&mut hub);
    let listed = runs_listed(&hh, &[]);
    let states: Vec<&str> = listed.iter().map(|r| r["nodeState"].as_str().unwrap_or("")).collect();
    assert_eq!(states, ["unknown", "unknown"], "{listed:?}");
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_name_is_one_machines_until_its_lease_expires_or_an_admin_frees_it() {
    let (dir, nats) = nats_cluster("nodes-names");
    let (ha, hb) = (dir.join("home-a"), dir.join("home-b"));
    std::fs::create_dir_all(&hb).unwrap();
    let mut first = Serve::start(&ha, &["--cluster", &nats.url, "--node", "alpha"], &[]);
    wait_for("alpha's lease held by home-a", 20, || {
        nodes(&nats.url).into_iter().find(|n| n["node"] == "alpha" && n["home"] == ha.display().to_string())
    });
    // A server that cannot listen (its port taken) exits 3 and never holds
    // its name: it would have been every hub's lost node for the lease's
    // life, the name refused to its next start elsewhere.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut busy = Command::new(built("runwire-serve"));
    busy.args(["--listen", &taken.local_addr().unwrap().to_string(), "--cluster", &nats.url, "--node", "gamma"])
        .env("HARNESS_HOME", dir.join("home-c"));
    let (code, err) = ends_within(busy, 20);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("Address already in use") || err.contains("in use"), "{err}");
    assert!(!nodes(&nats.url).iter().any(|n| n["node"] == "gamma"), "a server that never listened holds gamma");
    drop(taken);
    // A second machine with the name: refused at start, exit 2, naming the
    // holder, before it says where it listens (a script waiting for the
    // `listening on` line must not take it for a server that runs).
    let (code, out, err) = ends_within_saying(serve_cmd(&hb, &nats.url, "alpha"), 20);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(out, "", "a refused node printed on stdout: {err}");
    assert!(!err.contains("open http"), "a refused node pointed at its studio: {err}");
    let line = err.lines().last().unwrap_or("");
    assert!(line.starts_with("runwire-serve: --cluster: node alpha: the name is held by host "), "{err}");
    assert!(line.contains(&ha.display().to_string()) && line.contains("--remove alpha"), "{err}");
    // Its sidecar alone refuses too (a sidecar started by hand or restarted later).
    let mut side = Command::new(cluster_bin());
    side.args(["node", "--url", &nats.url, "--node", "alpha", "--home"]).arg(&hb);
    let (code, err) = ends_within(side, 20);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("node alpha: the name is held by host"), "{err}");
    // The holder's own home takes it back (a restart): not a second machine.
    let mut again = Command::new(cluster_bin());
    again.args(["lease", "--url", &nats.url, "--node", "alpha", "--home"]).arg(&ha);
    assert_eq!(ends_within(again, 20).0, Some(0));
    // The first dies: its lease stays until it expires...
    kill_all(&mut first);
    let lease = |home: &Path| {
        let mut c = Command::new(cluster_bin());
        c.args(["lease", "--url", &nats.url, "--node", "alpha", "--home"]).arg(home);
        ends_within(c, 20)
    };
    assert_eq!(lease(&hb).0, Some(2), "the lease of a node dead for a moment is still held");
    // ... or an admin frees it, and the second machine takes the name.
    let out = Command::new(cluster_bin()).args(["nodes", "--url", &nats.url, "--remove", "alpha"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((said["node"].as_str(), said["removed"].as_bool()), (Some("alpha"), Some(true)), "{said}");
    let mut second = Serve::start(&hb, &["--cluster", &nats.url, "--node", "alpha"], &[]);
    wait_for("alpha's lease held by home-b", 20, || {
        nodes(&nats.url).into_iter().find(|n| n["node"] == "alpha" && n["home"] == hb.display().to_string())
    });
    // Now the first machine is the second: refused.
    let (code, err) = ends_within(serve_cmd(&ha, &nats.url, "alpha"), 20);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&hb.display().to_string()), "{err}");
    // The second dies; without an admin, its lease expires (the bucket's max_age) and the name is free.
    kill_all(&mut second);
    let died = Instant::now();
    let took = wait_for("the dead node's lease to expire", 60, || (lease(&ha).0 == Some(0)).then(|| died.elapsed()));
    assert!(took >= Duration::from_secs(20), "the lease of a live-a-moment-ago node was free after {took:?}");
    // A running node whose name is taken from under it (freed, then taken by
    // another machine before its next beat) stops, exit 2, naming the holder.
    let mut side = Command::new(cluster_bin());
    side.args(["node", "--url", &nats.url, "--node", "alpha", "--heartbeat-ms", "3000", "--home"]).arg(&ha);
    let err = std::env::temp_dir().join(format!("rw-nodes-taken-{}.err", std::process::id()));
    let mut running = Proc(side.stdin(Stdio::null()).stderr(std::fs::File::create(&err).unwrap()).spawn().unwrap());
    wait_for("alpha's lease held by home-a's node", 20, || {
        nodes(&nats.url).into_iter().find(|n| n["node"] == "alpha" && n["pid"] == running.0.id())
    });
    let out = Command::new(cluster_bin()).args(["nodes", "--url", &nats.url, "--remove", "alpha"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lease(&hb).0, Some(0), "the freed name is taken by home-b");
    let code =
        wait_for("the node whose name was taken to stop", 15, || running.0.try_wait().unwrap().map(|s| s.code()));
    let said = std::fs::read_to_string(&err).unwrap_or_default();
    let _ = std::fs::remove_file(&err);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("node alpha: the name is held by host") && said.contains(&hb.display().to_string()),
        "{said}"
    );
}

/// The `node` events of the feed stream (`rwnode.*`): node and state, in order.
fn streamed_node_events(url: &str) -> Vec<(String, String)> {
    messages(url, runwire_cluster::names::FEED_STREAM, "rwnode.")
        .iter()
        .map(|(_, _, body)| serde_json::from_slice::<Value>(body).unwrap())
        .map(|e| (e["node"].as_str().unwrap_or("").to_string(), e["state"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// The `node` events of the hub's home's own feed (`runs watch`): node, state and since.
fn home_node_events(home: &Path) -> Vec<(String, String, u64)> {
    let said = watched(home, &["--type", "node"]);
    said.iter()
        .map(|e| {
            (
                e["node"].as_str().unwrap_or("").into(),
                e["state"].as_str().unwrap_or("").into(),
                e["since"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A hub that was down while its nodes died or came back says so when it
/// starts (its home's feed, for an operator's `runs notify`, and the feed
/// stream), once: a node whose beat is still in the bucket is judged on it;
/// one whose lease expired meanwhile is lost since the hub last knew it up,
/// not `unknown`. A restart that finds nothing new says nothing.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_says_at_its_start_what_its_nodes_did_while_it_was_down_and_nothing_twice() {
    let (dir, nats) = nats_cluster("nodes-restart");
    let (ha, hb, hh) = (dir.join("home-a"), dir.join("home-b"), dir.join("home-hub"));
    let hh2 = dir.join("home-hub2");
    let run_a = FakeRun::new(&ha, &dir.join("repo-a"));
    let run_b = FakeRun::new(&hb, &dir.join("repo-b"));
    let node_args = |n: &'static str| ["--cluster".to_string(), nats.url.clone(), "--node".into(), n.into()];
    let (aa, ab) = (node_args("alpha"), node_args("beta"));
    let start_node =
        |home: &Path, a: &[String]| Serve::start(home, &a.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let mut alpha = start_node(&ha, &aa);
    let mut beta = start_node(&hb, &ab);
    let start_hub_at = |home: &Path| Serve::start(home, &["--cluster", &nats.url, "--hub"], &[]);
    let start_hub = || start_hub_at(&hh);
    let (id_a, id_b) = (format!("alpha.{}", run_a.pointer.run_id), format!("beta.{}", run_b.pointer.run_id));
    let states = |hub: &Serve| {
        let runs = hub.get_json("/runs")["runs"].as_array().cloned().unwrap_or_default();
        let of = |id: &str| {
            runs.iter().find(|r| r["runId"] == id).map(|r| r["nodeState"].as_str().unwrap_or("").to_string())
        };
        (of(&id_a), of(&id_b))
    };
    let both = |a: &str, b: &str| (Some(a.to_string()), Some(b.to_string()));
    let mut hub = start_hub();
    let mut hub2 = start_hub_at(&hh2);
    wait_for("both nodes up at the hub", 30, || (states(&hub) == both("up", "up")).then_some(()));
    wait_for("both nodes up at the second hub", 30, || (states(&hub2) == both("up", "up")).then_some(()));
    let known_up = now_ms();
    assert!(home_node_events(&hh).is_empty());
    // The hub goes (killed, as a machine fails). Beta dies, long enough
    // before the hub is back for its lease to expire; alpha dies later:
    // its last beat is in the bucket, old, when the hub starts.
    kill_all(&mut hub);
    kill_all(&mut hub2);
    let beta_killed = now_ms();
    kill_all(&mut beta);
    std::thread::sleep(Duration::from_secs(18));
    let alpha_killed = now_ms();
    kill_all(&mut alpha);
    wait_for("beta's lease to expire", 60, || nodes(&nats.url).iter().all(|n| n["node"] != "beta").then_some(()));
    let listed = nodes(&nats.url);
    assert!(listed.iter().any(|n| n["node"] == "alpha" && n["state"] == "lost"), "alpha's beat, old: {listed:?}");
    // Back: both said lost, once, in the hub's home's feed and in the stream.
    let back = Instant::now();
    let hub = start_hub();
    wait_for("both nodes lost at the hub", 20, || (states(&hub) == both("lost", "lost")).then_some(()));
    let said = wait_for("two node events in the hub's home's feed", 10, || {
        let s = home_node_events(&hh);
        (s.len() >= 2).then_some(s)
    });
    eprintln!("nodes: both said lost in the hub's home's feed {:?} after the hub's start", back.elapsed());
    let (a, b) = (&said.iter().find(|e| e.0 == "alpha"), &said.iter().find(|e| e.0 == "beta"));
    let (a, b) = (a.unwrap_or_else(|| panic!("{said:?}")), b.unwrap_or_else(|| panic!("{said:?}")));
    assert_eq!((said.len(), a.1.as_str(), b.1.as_str()), (2, "lost", "lost"), "{said:?}");
    // Alpha since its last beat; beta since the hub last knew it up (its
    // last beat came later: nobody saw when), never after its death.
    assert!(a.2 <= alpha_killed && a.2 + 5_000 > alpha_killed, "alpha lost since {} (killed at {alpha_killed})", a.2);
    assert!(
        b.2 <= beta_killed && b.2 + 30_000 >= known_up,
        "beta lost since {} (known up {known_up}, killed {beta_killed})",
        b.2
    );
    let listed = hub.get_json("/runs");
    let r = listed["runs"].as_array().unwrap().iter().find(|r| r["runId"] == id_b).unwrap().clone();
    assert_eq!(r["nodeLostSince"].as_u64(), Some(b.2), "{r}");
    let streamed = wait_for("both in the feed stream", 10, || {
        let s = streamed_node_events(&nats.url);
        (s.len() >= 2).then_some(s)
    });
    let mut sorted = streamed.clone();
    sorted.sort();
    assert_eq!(sorted, [("alpha".into(), "lost".into()), ("beta".into(), "lost".into())], "{streamed:?}");
    // Another hub (its own home) back later says it in its home's feed,
    // but not again in the stream, where the first said it: beta's loss,
    // judged on no beat, has another id at each hub.
    let hub2 = start_hub_at(&hh2);
    wait_for("both nodes lost at the second hub", 20, || (states(&hub2) == both("lost", "lost")).then_some(()));
    let said2 = wait_for("two node events in the second hub's home's feed", 10, || {
        let s = home_node_events(&hh2);
        (s.len() >= 2).then_some(s)
    });
    assert_eq!(said2.iter().filter(|e| e.1 == "lost").count(), 2, "{said2:?}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(streamed_node_events(&nats.url).len(), 2, "said again in the stream");
    drop(hub2);
    // A restart that finds nothing new says nothing, here or in the stream.
    drop(hub);
    let hub = start_hub();
    wait_for("both nodes lost at the restarted hub", 20, || (states(&hub) == both("lost", "lost")).then_some(()));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(home_node_events(&hh), said, "said again");
    assert_eq!(streamed_node_events(&nats.url).len(), 2, "said again in the stream");
    // Alpha comes back while the hub is down: up, said at the hub's start.
    drop(hub);
    let _alpha = start_node(&ha, &aa);
    wait_for("alpha's lease taken again", 20, || {
        nodes(&nats.url).into_iter().find(|n| n["node"] == "alpha" && n["state"] == "up")
    });
    let hub = start_hub();
    wait_for("alpha up at the hub", 20, || (states(&hub) == both("up", "lost")).then_some(()));
    let said = wait_for("alpha's up in the hub's home's feed", 10, || {
        let s = home_node_events(&hh);
        (s.len() >= 3).then_some(s)
    });
    assert_eq!((said.len(), said[2].0.as_str(), said[2].1.as_str()), (3, "alpha", "up"), "{said:?}");
    wait_for("alpha's up in the stream", 10, || {
        let s = streamed_node_events(&nats.url);
        (s.len() == 3 && s[2] == ("alpha".into(), "up".into())).then_some(())
    });
    // Beta back while no hub watches: the stream's last word on it is the
    // stale `lost`. A hub with a new home says nothing of a node up (news
    // only when lost), and when beta dies again, it says so in the stream,
    // whatever the stream's last word was: a change seen live is published.
    drop(hub);
    let mut beta = start_node(&hb, &ab);
    wait_for("beta's lease taken again", 20, || {
        nodes(&nats.url).into_iter().find(|n| n["node"] == "beta" && n["state"] == "up")
    });
    let hh3 = dir.join("home-hub3");
    let hub3 = start_hub_at(&hh3);
    wait_for("both nodes up at a new hub", 20, || (states(&hub3) == both("up", "up")).then_some(()));
    kill_all(&mut beta);
    wait_for("beta lost at the new hub", 15, || (states(&hub3).1.as_deref() == Some("lost")).then_some(()));
    let streamed = wait_for("beta's second loss in the stream", 10, || {
        let s = streamed_node_events(&nats.url);
        (s.len() >= 4).then_some(s)
    });
    assert_eq!(streamed.len(), 4, "{streamed:?}");
    assert_eq!(streamed[3], ("beta".into(), "lost".into()), "{streamed:?}");
    let said3: Vec<_> = home_node_events(&hh3).into_iter().map(|e| (e.0, e.1)).collect();
    assert_eq!(said3, [("beta".to_string(), "lost".to_string())]);
}
