//! Secret redaction and output capping for tool calls and results.
//!
//! Tool output is where credentials leak (an `env` dump, a `cat .env`, a curl
//! with an auth header), and a normalized stream is shipped to browsers and
//! logs, so anything credential-shaped is replaced before it leaves the
//! normalizer. The rules are deliberately conservative about *names*
//! (`max_tokens` is not a secret, `GITHUB_TOKEN` is) and liberal about
//! well-known token *shapes*.

use serde_json::Value;
use std::borrow::Cow;

pub const REDACTED: &str = "[REDACTED]";
/// Tool output kept per result; longer output is cut and flagged (the
/// line reader skims over-long lines to the same size).
pub use crate::util::lines::MAX_OUTPUT;
/// Raw source bytes kept in an `error` event.
pub const MAX_RAW: usize = 4096;

/// True for a field or variable name that holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    // Lowercased with separators dropped, on the stack: this runs for every
    // `name=` / `name:` in tool output.
    let mut buf = [0u8; 96];
    let mut len = 0;
    for &b in name.as_bytes() {
        if b.is_ascii_alphanumeric() {
            if len == buf.len() {
                return false;
            }
            buf[len] = b.to_ascii_lowercase();
            len += 1;
        } else if !matches!(b, b'_' | b'-' | b'.') {
            return false;
        }
    }
    let n = &buf[..len];
    const PARTS: [&[u8]; 8] =
        [b"password", b"passwd", b"secret", b"apikey", b"privatekey", b"accesskey", b"credential", b"authorization"];
    PARTS.iter().any(|p| memchr::memmem::find(n, p).is_some()) || n.ends_with(b"token") || n == b"pwd" || n == b"auth"
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/' | b'+')
}

/// True for a token whose shape alone marks it as a credential.
fn is_secret_shape(t: &[u8]) -> bool {
    let starts = |p: &[u8]| t.len() > p.len() && t.starts_with(p);
    (starts(b"sk-") && t.len() >= 20)
        || ([&b"ghp_"[..], b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_"].iter().any(|p| starts(p))
            && t.len() >= 20)
        || ((starts(b"AKIA") || starts(b"ASIA"))
            && t.len() == 20
            && t.iter().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()))
        || ((starts(b"xoxb-") || starts(b"xoxp-") || starts(b"xoxa-") || starts(b"xoxr-") || starts(b"xoxs-"))
            && t.len() >= 15)
        || (starts(b"AIza") && t.len() == 39)
        || (starts(b"glpat-") && t.len() >= 20)
        || (starts(b"eyJ") && t.len() >= 30 && t.iter().filter(|&&b| b == b'.').count() == 2)
}

/// Replaces PEM private key blocks. Returns None when there are none.
fn redact_pem(s: &str) -> Option<String> {
    const BEGIN: &str = "-----BEGIN ";
    memchr::memmem::find(s.as_bytes(), BEGIN.as_bytes())?;
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut changed = false;
    while let Some(i) = rest.find(BEGIN) {
        let after = &rest[i..];
        let header_end = after.find("-----\n").or_else(|| after[BEGIN.len()..].find("-----").map(|j| j + BEGIN.len()));
        let is_private = header_end.is_some_and(|h| after[..h].contains("PRIVATE KEY"));
        if !is_private {
            out.push_str(&rest[..i + BEGIN.len()]);
            rest = &rest[i + BEGIN.len()..];
            continue;
        }
        out.push_str(&rest[..i]);
        out.push_str("[REDACTED PRIVATE KEY]");
        changed = true;
        // Drop through the END line; an unterminated block is dropped to the end.
        match after.find("-----END ") {
            Some(e) => {
                let tail = &after[e + 9..];
                let close = tail.find("-----").map(|c| c + 5).unwrap_or(tail.len());
                rest = &tail[close..];
            }
            None => rest = "",
        }
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// Redacts credential-shaped values in free text: well-known token shapes,
/// `Bearer <token>`, `NAME=value` / `"name": "value"` for secret names, and
/// PEM private keys.
pub fn redact_text(s: &str) -> Cow<'_, str> {
    let pem = redact_pem(s);
    let src: &str = pem.as_deref().unwrap_or(s);
    let b = src.as_bytes();
    // (start, end) byte ranges to replace, in order.
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !is_token_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_token_byte(b[i]) {
            i += 1;
        }
        let tok = &b[start..i];
        if is_secret_shape(tok) {
            cuts.push((start, i));
            continue;
        }
        if tok.eq_ignore_ascii_case(b"bearer") || tok.eq_ignore_ascii_case(b"token") && b.get(i) == Some(&b' ') {
            let mut j = i;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            let vs = j;
            while j < b.len() && is_token_byte(b[j]) {
                j += 1;
            }
            if j > i && j - vs >= 8 {
                cuts.push((vs, j));
                i = j;
            }
            continue;
        }
        // NAME=value, NAME: value, "name": "value"
        let name = std::str::from_utf8(tok).unwrap_or("");
        let name = name.trim_end_matches(['.', '/', '+']);
        // Cheap test first: only a name followed by `=` or `:` can be an assignment.
        let mut k = start + name.len();
        if matches!(b.get(k), Some(b'"' | b'\'')) {
            k += 1;
        }
        while b.get(k) == Some(&b' ') {
            k += 1;
        }
        if !matches!(b.get(k), Some(b'=' | b':')) || name.is_empty() || !is_secret_name(name) {
            continue;
        }
        let mut j = start + name.len();
        if b.get(j) == Some(&b'"') || b.get(j) == Some(&b'\'') {
            j += 1;
        }
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if !matches!(b.get(j), Some(b'=' | b':')) {
            continue;
        }
        j += 1;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let quote = match b.get(j) {
            Some(&q @ (b'"' | b'\'')) => {
                j += 1;
                Some(q)
            }
            _ => None,
        };
        // `Authorization: Bearer <token>`: keep the scheme, redact the credential.
        for scheme in [&b"bearer "[..], b"basic ", b"token ", b"digest "] {
            if b.len() >= j + scheme.len() && b[j..j + scheme.len()].eq_ignore_ascii_case(scheme) {
                j += scheme.len();
                while j < b.len() && b[j] == b' ' {
                    j += 1;
                }
                break;
            }
        }
        let vs = j;
        match quote {
            Some(q) => {
                while j < b.len() && b[j] != q && b[j] != b'\n' {
                    // A backslash escape inside a JSON string stays inside the value.
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                j = j.min(b.len());
            }
            None => {
                while j < b.len()
                    && !matches!(b[j], b' ' | b'\t' | b'\n' | b'\r' | b',' | b';' | b'&' | b')' | b'}' | b']')
                {
                    j += 1;
                }
            }
        }
        let value = &b[vs..j];
        if !value.is_empty() && value != REDACTED.as_bytes() && !value.iter().all(|c| c.is_ascii_digit()) {
            cuts.push((vs, j));
        }
        i = j.max(i);
    }
    if cuts.is_empty() {
        return match pem {
            Some(p) => Cow::Owned(p),
            None => Cow::Borrowed(s),
        };
    }
    let mut out = String::with_capacity(src.len());
    let mut last = 0;
    for (a, z) in cuts {
        if a < last {
            continue;
        }
        out.push_str(&src[last..a]);
        out.push_str(REDACTED);
        last = z;
    }
    out.push_str(&src[last..]);
    Cow::Owned(out)
}

/// Redacts a JSON value in place: string values under secret-named keys are
/// replaced whole, every other string is scanned as text.
pub fn redact_json(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let Cow::Owned(r) = redact_text(s) {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_json),
        Value::Object(o) => {
            for (k, val) in o.iter_mut() {
                if is_secret_name(k) && matches!(val, Value::String(s) if !s.is_empty()) {
                    *val = Value::String(REDACTED.into());
                } else {
                    redact_json(val);
                }
            }
        }
        _ => {}
    }
}

