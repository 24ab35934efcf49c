//! What the cluster tests share, once: the skip rule for the tools they
//! need (tests/support/tools.rs), a 3-server NATS JetStream cluster on
//! loopback, `runwire-serve` processes (nodes and hubs) and `runwire-cluster`
//! sidecars, HTTP on loopback, the stream reader, and a run written by
//! runwire's own code whose fake agent writes a task's log.

#[path = "../../../tests/support/tools.rs"]
pub mod tools;

use runwire_cluster::names;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Fails the test unless every tool is here (the test is ignored without
/// them outside CI: see `tools.rs`); npm packages are installed with
/// `npm ci` when missing.
pub fn need(names: &[&str]) {
    for n in names {
        let t = tools::tool(n);
        if let Some(why) = tools::missing(&root(), t) {
            panic!("needs {n}: {why}; {} (CI set, or run with --ignored)", t.install);
        }
        if let Some((dir, marker)) = t.packages {
            if !root().join(dir).join(marker).is_file() {
                let st =
                    Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(root().join(dir)).status();
                assert!(st.is_ok_and(|s| s.success()), "npm ci in {dir} failed");
            }
        }
    }
}

pub fn cluster_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runwire-cluster"))
}

/// The root crate's binaries and examples a test runs, built once
/// (`cargo build`, into this target directory) when missing.
pub fn built(what: &str) -> PathBuf {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    let profile = cluster_bin().parent().unwrap().to_path_buf();
    let r = DONE.get_or_init(|| {
        let out = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "--bin",
                "runwire-serve",
                "--bin",
                "runs",
                "--bin",
                "runwire-supervise",
                "--bin",
                "runwire-session",
                "--example",
                "trust-agent",
                "--manifest-path",
            ])
            .arg(root().join("Cargo.toml"))
            .arg("--target-dir")
            .arg(profile.parent().unwrap())
            .output()
            .map_err(|e| e.to_string())?;
        out.status.success().then_some(()).ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
    });
    if let Err(e) = r {
        panic!("cargo build of runwire-serve, runwire-supervise and trust-agent failed: {e}");
    }
    let p = profile.join(what);
    assert!(p.is_file(), "{} is not built", p.display());
    p
}

