//! The tests' one `runwire-serve` fixture: [`Server`] starts it on a free
//! loopback port (`--listen 127.0.0.1:0`, the port read from its first
//! line), in a process group of its own, and stops it when dropped
//! (SIGTERM, then SIGKILL to the group after a grace); a piped stderr is
//! kept [`Quiet`] and shown only when the test fails. Requests are raw
//! HTTP over TCP, every read with a timeout.

use super::Quiet;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a request's reads and the server's start may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `runwire-serve`.
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Its `HARNESS_HOME`, when the command set one ([`Server::home`]).
    harness_home: Option<PathBuf>,
    /// Its stderr, when the command piped it ([`Server::command`] does).
    pub stderr: Option<Quiet>,
    /// A directory of the test's that goes with the server
    /// ([`Server::owning`]): removed once the server is stopped, unless the
    /// test failed (kept for a look).
    owned: Option<PathBuf>,
}

impl Server {
    /// `runwire-serve` with its stderr piped (kept [`Quiet`]); the test adds
    /// its arguments and environment, then [`Server::spawn`]s it.
    pub fn command() -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-serve"));
        cmd.stderr(Stdio::piped());
        cmd
    }

    /// Starts `cmd` (runwire-serve, or a shell that execs it, with the
    /// test's arguments and environment) listening on `127.0.0.1:0` (added
    /// last unless `cmd` has a `--listen` already, as one ending with `--
    /// AGENT` must), and
    /// waits for the line saying where; panics with its stderr when none
    /// comes within [`IO_TIMEOUT`].
    pub fn spawn(mut cmd: Command) -> Server {
        use std::os::unix::process::CommandExt;
        let home = cmd.get_envs().find(|(k, _)| *k == "HARNESS_HOME").and_then(|(_, v)| v.map(PathBuf::from));
        if !cmd.get_args().any(|a| a == "--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child =
            cmd.stdin(Stdio::null()).stdout(Stdio::piped()).process_group(0).spawn().expect("start runwire-serve");
        let stderr = child.stderr.is_some().then(|| Quiet::capture("runwire-serve", &mut child));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line);
            // Keep reading, so the server never blocks on a full pipe.
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let line = rx.recv_timeout(IO_TIMEOUT).unwrap_or_default();
        let port = line.trim().strip_prefix("listening on http://127.0.0.1:").and_then(|p| p.parse().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.as_ref().map(Quiet::text).unwrap_or_default();
            panic!("runwire-serve said {line:?}, not where it listens; stderr:\n{err}");
        };
        Server { child, port, addr: format!("127.0.0.1:{port}"), harness_home: home, stderr, owned: None }
    }

    /// The server with `HARNESS_HOME` = `home`, its stderr [`Quiet`].
    pub fn start(home: &Path) -> Server {
        let mut cmd = Server::command();
        cmd.env("HARNESS_HOME", home);
        Server::spawn(cmd)
    }

    /// Removes `dir` when the server is dropped (unless the test failed).
    pub fn owning(mut self, dir: PathBuf) -> Server {
        self.owned = Some(dir);
        self
    }

    /// Its `HARNESS_HOME`.
    pub fn home(&self) -> &Path {
        self.harness_home.as_deref().expect("a server started with a HARNESS_HOME")
    }

    /// The directory given to [`Server::owning`].
    pub fn dir(&self) -> &Path {
        self.owned.as_deref().expect("a server owning a directory")
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// `http://127.0.0.1:PORT` and `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// What the server wrote to its stderr so far (its last 64 KiB; empty
    /// when the command did not pipe it).
    pub fn stderr(&self) -> String {
        self.stderr.as_ref().map(Quiet::text).unwrap_or_default()
    }

    /// A connection with read and write timeouts.
    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to runwire-serve");
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        s
    }

    /// Sends one HTTP/1.1 request (`headers` end with CRLF each; a body
    /// gets its `Content-Length`) and returns the connection, its response
    /// the caller's to read (or to leave).
    pub fn send(&self, method: &str, path: &str, headers: &str, body: &str) -> TcpStream {
        let mut s = self.connect();
        let length = if body.is_empty() && method == "GET" {
            String::new()
        } else {
            format!("Content-Length: {}\r\n", body.len())
        };
        // The test's own Host, when it gives one (a foreign one is refused).
        let host = match headers.to_ascii_lowercase().contains("host:") {
            true => String::new(),
            false => format!("Host: {}\r\n", self.addr),
        };
        write!(s, "{method} {path} HTTP/1.1\r\n{host}{headers}{length}Connection: close\r\n\r\n{body}").unwrap();
        s
    }

    /// One HTTP/1.1 request and its whole response.
    pub fn request(&self, method: &str, path: &str, headers: &str, body: &str) -> Response {
        let mut s = self.send(method, path, headers, body);
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        Response::parse(&raw)
    }

    /// `GET path`: the status and the body as JSON (`Null` when it is not).
    pub fn get(&self, path: &str) -> (u16, Value) {
        let r = self.request("GET", path, "", "");
        (r.status, serde_json::from_slice(&r.body).unwrap_or_default())
    }

    /// `GET path` with `headers` (CRLF after each): the status and the body
    /// as JSON (`Null` when it is not).
    pub fn get_with(&self, path: &str, headers: &str) -> (u16, Value) {
        let r = self.request("GET", path, headers, "");
        (r.status, serde_json::from_slice(&r.body).unwrap_or_default())
    }

    /// One JSON `POST`: the status and the body (`Null` when it is not JSON).
    pub fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.post_with(path, "Content-Type: application/json\r\n", body)
    }

    /// One `POST` with `headers` (CRLF after each): the status and the body
    /// (`Null` when it is not JSON).
    pub fn post_with(&self, path: &str, headers: &str, body: &str) -> (u16, Value) {
        let r = self.request("POST", path, headers, body);
        (r.status, serde_json::from_slice(&r.body).unwrap_or_default())
    }

    /// The records of the server's own journals (`HARNESS_HOME/serve/runstate/*.jsonl`,
    /// not the agents' logs or the steer inboxes).
    pub fn journal(&self) -> Vec<Value> {
        let dir = self.home().join("serve/runstate");
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".jsonl") && !name.contains(".agent.") && !name.contains(".steer.") {
                for l in std::fs::read_to_string(e.path()).unwrap().lines() {
                    out.push(serde_json::from_str(l).unwrap());
                }
            }
        }
        out
    }

    /// SIGTERM, then up to `limit` for the server to exit: how long it took
    /// and its exit code (`None` while it still runs, or killed by a signal).
    /// The server is not reaped here ([`Server`]'s drop does that, after
    /// what is left of its group is killed).
    pub fn terminate(&mut self, limit: Duration) -> (Duration, Option<i32>) {
        let t = Instant::now();
        match self.state() {
            Leader::Exited(code) => return (t.elapsed(), code),
            Leader::Reaped => return (t.elapsed(), self.child.try_wait().ok().flatten().and_then(|s| s.code())),
            Leader::Running => {}
        }
        signal(self.pid(), nix::sys::signal::Signal::SIGTERM);
        while t.elapsed() < limit {
            match self.state() {
                Leader::Exited(code) => return (t.elapsed(), code),
                Leader::Reaped => return (t.elapsed(), self.child.try_wait().ok().flatten().and_then(|s| s.code())),
                Leader::Running => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        (t.elapsed(), None)
    }

    /// Whether the server runs, has exited (its exit code; `None`: a
    /// signal) and is not reaped yet, or was reaped (by a test's own
    /// `child.wait()`). Looked at with `WNOWAIT`, so it stays unreaped.
    fn state(&self) -> Leader {
        use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(nix::unistd::Pid::from_raw(self.pid())), flags) {
            Ok(WaitStatus::Exited(_, code)) => Leader::Exited(Some(code)),
            Ok(WaitStatus::StillAlive) => Leader::Running,
            Ok(_) => Leader::Exited(None),
            Err(_) => Leader::Reaped,
        }
    }

    /// SIGKILL to the server alone (its agents are left to its reaper), and
    /// its end waited for.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

impl Drop for Server {
    fn drop(&mut self) {
        // The group is signalled only while its leader is unreaped: a
        // reaped pid, and so the group id, may already be another
        // process's (pids wrap at 32768 on the CI machine, and threads take
        // pids too): a SIGKILL sent there kills another test's server, whose
        // clients then see their streams end with nothing said.
        let unreaped = !matches!(self.state(), Leader::Reaped);
        if unreaped && self.terminate(Duration::from_secs(10)).1.is_none() {
            // Still running (or gone by a signal): everything in its group goes.
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.pid()), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.child.wait();
        if let (Some(dir), false) = (&self.owned, std::thread::panicking()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Where a server's process is, for [`Server::terminate`] and its drop.
enum Leader {
    Running,
    Exited(Option<i32>),
    Reaped,
}

/// One request to the server on `port` (`Connection: close`, JSON body):
/// its status and body.
pub fn request(port: u16, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
    let r = request_with(port, method, path, "application/json", "", body);
    (r.status, r.body)
}

/// One request (`Connection: close`) with its body's `content_type` and
/// `headers` (whole lines, each ending `\r\n`, or empty): the whole
/// response, de-chunked.
pub fn request_with(port: u16, method: &str, path: &str, content_type: &str, headers: &str, body: &str) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    Response::parse(&raw)
}

/// `POST /agui` with `body` on `port`, which must answer 200: the run's AG-UI events.
pub fn agui_events(port: u16, body: Value) -> Vec<Value> {
    let (status, body) = request(port, "POST", "/agui", &body.to_string());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    super::sse::events(&String::from_utf8(body).unwrap())
}

/// A whole HTTP response (interim 1xx ones skipped).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
    /// Whether a chunked body ended with its last chunk (always true for
    /// one that is not chunked).
    pub complete: bool,
}

impl Response {
    pub fn parse(mut raw: &[u8]) -> Response {
        loop {
            let end = memchr::memmem::find(raw, b"\r\n\r\n")
                .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(raw)));
            let head = std::str::from_utf8(&raw[..end]).unwrap();
            let mut lines = head.split("\r\n");
            let status_line = lines.next().unwrap();
            let status: u16 = status_line
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("not an HTTP response: {status_line:?}"));
            let headers: Vec<(String, String)> =
                lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.to_string(), v.trim().to_string())).collect();
            let rest = &raw[end + 4..];
            if (100..200).contains(&status) {
                raw = rest;
                continue;
            }
            let chunked = headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v == "chunked");
            let (body, complete) = if chunked { super::sse::dechunk(rest) } else { (rest.to_vec(), true) };
            return Response { status, headers, body, complete };
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics, showing it, when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    /// The `error` of a JSON refusal; panics when there is none.
    pub fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_else(|| panic!("no error key: {}", self.text())).to_string()
    }

    /// The JSON data of the body's SSE frames.
    pub fn events(&self) -> Vec<Value> {
        super::sse::events(&self.text())
    }
}
