//! Control forwarding, the NATS half: a node answers requests on
//! `rwctl.<node>` by making the same HTTP request to its own runwire-serve
//! (`--local URL`), so an answer, steer, stop or kill arriving from the
//! cluster goes through exactly the code and rules of the local routes
//! (the same checks, the same supervisor socket, the same steer inbox, the
//! same status codes).
//!
//! A command carries an idempotency key (header `Rw-Request-Id`), a time
//! budget in milliseconds remaining (`Rw-Budget-Ms`: never a clock, the
//! machines' clocks may differ), its actor (`Rw-Actor`) and the subject the
//! node asks before running it (`Rw-Go`). The node runs it only once the
//! asker said "go" on that subject within the budget; an asker whose
//! budget ran out says "late" (or is gone: no responders), so its 504
//! means the command will never run. A key runs once: its answer is kept
//! across the node's restarts (`crate::keys`).
//!
//! [`command`] is the asking side (a hub, or `runwire-cluster control`):
//! no node listening is 503 at once, a node that did not take it within
//! the budget 504, each naming the node.

use crate::names;
pub use crate::util::new_key;
pub use crate::wire::{Answer, MAX_BODY};
use anyhow::anyhow;
use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The idempotency key header (the request's id).
pub const REQUEST_ID: &str = "Rw-Request-Id";
/// Header: the milliseconds a command has left.
pub const BUDGET: &str = "Rw-Budget-Ms";
/// Header: who asks.
pub const ACTOR: &str = "Rw-Actor";
/// Header: the hub that forwards the command (its `--name`), journaled at
/// the node with the actor (`<actor>@<hub>`).
pub const HUB: &str = "Rw-Hub";
/// Set by a hub that checked its caller's bearer token: a node whose own
/// server needs a token refuses a hub's command or AG-UI run without it
/// (a hub with no token let anyone who reached it drive such a node).
pub const CHECKED: &str = "Rw-Checked";
/// Header: the route of a command (its body is the message's payload, as is).
pub const PATH: &str = "Rw-Path";
/// Header: the method of a command's route when it is not `POST` (a
/// link's `GET`: its page).
pub const METHOD: &str = "Rw-Method";
/// Header: the type of a command's body when it is not JSON (a link's
/// form, `application/x-www-form-urlencoded`).
pub const CONTENT_TYPE: &str = "Rw-Content-Type";
/// The body types a command may carry: JSON (every route), a form (a link's).
const FORM: &str = "application/x-www-form-urlencoded";
/// Header: the asker's subject prefix, `rwagui.<node>.<token>`; the node
/// asks `<it>.go` before running the command.
pub const GO: &str = "Rw-Go";
/// Header: a body too large for one message (the servers' `max_payload`)
/// is left out and its size said here; the node reads it from the asker
/// in pieces (`<Rw-Go>.body`, header `Rw-Offset`), each at most [`PIECE`].
pub const BODY_SIZE: &str = "Rw-Body-Size";
/// The largest piece of a body in one message.
pub const PIECE: usize = 256 * 1024;
/// The longest budget a command may carry.
pub const MAX_BUDGET: Duration = Duration::from_secs(60);
/// How long an asker waits past the budget for the answer of a command
/// the node is running (then 502: it may have run).
pub const RUNNING_GRACE: Duration = Duration::from_millis(runwire::serve::cluster::RUNNING_GRACE_MS);
/// The control verbs forwarded are the routes' own (`runwire::control::Verb`,
/// the one list of verb names): on a task (`/runs/RUN/tasks/TASK/<verb>`,
/// [`Verb::TASK_ROUTE`]) and on a run (`/runs/RUN/<verb>`, [`Verb::RUN_ROUTE`]).
use runwire::control::Verb;
/// How long a node waits for the pieces of a forwarded `POST /agui` body
/// too large for one message (the hub serves them at once).
const PULL_WAIT: Duration = Duration::from_secs(10);
/// Header of a forwarded `POST /agui`: the subject its answer's body goes
/// to, `rwagui.<node>.<token>` (a node publishes only under its own name).
pub const STREAM: &str = "Rw-Stream";
/// Header of a message to `rwctl.<node>` (no reply): the hub's client of
/// the stream it names left; the node drops that request.
pub const CANCEL: &str = "Rw-Cancel";
/// Header of each message of a stream: its number, from 0 (a gap ends the
/// stream at the hub with an error).
pub const SEQ: &str = "Rw-Seq";
/// Header of a stream's last message (the node's server ended the body).
pub const END: &str = "Rw-End";
/// How often a node asks whether the hub still reads a stream
/// (`<stream>.alive`; no responders: it is gone, the request is dropped).
const PING: Duration = Duration::from_secs(5);
/// A hub ends a stream after this long without a message or a ping from the node.
const SILENCE: Duration = Duration::from_secs(20);

type Streams = Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>;

/// The subject of a streamed answer's body.
pub fn stream_subject(node: &str, token: &str) -> String {
    format!("rwagui.{node}.{token}")
}

/// Whether `s` is one of `node`'s stream subjects.
fn valid_stream(node: &str, s: &str) -> bool {
    s.strip_prefix("rwagui.")
        .and_then(|r| r.strip_prefix(node))
        .and_then(|r| r.strip_prefix('.'))
        .is_some_and(|t| !t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A forwarded HTTP request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Forwarded {
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub body: String,
}

/// The subject a node's control requests arrive on.
pub fn subject(node: &str) -> String {
    format!("rwctl.{node}")
}

/// Whether a forwarded request is one of the control routes (nothing else
/// is forwarded: a node is not an open proxy to its server).
pub fn allowed(f: &Forwarded) -> bool {
    allowed_path(&f.method, &f.path)
}

/// Whether `method path` is one of the control routes, or an approval
/// link's (`GET|POST /a/<token>`, a token's characters only: the node's
/// own link route checks the token).
pub fn allowed_path(method: &str, path: &str) -> bool {
    if let Some(token) = path.strip_prefix(runwire::control::links::PREFIX) {
        return matches!(method, "GET" | "POST") && runwire::control::links::valid_token_text(token);
    }
    let segs: Vec<&str> = path.strip_prefix("/runs/").unwrap_or("").split('/').collect();
    let verb = |v: &str, of: &[Verb]| Verb::parse(v).is_some_and(|v| of.contains(&v));
    method == "POST"
        && path.bytes().all(|b| b.is_ascii_graphic())
        && match segs.as_slice() {
            [run, "tasks", task, v] => {
                runwire::runs::valid_id(run) && runwire::runs::valid_id(task) && verb(v, &Verb::TASK_ROUTE)
            }
            [run, v] => runwire::runs::valid_id(run) && verb(v, &Verb::RUN_ROUTE),
            _ => false,
        }
}

/// The route of a command: `verb` on `run` (and `task`), when it is one.
pub fn path_of(run: &str, task: Option<&str>, verb: &str) -> Option<String> {
    let p = match task {
        Some(t) => format!("/runs/{run}/tasks/{t}/{verb}"),
        None => format!("/runs/{run}/{verb}"),
    };
    allowed_path("POST", &p).then_some(p)
}

/// The route of an approval link's request.
pub fn link_path(token: &str) -> Option<String> {
    let p = format!("{}{token}", runwire::control::links::PREFIX);
    allowed_path("GET", &p).then_some(p)
}

/// A command to forward to a node.
#[derive(Debug, Clone)]
pub struct Command {
    pub node: String,
    /// `POST`, or a link's `GET`.
    pub method: String,
    /// The route (see [`path_of`], [`link_path`]).
    pub path: String,
    /// Whether the body is a link's form (`application/x-www-form-urlencoded`); else JSON.
    pub form: bool,
    /// The JSON body, as the client sent it.
    pub body: Vec<u8>,
    /// Its idempotency key.
    pub key: String,
    pub actor: String,
    /// The hub that forwards it (`None`: `runwire-cluster control`).
    pub hub: Option<String>,
    /// The hub checked its caller's token (or the request is a link's, its own credential).
    pub checked: bool,
    /// The time it has left.
    pub budget: Duration,
    /// When its time is up, if sooner (a hub's request's deadline on the channel).
    pub until: Option<tokio::time::Instant>,
}

/// A forwarded request's time: its budget (as said in the answers), and
/// the instant it is up, never later than the budget from when it was
/// made (a hub's request's deadline on the channel may be sooner): the
/// "go" is said only before it.
#[derive(Clone, Copy, Debug)]
pub struct Due {
    pub budget: Duration,
    pub until: tokio::time::Instant,
}

impl Due {
    /// `budget` (at most [`MAX_BUDGET`]) from now, or `until` when sooner.
    pub fn new(budget: Duration, until: Option<tokio::time::Instant>) -> Due {
        let budget = budget.min(MAX_BUDGET);
        let by = tokio::time::Instant::now() + budget;
        Due { budget, until: until.map_or(by, |u| u.min(by)) }
    }

    /// What is left of it now.
    pub fn left(&self) -> Duration {
        self.until.saturating_duration_since(tokio::time::Instant::now())
    }
}

/// The node's local server, for forwarded requests.
#[derive(Clone)]
pub struct Local {
    /// `host:port` of its runwire-serve.
    pub addr: String,
    pub token_file: Option<PathBuf>,
    /// The node's harness home (where it remembers the keys it ran).
    pub home: PathBuf,
}

/// Answers `rwctl.<node>` until the connection ends.
pub async fn serve(client: async_nats::Client, node: String, local: Local) -> anyhow::Result<()> {
    let mut sub = client.queue_subscribe(subject(&node), "runwire".into()).await.map_err(|e| anyhow!("{e}"))?;
    let local = Arc::new(local);
    let mut keys = crate::keys::Keys::open(&local.home);
    let streams: Streams = Arc::new(Mutex::new(HashMap::new()));
    while let Some(msg) = sub.next().await {
        let h = msg.headers.as_ref();
        // The hub's client left: the stream's request to the local server is
        // dropped, so that server sees its client leave (its own rules).
        if let Some(s) = h.and_then(|h| h.get(CANCEL)) {
            if let Some(t) = streams.lock().unwrap_or_else(|e| e.into_inner()).remove(s.as_str()) {
                t.abort();
            }
            continue;
        }
        let Some(reply) = msg.reply.clone() else { continue };
        if let Some(s) = h.and_then(|h| h.get(STREAM)).map(|v| v.as_str().to_string()) {
            let f = serde_json::from_slice::<Forwarded>(&msg.payload);
            // A body too large for one message comes in pieces, asked of the hub.
            let pieces: Option<usize> = h.and_then(|h| h.get(BODY_SIZE)).and_then(|v| v.as_str().parse().ok());
            // A thread's read (`GET /agui/thread`) comes on a stream too: its
            // answer's body may be larger than one message.
            let read = |f: &Forwarded| f.method == "GET" && thread_id_of(&f.path).is_some() && f.body.is_empty();
            let refused = match &f {
                Ok(f)
                    if ((f.method == "POST" && f.path == "/agui") || (read(f) && pieces.is_none()))
                        && valid_stream(&node, &s)
                        && f.body.len().max(pieces.unwrap_or(0)) <= MAX_BODY =>
                {
                    None
                }
                Ok(f) => Some(Answer::error(
                    400,
                    format!("node {node}: {} {} with a stream is not an AG-UI route", f.method, f.path),
                )),
                Err(e) => Some(Answer::error(400, format!("node {node}: a forwarded request: {e}"))),
            };
            match (refused, f) {
                (None, Ok(f)) => {
                    // A run starts only on its asker's "go" within this
                    // budget (a hub's 504 never runs later, as a command's).
                    let budget = h
                        .and_then(|h| h.get(BUDGET))
                        .and_then(|b| b.as_str().parse::<u64>().ok())
                        .map(|b| tokio::time::Instant::now() + Duration::from_millis(b).min(MAX_BUDGET));
                    if f.method == "POST" && budget.is_none() {
                        let a = Answer::error(400, format!("node {node}: an AG-UI run without its budget ({BUDGET})"));
                        let _ = client.publish(reply, Bytes::from(serde_json::to_vec(&a).unwrap_or_default())).await;
                        continue;
                    }
                    let (c, l, n, s2, map) = (client.clone(), local.clone(), node.clone(), s.clone(), streams.clone());
                    // The person the hub's caller is and the hub, as for a command.
                    let by = h.and_then(|h| h.get(ACTOR)).map(|v| v.as_str().to_string());
                    let hub = h.and_then(|h| h.get(HUB)).map(|v| v.as_str().to_string());
                    if let Some(a) =
                        unchecked(&node, &local, hub.as_deref(), h.is_some_and(|h| h.get(CHECKED).is_some()))
                    {
                        let _ = client.publish(reply, Bytes::from(serde_json::to_vec(&a).unwrap_or_default())).await;
                        continue;
                    }
                    let task = tokio::spawn(async move {
                        let mut f = f;
                        if f.method == "GET" {
                            relay(&c, &l, &n, &f, &s2, reply, Relay::Thread, Acting::default()).await;
                            map.lock().unwrap_or_else(|e| e.into_inner()).remove(&s2);
                            return;
                        }
                        if let Some(size) = pieces {
                            let deadline = tokio::time::Instant::now() + PULL_WAIT;
                            match pull_body(&c, &s2, size, deadline).await.map(String::from_utf8) {
                                Some(Ok(b)) => f.body = b,
                                got => {
                                    let why =
                                        if got.is_some() { "is not UTF-8" } else { "could not be read from the hub" };
                                    let a =
                                        Answer::error(400, format!("node {n}: the AG-UI body of {size} bytes {why}"));
                                    let _ =
                                        c.publish(reply, Bytes::from(serde_json::to_vec(&a).unwrap_or_default())).await;
                                    map.lock().unwrap_or_else(|e| e.into_inner()).remove(&s2);
                                    return;
                                }
                            }
                        }
                        if !said_go(&c, &s2, budget.unwrap_or_else(tokio::time::Instant::now)).await {
                            let a = Answer::error(
                                504,
                                format!(
                                    "node {n}: the run's budget ran out before the node could take it: it was not run"
                                ),
                            );
                            let _ = c.publish(reply, Bytes::from(serde_json::to_vec(&a).unwrap_or_default())).await;
                            map.lock().unwrap_or_else(|e| e.into_inner()).remove(&s2);
                            return;
                        }
                        relay(
                            &c,
                            &l,
                            &n,
                            &f,
                            &s2,
                            reply,
                            Relay::Run,
                            Acting { person: by.as_deref(), hub: hub.as_deref(), checked: true },
                        )
                        .await;
                        map.lock().unwrap_or_else(|e| e.into_inner()).remove(&s2);
                    });
                    streams.lock().unwrap_or_else(|e| e.into_inner()).insert(s, task.abort_handle());
                }
                (a, _) => {
                    let a = a.unwrap_or_else(|| Answer::error(400, "a forwarded request".into()));
                    let _ = client.publish(reply, Bytes::from(serde_json::to_vec(&a).unwrap_or_default())).await;
                }
            }
            continue;
        }
        let answer = take(&client, &node, &local, &mut keys, &msg).await;
        let body = Bytes::from(serde_json::to_vec(&answer).unwrap_or_default());
        if let Err(e) = client.publish(reply, body).await {
            crate::report(format!("control: reply: {e}"));
        }
    }
    Ok(())
}

/// A hub's command or AG-UI run that this node does not take: its own
/// server needs a token, and the hub checked none of its caller's (no door
/// into a node weaker than the node's HTTP). Nothing was done. A command
/// of `runwire-cluster control` (no hub) is its caller's credentials' to make.
fn unchecked(node: &str, local: &Local, hub: Option<&str>, checked: bool) -> Option<Answer> {
    let hub = hub.filter(|_| local.token_file.is_some() && !checked)?;
    Some(Answer::error(
        403,
        format!(
            "node {node}: its server needs a token, and hub {hub} checks none of its callers' \
             (start the hub with --token-file): nothing was done"
        ),
    ))
}

/// A command at the node: its key's first answer if it ran already; else,
/// within its budget and once the asker said "go", the request made to the
/// node's own server (its key on disk first, then its answer).
async fn take(
    client: &async_nats::Client,
    node: &str,
    local: &Local,
    keys: &mut crate::keys::Keys,
    msg: &async_nats::Message,
) -> Answer {
    let took = tokio::time::Instant::now();
    let h = msg.headers.as_ref();
    let get = |name: &str| h.and_then(|h| h.get(name)).map(|v| v.as_str().to_string());
    let Some(key) = get(REQUEST_ID).filter(|k| crate::keys::valid(k)) else {
        return Answer::error(400, format!("node {node}: a command without a valid idempotency key ({REQUEST_ID})"));
    };
    if let Some(a) = unchecked(node, local, get(HUB).as_deref(), get(CHECKED).is_some()) {
        return a;
    }
    let actor = get(ACTOR).unwrap_or_default();
    let path = get(PATH).unwrap_or_default();
    let method = get(METHOD).unwrap_or_else(|| "POST".into());
    let form = match get(CONTENT_TYPE) {
        None => false,
        Some(t) if t == FORM => true,
        Some(t) => {
            return Answer::error(400, format!("node {node}: a command's body is JSON or a link's form, not {t:?}"))
        }
    };
    let size: Option<usize> = get(BODY_SIZE).and_then(|s| s.parse().ok());
    if !allowed_path(&method, &path) || msg.payload.len().max(size.unwrap_or(0)) > MAX_BODY {
        return Answer::error(400, format!("node {node}: {method} {path} is not a control route"));
    }
    let Some(budget) = get(BUDGET).and_then(|b| b.parse::<u64>().ok()).map(Duration::from_millis) else {
        return Answer::error(400, format!("node {node}: a command without its budget ({BUDGET})"));
    };
    let budget = budget.min(MAX_BUDGET);
    let late = || {
        Answer::error(
            504,
            format!("node {node}: the command's budget ran out before the node could take it: it was not run"),
        )
    };
    let Some(go) = get(GO).filter(|g| valid_stream(node, g)) else {
        return Answer::error(400, format!("node {node}: a command without its {GO} subject"));
    };
    if budget.is_zero() {
        return late();
    }
    // A large body is read from the asker first, within the budget.
    let body = match size {
        Some(n) => match pull_body(client, &go, n, took + budget).await {
            Some(b) => Bytes::from(b),
            None => return late(),
        },
        None => msg.payload.clone(),
    };
    // The key is its caller's (`keys`): two people's never meet; and it
    // names this command: another under it is refused, not answered with
    // the first one's reply (at another hub, after a restart).
    let fp = crate::keys::command(&method, &path, if form { FORM } else { "application/json" }, &body);
    if let Some(a) = keys.get(&actor, &key, fp) {
        return a;
    }
    // The asker decides: a "go" within its budget, else never.
    if !said_go(client, &go, took + budget).await {
        return late();
    }
    let hub = get(HUB);
    keys.started(&actor, &key, fp);
    // The person the hub's caller is and the hub, for the node's journal
    // (its server takes them from the sidecar's token only, and holds the
    // key as theirs too).
    let a = http(local, &method, &path, &body, form, Some(&key), Some(&actor), hub.as_deref()).await;
    keys.done(&actor, &key, &a);
    a
}

/// Whether the asker said "go" on `<go>.go` before `deadline` (it says
/// "late" past its budget, or is gone: then the request never runs).
async fn said_go(client: &async_nats::Client, go: &str, deadline: tokio::time::Instant) -> bool {
    let Some(left) = deadline.checked_duration_since(tokio::time::Instant::now()) else { return false };
    let req = async_nats::Request::new().timeout(Some(left.max(Duration::from_millis(1))));
    matches!(client.send_request(format!("{go}.go"), req).await, Ok(m) if &m.payload[..] == b"go")
}

/// A command's body of `size` bytes, read from its asker piece by piece
/// before `deadline`; `None` when it cannot be (the asker is gone or late).
async fn pull_body(
    client: &async_nats::Client,
    go: &str,
    size: usize,
    deadline: tokio::time::Instant,
) -> Option<Vec<u8>> {
    let mut body = Vec::with_capacity(size);
    while body.len() < size {
        let left = deadline.checked_duration_since(tokio::time::Instant::now())?;
        let mut h = HeaderMap::new();
        h.insert(names::header::OFFSET, body.len().to_string().as_str());
        let req = async_nats::Request::new().headers(h).timeout(Some(left));
        let m = client.send_request(format!("{go}.body"), req).await.ok()?;
        if m.payload.is_empty() || body.len() + m.payload.len() > size {
            return None;
        }
        body.extend_from_slice(&m.payload);
    }
    Some(body)
}

/// The bytes of a request to the node's own server (HTTP/1.0: the answer's
/// body ends with the connection). `actor`: whom a command is for (a
/// name; the server journals it when the token is its `cluster` one).
#[allow(clippy::too_many_arguments)]
fn request_bytes(
    local: &Local,
    method: &str,
    path: &str,
    body: &[u8],
    form: bool,
    key: Option<&str>,
    actor: Option<&str>,
    hub: Option<&str>,
) -> Result<Vec<u8>, Answer> {
    let token = match &local.token_file {
        // The server's own parser: one anonymous token, or named ones (the one named `cluster`, else the first, is the sidecar's).
        Some(p) => match runwire::serve::tokens::read_first(p) {
            Ok(t) => Some(String::from_utf8_lossy(&t).into_owned()),
            Err(e) => return Err(Answer::error(500, e)),
        },
        None => None,
    };
    let ctype = if form { FORM } else { "application/json" };
    let mut req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n",
        local.addr,
        body.len()
    );
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(k) = key {
        req.push_str(&format!("Idempotency-Key: {k}\r\n"));
    }
    if let Some(a) = actor.filter(|a| runwire::serve::tokens::valid_name(a)) {
        req.push_str(&format!("{ACTOR}: {a}\r\n"));
    }
    if let Some(h) = hub.filter(|h| runwire::serve::tokens::valid_name(h)) {
        req.push_str(&format!("{HUB}: {h}\r\n"));
    }
    req.push_str("\r\n");
    let mut req = req.into_bytes();
    req.extend_from_slice(body);
    Ok(req)
}

/// The status of a response head (`HTTP/1.1 200 OK`).
fn status_of(head: &[u8]) -> u16 {
    String::from_utf8_lossy(head).split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(502)
}

/// The content type of a response head, when it is HTML (a link's page;
/// every other answer is JSON).
fn html_of(head: &[u8]) -> Option<String> {
    String::from_utf8_lossy(head).lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        (n.trim().eq_ignore_ascii_case("content-type") && v.trim().starts_with("text/html"))
            .then(|| v.trim().to_string())
    })
}

