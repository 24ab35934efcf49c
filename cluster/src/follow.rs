//! One stream read in order by a hub, that survives the loss of a server.
//!
//! The hub reads `RUNWIRE_FILES` (its mirror) and `RUNWIRE_FEED` (its
//! feed's fan-out) with ordered consumers: ephemeral, one replica, on one
//! server. When that server is lost the library notices only after two
//! missed idle heartbeats, then recreates the consumer with a backoff of
//! up to seconds, and a new consumer needs the cluster's meta leader,
//! which may be the server lost (an election of seconds). Meanwhile a
//! client at the hub heard nothing. Here:
//! - the stream's state is watched too (its info, every [`WATCH_EVERY`]):
//!   when the stream has messages past the position (it holds messages,
//!   and its last one is past the position) and none came for [`STALLED`],
//!   the consumer is dropped and made again from the position, in the
//!   background, retried every 100 ms. A stream whose messages past the
//!   position all expired (or were purged) before they were read has its
//!   last sequence past the position and nothing to deliver: not stalled;
//! - until it is there, messages are read one by one with direct gets
//!   (`allow_direct`: any replica answers, no leader or consumer needed),
//!   so what is in the stream reaches the hub's clients at once.

use anyhow::anyhow;
use async_nats::jetstream::{self, consumer};
use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use std::time::Duration;
use tokio::time::Instant;

/// How often the stream's last sequence is read.
pub const WATCH_EVERY: Duration = Duration::from_millis(250);
/// Messages waiting and none delivered for this long: the consumer is lost.
pub const STALLED: Duration = Duration::from_millis(700);

/// What the watcher last read of the stream's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    pub messages: u64,
    pub last: u64,
}

impl Seen {
    /// Whether the stream holds a message past `pos`: it holds messages,
    /// and its last (never expired before the older ones) is past `pos`.
    pub fn past(&self, pos: u64) -> bool {
        self.messages > 0 && self.last > pos
    }
}

/// A message of the stream.
pub struct Got {
    pub seq: u64,
    pub subject: String,
    pub headers: Option<HeaderMap>,
    pub payload: Bytes,
}

type Made = anyhow::Result<consumer::pull::Ordered>;

