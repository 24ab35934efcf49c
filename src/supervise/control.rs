//! The supervisor's control protocol (`spec/SUPERVISOR.md`): one JSON
//! request line on a unix socket, one JSON reply line back. This module is
//! both ends' shared vocabulary and the client `runwire-serve` uses; the
//! supervisor's side lives in [`super`].

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest steer message accepted, in bytes.
pub const MAX_MSG: usize = 64 * 1024;
/// Largest request line read (a maximal message JSON-escaped fits).
pub const MAX_LINE: usize = 8 * MAX_MSG;
/// What every caller is told when no supervisor answers.
pub const NOT_LIVE: &str = "run not supervised / not live";

/// One control request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `kill`, `steer`, `stop`, `answer`, `pause`, `resume` or `status`.
    pub verb: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub msg: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub interrupt: Option<bool>,
    /// Who asks, for the journal's `actor` (default `control`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub actor: Option<String>,
    /// `answer`: the answer to a pending request of an interactive task, as
    /// the session input's answer line without its `type`
    /// (`{"id":…,"decision":…}`, spec/SESSION-INPUT.md).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub answer: Option<serde_json::Value>,
}

/// One control reply. `ok: false` is a refusal with its reason in `detail`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub state: Option<String>,
}

impl Reply {
    pub fn ok(detail: impl Into<String>, state: Option<String>) -> Reply {
        Reply { ok: true, detail: detail.into(), state }
    }
    pub fn refuse(detail: impl Into<String>, state: Option<String>) -> Reply {
        Reply { ok: false, detail: detail.into(), state }
    }
}

/// `$HARNESS_HOME/sock/<runId>.sock`: where a run's supervisor listens
/// when liveness does not say otherwise.
pub fn sock_path(home: &Path, run_id: &str) -> PathBuf {
    home.join("sock").join(format!("{run_id}.sock"))
}

/// Why a call got no reply.
#[derive(Debug)]
pub enum CallError {
    /// Nobody listens (no socket file, refused, or a stale socket).
    NotLive(String),
    /// Someone listens but the exchange failed (timeout, bad reply).
    Broken(String),
}

/// Sends one request and waits up to `timeout` for its reply.
pub fn call(sock: &Path, req: &Request, timeout: Duration) -> Result<Reply, CallError> {
    let mut s = UnixStream::connect(sock).map_err(|e| CallError::NotLive(format!("{}: {e}", sock.display())))?;
    let broken = |e: std::io::Error| CallError::Broken(format!("{}: {e}", sock.display()));
    s.set_read_timeout(Some(timeout)).map_err(broken)?;
    s.set_write_timeout(Some(timeout)).map_err(broken)?;
    let mut line = serde_json::to_vec(req).map_err(|e| CallError::Broken(e.to_string()))?;
    line.push(b'\n');
    s.write_all(&line).map_err(broken)?;
    let mut r = BufReader::new(s.take(MAX_LINE as u64));
    let mut buf = Vec::new();
    r.read_until(b'\n', &mut buf).map_err(broken)?;
    if buf.is_empty() {
        // A socket accepted by a supervisor that then exits mid-call.
        return Err(CallError::NotLive(format!("{}: closed without a reply", sock.display())));
    }
    serde_json::from_slice(&buf).map_err(|e| CallError::Broken(format!("{}: bad reply: {e}", sock.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_refuse_unknown_keys() {
        let r: Request = serde_json::from_str(r#"{"verb":"steer","task":"a","msg":"hi","interrupt":true}"#).unwrap();
        assert_eq!(r.interrupt, Some(true));
        assert!(serde_json::from_str::<Request>(r#"{"verb":"kill","bogus":1}"#).is_err());
        let e = call(Path::new("/nonexistent/x.sock"), &r, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, CallError::NotLive(_)));
    }
}