/// The request, made to the node's own server (HTTP/1.0 on loopback).
#[allow(clippy::too_many_arguments)]
async fn http(
    local: &Local,
    method: &str,
    path: &str,
    body: &[u8],
    form: bool,
    key: Option<&str>,
    actor: Option<&str>,
    hub: Option<&str>,
) -> Answer {
    let req = match request_bytes(local, method, path, body, form, key, actor, hub) {
        Ok(r) => r,
        Err(a) => return a,
    };
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(&local.addr).await?;
        s.write_all(&req).await?;
        let mut raw = Vec::new();
        (&mut s).take(MAX_BODY as u64 + 64 * 1024).read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(e)) => return Answer::error(502, format!("the node's server {}: {e}", local.addr)),
        // The request was written: the server may have acted on it (a
        // command runs here only after its asker's "go"), so never a 504,
        // which says it will not run.
        Err(_) => {
            return Answer::error(
                502,
                format!("the node's server {} did not answer within 30 s: it may have run", local.addr),
            )
        }
    };
    let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Answer::error(502, format!("the node's server {}: not an HTTP response", local.addr));
    };
    Answer {
        status: status_of(&raw[..i]),
        body: String::from_utf8_lossy(&raw[i + 4..]).into_owned(),
        content_type: html_of(&raw[..i]),
    }
}

