//! The sidecar's end of the channel to its runwire-serve: one long-lived
//! pipe pair (this process's stdin and stdout), framed as
//! `runwire::serve::cluster` defines (`[u32 length][u32 head length][head
//! JSON][data]`, at most `MAX_FRAME` bytes), every request and stream
//! with its own id. The server sends `control`, `link`, `agui`, `thread`
//! and `feed` requests and `cancel`s; this end answers each with `answer`,
//! then for a stream `data` frames and an `end`. One NATS connection and, at a hub, one
//! consumer of the feed stream serve every client ([`crate::fanout::Fanout`]):
//! no process per request or client.
//!
//! The server's reader never waits on a client (a stream whose client
//! falls behind is dropped there), so one writer task here drains every
//! stream into the pipe. The process ends when its stdin does: nothing it
//! started outlives the server, even one killed with SIGKILL.

use crate::forward;
pub use crate::wire::Sink;
use crate::wire::{Answer, Frame};
use runwire::serve::cluster::Head;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Frames waiting for the pipe, all streams together.
const OUT_QUEUE: usize = 4096;

/// One frame from `r`; `None` at its end.
pub async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Option<Frame>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    // The one length check of both ends (runwire's, before anything is allocated).
    let mut rest = vec![0u8; runwire::serve::cluster::frame_len(len)?];
    r.read_exact(&mut rest).await?;
    runwire::serve::cluster::decode(&rest).map(Some)
}

/// What this end serves: a hub's requests, or (a node) nothing but the
/// channel's life.
pub enum Role {
    /// `name`: the hub's (`runwire-cluster hub --name`), told to the nodes
    /// with each command it forwards (their journals name it).
    Hub {
        client: async_nats::Client,
        fanout: Arc<crate::fanout::Fanout>,
        name: String,
    },
    Node,
}

