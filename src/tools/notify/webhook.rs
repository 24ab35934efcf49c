//! One delivery to a webhook: its URL, the Standard Webhooks signature,
//! the request's bytes, one attempt over a plain TCP connection, what the
//! answer means, and the delay before a retry.

use super::message::{clip, Message};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How long connecting may take; then sending the request, and then the
/// answer's status line, each in all (not each read or write: a receiver
/// that trickles a byte at a time holds a delivery no longer).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Interim `1xx` answers (`100 Continue`, `103 Early Hints`) passed over before the final one.
const MAX_INTERIM: usize = 4;
/// Most bytes of an answer's head read while looking for its status.
const MAX_HEAD: usize = 8192;
/// The first retry's delay; each next one doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// An `http://` webhook URL, split for the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// As given (the state file's key).
    pub text: String,
    pub host: String,
    pub port: u16,
    /// The `Host` header: the authority as given.
    pub authority: String,
    /// Path and query, at least `/`.
    pub target: String,
}

/// Parses an `http://HOST[:PORT][/PATH][?QUERY]` URL. `https://` is refused
/// with a pointer to the TLS proxy recipe (runwire has no TLS client).
pub fn parse_url(s: &str) -> Result<Url, String> {
    if s.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!("{s:?}: a URL has no spaces or control characters"));
    }
    let rest = match s.strip_prefix("http://") {
        Some(r) => r,
        None if s.len() >= 8 && s[..8].eq_ignore_ascii_case("https://") => {
            return Err(format!(
                "{s}: https is not supported: point --webhook at a local TLS proxy (http://127.0.0.1:PORT/...) that forwards to it; see runs(1), NOTIFY"
            ))
        }
        None => return Err(format!("{s}: not an http:// URL")),
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let (authority, target) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    if authority.contains('@') {
        return Err(format!("{s}: credentials in the URL are not supported"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((h, after)) = v6.split_once(']') else { return Err(format!("{s}: unclosed [ in the host")) };
        match after {
            "" => (h.to_string(), None),
            p => match p.strip_prefix(':') {
                Some(p) => (h.to_string(), Some(p)),
                None => return Err(format!("{s}: bad host")),
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(format!("{s}: no host"));
    }
    let port = match port {
        None => 80,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| format!("{s}: bad port {p:?}"))?,
    };
    Ok(Url { text: s.to_string(), host, port, authority: authority.to_string(), target })
}

/// The signing key from `--secret-file`'s bytes: the base64 after `whsec_`
/// (surrounding whitespace ignored), else the bytes exactly as they are.
pub fn key(secret: &[u8]) -> Result<Vec<u8>, String> {
    let k = match secret.strip_prefix(b"whsec_") {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64.trim_ascii())
            .map_err(|e| format!("the part after whsec_ is not base64: {e}"))?,
        None => secret.to_vec(),
    };
    if k.is_empty() {
        return Err("the secret is empty".into());
    }
    Ok(k)
}

/// `v1,<base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length: this never fails.
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(key) else { return String::new() };
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer.
    Delivered(u16),
    /// Worth trying again: no connection, a timeout, 408, 425, 429 or 5xx.
    Retry(String),
    /// The receiver refused it for good (another status): not sent again.
    Refused(u16),
}

/// What a status means for the event.
pub fn judge(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Delivered(status),
        408 | 425 | 429 | 500..=599 => Outcome::Retry(format!("HTTP {status}")),
        _ => Outcome::Refused(status),
    }
}

/// The delay before retry number `attempt` (1 is the first retry).
pub fn backoff(attempt: u32) -> Duration {
    FIRST_BACKOFF.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(MAX_BACKOFF)
}

/// The request's bytes for one attempt at `timestamp` (seconds).
pub fn request(url: &Url, m: &Message, timestamp: i64, key: Option<&[u8]>) -> Vec<u8> {
    let mut r = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: runwire-notify/{}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nwebhook-id: {}\r\nwebhook-timestamp: {timestamp}\r\n",
        url.target,
        url.authority,
        env!("CARGO_PKG_VERSION"),
        m.content_type,
        m.body.len(),
        m.id,
    );
    if let Some(k) = key {
        r.push_str(&format!("webhook-signature: {}\r\n", sign(k, &m.id, timestamp, &m.body)));
    }
    for (k, v) in &m.headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    let mut b = r.into_bytes();
    b.extend_from_slice(&m.body);
    b
}