/// A test's own directory, emptied: the tests share one process, so each
/// name is taken once (two tests with one name would share a directory).
pub fn scratch(name: &str) -> Scratch {
    static TAKEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    assert!(TAKEN.lock().unwrap().insert(name.to_string()), "scratch({name:?}) twice: give each test its own name");
    let d = std::env::temp_dir().join(format!("rw-cluster-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// A test's directory: removed when it is dropped after the test went
/// well, kept (the servers' logs, the homes) when the test failed.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A cluster test's start: nats-server here (see `need`), the test's
/// directory, and a 3-server cluster in it (dropped first: `let (dir, nats)`).
pub fn nats_cluster(name: &str) -> (Scratch, Nats) {
    need(&["nats-server"]);
    let dir = scratch(name);
    let nats = Nats::start(&dir);
    (dir, nats)
}

/// Runs `setup` until it succeeds: a new cluster elects its meta leader and
/// places replicated streams in its own time, which on a loaded 2-core
/// machine has taken over 60 s (clean-clone CI runs missed it at 60 s).
pub fn until_set_up(mut setup: impl FnMut() -> std::process::Output) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let out = setup();
        if out.status.success() {
            return;
        }
        assert!(Instant::now() < deadline, "setup never succeeded: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free ports: held all at once while chosen (ports taken one
/// by one and let go can repeat: a clean-clone CI run gave two servers of
/// one cluster the same route port, and the cluster never formed).
/// Nor is a port given twice in this process: a test that restarts its
/// servers on their ports would otherwise find one taken meanwhile by
/// another test's server, and route to that cluster.
pub fn free_ports(n: usize) -> Vec<u16> {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let mut held: Vec<TcpListener> = Vec::new();
    while held.len() < n {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        if given.insert(l.local_addr().unwrap().port()) {
            held.push(l);
        }
    }
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// A child process, killed (SIGKILL, by its own pid) when dropped.
pub struct Proc(pub Child);

impl Proc {
    /// SIGKILL: the process ends without a word.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// SIGTERM, then SIGKILL if it has not ended within 5 s.
    pub fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !matches!(self.0.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three nats-servers clustered on loopback, JetStream on, the streams and
/// buckets made with 3 replicas.
pub struct Nats {
    pub servers: Vec<Proc>,
    /// Every server's URL, comma-separated, and each one's.
    pub url: String,
    pub urls: Vec<String>,
    dir: PathBuf,
    ports: Vec<u16>,
    cports: Vec<u16>,
}

impl Nats {
    pub fn start(dir: &Path) -> Nats {
        // A server that cannot listen (a port another test took meanwhile)
        // exits at once: the cluster is started again on other ports.
        for attempt in 1.. {
            let mut ports = free_ports(6);
            let cports = ports.split_off(3);
            let urls: Vec<String> = ports.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect();
            let mut n = Nats { servers: Vec::new(), url: urls.join(","), urls, dir: dir.to_path_buf(), ports, cports };
            n.servers = (0..3).map(|i| n.server(i)).collect();
            // Ready when the streams and buckets can be made with 3 replicas.
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                if let Some(i) = n.servers.iter_mut().position(|s| s.0.try_wait().ok().flatten().is_some()) {
                    assert!(attempt < 3, "nats-server s{i} exited at start three times (see nats-{i}.log)");
                    break;
                }
                let out =
                    Command::new(cluster_bin()).args(["setup", "--url", &n.url, "--replicas", "3"]).output().unwrap();
                if out.status.success() {
                    return n;
                }
                assert!(Instant::now() < deadline, "setup never succeeded: {}", String::from_utf8_lossy(&out.stderr));
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// The cluster's name: its scratch directory's (unique in this run).
    fn name(&self) -> String {
        let d = self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("rwtest-{}", d.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-"))
    }

    /// Server `i` (again: same ports, same store), its log appended to `nats-<i>.log`.
    pub fn server(&self, i: usize) -> Proc {
        let routes: Vec<String> =
            (0..3).filter(|j| *j != i).map(|j| format!("nats://127.0.0.1:{}", self.cports[j])).collect();
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("nats-{i}.log"))).unwrap();
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &self.ports[i].to_string(), "-n", &format!("s{i}"), "-js"])
            .arg("-sd")
            .arg(self.dir.join(format!("js-{i}")))
            // A name of its own: a route to another test's server is refused, never merged.
            .args(["--cluster_name", &self.name(), "--cluster", &format!("nats://127.0.0.1:{}", self.cports[i])])
            .args(["--routes", &routes.join(",")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nats-server");
        Proc(child)
    }
}

/// One nats-server on the configuration `conf` (written to
/// `dir/<name>.conf`), its log in `dir/<log>`.
pub fn nats_server(dir: &Path, name: &str, conf: &str, log: &str) -> Proc {
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf).unwrap();
    let log = std::fs::File::create(dir.join(log)).unwrap();
    Proc(
        Command::new("nats-server")
            .arg("-c")
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nats-server"),
    )
}

/// `runwire-cluster node` publishing `home` as `name`, its full look every `poll_ms`.
pub fn node(url: &str, name: &str, home: &Path, poll_ms: u64) -> Proc {
    Proc(
        Command::new(cluster_bin())
            .args(["node", "--url", url, "--node", name, "--poll-ms", &poll_ms.to_string(), "--home"])
            .arg(home)
            .stdin(Stdio::null())
            // Its retries while servers are cut off: kept beside its home, not printed.
            .stderr(std::fs::File::create(home.with_extension("node-stderr")).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// A runwire-serve on a free port (its first stdout line says where), its
/// stderr in `<home>.stderr`; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Serve {
    pub proc: Proc,
    pub port: u16,
    pub stderr: PathBuf,
}

impl Serve {
    pub fn start(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let stderr = home.with_extension("stderr");
        let mut child = Command::new(built("runwire-serve"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("HARNESS_HOME", home)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("runwire-serve said {line:?}"));
        Serve { proc: Proc(child), port, stderr }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// A request (HTTP/1.0) sent, `headers` (each ending in CRLF) added:
    /// the connection, to read the answer from.
    pub fn send(&self, method: &str, path: &str, headers: &str, body: &str) -> TcpStream {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            c,
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        )
        .unwrap();
        c
    }

    /// One request (HTTP/1.0): the status and the body, to the end.
    pub fn request(&self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        self.request_with(method, path, "", body)
    }

    /// [`Serve::request`] with `headers` (each ending in CRLF).
    pub fn request_with(&self, method: &str, path: &str, headers: &str, body: &str) -> (u16, Vec<u8>) {
        let mut c = self.send(method, path, headers, body);
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        let i = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
        let code = String::from_utf8_lossy(&raw[..i]).split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
        (code, raw[i + 4..].to_vec())
    }

    /// One HTTP/1.1 request with no body, read to the server's close: the
    /// response's head and its body's raw bytes (chunked framing kept).
    pub fn request_http11(&self, method: &str, path: &str) -> (String, Vec<u8>) {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(c, "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        let i = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
        (String::from_utf8_lossy(&raw[..i]).into_owned(), raw[i + 4..].to_vec())
    }

    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let (code, body) = self.request("GET", path, "");
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    /// A finished task's stream: its `id:` and `data:` lines (comments
    /// such as keep-alives left out), to its end.
    pub fn stream(&self, path: &str) -> Vec<String> {
        self.stream_after(path, None)
    }

    /// [`Serve::stream`] resumed after the event `last_id` (`Last-Event-ID`).
    pub fn stream_after(&self, path: &str, last_id: Option<&str>) -> Vec<String> {
        let headers = last_id.map(|i| format!("Last-Event-ID: {i}\r\n")).unwrap_or_default();
        let mut c = self.send("GET", path, &headers, "");
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        let i = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
        let code = String::from_utf8_lossy(&raw[..i]).split(' ').nth(1).and_then(|c| c.parse::<u16>().ok()).unwrap();
        let body = raw[i + 4..].to_vec();
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        String::from_utf8(body)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("id:") || l.starts_with("data:"))
            .map(str::to_string)
            .collect()
    }

    /// Follows a task stream: each event's JSON, as it comes, on the channel.
    pub fn follow(&self, path: &str) -> mpsc::Receiver<serde_json::Value> {
        let c = self.send("GET", path, "", "");
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

impl Drop for Serve {
    fn drop(&mut self) {
        self.proc.stop();
    }
}

pub fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The child processes of `pid` (every thread's).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(kids.split_whitespace().filter_map(|k| k.parse::<u32>().ok()));
    }
    out
}

/// The `data:` payloads of an SSE body, parsed.
pub fn events(body: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// An AG-UI RunAgentInput: a message, or (`resume` not null) answers.
pub fn run_input(thread: &str, run: &str, prompt: &str, resume: serde_json::Value, props: serde_json::Value) -> String {
    let messages = if prompt.is_empty() {
        serde_json::json!([])
    } else {
        serde_json::json!([{"id": format!("m-{run}"), "role": "user", "content": prompt}])
    };
    serde_json::json!({
        "threadId": thread, "runId": run, "state": {}, "tools": [], "context": [],
        "forwardedProps": props, "messages": messages, "resume": resume,
    })
    .to_string()
}

/// `f` to its end on a runtime of its own (the tests are not async).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// A stream's message: subject, headers as pairs, payload.
pub type Msg = (String, BTreeMap<String, String>, Vec<u8>);

/// Every message of `stream` whose subject starts with `prefix`, in order,
/// read through `client`.
pub async fn stream_messages(client: async_nats::Client, stream: &str, prefix: &str) -> Vec<Msg> {
    let js = async_nats::jetstream::new(client);
    // A JetStream API request may time out while the servers elect a
    // leader (a cluster just restarted, on a loaded machine): asked again,
    // as the product's own code does, for up to 30 s.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let (s, info) = loop {
        let asked = match js.get_stream(stream).await {
            Ok(mut s) => s.info().await.cloned().map(|i| (s, i)).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match asked {
            Ok(x) => break x,
            Err(_) if std::time::Instant::now() < until => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(e) => panic!("stream {stream}: {e}"),
        }
    };
    let mut out = Vec::new();
    if info.state.messages == 0 {
        return out;
    }
    for seq in info.state.first_sequence..=info.state.last_sequence {
        // A message gone (retention, a rollup) is passed over; one the
        // servers were too busy to give is asked for again.
        let mut got = s.get_raw_message(seq).await;
        for _ in 0..10 {
            match &got {
                Err(e) if e.to_string().contains("timed out") => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    got = s.get_raw_message(seq).await;
                }
                _ => break,
            }
        }
        let Ok(m) = got else { continue };
        if !m.subject.as_str().starts_with(prefix) {
            continue;
        }
        let h = m.headers.iter().map(|(k, v)| (k.to_string(), v[0].as_str().to_string())).collect();
        out.push((m.subject.to_string(), h, m.payload.to_vec()));
    }
    out
}

/// Every message of `stream` whose subject starts with `prefix`, in
/// order, read from the servers of `url` (one or a comma-separated list).
pub fn messages(url: &str, stream: &str, prefix: &str) -> Vec<Msg> {
    block_on(async {
        let urls: Vec<&str> = url.split(',').collect();
        stream_messages(async_nats::connect(urls.as_slice()).await.unwrap(), stream, prefix).await
    })
}

/// `runs watch --since 0 --no-follow ARGS` at `home`: the home's own feed
/// (what scripts and cron there read; a hub's reads no stream).
pub fn watched(home: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(built("runs"))
        .args(["watch", "--since", "0", "--no-follow"])
        .args(args)
        .env("HARNESS_HOME", home)
        .output()
        .unwrap();
    assert!(out.status.success(), "runs watch {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The ids of a feed log's events: the offset past each line.
pub fn feed_ids(home: &Path) -> Vec<u64> {
    let log = std::fs::read(home.join("feed/events.log")).unwrap_or_default();
    log.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i as u64 + 1).collect()
}

/// A run written by runwire's own code (pointer, plan, journal), whose task
/// `impl.1` is written by a fake agent (log lines, each after its arrival time).
pub struct FakeRun {
    pub pointer: runwire::runs::registry::Pointer,
    pub dir: PathBuf,
    /// The lines written so far.
    pub n: u64,
    /// The run as its writers name it (its mark is held while writing).
    pub mark: runwire::runs::marks::Run,
}

/// The run's files, as the hub's mirror must hold them.
pub const FILES: [&str; 5] =
    ["feat.x.jsonl", "feat.x.plan.json", "feat.x.impl.1.log", "feat.x.impl.1.log.at", "feat.x.impl.1.gate.log"];

impl FakeRun {
    pub fn new(home: &Path, repo: &Path) -> FakeRun {
        use runwire::runs::journal::{self, Record};
        use runwire::runs::registry::{NewRun, Registry};
        let new = NewRun { slug: "feat.x".into(), repo_root: repo.display().to_string(), ..Default::default() };
        let pointer = new.pointer("2026-01-01T00:00:00.000Z".into()).unwrap();
        let dir = PathBuf::from(&pointer.runstate_dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plan = r#"{"v":"plan/v1","tasks":[{"id":"impl.1","adapter":"claude","prompt":"p"}]}"#;
        std::fs::write(dir.join("feat.x.plan.json"), plan).unwrap();
        Registry::at(home).register(&pointer).unwrap();
        // Task states are journal.rs's TASK_STATES ("started" is not one: the task would not exist).
        let mark = runwire::runs::marks::Run::new(home, &pointer.run_id);
        journal::append(&mark, &dir.join("feat.x.jsonl"), &Record::task("runner", "impl.1", "leased", None)).unwrap();
        FakeRun { pointer, dir, n: 0, mark }
    }

    pub fn journal(&self, state: &str) {
        use runwire::runs::journal::{self, Record};
        let rc = (state == "committed").then_some(0);
        journal::append(&self.mark, &self.dir.join("feat.x.jsonl"), &Record::task("runner", "impl.1", state, rc))
            .unwrap();
    }

    /// The agent writes lines `every` apart until `until(lines so far)`
    /// says stop, each with its arrival time first (as runwire's writers
    /// do); a journal record every 100 lines.
    pub fn write(&mut self, every: Duration, until: impl FnMut(u64) -> bool) {
        self.lines(every, true, until);
    }

    /// As [`FakeRun::write`], without the journal records; how often this
    /// thread paused 4 ms or more between two lines (not run meanwhile: a
    /// reader sees a pause in the writes there).
    pub fn burst(&mut self, every: Duration, until: impl FnMut(u64) -> bool) -> usize {
        self.lines(every, false, until)
    }

    fn lines(&mut self, every: Duration, journal: bool, mut until: impl FnMut(u64) -> bool) -> usize {
        let (mut pauses, mut last) = (0, Instant::now());
        let open = |f: &str| std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(f)).unwrap();
        let (mut logf, mut atf) = (open("feat.x.impl.1.log"), open("feat.x.impl.1.log.at"));
        while !until(self.n) {
            self.n += 1;
            let i = self.n;
            writeln!(atf, "{i} {}", 1_700_000_000_000u64 + i).unwrap();
            writeln!(logf, r#"{{"type":"assistant","n":{i},"pad":"{}"}}"#, "x".repeat((i % 7) as usize * 40)).unwrap();
            if journal && i.is_multiple_of(100) {
                self.journal("implemented");
            }
            std::thread::sleep(every);
            pauses += usize::from(last.elapsed() >= Duration::from_millis(4));
            last = Instant::now();
        }
        pauses
    }

    /// The task and the run end.
    pub fn finish(&self) {
        use runwire::runs::journal::{self, Record};
        // The gate's output, as the supervisor writes it before the task is gated.
        std::fs::write(self.dir.join("feat.x.impl.1.gate.log"), "cargo test\ntest result: ok. 3 passed\n").unwrap();
        self.journal("gated");
        self.journal("committed");
        journal::append(&self.mark, &self.dir.join("feat.x.jsonl"), &Record::run("runner", "finished")).unwrap();
    }

    /// The whole agent: `lines` lines a few ms apart, `at(i)` after line
    /// `i` (faults); then the task and the run end.
    pub fn agent(&mut self, lines: u64, mut at: impl FnMut(u64)) {
        self.write(Duration::from_millis(3), |n| {
            if n > 0 {
                at(n);
            }
            n >= lines
        });
        self.finish();
    }

    /// Where the hub mirrors the run.
    pub fn mirror(&self, hub_home: &Path, node: &str) -> PathBuf {
        hub_home.join("cluster/nodes").join(node).join(&self.pointer.run_id)
    }

    /// Waits until the hub's mirror of the run equals the node's files, byte for byte.
    pub fn mirrored(&self, hub_home: &Path, node: &str, secs: u64) {
        let mirror = self.mirror(hub_home, node);
        wait_for("the hub's mirror to equal the node's files", secs, || {
            FILES
                .iter()
                .all(|f| std::fs::read(mirror.join(f)).ok() == std::fs::read(self.dir.join(f)).ok())
                .then_some(())
        });
    }

    /// In the stream each file is one series of contiguous chunks (no byte
    /// twice, none missing), and the node's feed is there once, in order;
    /// `messages(stream, prefix)` reads a stream. The feed's ids.
    pub fn published_once(&self, messages: impl Fn(&str, &str) -> Vec<Msg>, home: &Path, node: &str) -> Vec<u64> {
        let chunks = messages(names::FILES_STREAM, &format!("rwfile.{node}."));
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
        // The node's feed brought up to date with its journals first, as
        // any reader there does (`runs watch`): the node extends it in its
        // rounds, and a test reading right after its files reached the hub
        // (a cut off node catching up sends its files first) would read a
        // feed still short of the run's end, and wait for nothing.
        watched(home, &[]);
        let want = feed_ids(home);
        let got = wait_for("the whole feed in the stream", 30, || {
            let got: Vec<u64> = messages(names::FEED_STREAM, &names::feed_subject(node))
                .iter()
                .map(|(_, h, _)| h["Rw-Id"].parse().unwrap())
                .collect();
            (got.len() >= want.len()).then_some(got)
        });
        assert_eq!(got, want, "the feed stream is not the node's feed, once and in order");
        want
    }
}
