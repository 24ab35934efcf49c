//! What a webhook is sent for one feed event: the body in its format
//! (Standard Webhooks JSON, Slack, ntfy), headers, and the stable
//! `webhook-id`.

use crate::runs::link_prefixes::LinkPrefixes;
use serde_json::{json, Value};

/// Most characters of a record's `detail` in a ready-made text body.
const MAX_TEXT: usize = 500;

/// The body a webhook gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"type", "timestamp", "data": the feed event}` (Standard Webhooks' shape).
    Json,
    /// ntfy: the text as the body, title, tags, priority and links in headers.
    Ntfy,
    /// Slack-style incoming webhooks (Slack, Mattermost, Rocket.Chat, Discord's `/slack`): `{"text"}`.
    Slack,
    /// Apprise API (`POST /notify/KEY`): `{"title", "body", "type"}`, for every other service.
    Apprise,
}

impl Format {
    pub fn parse(s: &str) -> Result<Format, String> {
        match s {
            "json" => Ok(Format::Json),
            "ntfy" => Ok(Format::Ntfy),
            "slack" => Ok(Format::Slack),
            "apprise" => Ok(Format::Apprise),
            _ => Err(format!("unknown format {s:?} (expected one of json, ntfy, slack, apprise)")),
        }
    }
}

/// One event's request, the same on every attempt but for the timestamp
/// and signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `webhook-id`.
    pub id: String,
    pub content_type: &'static str,
    /// Headers of the format (ntfy's), values printable ASCII.
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// The `webhook-id` of the event with feed id `id` in the feed log whose
/// inode is `feed`: stable across retries and restarts, distinct for
/// another feed log (whose ids start again at 0).
pub fn webhook_id(feed: u64, id: u64) -> String {
    format!("msg_{feed:x}_{id}")
}

fn s<'a>(ev: &'a Value, k: &str) -> &'a str {
    ev.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// Printable ASCII only (a header value, a link in one), each other character as `?`.
fn ascii(s: &str) -> String {
    s.chars().map(|c| if (' '..='~').contains(&c) { c } else { '?' }).collect()
}

