//! `--cluster URL --node NAME` / `--cluster URL --hub`: the cluster
//! sidecar, `runwire-cluster` (its own crate, cluster/: tokio and the NATS
//! client stay out of this one). The server starts it as a child, restarts
//! it when it exits, and stops it on shutdown; it dies with the server
//! (PR_SET_PDEATHSIG). See spec/CLUSTER.md.

use crate::util::cli;
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
    // A hub runs no agent: its chat runs on the node it names. An agent or
    // the demo beside --hub was taken and never used (`--agent claude`
    // even warned that every run would fail), so they are refused.
    #[arg(long, requires = "cluster", conflicts_with_all = ["agent", "demo"])]
    pub hub: bool,
    /// The hub's name, which the nodes journal with each command it forwards
    /// (`<person>@<name>`): A-Z a-z 0-9 . _ - (default: the host name).
    #[arg(long, value_name = "NAME", requires = "hub")]
    pub hub_name: Option<String>,
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
            (_, Some(n), _) if !crate::runs::valid_node(n) => {
                Err(format!("--node {n:?}: a node name is {}", crate::runs::NODE_RULE))
            }
            _ => Ok(()),
        }?;
        if let Some(n) = self.hub_name.as_deref().filter(|n| !super::tokens::valid_name(n)) {
            return Err(format!("--hub-name {n:?}: a hub name is 1 to 64 of A-Z a-z 0-9 . _ -"));
        }
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

    /// No door weaker than HTTP: a node whose server requires a token
    /// (`token_required`: `--token-file`) answers the cluster's control
    /// requests only with credentials of its own for the cluster (the
    /// servers then authenticate every client; the sidecar also refuses to
    /// answer control on a cluster that lets anyone in).
    pub fn check_door(&self, token_required: bool) -> Result<(), String> {
        let creds = self.cluster_creds.is_some()
            || self.cluster_token_file.is_some()
            || self.cluster_user.is_some()
            || self.cluster_nkey_file.is_some()
            || std::env::var_os(TOKEN_ENV).is_some_and(|t| !t.is_empty());
        match (&self.node, token_required, creds) {
            (Some(n), true, false) => Err(format!(
                "--cluster: node {n}: this server requires a token (--token-file), so its cluster door must \
                 too: give the node's cluster credentials (--cluster-creds, --cluster-user with \
                 --cluster-password-file, --cluster-nkey-file or --cluster-token-file); without them any \
                 client of the cluster could answer this node's agents"
            )),
            _ => Ok(()),
        }
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
        if let Some(n) = &self.hub_name {
            a.extend(["--name".into(), n.clone()]);
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

/// Whether this server is a hub (its runs are `<node>.<run>`).
pub fn is_hub() -> bool {
    HUB_HOME.get().is_some()
}

/// At a hub, each node's liveness as its sidecar judges it (from the
/// heartbeats: spec/CLUSTER.md, "Nodes"), from the small file it keeps;
/// `None` elsewhere, before the first judgement, or when the sidecar that
/// wrote it is gone (its judgement is no longer current).
pub fn node_states() -> Option<crate::runs::nodes::NodeStates> {
    let home = HUB_HOME.get()?;
    // A sidecar that does not answer (stopped, hung) is judging nobody now,
    // though it runs: its word is stale, every node `unknown` until the new one judges.
    if !channel::CHANNEL.get().is_some_and(|c| c.answering()) {
        return None;
    }
    crate::runs::nodes::read(home)
}

/// At a hub, `/api/info`'s `nodes`: each node's liveness, by name
/// (`[{"node":"alpha","state":"up","since":MS}]`), what the studio's chat
/// offers a new thread (the `up` ones); `None` elsewhere.
pub fn nodes_info() -> Option<serde_json::Value> {
    if !is_hub() {
        return None;
    }
    let mut nodes: Vec<_> = node_states().unwrap_or_default().into_iter().collect();
    nodes.sort();
    let list = nodes
        .into_iter()
        .map(|(node, (state, since))| serde_json::json!({"node": node, "state": state, "since": since}))
        .collect();
    Some(serde_json::Value::Array(list))
}

/// A node takes its name once it has bound its address, before it says so: `Err` the refusal
/// (another machine holds it, named), for exit 2, with nothing printed on
/// stdout: a script that waits for the `listening on` line never sees a
/// server that is about to refuse. A cluster that cannot be asked now does
/// not stop the server (said on stderr). A hub takes no name.
pub fn take_name(args: &ClusterArgs, home: &Path, bin: &str) -> Result<(), String> {
    // In cluster mode the sidecar does the cluster's work: without its
    // binary the server would serve on, cut off, with one line on stderr.
    if args.cluster.is_some() && crate::tools::doctor::locate(&program().to_string_lossy()).is_none() {
        return Err(format!(
            "--cluster: runwire-cluster is neither next to {bin} nor on PATH: build it (cargo build --release --workspace) or install it (cargo install --locked --path cluster)"
        ));
    }
    if args.hub {
        return Ok(());
    }
    // The port is not known yet: the lease takes no server address (`lease_argv`).
    match args.argv(home, 0, None) {
        Some(argv) => name::lease(&program(), &argv, bin),
        None => Ok(()),
    }
}

/// A hub's harness home (where it remembers each thread's node).
static HUB_HOME: OnceLock<PathBuf> = OnceLock::new();

/// How long a node has to take a forwarded control request: the budget a
/// command starts with at the hub (milliseconds remaining, not a clock).
pub const FORWARD_BUDGET_MS: u64 = 5000;
/// How long a hub waits past the budget for the answer of a command the
/// node said it was running (then 502: it may have run).
pub const RUNNING_GRACE_MS: u64 = 30_000;

mod channel;
/// Approval links at a hub.
pub mod link;
/// A node's name, taken before it serves.
mod name;
/// A thread's messages at a hub.
pub mod thread;
use channel::Channel;
pub use channel::{decode, encode, frame_len, monotonic_ms, read_frame, Head, MAX_FRAME, STREAM_QUEUE};

/// A request's deadline on the channel ([`Head::deadline_ms`]): its budget from now.
fn deadline() -> Option<u64> {
    Some(monotonic_ms().saturating_add(FORWARD_BUDGET_MS))
}

/// A hub's channel: `Err` the 503 to answer when there is none.
fn channel(what: &str) -> Result<&'static Arc<Channel>, (u16, String)> {
    channel::CHANNEL
        .get()
        .ok_or_else(|| (503, serde_json::json!({"error": format!("{what}: no cluster sidecar")}).to_string()))
}

fn err_json(code: u16, msg: String) -> (u16, String) {
    (code, serde_json::json!({ "error": msg }).to_string())
}

/// At a hub, a control route for run `<node>.<run>` (every run there is a
/// node's): sent over the channel as a command (verb, body, actor,
/// idempotency key, budget) that the sidecar forwards to that node by NATS
/// request/reply; answered `(status, body)`: the node's own, 503 at once
/// when the node is not connected, 504 naming it when the node did not take
/// it within the budget (it will then never run: the node asks the hub
/// before running it). `key` (the client's `Idempotency-Key`, else one the
/// sidecar makes) makes a retry answered, never acted on, twice. `actor`:
/// the caller's token name (else this server's name), the command's actor
/// at the node; `checked`: this hub checked the caller's token (it has
/// one). `None` when this server is not a hub.
pub fn forward(
    id: &str,
    task: Option<&str>,
    verb: &str,
    body: &[u8],
    key: Option<&str>,
    actor: Option<&str>,
    checked: bool,
) -> Option<(u16, String)> {
    if !is_hub() {
        return None;
    }
    let Some((node, run)) = id.split_once('.') else {
        return Some(err_json(404, format!("run {id:?}: a hub's runs are <node>.<run>")));
    };
    let head = Head {
        op: "control".into(),
        node: Some(node.into()),
        run: Some(run.into()),
        task: task.map(str::to_string),
        verb: Some(verb.into()),
        key: key.map(str::to_string),
        actor: Some(actor.unwrap_or(super::options::BIN).into()),
        checked,
        budget_ms: Some(FORWARD_BUDGET_MS),
        deadline_ms: deadline(),
        ..Default::default()
    };
    Some(match ask(node, head, body) {
        Ok((h, data)) => (h.status.unwrap_or(502), String::from_utf8_lossy(&data).into_owned()),
        Err(e) => e,
    })
}

/// One command to `node` over the channel (a control route's, a link's,
/// with its deadline): the sidecar's answer frame, or the `(status, body)`
/// to answer when there is none (no sidecar: 503; not taken by its
/// deadline: 504, it will not run; taken, then no answer: 502).
fn ask(node: &str, head: Head, body: &[u8]) -> Result<(Head, Vec<u8>), (u16, String)> {
    let ch = channel(&format!("node {node}"))?;
    let deadline = head.deadline_ms.unwrap_or_else(monotonic_ms);
    let mut open = ch.open(head, body).map_err(|e| err_json(503, format!("node {node}: the cluster sidecar: {e}")))?;
    // Once taken, the sidecar answers every command (504 itself once the
    // budget is spent, 502 past the grace); this bound covers one that hangs.
    let running = Duration::from_millis(FORWARD_BUDGET_MS + RUNNING_GRACE_MS + 5000);
    match ch.wait(&mut open, deadline, running, &format!("node {node}"), "command") {
        Ok((h, data)) if h.op == "answer" => {
            open.ended = true;
            Ok((h, data))
        }
        Ok((h, _)) => Err(err_json(502, format!("node {node}: the cluster sidecar said {:?}", h.op))),
        Err((code, m)) => Err(err_json(code, m)),
    }
}

/// Where a hub remembers the node of an AG-UI thread (a file per thread,
/// named by the SHA-256 of its id, holding the node's name).
fn thread_file(home: &Path, thread: &str) -> PathBuf {
    home.join("cluster").join("threads").join(&crate::runs::sha256::hex(thread.as_bytes())[..32])
}

/// The node of a hub's AG-UI run: `forwardedProps.node`, else the node the
/// thread was started on at this hub; `None`: the sidecar looks it up in
/// the cluster (a thread another hub started), or answers 400; `Err` the
/// 400's message.
fn agui_node(home: &Path, body: &[u8], thread: &str) -> Result<Option<String>, String> {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    match v.pointer("/forwardedProps/node") {
        Some(serde_json::Value::String(n)) if crate::runs::valid_node(n) => Ok(Some(n.clone())),
        Some(n) => Err(format!("forwardedProps.node {n}: a node name is {}", crate::runs::NODE_RULE)),
        None => Ok(std::fs::read_to_string(thread_file(home, thread))
            .ok()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())),
    }
}

