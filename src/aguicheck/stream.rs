//! Whole inputs: bytes as they come, framed as SSE or JSON lines, into the
//! [`Checker`].

use super::*;

/// How the input is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Sse,
    Jsonl,
}

/// A whole input, bytes in as they come: SSE frames or JSON lines (told, or
/// read off the first non-blank byte: `{` is JSON lines), checked as they
/// complete. Holds at most one frame or line ([`MAX_FRAME`]).
pub struct Stream {
    format: Option<Format>,
    checker: Checker,
    line: Vec<u8>,
    /// The line in hand is over the cap: skip to its end.
    skipping: bool,
    /// The SSE frame's data lines so far, joined with LF.
    data: Vec<u8>,
    has_data: bool,
    frame_too_large: bool,
    cr_reported: bool,
    prev_cr: bool,
    /// Leading whitespace read before the framing was known.
    pending: Vec<u8>,
    /// The first bytes, until they show whether the input begins with a
    /// UTF-8 byte order mark (then dropped, as `TextDecoder` drops it and
    /// the SSE spec strips one); `None` once that is known.
    head: Option<Vec<u8>>,
}

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Stream {
    pub fn new(format: Option<Format>, opts: Options) -> Stream {
        Stream {
            format,
            checker: Checker::new(opts),
            line: Vec::new(),
            skipping: false,
            data: Vec::new(),
            has_data: false,
            frame_too_large: false,
            cr_reported: false,
            prev_cr: false,
            pending: Vec::new(),
            head: Some(Vec::new()),
        }
    }

    /// The checker (for its event count).
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// More bytes of the input; the findings they complete.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(head) = &mut self.head {
            // At most the input's first three bytes are held here.
            let take = bytes.len().min(BOM.len() - head.len());
            head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if head.len() < BOM.len() && BOM.starts_with(head) {
                return out;
            }
            let head = self.head.take().unwrap_or_default();
            let first = if head == BOM { &[][..] } else { &head[..] };
            out.extend(self.feed(first));
            out.extend(self.feed(bytes));
            return out;
        }
        if self.format.is_none() {
            // Whitespace only so far could be SSE blank lines or empty JSON
            // lines: kept until a byte decides, or [`MAX_FRAME`] of it
            // (then it is SSE), so memory stays bounded.
            self.pending.extend_from_slice(bytes);
            let head = &self.pending[..self.pending.len().min(MAX_FRAME)];
            self.format = match head.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(first) if head[first] == b'{' => Some(Format::Jsonl),
                Some(_) => Some(Format::Sse),
                None if head.len() == MAX_FRAME => Some(Format::Sse),
                None => return out,
            };
            let pending = std::mem::take(&mut self.pending);
            return self.feed(&pending);
        }
        while !bytes.is_empty() {
            // SSE ends a line at LF, CR or CRLF; JSON lines at LF (a CR before it is dropped).
            let sse = self.format == Some(Format::Sse);
            let end = bytes.iter().position(|&b| b == b'\n' || (sse && b == b'\r'));
            let (chunk, rest, done) = match end {
                Some(i) => (&bytes[..i], &bytes[i + 1..], Some(bytes[i])),
                None => (bytes, &b""[..], None),
            };
            if sse
                && (done == Some(b'\r') || (chunk.is_empty() && done == Some(b'\n') && self.prev_cr))
                && !self.cr_reported
            {
                self.cr_reported = true;
                let f = Finding {
                    rule: "framing.crlf",
                    index: Some(self.checker.events() + 1),
                    event: None,
                    message: "a CR byte in the stream: AG-UI's SSE binding frames with LF only".into(),
                };
                out.push(f);
            }
            if !self.skipping {
                if self.line.len() + chunk.len() > MAX_FRAME {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            bytes = rest;
            if let Some(b) = done {
                // An LF right after a CR ends nothing: CRLF is one line end.
                let crlf_tail = b == b'\n' && self.prev_cr && chunk.is_empty();
                self.prev_cr = b == b'\r';
                if crlf_tail {
                    continue;
                }
                let line = std::mem::take(&mut self.line);
                let too_long = std::mem::replace(&mut self.skipping, false);
                self.line_done(&line, too_long, &mut out);
            } else {
                self.prev_cr = false;
            }
        }
        out
    }

    fn line_done(&mut self, line: &[u8], too_long: bool, out: &mut Vec<Finding>) {
        if self.format == Some(Format::Jsonl) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if too_long {
                out.push(self.checker.unreadable("framing.too-large", format!("a line over {MAX_FRAME} bytes")));
            } else if !line.iter().all(u8::is_ascii_whitespace) {
                out.extend(self.checker.payload(line));
            }
            return;
        }
        if line.is_empty() && !too_long {
            return self.dispatch(out);
        }
        if too_long {
            self.frame_too_large = true;
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.has_data = true;
                if self.data.len() + value.len() > MAX_FRAME {
                    self.frame_too_large = true;
                    self.data.clear();
                } else if !self.frame_too_large {
                    self.data.extend_from_slice(value);
                }
            }
            b"id" if value.contains(&0) => out.push(Finding {
                rule: "framing.id",
                index: Some(self.checker.events() + 1),
                event: None,
                message: "an id: field holding NUL: EventSource ignores it, so a reconnecting client would not resume from it".into(),
            }),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Finding>) {
        if std::mem::replace(&mut self.frame_too_large, false) {
            out.push(self.checker.unreadable("framing.too-large", format!("a frame over {MAX_FRAME} bytes")));
        } else if self.has_data {
            out.extend(self.checker.payload(&self.data));
        }
        self.data.clear();
        self.has_data = false;
    }

    /// The end of the input.
    pub fn finish(&mut self) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(head) = self.head.take() {
            out.extend(self.feed(&head));
        }
        if self.format.is_none() && !self.pending.is_empty() {
            // Whitespace only: read as SSE, whose line ends it checks.
            self.format = Some(Format::Sse);
            let pending = std::mem::take(&mut self.pending);
            out.extend(self.feed(&pending));
        }
        if !self.line.is_empty() || self.skipping {
            let line = std::mem::take(&mut self.line);
            let too_long = std::mem::replace(&mut self.skipping, false);
            self.line_done(&line, too_long, &mut out);
        }
        if self.format == Some(Format::Sse) && (self.has_data || self.frame_too_large) {
            out.push(Finding {
                rule: "framing.unterminated",
                index: Some(self.checker.events() + 1),
                event: None,
                message: "the stream ends inside a frame: its data lines have no blank line after them".into(),
            });
            // The official client still reads the trailing frame: check its event too.
            self.dispatch(&mut out);
        }
        out.extend(self.checker.finish());
        out
    }
}

/// Checks a whole input at once.
pub fn check_bytes(input: &[u8], format: Option<Format>, opts: Options) -> Vec<Finding> {
    let mut s = Stream::new(format, opts);
    let mut out = s.feed(input);
    out.extend(s.finish());
    out
}

/// Checks events already parsed (a test's, or a producer's in memory).
pub fn check_events(events: &[Value], opts: Options) -> Vec<Finding> {
    let mut c = Checker::new(opts);
    let mut out: Vec<Finding> = events.iter().flat_map(|e| c.event(e)).collect();
    out.extend(c.finish());
    out
}