/// Whom a forwarded AG-UI run acts for: the hub's caller (its token's
/// name) and the hub ([`ACTOR`], [`HUB`]), journaled at the node.
#[derive(Clone, Copy, Default)]
pub struct Acting<'a> {
    pub person: Option<&'a str>,
    pub hub: Option<&'a str>,
    /// The hub checked its caller's token ([`CHECKED`]).
    pub checked: bool,
}

/// What a stream relays ([`relay`]).
#[derive(Clone, Copy, PartialEq)]
enum Relay {
    /// A forwarded `POST /agui`: an AG-UI run's SSE body.
    Run,
    /// A forwarded `GET /agui/thread`: a thread's JSON, often larger than
    /// one message, and of any size the node's own route answers (its
    /// bound: a thread's file is read up to `MAX_THREAD_FILE`).
    Thread,
}

/// A forwarded `POST /agui` or `GET /agui/thread`, made to the node's own
/// server: a refusal is the reply (status and body; a thread's error
/// message names the node); a 200 is replied at once and its body
/// published to the stream subject `s` as it comes, message by message
/// (header [`SEQ`]), the last one with [`END`]. Every [`PING`] the node asks
/// `<s>.alive` whether the hub still reads; nobody there (no responders),
/// it drops the request, so its server sees the client leave.
#[allow(clippy::too_many_arguments)]
async fn relay(
    client: &async_nats::Client,
    local: &Local,
    node: &str,
    f: &Forwarded,
    s: &str,
    reply: async_nats::Subject,
    what: Relay,
    by: Acting<'_>,
) {
    let answer = |a: Answer| async move {
        let _ = client.publish(reply, Bytes::from(serde_json::to_vec(&a).unwrap_or_default())).await;
    };
    let req = match request_bytes(local, &f.method, &f.path, f.body.as_bytes(), false, None, by.person, by.hub) {
        Ok(r) => r,
        Err(a) => return answer(a).await,
    };
    // The head comes at once: the server starts the body before the run.
    let head = async {
        let mut sock = tokio::net::TcpStream::connect(&local.addr).await?;
        sock.write_all(&req).await?;
        let mut raw = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = sock.read(&mut buf).await?;
            raw.extend_from_slice(&buf[..n]);
            if n == 0 || raw.windows(4).any(|w| w == b"\r\n\r\n") || raw.len() > 64 * 1024 {
                return Ok::<_, std::io::Error>((sock, raw));
            }
        }
    };
    let (mut sock, raw) = match tokio::time::timeout(Duration::from_secs(30), head).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return answer(Answer::error(502, format!("node {node}: its server {}: {e}", local.addr))).await,
        // A read did nothing: its server is only slow.
        Err(_) if what == Relay::Thread => {
            let m = format!("node {node}: its server {} did not answer within 30 s", local.addr);
            return answer(Answer::error(504, m)).await;
        }
        Err(_) => {
            // Written after the asker's "go": the run may have started,
            // so never a 504, which says it will not.
            let m =
                format!("node {node}: its server {} did not answer within 30 s: the run may have started", local.addr);
            return answer(Answer::error(502, m)).await;
        }
    };
    let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return answer(Answer::error(502, format!("node {node}: its server {}: not an HTTP response", local.addr)))
            .await;
    };
    let status = status_of(&raw[..i]);
    let mut rest = raw[i + 4..].to_vec();
    if status != 200 {
        let _ = tokio::time::timeout(Duration::from_secs(30), (&mut sock).take(MAX_BODY as u64).read_to_end(&mut rest))
            .await;
        let body = String::from_utf8_lossy(&rest).into_owned();
        let body = if what == Relay::Thread { named(node, body) } else { body };
        return answer(Answer::json(status, body)).await;
    }
    answer(Answer::json(status, String::new())).await;
    let mut seq = 0u64;
    let publish = |seq: u64, data: Vec<u8>, end: bool| {
        let mut h = HeaderMap::new();
        h.insert(SEQ, seq.to_string().as_str());
        if end {
            h.insert(END, "1");
        }
        client.publish_with_headers(s.to_string(), h, Bytes::from(data))
    };
    if !rest.is_empty() && publish(seq, rest, false).await.is_ok() {
        seq += 1;
    }
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING, PING);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            n = sock.read(&mut buf) => match n {
                Ok(n) if n > 0 => {
                    if let Err(e) = publish(seq, buf[..n].to_vec(), false).await {
                        crate::report(format!("control: {s}: {e}"));
                        return;
                    }
                    seq += 1;
                }
                _ => break,
            },
            _ = ping.tick() => {
                let req = async_nats::Request::new().timeout(Some(Duration::from_secs(3)));
                if let Err(e) = client.send_request(format!("{s}.alive"), req).await {
                    if e.kind() == async_nats::RequestErrorKind::NoResponders {
                        return; // the hub's reader is gone: so is this request
                    }
                }
            }
        }
    }
    let _ = publish(seq, Vec::new(), true).await;
}