/// The largest prefix of `s` no longer than `max` bytes that ends on a char boundary.
pub fn cut_at(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Redacts then caps a tool output: `(output, truncated, bytes)` where
/// `bytes` is the length of the whole (redacted) output before the cut.
pub fn tool_output(s: &str) -> (String, bool, u64) {
    let red = redact_text(s);
    let bytes = red.len() as u64;
    if red.len() <= MAX_OUTPUT {
        return (red.into_owned(), false, bytes);
    }
    (cut_at(&red, MAX_OUTPUT).to_string(), true, bytes)
}

/// The raw-line excerpt carried by `error` events.
pub fn raw_excerpt(line: &[u8]) -> String {
    let head = &line[..line.len().min(MAX_RAW)];
    let text = String::from_utf8_lossy(head);
    redact_text(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for n in ["password", "DB_PASSWORD", "api_key", "apiKey", "GITHUB_TOKEN", "client-secret", "Authorization"] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["max_tokens", "input_tokens", "token_count", "tokenizer", "path", "author"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn redacts_shapes_and_assignments() {
        let cases = [
            ("key sk-ant-api03-abcdefghijklmnopqrstuv end", "key [REDACTED] end"),
            ("ghp_0123456789abcdefghij0123", "[REDACTED]"),
            ("AWS AKIAIOSFODNN7EXAMPLE x", "AWS [REDACTED] x"),
            ("Authorization: Bearer abcdef0123456789", "Authorization: Bearer [REDACTED]"),
            ("export OPENAI_API_KEY=abc123xyz", "export OPENAI_API_KEY=[REDACTED]"),
            (r#"{"password": "hunter2", "user": "bob"}"#, r#"{"password": "[REDACTED]", "user": "bob"}"#),
            ("max_tokens: 4096", "max_tokens: 4096"),
            ("GITHUB_TOKEN=\n", "GITHUB_TOKEN=\n"),
            ("plain words only", "plain words only"),
        ];
        for (i, o) in cases {
            assert_eq!(redact_text(i), o, "{i}");
        }
    }

    #[test]
    fn redacts_pem_blocks() {
        let s = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nb";
        assert_eq!(redact_text(s), "a\n[REDACTED PRIVATE KEY]\nb");
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
        assert_eq!(redact_text(cert), cert);
    }

    #[test]
    fn redacts_json_fields() {
        let mut v = serde_json::json!({"env": {"API_TOKEN": "t0ps3cret", "HOME": "/root"}, "n": [{"secret": "x"}]});
        redact_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"env": {"API_TOKEN": REDACTED, "HOME": "/root"}, "n": [{"secret": REDACTED}]})
        );
    }

    #[test]
    fn caps_on_char_boundary() {
        let s = "é".repeat(MAX_OUTPUT); // 2 bytes each
        let (out, cut, bytes) = tool_output(&s);
        assert!(cut);
        assert_eq!(bytes, (2 * MAX_OUTPUT) as u64);
        assert_eq!(out.len(), MAX_OUTPUT);
        let (out, cut, bytes) = tool_output("short");
        assert_eq!((out.as_str(), cut, bytes), ("short", false, 5));
    }
}
