//! `--cluster URL --node NAME` / `--cluster URL --hub`: the cluster
//! sidecar, `runwire-cluster` (its own crate, cluster/: tokio and the NATS
//! client stay out of this one). The server starts it as a child, restarts
//! it when it exits, and stops it on shutdown; it dies with the server
//! (PR_SET_PDEATHSIG). See spec/CLUSTER.md.

use crate::cli;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The cluster flags of `runwire-serve`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// Join a NATS JetStream cluster (comma-separated nats:// or tls:// URLs), with --node NAME
    /// (publish this machine's runs) or --hub (serve every node's runs). Starts runwire-cluster.
    #[arg(long, value_name = "URL")]
    pub cluster: Option<String>,
    /// This machine's node name in the cluster (A-Z a-z 0-9 _ -).
    #[arg(long, value_name = "NAME", requires = "cluster", conflicts_with = "hub")]
    pub node: Option<String>,
    /// Serve every node of the cluster (mirrored into $HARNESS_HOME) instead of a node's own runs.
    #[arg(long, requires = "cluster")]
    pub hub: bool,
    /// A NATS credentials file (JWT and nkey seed) for the cluster (runwire-cluster --creds).
    #[arg(long, value_name = "FILE", requires = "cluster",
        conflicts_with_all = ["cluster_token_file", "cluster_user", "cluster_nkey_file"])]
    pub cluster_creds: Option<PathBuf>,
    /// A file holding the cluster's NATS token (runwire-cluster --token-file; or $RUNWIRE_CLUSTER_TOKEN).
    #[arg(long, value_name = "FILE", requires = "cluster", conflicts_with_all = ["cluster_user", "cluster_nkey_file"])]
    pub cluster_token_file: Option<PathBuf>,
    /// The NATS user, whose password is in --cluster-password-file or $RUNWIRE_CLUSTER_PASSWORD.
    #[arg(long, value_name = "NAME", requires = "cluster", conflicts_with = "cluster_nkey_file")]
    pub cluster_user: Option<String>,
    /// A file holding the NATS user's password.
    #[arg(long, value_name = "FILE", requires = "cluster_user")]
    pub cluster_password_file: Option<PathBuf>,
    /// A file holding the NATS user's nkey seed (SU...).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_nkey_file: Option<PathBuf>,
    /// The CA certificate (PEM) of the cluster's TLS; TLS is then required (runwire-cluster --tls-ca).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) for the cluster's TLS, with --cluster-tls-key.
    #[arg(long, value_name = "FILE", requires_all = ["cluster", "cluster_tls_key"])]
    pub cluster_tls_cert: Option<PathBuf>,
    /// The key (PEM) of --cluster-tls-cert.
    #[arg(long, value_name = "FILE", requires = "cluster_tls_cert")]
    pub cluster_tls_key: Option<PathBuf>,
}

/// The password of `--cluster-user` / `runwire-cluster --user` when no password file is given.
pub const PASSWORD_ENV: &str = "RUNWIRE_CLUSTER_PASSWORD";
/// The cluster's token when no other credentials are given.
pub const TOKEN_ENV: &str = "RUNWIRE_CLUSTER_TOKEN";

/// A cluster's comma-separated server URLs, checked: `nats://` or
/// `tls://` (or a bare `host:port`), no credentials in the URL (they would
/// be visible to every user of the machine: credentials come from files or
/// the environment), and TLS for any server that is not on loopback
/// (`tls`: a CA is given, which requires TLS). The error names the URL.
pub fn check_urls(list: &str, tls: bool) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for u in list.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        let (scheme, rest) = u.split_once("://").unwrap_or(("nats", u));
        if !matches!(scheme, "nats" | "tls") {
            return Err(format!("{u}: the scheme must be nats:// or tls://"));
        }
        let hostport = rest.split('/').next().unwrap_or(rest);
        if hostport.contains('@') {
            return Err(format!(
                "{}: no credentials in the URL (every user of this machine can read a command line): \
                 give them in a file or the environment (see --help)",
                u.split_once('@').map(|(_, h)| h).unwrap_or(u)
            ));
        }
        let host = match hostport.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => hostport.split(':').next().unwrap_or(""),
        };
        let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !(loopback || tls || scheme == "tls") {
            return Err(format!(
                "{u}: a server that is not on loopback needs TLS (a tls:// URL, or the cluster's CA certificate)"
            ));
        }
        out.push(u.to_string());
    }
    if out.is_empty() {
        return Err("no server given".into());
    }
    Ok(out)
}

