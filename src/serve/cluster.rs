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
    /// A NATS credentials file for the cluster (passed to runwire-cluster as --creds).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_creds: Option<PathBuf>,
    /// The CA certificate of the cluster's TLS (passed to runwire-cluster as --tls-ca).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_tls_ca: Option<PathBuf>,
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
        a.extend(["--home".into(), home.display().to_string()]);
        if let Some(c) = &self.cluster_creds {
            a.extend(["--creds".into(), c.display().to_string()]);
        }
        if let Some(c) = &self.cluster_tls_ca {
            a.extend(["--tls-ca".into(), c.display().to_string()]);
        }
        Some(a)
    }
}

/// A hub's cluster, for forwarding control routes (set by [`start`] with `--hub`).
static HUB: OnceLock<Vec<String>> = OnceLock::new();

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
        assert!(args(Some("u"), Some("a.b"), false).check().is_err());
        assert!(args(Some("u"), Some(""), false).check().is_err());
        assert!(args(Some("u"), Some("n-1_x"), false).check().is_ok());
        assert!(args(Some("u"), None, true).check().is_ok());
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
