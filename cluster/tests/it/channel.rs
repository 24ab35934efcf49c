//! The channel between runwire-serve and its one sidecar, and what rides
//! on it (issue 34, defects 3 and 5; issue 37, item 4), on a real 3-server
//! JetStream cluster:
//!
//! - a command posted at a hub while the node's sidecar is stopped for
//!   longer than its budget answers 504, and never runs when the sidecar
//!   resumes (a kill and a steer); a key runs once, across retries and a
//!   restart of the node's sidecar;
//! - fifty feed clients at a hub (the token in their query, as the studio's
//!   EventSource sends it) are served by the hub's one sidecar: no process
//!   per client, no secret or body on any command line, every client gets
//!   every event once (older ones from the stream, recent ones from the
//!   window, new ones live); an answer of nearly 1 MiB (more than a command
//!   line or one NATS message carries) is forwarded; the hub exits within 1 s of SIGTERM and leaves
//!   nothing behind, and after SIGKILL its sidecar goes too.
//!
//! `cargo test -p runwire-cluster --test it channel::`.

use crate::common::*;
use crate::hub_studio::{agent_input, agui_until, beta_asking, sidecar_of};
use serde_json::{json, Value};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every line of beta's session journals and agent input that holds `text`.
fn traces(dir: &Path, text: &str) -> usize {
    let mut n = agent_input(dir).iter().filter(|l| l.to_string().contains(text)).count();
    if let Ok(rd) = std::fs::read_dir(dir.join("home-beta/serve/runstate")) {
        for e in rd.flatten() {
            // Lossy: a file read while its writer appends may end inside a
            // character, and a strict read would then count nothing at all.
            let s = std::fs::read(e.path()).unwrap_or_default();
            n += String::from_utf8_lossy(&s).lines().filter(|l| l.contains(text)).count();
        }
    }
    n
}

