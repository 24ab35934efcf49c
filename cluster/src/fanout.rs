//! The hub's change feed, `GET /runs/events` at a hub, for every client at
//! once: ONE ordered consumer of `RUNWIRE_FEED` fanned out over the
//! channel (spec/CLUSTER.md, "The hub's change feed"). Its frames are the
//! core's: `runwire::pipeline::encode` frames, the local feed's event vocabulary.

use crate::names;
use anyhow::anyhow;
use async_nats::jetstream;
use std::time::Duration;

/// The filters and resume point of `GET /runs/events`: the local feed's
/// query, parsed by the same code.
pub fn feed_query(query: &str) -> Result<(runwire::runs::feed::Filter, Option<u64>), String> {
    runwire::serve::feed::query(query)
}

/// One event of `RUNWIRE_FEED` as a hub serves it: the node's feed line
/// with `id` = its stream sequence first (as the local feed frames it),
/// `runId` the hub's (`<node>.<run>`) and `node` added last; the rest as
/// the node wrote it, in its order. `None` for a line that is not a JSON
/// object.
pub fn hub_event(node: &str, seq: u64, line: &[u8]) -> Option<String> {
    let serde_json::Value::Object(o) = serde_json::from_slice(line).ok()? else { return None };
    let text = std::str::from_utf8(line).ok()?.trim();
    // Ids are plain characters: the key and its value appear as they are.
    let rewritten = match o.get("runId") {
        Some(serde_json::Value::String(r)) if runwire::runs::valid_id(r) => {
            let old = format!("\"runId\":{}", serde_json::Value::from(r.as_str()));
            let new = format!("\"runId\":{}", serde_json::Value::from(names::hub_run_id(node, r)));
            (text.matches(&old).count() == 1).then(|| text.replacen(&old, &new, 1))
        }
        Some(_) => None,
        None => Some(text.to_string()),
    };
    let body = match (rewritten, o.contains_key("id") || o.contains_key("node")) {
        (Some(t), false) => t,
        // Anything unusual: rebuilt (keys then sorted).
        _ => {
            let mut o = o;
            o.remove("id");
            if let Some(serde_json::Value::String(r)) = o.get("runId").cloned() {
                o.insert("runId".into(), names::hub_run_id(node, &r).into());
            }
            serde_json::Value::Object(o).to_string()
        }
    };
    let mut out = String::from_utf8(runwire::runs::feed::with_id(body.as_bytes(), seq)).ok()?;
    out.pop(); // the closing brace
    let sep = if out.ends_with('{') { "" } else { "," };
    out.push_str(&format!("{sep}\"node\":{}}}", serde_json::Value::from(node)));
    Some(out)
}

/// What a refused resume point adds: a hub's feed ids are not its home's
/// (spec/CLUSTER.md, "Two feeds, two id spaces").
pub const HUB_IDS: &str = ": a hub's feed ids are the stream sequences of RUNWIRE_FEED, the same at every hub, \
     not the offsets of a home's own feed log (`runs watch`, `runs notify`)";

/// A message of `RUNWIRE_FEED`, as the fan-out keeps it.
pub struct FeedMsg {
    pub seq: u64,
    pub subject: String,
    pub payload: bytes::Bytes,
}

/// Messages the fan-out keeps for clients resuming from a recent point.
pub const WINDOW_MSGS: usize = 8192;
/// ... and at most these many payload bytes.
pub const WINDOW_BYTES: usize = 16 * 1024 * 1024;
/// Messages a client may be behind the live feed before it is dropped
/// (told so; it resumes with its Last-Event-ID).
pub const LIVE_QUEUE: usize = 4096;

#[derive(Default)]
struct FanState {
    /// The last sequence the consumer delivered; `None` until it is bound.
    pos: Option<u64>,
    window: std::collections::VecDeque<std::sync::Arc<FeedMsg>>,
    bytes: usize,
}

/// `GET /runs/events` at a hub for every client at once: ONE ordered
/// consumer of `RUNWIRE_FEED` from the stream's end (as the hub starts),
/// fanned out to any number of clients. A client resuming within the
/// recent window (the last [`WINDOW_MSGS`] messages) is served from memory;
/// from further back, it reads the stream itself up to the window, then
/// joins. Each event's id is its stream sequence, so a client resumes at
/// any hub of the cluster.
pub struct Fanout {
    js: jetstream::Context,
    state: std::sync::Mutex<FanState>,
    live: tokio::sync::broadcast::Sender<std::sync::Arc<FeedMsg>>,
    bound: tokio::sync::watch::Sender<bool>,
}