pub(super) fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The approval links an event carries (`links`: URLs, as runwire journals
/// them), those under one of the home's recorded prefixes only
/// (`runs::link_prefixes`): the journal is the agent's to write, so a link
/// it put there is dropped, whatever the feed log holds.
fn links(ev: &Value, prefixes: &LinkPrefixes) -> Vec<String> {
    let Some(list) = ev.get("links").and_then(Value::as_array) else { return Vec::new() };
    list.iter().filter_map(Value::as_str).filter(|u| prefixes.passes(u)).map(str::to_string).collect()
}

/// A title and a text for a person: what the run is, and what happened.
fn words(ev: &Value) -> (String, String) {
    let run = match s(ev, "slug") {
        "" => s(ev, "runId"),
        slug => slug,
    };
    let repo = match s(ev, "repo") {
        "" => String::new(),
        r => format!(" ({r})"),
    };
    let task = match s(ev, "task") {
        "" => String::new(),
        t => format!(", task {t}"),
    };
    let detail = clip(s(ev, "detail"), MAX_TEXT);
    match s(ev, "type") {
        // A hub's judgement of a node (spec/CLUSTER.md, "Nodes"): no run.
        "node" => {
            let node = s(ev, "node");
            let since = ev.get("since").and_then(Value::as_i64).map(crate::util::time::format_ms);
            let at = since.map(|t| format!(" since {t}")).unwrap_or_default();
            if s(ev, "state") == "lost" {
                let text = format!(
                    "No heartbeat from node {node}{at}: the machine, its cluster sidecar or its link to the \
                     cluster is down. Its runs that were still going show as node lost."
                );
                (format!("Node {node} lost"), text)
            } else {
                (format!("Node {node} is up"), format!("Node {node} beats again{at}."))
            }
        }
        "needs_input" => {
            let ask = match (s(ev, "kind"), s(ev, "tool")) {
                (_, tool) if !tool.is_empty() => format!("Allow {tool}?"),
                ("question", _) => "A question".to_string(),
                _ => "Input needed".to_string(),
            };
            let text = if detail.is_empty() { ask } else { format!("{ask} {detail}") };
            (format!("{run}{repo} needs input{task}"), text)
        }
        "ended" => {
            let status = s(ev, "status");
            // The run's own one-line reason (`<task> <state>: <detail>`), else the record's.
            let why = if !s(ev, "reason").is_empty() {
                clip(s(ev, "reason"), MAX_TEXT)
            } else if !detail.is_empty() {
                detail
            } else if let Some(rc) = ev.get("rc").filter(|v| !v.is_null()) {
                format!("exit code {rc}")
            } else {
                String::new()
            };
            let text = if why.is_empty() { format!("Run {status}.") } else { format!("Run {status}: {why}") };
            (format!("{run}{repo} {status}"), text)
        }
        ty => (format!("{run}{repo}: {ty}{task}"), format!("Status {}.", s(ev, "status"))),
    }
}

/// Escapes text for Slack's mrkdwn (`&`, `<`, `>`).
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The request for one event line as the feed hands it out (`{"id":N,…}`),
/// with only the approval links under `prefixes`; `None` for a line that
/// is not an event with an id.
pub fn message(line: &[u8], feed: u64, format: Format, prefixes: &LinkPrefixes) -> Option<Message> {
    let mut ev: Value = serde_json::from_slice(line).ok()?;
    let id = ev.get("id")?.as_u64()?;
    let ty = s(&ev, "type").to_string();
    let id = webhook_id(feed, id);
    let (title, text) = words(&ev);
    let links = links(&ev, prefixes);
    if let Some(o) = ev.as_object_mut() {
        o.remove("links");
        if !links.is_empty() {
            o.insert("links".into(), links.clone().into());
        }
    }
    // Each link by the one thing it does: opens the request's page.
    let links: Vec<(&str, String)> = links.into_iter().map(|u| ("Open", u)).collect();
    let (content_type, headers, body) = match format {
        Format::Json => {
            // Standard Webhooks' recommended shape; `data` is the feed event as
            // `runs watch` prints it (its fields are spec/LAYOUT.md's), so
            // anything the feed gains is passed on (approval `links`: runwire's own only).
            let ts = s(&ev, "ts").to_string();
            let body = json!({"type": ty, "timestamp": ts, "data": ev});
            ("application/json", Vec::new(), serde_json::to_vec(&body).ok()?)
        }
        Format::Ntfy => {
            let mut h = vec![("Title", ascii(&title))];
            let (tags, priority) = match (ty.as_str(), s(&ev, "status")) {
                ("needs_input", _) => ("question", "high"),
                ("node", _) if s(&ev, "state") == "lost" => ("warning", "high"),
                ("node", _) => ("white_check_mark", "default"),
                ("ended", "done") => ("white_check_mark", "default"),
                ("ended", _) => ("x", "default"),
                _ => ("information_source", "default"),
            };
            h.push(("Tags", tags.to_string()));
            h.push(("Priority", priority.to_string()));
            // ntfy's action syntax splits on `,` and `;`: a link with either stays in the text only.
            let plain: Vec<&(&str, String)> =
                links.iter().filter(|(l, u)| !format!("{l}{u}").contains([',', ';', '"'])).take(3).collect();
            if let Some((_, u)) = plain.first() {
                h.push(("Click", ascii(u)));
            }
            if !plain.is_empty() {
                let a: Vec<String> = plain.iter().map(|(l, u)| format!("view, {}, {}", ascii(l), ascii(u))).collect();
                h.push(("Actions", a.join("; ")));
            }
            let mut body = text;
            for (l, u) in &links {
                body.push_str(&format!("\n{l}: {u}"));
            }
            ("text/plain; charset=utf-8", h, body.into_bytes())
        }
        Format::Slack => {
            let mut t = format!("*{}*\n{}", slack_escape(&title), slack_escape(&text));
            for (l, u) in &links {
                t.push_str(&format!("\n<{}|{}>", u.replace(['<', '>', '|'], ""), slack_escape(l).replace('|', "")));
            }
            ("application/json", Vec::new(), serde_json::to_vec(&json!({"text": t})).ok()?)
        }
        Format::Apprise => {
            let kind = match (ty.as_str(), s(&ev, "status")) {
                ("needs_input", _) => "warning",
                ("node", _) if s(&ev, "state") == "lost" => "warning",
                ("node", _) => "success",
                ("ended", "done") => "success",
                ("ended", _) => "failure",
                _ => "info",
            };
            let mut body = text;
            for (l, u) in &links {
                body.push_str(&format!("\n{l}: {u}"));
            }
            (
                "application/json",
                Vec::new(),
                serde_json::to_vec(&json!({"title": title, "body": body, "type": kind})).ok()?,
            )
        }
    };
    Some(Message { id, content_type, headers, body })
}
