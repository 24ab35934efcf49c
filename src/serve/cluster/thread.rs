//! `GET /agui/thread?threadId=ID` at a hub (spec/CLUSTER.md, "A thread's
//! messages at a hub"): a hub records no thread, so the read goes to the
//! thread's node over the channel, as a run does, and the node's own route
//! answers.

use super::{channel, err_json, thread_file, Head, FORWARD_BUDGET_MS, HUB_HOME};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// At a hub, `GET /agui/thread?threadId=ID` (`thread`, checked by the
/// route): the read goes to the thread's node (the one this hub ran it on,
/// else the one the cluster keeps for it, else 404 saying the cluster
/// knows none) over the channel, as `POST /agui` does, and the node's own
/// route answers: its 200 body relayed as it is (at most the routes'
/// [`MAX_BODY`](crate::serve::http::MAX_BODY): the node refuses a larger one,
/// and so does this end), its refusals with their message naming the node.
/// A node not connected is 503 at once, one that does not answer within
/// its 5 s 504, each naming it; nothing waits past its deadline. `None`
/// when this server is not a hub.
pub fn get(
    cfg: &crate::serve::options::Config,
    stream: &mut std::net::TcpStream,
    req: &crate::serve::http::Request,
    cors: &[(&'static str, String)],
    thread: &str,
) -> Option<()> {
    use crate::serve::http::respond;
    let home = HUB_HOME.get()?;
    let node = std::fs::read_to_string(thread_file(home, thread))
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| crate::runs::valid_node(n));
    let who = node.as_ref().map_or_else(|| format!("thread {thread:?}"), |n| format!("node {n}"));
    let head = Head {
        op: "thread".into(),
        node,
        actor: Some(crate::serve::options::person(cfg, req, crate::serve::options::BIN)),
        checked: cfg.token.is_some(),
        budget_ms: Some(FORWARD_BUDGET_MS),
        ..Default::default()
    };
    let (code, body) = read_thread(head, thread, &who);
    let _ = respond(stream, code, &crate::serve::http::with_retry(cors, code), &body);
    Some(())
}

/// [`get`]'s exchange with the sidecar: `(status, body)`, within
/// [`THREAD_WAIT`] whatever the sidecar and the node do.
fn read_thread(head: Head, thread: &str, who: &str) -> (u16, String) {
    let max = crate::serve::http::MAX_BODY;
    let ch = match channel(who) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let mut open = match ch.open(head, thread.as_bytes()) {
        Ok(o) => o,
        Err(e) => return err_json(503, format!("{who}: the cluster sidecar: {e}")),
    };
    let deadline = std::time::Instant::now() + THREAD_WAIT;
    let next =
        |open: &channel::Open| open.rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()));
    let gone = |open: &channel::Open, e: std::sync::mpsc::RecvTimeoutError| match e {
        std::sync::mpsc::RecvTimeoutError::Timeout => {
            err_json(504, format!("{who}: the thread did not come within {} s", THREAD_WAIT.as_secs()))
        }
        std::sync::mpsc::RecvTimeoutError::Disconnected if open.dropped.load(Ordering::SeqCst) => {
            err_json(503, format!("{who}: the thread came faster than this server could take it"))
        }
        std::sync::mpsc::RecvTimeoutError::Disconnected => err_json(503, format!("{who}: the cluster sidecar ended")),
    };
    let code = match next(&open) {
        Ok((h, d)) if h.op == "answer" && h.status != Some(200) => {
            open.ended = true;
            return (h.status.unwrap_or(502), String::from_utf8_lossy(&d).into_owned());
        }
        Ok((h, _)) if h.op == "answer" => 200,
        Ok((h, _)) => {
            open.ended = h.op == "end";
            return err_json(503, format!("{who}: {}", h.error.unwrap_or(h.op)));
        }
        Err(e) => return gone(&open, e),
    };
    let mut body = Vec::new();
    loop {
        match next(&open) {
            Ok((h, d)) if h.op == "data" => {
                body.extend_from_slice(&d);
                if body.len() > max {
                    return err_json(
                        502,
                        format!("{who}: the thread's messages are more than the {max} bytes a hub relays: open the thread at its node's own server"),
                    );
                }
            }
            Ok((h, _)) if h.op == "end" => {
                open.ended = true;
                if let Some(e) = h.error {
                    return err_json(504, format!("{who}: {e}: the thread came cut short"));
                }
                break;
            }
            Ok((h, _)) => return err_json(502, format!("{who}: the cluster sidecar said {:?}", h.op)),
            Err(e) => return gone(&open, e),
        }
    }
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// The longest a hub's thread read takes, answer and body: the node's 5 s
/// to answer, then its body, which it sends at once.
const THREAD_WAIT: Duration = Duration::from_millis(FORWARD_BUDGET_MS + 10_000);