impl ClusterArgs {
    /// A usage error, if any: `--cluster` needs `--node` or `--hub`.
    pub fn check(&self) -> Result<(), String> {
        match (&self.cluster, &self.node, self.hub) {
            (Some(_), None, false) => Err("--cluster needs --node NAME or --hub".into()),
            (_, Some(n), _)
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                Err(format!("--node {n:?}: a node name is 1 or more of A-Z a-z 0-9 _ -"))
            }
            _ => Ok(()),
        }?;
        if let Some(url) = &self.cluster {
            check_urls(url, self.cluster_tls_ca.is_some()).map_err(|e| format!("--cluster: {e}"))?;
        }
        if let (Some(u), None) = (&self.cluster_user, &self.cluster_password_file) {
            if std::env::var_os(PASSWORD_ENV).is_none() {
                return Err(format!(
                    "--cluster-user {u}: no password: give --cluster-password-file FILE or set {PASSWORD_ENV}"
                ));
            }
        }
        Ok(())
    }

    fn argv(&self, home: &Path, port: u16, token_file: Option<&Path>) -> Option<Vec<String>> {
        let url = self.cluster.clone()?;
        let mut a = vec![if self.hub { "hub" } else { "node" }.to_string(), "--url".into(), url];
        if let Some(n) = &self.node {
            a.extend(["--node".into(), n.clone()]);
            // Control requests from the cluster come back through this server's own routes.
            a.extend(["--local".into(), format!("127.0.0.1:{port}")]);
            if let Some(t) = token_file {
                a.extend(["--local-token-file".into(), t.display().to_string()]);
            }
        }
        a.extend(["--home".into(), home.display().to_string()]);
        // Every connection flag takes a value (the hub's control forwarding
        // reuses them as pairs). Secrets stay in their files.
        let files = [
            ("--creds", &self.cluster_creds),
            ("--token-file", &self.cluster_token_file),
            ("--password-file", &self.cluster_password_file),
            ("--nkey-file", &self.cluster_nkey_file),
            ("--tls-ca", &self.cluster_tls_ca),
            ("--tls-cert", &self.cluster_tls_cert),
            ("--tls-key", &self.cluster_tls_key),
        ];
        if let Some(u) = &self.cluster_user {
            a.extend(["--user".into(), u.clone()]);
        }
        for (flag, f) in files {
            if let Some(f) = f {
                a.extend([flag.to_string(), f.display().to_string()]);
            }
        }
        Some(a)
    }
}

/// A hub's cluster, for forwarding control routes (set by [`start`] with `--hub`).
static HUB: OnceLock<Vec<String>> = OnceLock::new();
/// A hub's harness home (where it remembers each thread's node).
static HUB_HOME: OnceLock<PathBuf> = OnceLock::new();

/// Whether this server is a hub (its runs are `<node>.<run>`).
pub fn is_hub() -> bool {
    HUB.get().is_some()
}

/// How long a node has to answer a forwarded control request.
const FORWARD_TIMEOUT_MS: u64 = 5000;

