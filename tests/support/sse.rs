//! The tests' one reader of `text/event-stream` bodies, by the WHATWG rules
//! the studio's `EventSource` follows: `field: value` lines (one optional
//! space after the colon), `data` lines of a frame joined with `\n`, comment
//! lines (`:`, the server's keep-alives) and unknown fields ignored, a frame
//! dispatched at a blank line, an unterminated last frame dropped.
//!
//! [`frames`] and [`events`] read a whole body; [`Reader`] reads a live
//! stream (a socket) frame by frame, counting the comments it skips;
//! [`http_events`] reads a whole HTTP response, chunked or not.

use serde_json::Value;
use std::io::Read;
use std::time::{Duration, Instant};

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

    /// The event type a browser dispatches: `message` without an `event` line.
    pub fn kind(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }
}

/// The line-by-line state of a stream: the frame being read, and how many
/// comment lines came so far.
#[derive(Debug, Default)]
pub struct Parser {
    cur: Frame,
    data: Option<String>,
    /// Comment lines seen (`: keep-alive`, ...).
    pub comments: usize,
}

impl Parser {
    /// One line (without its end); a frame when the line is blank and ends one with data.
    pub fn line(&mut self, line: &str) -> Option<Frame> {
        if line.is_empty() {
            let done = self.data.take().map(|d| Frame { data: d, ..std::mem::take(&mut self.cur) });
            self.cur.event = None;
            return done;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "" => self.comments += 1,
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "id" if !value.contains('\0') => self.cur.id = Some(value.to_string()),
            "event" => self.cur.event = Some(value.to_string()),
            _ => {}
        }
        None
    }
}

/// The frames of `body` that carry data (a frame with none, such as a
/// keep-alive, dispatches nothing, as in a browser).
pub fn frames(body: &str) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut p = Parser::default();
    let mut rest = body;
    while let Some(end) = rest.find(['\n', '\r']) {
        let line = &rest[..end];
        let skip = if rest[end..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[end + skip..];
        out.extend(p.line(line));
    }
    out
}

/// The JSON data of every frame of `body`, in order.
pub fn events(body: &str) -> Vec<Value> {
    frames(body).iter().map(Frame::json).collect()
}

/// The JSON data of every frame of a whole (or cut) HTTP response: its
/// status must be 200; a chunked body is read up to its last whole chunk.
pub fn http_events(raw: &[u8]) -> Vec<Value> {
    let end = find(raw, b"\r\n\r\n").unwrap_or_else(|| panic!("no response head: {}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    assert!(head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"), "{head}");
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    let body = if chunked { dechunk(&raw[end + 4..]).0 } else { raw[end + 4..].to_vec() };
    events(&String::from_utf8(body).unwrap())
}

/// A chunked body's bytes up to its last whole chunk, and whether the last
/// chunk (size 0) came.
pub fn dechunk(mut rest: &[u8]) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    while let Some(i) = find(rest, b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..i]).unwrap().trim(), 16).expect("chunk size");
        rest = &rest[i + 2..];
        if size == 0 {
            return (body, true);
        }
        if rest.len() < size + 2 {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        assert_eq!(&rest[size..size + 2], b"\r\n", "a chunk must end with CRLF");
        rest = &rest[size + 2..];
    }
    (body, false)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// A live `text/event-stream` (not chunked: the HTTP/1.0 requests the tests
/// send get a body that is the stream), read frame by frame.
pub struct Reader<R> {
    r: R,
    buf: Vec<u8>,
    /// Bytes of `buf` already known to hold no line end.
    seen: usize,
    parser: Parser,
}

impl<R: Read> Reader<R> {
    pub fn new(r: R) -> Reader<R> {
        Reader { r, buf: Vec::new(), seen: 0, parser: Parser::default() }
    }

    /// The source, to write to it or set its timeouts.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.r
    }

    /// The rest of the body, as bytes (what a refusal's JSON is read from).
    pub fn into_body(mut self) -> Vec<u8> {
        let _ = self.r.read_to_end(&mut self.buf);
        self.buf
    }

    /// Comment lines skipped so far (the server's keep-alives).
    pub fn comments(&self) -> usize {
        self.parser.comments
    }

    /// Reads more; false at the end of the stream or on an error (a timeout).
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.r.read(&mut chunk) {
                // A signal to the test process (a socket with a read timeout
                // is never restarted, even after a stop and continue): read
                // again. Taken for the stream's end, it failed long waits at random.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return true;
                }
            }
        }
    }

    /// Reads the HTTP response head (up to its blank line) and returns it,
    /// status line first; panics when the stream ends first.
    pub fn head(&mut self) -> String {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 4);
                self.seen = 0;
                return head;
            }
            assert!(self.fill(), "the connection closed in the response head: {}", String::from_utf8_lossy(&self.buf));
        }
    }

    /// The head's status code ([`Reader::head`]).
    pub fn status(&mut self) -> u16 {
        let head = self.head();
        head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("not an HTTP response: {head}"))
    }

    /// The next frame with data; `None` at the end of the stream or a read
    /// error (the socket's read timeout).
    pub fn next_frame(&mut self) -> Option<Frame> {
        self.next_frame_until(None)
    }

    /// [`Reader::next_frame`], giving up (`None`) after `limit` even while
    /// comments keep coming.
    pub fn next_frame_within(&mut self, limit: Duration) -> Option<Frame> {
        self.next_frame_until(Some(Instant::now() + limit))
    }

    fn next_frame_until(&mut self, deadline: Option<Instant>) -> Option<Frame> {
        loop {
            while let Some(i) = memchr::memchr2(b'\n', b'\r', &self.buf[self.seen..]).map(|i| i + self.seen) {
                // A CR at the end of what came may be the first half of a CRLF.
                if self.buf[i] == b'\r' && i + 1 == self.buf.len() {
                    self.seen = i;
                    break;
                }
                let skip = if self.buf[i] == b'\r' && self.buf[i + 1] == b'\n' { 2 } else { 1 };
                let line = String::from_utf8(self.buf[..i].to_vec()).expect("an SSE line is UTF-8");
                self.buf.drain(..i + skip);
                self.seen = 0;
                if let Some(f) = self.parser.line(&line) {
                    return Some(f);
                }
            }
            if self.seen < self.buf.len() && !matches!(self.buf.last(), Some(b'\r')) {
                self.seen = self.buf.len();
            }
            if deadline.is_some_and(|d| Instant::now() > d) || !self.fill() {
                return None;
            }
        }
    }
}
