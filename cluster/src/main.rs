//! `runwire-cluster`: the cluster sidecar (spec/CLUSTER.md).
//!
//! Exit codes: 0 stopped by SIGINT/SIGTERM (node, hub) or done (setup,
//! control, nodes, lease); 2 usage (also: setup's --replicas 1 on a cluster of several servers without --allow-single-replica), or the node's name is held by another
//! machine (node, lease); 3 the cluster cannot be reached or lacks its
//! streams and buckets (one-shot commands: node and hub wait for them).

use clap::{Parser, Subcommand};
use runwire::util::cli::Exit;
use runwire_cluster::{channel, conn, fanout, forward, hub, liveness, names, node, report, setup};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// runwire's cluster sidecar: publishes a node's runs to NATS JetStream, or mirrors every
/// node's runs into a hub's harness home. Usually started by `runwire-serve --cluster URL
/// --node NAME` or `runwire-serve --cluster URL --hub`.
#[derive(Parser, Debug)]
#[command(
    name = "runwire-cluster",
    version,
    after_help = "Exit status: 0 stopped by SIGINT/SIGTERM (node, hub) or done (setup, control, nodes, lease); 2 usage error, or the node's name is held by another machine (node, lease); 3 the cluster cannot be reached or lacks its streams and buckets (setup, control, nodes; node and hub wait for them, saying so on stderr).\nEnvironment: RUNWIRE_CLUSTER_PASSWORD, the password of --user without --password-file; RUNWIRE_CLUSTER_TOKEN, the token when no credentials are given (files are better: an agent started by the node's server inherits its environment).\nSee spec/CLUSTER.md (Security) and examples/cluster/accounts.conf."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create (or update) the streams and buckets: an admin's job, once per cluster.
    Setup {
        #[command(flatten)]
        conn: conn::Conn,
        /// Replicas of each stream and bucket, 1 to 5 (default: the cluster's size, at most 5).
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
        replicas: Option<u8>,
        /// Allow --replicas 1 on a cluster of several servers (the streams then live on one
        /// server, and go with it).
        #[arg(long)]
        allow_single_replica: bool,
        /// Days the streams keep messages (0: until removed); --feed-max-age-days and
        /// --files-max-age-days set one stream's.
        #[arg(long, value_name = "DAYS", default_value_t = 30)]
        max_age_days: u64,
        /// Days RUNWIRE_FEED keeps its events (default --max-age-days).
        #[arg(long, value_name = "DAYS")]
        feed_max_age_days: Option<u64>,
        /// Days RUNWIRE_FILES keeps the runs' files (default --max-age-days).
        #[arg(long, value_name = "DAYS")]
        files_max_age_days: Option<u64>,
        /// Seconds instead of days, for both streams (tests; overrides the days).
        #[arg(long, value_name = "SECONDS", hide = true)]
        max_age_secs: Option<u64>,
        /// Bytes RUNWIRE_FEED keeps (0: no limit, else at least 1048576); the oldest events go first.
        #[arg(long, value_name = "BYTES", default_value_t = 0)]
        feed_max_bytes: u64,
        /// Bytes RUNWIRE_FILES keeps (0: no limit, else at least 65536); the oldest chunks go first,
        /// and a hub that misses a file's start asks its node to publish the file again, whole (a
        /// file over three quarters of the limit cannot be: the hub says so).
        #[arg(long, value_name = "BYTES", default_value_t = 0)]
        files_max_bytes: u64,
    },
    /// Publish this machine's harness home (runs, feed, task logs) to the cluster, until stopped.
    Node {
        #[command(flatten)]
        conn: conn::Conn,
        /// This node's name: A-Z a-z 0-9 _ -, unique in the cluster.
        #[arg(long, value_name = "NAME")]
        node: String,
        /// The harness home to publish (default $HARNESS_HOME, else ~/.harness).
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        /// How often every run's files are looked at in full, in milliseconds: the safety net
        /// (changes are published as soon as inotify reports them).
        #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
        poll_ms: u64,
        /// How often the node's heartbeat (its name's lease) is written, in milliseconds. Hubs
        /// call the node lost after three missed beats.
        #[arg(long, value_name = "MS", default_value_t = liveness::DEFAULT_HEARTBEAT_MS, value_parser = clap::value_parser!(u64).range(100..=liveness::MAX_HEARTBEAT_MS))]
        heartbeat_ms: u64,
        /// This node's runwire-serve (HOST:PORT): control requests from the cluster (rwctl.NAME)
        /// are made to it, so they follow its routes' rules. Without it, none are answered.
        #[arg(long, value_name = "HOST:PORT")]
        local: Option<String>,
        /// The token file of that server (--token-file), when it has one. Control requests are
        /// then answered only on a cluster that authenticates its clients.
        #[arg(long, value_name = "FILE", requires = "local")]
        local_token_file: Option<PathBuf>,
        /// Serve runwire-serve's channel on stdin and stdout, and end when stdin does (how
        /// runwire-serve starts its sidecar).
        #[arg(long)]
        channel: bool,
    },
    /// Mirror every node's runs into this harness home (served by `runwire-serve --hub`), until stopped.
    Hub {
        #[command(flatten)]
        conn: conn::Conn,
        /// The hub's harness home (default $HARNESS_HOME, else ~/.harness).
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        /// The hub's name, told to the node with every command it forwards (the node's journal
        /// says `<person>@<name>`): A-Z a-z 0-9 . _ -, at most 64 bytes (default: the host name).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Serve runwire-serve's channel on stdin and stdout (its control requests, AG-UI runs
        /// and feed clients, all over one connection), and end when stdin does.
        #[arg(long)]
        channel: bool,
    },
    /// Forward one control request to a node (as a hub does) and print its answer as
    /// {"status":N,"body":"..."}: the node's own, or 503 (the node is not connected) or 504 (no
    /// answer within --timeout-ms), naming the node.
    Control {
        #[command(flatten)]
        conn: conn::Conn,
        /// The node that owns the run.
        #[arg(long, value_name = "NAME")]
        node: String,
        /// The route, e.g. /runs/RUN/tasks/TASK/steer (only POST control routes are forwarded).
        #[arg(long, value_name = "PATH")]
        path: String,
        /// The JSON body, e.g. {"msg":"use the other API"} (a command line is readable by every
        /// user of the machine: '-' reads it from stdin).
        #[arg(long, value_name = "JSON", default_value = "")]
        body: String,
        /// The request's idempotency key: a retry with the same key is answered once, never
        /// acted on twice (default: a new key).
        #[arg(long, value_name = "ID")]
        id: Option<String>,
        /// The command's budget: how long the node has to take it, in milliseconds (a node that
        /// takes it later never runs it).
        #[arg(long, value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
        timeout_ms: u64,
    },
    /// Forward one AG-UI run (`POST /agui`, its RunAgentInput on stdin) to a node, as a hub
    /// does: prints the answer's {"status":N,"body":"..."} line (the node's own, or 503/504
    /// naming the node), then after a 200 the SSE body as the node's server writes it.
    Agui {
        #[command(flatten)]
        conn: conn::Conn,
        /// The node that runs the thread.
        #[arg(long, value_name = "NAME")]
        node: String,
        /// How long the node has to start answering, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
        timeout_ms: u64,
    },
    /// The merged feed of every node (`GET /runs/events` at a hub): prints the answer's
    /// {"status":N,"body":"..."} line, then after a 200 the SSE frames, each event's id its
    /// RUNWIRE_FEED stream sequence, until stopped.
    Feed {
        #[command(flatten)]
        conn: conn::Conn,
        /// The query of the request (run=, status=, repo=, type=, since=).
        #[arg(long, value_name = "QUERY", default_value = "")]
        query: String,
        /// The last event id the client has (its Last-Event-ID); default: from now.
        #[arg(long, value_name = "ID")]
        since: Option<u64>,
    },
    /// Print each node's last heartbeat, one JSON object a line: {"node","ts","ageMs","state",...}
    /// (state: up, or lost after three missed beats).
    Nodes {
        #[command(flatten)]
        conn: conn::Conn,
        /// Free the name NAME (its lease) instead: for a node that is dead (admin credentials;
        /// a live node takes its name back at its next heartbeat).
        #[arg(long, value_name = "NAME")]
        remove: Option<String>,
    },
    /// Take (or renew) node NAME's lease for the harness home, once, and exit: 0 taken, 2 held
    /// by another machine (named on stderr). runwire-serve --node does this before it starts.
    Lease {
        #[command(flatten)]
        conn: conn::Conn,
        /// The node's name.
        #[arg(long, value_name = "NAME")]
        node: String,
        /// The node's harness home (default $HARNESS_HOME, else ~/.harness): its holder id.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = match runwire::util::cli::parse_args::<Cli>() {
        Ok(c) => c,
        Err(code) => return code,
    };
    // The flag that named the node, for the message.
    let named = match &cli.cmd {
        Cmd::Node { node, .. } | Cmd::Control { node, .. } | Cmd::Agui { node, .. } | Cmd::Lease { node, .. } => {
            Some(("--node", node))
        }
        Cmd::Nodes { remove: Some(node), .. } => Some(("--remove", node)),
        _ => None,
    };
    if let Some((flag, node)) = named {
        if let Err(e) = names::check_node(node) {
            report(format!("{flag}: {e}"));
            return Exit::Usage.into();
        }
    }
    let hub_name = match &cli.cmd {
        Cmd::Hub { name, .. } => match hub_name(name.as_deref()) {
            Ok(n) => n,
            Err(e) => {
                report(format!("--name: {e}"));
                return Exit::Usage.into();
            }
        },
        _ => String::new(),
    };
    let mut conn = match &cli.cmd {
        Cmd::Setup { conn, .. }
        | Cmd::Node { conn, .. }
        | Cmd::Hub { conn, .. }
        | Cmd::Control { conn, .. }
        | Cmd::Agui { conn, .. }
        | Cmd::Feed { conn, .. }
        | Cmd::Lease { conn, .. }
        | Cmd::Nodes { conn, .. } => conn.clone(),
    };
    // A node's replies come to its own inbox (the only one its user may read).
    if let Cmd::Node { node, .. } | Cmd::Lease { node, .. } = &cli.cmd {
        conn.inbox_prefix.get_or_insert_with(|| conn::node_inbox(node));
    }
    if let Err(e) = conn::check(&conn) {
        report(format!("{e:#}"));
        return Exit::Usage.into();
    }
    // Stoppable whatever mask it was started with (a parent that waits for
    // signals in one thread blocks them in the others, and children inherit it).
    let _ = nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    );
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            report(format!("cannot start the runtime: {e}"));
            return Exit::Io.into();
        }
    };
    let r = rt.block_on(async move {
        let conn = conn;
        let what = match &cli.cmd {
            Cmd::Setup { .. } => "setup".to_string(),
            Cmd::Node { node, .. } => format!("node {node}"),
            Cmd::Hub { .. } => "hub".to_string(),
            Cmd::Nodes { .. } => "nodes".to_string(),
            Cmd::Lease { node, .. } => format!("lease {node}"),
            Cmd::Control { .. } => "control".to_string(),
            Cmd::Agui { .. } => "agui".to_string(),
            Cmd::Feed { .. } => "feed".to_string(),
        };
        // `agui` tells the node when it is stopped (its client left): it sees the signal itself.
        let own_stop = matches!(cli.cmd, Cmd::Agui { .. });
        // A sidecar waits for the cluster; a one-shot command fails at once.
        let wait = matches!(cli.cmd, Cmd::Node { .. } | Cmd::Hub { .. });
        let client = conn::connect(&conn, &format!("runwire {what}"), wait).await?;
        let work = async {
            match cli.cmd {
                Cmd::Setup {
                    replicas,
                    allow_single_replica,
                    max_age_days,
                    feed_max_age_days,
                    files_max_age_days,
                    max_age_secs,
                    feed_max_bytes,
                    files_max_bytes,
                    ..
                } => {
                    let size = setup::cluster_size(&client.server_info());
                    let replicas = setup::replicas(replicas.map(usize::from), size, allow_single_replica)
                        .map_err(|e| UsageError(format!("{e:#}")))?;
                    let age = |days: Option<u64>| match max_age_secs {
                        Some(s) => Duration::from_secs(s),
                        None => Duration::from_secs(days.unwrap_or(max_age_days) * 86_400),
                    };
                    let o = setup::Opts {
                        replicas,
                        feed: setup::Limits { max_age: age(feed_max_age_days), max_bytes: feed_max_bytes },
                        files: setup::Limits { max_age: age(files_max_age_days), max_bytes: files_max_bytes },
                    };
                    setup::check_limits(&o).map_err(|e| UsageError(format!("{e:#}")))?;
                    setup::run(client, o).await
                }
                Cmd::Node { node, home, poll_ms, heartbeat_ms, local, local_token_file, channel, .. } => {
                    let home = home.unwrap_or_else(runwire::runs::harness_home);
                    if let Some(addr) = local {
                        let local = forward::Local { addr, token_file: local_token_file, home: home.clone() };
                        let (c, n, url) = (client.clone(), node.clone(), conn.url.clone());
                        tokio::spawn(async move {
                            // What the servers require is known once connected.
                            while c.connection_state() != async_nats::connection::State::Connected {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                            // No door weaker than HTTP: a server that requires a token is
                            // controlled from the cluster only where the cluster checks who connects.
                            if local.token_file.is_some() && !c.server_info().auth_required {
                                return report(format!(
                                    "node {n}: control: refused: this node's server requires a token, and the \
                                     cluster at {url} lets clients in without credentials (anyone could answer \
                                     its agents); control requests (rwctl.{n}) are not answered. Give the node \
                                     credentials on a cluster that requires them."
                                ));
                            }
                            if let Err(e) = forward::serve(c, n, local).await {
                                report(format!("control: {e:#}"));
                            }
                        });
                    }
                    let o = node::Opts {
                        node,
                        home,
                        poll: Duration::from_millis(poll_ms),
                        heartbeat: Duration::from_millis(heartbeat_ms),
                    };
                    // On a worker of the runtime, not this thread: the connection's
                    // task then sends what the loop publishes from the same worker
                    // (tokio runs a task woken by the running one next, there),
                    // not after waking another thread.
                    let run =
                        async { tokio::spawn(node::run(client, o)).await.map_err(|e| anyhow::anyhow!("node: {e}"))? };
                    if channel {
                        let pipe = channel::serve(channel::Role::Node, tokio::io::stdin(), tokio::io::stdout());
                        tokio::select! {
                            r = run => r,
                            r = pipe => r,
                        }
                    } else {
                        run.await
                    }
                }
                Cmd::Hub { home, channel, .. } => {
                    let o = hub::Opts { home: home.unwrap_or_else(runwire::runs::harness_home) };
                    tokio::spawn(liveness::watch(client.clone(), o.home.clone()));
                    if channel {
                        let role = channel::Role::Hub {
                            client: client.clone(),
                            fanout: fanout::Fanout::start(client.clone()),
                            name: hub_name,
                        };
                        let pipe = channel::serve(role, tokio::io::stdin(), tokio::io::stdout());
                        tokio::select! {
                            r = hub::run(client, o) => r,
                            r = pipe => r,
                        }
                    } else {
                        hub::run(client, o).await
                    }
                }
                Cmd::Nodes { remove: Some(n), .. } => liveness::remove(client, &n).await,
                Cmd::Nodes { .. } => nodes(client).await,
                Cmd::Lease { node, home, .. } => {
                    let home = home.unwrap_or_else(runwire::runs::harness_home);
                    let js = async_nats::jetstream::new(client);
                    let (_, _, _, nodes) = node::bind(&js).await?;
                    let me = liveness::Me::new(&node, &home, Duration::from_millis(2000))?;
                    let rev = liveness::take(&nodes, &me).await?;
                    println!("{}", serde_json::json!({"node": node, "holder": me.holder, "revision": rev}));
                    Ok(())
                }
                Cmd::Feed { query, since, .. } => {
                    let (sink, done) = channel::Sink::text(tokio::io::stdout());
                    fanout::Fanout::start(client).client(&query, since, &sink).await;
                    drop(sink);
                    let _ = done.await;
                    Ok(())
                }
                Cmd::Control { node, path, body, id, timeout_ms, .. } => {
                    let body = if body == "-" {
                        let mut b = Vec::new();
                        tokio::io::AsyncReadExt::read_to_end(
                            &mut tokio::io::AsyncReadExt::take(tokio::io::stdin(), forward::MAX_BODY as u64 + 1),
                            &mut b,
                        )
                        .await
                        .map_err(|e| anyhow::anyhow!("stdin: {e}"))?;
                        b
                    } else {
                        body.into_bytes()
                    };
                    let c = forward::Command {
                        node,
                        method: "POST".into(),
                        path,
                        form: false,
                        body,
                        key: id.unwrap_or_else(forward::new_key),
                        actor: "runwire-cluster control".into(),
                        hub: None,
                        // No hub: the caller's own cluster credentials let it ask.
                        checked: false,
                        budget: Duration::from_millis(timeout_ms),
                        until: None,
                    };
                    let a = forward::command(&client, &c).await;
                    println!("{}", serde_json::to_string(&a)?);
                    Ok(())
                }
                Cmd::Agui { node, timeout_ms, .. } => {
                    let mut body = String::new();
                    tokio::io::AsyncReadExt::read_to_string(
                        &mut tokio::io::AsyncReadExt::take(tokio::io::stdin(), forward::MAX_BODY as u64 + 1),
                        &mut body,
                    )
                    .await
                    .map_err(|e| anyhow::anyhow!("stdin: {e}"))?;
                    let (sink, done) = channel::Sink::text(tokio::io::stdout());
                    let r = forward::forward_agui(
                        &client,
                        &node,
                        body,
                        forward::Acting::default(),
                        forward::Due::new(Duration::from_millis(timeout_ms), None),
                        &sink,
                        stopped(),
                    )
                    .await;
                    drop(sink);
                    let _ = done.await;
                    r
                }
            }
        };
        if own_stop {
            return work.await;
        }
        tokio::select! {
            r = work => r,
            _ = stopped() => Ok(()),
        }
    });
    // Not waiting for a blocked read of stdin (the channel) to end.
    rt.shutdown_timeout(Duration::from_millis(100));
    liveness::wait_for_feed(Duration::from_millis(500));
    match r {
        Ok(()) => Exit::Ok.into(),
        // Another machine holds the node's name.
        Err(e) if e.is::<liveness::Refused>() || e.is::<UsageError>() => {
            report(format!("{e:#}"));
            Exit::Usage.into()
        }
        Err(e) => {
            report(format!("{e:#}"));
            Exit::Io.into()
        }
    }
}

