//! Stage 3: JSON lines → Server-Sent Events frames.
//!
//! [`Encoder`] is a state object with no IO: one JSON line in, one frame out
//! (`[id: <id>\n]data: <json>\n\n`), LF only, as `@ag-ui/encoder` writes them.
//! The official client splits frames on `\n\n` only, so no CR may ever reach
//! the wire; a JSON line carrying CR (legal JSON whitespace) is minified.

use crate::pipeline::events::Seq;
use serde_json::Value;

/// Encoder settings (the `sse-encode` flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseOptions {
    /// Top-level field whose value (string or integer) becomes the frame's `id:`.
    pub id_from: Option<String>,
    /// Resume point: emit only frames after the one with this id. Needs
    /// `id_from`; without it no frame has an id and every frame is skipped.
    pub after: Option<String>,
}

/// The SSE encoder: see the module doc and `man/sse-encode.1`.
#[derive(Debug)]
pub struct Encoder {
    id_from: Option<String>,
    after: Option<String>,
    /// `after` as a seq, when it reads as one (`12`, `12.2`).
    after_seq: Option<Seq>,
    /// The resume point has been passed: every later frame is emitted.
    passed: bool,
}

impl Encoder {
    pub fn new(opts: SseOptions) -> Encoder {
        let after_seq = opts.after.as_deref().and_then(Seq::parse);
        let passed = opts.after.is_none();
        Encoder { id_from: opts.id_from, after: opts.after, after_seq, passed }
    }

    /// Encodes one input line (without its newline). `Ok(None)` for a blank
    /// line or a frame skipped by `after`; `Err` names what is wrong with a
    /// line that cannot be framed.
    pub fn push(&mut self, line: &[u8]) -> Result<Option<String>, String> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let has_cr = line.contains(&b'\r');
        let id = match &self.id_from {
            Some(field) => {
                // Only the top level is read as values (each member kept raw):
                // a line nested past serde_json's 128 levels is still JSON, and
                // framed as it is without --id-from.
                match serde_json::from_slice::<std::collections::HashMap<String, &serde_json::value::RawValue>>(line) {
                    Ok(members) => match members.get(field.as_str()) {
                        Some(raw) => {
                            let v: Value = serde_json::from_str(raw.get())
                                .map_err(|_| format!("{field}: the id must be a string or an integer"))?;
                            frame_id(&serde_json::json!({ field.as_str(): v }), field)?
                        }
                        None => None,
                    },
                    // Valid JSON that is not an object: no id.
                    Err(_) => {
                        serde_json::from_slice::<serde::de::IgnoredAny>(line).map_err(|e| format!("not JSON: {e}"))?;
                        None
                    }
                }
            }
            None => {
                serde_json::from_slice::<serde::de::IgnoredAny>(line).map_err(|e| format!("not JSON: {e}"))?;
                None
            }
        };
        if !self.admit(id.as_deref()) {
            return Ok(None);
        }
        // Valid JSON is valid UTF-8, so this cannot fail; keep it an error anyway.
        let json = std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
        let minified;
        let json = if has_cr {
            minified = minify(json);
            minified.as_str()
        } else {
            json
        };
        Ok(Some(frame(None, id.as_deref(), json)))
    }

    /// Decides whether a frame with this id is past the resume point.
    fn admit(&mut self, id: Option<&str>) -> bool {
        let Some(after) = self.after.as_deref() else { return true };
        if let (Some(a), Some(s)) = (self.after_seq, id.and_then(Seq::parse)) {
            // Seq ids compare by position, so a resume point that was never
            // emitted as such (e.g. `12` when the log has `12.1`) still works.
            if s > a {
                self.passed = true;
                return true;
            }
            if s == a {
                self.passed = true;
            }
            return false;
        }
        if self.passed {
            return true;
        }
        if id == Some(after) {
            self.passed = true;
        }
        false
    }
}

/// One frame: `[event: EVENT\n][id: ID\n]data: JSON\n\n`. `json` must be
/// one line with no CR (as this crate's serializers write it) and `event`
/// and `id` free of CR, LF and NUL: the caller's, checked where they come
/// from outside.
pub fn frame(event: Option<&str>, id: Option<&str>, json: &str) -> String {
    let mut f = String::with_capacity(json.len() + 32);
    if let Some(e) = event {
        f.push_str("event: ");
        f.push_str(e);
        f.push('\n');
    }
    if let Some(id) = id {
        f.push_str("id: ");
        f.push_str(id);
        f.push('\n');
    }
    f.push_str("data: ");
    f.push_str(json);
    f.push_str("\n\n");
    f
}

