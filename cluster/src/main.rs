//! `runwire-cluster`: the cluster sidecar (spec/CLUSTER.md).
//!
//! Exit codes: 0 stopped by SIGINT/SIGTERM (node, hub) or done (setup,
//! control, nodes); 2 usage; 3 the cluster cannot be reached or lacks its
//! streams and buckets (one-shot commands: node and hub wait for them).

use clap::{Parser, Subcommand};
use runwire::cli::Exit;
use runwire_cluster::{conn, control, hub, names, node, report, setup};
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
    after_help = "Exit status: 0 stopped by SIGINT/SIGTERM (node, hub) or done (setup, control, nodes); 2 usage error; 3 the cluster cannot be reached or lacks its streams and buckets (setup, control, nodes; node and hub wait for them, saying so on stderr).\nSee spec/CLUSTER.md."
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
        /// Replicas of each stream and bucket (1 to 5; 3 for a 3-server cluster).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
        replicas: u8,
        /// Days the streams keep messages (0: until removed).
        #[arg(long, value_name = "DAYS", default_value_t = 30)]
        max_age_days: u64,
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
        /// How often the node's heartbeat is written, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
        heartbeat_ms: u64,
        /// This node's runwire-serve (HOST:PORT): control requests from the cluster (rwctl.NAME)
        /// are made to it, so they follow its routes' rules. Without it, none are answered.
        #[arg(long, value_name = "HOST:PORT")]
        local: Option<String>,
        /// The token file of that server (--token-file), when it has one.
        #[arg(long, value_name = "FILE", requires = "local")]
        local_token_file: Option<PathBuf>,
    },
    /// Mirror every node's runs into this harness home (served by `runwire-serve --hub`), until stopped.
    Hub {
        #[command(flatten)]
        conn: conn::Conn,
        /// The hub's harness home (default $HARNESS_HOME, else ~/.harness).
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
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
        /// The JSON body, e.g. {"msg":"use the other API"}.
        #[arg(long, value_name = "JSON", default_value = "")]
        body: String,
        /// The request's id: a retry with the same id is answered once, never acted on twice
        /// (default: a new id).
        #[arg(long, value_name = "ID")]
        id: Option<String>,
        /// How long the node has to answer, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
        timeout_ms: u64,
    },
    /// Print each node's last heartbeat, one JSON object a line: {"node","ts","ageMs",...}.
    Nodes {
        #[command(flatten)]
        conn: conn::Conn,
    },
}

fn main() -> ExitCode {
    let cli = match runwire::cli::parse_args::<Cli>() {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Cmd::Node { node, .. } | Cmd::Control { node, .. } = &cli.cmd {
        if let Err(e) = names::check_node(node) {
            report(format!("--node: {e}"));
            return Exit::Usage.into();
        }
    }
    let conn = match &cli.cmd {
        Cmd::Setup { conn, .. }
        | Cmd::Node { conn, .. }
        | Cmd::Hub { conn, .. }
        | Cmd::Control { conn, .. }
        | Cmd::Nodes { conn } => conn.clone(),
    };
    if let Err(e) = conn::urls(&conn) {
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
        let what = match &cli.cmd {
            Cmd::Setup { .. } => "setup".to_string(),
            Cmd::Node { node, .. } => format!("node {node}"),
            Cmd::Hub { .. } => "hub".to_string(),
            Cmd::Nodes { .. } => "nodes".to_string(),
            Cmd::Control { .. } => "control".to_string(),
        };
        // A sidecar waits for the cluster; a one-shot command fails at once.
        let wait = matches!(cli.cmd, Cmd::Node { .. } | Cmd::Hub { .. });
        let client = conn::connect(&conn, &format!("runwire {what}"), wait).await?;
        let work = async {
            match cli.cmd {
                Cmd::Setup { replicas, max_age_days, .. } => {
                    let o = setup::Opts {
                        replicas: replicas as usize,
                        max_age: Duration::from_secs(max_age_days * 86_400),
                    };
                    setup::run(client, o).await
                }
                Cmd::Node { node, home, poll_ms, heartbeat_ms, local, local_token_file, .. } => {
                    if let Some(addr) = local {
                        let local = control::Local { addr, token_file: local_token_file };
                        let (c, n) = (client.clone(), node.clone());
                        tokio::spawn(async move {
                            if let Err(e) = control::serve(c, n, local).await {
                                report(format!("control: {e:#}"));
                            }
                        });
                    }
                    let o = node::Opts {
                        node,
                        home: home.unwrap_or_else(runwire::runs::harness_home),
                        poll: Duration::from_millis(poll_ms),
                        heartbeat: Duration::from_millis(heartbeat_ms),
                    };
                    node::run(client, o).await
                }
                Cmd::Hub { home, .. } => {
                    hub::run(client, hub::Opts { home: home.unwrap_or_else(runwire::runs::harness_home) }).await
                }
                Cmd::Nodes { .. } => nodes(client).await,
                Cmd::Control { node, path, body, id, timeout_ms, .. } => {
                    let id = id.unwrap_or_else(|| format!("{}-{}-{}", node::now_ms(), std::process::id(), path.len()));
                    let f = control::Forwarded { method: "POST".into(), path, body };
                    let a = control::forward(&client, &node, &f, &id, Duration::from_millis(timeout_ms)).await;
                    println!("{}", serde_json::to_string(&a)?);
                    Ok(())
                }
            }
        };
        tokio::select! {
            r = work => r,
            _ = stopped() => Ok(()),
        }
    });
    match r {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            report(format!("{e:#}"));
            Exit::Io.into()
        }
    }
}

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
    let mut keys: Vec<String> =
        kv.keys().await.map_err(|e| anyhow::anyhow!("{e}"))?.filter_map(|k| async { k.ok() }).collect().await;
    keys.sort();
    let now = node::now_ms();
    for k in keys {
        if let Ok(Some(v)) = kv.get(&k).await {
            if let Ok(serde_json::Value::Object(mut o)) = serde_json::from_slice(&v) {
                let ts = o.get("ts").and_then(|t| t.as_u64()).unwrap_or(0);
                o.insert("ageMs".into(), now.saturating_sub(ts).into());
                println!("{}", serde_json::Value::Object(o));
            }
        }
    }
    Ok(())
}