impl Fanout {
    /// The fan-out, its consumer following the stream from now on (and
    /// rebinding after any failure, from where it was).
    pub fn start(client: async_nats::Client) -> std::sync::Arc<Fanout> {
        let (live, _) = tokio::sync::broadcast::channel(LIVE_QUEUE);
        let (bound, _) = tokio::sync::watch::channel(false);
        let f = std::sync::Arc::new(Fanout { js: crate::conn::hub_js(client), state: Default::default(), live, bound });
        let f2 = f.clone();
        tokio::spawn(async move { f2.follow().await });
        f
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FanState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn follow(&self) {
        // From the stream's end as the hub starts.
        let start = crate::util::retry("bind", || async {
            let s = self
                .js
                .get_stream(names::FEED_STREAM)
                .await
                .map_err(|e| anyhow!("stream {}: {e}", names::FEED_STREAM))?;
            Ok(s.cached_info().state.last_sequence)
        })
        .await;
        self.lock().pos.get_or_insert(start);
        self.bound.send_replace(true);
        let mut f = crate::follow::Follow::new(self.js.clone(), names::FEED_STREAM, start);
        loop {
            let Some(m) = f.next(Duration::from_secs(3600)).await else { continue };
            let seq = f.pos;
            let msg = std::sync::Arc::new(FeedMsg { seq, subject: m.subject, payload: m.payload });
            // Window and live queue under one lock: a client joining sees each message once.
            let mut st = self.lock();
            if st.pos.is_some_and(|p| seq <= p) {
                continue;
            }
            st.pos = Some(seq);
            st.bytes += msg.payload.len();
            st.window.push_back(msg.clone());
            while st.window.len() > WINDOW_MSGS || st.bytes > WINDOW_BYTES {
                if let Some(old) = st.window.pop_front() {
                    st.bytes -= old.payload.len();
                }
            }
            let _ = self.live.send(msg);
        }
    }

    /// One client: the answer (400 for a resume point the stream does not
    /// hold, 503 when the stream cannot be read), then after a 200 the SSE
    /// frames from `since` (`None`: from now), a `ready` frame once caught
    /// up (as the local feed does), until the sink fails. A client that
    /// falls [`LIVE_QUEUE`] messages behind is ended with an error saying
    /// so (it resumes with its Last-Event-ID).
    pub async fn client(&self, query: &str, since: Option<u64>, out: &crate::wire::Sink) {
        use crate::wire::Answer;
        let err = |status: u16, msg: &str| Answer::error(status, msg.to_string());
        let (filter, q_since) = match feed_query(query) {
            Ok(q) => q,
            Err(m) => {
                out.answer(&err(400, &m)).await;
                return;
            }
        };
        let since = since.or(q_since);
        let info = async {
            let mut bound = self.bound.subscribe();
            bound.wait_for(|b| *b).await.map_err(|e| anyhow!("{e}"))?;
            // From now: now is what the fan-out has (a message in the stream it
            // has not delivered yet comes live), no request to the cluster.
            if since.is_none() {
                let pos = self.lock().pos.unwrap_or(0);
                return Ok((0, pos));
            }
            // Asked again (a server lost: its request unanswered, the next one to a new leader).
            crate::conn::again(Duration::from_secs(5), || async {
                // One request: the stream's info comes with it.
                let s = self.js.get_stream(names::FEED_STREAM).await.map_err(|e| anyhow!("{e}"))?;
                let i = s.cached_info();
                let (first, last) = (i.state.first_sequence, i.state.last_sequence);
                Ok::<_, anyhow::Error>((first, last))
            })
            .await
        };
        let (first, last) = match tokio::time::timeout(Duration::from_secs(5), info).await {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                out.answer(&err(503, &format!("stream {}: {e}", names::FEED_STREAM))).await;
                return;
            }
            Err(_) => {
                let m = format!("stream {}: the cluster did not answer within 5 s", names::FEED_STREAM);
                {
                    out.answer(&err(503, &m)).await;
                    return;
                };
            }
        };
        let since = since.unwrap_or(last);
        if since > last {
            let m = format!("Last-Event-ID {since} is not an event id of this feed (its last is {last}){HUB_IDS}");
            {
                out.answer(&err(400, &m)).await;
                return;
            };
        }
        if last > 0 && since + 1 < first {
            let m = format!("Last-Event-ID {since}: the feed keeps events from {first} on (older ones expired)");
            {
                out.answer(&err(400, &m)).await;
                return;
            };
        }
        if !out.answer(&Answer::json(200, String::new())).await {
            return;
        }
        let mut c = FeedClient { filter, pos: since, last, ready: false, out };
        if since >= last && !c.ready().await {
            return;
        }
        // Joined before anything is read: nothing the consumer delivers from now on is missed.
        let (mut live, recent, fan_pos) = {
            let st = self.lock();
            let recent: Vec<_> = st.window.iter().filter(|m| m.seq > since).cloned().collect();
            (self.live.subscribe(), recent, st.pos.unwrap_or(last))
        };
        let from_window = recent.first().map(|m| m.seq).unwrap_or(fan_pos + 1);
        // Older than the window: read from the stream up to it.
        if c.pos + 1 < from_window {
            // Made again until a leader answers: a lost server is not waited out.
            let mut f = crate::follow::Follow::new(self.js.clone(), names::FEED_STREAM, c.pos);
            while c.pos + 1 < from_window {
                // Nothing within 5 s (the rest removed): the window follows.
                let Some(m) = f.next(Duration::from_secs(5)).await else { break };
                let msg = FeedMsg { seq: f.pos, subject: m.subject, payload: m.payload };
                if !c.send(&msg).await {
                    return;
                }
            }
        }
        for m in &recent {
            if !c.send(m).await {
                return;
            }
        }
        loop {
            match live.recv().await {
                Ok(m) => {
                    if !c.send(&m).await {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    let why = format!("this client fell {n} events behind the feed and was dropped: reconnect with its Last-Event-ID ({})", c.pos);
                    out.end(Some(why)).await;
                    return;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    out.end(Some("the hub's feed consumer ended".into())).await;
                    return;
                }
            }
        }
    }
}

/// One feed client's position and filter.
struct FeedClient<'a> {
    filter: runwire::runs::feed::Filter,
    pos: u64,
    /// The stream's last sequence as it arrived: `ready` once there.
    last: u64,
    ready: bool,
    out: &'a crate::wire::Sink,
}