/// Reads the id field: a string or an integer; absent means no `id:` line.
fn frame_id(v: &Value, field: &str) -> Result<Option<String>, String> {
    let id = match v.get(field) {
        None => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
        Some(_) => return Err(format!("{field}: the id must be a string or an integer")),
    };
    if id.contains(['\r', '\n', '\0']) {
        return Err(format!("{field}: the id contains CR, LF or NUL, which cannot travel in an SSE id line"));
    }
    Ok(Some(id))
}

/// Drops the whitespace between JSON tokens. Only for valid JSON: outside a
/// string every whitespace byte is insignificant, inside one CR and LF can
/// only appear escaped.
fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_str = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if c == '"' {
            in_str = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\r' | '\n') {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(id_from: Option<&str>, after: Option<&str>) -> Encoder {
        Encoder::new(SseOptions { id_from: id_from.map(Into::into), after: after.map(Into::into) })
    }

    #[test]
    fn frames_are_data_lines_ended_by_a_blank_line() {
        let mut e = enc(None, None);
        assert_eq!(e.push(br#"{"type":"X"}"#).unwrap().unwrap(), "data: {\"type\":\"X\"}\n\n");
        assert_eq!(e.push(b"").unwrap(), None);
        assert_eq!(e.push(b"  \t").unwrap(), None);
        assert!(e.push(b"{nope").unwrap_err().starts_with("not JSON"));
    }

    /// A line nested past serde_json's 128 levels is framed with its id, as
    /// it is framed without `--id-from` (it was refused as "not JSON").
    #[test]
    fn a_deeply_nested_line_keeps_its_id() {
        let deep = format!("{{\"seq\":3,\"x\":{}{}}}", "[".repeat(300), "]".repeat(300));
        let framed = enc(Some("seq"), None).push(deep.as_bytes()).unwrap().unwrap();
        assert_eq!(framed, format!("id: 3\ndata: {deep}\n\n"));
        assert_eq!(enc(Some("seq"), None).push(b"[1]").unwrap().unwrap(), "data: [1]\n\n", "no object, no id");
        assert!(enc(Some("seq"), None).push(b"{nope").unwrap_err().starts_with("not JSON"));
    }

    #[test]
    fn id_comes_from_a_string_or_integer_field() {
        let mut e = enc(Some("seq"), None);
        assert_eq!(e.push(br#"{"seq":7}"#).unwrap().unwrap(), "id: 7\ndata: {\"seq\":7}\n\n");
        assert_eq!(e.push(br#"{"seq":"7.2"}"#).unwrap().unwrap(), "id: 7.2\ndata: {\"seq\":\"7.2\"}\n\n");
        assert_eq!(e.push(br#"{"x":1}"#).unwrap().unwrap(), "data: {\"x\":1}\n\n");
        assert!(e.push(br#"{"seq":1.5}"#).unwrap_err().starts_with("seq:"));
        assert!(e.push(br#"{"seq":"a\nb"}"#).unwrap_err().contains("LF"));
        assert!(e.push(br#"{"seq":"a\u0000b"}"#).unwrap_err().contains("NUL"));
    }

    #[test]
    fn cr_never_reaches_the_wire() {
        let mut e = enc(None, None);
        let f = e.push(b"{\"a\" :\r 1,\r\n \"b\":\"x\\r y\"}").unwrap().unwrap();
        assert_eq!(f, "data: {\"a\":1,\"b\":\"x\\r y\"}\n\n");
        assert!(!f.contains('\r'));
    }

    #[test]
    fn after_a_seq_resumes_by_position() {
        let mut e = enc(Some("seq"), Some("12.1"));
        let ids: Vec<_> = ["12", "\"12.1\"", "\"12.2\"", "13"]
            .iter()
            .filter_map(|s| e.push(format!("{{\"seq\":{s}}}").as_bytes()).unwrap())
            .collect();
        assert_eq!(ids, ["id: 12.2\ndata: {\"seq\":\"12.2\"}\n\n", "id: 13\ndata: {\"seq\":13}\n\n"]);
    }

    #[test]
    fn after_a_plain_id_resumes_after_that_frame() {
        let mut e = enc(Some("id"), Some("b"));
        let out: Vec<_> =
            ["a", "b", "c", "a"].iter().map(|s| e.push(format!("{{\"id\":\"{s}\"}}").as_bytes()).unwrap()).collect();
        assert_eq!(out[0], None);
        assert_eq!(out[1], None);
        assert_eq!(out[2].as_deref(), Some("id: c\ndata: {\"id\":\"c\"}\n\n"));
        assert!(out[3].is_some());
    }

    #[test]
    fn minify_keeps_strings_intact() {
        assert_eq!(minify("{ \"a b\" : [ 1 , \"\\\" x\" ] }"), "{\"a b\":[1,\"\\\" x\"]}");
    }
}