/// Serves the channel on `input`/`output` until `input` ends.
pub async fn serve(
    role: Role,
    mut input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::channel::<Frame>(OUT_QUEUE);
    let (took_tx, mut took_rx) = mpsc::channel::<Took>(OUT_QUEUE);
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::BufWriter::with_capacity(256 * 1024, output);
        loop {
            let (h, d) = tokio::select! {
                biased;
                // A `took`, first and flushed, before its request is forwarded.
                t = took_rx.recv() => {
                    let Some((id, done)) = t else { return };
                    let h = Head { op: "took".into(), id, ..Default::default() };
                    let Ok(bytes) = runwire::serve::cluster::encode(&h, &[]) else { return };
                    if out.write_all(&bytes).await.is_err() || out.flush().await.is_err() {
                        return;
                    }
                    let _ = done.send(());
                    continue;
                }
                f = rx.recv() => match f {
                    Some(f) => f,
                    None => return,
                },
            };
            let Ok(bytes) = runwire::serve::cluster::encode(&h, &d) else {
                crate::report(format!("channel: a frame of {} bytes for {} {} is too large", d.len(), h.op, h.id));
                continue;
            };
            if out.write_all(&bytes).await.is_err() {
                return;
            }
            // Flushed whenever nothing else waits: frames leave together in a burst, at once alone.
            if rx.is_empty() && out.flush().await.is_err() {
                return;
            }
        }
    });
    let stops: Arc<Mutex<HashMap<u64, oneshot::Sender<()>>>> = Arc::new(Mutex::new(HashMap::new()));
    loop {
        let (head, data) = match read_frame(&mut input).await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                crate::report(format!("channel: {e}"));
                break;
            }
        };
        if head.op == "ping" {
            // The server's check that this end reads and answers (it kills one that does not).
            let _ = tx.send((Head { op: "pong".into(), id: head.id, ..Default::default() }, Vec::new())).await;
            continue;
        }
        let sink = Sink::new(head.id, tx.clone());
        if head.op == "cancel" {
            if let Some(s) = stops.lock().unwrap_or_else(|e| e.into_inner()).remove(&head.id) {
                let _ = s.send(());
            }
            continue;
        }
        let Role::Hub { client, fanout, name } = &role else {
            sink.answer(&Answer::error(400, format!("{} at a node: only a hub forwards", head.op))).await;
            continue;
        };
        // The request's deadline on this machine's clock (the server's
        // `deadlineMs`, CLOCK_MONOTONIC): read past it, nothing is forwarded.
        let deadline = head.deadline_ms.map(|d| {
            tokio::time::Instant::now()
                + Duration::from_millis(d.saturating_sub(runwire::serve::cluster::monotonic_ms()))
        });
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        stops.lock().unwrap_or_else(|e| e.into_inner()).insert(head.id, stop_tx);
        let (client, fanout, stops2, name) = (client.clone(), fanout.clone(), stops.clone(), name.clone());
        let took_tx = took_tx.clone();
        tokio::spawn(async move {
            let id = head.id;
            let stop = async move {
                let _ = stop_rx.await;
            };
            // The server hears `took` before anything is forwarded: one
            // that hears none by the deadline kills this end and says 504.
            if let Some(d) = deadline {
                if !took(&took_tx, id, d).await {
                    sink.answer(&late(&head.op)).await;
                    if matches!(head.op.as_str(), "agui" | "thread") {
                        sink.end(None).await;
                    }
                    stops2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    return;
                }
            }
            match head.op.as_str() {
                "control" => {
                    let a = control_frame(&client, head, data, name, deadline).await;
                    sink.answer(&a).await;
                }
                "link" => {
                    let a = link_frame(&client, head, data, name, deadline).await;
                    sink.answer(&a).await;
                }
                "agui" => {
                    // A thread new to this server: its node as any hub kept it.
                    let node = match head.node {
                        Some(n) => n,
                        None => match crate::forward::thread_node(&client, &data).await {
                            Ok(n) => n,
                            Err(m) => {
                                sink.answer(&Answer::error(400, m)).await;
                                sink.end(None).await;
                                stops2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                                return;
                            }
                        },
                    };
                    crate::forward::keep_thread(&client, &data, &node).await;
                    let Some(due) = due(head.budget_ms, deadline) else {
                        sink.answer(&late("agui")).await;
                        sink.end(None).await;
                        stops2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                        return;
                    };
                    let body = String::from_utf8_lossy(&data).into_owned();
                    if let Err(e) = forward::forward_agui(
                        &client,
                        &node,
                        body,
                        forward::Acting { person: head.actor.as_deref(), hub: Some(&name), checked: head.checked },
                        due,
                        &sink,
                        stop,
                    )
                    .await
                    {
                        sink.answer(&Answer::error(503, format!("node {node}: {e:#}"))).await;
                        sink.end(Some(format!("{e:#}"))).await;
                    }
                }
                "thread" => {
                    // Its node as this hub remembers it, else as any hub kept it.
                    let thread = String::from_utf8_lossy(&data).into_owned();
                    let node = match head.node {
                        Some(n) => Some(n),
                        None => crate::forward::kept_node(&client, &thread).await,
                    };
                    let Some(node) = node else {
                        let m = format!(
                            "thread {thread:?}: the cluster knows no node for it (no hub has run it): \
                             a thread started at a node's own server is read there"
                        );
                        sink.answer(&Answer::error(404, m)).await;
                        sink.end(None).await;
                        stops2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                        return;
                    };
                    let Some(due) = due(head.budget_ms, deadline) else {
                        sink.answer(&late("thread")).await;
                        sink.end(None).await;
                        stops2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                        return;
                    };
                    let by = forward::Acting { person: head.actor.as_deref(), hub: Some(&name), checked: head.checked };
                    if let Err(e) = forward::forward_thread(&client, &node, &thread, by, due, &sink, stop).await {
                        sink.answer(&Answer::error(503, format!("node {node}: {e:#}"))).await;
                        sink.end(Some(format!("{e:#}"))).await;
                    }
                }
                "feed" => {
                    let q = head.query.unwrap_or_default();
                    tokio::select! {
                        _ = fanout.client(&q, head.since, &sink) => {}
                        _ = stop => {}
                    }
                }
                op => {
                    sink.answer(&Answer::error(400, format!("{op:?} is not a request of the channel"))).await;
                }
            }
            stops2.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        });
    }
    drop(tx);
    // The server is gone: nothing left to write to.
    writer.abort();
    Ok(())
}

/// A `took` for the server: the request's id, and the writer's word that it is flushed.
type Took = (u64, oneshot::Sender<()>);

/// Tells the server that request `id` is taken (flushed on the pipe before
/// it is forwarded), when it is read before its `deadline`: `false` when
/// it is past (or the server is gone), and nothing may be forwarded.
async fn took(tx: &mpsc::Sender<Took>, id: u64, deadline: tokio::time::Instant) -> bool {
    if tokio::time::Instant::now() >= deadline {
        return false;
    }
    let (done, flushed) = oneshot::channel();
    tx.send((id, done)).await.is_ok() && flushed.await.is_ok() && tokio::time::Instant::now() < deadline
}

