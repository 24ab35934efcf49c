//! The cluster end to end: a 3-server NATS JetStream cluster on loopback
//! (streams and buckets with 3 replicas), nodes with their own harness
//! homes, and a hub. Needs `nats-server` (the one skip rule:
//! tests/support/tools.rs; `.ci/run` installs it) and `runwire-serve`
//! built next to `runwire-cluster` (`cargo test --workspace` builds both).

#[path = "../../tests/support/tools.rs"]
mod tools;

use runwire_cluster::names;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NEEDS: &str = "needs nats-server: apt-get install nats-server";

/// Fails the test unless nats-server is on PATH (the test is ignored
/// without it outside CI: see `tools.rs`).
fn need_nats() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if let Some(why) = tools::missing(&root, tools::tool("nats-server")) {
        panic!("{NEEDS}: {why} (CI set, or run with --ignored)");
    }
}

fn cluster_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runwire-cluster"))
}

fn serve_bin() -> PathBuf {
    let p = cluster_bin().with_file_name("runwire-serve");
    assert!(
        p.is_file(),
        "{} is not built: run the cluster tests with `cargo test --workspace` (or `cargo build --bin runwire-serve` first)",
        p.display()
    );
    p
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rw-cluster-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed (by its own pid) when dropped.
struct Proc(Child);

impl Proc {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three nats-servers clustered on loopback, JetStream on.
struct Nats {
    servers: Vec<Proc>,
    /// Every server's URL, comma-separated, and each one's.
    url: String,
    urls: Vec<String>,
    dir: PathBuf,
    ports: Vec<u16>,
    cports: Vec<u16>,
}

impl Nats {
    fn start(dir: &Path) -> Nats {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let cports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let urls: Vec<String> = ports.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect();
        let mut n = Nats { servers: Vec::new(), url: urls.join(","), urls, dir: dir.to_path_buf(), ports, cports };
        n.servers = (0..3).map(|i| n.server(i)).collect();
        // Ready when the streams and buckets can be made with 3 replicas.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = Command::new(cluster_bin()).args(["setup", "--url", &n.url, "--replicas", "3"]).output().unwrap();
            if out.status.success() {
                break;
            }
            assert!(Instant::now() < deadline, "setup never succeeded: {}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(Duration::from_millis(500));
        }
        n
    }

    /// Server `i` (again: same ports, same store).
    fn server(&self, i: usize) -> Proc {
        let routes: Vec<String> =
            (0..3).filter(|j| *j != i).map(|j| format!("nats://127.0.0.1:{}", self.cports[j])).collect();
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("nats-{i}.log"))).unwrap();
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &self.ports[i].to_string(), "-n", &format!("s{i}"), "-js"])
            .arg("-sd")
            .arg(self.dir.join(format!("js-{i}")))
            .args(["--cluster_name", "rwtest", "--cluster", &format!("nats://127.0.0.1:{}", self.cports[i])])
            .args(["--routes", &routes.join(",")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nats-server");
        Proc(child)
    }
}

fn node(url: &str, name: &str, home: &Path) -> Proc {
    Proc(
        Command::new(cluster_bin())
            .args(["node", "--url", url, "--node", name, "--poll-ms", "50", "--home"])
            .arg(home)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
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
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("runwire-serve said {line:?}"));
        Serve { _proc: Proc(child), port }
    }

    fn request(&self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(
            c,
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        let i = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
        let code = String::from_utf8_lossy(&raw[..i]).split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
        (code, raw[i + 4..].to_vec())
    }

    fn get_json(&self, path: &str) -> Value {
        let (code, body) = self.request("GET", path, "");
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    /// A finished task's stream: its `id:` and `data:` lines (comments
    /// such as keep-alives left out), to its end.
    fn stream(&self, path: &str) -> Vec<String> {
        let (code, body) = self.request("GET", path, "");
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        String::from_utf8(body)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("id:") || l.starts_with("data:"))
            .map(str::to_string)
            .collect()
    }
}

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

/// The child processes of `pid` (every thread's).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(kids.split_whitespace().filter_map(|k| k.parse::<u32>().ok()));
    }
    out
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

