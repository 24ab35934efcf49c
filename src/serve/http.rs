//! HTTP/1.1 helpers: reading one request head and body with hard bounds,
//! writing responses and stream heads, and closing without a reset. The
//! route table and the browser boundary are [`super::router`]'s; every
//! handler uses these helpers and nothing above them.
//!
//! One request per connection (`Connection: close` on every response): an
//! AG-UI client opens one stream per run anyway, and it keeps every
//! connection's life simple to bound. Every error body is `{"error":"..."}`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// A request body, at most (the router answers 413 beyond); the cluster
/// sidecar forwards bodies up to it.
pub const MAX_BODY: usize = 1024 * 1024;

/// Request line plus headers, at most.
pub const MAX_HEAD: usize = 16 * 1024;
/// Header lines, at most.
pub const MAX_HEADERS: usize = 64;
/// How much of an oversized body is read and thrown away before answering,
/// so the client (still sending) gets to read the 413 instead of a reset.
pub const MAX_DRAIN: usize = 16 * 1024 * 1024;
/// A client that sends nothing for this long while we read its request is
/// answered 408 and dropped (`RUNWIRE_READ_TIMEOUT_MS` overrides).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The whole request (head and body) must arrive within this many idle timeouts.
pub const REQUEST_DEADLINE_FACTOR: u32 = 3;
/// A client that takes none of the bytes waiting for it for this long is
/// dropped (`RUNWIRE_WRITE_TIMEOUT_MS` overrides): measured on what the
/// client's side acknowledged, not per write call, since the kernel's send
/// buffer grows and lets writes succeed for a client that reads nothing.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// After its response, a connection is drained for at most this long in
/// all (whatever the client keeps sending), then closed.
pub const LINGER: Duration = Duration::from_secs(1);

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// `HTTP/1.0` (false) or `HTTP/1.1` (true).
    pub http11: bool,
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The first header of this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn header_count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).count()
    }
}

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Answer with this status and message.
    Reject(u16, String),
    /// The connection failed or timed out: nothing to answer.
    Gone,
}

/// Reads the head (up to the blank line); returns it and the bytes read past it.
pub fn read_head(stream: &mut impl Read) -> Result<(Request, Vec<u8>), ReadError> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Err(ReadError::Gone),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(if buf.is_empty() {
                    ReadError::Gone
                } else {
                    ReadError::Reject(408, "the request head did not arrive in time".into())
                })
            }
            Err(_) => return Err(ReadError::Gone),
        };
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = memchr::memmem::find(&buf[from..], b"\r\n\r\n") {
            break from + i;
        }
        // A line ended by a bare LF would leave us waiting for a CRLF CRLF
        // that never comes: refuse it at once.
        let scan = buf.len() - n;
        if memchr::memchr_iter(b'\n', &buf[scan..]).any(|i| scan + i == 0 || buf[scan + i - 1] != b'\r') {
            return Err(ReadError::Reject(400, "a request line ends with a bare LF; lines must end with CRLF".into()));
        }
        if buf.len() > MAX_HEAD {
            return Err(ReadError::Reject(431, format!("the request head is larger than {MAX_HEAD} bytes")));
        }
    };
    if end > MAX_HEAD {
        return Err(ReadError::Reject(431, format!("the request head is larger than {MAX_HEAD} bytes")));
    }
    let rest = buf[end + 4..].to_vec();
    let head = std::str::from_utf8(&buf[..end])
        .map_err(|_| ReadError::Reject(400, "the request head is not valid UTF-8".into()))?;
    parse_head(head).map(|r| (r, rest)).map_err(|(code, m)| ReadError::Reject(code, m))
}

