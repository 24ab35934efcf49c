//! The tests' one reader of `text/event-stream` bodies, by the WHATWG rules
//! the studio's `EventSource` follows: `field: value` lines (one optional
//! space after the colon), `data` lines of a frame joined with `\n`, comment
//! lines (`:`, the server's keep-alives) and unknown fields ignored, a frame
//! dispatched at a blank line, an unterminated last frame dropped.

use serde_json::Value;

/// One dispatched frame (its own `id` and `event` lines, not the stream's
/// last event id).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

impl Frame {
    /// The data as JSON; panics, showing the frame, when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("SSE frame data is not JSON ({e}): {self:?}"))
    }
}

/// The frames of `body` that carry data (a frame with none, such as a
/// keep-alive, dispatches nothing, as in a browser).
pub fn frames(body: &str) -> Vec<Frame> {
    let mut out = Vec::new();
    let (mut cur, mut data): (Frame, Option<String>) = (Frame::default(), None);
    let mut rest = body;
    while let Some(end) = rest.find(['\n', '\r']) {
        let line = &rest[..end];
        let skip = if rest[end..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[end + skip..];
        if line.is_empty() {
            if let Some(d) = data.take() {
                out.push(Frame { data: d, ..std::mem::take(&mut cur) });
            }
            cur.event = None;
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "" => {} // a comment
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            "id" if !value.contains('\0') => cur.id = Some(value.to_string()),
            "event" => cur.event = Some(value.to_string()),
            _ => {}
        }
    }
    out
}

/// The JSON data of every frame of `body`, in order.
pub fn events(body: &str) -> Vec<Value> {
    frames(body).iter().map(Frame::json).collect()
}