/// At a hub, a control route for run `<node>.<run>` (every run there is a
/// node's): the request made to that node by NATS request/reply, through
/// `runwire-cluster control`, which answers `(status, body)`: the node's
/// own, 503 at once when the node is not connected, 504 naming it when it
/// does not answer within 5 s. `id` (the client's `Idempotency-Key`, else a
/// new one) makes a retry answered, not acted on, twice. `None` when this
/// server is not a hub.
pub fn forward(id: &str, task: Option<&str>, verb: &str, body: &[u8], key: Option<&str>) -> Option<(u16, String)> {
    let conn = HUB.get()?;
    let Some((node, run)) = id.split_once('.') else {
        return Some((
            404,
            serde_json::json!({"error": format!("run {id:?}: a hub's runs are <node>.<run>")}).to_string(),
        ));
    };
    let path = match task {
        Some(t) => format!("/runs/{run}/tasks/{t}/{verb}"),
        None => format!("/runs/{run}/{verb}"),
    };
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let rid = key.map(str::to_string).unwrap_or_else(|| {
        let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        format!("hub-{}-{ms}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
    });
    let out = Command::new(program())
        .arg("control")
        .args(conn)
        // `--flag=value`: a value the client chose is never read as a flag.
        .args([format!("--node={node}"), format!("--path={path}"), format!("--timeout-ms={FORWARD_TIMEOUT_MS}")])
        .arg(format!("--id={rid}"))
        .arg(format!("--body={}", String::from_utf8_lossy(body)))
        .stdin(Stdio::null())
        .output();
    let error =
        |code: u16, why: String| (code, serde_json::json!({"error": format!("node {node}: {why}")}).to_string());
    Some(match out {
        Ok(o) if o.status.success() => serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .ok()
            .and_then(|v| Some((v["status"].as_u64()? as u16, v["body"].as_str()?.to_string())))
            .unwrap_or_else(|| error(502, "runwire-cluster control said nothing readable".into())),
        // Exit 3: the cluster cannot be reached from here.
        Ok(o) => error(
            if o.status.code() == Some(3) { 503 } else { 502 },
            String::from_utf8_lossy(&o.stderr).trim().to_string(),
        ),
        Err(e) => error(502, format!("cannot run {}: {e}", program().display())),
    })
}

/// Where a hub remembers the node of an AG-UI thread (a file per thread,
/// named by the SHA-256 of its id, holding the node's name).
fn thread_file(home: &Path, thread: &str) -> PathBuf {
    home.join("cluster").join("threads").join(&crate::runs::sha256::hex(thread.as_bytes())[..32])
}

/// The node of a hub's AG-UI run: `forwardedProps.node`, else the node the
/// thread was started on at this hub; `Err` the 400's message.
fn agui_node(home: &Path, body: &[u8], thread: &str) -> Result<String, String> {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    match v.pointer("/forwardedProps/node") {
        Some(serde_json::Value::String(n))
            if !n.is_empty()
                && n.len() <= 64
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            Ok(n.clone())
        }
        Some(n) => Err(format!("forwardedProps.node {n}: a node name is 1 to 64 of A-Z a-z 0-9 _ -")),
        None => std::fs::read_to_string(thread_file(home, thread))
            .ok()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                format!(
                    "thread {thread:?} is new to this hub: name the node that runs it in forwardedProps.node \
                     (a hub runs no agent itself; its nodes are the prefixes of the run ids in GET /runs)"
                )
            }),
    }
}