/// Parses a request head (without the final blank line).
pub fn parse_head(head: &str) -> Result<Request, (u16, String)> {
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err((400, "malformed request line".into()));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err((400, "malformed request method".into()));
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err((505, format!("unsupported protocol version {version:?} (HTTP/1.0 and 1.1 only)"))),
    };
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err((400, "the request target must be an absolute path".into()));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    };
    let mut headers = Vec::new();
    for l in lines {
        if headers.len() >= MAX_HEADERS {
            return Err((431, format!("more than {MAX_HEADERS} header lines")));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err((400, "malformed header line".into()));
        };
        let name_ok =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !name_ok {
            // Also rejects obsolete line folding (a line starting with a space).
            return Err((400, "malformed header name".into()));
        }
        let value = value.trim_matches(|c| c == ' ' || c == '\t');
        if value.bytes().any(|b| b < b' ' && b != b'\t' || b == 0x7f) {
            return Err((400, format!("header {name}: control characters in the value")));
        }
        headers.push((name.to_string(), value.to_string()));
    }
    Ok(Request { method: method.to_string(), path, query, http11, headers })
}

/// Why a body could not be read.
#[derive(Debug)]
pub enum BodyError {
    TooLarge,
    Bad(String),
    /// The client stopped sending (idle or past the request deadline).
    Timeout,
    Gone,
}

fn io_err(e: io::Error) -> BodyError {
    if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
        BodyError::Timeout
    } else {
        BodyError::Gone
    }
}

/// The request side of a connection, read under two limits: each read may
/// wait at most `idle`, and the whole request must have arrived by `until`,
/// so a client trickling a byte at a time cannot hold a thread either.
pub struct Timed<'a> {
    pub stream: &'a TcpStream,
    pub idle: Duration,
    pub until: Instant,
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the request took too long to arrive"));
        }
        self.stream.set_read_timeout(Some(self.idle.min(left).max(Duration::from_millis(1))))?;
        let mut s = self.stream;
        s.read(buf)
    }
}

/// Reads the body (`Content-Length` or chunked) into memory, at most `limit`
/// bytes. A larger body is read on and discarded up to [`MAX_DRAIN`] so the
/// 413 reaches a client that is still sending.
pub fn read_body(req: &Request, src: impl Read, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut r = BufReader::with_capacity(16 * 1024, src);
    if let Some(te) = req.header("transfer-encoding") {
        if req.header("content-length").is_some() {
            return Err(BodyError::Bad("both Content-Length and Transfer-Encoding were sent".into()));
        }
        if req.header_count("transfer-encoding") > 1 || !te.trim().eq_ignore_ascii_case("chunked") {
            return Err(BodyError::Bad(format!("unsupported Transfer-Encoding {te:?} (only chunked)")));
        }
        return read_chunked(&mut r, limit);
    }
    let lengths: Vec<&str> =
        req.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("content-length")).map(|(_, v)| v.trim()).collect();
    let Some(first) = lengths.first() else { return Ok(Vec::new()) };
    if lengths.iter().any(|l| l != first) {
        return Err(BodyError::Bad("conflicting Content-Length headers".into()));
    }
    if first.is_empty() || first.len() > 19 || !first.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BodyError::Bad(format!("Content-Length {first:?} is not a number")));
    }
    let len: u64 = first.parse().map_err(|_| BodyError::Bad("Content-Length is out of range".into()))?;
    if len > limit as u64 {
        let drain = len.min(MAX_DRAIN as u64);
        let _ = io::copy(&mut (&mut r).take(drain), &mut io::sink());
        return Err(BodyError::TooLarge);
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).map_err(io_err)?;
    Ok(body)
}

fn read_chunked(r: &mut impl BufRead, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    let mut total: u64 = 0;
    let mut line = Vec::new();
    loop {
        read_crlf_line(r, &mut line)?;
        let size = chunk_size(&line).ok_or_else(|| BodyError::Bad("malformed chunk size".into()))?;
        if size == 0 {
            // Trailers, then the final blank line.
            for _ in 0..MAX_HEADERS {
                read_crlf_line(r, &mut line)?;
                if line.is_empty() {
                    break;
                }
            }
            return if total > limit as u64 { Err(BodyError::TooLarge) } else { Ok(body) };
        }
        total = total.saturating_add(size);
        if total > limit as u64 {
            body = Vec::new();
            if total > MAX_DRAIN as u64 {
                return Err(BodyError::TooLarge);
            }
            let copied = io::copy(&mut (&mut *r).take(size), &mut io::sink()).map_err(io_err)?;
            if copied < size {
                return Err(BodyError::Gone);
            }
        } else {
            let start = body.len();
            body.resize(start + size as usize, 0);
            r.read_exact(&mut body[start..]).map_err(io_err)?;
        }
        read_crlf_line(r, &mut line)?;
        if !line.is_empty() {
            return Err(BodyError::Bad("a chunk is longer than its declared size".into()));
        }
    }
}

