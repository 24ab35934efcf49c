//! Control forwarding, the NATS half: a node answers requests on
//! `rwctl.<node>` by making the same HTTP request to its own runwire-serve
//! (`--local URL`), so an answer, steer, stop or kill arriving from the
//! cluster goes through exactly the code and rules of the local routes
//! (the same checks, the same supervisor socket, the same steer inbox, the
//! same status codes). A request carries an id (header `Rw-Request-Id`): a
//! retry after a timeout gets the first reply again instead of acting twice.
//!
//! [`forward`] is the asking side (a hub, or `runwire-cluster control`):
//! no node listening is 503 at once, no reply within the timeout 504, each
//! naming the node.

use crate::names;
use anyhow::anyhow;
use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The request id header.
pub const REQUEST_ID: &str = "Rw-Request-Id";
/// Replies kept for retries.
const KEEP: usize = 1024;
/// The most body bytes a forwarded request or reply carries.
pub const MAX_BODY: usize = 256 * 1024;

/// A forwarded HTTP request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Forwarded {
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub body: String,
}

/// Its reply: the node's HTTP status and body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    fn error(status: u16, msg: String) -> Answer {
        Answer { status, body: serde_json::json!({"error": msg}).to_string() }
    }
}

/// The subject a node's control requests arrive on.
pub fn subject(node: &str) -> String {
    format!("rwctl.{node}")
}

/// Whether a forwarded request is one of the control routes (nothing else
/// is forwarded: a node is not an open proxy to its server).
pub fn allowed(f: &Forwarded) -> bool {
    let segs: Vec<&str> = f.path.strip_prefix("/runs/").unwrap_or("").split('/').collect();
    f.method == "POST"
        && f.path.bytes().all(|b| b.is_ascii_graphic())
        && segs.iter().all(|s| {
            runwire::runs::valid_id(s) || matches!(*s, "steer" | "kill" | "answer" | "stop" | "pause" | "resume")
        })
        && matches!(segs.as_slice(), [_, "tasks", _, "steer" | "kill" | "answer" | "stop"] | [_, "pause" | "resume"])
}

/// The node's local server, for forwarded requests.
pub struct Local {
    /// `host:port` of its runwire-serve.
    pub addr: String,
    pub token_file: Option<PathBuf>,
}

/// Answers `rwctl.<node>` until the connection ends.
pub async fn serve(client: async_nats::Client, node: String, local: Local) -> anyhow::Result<()> {
    let mut sub = client.queue_subscribe(subject(&node), "runwire".into()).await.map_err(|e| anyhow!("{e}"))?;
    let mut done: HashMap<String, Answer> = HashMap::new();
    let mut order: VecDeque<String> = VecDeque::new();
    while let Some(msg) = sub.next().await {
        let Some(reply) = msg.reply.clone() else { continue };
        let id = msg.headers.as_ref().and_then(|h| h.get(REQUEST_ID)).map(|v| v.as_str().to_string());
        let answer = match id.as_ref().and_then(|i| done.get(i)) {
            Some(a) => a.clone(),
            None => {
                let a = match serde_json::from_slice::<Forwarded>(&msg.payload) {
                    Ok(f) if allowed(&f) && f.body.len() <= MAX_BODY => http(&local, &f).await,
                    Ok(f) => Answer::error(400, format!("node {node}: {} {} is not a control route", f.method, f.path)),
                    Err(e) => Answer::error(400, format!("node {node}: a forwarded request: {e}")),
                };
                if let Some(i) = id {
                    done.insert(i.clone(), a.clone());
                    order.push_back(i);
                    if order.len() > KEEP {
                        if let Some(old) = order.pop_front() {
                            done.remove(&old);
                        }
                    }
                }
                a
            }
        };
        let body = Bytes::from(serde_json::to_vec(&answer).unwrap_or_default());
        if let Err(e) = client.publish(reply, body).await {
            crate::report(format!("control: reply: {e}"));
        }
    }
    Ok(())
}

/// The request, made to the node's own server (HTTP/1.0 on loopback).
async fn http(local: &Local, f: &Forwarded) -> Answer {
    let token = match &local.token_file {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => Some(t.trim().to_string()),
            Err(e) => return Answer::error(500, format!("{}: {e}", p.display())),
        },
        None => None,
    };
    let mut req = format!(
        "{} {} HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        f.method,
        f.path,
        local.addr,
        f.body.len()
    );
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&f.body);
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(&local.addr).await?;
        s.write_all(req.as_bytes()).await?;
        let mut raw = Vec::new();
        (&mut s).take(MAX_BODY as u64 + 64 * 1024).read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(e)) => return Answer::error(502, format!("the node's server {}: {e}", local.addr)),
        Err(_) => return Answer::error(504, format!("the node's server {} did not answer within 30 s", local.addr)),
    };
    let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Answer::error(502, format!("the node's server {}: not an HTTP response", local.addr));
    };
    let head = String::from_utf8_lossy(&raw[..i]);
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(502);
    Answer { status, body: String::from_utf8_lossy(&raw[i + 4..]).into_owned() }
}

/// Forwards a request to `node`: its answer, or 503 (no node listening,
/// at once) or 504 (no answer within `timeout`), naming the node.
pub async fn forward(client: &async_nats::Client, node: &str, f: &Forwarded, id: &str, timeout: Duration) -> Answer {
    if !names::valid_node(node) {
        return Answer::error(400, format!("{node:?} is not a node name"));
    }
    let mut h = HeaderMap::new();
    h.insert(REQUEST_ID, id);
    let payload = Bytes::from(serde_json::to_vec(f).unwrap_or_default());
    let req = async_nats::Request::new().payload(payload).headers(h).timeout(Some(timeout));
    match client.send_request(subject(node), req).await {
        Ok(m) => serde_json::from_slice(&m.payload)
            .unwrap_or_else(|e| Answer::error(502, format!("node {node}: a reply that does not parse: {e}"))),
        Err(e) => match e.kind() {
            async_nats::RequestErrorKind::NoResponders => {
                Answer::error(503, format!("node {node} is not connected to the cluster (no responders)"))
            }
            async_nats::RequestErrorKind::TimedOut => {
                Answer::error(504, format!("node {node} did not answer within {} ms", timeout.as_millis()))
            }
            _ => Answer::error(502, format!("node {node}: {e}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_control_routes_are_forwarded() {
        let f = |m: &str, p: &str| Forwarded { method: m.into(), path: p.into(), body: String::new() };
        for ok in ["/runs/ab--x.y/tasks/t.1/steer", "/runs/a/tasks/b/kill", "/runs/a/tasks/b/answer", "/runs/a/pause"] {
            assert!(allowed(&f("POST", ok)), "{ok}");
        }
        for bad in [
            "/runs/a/tasks/b/stream",
            "/runs/a",
            "/agui",
            "/runs/../tasks/b/kill",
            "/runs/a/tasks/b/kill?x",
            "/runs/a/tasks/b/kill HTTP/1.1\r\nX: y",
            "/runs/a/b/tasks/c/kill",
        ] {
            assert!(!allowed(&f("POST", bad)), "{bad}");
        }
        assert!(!allowed(&f("GET", "/runs/a/tasks/b/kill")));
    }
}
