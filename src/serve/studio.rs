//! The studio: the page at `/` and its files at `/studio/<path>`, embedded
//! in the binary at build time (`build.rs` walks `studio/app/`), so the
//! server needs no file, no bundler and no network to show it.
//!
//! Static files carry no data, so they need no token: the page reads a
//! token from its URL fragment and sends it on every API call. Each answer
//! carries a strict Content-Security-Policy (own origin only, no inline
//! script or style, no framing) and an ETag, so a reload costs a 304.

use super::http::{method_not_allowed, respond_error, Close, Request};
use std::io::Write;
use std::net::TcpStream;

include!(concat!(env!("OUT_DIR"), "/studio_assets.rs"));

/// The page may load and call only its own origin; nothing inline, nothing framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The embedded file at `rel` (a path under `studio/app/`): bytes, content type, ETag.
pub fn asset(rel: &str) -> Option<(&'static [u8], &'static str, &'static str)> {
    ASSETS.iter().find(|(p, _, _)| *p == rel).map(|(_, bytes, etag)| (*bytes, content_type(rel), *etag))
}

fn content_type(rel: &str) -> &'static str {
    match rel.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Whether `path` is the page or one of its files (so the token check is skipped).
pub fn is_static(path: &str) -> bool {
    path == "/" || path == "/index.html" || path.starts_with("/studio/")
}

/// Answers `GET /`, `GET /index.html` and `GET /studio/<path>`.
pub fn get(stream: &mut TcpStream, req: &Request, cors: &[(&'static str, String)]) -> Close {
    if req.method != "GET" && req.method != "HEAD" {
        return method_not_allowed(stream, cors, "GET");
    }
    let rel = match req.path.as_str() {
        "/" | "/index.html" => "index.html",
        p => &p["/studio/".len()..],
    };
    // Only names the table can hold; the lookup never touches the file system anyway.
    let plausible = !rel.is_empty()
        && rel.len() <= 200
        && rel.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
        && rel.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'/'));
    let Some((body, ctype, etag)) = asset(rel).filter(|_| plausible) else {
        respond_error(stream, 404, cors, &format!("no studio file {}", req.path));
        return Close::Linger;
    };
    let fresh = req.header("if-none-match").is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let (code, status) = if fresh { (304, "Not Modified") } else { (200, "OK") };
    let mut head = format!(
        "HTTP/1.1 {code} {status}\r\nContent-Type: {ctype}\r\nContent-Security-Policy: {CSP}\r\n\
X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n\
Cross-Origin-Opener-Policy: same-origin\r\nCache-Control: no-cache\r\nETag: {etag}\r\n"
    );
    for (n, v) in cors {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    let send_body = code == 200 && req.method == "GET";
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        if code == 200 { body.len() } else { 0 }
    ));
    let mut all = head.into_bytes();
    if send_body {
        all.extend_from_slice(body);
    }
    let _ = stream.write_all(&all).and_then(|_| stream.flush());
    Close::Linger
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_embedded_and_typed() {
        let (body, ctype, etag) = asset("index.html").expect("studio/app/index.html is embedded");
        assert!(body.starts_with(b"<!doctype html>") || body.starts_with(b"<!DOCTYPE html>"));
        assert_eq!(ctype, "text/html; charset=utf-8");
        assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() == 18);
        assert_eq!(content_type("x/app.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }

    #[test]
    fn static_paths_are_exactly_the_page_and_its_files() {
        assert!(is_static("/") && is_static("/index.html") && is_static("/studio/app.js"));
        assert!(!is_static("/studios") && !is_static("/api/info") && !is_static("/runs"));
    }
}