fn run_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> =
        list["runs"].as_array().unwrap().iter().map(|r| r["runId"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_hub_lists_every_node_run_and_serves_their_task_streams_as_the_nodes_do() {
    need_nats();
    let dir = scratch("hub");
    let nats = Nats::start(&dir);
    let (ha, hb, hh) = (dir.join("home-a"), dir.join("home-b"), dir.join("home-hub"));
    let a = Serve::start(&ha, &["--cluster", &nats.url, "--node", "alpha"]);
    let b = Serve::start(&hb, &["--cluster", &nats.url, "--node", "beta"]);
    let hub = Serve::start(&hh, &["--cluster", &nats.url, "--hub"]);
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
    let sidecars = children(a._proc.0.id());
    assert_eq!(sidecars.len(), 1, "{sidecars:?}");
    drop(a);
    wait_for("alpha's sidecar to end with its server", 10, || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", sidecars[0])).unwrap_or_default();
        // Gone, or a zombie nobody has reaped yet.
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    });
    drop((b, hub, nats));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every message of `stream` whose subject starts with `prefix`, in order:
/// (subject, headers as pairs, payload).
fn messages(url: &str, stream: &str, prefix: &str) -> Vec<(String, BTreeMap<String, String>, Vec<u8>)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let urls: Vec<&str> = url.split(',').collect();
        let client = async_nats::connect(urls.as_slice()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let s = js.get_stream(stream).await.unwrap();
        let info = s.get_info().await.unwrap();
        let mut out = Vec::new();
        for seq in info.state.first_sequence..=info.state.last_sequence {
            let Ok(m) = s.get_raw_message(seq).await else { continue };
            if !m.subject.as_str().starts_with(prefix) {
                continue;
            }
            let h = m.headers.iter().map(|(k, v)| (k.to_string(), v[0].as_str().to_string())).collect();
            out.push((m.subject.to_string(), h, m.payload.to_vec()));
        }
        out
    })
}

/// The ids of a feed log's events: the offset past each line.
fn feed_ids(home: &Path) -> Vec<u64> {
    let log = std::fs::read(home.join("feed/events.log")).unwrap_or_default();
    log.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i as u64 + 1).collect()
}

/// A run written by runwire's own code (pointer, journal link, journal
/// records), whose task `impl.1` is written by [`Agent`].
struct FakeRun {
    pointer: runwire::runs::registry::Pointer,
    dir: PathBuf,
}

const FILES: [&str; 3] = ["feat.x.jsonl", "feat.x.impl.1.log", "feat.x.impl.1.log.at"];

impl FakeRun {
    fn new(home: &Path, repo: &Path) -> FakeRun {
        use runwire::runs::journal::{self, Record};
        use runwire::runs::registry::{NewRun, Registry};
        let new = NewRun { slug: "feat.x".into(), repo_root: repo.display().to_string(), ..Default::default() };
        let pointer = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
        let dir = PathBuf::from(&pointer.runstate_dir);
        std::fs::create_dir_all(&dir).unwrap();
        Registry::at(home).register(&pointer).unwrap();
        journal::append(&dir.join("feat.x.jsonl"), &Record::task("runner", "impl.1", "leased", None)).unwrap();
        FakeRun { pointer, dir }
    }

    fn journal(&self, state: &str) {
        use runwire::runs::journal::{self, Record};
        let rc = (state == "committed").then_some(0);
        journal::append(&self.dir.join("feat.x.jsonl"), &Record::task("runner", "impl.1", state, rc)).unwrap();
    }

    /// The agent: `lines` log lines a few ms apart, each with its arrival
    /// time first (as runwire's writers do), a journal record every 100;
    /// `at(i)` runs after line `i` (faults). Then the task and run end.
    fn agent(&self, lines: u64, mut at: impl FnMut(u64)) {
        use runwire::runs::journal::{self, Record};
        let open = |f: &str| std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(f)).unwrap();
        let (mut logf, mut atf) = (open("feat.x.impl.1.log"), open("feat.x.impl.1.log.at"));
        for i in 1..=lines {
            writeln!(atf, "{i} {}", 1_700_000_000_000u64 + i).unwrap();
            writeln!(logf, r#"{{"type":"assistant","n":{i},"pad":"{}"}}"#, "x".repeat((i % 7) as usize * 40)).unwrap();
            if i % 100 == 0 {
                self.journal("implemented");
            }
            at(i);
            std::thread::sleep(Duration::from_millis(3));
        }
        self.journal("committed");
        journal::append(&self.dir.join("feat.x.jsonl"), &Record::run("runner", "finished")).unwrap();
    }