/// A chunk line's size (RFC 9112 7.1: `1*HEXDIG [ BWS ";" chunk-ext ]`):
/// hex digits only (no sign: `u64::from_str_radix` takes a `+`), at most
/// 15 of them; an extension is skipped but must be well formed enough to
/// end (no control character, its quotes closed).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 15 {
        return None;
    }
    let rest = &line[digits..];
    let ext = rest.trim_ascii_start();
    let ok_rest = rest.is_empty()
        || (ext.first() == Some(&b';')
            && !ext.iter().any(|&b| b.is_ascii_control() && b != b'\t')
            && quotes_closed(&ext[1..]));
    let text = std::str::from_utf8(&line[..digits]).ok()?;
    ok_rest.then(|| u64::from_str_radix(text, 16).ok()).flatten()
}

/// Whether every quoted string in a chunk extension ends (`\` escapes one byte).
fn quotes_closed(ext: &[u8]) -> bool {
    let (mut quoted, mut escaped) = (false, false);
    for &b in ext {
        match (quoted, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (_, false, b'"') => quoted = !quoted,
            _ => {}
        }
    }
    !quoted
}

/// One line ended by CRLF, at most 4 KiB. A bare LF is refused, as in the
/// head: two parsers (a proxy's, ours) must never split a body differently.
fn read_crlf_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> Result<(), BodyError> {
    line.clear();
    let n = r.take(4096).read_until(b'\n', line).map_err(io_err)?;
    if n == 0 {
        return Err(BodyError::Gone);
    }
    if line.last() != Some(&b'\n') {
        return Err(BodyError::Bad("a chunk line is too long".into()));
    }
    line.pop();
    if line.pop() != Some(b'\r') {
        return Err(BodyError::Bad("a chunk line ends with a bare LF (CRLF expected)".into()));
    }
    Ok(())
}

/// `s` with each valid `%XX` decoded (anything else kept as is).
pub fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let (Some(h), Some(l)) = (b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// How the connection ends after a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// Drain what the client may still send, then close.
    Linger,
    /// Close now (the stream ended or the client is gone).
    Now,
}

