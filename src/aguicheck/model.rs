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
    /// An activity's `activityType`, as its last snapshot or applied delta
    /// gave it (what a snapshot's `authoritativeActivityTypes` names).
    pub activity_type: Option<String>,
}

impl Size for Held {
    fn size(&self) -> usize {
        self.role.len() + self.content_bytes + self.activity_type.as_ref().map_or(0, String::len)
    }
}

/// Which held activities a MESSAGES_SNAPSHOT drops when it does not name
/// them: its `metadata["@ag-ui/client"].authoritativeActivityTypes`, read
/// as the client's `authoritativeActivityTypes` reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Authoritative {
    /// No such metadata: the held activities go only when the snapshot
    /// carries activities itself.
    Unsaid,
    /// `null`: every held activity the snapshot does not name goes.
    All,
    /// A list (anything else that is said reads as an empty one): held
    /// activities of these types go, the others stay.
    Types(Vec<String>),
}

impl Authoritative {
    pub fn of(snapshot: &Map<String, Value>) -> Authoritative {
        let Some(meta) = snapshot.get("metadata").and_then(Value::as_object) else { return Authoritative::Unsaid };
        let Some(client) = meta.get("@ag-ui/client") else { return Authoritative::Unsaid };
        let Some(client) = client.as_object() else { return Authoritative::Types(Vec::new()) };
        match client.get("authoritativeActivityTypes") {
            None => Authoritative::Unsaid,
            Some(Value::Null) => Authoritative::All,
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
                Authoritative::Types(a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            }
            Some(_) => Authoritative::Types(Vec::new()),
        }
    }

    /// Whether a held activity of `activity_type` stays though the snapshot
    /// does not name it (`carries_activities`: the snapshot holds one).
    pub fn keeps(&self, activity_type: Option<&str>, carries_activities: bool) -> bool {
        match self {
            Authoritative::Unsaid => !carries_activities,
            Authoritative::All => false,
            Authoritative::Types(t) => !activity_type.is_some_and(|a| t.iter().any(|x| x == a)),
        }
    }
}

pub fn held(role: &str, seq: u64, content: Option<Value>) -> Held {
    let bytes = content.as_ref().map_or(0, json_len);
    let content = content.filter(|_| bytes <= MAX_ACTIVITY);
    let content_bytes = if content.is_some() { bytes } else { 0 };
    Held { role: role.to_string(), seq, content, content_bytes, activity_type: None }
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