/// A usage error found once connected (exit 2), e.g. setup's replicas.
#[derive(Debug)]
struct UsageError(String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// SIGINT or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut i), Ok(mut t)) => {
            tokio::select! {
                _ = i.recv() => {}
                _ = t.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

async fn nodes(client: async_nats::Client) -> anyhow::Result<()> {
    use futures_util::StreamExt;
    let js = async_nats::jetstream::new(client);
    let kv = js
        .get_key_value(names::NODES_BUCKET)
        .await
        .map_err(|e| anyhow::anyhow!("bucket {}: {e}", names::NODES_BUCKET))?;
    // async-nats lists keys with an ordered consumer that ends when nothing
    // is pending; heartbeats rewriting keys meanwhile can keep it from ever
    // seeing that (a test run hung here for minutes), so each try is bounded
    // and a fresh consumer tried again.
    let mut keys: Vec<String> = Vec::new();
    let mut listed = false;
    for _ in 0..3 {
        let list = async {
            let ks = kv.keys().await.map_err(|e| anyhow::anyhow!("{e}"))?;
            anyhow::Ok(ks.filter_map(|k| async { k.ok() }).collect::<Vec<String>>().await)
        };
        if let Ok(r) = tokio::time::timeout(std::time::Duration::from_secs(5), list).await {
            keys = r?;
            listed = true;
            break;
        }
    }
    if !listed {
        anyhow::bail!("bucket {}: listing its keys timed out (3 tries of 5 s)", names::NODES_BUCKET);
    }
    keys.sort();
    keys.dedup();
    let now = node::now_ms();
    for k in keys {
        if let Ok(Some(v)) = kv.get(&k).await {
            if let Ok(serde_json::Value::Object(mut o)) = serde_json::from_slice(&v) {
                let ts = o.get("ts").and_then(|t| t.as_u64()).unwrap_or(0);
                let age = now.saturating_sub(ts);
                o.insert("ageMs".into(), age.into());
                // As a hub judges it (spec/CLUSTER.md, "Nodes"), by this machine's clock.
                let every = o.get("intervalMs").and_then(|t| t.as_u64()).unwrap_or(2000);
                let lost = age > every.saturating_mul(liveness::MISSED_BEATS);
                o.insert("state".into(), if lost { "lost" } else { "up" }.into());
                println!("{}", serde_json::Value::Object(o));
            }
        }
    }
    Ok(())
}

/// A hub's name: the one given (checked), else the host name with anything
/// but A-Z a-z 0-9 . _ - made `-` (`hub` when there is none).
fn hub_name(given: Option<&str>) -> Result<String, String> {
    if let Some(n) = given {
        return if runwire::serve::tokens::valid_name(n) {
            Ok(n.to_string())
        } else {
            Err(format!("{n:?}: a hub name is 1 to 64 of A-Z a-z 0-9 . _ -"))
        };
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let n: String = host
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' })
        .take(runwire::serve::tokens::MAX_NAME)
        .collect();
    Ok(if n.is_empty() { "hub".into() } else { n })
}