fn request_error(node: &str, e: async_nats::RequestError, timeout: Duration) -> Answer {
    match e.kind() {
        async_nats::RequestErrorKind::NoResponders => {
            Answer::error(503, format!("node {node} is not connected to the cluster (no responders)"))
        }
        async_nats::RequestErrorKind::TimedOut => {
            Answer::error(504, format!("node {node} did not answer within {} ms", timeout.as_millis()))
        }
        _ => Answer::error(502, format!("node {node}: {e}")),
    }
}

/// Forwards a command to its node: the node's answer, or 503 (no node
/// listening, at once), or 504 (the node did not take it within its
/// budget: it will never run), naming the node; 502 when the node took it
/// and did not answer within [`RUNNING_GRACE`] more (it may have run).
pub async fn command(client: &async_nats::Client, c: &Command) -> Answer {
    let node = c.node.as_str();
    if !names::valid_node(node) {
        return Answer::error(400, format!("{node:?} is not a node name"));
    }
    if !crate::keys::valid(&c.key) {
        return Answer::error(
            400,
            format!("node {node}: an idempotency key is 1 to {} printable characters", crate::keys::MAX_KEY),
        );
    }
    if !allowed_path(&c.method, &c.path) {
        return Answer::error(400, format!("node {node}: {} {} is not a control route", c.method, c.path));
    }
    // A message holds the servers' max_payload, headers included: larger bodies go in pieces.
    let max = client.server_info().max_payload.saturating_sub(8192).max(4096);
    if c.body.len() > MAX_BODY {
        let m = format!("node {node}: a body of {} bytes: a command carries at most {MAX_BODY}", c.body.len());
        return Answer::error(413, m);
    }
    let due = Due::new(c.budget, c.until);
    let token = client.new_inbox().rsplit('.').next().unwrap_or_default().to_string();
    let go = stream_subject(node, &token);
    let gos = match client.subscribe(format!("{go}.*")).await {
        Ok(s) => s,
        Err(e) => return Answer::error(502, format!("node {node}: {e}")),
    };
    let mut h = HeaderMap::new();
    h.insert(REQUEST_ID, c.key.as_str());
    h.insert(ACTOR, c.actor.as_str());
    if let Some(hub) = &c.hub {
        h.insert(HUB, hub.as_str());
    }
    if c.checked {
        h.insert(CHECKED, "token");
    }
    h.insert(PATH, c.path.as_str());
    if c.method != "POST" {
        h.insert(METHOD, c.method.as_str());
    }
    if c.form {
        h.insert(CONTENT_TYPE, FORM);
    }
    h.insert(GO, go.as_str());
    // What is left now: the node waits for the "go" no longer than the asker says it.
    h.insert(BUDGET, due.left().as_millis().max(1).to_string().as_str());
    // A body too large for one message goes in pieces, asked for by the node.
    let whole = Bytes::from(c.body.clone());
    let pieces = c.body.len() > PIECE.min(max);
    if pieces {
        h.insert(BODY_SIZE, c.body.len().to_string().as_str());
    }
    let req = async_nats::Request::new().payload(if pieces { Bytes::new() } else { whole.clone() }).headers(h);
    let whole = pieces.then_some((&whole, PIECE.min(max)));
    ask_with_go(client, node, req, due, gos, whole, "command").await
}

