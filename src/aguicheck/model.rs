//! The client's messages as agui-check models them: what its reducer
//! (`src/apply/default.ts`) holds under each id, and the tool calls in them.

use crate::util::bounded::Size;
use serde_json::{Map, Value};

/// Past this many bytes, an activity's content is no longer followed (its
/// deltas go unchecked).
pub const MAX_ACTIVITY: usize = 8 * 1024 * 1024;

/// A message the client holds: its role, its place in the client's list
/// (messages are pushed in creation order; a tool message goes in after
/// the assistant message that called it, sharing its place here), and for
/// an activity its content, as the snapshots and deltas made it (`None`
/// past [`MAX_ACTIVITY`]).
#[derive(Debug, Clone)]
pub struct Held {
    pub role: String,
    pub seq: u64,
    pub content: Option<Value>,
    pub content_bytes: usize,
}

impl Size for Held {
    fn size(&self) -> usize {
        self.role.len() + self.content_bytes
    }
}

pub fn held(role: &str, seq: u64, content: Option<Value>) -> Held {
    let bytes = content.as_ref().map_or(0, json_len);
    let content = content.filter(|_| bytes <= MAX_ACTIVITY);
    let content_bytes = if content.is_some() { bytes } else { 0 };
    Held { role: role.to_string(), seq, content, content_bytes }
}

/// An activity's content as the reducer patches it (`content ?? {}`).
pub fn activity_content(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v) => v.clone(),
    }
}

/// A tool call the client holds: its name and the message holding it (its
/// id and place: the call goes when that message is replaced).
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    pub holder: String,
    pub seq: u64,
}

impl Size for Call {
    fn size(&self) -> usize {
        self.name.len() + self.holder.len()
    }
}

/// About the bytes a JSON value takes as text.
pub fn json_len(v: &Value) -> usize {
    serde_json::to_string(v).map_or(0, |s| s.len())
}