/// The wall clock in seconds (never `SOURCE_DATE_EPOCH`: receivers refuse
/// a timestamp minutes away from theirs).
fn now_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Time left before `deadline`, as a socket timeout: `None` once it has passed.
fn left(deadline: Instant) -> Option<Duration> {
    Some(deadline.saturating_duration_since(Instant::now())).filter(|d| !d.is_zero())
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("no end within {} s", IO_TIMEOUT.as_secs()))
}

/// Writes all of `bytes` by `deadline` (each write's timeout is the time left).
fn send_by(conn: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        conn.set_write_timeout(Some(left(deadline).ok_or_else(timed_out)?))?;
        match conn.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(timed_out())
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads more of the answer into `head` by `deadline`; false at its end.
fn read_by(conn: &mut TcpStream, head: &mut Vec<u8>, deadline: Instant) -> io::Result<bool> {
    let mut buf = [0u8; 1024];
    loop {
        conn.set_read_timeout(Some(left(deadline).ok_or_else(timed_out)?))?;
        match conn.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                head.extend_from_slice(&buf[..n]);
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(timed_out())
            }
            Err(e) => return Err(e),
        }
    }
}

/// One attempt: connects, sends (within 10 s in all), then reads the
/// answer's status line (within 10 s in all, however slowly the receiver
/// trickles it), passing over at most 4 interim `1xx` answers; the rest of
/// the answer is not read.
pub fn post(url: &Url, m: &Message, key: Option<&[u8]>) -> Outcome {
    let addrs = match (url.host.as_str(), url.port).to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Outcome::Retry(format!("cannot resolve {}: {e}", url.host)),
    };
    let mut last = format!("{}: no address", url.host);
    let Some(mut conn) = addrs.iter().find_map(|a| match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
        Ok(c) => Some(c),
        Err(e) => {
            last = format!("cannot connect to {a}: {e}");
            None
        }
    }) else {
        return Outcome::Retry(last);
    };
    let _ = conn.set_nodelay(true);
    if let Err(e) = send_by(&mut conn, &request(url, m, now_s(), key), Instant::now() + IO_TIMEOUT) {
        return Outcome::Retry(format!("sending: {e}"));
    }
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut head = Vec::new();
    let mut interim = 0;
    loop {
        // The status line, then for an interim answer its whole head.
        let line_end = head.windows(2).position(|w| w == b"\r\n");
        let status = line_end.map(|i| status_of(&head[..i]));
        let head_end = head.windows(4).position(|w| w == b"\r\n\r\n");
        match (status, head_end) {
            (Some(Some(code)), Some(end)) if (100..=199).contains(&code) && code != 101 => {
                interim += 1;
                if interim > MAX_INTERIM {
                    return Outcome::Retry(format!("more than {MAX_INTERIM} interim answers"));
                }
                head.drain(..end + 4);
                continue;
            }
            (Some(Some(code)), _) if !(100..=199).contains(&code) || code == 101 => return judge(code),
            (Some(None), _) => {
                let line = String::from_utf8_lossy(&head[..line_end.unwrap_or_default()]).into_owned();
                return Outcome::Retry(format!("not an HTTP answer: {:?}", clip(&line, 80)));
            }
            _ if head.len() > MAX_HEAD => {
                let line = String::from_utf8_lossy(&head).into_owned();
                return Outcome::Retry(format!(
                    "not an HTTP answer: {:?}",
                    clip(line.lines().next().unwrap_or_default(), 80)
                ));
            }
            _ => {}
        }
        match read_by(&mut conn, &mut head, deadline) {
            Ok(true) => {}
            Ok(false) => return Outcome::Retry("the connection closed before an answer".into()),
            Err(e) => return Outcome::Retry(format!("reading the answer: {e}")),
        }
    }
}

/// The status code of an `HTTP/1.x CODE …` status line; `None` for anything else.
fn status_of(line: &[u8]) -> Option<u16> {
    let line = String::from_utf8_lossy(line);
    line.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok()).filter(|_| line.starts_with("HTTP/1."))
}