/// Sends `req` to `node`, which runs it only on this asker's "go" (asked on
/// `<go>.go`, which `gos` follows: said once and before the budget's end,
/// else "late"), and awaits its answer: the node's own; 504 when it did not
/// take it within `budget` (it never will: it asks first); 502 when it took
/// it and did not answer within [`RUNNING_GRACE`] more (it may have run);
/// 503 when no node listens. `whole`: a body the node asks for in pieces of
/// at most the size given (on `<go>.body`, followed by `gos` too), until
/// it runs. `what` names the request in the answers.
async fn ask_with_go(
    client: &async_nats::Client,
    node: &str,
    req: async_nats::Request,
    due: Due,
    mut gos: async_nats::Subscriber,
    whole: Option<(&Bytes, usize)>,
    what: &str,
) -> Answer {
    let (budget, deadline) = (due.budget, due.until);
    let asked = client.send_request(subject(node), req.timeout(Some(budget + RUNNING_GRACE)));
    tokio::pin!(asked);
    let mut running = false;
    let mut open = true;
    loop {
        tokio::select! {
            r = &mut asked => return match r {
                Ok(m) => serde_json::from_slice(&m.payload)
                    .unwrap_or_else(|e| Answer::error(502, format!("node {node}: a reply that does not parse: {e}"))),
                Err(e) if running && e.kind() == async_nats::RequestErrorKind::TimedOut => Answer::error(
                    502,
                    format!("node {node} took the {what} and did not answer within {} s: it may have run", (budget + RUNNING_GRACE).as_secs()),
                ),
                Err(e) => request_error(node, e, budget),
            },
            m = gos.next(), if open => {
                let Some(m) = m else {
                    open = false;
                    continue;
                };
                let Some(reply) = m.reply.clone() else { continue };
                if m.subject.as_str().ends_with(".body") {
                    let piece = match whole {
                        Some((w, size)) if !running && tokio::time::Instant::now() < deadline => piece_asked(&m, w, size),
                        _ => Bytes::new(),
                    };
                    let _ = client.publish(reply, piece).await;
                    continue;
                }
                // Once, and within the budget: the node runs it only on this "go".
                let say: &'static [u8] = if !running && tokio::time::Instant::now() < deadline { b"go" } else { b"late" };
                running |= say == b"go";
                let _ = client.publish(reply, Bytes::from_static(say)).await;
                let _ = client.flush().await;
            }
            _ = tokio::time::sleep_until(deadline), if !running => {
                return Answer::error(
                    504,
                    format!("node {node} did not take the {what} within {} ms: it will not run", budget.as_millis()),
                );
            }
        }
    }
}