/// At a hub, `POST /agui`: the run goes to the thread's node (see
/// `agui_node`) over the channel, through the node's own `/agui` (its
/// rules: one run a thread, interrupt ids bound to the thread, a resume
/// that must address every open interrupt, a retried runId replayed, never
/// run twice); its SSE body streamed back as the node writes it. A node not
/// connected is 503 at once, one that does not start answering within 5 s
/// 504, each naming it. A client that leaves is a client leaving the node's
/// server. `None` when this server is not a hub.
pub fn agui(
    cfg: &super::options::Config,
    stream: &mut std::net::TcpStream,
    req: &super::http::Request,
    body: &[u8],
    cors: &[(&'static str, String)],
) -> Option<super::http::Close> {
    use super::http::{respond_error, Close};
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
    if let Some(node) = node.as_deref().filter(|n| std::fs::read_to_string(&tf).ok().as_deref() != Some(*n)) {
        let _ = std::fs::create_dir_all(tf.parent().unwrap_or(home));
        let _ = crate::runs::write_atomic(&tf, node.as_bytes());
    }
    let what = node.as_ref().map_or_else(|| "the thread's node".to_string(), |n| format!("node {n}"));
    let head = Head {
        op: "agui".into(),
        node,
        // The caller's token name (else this server's), journaled at the node with the hub.
        actor: Some(super::options::person(cfg, req, super::options::BIN)),
        checked: cfg.token.is_some(),
        budget_ms: Some(FORWARD_BUDGET_MS),
        deadline_ms: deadline(),
        ..Default::default()
    };
    Some(relay(cfg, stream, req, cors, head, body, &what, false))
}

/// At a hub, `GET /runs/events`: the merged feed of every node, read from
/// the cluster's feed stream by the sidecar (one consumer fanned out to
/// every client over the channel), each event's id its stream sequence
/// (the same at every hub: a client resumes at any hub with its
/// Last-Event-ID), `runId` the hub's and `node` added. `None` when this
/// server is not a hub.
pub fn feed(
    cfg: &super::options::Config,
    stream: &mut std::net::TcpStream,
    req: &super::http::Request,
    cors: &[(&'static str, String)],
) -> Option<super::http::Close> {
    use super::http::{respond_error, Close};
    if !is_hub() {
        return None;
    }
    let mut head = Head { op: "feed".into(), query: req.query.clone(), ..Default::default() };
    if let Some(v) = req.header("last-event-id") {
        match v.trim().parse::<u64>() {
            Ok(n) => head.since = Some(n),
            Err(_) => {
                respond_error(stream, 400, cors, &format!("Last-Event-ID {v:?} is not an event id of this feed"));
                return Some(Close::Linger);
            }
        }
    }
    // Each node filtered its own events' approval links by its own home's
    // prefixes; what this hub's clients may follow is under this hub's.
    Some(relay(cfg, stream, req, cors, head, &[], "the cluster's feed", true))
}

/// Opens a stream on the channel and relays its answer: the first frame
/// is the answer (status, body); a 200 is an SSE body, copied frame by
/// frame (keep-alives and the client looked at while it is quiet) until
/// its `end`; anything else is answered as it is. A client that leaves
/// cancels the stream (the sidecar tells the node, for `agui`); one that
/// does not keep up is dropped with an `error` frame saying so (it resumes
/// with its Last-Event-ID). `links`: frames are feed events, whose
/// approval links pass only under this home's recorded prefixes
/// ([`crate::runs::link_prefixes`]).
#[allow(clippy::too_many_arguments)] // one relay's parts, each needed once
fn relay(
    cfg: &super::options::Config,
    stream: &mut std::net::TcpStream,
    req: &super::http::Request,
    cors: &[(&'static str, String)],
    head: Head,
    data: &[u8],
    who: &str,
    links: bool,
) -> super::http::Close {
    use super::http::{respond, respond_error, Close};
    let ch = match channel(who) {
        Ok(c) => c,
        Err((code, body)) => {
            let _ = respond(stream, code, cors, &body);
            return Close::Linger;
        }
    };
    // A run a node took (it asked the sidecar's "go" within the 5 s
    // budget) may take the node's grace more to answer; anything else is
    // answered within the sidecar's own bounds (5 s to a node, 5 s to the
    // stream's info).
    let deadline = head.deadline_ms;
    let mut open = match ch.open(head, data) {
        Ok(o) => o,
        Err(e) => {
            respond_error(stream, 503, cors, &format!("{who}: the cluster sidecar: {e}"));
            return Close::Linger;
        }
    };
    let first = match deadline {
        // A run: not taken by its deadline, 504 (never run); taken, then
        // past the sidecar's own bounds, 502 (it may have started).
        Some(d) => {
            ch.wait(&mut open, d, Duration::from_millis(FORWARD_BUDGET_MS + RUNNING_GRACE_MS + 5000), who, "run")
        }
        // The feed: answered within the sidecar's own bounds (5 s to the stream's info).
        None => open
            .rx
            .recv_timeout(Duration::from_millis(FORWARD_BUDGET_MS + 10_000))
            .map_err(|_| (503, format!("{who}: the cluster sidecar did not answer"))),
    };
    let (code, text) = match first {
        Ok((h, d)) if h.op == "answer" => (h.status.unwrap_or(502), String::from_utf8_lossy(&d).into_owned()),
        Ok((h, _)) => {
            open.ended = h.op == "end";
            respond_error(stream, 503, cors, &format!("{who}: {}", h.error.unwrap_or(h.op)));
            return Close::Linger;
        }
        Err((code, m)) => {
            respond_error(stream, code, cors, &m);
            return Close::Linger;
        }
    };
    if code != 200 {
        open.ended = true;
        let _ = respond(stream, code, cors, &text);
        return Close::Linger;
    }
    let mut body = match super::stream::Stream::start(stream, req, cors, 8 * 1024 * 1024, cfg.write_timeout) {
        Ok(b) => b,
        Err(_) => return Close::Now,
    };
    loop {
        match open.rx.recv_timeout(Duration::from_millis(100)) {
            Ok((h, d)) => {
                if h.op == "end" {
                    open.ended = true;
                    if let Some(e) = h.error {
                        let v = serde_json::json!({"type": "error", "message": format!("{who}: {e}")});
                        body.push(format!("event: error\ndata: {v}\n\n").as_bytes());
                    }
                    let _ = body.end();
                    break;
                }
                if links && memchr::memmem::find(&d, b"\"links\"").is_some() {
                    let prefixes = crate::runs::link_prefixes::LinkPrefixes::read(&cfg.harness_home);
                    body.push(&prefixes.scrub_sse(&d));
                } else {
                    body.push(&d);
                }
                // A client that cannot take what is queued is dropped (the write timeout).
                if !body.has_room() || body.flush().is_err() || body.check().is_err() {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if body.heartbeat(cfg.keepalive).is_err() {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let why = if open.dropped.load(Ordering::SeqCst) {
                    "this client fell behind and was dropped: reconnect with its Last-Event-ID"
                } else {
                    "the cluster sidecar ended"
                };
                let v = serde_json::json!({"type": "error", "message": format!("{who}: {why}")});
                body.push(format!("event: error\ndata: {v}\n\n").as_bytes());
                let _ = body.end();
                break;
            }
        }
    }
    // Done, or the client left: `open` dropped tells the sidecar.
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
    // Its stdin and stdout are the channel; it ends when its stdin does.
    cmd.args(argv).stdin(Stdio::piped()).stdout(Stdio::piped());
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
///
/// A node has taken its name first ([`take_name`]); its sidecar renews it.
pub fn start(args: &ClusterArgs, home: &Path, port: u16, token_file: Option<&Path>, bin: &str) -> Option<Sidecar> {
    let mut argv = args.argv(home, port, token_file)?;
    argv.push("--channel".into());
    let ch = channel::CHANNEL.get_or_init(|| Arc::new(Channel::default())).clone();
    if args.hub {
        let _ = HUB_HOME.set(home.to_path_buf());
    }
    let child = Arc::new(Mutex::new(None::<Child>));
    let stop = Arc::new(AtomicBool::new(false));
    let (c2, s2, bin) = (child.clone(), stop.clone(), bin.to_string());
    let what = if args.hub { "hub".to_string() } else { format!("node {}", args.node.clone().unwrap_or_default()) };
    cli::report(&bin, format!("cluster: {what} of {} (runwire-cluster)", args.cluster.clone().unwrap_or_default()));
    // Spawned from this thread, which lives as long as the server: the
    // parent-death signal follows the thread that forked.
    let _ = std::thread::Builder::new().name("cluster".into()).spawn(move || {
        let mut reader = None::<std::thread::JoinHandle<()>>;
        let hub = HUB_HOME.get().is_some();
        while !s2.load(Ordering::SeqCst) {
            match spawn(&argv) {
                Ok(mut c) => {
                    // Non-blocking: a sidecar that reads nothing never holds a thread for long (`send`).
                    if let Some(i) = &c.stdin {
                        use nix::fcntl::{fcntl, FcntlArg, OFlag};
                        use std::os::fd::AsRawFd;
                        let _ = fcntl(i.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
                    }
                    ch.heard.store(monotonic_ms(), Ordering::SeqCst);
                    ch.hung.store(false, Ordering::SeqCst);
                    ch.pid.store(c.id() as i32, Ordering::SeqCst);
                    *ch.writer.lock().unwrap_or_else(|e| e.into_inner()) = c.stdin.take();
                    if let Some(out) = c.stdout.take() {
                        let ch2 = ch.clone();
                        reader =
                            std::thread::Builder::new().name("cluster-read".into()).spawn(move || ch2.read(out)).ok();
                    }
                    *c2.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
                }
                Err(e) => cli::report(&bin, format!("cluster: cannot start {}: {e}", program().display())),
            }
            // Wait for it to end, without holding the lock while it runs;
            // a hub's pinged meanwhile: one that says nothing for 5 s
            // (stopped, hung) is killed, and started again at once.
            let mut pinged = std::time::Instant::now();
            loop {
                std::thread::sleep(Duration::from_millis(200));
                // (A node's sidecar serves nobody on the channel: a stopped
                // one is a node the hubs judge lost, as it is.)
                if hub && !s2.load(Ordering::SeqCst) {
                    ch.watch(&mut pinged);
                }
                let mut g = c2.lock().unwrap_or_else(|e| e.into_inner());
                match g.as_mut().map(|c| c.try_wait()) {
                    Some(Ok(None)) => continue,
                    // Exit 2: a usage error, or the node's name is another
                    // machine's now (it said so): starting it again changes neither.
                    Some(Ok(Some(st))) if !s2.load(Ordering::SeqCst) && st.code() == Some(2) => {
                        cli::report(
                            &bin,
                            format!(
                                "cluster: runwire-cluster ended ({st}, said above); serving locally, not restarting it"
                            ),
                        );
                        s2.store(true, Ordering::SeqCst);
                    }
                    Some(Ok(Some(st))) if !s2.load(Ordering::SeqCst) && !ch.hung.load(Ordering::SeqCst) => {
                        cli::report(
                            &bin,
                            format!("cluster: runwire-cluster ended ({st}); serving locally, restarting it in 5 s"),
                        );
                    }
                    _ => {}
                }
                *g = None;
                ch.pid.store(0, Ordering::SeqCst);
                *ch.writer.lock().unwrap_or_else(|e| e.into_inner()) = None;
                break;
            }
            // Its pipe read to the end (every stream of it told) before another starts.
            if let Some(r) = reader.take() {
                for _ in 0..50 {
                    if r.is_finished() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            if ch.hung.load(Ordering::SeqCst) {
                continue;
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
        // Its stdin closed: it ends on its own; SIGTERM too, then SIGKILL.
        if let Some(ch) = channel::CHANNEL.get() {
            *ch.writer.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        if let Some(mut c) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM);
            for _ in 0..25 {
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
    use super::channel::{write_within, Frame, Slot};
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
        // The sidecar's bound too (its names are KV keys and subject tokens): it refused a longer
        // name only after the server had started.
        assert!(args(Some("nats://127.0.0.1:4222"), Some(&"n".repeat(64)), false).check().is_ok());
        let long = args(Some("nats://127.0.0.1:4222"), Some(&"n".repeat(65)), false).check().unwrap_err();
        assert!(long.contains("1 to 64"), "{long}");
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
    fn frames_carry_any_bytes_and_refuse_what_is_too_large_or_cut() {
        let head = Head {
            op: "control".into(),
            id: 7,
            node: Some("alpha".into()),
            verb: Some("answer".into()),
            budget_ms: Some(5000),
            ..Default::default()
        };
        let data: Vec<u8> = (0..=255u8).cycle().take(300 * 1024).collect();
        let bytes = encode(&head, &data).unwrap();
        let mut r = std::io::Cursor::new([bytes.clone(), bytes.clone()].concat());
        for _ in 0..2 {
            assert_eq!(read_frame(&mut r).unwrap(), Some((head.clone(), data.clone())));
        }
        assert_eq!(read_frame(&mut r).unwrap(), None);
        // Unknown and absent fields: the head's JSON names only what is set.
        let text = String::from_utf8_lossy(&bytes[8..8 + 80]).to_string();
        assert!(
            text.starts_with(r#"{"op":"control","id":7,"node":"alpha","verb":"answer","budgetMs":5000}"#),
            "{text}"
        );
        assert!(encode(&head, &vec![0u8; MAX_FRAME]).is_err());
        let mut huge = ((MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
        huge.extend_from_slice(&[0; 16]);
        assert!(read_frame(&mut std::io::Cursor::new(huge)).is_err());
        assert!(read_frame(&mut std::io::Cursor::new(bytes[..bytes.len() - 1].to_vec())).is_err());
        assert!(decode(&[0, 0, 0, 9, b'{']).is_err());
    }

    #[test]
    fn a_stream_that_does_not_keep_up_is_dropped_and_the_others_get_everything() {
        let ch = Channel::default();
        let (mut rxs, mut flags) = (Vec::new(), Vec::new());
        for id in [1, 2] {
            let (tx, rx) = std::sync::mpsc::sync_channel(STREAM_QUEUE);
            let dropped = Arc::new(AtomicBool::new(false));
            ch.streams.lock().unwrap().insert(id, Slot { tx, dropped: dropped.clone() });
            rxs.push(rx);
            flags.push(dropped);
        }
        // Stream 1's client reads nothing; stream 2's reads all, after.
        let mut pipe = Vec::new();
        for i in 0..STREAM_QUEUE + 100 {
            let data = format!("frame {i}");
            pipe.extend(encode(&Head { op: "data".into(), id: 1, ..Default::default() }, data.as_bytes()).unwrap());
            if i % 2 == 0 {
                pipe.extend(encode(&Head { op: "data".into(), id: 2, ..Default::default() }, data.as_bytes()).unwrap());
            }
        }
        pipe.extend(encode(&Head { op: "end".into(), id: 2, ..Default::default() }, b"").unwrap());
        // The reader never waits on a client: it reads the whole pipe at once.
        ch.read(std::io::Cursor::new(pipe));
        assert!(flags[0].load(Ordering::SeqCst) && !flags[1].load(Ordering::SeqCst));
        assert_eq!(rxs[0].try_iter().count(), STREAM_QUEUE, "stream 1 kept its queue's worth, then was dropped");
        assert!(matches!(rxs[0].try_recv(), Err(std::sync::mpsc::TryRecvError::Disconnected)));
        let got: Vec<Frame> = rxs[1].try_iter().collect();
        assert_eq!(got.len(), (STREAM_QUEUE + 100).div_ceil(2) + 1);
        assert_eq!(got.last().unwrap().0.op, "end");
        assert!(ch.streams.lock().unwrap().is_empty());
    }

    #[test]
    fn a_pipe_nobody_reads_holds_a_writer_for_the_wait_only() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let mut w = std::fs::File::from(w);
        nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&w),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        let t = std::time::Instant::now();
        let e = write_within(&mut w, &vec![7u8; 1024 * 1024], Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        // A reader that drains it: everything arrives.
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut std::fs::File::from(r), &mut all).unwrap();
            all.len()
        });
        write_within(&mut w, &vec![7u8; 1024 * 1024], Duration::from_secs(5)).unwrap();
        drop(w);
        assert!(reader.join().unwrap() >= 1024 * 1024);
    }

    /// A request's first word: none by its deadline is a 504 that stays
    /// true; `took`, then the sidecar gone, a 502; an answer is the answer.
    #[test]
    fn a_request_not_taken_by_its_deadline_is_504_and_one_taken_then_lost_502() {
        let ch = Channel::default();
        let open = |id: u64| {
            let (tx, rx) = std::sync::mpsc::sync_channel(STREAM_QUEUE);
            let dropped = Arc::new(AtomicBool::new(false));
            ch.streams.lock().unwrap().insert(id, Slot { tx: tx.clone(), dropped: dropped.clone() });
            (tx, channel::Open { id, pid: 0, rx, dropped, ended: true })
        };
        let frame = |op: &str| (Head { op: op.into(), ..Default::default() }, Vec::new());
        let running = Duration::from_secs(30);
        // Nothing said by the deadline (past already): 504 once the killed
        // sidecar's pipe is read to its end (here 2 s on), not the running wait.
        let (tx, mut o) = open(1);
        let t = std::time::Instant::now();
        let e = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_secs(2));
                ch.streams.lock().unwrap().clear();
                drop(tx);
            });
            ch.wait(&mut o, monotonic_ms(), running, "node alpha", "command").unwrap_err()
        });
        assert_eq!(e.0, 504, "{e:?}");
        assert!(e.1.starts_with("node alpha: ") && e.1.contains("will not run"), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
        // Taken, then the sidecar gone: it may have run.
        let (tx, mut o) = open(2);
        tx.send(frame("took")).unwrap();
        drop(tx);
        ch.streams.lock().unwrap().clear();
        let e = ch.wait(&mut o, monotonic_ms() + 5000, running, "node alpha", "command").unwrap_err();
        assert_eq!(e.0, 502, "{e:?}");
        assert!(e.1.contains("may have run"), "{e:?}");
        // Gone before it took it: never forwarded.
        let (tx, mut o) = open(3);
        drop(tx);
        ch.streams.lock().unwrap().clear();
        assert_eq!(ch.wait(&mut o, monotonic_ms() + 5000, running, "node alpha", "command").unwrap_err().0, 504);
        // Taken and answered: the answer.
        let (tx, mut o) = open(4);
        tx.send(frame("took")).unwrap();
        tx.send(frame("answer")).unwrap();
        let (h, _) = ch.wait(&mut o, monotonic_ms() + 5000, running, "node alpha", "command").unwrap();
        assert_eq!(h.op, "answer");
    }

    #[test]
    fn a_node_with_a_token_needs_cluster_credentials() {
        std::env::remove_var(TOKEN_ENV);
        let node = args(Some("nats://127.0.0.1:1"), Some("alpha"), false);
        assert!(node.check_door(false).is_ok());
        let e = node.check_door(true).unwrap_err();
        assert!(e.starts_with("--cluster: node alpha: ") && e.contains("--cluster-creds"), "{e}");
        let with = ClusterArgs { cluster_user: Some("node-alpha".into()), ..node.clone() };
        assert!(with.check_door(true).is_ok());
        let with = ClusterArgs { cluster_creds: Some("/c.creds".into()), ..node };
        assert!(with.check_door(true).is_ok());
        // A hub has no control door of its own.
        assert!(args(Some("nats://127.0.0.1:1"), None, true).check_door(true).is_ok());
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
        // The name is taken first with the same connection flags, without the server's address or token.
        let lease = name::lease_argv(
            &args(Some("nats://x:1"), Some("n1"), false).argv(home, 8787, Some(Path::new("/t"))).unwrap(),
        );
        assert_eq!(lease, ["lease", "--url", "nats://x:1", "--node", "n1", "--home", "/h"]);
        let hub = args(Some("nats://x:1"), None, true).argv(home, 8787, None).unwrap();
        assert_eq!(hub, ["hub", "--url", "nats://x:1", "--home", "/h"]);
        assert_eq!(args(None, None, false).argv(home, 1, None), None);
        // Without --hub nothing is forwarded.
        assert_eq!(forward("alpha.run", Some("t"), "kill", b"", None, None, false), None);
    }
}
