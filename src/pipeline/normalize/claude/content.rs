//! What Claude Code's lines hold besides text: tool results' content,
//! content blocks described for a person, usage.

use crate::pipeline::events::Usage;
use crate::util::lenient;
use serde_json::value::RawValue;
use serde_json::Value;

/// A tool call's input as JSON (`{}` when the block has none). JSON that
/// cannot become a [`Value`] (nested deeper than serde_json's 128
/// levels: the line itself was read as raw text) is kept as its text, a
/// string, never replaced by `{}`: the call's arguments are not dropped.
pub(super) fn raw_value(r: Option<&RawValue>) -> Value {
    match r {
        None => Value::Object(Default::default()),
        Some(r) => lenient::value(r.get()).unwrap_or_else(|_| Value::String(r.get().to_string())),
    }
}

/// A tool_result's `content`: a string, or a list of text (and other) blocks.
pub(super) fn result_text(content: Option<&RawValue>) -> String {
    let Some(raw) = content else { return String::new() };
    match lenient::value(raw.get()) {
        Ok(Value::String(s)) => s,
        Ok(Value::Array(parts)) => {
            let mut out = String::new();
            for p in parts {
                if !out.is_empty() {
                    out.push('\n');
                }
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    _ => out.push_str(&describe_block(&p)),
                }
            }
            out
        }
        Ok(Value::Null) | Err(_) => String::new(),
        Ok(other) => describe_block(&other),
    }
}

/// The size in bytes of what base64 `data` decodes to.
pub(super) fn base64_len(data: &str) -> usize {
    let pad = data.bytes().rev().take_while(|&b| b == b'=').count();
    (data.len() / 4 * 3 + (data.len() % 4).saturating_sub(1)).saturating_sub(pad)
}

/// A faithful one-line account of a non-text result block: its type and
/// what identifies it (media type and size, URL, title), never a bare
/// placeholder. Blocks of a kind not named here are kept as their JSON.
pub(super) fn describe_block(b: &Value) -> String {
    use super::super::fields::ValueExt;
    let kind = b.str_at("type").unwrap_or("");
    let mut parts: Vec<String> = Vec::new();
    let mut push = |s: Option<&str>, f: &dyn Fn(&str) -> String| {
        if let Some(s) = s.filter(|s| !s.is_empty()) {
            parts.push(f(s));
        }
    };
    match kind {
        "image" | "document" => {
            let src = b.get("source").unwrap_or(&Value::Null);
            push(b.str_at("title"), &|t| format!("{t:?}"));
            push(src.str_at("media_type"), &str::to_string);
            match src.str_at("type") {
                Some("base64") => {
                    let n = src.str_at("data").map(base64_len).unwrap_or(0);
                    parts.push(format!("{n} bytes"));
                }
                Some("url") => push(src.str_at("url"), &str::to_string),
                Some("file") => push(src.str_at("file_id"), &|f| format!("file {f}")),
                Some("text") => {
                    let n = src.str_at("data").map(str::len).unwrap_or(0);
                    parts.push(format!("{n} bytes of text"));
                }
                _ => {}
            }
        }
        "web_search_result" | "search_result" => {
            push(b.str_at("title"), &|t| format!("{t:?}"));
            push(b.str_at("url").or_else(|| b.str_at("source")), &str::to_string);
            push(b.str_at("page_age"), &|a| format!("({a})"));
        }
        "resource_link" => {
            push(b.str_at("name").or_else(|| b.str_at("title")), &|t| format!("{t:?}"));
            push(b.str_at("uri"), &str::to_string);
            push(b.str_at("mimeType"), &str::to_string);
            push(b.str_at("description"), &|d| format!("- {d}"));
        }
        "resource" => {
            let r = b.get("resource").unwrap_or(&Value::Null);
            push(r.str_at("uri"), &str::to_string);
            push(r.str_at("mimeType"), &str::to_string);
            if let Some(t) = r.str_at("text") {
                return format!("[resource {}]\n{t}", parts.join(" "));
            }
            if let Some(blob) = r.str_at("blob") {
                parts.push(format!("{} bytes", base64_len(blob)));
            }
        }
        k if k.ends_with("_error") => push(b.str_at("error_code"), &|c| format!("error_code {c}")),
        _ => return b.to_string(),
    }
    if parts.is_empty() {
        format!("[{kind}]")
    } else {
        format!("[{kind} {}]", parts.join(" "))
    }
}

pub(super) fn parse_usage(r: Option<&RawValue>) -> Option<Usage> {
    let v: Value = lenient::value(r?.get()).ok()?;
    let n = |k: &str| v.get(k).and_then(Value::as_u64);
    // Claude counts cache reads and writes apart from `input_tokens`; events/v1
    // counts every input token in `input_tokens` (as OpenAI does), cached ones
    // being a subset, so totals mean the same for every adapter.
    let (read, write) = (n("cache_read_input_tokens"), n("cache_creation_input_tokens"));
    Some(Usage {
        input_tokens: n("input_tokens")?.saturating_add(read.unwrap_or(0)).saturating_add(write.unwrap_or(0)),
        output_tokens: n("output_tokens").unwrap_or(0),
        cached_input_tokens: read,
        cache_write_input_tokens: write,
        reasoning_tokens: None,
    })
}