/// The reason phrase of every status the server sends (RFC 9110's).
pub fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// The head of a streamed `text/event-stream` answer: chunked on HTTP/1.1
/// (one chunk a frame), plain until close on HTTP/1.0; never buffered by a proxy.
pub fn sse_head(req: &Request, cors: &[(&'static str, String)]) -> String {
    stream_head(req, cors, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n")
}

/// The head of a `200` whose body is written as it comes (its length not
/// known first), with `fields` (each ending in CRLF): chunked on HTTP/1.1,
/// so a body cut short lacks its last chunk; until close on HTTP/1.0.
pub fn stream_head(req: &Request, cors: &[(&'static str, String)], fields: &str) -> String {
    let mut head = format!("HTTP/1.1 200 OK\r\n{fields}Connection: close\r\n");
    if req.http11 {
        head.push_str("Transfer-Encoding: chunked\r\n");
    }
    for (n, v) in cors {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// `headers` for a reply of status `code`, with `Retry-After: 1` when it is
/// a 503. At every door a 503 means nothing was done (a supervisor with no
/// room for the call, an agent not reading, too many readers at once), so
/// the client is told when to try again, in one place.
pub fn with_retry(headers: &[(&'static str, String)], code: u16) -> Vec<(&'static str, String)> {
    let mut h = headers.to_vec();
    if code == 503 {
        h.push(("Retry-After", "1".into()));
    }
    h
}

/// Writes a complete response with a JSON (or empty) body.
pub fn respond(stream: &mut impl Write, code: u16, headers: &[(&str, String)], body: &str) -> io::Result<()> {
    respond_pieces(stream, code, headers, &[body])
}

/// [`respond`] with a body given in pieces: a full listing's body is
/// thousands of summaries, never copied into one.
pub fn respond_pieces(stream: &mut impl Write, code: u16, headers: &[(&str, String)], body: &[&str]) -> io::Result<()> {
    let len: usize = body.iter().map(|p| p.len()).sum();
    let mut head = format!("HTTP/1.1 {code} {}\r\n", reason(code));
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    if len > 0 {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {len}\r\nConnection: close\r\n\r\n"));
    write_pieces(stream, std::iter::once(head.as_str()).chain(body.iter().copied()), head.len() + len)?;
    stream.flush()
}

/// How much [`write_pieces`] gathers before a write.
const GATHER: usize = 64 * 1024;

/// Writes `total` bytes of pieces, in order, gathered into writes of up to
/// [`GATHER`] bytes (a piece that size or more is written as it is: what
/// `BufWriter` does). A `writev` of a listing's thousands of ~300-byte
/// summaries took the kernel two to three times as long as the same bytes
/// in 64 KiB writes (measured on loopback); the copy costs far less.
fn write_pieces<'a>(w: &mut impl Write, pieces: impl Iterator<Item = &'a str>, total: usize) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(total.clamp(1, GATHER), w);
    for p in pieces {
        w.write_all(p.as_bytes())?;
    }
    w.flush()
}

/// `{"error":"..."}`.
pub fn error_json(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}

/// Writes an error response, ignoring a client that already left.
pub fn respond_error(stream: &mut impl Write, code: u16, headers: &[(&str, String)], message: &str) {
    let mut h = headers.to_vec();
    if code == 401 {
        h.push(("WWW-Authenticate", "Bearer".to_string()));
    }
    let _ = respond(stream, code, &h, &error_json(message));
}

/// Closes after a response without resetting the connection: stop writing,
/// then read and discard (bounded in bytes and time) until the client
/// closes, so unread request bytes cannot turn our close into a reset that
/// would destroy the response in flight.
pub fn linger_close(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    // Bounded in all, not per read: a client sending a byte now and then
    // must not hold its connection slot.
    let until = Instant::now() + LINGER;
    let _ = io::copy(&mut Timed { stream, idle: LINGER, until }.take(MAX_DRAIN as u64), &mut io::sink());
}

/// True when the client closed its side or the connection failed. Bytes
/// the client sent after its request are read and thrown away (at most
/// 64 KiB a call), since one byte waiting would hide the end of the stream
/// from a peek. The socket must not block long on reads (non-blocking, or
/// a short read timeout).
pub fn client_gone(stream: &TcpStream) -> bool {
    let mut b = [0u8; 4096];
    let mut s = stream;
    for _ in 0..16 {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut),
        }
    }
    false
}

/// Bytes written to the socket that the peer has not acknowledged yet.
fn unacknowledged(stream: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut n: nix::libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ on a TCP socket) writes one int through
    // the pointer, which is valid for the call; the descriptor is open.
    let r = unsafe { nix::libc::ioctl(stream.as_raw_fd(), nix::libc::TIOCOUTQ, &mut n) };
    (r == 0).then_some(n.max(0) as u64)
}

/// Whether a client takes what is sent to it: the bytes it acknowledged
/// (written minus still in the socket's queue) must move at least once per
/// `limit` while any are waiting for it. Writes that succeed into a growing
/// kernel buffer do not count, so a client that reads nothing is dropped on
/// time whatever the buffer sizes.
#[derive(Debug)]
pub struct Progress {
    written: u64,
    taken: u64,
    since: Instant,
    limit: Duration,
}

impl Progress {
    pub fn new(limit: Duration) -> Progress {
        Progress { written: 0, taken: 0, since: Instant::now(), limit }
    }

    /// Counts `n` bytes handed to the socket.
    pub fn wrote(&mut self, n: usize) {
        self.written += n as u64;
    }

    /// `Err(TimedOut)` when bytes wait for the client (in the socket, or in
    /// the caller's queue: `pending`) and it took none of them for `limit`.
    pub fn check(&mut self, stream: &TcpStream, pending: bool) -> io::Result<()> {
        let queued = unacknowledged(stream).unwrap_or(0);
        let taken = self.written.saturating_sub(queued);
        if taken > self.taken || (queued == 0 && !pending) {
            self.taken = self.taken.max(taken);
            self.since = Instant::now();
            return Ok(());
        }
        if self.since.elapsed() >= self.limit {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took nothing for {} ms", self.limit.as_millis()),
            ));
        }
        Ok(())
    }

    /// Writes all of `buf` on a blocking socket whose write timeout is
    /// short (a tick), checking between writes that the client takes it.
    pub fn write_all(&mut self, stream: &mut TcpStream, buf: &[u8]) -> io::Result<()> {
        let mut off = 0;
        while off < buf.len() {
            match stream.write(&buf[off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    off += n;
                    self.wrote(n);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            self.check(stream, off < buf.len())?;
        }
        Ok(())
    }
}

pub fn method_not_allowed(stream: &mut TcpStream, cors: &[(&'static str, String)], allow: &str) -> Close {
    let mut h = cors.to_vec();
    h.push(("Allow", allow.to_string()));
    respond_error(stream, 405, &h, &format!("method not allowed; use {allow}"));
    Close::Linger
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Takes at most the next of `takes` bytes a call (cycling; 0 is an
    /// interrupted call), as a socket may, and records each call's size.
    struct Trickle {
        out: Vec<u8>,
        takes: Vec<usize>,
        calls: Vec<usize>,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let take = self.takes[self.calls.len() % self.takes.len()];
            self.calls.push(b.len());
            if take == 0 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = b.len().min(take);
            self.out.extend_from_slice(&b[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    proptest! {
        /// Every byte of every piece, in order, once, however the writer
        /// cuts the writes; a call is never handed more than a gathered
        /// buffer or one big piece.
        #[test]
        fn pieces_are_written_whole_and_in_order(
            pieces in proptest::collection::vec(
                prop_oneof![9 => "[a-z]{0,6}", 1 => "[a-z]{0,6}".prop_map(|s| s.repeat(20_000))],
                0..600,
            ),
            takes in proptest::collection::vec(0usize..40_000, 1..8),
        ) {
            let takes = if takes.iter().all(|&t| t == 0) { vec![1] } else { takes };
            let mut w = Trickle { out: Vec::new(), takes, calls: Vec::new() };
            let total = pieces.iter().map(String::len).sum();
            write_pieces(&mut w, pieces.iter().map(String::as_str), total).unwrap();
            prop_assert_eq!(w.out, pieces.concat().into_bytes());
            let biggest = pieces.iter().map(String::len).max().unwrap_or(0).max(GATHER);
            prop_assert!(w.calls.iter().all(|&n| n <= biggest));
        }
    }

    #[test]
    fn small_pieces_go_out_in_few_writes() {
        // 3 MB of 300-byte pieces, as a full listing: one call a gathered buffer.
        let piece = "x".repeat(300);
        let pieces = vec![piece.as_str(); 10_000];
        let mut w = Trickle { out: Vec::new(), takes: vec![usize::MAX], calls: Vec::new() };
        write_pieces(&mut w, pieces.iter().copied(), 3_000_000).unwrap();
        assert_eq!(w.out.len(), 3_000_000);
        assert_eq!(w.calls.len(), 3_000_000usize.div_ceil(GATHER / 300 * 300));
    }

    #[test]
    fn heads_parse_and_bounds_hold() {
        let r = parse_head("POST /agui?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type:  application/json ").unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str(), r.query.as_deref()), ("POST", "/agui", Some("x=1")));
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(parse_head("GET / HTTP/2.0").is_err());
        assert!(parse_head("GET  / HTTP/1.1").is_err());
        assert!(parse_head("GET / HTTP/1.1\r\n folded").is_err());
        assert!(parse_head("GET http://x/ HTTP/1.1").is_err());
        let many = format!("GET / HTTP/1.1{}", "\r\nA: b".repeat(MAX_HEADERS + 1));
        assert_eq!(parse_head(&many).unwrap_err().0, 431);
        let mut big = io::Cursor::new(format!("GET / HTTP/1.1\r\nA: {}\r\n\r\n", "x".repeat(MAX_HEAD)).into_bytes());
        assert!(matches!(read_head(&mut big), Err(ReadError::Reject(431, _))));
    }

    #[test]
    fn bodies_by_length_and_chunked_with_limits() {
        let req = |h: &str| parse_head(&format!("POST /agui HTTP/1.1\r\n{h}")).unwrap();
        assert_eq!(read_body(&req("Content-Length: 3"), &b"abcdef"[..], 10).unwrap(), b"abc");
        assert!(matches!(read_body(&req("Content-Length: 11"), &[0u8; 11][..], 10), Err(BodyError::TooLarge)));
        let chunked = req("Transfer-Encoding: chunked");
        assert_eq!(read_body(&chunked, &b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"[..], 10).unwrap(), b"abcde");
        assert!(matches!(
            read_body(&chunked, &b"6\r\nabcdef\r\n6\r\nabcdef\r\n0\r\n\r\n"[..], 10),
            Err(BodyError::TooLarge)
        ));
        assert!(matches!(read_body(&chunked, &b"zz\r\n"[..], 10), Err(BodyError::Bad(_))));
        // Strict chunk lines (a proxy that reads them otherwise must never see another body):
        // no sign, no leading space, CRLF only, an extension's quotes closed.
        for bad in [
            &b"+2\r\n{}\r\n0\r\n\r\n"[..],
            b" 2\r\n{}\r\n0\r\n\r\n",
            b"2\n{}\n0\n\n",
            b"2\r\n{}\n0\r\n\r\n",
            b"2;a=\"b\r\n{}\r\n0\r\n\r\n",
            b"2x\r\n{}\r\n0\r\n\r\n",
            b"2;a\x01\r\n{}\r\n0\r\n\r\n",
        ] {
            assert!(
                matches!(read_body(&chunked, bad, 10), Err(BodyError::Bad(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        for good in [&b"2 ;a=\"b;c\\\"\"\r\n{}\r\n0\r\n\r\n"[..], b"0002\r\n{}\r\n0\r\nX-T: 1\r\n\r\n"] {
            assert_eq!(read_body(&chunked, good, 10).unwrap(), b"{}", "{:?}", String::from_utf8_lossy(good));
        }
        assert!(matches!(
            read_body(&req("Transfer-Encoding: chunked\r\nContent-Length: 3"), &b""[..], 10),
            Err(BodyError::Bad(_))
        ));
        assert!(matches!(
            read_body(&req("Content-Length: 1\r\nContent-Length: 2"), &b"ab"[..], 10),
            Err(BodyError::Bad(_))
        ));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn no_input_panics(head in ".{0,300}", bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = parse_head(&head);
            let _ = read_head(&mut io::Cursor::new(bytes.clone()));
            let _ = percent_decode(&head);
            for h in ["Transfer-Encoding: chunked", "Content-Length: 20", "Content-Length: 99999999999999999999"] {
                let req = parse_head(&format!("POST /agui HTTP/1.1\r\n{h}")).unwrap();
                let _ = read_body(&req, &bytes[..], 64);
            }
        }

        #[test]
        fn chunked_bodies_round_trip(body in proptest::collection::vec(any::<u8>(), 0..300), cut in 1usize..50) {
            let mut wire = Vec::new();
            for c in body.chunks(cut) {
                wire.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                wire.extend_from_slice(c);
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let req = parse_head("POST /agui HTTP/1.1\r\nTransfer-Encoding: chunked").unwrap();
            prop_assert_eq!(read_body(&req, &wire[..], 1024).unwrap(), body);
        }
    }
}