    /// Waits until the hub's mirror of the run equals the node's files, byte for byte.
    fn mirrored(&self, hub_home: &Path, node: &str) {
        let mirror = hub_home.join("cluster/nodes").join(node).join(&self.pointer.run_id);
        wait_for("the hub's mirror to equal the node's files", 90, || {
            FILES
                .iter()
                .all(|f| std::fs::read(mirror.join(f)).ok() == std::fs::read(self.dir.join(f)).ok())
                .then_some(())
        });
        let id = names::hub_run_id(node, &self.pointer.run_id);
        assert!(hub_home.join("runs").join(format!("{id}.json")).is_file());
    }

    /// In the stream, each file is one series of contiguous chunks: no
    /// byte published twice, none missing; and the node's feed is in the
    /// feed stream once, in order.
    fn published_once(&self, url: &str, home: &Path, node: &str) {
        let chunks = messages(url, names::FILES_STREAM, &format!("rwfile.{node}."));
        let mut next: BTreeMap<String, u64> = BTreeMap::new();
        for (subject, h, payload) in &chunks {
            let off: u64 = h["Rw-Offset"].parse().unwrap();
            let want = next.entry(subject.clone()).or_insert(0);
            assert_eq!(off, *want, "{subject}: a chunk at {off}, expected {want} (duplicated or lost bytes)");
            *want += payload.len() as u64;
        }
        for f in FILES {
            let subject = names::file_subject(node, &self.pointer.run_id, f);
            assert_eq!(next.get(&subject).copied(), Some(std::fs::metadata(self.dir.join(f)).unwrap().len()), "{f}");
        }
        let want = feed_ids(home);
        let got = wait_for("the whole feed in the stream", 30, || {
            let got: Vec<u64> = messages(url, names::FEED_STREAM, &names::feed_subject(node))
                .iter()
                .map(|(_, h, _)| h["Rw-Id"].parse().unwrap())
                .collect();
            (got.len() >= want.len()).then_some(got)
        });
        assert_eq!(got, want, "the feed stream is not the node's feed, once and in order");
        assert!(want.len() >= 8, "{want:?}");
    }
}

fn hub_proc(url: &str, home: &Path) -> Proc {
    Proc(
        Command::new(cluster_bin())
            .args(["hub", "--url", url, "--home"])
            .arg(home)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_killed_mid_run_catches_up_with_nothing_lost_or_duplicated() {
    need_nats();
    let dir = scratch("restart");
    let nats = Nats::start(&dir);
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let run = FakeRun::new(&home, &dir.join("repo"));
    let _hub = hub_proc(&nats.url, &hh);
    let mut n = Some(node(&nats.url, "gamma", &home));
    run.agent(600, |i| match i {
        // Killed (SIGKILL) mid-run, mid-publish; the agent goes on.
        200 => n = None,
        // Back: it resumes from the cluster's position.
        400 => n = Some(node(&nats.url, "gamma", &home)),
        _ => {}
    });
    run.mirrored(&hh, "gamma");
    run.published_once(&nats.url, &home, "gamma");
    drop(n);
    drop(nats);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_nats_server_and_the_hub_killed_mid_stream_lose_and_duplicate_nothing() {
    need_nats();
    let dir = scratch("faults");
    let mut nats = Nats::start(&dir);
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let run = FakeRun::new(&home, &dir.join("repo"));
    // The node knows only server 0 (it learns the others from it), so
    // killing server 0 takes its connection for certain.
    let _n = node(&nats.urls[0], "delta", &home);
    let mut hub = Some(hub_proc(&nats.url, &hh));
    let rest = nats.urls[1..].join(",");
    run.agent(700, |i| match i {
        150 => hub = None,
        250 => nats.servers[0].kill(),
        500 => hub = Some(hub_proc(&rest, &hh)),
        _ => {}
    });
    run.mirrored(&hh, "delta");
    run.published_once(&rest, &home, "delta");
    drop(hub);
    drop(nats);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_cut_from_the_cluster_while_its_agent_works_catches_up_in_order() {
    need_nats();
    let dir = scratch("cut");
    let mut nats = Nats::start(&dir);
    let (home, hh) = (dir.join("home"), dir.join("home-hub"));
    let run = FakeRun::new(&home, &dir.join("repo"));
    let _n = node(&nats.url, "eps", &home);
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
    run.mirrored(&hh, "eps");
    run.published_once(&nats.url, &home, "eps");
    // 600 lines of the agent's, a few ms apart, while no server was up.
    assert!(gone > Duration::from_millis(1800), "the cluster was gone for {gone:?} only");
    drop(nats);
    let _ = std::fs::remove_dir_all(&dir);
}
