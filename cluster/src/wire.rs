//! What travels back to runwire-serve over the channel, as types: a
//! frame, the sink one request's or stream's frames go into, and a
//! forwarded command's answer (a leaf, below the channel, the fan-out and
//! the forwarding that use them).

use runwire::serve::cluster::Head;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The most body bytes a forwarded request or reply carries (the routes'
/// own limit, `runwire::serve::http::MAX_BODY`); a streamed body (an AG-UI
/// run's events, a thread's read) comes a piece at a time, of any length.
pub const MAX_BODY: usize = runwire::serve::http::MAX_BODY;

/// One frame: its head and data.
pub type Frame = (Head, Vec<u8>);

/// A forwarded command's reply: the node's HTTP status and body (and its
/// type when it is not JSON: a link's page is HTML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    #[serde(default, rename = "contentType", skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

impl Answer {
    /// A JSON answer.
    pub fn json(status: u16, body: String) -> Answer {
        Answer { status, body, content_type: None }
    }

    /// An error answer: `{"error": msg}`.
    pub fn error(status: u16, msg: String) -> Answer {
        Answer::json(status, serde_json::json!({"error": msg}).to_string())
    }
}

/// Where one request's or stream's frames go.
#[derive(Clone)]
pub struct Sink {
    id: u64,
    tx: mpsc::Sender<Frame>,
}

impl Sink {
    /// A sink of `id` into `tx`.
    pub fn new(id: u64, tx: mpsc::Sender<Frame>) -> Sink {
        Sink { id, tx }
    }

    async fn send(&self, mut head: Head, data: Vec<u8>) -> bool {
        head.id = self.id;
        self.tx.send((head, data)).await.is_ok()
    }

    /// The answer (status and body); `false` when nobody reads any more.
    pub async fn answer(&self, a: &Answer) -> bool {
        self.send(
            Head {
                op: "answer".into(),
                status: Some(a.status),
                content_type: a.content_type.clone(),
                ..Default::default()
            },
            a.body.clone().into_bytes(),
        )
        .await
    }

    /// Bytes of a stream's body.
    pub async fn data(&self, d: Vec<u8>) -> bool {
        self.send(Head { op: "data".into(), ..Default::default() }, d).await
    }

    /// The stream's end (`error`: cut short, and why).
    pub async fn end(&self, error: Option<String>) -> bool {
        self.send(Head { op: "end".into(), error, ..Default::default() }, Vec::new()).await
    }

    /// A sink writing the one-shot commands' output to `out`: the answer
    /// as one line `{"status":N,"body":"…"}`, then the stream's bytes as
    /// they are. The task ends with the stream.
    pub fn text(mut out: impl AsyncWrite + Unpin + Send + 'static) -> (Sink, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Frame>(64);
        let task = tokio::spawn(async move {
            while let Some((h, d)) = rx.recv().await {
                let bytes = match h.op.as_str() {
                    "answer" => {
                        let a = Answer {
                            status: h.status.unwrap_or(502),
                            body: String::from_utf8_lossy(&d).into(),
                            content_type: h.content_type,
                        };
                        format!("{}\n", serde_json::to_string(&a).unwrap_or_default()).into_bytes()
                    }
                    "end" => break,
                    _ => d,
                };
                if out.write_all(&bytes).await.is_err() || out.flush().await.is_err() {
                    break;
                }
            }
        });
        (Sink { id: 0, tx }, task)
    }
}