/// Answers a node's requests for the pieces of `whole` on `subject` (each
/// names its offset, [`names::header::OFFSET`]; past the end: empty), until
/// the task is aborted.
async fn serve_pieces(
    client: &async_nats::Client,
    subject: String,
    whole: Bytes,
    piece: usize,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut asks = client.subscribe(subject).await.map_err(|e| anyhow!("{e}"))?;
    let client = client.clone();
    Ok(tokio::spawn(async move {
        while let Some(m) = asks.next().await {
            let Some(reply) = m.reply.clone() else { continue };
            let _ = client.publish(reply, piece_asked(&m, &whole, piece)).await;
        }
    }))
}

/// The piece of `whole` a node's request `m` asks for (at its offset,
/// [`names::header::OFFSET`], at most `piece` bytes; past the end or with
/// no offset: empty, which the node reads as the body not to be had).
fn piece_asked(m: &async_nats::Message, whole: &Bytes, piece: usize) -> Bytes {
    let off = m.headers.as_ref().and_then(|h| h.get(names::header::OFFSET)).and_then(|v| v.as_str().parse().ok());
    match off {
        Some(o) if o < whole.len() => whole.slice(o..whole.len().min(o + piece)),
        _ => Bytes::new(),
    }
}

/// The threads bucket, when `setup` made it (an older cluster: none, and
/// a thread is continued only at the hub that started it).
async fn threads(client: &async_nats::Client) -> Option<async_nats::jetstream::kv::Store> {
    crate::conn::hub_js(client.clone()).get_key_value(names::THREADS_BUCKET).await.ok()
}

fn thread_of(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get("threadId")?.as_str().map(str::to_string)
}

/// The node `thread` runs on, as a hub kept it in the cluster
/// ([`keep_thread`]); `None` when no hub did (or the cluster has no bucket
/// of threads, or cannot be asked now).
pub async fn kept_node(client: &async_nats::Client, thread: &str) -> Option<String> {
    let kept = match threads(client).await {
        Some(kv) => kv.get(names::thread_key(thread)).await.ok().flatten(),
        None => None,
    };
    kept.and_then(|v| String::from_utf8(v.to_vec()).ok()).filter(|n| names::valid_node(n))
}

/// The node a thread runs on, as a hub kept it in the cluster
/// ([`keep_thread`]); `Err` the 400's message.
pub async fn thread_node(client: &async_nats::Client, body: &[u8]) -> Result<String, String> {
    let thread = thread_of(body).unwrap_or_default();
    kept_node(client, &thread).await.ok_or_else(|| {
        format!(
            "thread {thread:?}: no hub has run it, so the cluster does not know its node: name the node \
             that runs it in forwardedProps.node (a hub runs no agent itself; a thread started at a node's \
             own server is that node's; the nodes are the prefixes of the run ids in GET /runs)"
        )
    })
}