/// The time a request gives its node: its budget, never past its
/// deadline; `None` when nothing is left (it will not run).
fn due(budget_ms: Option<u64>, deadline: Option<tokio::time::Instant>) -> Option<forward::Due> {
    let due = forward::Due::new(Duration::from_millis(budget_ms.unwrap_or(5000)), deadline);
    (!due.left().is_zero()).then_some(due)
}

/// The answer to a request read past its deadline: nothing was forwarded.
fn late(op: &str) -> Answer {
    Answer::error(
        504,
        format!(
            "the hub's cluster sidecar read this {op} request after its deadline (it was stopped or busy): \
             nothing was forwarded, it will not run"
        ),
    )
}

/// A `control` frame: the command forwarded to its node.
async fn control_frame(
    client: &async_nats::Client,
    head: Head,
    body: Vec<u8>,
    hub: String,
    deadline: Option<tokio::time::Instant>,
) -> Answer {
    let Some(due) = due(head.budget_ms, deadline) else {
        return late("control");
    };
    let node = head.node.unwrap_or_default();
    let (run, verb) = (head.run.unwrap_or_default(), head.verb.unwrap_or_default());
    let Some(path) = forward::path_of(&run, head.task.as_deref(), &verb) else {
        return Answer::error(400, format!("node {node}: {verb:?} on run {run:?} is not a control route"));
    };
    let c = forward::Command {
        node,
        method: "POST".into(),
        path,
        form: false,
        body,
        // The client's key, else one of the hub's: the node runs a key once.
        key: head.key.filter(|k| !k.is_empty()).unwrap_or_else(forward::new_key),
        actor: head.actor.unwrap_or_else(|| "hub".into()),
        hub: Some(hub),
        checked: head.checked,
        budget: due.budget,
        until: Some(due.until),
    };
    forward::command(client, &c).await
}

/// A `link` frame: an approval link's request (`GET|POST /a/<token>`),
/// forwarded to the node that minted it as a command is (its key, its
/// budget, the node's "go"), so that a hub's 504 never answers later.
async fn link_frame(
    client: &async_nats::Client,
    head: Head,
    body: Vec<u8>,
    hub: String,
    deadline: Option<tokio::time::Instant>,
) -> Answer {
    let Some(due) = due(head.budget_ms, deadline) else {
        return late("link");
    };
    let node = head.node.unwrap_or_default();
    let method = head.method.unwrap_or_default();
    let Some(path) =
        head.token.as_deref().and_then(forward::link_path).filter(|_| matches!(method.as_str(), "GET" | "POST"))
    else {
        return Answer::error(400, format!("node {node}: {method} of that link is not a link request"));
    };
    let form = match head.content_type.as_deref() {
        None | Some("application/json") => false,
        Some("application/x-www-form-urlencoded") => true,
        Some(t) => return Answer::error(415, format!("a link's body is a form or JSON, not {t:?}")),
    };
    let c = forward::Command {
        node,
        method,
        path,
        form,
        body,
        key: head.key.filter(|k| !k.is_empty()).unwrap_or_else(forward::new_key),
        actor: head.actor.unwrap_or_else(|| runwire::control::links::LINK_NAME.into()),
        hub: Some(hub),
        // A link is its own credential: the node checks its MAC.
        checked: true,
        budget: due.budget,
        until: Some(due.until),
    };
    forward::command(client, &c).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's time is its budget, never past its deadline, and none
    /// once the deadline has passed (it is refused, nothing forwarded).
    #[test]
    fn a_request_gets_no_more_than_what_is_left_of_its_deadline() {
        let now = tokio::time::Instant::now();
        let d = due(Some(5000), Some(now + Duration::from_millis(1200))).unwrap();
        assert!(d.left() <= Duration::from_millis(1200) && d.until <= now + Duration::from_millis(1200), "{d:?}");
        assert_eq!(d.budget, Duration::from_millis(5000));
        let d = due(Some(800), Some(now + Duration::from_secs(30))).unwrap();
        assert!(d.left() <= Duration::from_millis(800), "{d:?}");
        assert!(due(Some(5000), Some(now)).is_none());
        assert!(due(Some(0), None).is_none());
        // Without a deadline (the one-shot commands): the budget, at most MAX_BUDGET.
        assert!(due(Some(3_600_000), None).unwrap().left() <= forward::MAX_BUDGET);
    }
}