/// At a hub, `POST /agui`: the run goes to the thread's node (see
/// `agui_node`) by `runwire-cluster agui`, through the node's own
/// `/agui` (its rules: one run a thread, interrupt ids bound to the thread,
/// a resume that must address every open interrupt, a retried runId
/// replayed, never run twice); its SSE body streamed back as the node
/// writes it. A node not connected is 503 at once, one that does not start
/// answering within 5 s 504, each naming it. A client that leaves is a
/// client leaving the node's server. `None` when this server is not a hub.
pub fn agui(
    cfg: &super::Config,
    stream: &mut std::net::TcpStream,
    req: &super::http::Request,
    body: &[u8],
    cors: &[(&'static str, String)],
) -> Option<super::http::Close> {
    use super::http::{respond_error, Close};
    let conn = HUB.get()?;
    let home = HUB_HOME.get()?;
    let input = match super::agui::parse_input(body) {
        Ok(i) => i,
        Err(m) => {
            respond_error(stream, 400, cors, &m);
            return Some(Close::Linger);
        }
    };
    let node = match agui_node(home, body, &input.thread_id) {
        Ok(n) => n,
        Err(m) => {
            respond_error(stream, 400, cors, &m);
            return Some(Close::Linger);
        }
    };
    let tf = thread_file(home, &input.thread_id);
    if std::fs::read_to_string(&tf).ok().as_deref() != Some(node.as_str()) {
        let _ = std::fs::create_dir_all(tf.parent().unwrap_or(home));
        let _ = crate::runs::write_atomic(&tf, node.as_bytes());
    }
    let child = Command::new(program())
        .arg("agui")
        .args(conn)
        .args([format!("--node={node}"), format!("--timeout-ms={FORWARD_TIMEOUT_MS}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            respond_error(stream, 502, cors, &format!("node {node}: cannot run {}: {e}", program().display()));
            return Some(Close::Linger);
        }
    };
    if let Some(mut i) = child.stdin.take() {
        use std::io::Write;
        let _ = i.write_all(body);
    }
    Some(relay(cfg, stream, req, cors, child, &format!("node {node}")))
}

/// At a hub, `GET /runs/events`: the merged feed of every node, read from
/// the cluster's feed stream by `runwire-cluster feed`, each event's id its
/// stream sequence (the same at every hub: a client resumes at any hub
/// with its Last-Event-ID), `runId` the hub's and `node` added. `None` when
/// this server is not a hub.
pub fn feed(
    cfg: &super::Config,
    stream: &mut std::net::TcpStream,
    req: &super::http::Request,
    cors: &[(&'static str, String)],
) -> Option<super::http::Close> {
    use super::http::{respond_error, Close};
    let conn = HUB.get()?;
    let mut cmd = Command::new(program());
    cmd.arg("feed").args(conn).arg(format!("--query={}", req.query.as_deref().unwrap_or_default()));
    if let Some(v) = req.header("last-event-id") {
        match v.trim().parse::<u64>() {
            Ok(n) => {
                cmd.arg(format!("--since={n}"));
            }
            Err(_) => {
                respond_error(stream, 400, cors, &format!("Last-Event-ID {v:?} is not an event id of this feed"));
                return Some(Close::Linger);
            }
        }
    }
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    match child {
        Ok(c) => Some(relay(cfg, stream, req, cors, c, "the cluster's feed")),
        Err(e) => {
            respond_error(stream, 502, cors, &format!("cannot run {}: {e}", program().display()));
            Some(Close::Linger)
        }
    }
}

/// Relays a `runwire-cluster agui|feed` child's answer: its first line is
/// `{"status":N,"body":"…"}`; a 200 is an SSE body, copied as it comes
/// (keep-alives and the client looked at while it is quiet); anything
/// else is answered as it is. A client that leaves stops the child (which
/// tells the node, for `agui`).
fn relay(
    cfg: &super::Config,
    stream: &mut std::net::TcpStream,
    req: &super::http::Request,
    cors: &[(&'static str, String)],
    mut child: Child,
    who: &str,
) -> super::http::Close {
    use super::http::{respond, respond_error, Close};
    use std::io::{BufRead, Read};
    let stop = |child: &mut Child| {
        let _ =
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
        let _ = child.wait();
    };
    // Its stderr is drained aside (bounded): said in a 503 when it ends without an answer.
    let errs = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = e.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if all.len() < 64 * 1024 {
                    all.extend_from_slice(&buf[..n]);
                }
            }
            String::from_utf8_lossy(&all).into_owned()
        })
    });
    let Some(out) = child.stdout.take() else {
        stop(&mut child);
        respond_error(stream, 502, cors, &format!("{who}: runwire-cluster has no output"));
        return Close::Linger;
    };
    let mut out = std::io::BufReader::new(out);
    let mut line = String::new();
    let _ = out.read_line(&mut line);
    let answer = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| Some((v["status"].as_u64()? as u16, v["body"].as_str().unwrap_or_default().to_string())));
    let Some((code, text)) = answer else {
        let _ = child.wait();
        let err = errs.and_then(|t| t.join().ok()).unwrap_or_default();
        // Exit 3: the cluster cannot be reached from here.
        respond_error(stream, 503, cors, &format!("{who}: {}", err.trim()));
        return Close::Linger;
    };
    if code != 200 {
        let _ = child.wait();
        let _ = respond(stream, code, cors, &text);
        return Close::Linger;
    }
    let mut body = match super::stream::Stream::start(stream, req, cors, usize::MAX, cfg.write_timeout) {
        Ok(b) => b,
        Err(_) => {
            stop(&mut child);
            return Close::Now;
        }
    };
    // The child's output read aside, so the client is looked at while it is quiet.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(64);
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        // What the line reader holds past the first line goes first.
        let held = out.buffer().to_vec();
        if !held.is_empty() && tx.send(held).is_err() {
            return;
        }
        let mut raw = out.into_inner();
        while let Ok(n) = raw.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(chunk) => {
                body.push(&chunk);
                if body.drain().is_err() {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if body.heartbeat(cfg.keepalive).is_err() {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let _ = body.end();
                break;
            }
        }
    }
    // Done, or the client left: the child is stopped.
    stop(&mut child);
    drop(rx);
    let _ = reader.join();
    Close::Now
}

/// The running sidecar: stopped on drop.
pub struct Sidecar {
    child: Arc<Mutex<Option<Child>>>,
    stop: Arc<AtomicBool>,
}

/// `runwire-cluster` next to this binary, else on PATH.
fn program() -> PathBuf {
    std::env::current_exe()
        .ok()
        .map(|e| e.with_file_name("runwire-cluster"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("runwire-cluster"))
}

fn spawn(argv: &[String]) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program());
    cmd.args(argv).stdin(Stdio::null()).stdout(Stdio::null());
    // SAFETY: prctl and sigprocmask are async-signal-safe. The server
    // blocks SIGINT and SIGTERM in every thread (its signal thread waits for
    // them): the sidecar gets them unblocked, or it could not be stopped.
    unsafe {
        cmd.pre_exec(|| {
            use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).map_err(std::io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)
        });
    }
    cmd.spawn()
}