/// Keeps a thread's node in the cluster, so any hub continues it.
pub async fn keep_thread(client: &async_nats::Client, body: &[u8], node: &str) {
    let (Some(thread), Some(kv)) = (thread_of(body), threads(client).await) else { return };
    let key = names::thread_key(&thread);
    if kv.get(&key).await.ok().flatten().is_some_and(|v| v.as_ref() == node.as_bytes()) {
        return;
    }
    if let Err(e) = kv.put(&key, bytes::Bytes::from(node.to_string())).await {
        crate::report(format!("bucket {}: {key}: {e}", names::THREADS_BUCKET));
    }
}

/// An AG-UI error frame (the stream's end when the node is lost mid-run).
fn run_error(message: &str) -> Vec<u8> {
    let v = serde_json::json!({"type": "RUN_ERROR", "message": message, "code": "node_lost"});
    runwire::pipeline::encode::frame(None, None, &v.to_string()).into_bytes()
}

/// Forwards `POST /agui` (`body`) to `node` and gives its answer to `out`:
/// first the answer (the node's own, or 503/504 naming it, as
/// [`command`]); after a 200, the SSE body as the node's server writes it,
/// until its end. Ends the stream with a
/// `RUN_ERROR` frame naming the node when the node falls silent for 20 s
/// or a message is lost. When `out` fails (the client left) or `stop`
/// resolves, the node is told ([`CANCEL`]) to drop the request.
pub async fn forward_agui(
    client: &async_nats::Client,
    node: &str,
    body: String,
    by: Acting<'_>,
    due: Due,
    out: &crate::wire::Sink,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let f = Forwarded { method: "POST".into(), path: "/agui".into(), body };
    forward_stream(client, node, f, by, due, out, stop).await
}

/// Forwards `GET /agui/thread?threadId=<thread>` to `node` and gives its
/// answer to `out` as [`forward_agui`] does: the answer (the node's own,
/// its error named by the node; or 503/504 naming it); after a 200, the
/// thread's JSON as the node's server gives it (of any size: a piece a
/// message) in `data` frames, then the `end` (with an `error` when the
/// node was lost on the way: the body is then cut).
pub async fn forward_thread(
    client: &async_nats::Client,
    node: &str,
    thread: &str,
    by: Acting<'_>,
    due: Due,
    out: &crate::wire::Sink,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let f = Forwarded { method: "GET".into(), path: thread_path(thread), body: String::new() };
    forward_stream(client, node, f, by, due, out, stop).await
}

/// The route a thread's read is made on at its node: `threadId`
/// percent-encoded (every byte but the unreserved ones).
pub fn thread_path(thread: &str) -> String {
    let mut p = String::from(THREAD_PATH);
    for b in thread.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            p.push(b as char);
        } else {
            p.push_str(&format!("%{b:02X}"));
        }
    }
    p
}

/// The start of a forwarded thread read's route.
const THREAD_PATH: &str = "/agui/thread?threadId=";

/// The (still encoded) thread id of a thread read's route ([`thread_path`]):
/// `None` for any other route, so a node reads nothing else for a hub.
fn thread_id_of(path: &str) -> Option<&str> {
    let t = path.strip_prefix(THREAD_PATH)?;
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'%');
    (!t.is_empty() && t.len() <= 3 * runwire::serve::agui::MAX_ID && t.bytes().all(unreserved)).then_some(t)
}

/// A refusal's body whose `error` names the node (the hub's caller asked
/// the hub), as every message a hub relays does.
fn named(node: &str, body: String) -> String {
    let named = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .filter(|e| !e.starts_with(&format!("node {node}")));
    match named {
        Some(e) => serde_json::json!({"error": format!("node {node}: {e}")}).to_string(),
        None => body,
    }
}

