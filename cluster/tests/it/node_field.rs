//! A hub's listing names each run's node (`GET /runs` → `node`, and
//! `?node=NAME`), and a node publishes what its agents write when inotify
//! says so, not at its next full look: nodes here run with the longest
//! `--poll-ms` (60 s), and every line must reach a client of the hub
//! before that first safety-net look could have come.
//!
//! On a 3-server NATS JetStream cluster on loopback (as tests/cluster.rs).
//! Needs `nats-server` (the one skip rule: tests/support/tools.rs) and
//! `runwire-serve` built next to `runwire-cluster`.

#[path = "../../tests/support/tools.rs"]
mod tools;

use runwire::runs::registry::{NewRun, Pointer, Registry};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn need_nats() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if let Some(why) = tools::missing(&root, tools::tool("nats-server")) {
        panic!("needs nats-server: apt-get install nats-server: {why} (CI set, or run with --ignored)");
    }
}

fn cluster_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runwire-cluster"))
}

fn serve_bin() -> PathBuf {
    let p = cluster_bin().with_file_name("runwire-serve");
    assert!(p.is_file(), "{} is not built: `cargo build --bin runwire-serve` first", p.display());
    p
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed (by its own pid) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Three nats-servers clustered on loopback, JetStream on, set up with 3 replicas.
fn nats(dir: &Path) -> (Vec<Proc>, String) {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let cports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let servers = (0..3)
        .map(|i| {
            let routes: Vec<String> =
                (0..3).filter(|j| *j != i).map(|j| format!("nats://127.0.0.1:{}", cports[j])).collect();
            let log = std::fs::File::create(dir.join(format!("nats-{i}.log"))).unwrap();
            Proc(
                Command::new("nats-server")
                    .args(["-a", "127.0.0.1", "-p", &ports[i].to_string(), "-n", &format!("s{i}"), "-js", "-sd"])
                    .arg(dir.join(format!("js-{i}")))
                    .args(["--cluster_name", "rwnode", "--cluster", &format!("nats://127.0.0.1:{}", cports[i])])
                    .args(["--routes", &routes.join(",")])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .expect("start nats-server"),
            )
        })
        .collect();
    let url = ports.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    wait_for("the cluster's streams (setup)", 60, || {
        let out = Command::new(cluster_bin()).args(["setup", "--url", &url, "--replicas", "3"]).output().unwrap();
        out.status.success().then_some(())
    });
    (servers, url)
}

/// A runwire-serve on a free port; its first stdout line says where.
struct Serve {
    _proc: Proc,
    port: u16,
}

impl Serve {
    fn start(home: &Path, extra: &[&str]) -> Serve {
        let mut child = Command::new(serve_bin())
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .env("HARNESS_HOME", home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        Serve { port: port.unwrap_or_else(|| panic!("runwire-serve said {line:?}")), _proc: Proc(child) }
    }

    fn get(&self, path: &str) -> (u16, Vec<u8>) {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(c, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        let i = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
        let code = String::from_utf8_lossy(&raw[..i]).split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
        (code, raw[i + 4..].to_vec())
    }

    fn json(&self, path: &str) -> Value {
        let (code, body) = self.get(path);
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    /// Follows a task stream: each event's JSON, as it comes, on the channel.
    fn follow(&self, path: &str) -> mpsc::Receiver<Value> {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(c, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(c).lines() {
                let Ok(line) = line else { return };
                if let Some(ev) = line.strip_prefix("data: ").and_then(|d| serde_json::from_str(d).ok()) {
                    if tx.send(ev).is_err() {
                        return;
                    }
                }
            }
        });
        rx
    }
}

fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

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
        &dir.join(format!("{slug}.jsonl")),
        &runwire::runs::journal::Record::task("runner", "t", "leased", None),
    )
    .unwrap();
    p
}

fn node(url: &str, name: &str, home: &Path) -> Proc {
    // The longest safety-net interval: only inotify can wake it before 60 s.
    Proc(
        Command::new(cluster_bin())
            .args(["node", "--url", url, "--node", name, "--poll-ms", "60000", "--home"])
            .arg(home)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
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
    need_nats();
    let dir = std::env::temp_dir().join(format!("rw-node-field-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (servers, url) = nats(&dir);
    let (ha, hb, hh) = (dir.join("home-a"), dir.join("home-b"), dir.join("home-hub"));
    let a1 = run(&ha, &dir.join("repo-a"), "live");
    let b1 = run(&hb, &dir.join("repo-b"), "one");
    let b2 = run(&hb, &dir.join("repo-b2"), "two.x");
    let started = Instant::now();
    let _na = node(&url, "alpha", &ha);
    let _nb = node(&url, "beta", &hb);
    let hub = Serve::start(&hh, &["--cluster", &url, "--hub"]);
    let hub_id = |n: &str, p: &Pointer| runwire_cluster::names::hub_run_id(n, &p.run_id);
    let mut want = vec![
        ("alpha".to_string(), hub_id("alpha", &a1)),
        ("beta".to_string(), hub_id("beta", &b1)),
        ("beta".to_string(), hub_id("beta", &b2)),
    ];
    want.sort();
    // Every run, each with its node.
    let all = wait_for("the three runs at the hub", 30, || {
        let l = hub.json("/runs");
        (ids(&l) == want).then_some(l)
    });
    assert_eq!(all["total"], 3, "{all}");
    // Only one node's runs, paged as any listing is.
    let beta = hub.json("/runs?node=beta&limit=1");
    assert_eq!((beta["total"].as_u64(), beta["runs"].as_array().unwrap().len()), (Some(2), 1), "{beta}");
    assert_eq!(beta["runs"][0]["node"], "beta");
    let cursor = beta["next"].as_str().expect("a next page").to_string();
    let rest = hub.json(&format!("/runs?node=beta&limit=1&cursor={cursor}"));
    assert_eq!(rest["runs"].as_array().unwrap().len(), 1);
    assert_eq!(rest["runs"][0]["node"], "beta");
    assert_ne!(rest["runs"][0]["runId"], beta["runs"][0]["runId"]);
    assert_eq!(ids(&hub.json("/runs?node=alpha")), want[..1]);
    assert_eq!(ids(&hub.json("/runs?node=alpha&status=running")), want[..1]);
    let none = hub.json("/runs?node=gamma");
    assert_eq!((none["total"].as_u64(), none["runs"].as_array().unwrap().len()), (Some(0), 0));
    let (code, body) = hub.get("/runs?node=al.pha");
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    // A server that is not a hub: no node field, and no node filter.
    let local = Serve::start(&ha, &[]);
    let own = local.json("/runs");
    assert!(own["runs"][0].get("node").is_none(), "{own}");
    let (code, body) = local.get("/runs?node=alpha");
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("only a hub"), "{}", String::from_utf8_lossy(&body));

    // Lines written on alpha reach a client of the hub, one by one, before
    // the node's first full look after its start (60 s) could have come.
    let events = hub.follow(&format!("/runs/{}/tasks/t/stream", hub_id("alpha", &a1)));
    let log = PathBuf::from(&a1.runstate_dir).join("live.t.log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let head = [
        serde_json::json!({"type": "system", "subtype": "init", "cwd": "/", "session_id": SESSION, "model": "m", "tools": []}),
        serde_json::json!({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": null, "event": {
            "type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [], "model": "m"}}}),
        serde_json::json!({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": null, "event": {
            "type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}}),
    ];
    for h in head {
        f.write_all(claude(&h.to_string()).as_bytes()).unwrap();
    }
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
        ids(&hub.json("/runs?node=alpha")).iter().any(|(_, id)| *id == hub_id("alpha", &a2)).then_some(())
    });
    assert!(started.elapsed() < Duration::from_secs(58), "the new run came after {:?}", started.elapsed());
    drop((hub, local, servers));
    let _ = std::fs::remove_dir_all(&dir);
}