pub struct Follow {
    js: jetstream::Context,
    name: String,
    /// The last stream sequence delivered.
    pub pos: u64,
    msgs: Option<consumer::pull::Ordered>,
    /// A consumer being made.
    making: Option<tokio::sync::oneshot::Receiver<Made>>,
    last: tokio::sync::watch::Receiver<Seen>,
    watcher: tokio::task::JoinHandle<()>,
    /// The error said last (each said once until it changes).
    said: String,
    /// Since when the stream has been seen past the position with nothing delivered.
    behind: Option<Instant>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl Follow {
    /// Reads stream `name` after sequence `pos`.
    pub fn new(js: jetstream::Context, name: &str, pos: u64) -> Follow {
        let (tx, last) = tokio::sync::watch::channel(Seen::default());
        let (js2, name2) = (js.clone(), name.to_string());
        let watcher = tokio::spawn(async move {
            loop {
                if let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(2), js2.get_stream(&name2)).await {
                    while let Ok(Ok(i)) = tokio::time::timeout(Duration::from_secs(2), s.info()).await {
                        tx.send_replace(Seen { messages: i.state.messages, last: i.state.last_sequence });
                        tokio::time::sleep(WATCH_EVERY).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Follow {
            js,
            name: name.to_string(),
            pos,
            msgs: None,
            making: None,
            last,
            watcher,
            said: String::new(),
            behind: None,
        }
    }

    fn say(&mut self, e: String) {
        if e != self.said {
            crate::report(format!("stream {}: {e} (resuming after {})", self.name, self.pos));
            self.said = e;
        }
    }

    /// A consumer from after `pos`, made in the background (again every
    /// 100 ms until one answers: a new leader, not the lost one).
    fn make(&mut self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (js, name, pos) = (self.js.clone(), self.name.clone(), self.pos);
        tokio::spawn(async move {
            let mut said = String::new();
            loop {
                let r: Made = async {
                    let s = js.get_stream(&name).await.map_err(|e| anyhow!("{e}"))?;
                    let cfg =
                        crate::conn::ordered(consumer::DeliverPolicy::ByStartSequence { start_sequence: pos + 1 });
                    let c = s.create_consumer(cfg).await.map_err(|e| anyhow!("consumer: {e}"))?;
                    c.messages().await.map_err(|e| anyhow!("messages: {e}"))
                }
                .await;
                match r {
                    Ok(m) => {
                        let _ = tx.send(Ok(m));
                        return;
                    }
                    Err(e) if tx.is_closed() => return drop(e),
                    Err(e) => {
                        let m = format!("{e:#}");
                        if m != said {
                            crate::report(format!("stream {name}: {m} (retrying)"));
                            said = m;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        self.making = Some(rx);
    }

    /// The message after `pos`, read directly (any replica). Not a method:
    /// a borrow of `self` across its awaits would need `Follow: Sync`.
    async fn direct(js: jetstream::Context, name: String, pos: u64) -> Option<Got> {
        // No info asked for: that needs the stream's leader.
        let s = js.get_stream_no_info(&name).await.ok()?;
        let m = s.direct_get_next_for_subject(">", Some(pos + 1)).await.ok()?;
        Some(Got { seq: m.sequence, subject: m.subject.to_string(), headers: Some(m.headers), payload: m.payload })
    }

    /// The next message after the position (which moves to it), or `None`
    /// once `idle` has passed without one.
    pub async fn next(&mut self, idle: Duration) -> Option<Got> {
        let deadline = Instant::now() + idle;
        loop {
            if let Some(rx) = &mut self.making {
                if let Ok(r) = rx.try_recv() {
                    self.making = None;
                    match r {
                        Ok(m) => {
                            if !self.said.is_empty() {
                                crate::report(format!("stream {}: reading again after {}", self.name, self.pos));
                                self.said.clear();
                            }
                            self.msgs = Some(m);
                        }
                        Err(e) => self.say(format!("{e:#}")),
                    }
                }
            }
            let Some(mut msgs) = self.msgs.take() else {
                if self.making.is_none() {
                    self.make();
                }
                // No consumer yet: what the stream has past the position, directly.
                if self.last.borrow().past(self.pos) {
                    if let Ok(Some(g)) = tokio::time::timeout(
                        Duration::from_secs(1),
                        Self::direct(self.js.clone(), self.name.clone(), self.pos),
                    )
                    .await
                    {
                        if g.seq > self.pos {
                            self.pos = g.seq;
                            return Some(g);
                        }
                    }
                }
                if Instant::now() >= deadline {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(20).min(deadline.saturating_duration_since(Instant::now())))
                    .await;
                continue;
            };
            let tick = tokio::time::sleep(WATCH_EVERY.min(deadline.saturating_duration_since(Instant::now())));
            tokio::select! {
                m = msgs.next() => match m {
                    Some(Ok(m)) => {
                        self.msgs = Some(msgs);
                        let Ok(seq) = m.info().map(|i| i.stream_sequence) else { continue };
                        if seq <= self.pos {
                            continue;
                        }
                        self.pos = seq;
                        self.behind = None;
                        let m = m.split().0;
                        return Some(Got { seq, subject: m.subject.to_string(), headers: m.headers, payload: m.payload });
                    }
                    Some(Err(e)) => self.say(format!("{e}")),
                    None => self.say("the consumer ended".into()),
                },
                _ = tick => {
                    let behind = self.last.borrow().past(self.pos);
                    if !behind {
                        self.behind = None;
                        self.msgs = Some(msgs);
                    } else if self.behind.get_or_insert_with(Instant::now).elapsed() >= STALLED {
                        // Dropped: made again, and read directly meanwhile.
                        self.say("its consumer stalled (a server lost?): made again".into());
                        self.behind = None;
                    } else {
                        self.msgs = Some(msgs);
                    }
                    if Instant::now() >= deadline {
                        return None;
                    }
                }
            }
        }
    }
}