/// Starts the sidecar when `--cluster` is given, for the server on `port`
/// (with `token_file`); `bin` names the server in messages.
pub fn start(args: &ClusterArgs, home: &Path, port: u16, token_file: Option<&Path>, bin: &str) -> Option<Sidecar> {
    let argv = args.argv(home, port, token_file)?;
    if args.hub {
        // The connection flags of argv: everything after `hub` but --home.
        let conn: Vec<String> = argv[1..].chunks(2).filter(|p| p[0] != "--home").flatten().cloned().collect();
        let _ = HUB.set(conn);
        let _ = HUB_HOME.set(home.to_path_buf());
    }
    let child = Arc::new(Mutex::new(None::<Child>));
    let stop = Arc::new(AtomicBool::new(false));
    let (c2, s2, bin) = (child.clone(), stop.clone(), bin.to_string());
    let what = if args.hub { "hub".to_string() } else { format!("node {}", args.node.clone().unwrap_or_default()) };
    cli::report(&bin, format!("cluster: {what} of {} (runwire-cluster)", args.cluster.clone().unwrap_or_default()));
    let _ = std::thread::Builder::new().name("cluster".into()).spawn(move || {
        while !s2.load(Ordering::SeqCst) {
            match spawn(&argv) {
                Ok(ch) => *c2.lock().unwrap_or_else(|e| e.into_inner()) = Some(ch),
                Err(e) => cli::report(&bin, format!("cluster: cannot start {}: {e}", program().display())),
            }
            // Wait for it to end, without holding the lock while it runs.
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let mut g = c2.lock().unwrap_or_else(|e| e.into_inner());
                match g.as_mut().map(|c| c.try_wait()) {
                    Some(Ok(None)) => continue,
                    Some(Ok(Some(st))) if !s2.load(Ordering::SeqCst) => {
                        cli::report(
                            &bin,
                            format!("cluster: runwire-cluster ended ({st}); serving locally, restarting it in 5 s"),
                        );
                    }
                    _ => {}
                }
                *g = None;
                break;
            }
            for _ in 0..25 {
                if s2.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    });
    Some(Sidecar { child, stop })
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(mut c) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM);
            for _ in 0..50 {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cluster: Option<&str>, node: Option<&str>, hub: bool) -> ClusterArgs {
        ClusterArgs { cluster: cluster.map(str::to_string), node: node.map(str::to_string), hub, ..Default::default() }
    }

    #[test]
    fn cluster_needs_a_node_or_hub_and_names_are_checked() {
        assert!(args(None, None, false).check().is_ok());
        assert!(args(Some("nats://127.0.0.1:4222"), None, false).check().unwrap_err().contains("--node NAME or --hub"));
        assert!(args(Some("nats://127.0.0.1:4222"), Some("a.b"), false).check().is_err());
        assert!(args(Some("nats://127.0.0.1:4222"), Some(""), false).check().is_err());
        assert!(args(Some("nats://127.0.0.1:4222"), Some("n-1_x"), false).check().is_ok());
        assert!(args(Some("nats://127.0.0.1:4222"), None, true).check().is_ok());
    }

    #[test]
    fn tls_off_loopback_and_credentials_from_files_only() {
        let off = args(Some("nats://127.0.0.1:1,nats://10.0.0.1:4222"), None, true);
        let e = off.check().unwrap_err();
        assert!(e.starts_with("--cluster: nats://10.0.0.1:4222: ") && e.contains("needs TLS"), "{e}");
        let with_ca = ClusterArgs { cluster_tls_ca: Some("/ca.pem".into()), ..off.clone() };
        assert!(with_ca.check().is_ok());
        assert!(args(Some("tls://10.0.0.1:4222"), None, true).check().is_ok());
        let e = args(Some("nats://hub:s3cret@127.0.0.1:4222"), None, true).check().unwrap_err();
        assert!(e.contains("no credentials in the URL") && !e.contains("s3cret"), "{e}");
        assert!(args(Some("http://127.0.0.1:1"), None, true).check().is_err());
        let a = ClusterArgs {
            cluster_user: Some("node-alpha".into()),
            cluster_password_file: Some("/pw".into()),
            cluster_tls_ca: Some("/ca".into()),
            cluster_tls_cert: Some("/c".into()),
            cluster_tls_key: Some("/k".into()),
            ..args(Some("tls://nats.example:4222"), Some("alpha"), false)
        };
        assert!(a.check().is_ok());
        let argv = a.argv(Path::new("/h"), 1, None).unwrap();
        let tail: Vec<&str> =
            argv[argv.iter().position(|x| x == "/h").unwrap() + 1..].iter().map(|s| s.as_str()).collect();
        assert_eq!(
            tail,
            [
                "--user",
                "node-alpha",
                "--password-file",
                "/pw",
                "--tls-ca",
                "/ca",
                "--tls-cert",
                "/c",
                "--tls-key",
                "/k"
            ]
        );
    }

    #[test]
    fn the_sidecar_gets_the_servers_address_and_token_as_a_node_only() {
        let home = Path::new("/h");
        let node = args(Some("nats://x:1"), Some("alpha"), false).argv(home, 8787, Some(Path::new("/t"))).unwrap();
        assert_eq!(
            node,
            [
                "node",
                "--url",
                "nats://x:1",
                "--node",
                "alpha",
                "--local",
                "127.0.0.1:8787",
                "--local-token-file",
                "/t",
                "--home",
                "/h"
            ]
        );
        let hub = args(Some("nats://x:1"), None, true).argv(home, 8787, None).unwrap();
        assert_eq!(hub, ["hub", "--url", "nats://x:1", "--home", "/h"]);
        assert_eq!(args(None, None, false).argv(home, 1, None), None);
        // Without --hub nothing is forwarded.
        assert_eq!(forward("alpha.run", Some("t"), "kill", b"", None), None);
    }
}