/// POST at `srv` with `headers`: status and body.
fn post(srv: &Serve, path: &str, headers: &str, body: &str) -> (u16, String) {
    let mut c = srv.send("POST", path, headers, body);
    c.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    (head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap(), body.to_string())
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hubs_504_means_never_run_and_a_key_runs_once_across_a_node_restart() {
    let (dir, nats) = nats_cluster("channel-budget");
    // A session on beta whose agent works on (its turn never ends), its client still there.
    let b = beta_asking(&dir, &nats.url, "[]");
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub"], &[]);
    let first = run_input("tk", "rk", "work on", Value::Null, json!({"node": "beta"}));
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

    // beta's sidecar stopped for longer than a command's 5 s budget: a kill
    // and a steer posted at the hub are 504, and stay undone when it resumes.
    let pid = sidecar_of(&b);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let kill = post(&hub, &format!("{task}/kill"), "", "");
    let steer = post(&hub, &format!("{task}/steer"), "", r#"{"msg":"steer-while-stopped"}"#);
    let waited = t.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!(kill.0, 504, "{kill:?}");
    assert_eq!(steer.0, 504, "{steer:?}");
    assert!(kill.1.contains("beta") && kill.1.contains("will not run"), "{kill:?}");
    assert!(waited < Duration::from_secs(14), "{waited:?}");
    // The resumed sidecar reads both, asks the hub, and runs neither.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(traces(&dir, "steer-while-stopped"), 0, "a steer the hub answered 504 for ran");
    // (the kill did not run either: the session still takes a steer, with a key of the studio's)
    let key = "Idempotency-Key: click-1\r\n";
    let once = post(&hub, &format!("{task}/steer"), key, r#"{"msg":"steer-once"}"#);
    assert_eq!(once.0, 200, "{once:?}");
    let n = wait_for("the steer at beta", 10, || Some(traces(&dir, "steer-once")).filter(|n| *n > 0));
    // The same key again (a retry, a second hub): the first answer, nothing done twice.
    let again = post(&hub, &format!("{task}/steer"), key, r#"{"msg":"steer-once"}"#);
    assert_eq!(again, once);
    // ... also after the node's sidecar restarted (its keys are on disk).
    let old = sidecar_of(&b);
    nix::sys::signal::kill(old, nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_for("beta's new sidecar", 30, || {
        let c: Vec<u32> = children(b.proc.0.id());
        c.iter()
            .any(|p| {
                *p as i32 != old.as_raw()
                    && std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e.ends_with("runwire-cluster"))
            })
            .then_some(())
    });
    let after = wait_for("the retry answered by the restarted node", 60, || {
        let a = post(&hub, &format!("{task}/steer"), key, r#"{"msg":"steer-once"}"#);
        (a.0 != 503).then_some(a)
    });
    assert_eq!(after, once);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(traces(&dir, "steer-once"), n, "a key ran twice");
    let keys = std::fs::read_to_string(dir.join("home-beta/cluster/control-keys.jsonl")).unwrap();
    assert!(keys.contains("click-1"), "{keys}");
    drop((b, hub, nats));
}

/// The pids of `pid`'s descendants.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in std::fs::read_dir(format!("/proc/{p}/task")).map(|_| children(p)).unwrap_or_default() {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// Every process's command line that contains `needle`.
fn argv_with(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            if line.contains(needle) {
                out.push(format!("{}: {line}", e.file_name().to_string_lossy()));
            }
        }
    }
    out
}

/// A feed client: its connection, reading into `raw` (its message ids counted by [`Feed::ids`]).
struct Feed {
    c: std::net::TcpStream,
    raw: Vec<u8>,
}

impl Feed {
    fn open(srv: &Serve, token: &str, last: u64) -> Feed {
        let c = srv.send("GET", &format!("/runs/events?token={token}"), &format!("Last-Event-ID: {last}\r\n"), "");
        c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        Feed { c, raw: Vec::new() }
    }

    fn pump(&mut self) {
        let mut buf = [0u8; 65536];
        while let Ok(n) = self.c.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.raw.extend_from_slice(&buf[..n]);
        }
    }

    /// The ids of its event frames (not `ready`) so far.
    fn ids(&self) -> Vec<u64> {
        String::from_utf8_lossy(&self.raw)
            .split("\n\n")
            .filter(|f| f.contains("data: {") && !f.contains("event:"))
            .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("id: ")).and_then(|i| i.trim().parse().ok()))
            .collect()
    }
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn fifty_feed_clients_at_a_hub_share_its_one_sidecar_and_nothing_secret_is_on_a_command_line() {
    let (dir, nats) = nats_cluster("channel-fifty");
    let token = format!("the-hubs-token-{}", std::process::id());
    std::fs::write(dir.join("token"), &token).unwrap();
    let tf = dir.join("token").display().to_string();
    let a = Serve::start(&dir.join("home-alpha"), &["--cluster", &nats.url, "--node", "alpha"], &[]);
    // Before the hub starts: events only the stream has.
    let (code, _) = a.request("POST", "/agui", &run_input("ta", "ra", "hi", Value::Null, json!({})));
    assert_eq!(code, 200);
    let node_ids = |want: usize| {
        wait_for("the node's events in the stream", 60, || {
            let out = std::process::Command::new(cluster_bin())
                .args(["feed", "--url", &nats.url, "--since", "0"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let pid = out.id();
            std::thread::sleep(Duration::from_millis(1500));
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
            let text = String::from_utf8_lossy(&out.wait_with_output().unwrap().stdout).to_string();
            let ids: Vec<u64> = text
                .split("\n\n")
                .filter(|f| f.contains("data: {") && !f.contains("event:"))
                .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("id: ")).and_then(|i| i.parse().ok()))
                .collect();
            (ids.len() >= want).then_some(ids)
        })
    };
    let before = node_ids(2);
    let hub = Serve::start(&dir.join("home-hub"), &["--cluster", &nats.url, "--hub", "--token-file", &tf], &[]);
    // After: events the hub's window holds.
    let (code, _) = a.request("POST", "/agui", &run_input("tb", "rb", "hi", Value::Null, json!({})));
    assert_eq!(code, 200);
    let all = node_ids(before.len() + 2);
    std::thread::sleep(Duration::from_secs(1));

    // Fifty clients, from the start of the stream.
    let mut feeds: Vec<Feed> = (0..50).map(|_| Feed::open(&hub, &token, 0)).collect();
    wait_for("every client to have every event", 60, || {
        feeds.iter_mut().for_each(Feed::pump);
        feeds.iter().all(|f| f.ids().len() >= all.len()).then_some(())
    });
    for f in &feeds {
        assert_eq!(f.ids(), all, "a client's events are not the stream's, once and in order");
    }
    // One process for all of them: the hub's sidecar, and no secret or query on any argv.
    let kids = descendants(hub.proc.0.id());
    assert_eq!(kids.len(), 1, "the hub's processes: {kids:?}");
    assert!(argv_with(&token).is_empty(), "{:?}", argv_with(&token));
    let argv =
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{}/cmdline", kids[0])).unwrap()).replace('\0', " ");
    assert!(argv.contains(" hub ") && argv.ends_with("--channel "), "{argv}");
    assert!(!argv.contains("--query") && !argv.contains("--body") && !argv.contains("token="), "{argv}");
    // A new event reaches every client live; a client resuming mid-window gets exactly the rest.
    let (code, _) = a.request("POST", "/agui", &run_input("tc", "rc", "hi", Value::Null, json!({})));
    assert_eq!(code, 200);
    let more = node_ids(all.len() + 2);
    wait_for("the new events at every client", 60, || {
        feeds.iter_mut().for_each(Feed::pump);
        feeds.iter().all(|f| f.ids().len() >= more.len()).then_some(())
    });
    assert!(feeds.iter().all(|f| f.ids() == more));
    let mid = more[before.len()];
    let mut late = Feed::open(&hub, &token, mid);
    let rest: Vec<u64> = more.iter().copied().filter(|i| *i > mid).collect();
    wait_for("a resumed client's events", 30, || {
        late.pump();
        (late.ids().len() >= rest.len()).then_some(())
    });
    assert_eq!(late.ids(), rest);

    // An answer larger than a command line carries: forwarded whole, answered by the node's own route.
    // (nearly the routes' 1 MiB: more than one NATS message of the default max_payload carries)
    let pad = "p".repeat(1_040_000);
    let big = json!({"request": "none", "behavior": "allow", "updatedInput": {"pad": pad}}).to_string();
    let own = post(&a, "/runs/nosuch/tasks/agent/answer", "", &big);
    let auth = format!("Authorization: Bearer {token}\r\n");
    let fwd = post(&hub, "/runs/alpha.nosuch/tasks/agent/answer", &auth, &big);
    assert_eq!(fwd, own, "the hub's answer is not the node's own");
    assert!(![413, 502, 503, 504].contains(&fwd.0), "{fwd:?}");

    // SIGTERM with fifty clients connected: the hub is gone within 1 s, and its sidecar with it.
    let sidecar = kids[0];
    let t = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(hub.proc.0.id() as i32), nix::sys::signal::Signal::SIGTERM)
        .unwrap();
    let mut hub = hub;
    wait_for("the hub to exit", 10, || hub.proc.0.try_wait().unwrap().map(|_| ()));
    let took = t.elapsed();
    assert!(took < Duration::from_secs(1), "the hub took {took:?} to exit");
    wait_for("the sidecar to be gone", 5, || (!Path::new(&format!("/proc/{sidecar}")).exists()).then_some(()));
    drop(feeds);

    // SIGKILL: nothing it started lives on.
    let hub2 = Serve::start(&dir.join("home-hub2"), &["--cluster", &nats.url, "--hub"], &[]);
    let kid = wait_for("hub 2's sidecar", 10, || descendants(hub2.proc.0.id()).first().copied());
    let _feeds: Vec<Feed> = (0..5).map(|_| Feed::open(&hub2, "", 0)).collect();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(descendants(hub2.proc.0.id()), [kid]);
    let mut hub2 = hub2;
    hub2.proc.kill();
    wait_for("hub 2's sidecar to be gone after SIGKILL", 5, || {
        let alive = std::fs::read_to_string(format!("/proc/{kid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| !r.trim_start().starts_with('Z')));
        (!alive).then_some(())
    });
    drop((a, nats));
}