impl FeedClient<'_> {
    async fn ready(&mut self) -> bool {
        self.ready = true;
        self.out.data(runwire::serve::feed::ready_frame(self.pos).into_bytes()).await
    }

    /// A message after the client's position, as its frame (filtered).
    async fn send(&mut self, m: &FeedMsg) -> bool {
        if m.seq <= self.pos {
            return true;
        }
        self.pos = m.seq;
        let seq = m.seq;
        let node = m.subject.strip_prefix("rwfeed.").filter(|n| names::valid_node(n));
        // A hub's `node` event (spec/CLUSTER.md, "Nodes"): as published, its id the sequence.
        let liveness = m.subject.strip_prefix("rwnode.").filter(|n| names::valid_node(n)).and_then(|_| {
            let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            (v.get("type")? == "node").then(|| String::from_utf8(runwire::runs::feed::with_id(&m.payload, seq)).ok())?
        });
        let frame = match liveness.or_else(|| node.and_then(|n| hub_event(n, seq, &m.payload))) {
            Some(json) => self.filter.matches(json.as_bytes()).then(|| runwire::serve::feed::event_frame(seq, &json)),
            // The local feed's `skipped` event: from the sequence before it.
            None => Some(runwire::serve::feed::skipped_frame(
                seq,
                seq - 1,
                m.payload.len() as u64,
                runwire::serve::feed::Skip::NotAnEvent,
                &format!("message {seq} of {} is not a feed event", m.subject),
            )),
        };
        if let Some(f) = frame {
            if !self.out.data(f.into_bytes()).await {
                return false;
            }
        }
        if !self.ready && self.pos >= self.last {
            return self.ready().await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_events_get_the_sequence_the_hubs_run_id_and_the_node() {
        let ev = hub_event("n1", 42, br#"{"type":"run","runId":"ab--x.y","status":"done"}"#).unwrap();
        assert_eq!(ev, r#"{"id":42,"type":"run","runId":"n1.ab--x.y","status":"done","node":"n1"}"#);
        // An odd line is rebuilt: still the sequence, the hub's id and the node.
        let ev = hub_event("n1", 3, br#"{"id":7, "runId" : "r", "b":1}"#).unwrap();
        assert_eq!(ev, r#"{"id":3,"b":1,"runId":"n1.r","node":"n1"}"#);
        assert_eq!(hub_event("n1", 5, b"{}").unwrap(), r#"{"id":5,"node":"n1"}"#);
        assert!(hub_event("n1", 1, b"[1]").is_none() && hub_event("n1", 1, b"nope").is_none());
        let (f, since) = feed_query("run=n1.a%2Eb,n2.c&type=ended&since=9&token=x").unwrap();
        assert_eq!(
            (f.runs, f.types, since),
            (vec!["n1.a.b".to_string(), "n2.c".into()], vec!["ended".to_string()], Some(9))
        );
        assert!(feed_query("type=bogus").is_err() && feed_query("what=1").is_err() && feed_query("since=x").is_err());
    }
}
