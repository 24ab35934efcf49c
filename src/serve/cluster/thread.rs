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
/// route answers: its refusals with their message naming the node; its 200
/// body relayed as it comes, a piece at a time (chunked on HTTP/1.1), so a
/// thread of any size the node's route answers is read here too, in
/// bounded memory. A node lost or silent on the way cuts the body: the
/// chunked body has no last chunk, which a client reads as an error, never
/// as the whole thread. A node not connected is 503 at once, one that does
/// not answer within its 5 s 504, each naming it. `None` when this server
/// is not a hub.
pub fn get(
    cfg: &crate::serve::options::Config,
    stream: &mut std::net::TcpStream,
    req: &crate::serve::http::Request,
    cors: &[(&'static str, String)],
    thread: &str,
) -> Option<()> {
    use crate::serve::http::{respond, with_retry};
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
        deadline_ms: super::deadline(),
        ..Default::default()
    };
    match open_thread(head, thread, &who) {
        Err((code, body)) => {
            let _ = respond(stream, code, &with_retry(cors, code), &body);
        }
        Ok(open) => {
            if let Err(why) = relay(stream, req, cors, open, cfg.write_timeout) {
                crate::util::cli::report(
                    crate::serve::options::BIN,
                    format!("GET /agui/thread {thread:?} from {who}: {why}: the body was cut"),
                );
            }
        }
    }
    Some(())
}

/// [`get`]'s request to the sidecar and the node's answer, within
/// [`THREAD_WAIT`] whatever the sidecar and the node do: the stream its
/// body comes on after a 200, else the status and body to reply.
fn open_thread(head: Head, thread: &str, who: &str) -> Result<channel::Open, (u16, String)> {
    let ch = channel(who)?;
    let deadline = head.deadline_ms.unwrap_or_else(super::monotonic_ms);
    let mut open =
        ch.open(head, thread.as_bytes()).map_err(|e| err_json(503, format!("{who}: the cluster sidecar: {e}")))?;
    match ch.wait(&mut open, deadline, THREAD_WAIT, who, "read") {
        Ok((h, d)) if h.op == "answer" && h.status != Some(200) => {
            open.ended = true;
            Err((h.status.unwrap_or(502), String::from_utf8_lossy(&d).into_owned()))
        }
        Ok((h, _)) if h.op == "answer" => Ok(open),
        Ok((h, _)) => {
            open.ended = h.op == "end";
            Err(err_json(503, format!("{who}: {}", h.error.unwrap_or(h.op))))
        }
        Err((code, m)) => Err(err_json(code, m)),
    }
}

/// Why a stream of the channel gave nothing: the status and body to say it with.
fn gone(open: &channel::Open, e: std::sync::mpsc::RecvTimeoutError, who: &str) -> (u16, String) {
    match e {
        std::sync::mpsc::RecvTimeoutError::Timeout => {
            err_json(504, format!("{who}: the thread did not come within {} s", THREAD_WAIT.as_secs()))
        }
        std::sync::mpsc::RecvTimeoutError::Disconnected if open.dropped.load(Ordering::SeqCst) => {
            err_json(503, format!("{who}: the thread came faster than this server could take it"))
        }
        std::sync::mpsc::RecvTimeoutError::Disconnected => err_json(503, format!("{who}: the cluster sidecar ended")),
    }
}

/// The 200 and the thread's JSON as its pieces come, to the client: the
/// body ends with its last chunk only when the node's whole body came.
/// `Err` says why it was cut (the client gone or slow, the node lost).
fn relay(
    stream: &mut std::net::TcpStream,
    req: &crate::serve::http::Request,
    cors: &[(&'static str, String)],
    mut open: channel::Open,
    write_timeout: Duration,
) -> Result<(), String> {
    use std::io::Write;
    let head =
        crate::serve::http::stream_head(req, cors, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    stream.write_all(head.as_bytes()).map_err(|e| format!("the client: {e}"))?;
    // One piece queued at a time: memory stays at a piece whatever the size.
    let mut out = crate::serve::stream::Stream::new(stream, req.http11, usize::MAX, write_timeout);
    loop {
        match open.rx.recv_timeout(PIECE_WAIT) {
            Ok((h, d)) if h.op == "data" => {
                out.push(&d);
                out.drain().map_err(|e| format!("the client: {e}"))?;
            }
            Ok((h, _)) if h.op == "end" => {
                open.ended = true;
                if let Some(e) = h.error {
                    return Err(e);
                }
                return out.end().map_err(|e| format!("the client: {e}"));
            }
            Ok((h, _)) => return Err(format!("the cluster sidecar said {:?}", h.op)),
            Err(e) => return Err(gone(&open, e, "the node").1),
        }
    }
}

/// The longest a hub waits for the node's answer to a thread read: the
/// node's 5 s to answer, and more for a sidecar and a server under load.
const THREAD_WAIT: Duration = Duration::from_millis(FORWARD_BUDGET_MS + 10_000);

/// The longest a hub waits between two pieces of a thread's body: past
/// the sidecar's own cut of a silent node (20 s), which ends the stream
/// with its reason first.
const PIECE_WAIT: Duration = Duration::from_secs(30);
