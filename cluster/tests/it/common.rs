//! What the hub's tests share (copied from tests/cluster.rs, which other
//! work edits at the same time): a 3-server NATS JetStream cluster on
//! loopback, `runwire-serve` processes (nodes and hubs), HTTP on loopback,
//! and the skip rule for the tools they need (tests/support/tools.rs).
#![allow(dead_code)] // each test crate uses part of it

#[path = "../../../tests/support/tools.rs"]
pub mod tools;

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
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
            .args(["build", "--quiet", "--bin", "runwire-serve", "--example", "trust-agent", "--manifest-path"])
            .arg(root().join("Cargo.toml"))
            .arg("--target-dir")
            .arg(profile.parent().unwrap())
            .output()
            .map_err(|e| e.to_string())?;
        out.status.success().then_some(()).ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
    });
    if let Err(e) = r {
        panic!("cargo build of runwire-serve and trust-agent failed: {e}");
    }
    let p = profile.join(what);
    assert!(p.is_file(), "{} is not built", p.display());
    p
}

pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rw-cluster-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process: SIGTERM, then killed (by its own pid), when dropped.
pub struct Proc(pub Child);

impl Proc {
    pub fn kill(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !matches!(self.0.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
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
    pub url: String,
}

impl Nats {
    pub fn start(dir: &Path) -> Nats {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let cports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let urls: Vec<String> = ports.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect();
        let servers = (0..3)
            .map(|i| {
                let routes: Vec<String> =
                    (0..3).filter(|j| *j != i).map(|j| format!("nats://127.0.0.1:{}", cports[j])).collect();
                let log = std::fs::File::create(dir.join(format!("nats-{i}.log"))).unwrap();
                Proc(
                    Command::new("nats-server")
                        .args(["-a", "127.0.0.1", "-p", &ports[i].to_string(), "-n", &format!("s{i}"), "-js"])
                        .arg("-sd")
                        .arg(dir.join(format!("js-{i}")))
                        .args(["--cluster_name", "rwtest", "--cluster", &format!("nats://127.0.0.1:{}", cports[i])])
                        .args(["--routes", &routes.join(",")])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(log)
                        .spawn()
                        .expect("start nats-server"),
                )
            })
            .collect();
        let n = Nats { servers, url: urls.join(",") };
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
}

/// A runwire-serve on a free port (its first stdout line says where), its
/// stderr in `<home>.stderr`.
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
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
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

    /// One request (HTTP/1.0): the status and the body, to the end.
    pub fn request(&self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
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

    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let (code, body) = self.request("GET", path, "");
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
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
