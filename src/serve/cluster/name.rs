//! A node's name, taken before its server serves: `runwire-cluster lease`
//! (spec/CLUSTER.md, "Nodes: names and liveness"); its sidecar renews it.

use crate::util::cli;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a node's server waits for the cluster to say whether its name
/// is free before it starts anyway (its sidecar then takes the name, or
/// says it cannot, when the cluster is reachable).
const LEASE_WAIT: Duration = Duration::from_secs(10);

/// After how long that wait is said on stderr.
const LEASE_SAY_AFTER: Duration = Duration::from_secs(1);

/// `runwire-cluster lease …`: the node sidecar's argv less what only the
/// long-lived node takes (its server's address and token file).
pub(super) fn lease_argv(argv: &[String]) -> Vec<String> {
    let mut a = vec!["lease".to_string()];
    let mut it = argv.iter().skip(1);
    while let Some(x) = it.next() {
        if x == "--local" || x == "--local-token-file" {
            it.next();
        } else {
            a.push(x.clone());
        }
    }
    a
}

/// Runs `program lease …` for the node sidecar's `argv`: `Err` the
/// refusal; a cluster that cannot be asked now is said on stderr, `Ok`.
pub(super) fn lease(program: &Path, argv: &[String], bin: &str) -> Result<(), String> {
    let child = Command::new(program)
        .args(lease_argv(argv))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            cli::report(bin, format!("cluster: cannot start {}: {e}", program.display()));
            return Ok(());
        }
    };
    let started = std::time::Instant::now();
    let deadline = started + LEASE_WAIT;
    let mut said = false;
    loop {
        // Nothing is listening yet: a slow cluster is said, not silent.
        if !said && started.elapsed() >= LEASE_SAY_AFTER {
            said = true;
            cli::report(
                bin,
                format!(
                    "cluster: waiting for the cluster to say whether the node's name is free (at most {} s)",
                    LEASE_WAIT.as_secs()
                ),
            );
        }
        match child.try_wait() {
            Ok(Some(st)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let err = err.lines().last().unwrap_or("").trim();
                let err = err.strip_prefix("runwire-cluster: ").unwrap_or(err).to_string();
                return match st.code() {
                    Some(0) => Ok(()),
                    Some(2) => Err(format!("--cluster: {err}")),
                    _ => {
                        cli::report(bin, format!("cluster: the node's name could not be taken now ({err}); its sidecar takes it when the cluster answers"));
                        Ok(())
                    }
                };
            }
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                cli::report(bin, format!("cluster: no answer about the node's name within {} s; its sidecar takes it when the cluster answers", LEASE_WAIT.as_secs()));
                return Ok(());
            }
        }
    }
}