/// A request on a stream ([`forward_agui`], [`forward_thread`]): its
/// answer, then its body's messages in order until the last, to `out`.
/// A node name that is none (400) or a body over [`MAX_BODY`] (413) is
/// answered here and nothing is sent.
async fn forward_stream(
    client: &async_nats::Client,
    node: &str,
    f: Forwarded,
    by: Acting<'_>,
    due: Due,
    out: &crate::wire::Sink,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    if !names::valid_node(node) {
        out.answer(&Answer::error(400, format!("{node:?} is not a node name"))).await;
        return Ok(());
    }
    if f.body.len() > MAX_BODY {
        let m = format!("node {node}: a body of {} bytes: a hub forwards at most {MAX_BODY}", f.body.len());
        out.answer(&Answer::error(413, m)).await;
        return Ok(());
    }
    // An SSE body is cut with a RUN_ERROR event; any other with the end's error.
    let sse = f.method == "POST";
    let inbox = client.new_inbox();
    let token = inbox.rsplit('.').next().unwrap_or_default().to_string();
    let s = stream_subject(node, &token);
    let mut chunks = client.subscribe(s.clone()).await.map_err(|e| anyhow!("{e}"))?;
    let mut alive = client.subscribe(format!("{s}.alive")).await.map_err(|e| anyhow!("{e}"))?;
    let mut h = HeaderMap::new();
    h.insert(REQUEST_ID, token.as_str());
    h.insert(STREAM, s.as_str());
    // Who the hub's caller is and which hub, for the node's journal (its
    // server believes them from the sidecar's token only).
    if let Some(a) = by.person {
        h.insert(ACTOR, a);
    }
    if let Some(n) = by.hub {
        h.insert(HUB, n);
    }
    if by.checked {
        h.insert(CHECKED, "token");
    }
    // The body rides in the request when the message holds it (JSON-escaped,
    // headers included, under the servers' max_payload); else the node asks
    // for it in pieces, as for a command, while the request waits.
    let max = client.server_info().max_payload.saturating_sub(8192).max(4096);
    let mut f = f;
    let mut payload = serde_json::to_vec(&f).unwrap_or_default();
    let pieces = (payload.len() > max).then(|| Bytes::from(std::mem::take(&mut f.body).into_bytes()));
    let serving = match &pieces {
        Some(whole) => {
            payload = serde_json::to_vec(&f).unwrap_or_default();
            h.insert(BODY_SIZE, whole.len().to_string().as_str());
            Some(serve_pieces(client, format!("{s}.body"), whole.clone(), PIECE.min(max)).await?)
        }
        None => None,
    };
    // A run (not a read) starts at the node only on this asker's "go",
    // given once and within the budget, as a command does ([`command`]): a
    // node that takes the request after the hub answered 504 (its sidecar
    // or server stalled) asks, hears "late" or nobody, and never runs it.
    let gos = client.subscribe(format!("{s}.go")).await.map_err(|e| anyhow!("{e}"))?;
    h.insert(BUDGET, due.left().as_millis().max(1).to_string().as_str());
    let req = async_nats::Request::new().payload(Bytes::from(payload)).headers(h);
    let a = ask_with_go(client, node, req, due, gos, None, "request").await;
    // The node has read the body by its answer: no piece is asked for after it.
    if let Some(t) = serving {
        t.abort();
    }
    if !out.answer(&a).await || a.status != 200 {
        return Ok(());
    }
    let cancel = || async {
        let mut h = HeaderMap::new();
        h.insert(CANCEL, s.as_str());
        let _ = client.publish_with_headers(subject(node), h, Bytes::new()).await;
        let _ = client.flush().await;
    };
    tokio::pin!(stop);
    let mut next = 0u64;
    let mut heard = tokio::time::Instant::now();
    let mut cut = None;
    loop {
        tokio::select! {
            m = chunks.next() => {
                let Some(m) = m else { break };
                heard = tokio::time::Instant::now();
                let seq: Option<u64> = m.headers.as_ref().and_then(|h| h.get(SEQ)).and_then(|v| v.as_str().parse().ok());
                if seq != Some(next) {
                    let msg = format!("node {node}: the stream lost messages (got {seq:?}, expected {next})");
                    if sse {
                        out.data(run_error(&msg)).await;
                    } else {
                        cut = Some(msg);
                    }
                    cancel().await;
                    break;
                }
                next += 1;
                if !out.data(m.payload.to_vec()).await {
                    cancel().await;
                    break;
                }
                if m.headers.as_ref().and_then(|h| h.get(END)).is_some() {
                    break;
                }
            }
            m = alive.next() => {
                heard = tokio::time::Instant::now();
                if let Some(r) = m.and_then(|m| m.reply) {
                    let _ = client.publish(r, Bytes::new()).await;
                }
            }
            _ = tokio::time::sleep_until(heard + SILENCE) => {
                let msg = format!("node {node} stopped answering ({} s without a word)", SILENCE.as_secs());
                if sse {
                    out.data(run_error(&msg)).await;
                } else {
                    cut = Some(msg);
                }
                cancel().await;
                break;
            }
            _ = &mut stop => {
                cancel().await;
                break;
            }
        }
    }
    out.end(cut).await;
    Ok(())
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
        // An approval link's page and answer: a token's characters only.
        assert!(allowed(&f("GET", "/a/eyJyIjoiIn0.bWFj")) && allowed(&f("POST", "/a/eyJyIjoiIn0.bWFj")));
        for bad in ["/a/", "/a/x", "/a/x.y/../../runs", "/a/x.y?z", "/a/x.y HTTP/1.1\r\nX: y", "/a/x.y.z"] {
            assert!(!allowed(&f("GET", bad)) && !allowed(&f("POST", bad)), "{bad}");
        }
        assert!(!allowed(&f("PUT", "/a/eyJyIjoiIn0.bWFj")));
        assert_eq!(link_path("x.y").as_deref(), Some("/a/x.y"));
        assert_eq!(link_path("x/y.z"), None);
    }

    /// A command to the node's own server uses the token file's `cluster`
    /// token and says whom it is for (a name only: nothing else reaches the head).
    #[test]
    fn a_command_to_the_nodes_server_names_its_person_with_the_sidecars_token() {
        let dir = std::env::temp_dir().join(format!("rw-control-req-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tf = dir.join("tokens");
        std::fs::write(&tf, "ana:0123456789abcdef-ana\ncluster:0123456789abcdef-cluster\n").unwrap();
        let local = Local { addr: "127.0.0.1:9".into(), token_file: Some(tf), home: dir.clone() };
        let head = |actor: &str, hub: Option<&str>| {
            let r = request_bytes(&local, "POST", "/runs/a/tasks/b/answer", b"{}", false, Some("k1"), Some(actor), hub)
                .unwrap();
            String::from_utf8(r).unwrap()
        };
        let h = head("bob", Some("hub-1"));
        assert!(
            h.contains("Authorization: Bearer 0123456789abcdef-cluster\r\n")
                && h.contains("Rw-Actor: bob\r\n")
                && h.contains("Rw-Hub: hub-1\r\n"),
            "{h}"
        );
        assert!(!head("bob\r\nX: y", None).contains("Rw-Actor"));
        assert!(!head("bob", Some("hub\r\nX: y")).contains("Rw-Hub"));
        assert!(!head("bob", None).contains("Rw-Hub"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A hub's thread read is one route with its id percent-encoded; a
    /// node reads nothing else for a hub (no other query, no other path).
    #[test]
    fn a_thread_read_is_its_route_only() {
        let p = thread_path("t read/\u{e9}&x=1");
        assert_eq!(p, "/agui/thread?threadId=t%20read%2F%C3%A9%26x%3D1");
        assert_eq!(thread_id_of(&p), Some("t%20read%2F%C3%A9%26x%3D1"));
        let long = thread_path(&"\u{e9}".repeat(128));
        assert!(thread_id_of(&long).is_some(), "256 bytes, encoded");
        for bad in [
            "/agui/thread?threadId=",
            "/agui/thread?threadId=a&token=b",
            "/agui/thread?threadId=a b",
            "/agui/thread?threadId=a#b",
            "/agui/thread?x=1&threadId=a",
            "/agui/threads?threadId=a",
            "/runs?threadId=a",
        ] {
            assert_eq!(thread_id_of(bad), None, "{bad}");
        }
        assert_eq!(thread_id_of(&format!("/agui/thread?threadId={}", "a".repeat(769))), None);
    }

    #[test]
    fn a_node_streams_only_to_its_own_subjects() {
        assert!(valid_stream("alpha", &stream_subject("alpha", "AbC123")));
        for bad in [
            "rwagui.beta.AbC",
            "rwagui.alpha.",
            "rwagui.alpha.a.b",
            "rwagui.alpha.a*",
            "rwagui.alphax.a",
            "rwctl.alpha",
        ] {
            assert!(!valid_stream("alpha", bad), "{bad}");
        }
        let e = String::from_utf8(run_error("node a: gone")).unwrap();
        let v: serde_json::Value = serde_json::from_str(e.strip_prefix("data: ").unwrap().trim()).unwrap();
        assert_eq!((v["type"].as_str(), v["code"].as_str()), (Some("RUN_ERROR"), Some("node_lost")));
    }
}
