//! The crate's one bounded line reader, and what it does with a line over
//! its cap: skim it.
//!
//! [`Lines`] assembles lines from the chunks a stream is read in (a pipe, a
//! followed file): whole lines inside a chunk are handed over in place, at
//! most `cap` bytes of one line are ever held. A line over the cap is not
//! dropped: it is fed, as it streams past, to a [`Skim`], a JSON scanner
//! with bounded memory that keeps the line's structure and short fields
//! (types, ids, names, flags) and cuts every long string to
//! [`MAX_OUTPUT`]. What it makes is a
//! valid JSON object, the original with its long strings cut, headed by one
//! member naming each cut ([`CUT_KEY`]); the normalizer reads such a line
//! as the original and marks the tool result that held a cut string
//! `truncated` with its original size. So a 5 MB tool result still closes
//! its call, with the right id, in every reader. A line that is not a JSON
//! object (or is broken) is reported as before: its head and its size.
//!
//! [`read_line`] is the same for a reader that pulls (`BufRead`), one line
//! per call.
//!
//! [`read_capped`] is the plain bounded reader, for lines that are requests
//! rather than an agent's output (a control socket's one request or reply,
//! session input, a log re-read line by line): a line over the cap is not
//! skimmed but reported as [`Capped::TooLong`], with its first `cap` bytes,
//! and the caller says whether the rest of it is skipped ([`Rest::Skip`],
//! to read the next line) or left unread ([`Rest::Leave`]: a socket that
//! carries one line is not read past the cap).

use std::io::{self, BufRead};

/// The longest line a filter (and a task stream) reads whole: 4 MiB. A
/// longer line is skimmed as it streams past, never held, and reported with
/// its size ([`Line::TooLong`]), so a filter's memory stays bounded whatever
/// its input (`normalize-events` peaks near 32 MB on a line just under it).
///
/// The pipeline's one line cap: every agent line is normalized through it,
/// live or replayed. A reader that holds longer lines whole (a session's or
/// a server run's agent lines, up to 16 MiB, recorded as they are) hands
/// each to [`capped`] before it is normalized, so the same line gives the
/// same events live and read back from its record.
pub const MAX_LINE: usize = 4 << 20;

/// `line` (one line held whole, without its LF) as a [`Lines`] capped at
/// [`MAX_LINE`] hands it over: itself when it fits, else skimmed.
pub fn capped<R>(line: &[u8], f: impl FnOnce(Line<'_>) -> R) -> R {
    if line.len() <= MAX_LINE {
        return f(Line::Whole(line));
    }
    let mut f = Some(f);
    let mut out = None;
    let mut lines = Lines::new(MAX_LINE);
    let mut each = |l: Line<'_>| {
        if let Some(f) = f.take() {
            out = Some(f(l));
        }
        Flow::Stop
    };
    lines.push(line, &mut each);
    lines.finish(&mut each);
    out.expect("a line over the cap is handed over at its end")
}

/// The most bytes of one string the pipeline keeps: a skimmed line's long
/// strings are cut to it here, and the normalizer cuts each tool output to
/// it (`normalize::redact` uses this one value).
pub const MAX_OUTPUT: usize = 64 * 1024;

/// How much of an over-long line is kept to show in its report.
pub const TOO_LONG_HEAD: usize = 4096;

/// The most a skimmed line holds: its structure and short fields, and long
/// strings cut to [`MAX_OUTPUT`] each, up to this in all; past it, the
/// rest of each array or object is left out (a value already named by its
/// key is `null`).
pub const SKIM_BUDGET: usize = 1 << 20;

/// Deeper containers than this are left out of a skimmed line (`null`):
/// serde_json refuses nesting past 128.
const MAX_DEPTH: usize = 100;

/// The first member of a skimmed line: `[SIZE, CAP, LEFT_OUT, CUTS]`: the
/// line's size and the cap it went over, whether members were left out
/// (past [`SKIM_BUDGET`] or `MAX_DEPTH`), and `[SIZE, KEPT, "TAIL"]` for
/// each string cut, in order: its size in bytes (decoded), the bytes kept,
/// and the last characters kept (to find it again in what a dialect built
/// from it).
pub const CUT_KEY: &str = "runwire.cut";

/// Buffers that grew past this for one big line are given back after it.
pub const KEEP_CAPACITY: usize = 1 << 20;

/// One line as [`Lines`] hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A whole line, its LF (and a CR before it) stripped.
    Whole(&'a [u8]),
    /// A line over the cap: its first [`TOO_LONG_HEAD`] bytes, its whole
    /// size in bytes (without the LF), and its skimmed form when it is a
    /// JSON object.
    TooLong { head: &'a [u8], size: u64, skim: Option<&'a [u8]> },
}

impl Line<'_> {
    /// The report of an over-long line, the same in every filter.
    pub fn too_long_reason(size: u64) -> String {
        format!("line of {size} bytes is over the {MAX_LINE}-byte line cap; skipped")
    }

    /// The line as [`read_line`] hands it over: whole, skimmed, or (over
    /// the cap and not a JSON object) its head.
    pub fn kept(&self) -> &[u8] {
        match *self {
            Line::Whole(w) => w,
            Line::TooLong { skim: Some(s), .. } => s,
            Line::TooLong { head, .. } => head,
        }
    }
}

/// What the handler wants after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Lines from chunks: see the module's doc.
pub struct Lines {
    cap: usize,
    /// A line that straddles chunks, assembled (at most `cap` bytes).
    partial: Vec<u8>,
    /// Set while a line over the cap streams past.
    over: Option<Over>,
}

struct Over {
    size: u64,
    head: Vec<u8>,
    skim: Skim,
}

impl Lines {
    /// Lines of at most `cap` bytes read whole.
    pub fn new(cap: usize) -> Lines {
        Lines { cap, partial: Vec::new(), over: None }
    }

    /// Takes in `chunk`, calling `each` for every line it ends. Stops after a
    /// line for which `each` says [`Flow::Stop`]: returns how much of the
    /// chunk was taken (all of it otherwise) and the flow.
    pub fn push(&mut self, chunk: &[u8], mut each: impl FnMut(Line<'_>) -> Flow) -> (usize, Flow) {
        let mut start = 0;
        for i in memchr::memchr_iter(b'\n', chunk) {
            let flow = self.piece(&chunk[start..i], true, &mut each);
            start = i + 1;
            if flow == Flow::Stop {
                return (start, flow);
            }
        }
        self.piece(&chunk[start..], false, &mut each);
        (chunk.len(), Flow::Continue)
    }

    /// The last line, when the input ends without a newline.
    pub fn finish(&mut self, mut each: impl FnMut(Line<'_>) -> Flow) -> Flow {
        if !self.partial.is_empty() || self.over.is_some() {
            return self.piece(b"", true, &mut each);
        }
        Flow::Continue
    }

    /// True while a line is being assembled or skimmed.
    pub fn pending(&self) -> bool {
        !self.partial.is_empty() || self.over.is_some()
    }

    fn piece(&mut self, seg: &[u8], ends: bool, each: &mut impl FnMut(Line<'_>) -> Flow) -> Flow {
        if self.over.is_none() {
            // A CR ending the line does not count against the cap (held
            // before its LF arrives, it may be the last byte read).
            let cr = usize::from(seg.last().or(self.partial.last()) == Some(&b'\r'));
            if self.partial.len() + seg.len() <= self.cap + cr {
                if !ends {
                    assemble(&mut self.partial, seg, self.cap + 1);
                    return Flow::Continue;
                }
                if self.partial.is_empty() {
                    return each(Line::Whole(strip_cr(seg)));
                }
                self.partial.extend_from_slice(seg);
                let flow = each(Line::Whole(strip_cr(&self.partial)));
                self.partial.clear();
                self.partial.shrink_to(KEEP_CAPACITY);
                return flow;
            }
            // Over the cap: what is held goes to the skimmer (and counts), then only its head stays.
            let mut skim = Skim::default();
            skim.feed(&self.partial);
            let size = self.partial.len() as u64;
            let mut head = std::mem::take(&mut self.partial);
            head.truncate(TOO_LONG_HEAD);
            head.shrink_to_fit();
            self.over = Some(Over { size, head, skim });
        }
        let Some(o) = self.over.as_mut() else { return Flow::Continue };
        o.size += seg.len() as u64;
        let room = TOO_LONG_HEAD.saturating_sub(o.head.len()).min(seg.len());
        o.head.extend_from_slice(&seg[..room]);
        o.skim.feed(seg);
        if !ends {
            return Flow::Continue;
        }
        let Some(o) = self.over.take() else { return Flow::Continue };
        // The cap counts the line without its CR, as a whole line is handed over.
        let size = o.size - u64::from(seg.last() == Some(&b'\r'));
        let skim = o.skim.finish(size, self.cap);
        each(Line::TooLong { head: &o.head, size, skim: skim.as_deref() })
    }
}

/// Appends `more` to a line being assembled, growing it to at most `limit`
/// bytes (never the doubling past it a `Vec` would do).
fn assemble(pending: &mut Vec<u8>, more: &[u8], limit: usize) {
    let want = pending.len() + more.len();
    if want > pending.capacity() {
        let cap = (pending.capacity() * 2).clamp(want, limit.max(want));
        pending.reserve_exact(cap - pending.len());
    }
    pending.extend_from_slice(more);
}

fn strip_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// Reads one line of at most `cap` bytes into `buf` (without its line
/// ending); false at the end of input. A longer line is skimmed as it
/// streams past (see the module's doc): `buf` gets its skimmed form, or,
/// when it is not a JSON object, its first [`TOO_LONG_HEAD`] bytes. Memory
/// stays bounded by `cap` (plus the skim's [`SKIM_BUDGET`]) whatever the input.
pub fn read_line(r: &mut impl BufRead, lines: &mut Lines, buf: &mut Vec<u8>) -> io::Result<bool> {
    buf.clear();
    let got = std::cell::Cell::new(false);
    let mut take = |l: Line<'_>| {
        buf.extend_from_slice(l.kept());
        got.set(true);
        Flow::Stop
    };
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            lines.finish(&mut take);
            return Ok(got.get());
        }
        let (used, _) = lines.push(chunk, &mut take);
        r.consume(used);
        if got.get() {
            return Ok(true);
        }
    }
}

/// What [`read_capped`] read into its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capped {
    /// The end of input: no line.
    End,
    /// A whole line, its LF (and a CR before it) stripped.
    Line,
    /// The last line, which the input ended without a LF (a CR at its end stripped).
    Last,
    /// A line over the cap: the buffer holds its first `cap` bytes.
    TooLong,
}

/// What [`read_capped`] does with the rest of a line over its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// Reads past it, to the line's LF (or the end of input): the next call
    /// reads the next line.
    Skip,
    /// Reads no further than one byte past the cap: for an input that
    /// carries one line (a socket's request), never read whole; the reader
    /// is then somewhere in that line.
    Leave,
}

/// Reads one line of at most `cap` bytes into `buf`, without its LF (and a
/// CR before it, which does not count against the cap). Memory stays
/// bounded by `cap` whatever the input; see [`Capped`] and [`Rest`] for a
/// longer line.
pub fn read_capped(r: &mut impl BufRead, buf: &mut Vec<u8>, cap: usize, rest: Rest) -> io::Result<Capped> {
    buf.clear();
    // One byte past the cap is taken: it may be the CR before the LF.
    let limit = cap.saturating_add(1);
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if buf.is_empty() {
                return Ok(Capped::End);
            }
            return Ok(capped_end(buf, cap, Capped::Last));
        }
        if buf.len() == limit {
            // Full: the line ends here only if its last byte is the CR of a CR LF.
            if chunk[0] == b'\n' && buf.last() == Some(&b'\r') {
                r.consume(1);
                return Ok(capped_end(buf, cap, Capped::Line));
            }
            buf.truncate(cap);
            if rest == Rest::Skip {
                skip_line(r)?;
            }
            return Ok(Capped::TooLong);
        }
        let window = &chunk[..chunk.len().min(limit - buf.len())];
        match memchr::memchr(b'\n', window) {
            Some(i) => {
                buf.extend_from_slice(&window[..i]);
                r.consume(i + 1);
                return Ok(capped_end(buf, cap, Capped::Line));
            }
            None => {
                let n = window.len();
                buf.extend_from_slice(window);
                r.consume(n);
            }
        }
    }
}

/// A line read whole (`how`): its CR stripped, then measured.
fn capped_end(buf: &mut Vec<u8>, cap: usize, how: Capped) -> Capped {
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    if buf.len() > cap {
        buf.truncate(cap);
        return Capped::TooLong;
    }
    how
}

/// Consumes the rest of a line, through its LF or to the end of input.
fn skip_line(r: &mut impl BufRead) -> io::Result<()> {
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(());
        }
        match memchr::memchr(b'\n', chunk) {
            Some(i) => {
                r.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = chunk.len();
                r.consume(n);
            }
        }
    }
}

/// Where the scanner is in the JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the top-level value.
    Start,
    /// A value is due (after `:`, or `,` in an array).
    Value,
    /// A value or `]` (after `[`).
    ValueOrClose,
    /// A key or `}` (after `{`).
    KeyOrClose,
    /// A key (after `,` in an object).
    Key,
    Colon,
    /// `,` or the container's close (after a value).
    CommaOrClose,
    /// Inside a string.
    Str,
    /// Inside a number or literal.
    Scalar,
    /// After the top-level value.
    Done,
}

/// What is being left out of a skimmed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    /// The rest of the container that, closed, leaves this depth (its close is kept).
    Rest(usize),
    /// One object member's value at this depth (written as `null`).
    Value(usize),
}

/// Nesting past this is not a line worth skimming.
const MAX_NESTING: usize = 1000;

/// A streaming JSON scanner that keeps a JSON object's structure and short
/// fields and cuts its long strings, in bounded memory (see the module's doc).
pub struct Skim {
    at: At,
    bad: bool,
    /// The text kept, without the cut header.
    out: Vec<u8>,
    /// Open containers, `{` or `[`.
    stack: Vec<u8>,
    skip: Option<Skip>,
    /// A `,` read but not yet written: written when the next member is kept.
    comma_due: bool,
    /// The current string is a key.
    key: bool,
    str_keep: bool,
    str_start: usize,
    str_size: u64,
    str_cut: bool,
    /// Escape state: 0 none, 1 after `\`, 2..=5 reading `\u` hex digits.
    esc: u8,
    hex: u32,
    scalar_len: usize,
    /// The strings cut: (size, kept bytes, kept tail).
    cuts: Vec<(u64, u64, String)>,
    /// Members left out (past the budget or the depth).
    left_out: bool,
    object: bool,
}

impl Default for Skim {
    fn default() -> Skim {
        Skim {
            at: At::Start,
            bad: false,
            out: Vec::new(),
            stack: Vec::new(),
            skip: None,
            comma_due: false,
            key: false,
            str_keep: false,
            str_start: 0,
            str_size: 0,
            str_cut: false,
            esc: 0,
            hex: 0,
            scalar_len: 0,
            cuts: Vec::new(),
            left_out: false,
            object: false,
        }
    }
}

impl Skim {
    fn depth(&self) -> usize {
        self.stack.len()
    }

    fn keeping(&self) -> bool {
        self.skip.is_none()
    }

    /// Takes in more of the line.
    pub fn feed(&mut self, mut b: &[u8]) {
        while !b.is_empty() && !self.bad {
            if self.at == At::Str {
                b = self.string(b);
                continue;
            }
            let c = b[0];
            b = &b[1..];
            self.byte(c);
        }
    }

    /// The skimmed line: the cut header, then the object as kept; `None`
    /// when the line was not one whole JSON object.
    pub fn finish(self, size: u64, cap: usize) -> Option<Vec<u8>> {
        let done = self.at == At::Done || (self.at == At::Scalar && self.depth() == 0);
        if self.bad || !self.object || !done {
            return None;
        }
        let cuts = serde_json::to_string(&(size, cap, self.left_out, &self.cuts)).ok()?;
        let mut line = Vec::with_capacity(self.out.len() + cuts.len() + CUT_KEY.len() + 6);
        line.extend_from_slice(b"{\"");
        line.extend_from_slice(CUT_KEY.as_bytes());
        line.extend_from_slice(b"\":");
        line.extend_from_slice(cuts.as_bytes());
        // `{` of the object is out[0]; an empty object needs no comma.
        if self.out.len() > 2 {
            line.push(b',');
        }
        line.extend_from_slice(&self.out[1..]);
        Some(line)
    }

    fn emit(&mut self, c: u8) {
        if self.keeping() {
            self.out.push(c);
        }
    }

    /// A member (key or array element) or a value starts here: written,
    /// or left out when the skim is full or too deep.
    fn begin_value(&mut self, is_key: bool) {
        if !self.keeping() {
            return;
        }
        if self.out.len() >= SKIM_BUDGET || self.depth() >= MAX_DEPTH {
            self.left_out = true;
            if is_key || self.stack.last() == Some(&b'[') {
                // The rest of this container goes; its close is still written.
                self.skip = Some(Skip::Rest(self.depth() - 1));
                self.comma_due = false;
            } else {
                // Its key is written: the value becomes null.
                self.out.extend_from_slice(b"null");
                self.skip = Some(Skip::Value(self.depth()));
            }
            return;
        }
        if std::mem::take(&mut self.comma_due) {
            self.out.push(b',');
        }
    }

    /// A value ended at the current depth.
    fn end_value(&mut self) {
        if self.skip == Some(Skip::Value(self.depth())) {
            self.skip = None;
        }
        self.at = if self.depth() == 0 { At::Done } else { At::CommaOrClose };
    }

    fn byte(&mut self, c: u8) {
        if matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
            if self.at == At::Scalar {
                self.end_value();
            }
            return;
        }
        match self.at {
            At::Scalar => {
                if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.') {
                    self.scalar_len += 1;
                    // No number or literal is this long.
                    self.bad |= self.scalar_len > 1024;
                    self.emit(c);
                    return;
                }
                self.end_value();
                self.byte(c)
            }
            At::Start | At::Value | At::ValueOrClose => {
                if self.at == At::Start {
                    self.object = c == b'{';
                }
                if c == b']' && self.at == At::ValueOrClose {
                    return self.close(c);
                }
                self.value_start(c)
            }
            At::KeyOrClose | At::Key => match c {
                b'"' => {
                    self.begin_value(true);
                    self.start_string(true);
                }
                b'}' if self.at == At::KeyOrClose => self.close(c),
                _ => self.bad = true,
            },
            At::Colon if c == b':' => {
                self.emit(c);
                self.at = At::Value;
            }
            At::CommaOrClose => match (c, self.stack.last()) {
                (b',', Some(b'{')) => self.comma(At::Key),
                (b',', Some(b'[')) => self.comma(At::Value),
                (b'}', Some(b'{')) | (b']', Some(b'[')) => self.close(c),
                _ => self.bad = true,
            },
            At::Colon | At::Done | At::Str => self.bad = true,
        }
    }

    fn comma(&mut self, next: At) {
        if self.keeping() {
            self.comma_due = true;
        }
        self.at = next;
    }

    fn value_start(&mut self, c: u8) {
        match c {
            b'{' | b'[' => {
                self.begin_value(false);
                self.emit(c);
                self.stack.push(c);
                self.bad |= self.stack.len() > MAX_NESTING;
                self.at = if c == b'{' { At::KeyOrClose } else { At::ValueOrClose };
            }
            b'"' => {
                self.begin_value(false);
                self.start_string(false);
            }
            c if c.is_ascii_alphanumeric() || c == b'-' => {
                self.begin_value(false);
                self.at = At::Scalar;
                self.scalar_len = 1;
                self.emit(c);
            }
            _ => self.bad = true,
        }
    }

    fn close(&mut self, c: u8) {
        self.comma_due = false;
        self.stack.pop();
        match self.skip {
            Some(Skip::Rest(d)) if d == self.depth() => {
                self.skip = None;
                self.emit(c);
            }
            // A skipped value's own close is not written (its `null` was).
            Some(_) => {}
            None => self.emit(c),
        }
        self.end_value();
    }

    fn start_string(&mut self, key: bool) {
        self.at = At::Str;
        self.key = key;
        self.str_keep = self.keeping();
        self.str_start = self.out.len() + 1;
        self.str_size = 0;
        self.str_cut = false;
        self.esc = 0;
        if self.str_keep {
            self.out.push(b'"');
        }
    }

    /// Room left in the current string before it is cut.
    fn str_room(&self) -> usize {
        let kept = self.out.len() - self.str_start;
        MAX_OUTPUT.saturating_sub(kept).min(SKIM_BUDGET.saturating_sub(self.out.len()))
    }

    /// Scans string bytes; returns what follows the string's part in `b`.
    fn string<'b>(&mut self, b: &'b [u8]) -> &'b [u8] {
        let mut i = 0;
        while i < b.len() {
            if self.esc > 0 {
                self.escape_byte(b[i]);
                if self.keep_str_bytes() {
                    self.out.push(b[i]);
                }
                i += 1;
                continue;
            }
            // Plain bytes up to the next quote or backslash, in bulk.
            let end = memchr::memchr2(b'"', b'\\', &b[i..]).map_or(b.len(), |k| i + k);
            let plain = &b[i..end];
            if plain.iter().any(|&c| c < 0x20) {
                self.bad = true;
                return &[];
            }
            self.str_size += plain.len() as u64;
            if self.keep_str_bytes() {
                let room = self.str_room();
                if plain.len() <= room {
                    self.out.extend_from_slice(plain);
                } else {
                    let mut k = room;
                    // Cut on a character's boundary.
                    while k > 0 && (plain[k] & 0xC0) == 0x80 {
                        k -= 1;
                    }
                    self.out.extend_from_slice(&plain[..k]);
                    self.str_cut = true;
                }
            }
            i = end;
            if i == b.len() {
                break;
            }
            if b[i] == b'"' {
                self.end_string();
                return &b[i + 1..];
            }
            // A backslash: kept only with room for the longest escape (a surrogate pair).
            if self.keep_str_bytes() && self.str_room() < 12 {
                self.str_cut = true;
            }
            self.esc = 1;
            if self.keep_str_bytes() {
                self.out.push(b'\\');
            }
            i += 1;
        }
        &[]
    }

    fn keep_str_bytes(&self) -> bool {
        self.str_keep && !self.str_cut
    }

    fn escape_byte(&mut self, c: u8) {
        match self.esc {
            1 => match c {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                    self.str_size += 1;
                    self.esc = 0;
                }
                b'u' => {
                    self.esc = 2;
                    self.hex = 0;
                }
                _ => self.bad = true,
            },
            _ => {
                let Some(d) = (c as char).to_digit(16) else {
                    self.bad = true;
                    return;
                };
                self.hex = self.hex * 16 + d;
                if self.esc == 5 {
                    self.esc = 0;
                    // A high surrogate counts the pair's 4 bytes, its low half none.
                    self.str_size += match self.hex {
                        0..=0x7F => 1,
                        0x80..=0x7FF => 2,
                        0xD800..=0xDBFF => 4,
                        0xDC00..=0xDFFF => 0,
                        _ => 3,
                    };
                } else {
                    self.esc += 1;
                }
            }
        }
    }

    fn end_string(&mut self) {
        if self.str_keep {
            if self.str_cut {
                let kept = &self.out[self.str_start - 1..];
                let mut quoted = kept.to_vec();
                quoted.push(b'"');
                let text = std::str::from_utf8(&quoted).ok().and_then(|t| super::lenient::value(t).ok());
                let text = text.as_ref().and_then(|v| v.as_str()).unwrap_or("");
                let tail: String = {
                    let n = text.chars().rev().take(32).count();
                    let skip = text.chars().count() - n;
                    text.chars().skip(skip).collect()
                };
                self.cuts.push((self.str_size, text.len() as u64, tail));
            }
            self.out.push(b'"');
        }
        if self.key {
            self.at = At::Colon;
        } else {
            self.end_value();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line held whole is handed over as a reader capped at [`MAX_LINE`]
    /// hands it over: itself up to the cap, skimmed past it.
    #[test]
    fn a_line_held_whole_is_capped_as_a_reader_caps_it() {
        let fits = vec![b'a'; MAX_LINE];
        assert!(super::capped(&fits, |l| matches!(l, Line::Whole(w) if w.len() == MAX_LINE)));
        let big = format!(r#"{{"type":"user","id":"t1","text":"{}"}}"#, "w".repeat(MAX_LINE));
        let mut read = Vec::new();
        Lines::new(MAX_LINE).push(format!("{big}\n").as_bytes(), |l| {
            read.push(l.kept().to_vec());
            Flow::Continue
        });
        let held = super::capped(big.as_bytes(), |l| match l {
            Line::TooLong { size, skim: Some(s), .. } => (size, s.to_vec()),
            other => panic!("not skimmed: {:?}", other.kept().len()),
        });
        assert_eq!(held.0, big.len() as u64);
        assert_eq!(read, [held.1]);
    }

    /// Every line, read through chunks of `chunk` bytes.
    fn lines(input: &[u8], chunk: usize, cap: usize) -> Vec<String> {
        let mut b = Lines::new(cap);
        let mut out = Vec::new();
        let mut each = |l: Line| {
            out.push(match l {
                Line::Whole(l) => String::from_utf8_lossy(l).into_owned(),
                Line::TooLong { head, size, skim } => {
                    format!(
                        "too long {size} {} {}",
                        head.len(),
                        skim.map(|s| String::from_utf8_lossy(s).into_owned()).unwrap_or_default()
                    )
                }
            });
            Flow::Continue
        };
        for c in input.chunks(chunk) {
            b.push(c, &mut each);
        }
        b.finish(&mut each);
        assert!(b.partial.capacity() <= KEEP_CAPACITY.max(cap + 1));
        out
    }

    #[test]
    fn lines_are_assembled_across_chunks_and_capped() {
        for chunk in [1, 3, 1000] {
            assert_eq!(lines(b"a\nbc\r\n\nd", chunk, 10), ["a", "bc", "", "d"], "chunk {chunk}");
            assert_eq!(lines(b"0123456789\r\nz\n", chunk, 10), ["0123456789", "z"]);
            assert_eq!(lines(b"0123456789x\nz\n", chunk, 10), ["too long 11 11 ", "z"]);
            assert_eq!(lines(b"0123456789x", chunk, 10), ["too long 11 11 "]);
        }
    }

    #[test]
    fn read_line_pulls_one_line_a_call_and_skims_one_over_the_cap() {
        let big = format!("{{\"type\":\"user\",\"id\":\"k\",\"text\":\"{}\"}}", "w".repeat(3 * MAX_OUTPUT));
        let input = format!("a\r\n{big}\nnot json {}\nlast", "v".repeat(MAX_OUTPUT));
        let mut r = io::BufReader::with_capacity(1000, input.as_bytes());
        let mut lines = Lines::new(MAX_OUTPUT);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while read_line(&mut r, &mut lines, &mut buf).unwrap() {
            got.push(String::from_utf8(buf.clone()).unwrap());
        }
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], "a");
        let v: serde_json::Value = serde_json::from_str(&got[1]).unwrap();
        assert_eq!((v["id"].as_str(), v["text"].as_str().map(str::len)), (Some("k"), Some(MAX_OUTPUT)));
        assert_eq!(v["runwire.cut"][3][0][0], 3 * MAX_OUTPUT);
        assert_eq!(got[2].len(), TOO_LONG_HEAD, "not JSON: its head");
        assert_eq!(got[3], "last");
    }

    /// Every line `read_capped` reads, through a buffer of `chunk` bytes.
    fn capped(input: &[u8], chunk: usize, cap: usize, rest: Rest) -> (Vec<(Capped, String)>, usize) {
        let mut r = io::BufReader::with_capacity(chunk, input);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            let c = read_capped(&mut r, &mut buf, cap, rest).unwrap();
            assert!(buf.len() <= cap);
            if c == Capped::End {
                break;
            }
            got.push((c, String::from_utf8_lossy(&buf).into_owned()));
            if rest == Rest::Leave && c == Capped::TooLong {
                break;
            }
        }
        let left = r.buffer().len() + r.into_inner().len();
        (got, left)
    }

    #[test]
    fn read_capped_reports_a_line_over_the_cap_and_skips_or_leaves_the_rest() {
        use Capped::{Last, Line as L, TooLong};
        let s = |v: &[(Capped, &str)]| v.iter().map(|(c, t)| (*c, t.to_string())).collect::<Vec<_>>();
        for chunk in [1, 3, 1000] {
            let got = |input: &[u8], rest| capped(input, chunk, 10, rest);
            assert_eq!(got(b"a\r\nbc\n\nd", Rest::Skip).0, s(&[(L, "a"), (L, "bc"), (L, ""), (Last, "d")]));
            assert_eq!(got(b"0123456789\r\nz\r", Rest::Skip).0, s(&[(L, "0123456789"), (Last, "z")]));
            assert_eq!(got(b"0123456789\r", Rest::Skip).0, s(&[(Last, "0123456789")]));
            let over = s(&[(TooLong, "0123456789"), (L, "z")]);
            assert_eq!(got(b"0123456789x\nz\n", Rest::Skip).0, over, "chunk {chunk}");
            assert_eq!(got(b"0123456789xyz\nz\n", Rest::Skip).0, over);
            assert_eq!(got(b"0123456789\rx\nz\n", Rest::Skip).0, over);
            assert_eq!(got(b"0123456789xyz", Rest::Skip).0, s(&[(TooLong, "0123456789")]));
            // Left: nothing read past one byte over the cap.
            let (lines, left) = got(b"0123456789xyz\nz\n", Rest::Leave);
            assert_eq!((lines, left), (s(&[(TooLong, "0123456789")]), 5));
        }
    }

    fn skim(s: &str) -> Option<String> {
        let mut k = Skim::default();
        for c in s.as_bytes().chunks(7) {
            k.feed(c);
        }
        k.finish(s.len() as u64, 10).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn a_skim_keeps_the_structure_and_cuts_long_strings() {
        assert_eq!(
            skim(r#" {"a": [1, true, null, -2.5e3, "x\"y"], "b": {}, "c": []} "#).unwrap(),
            r#"{"runwire.cut":[58,10,false,[]],"a":[1,true,null,-2.5e3,"x\"y"],"b":{},"c":[]}"#
        );
        assert_eq!(skim("{}").unwrap(), r#"{"runwire.cut":[2,10,false,[]]}"#);
        let long = "é".repeat(MAX_OUTPUT);
        let line =
            format!(r#"{{"type":"user","content":[{{"tool_use_id":"t1","content":"{long}","is_error":false}}]}}"#);
        let got = skim(&line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v["runwire.cut"][3][0][0], 2 * MAX_OUTPUT);
        assert_eq!(v["runwire.cut"][3][0][1], MAX_OUTPUT);
        assert_eq!(v["content"][0]["tool_use_id"], "t1");
        assert_eq!(v["content"][0]["is_error"], false);
        assert_eq!(v["content"][0]["content"].as_str().unwrap().len(), MAX_OUTPUT);
        // Escapes are never cut in half, and count as what they decode to.
        let esc = "\\n".repeat(MAX_OUTPUT);
        let got = skim(&format!(r#"{{"s":"{esc}","id":"k"}}"#)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v["runwire.cut"][3][0][0], MAX_OUTPUT);
        assert_eq!(v["id"], "k");
    }

    #[test]
    fn a_skim_refuses_what_is_not_one_json_object() {
        for bad in ["[1]", "\"s\"", "{", "{\"a\":}", "{\"a\":1,}", "x{}", "{} {}", "{\"a\":[1,]}", "{\"a\" 1}"] {
            assert_eq!(skim(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_skim_stays_within_its_budget_however_many_members() {
        let mut line = String::from("{\"a\":[");
        for i in 0..300_000 {
            line.push_str(&format!("\"{i:08}\","));
        }
        line.push_str("0],\"last\":\"here\",\"big\":{\"x\":1}}");
        let got = skim(&line).unwrap();
        assert!(got.len() <= SKIM_BUDGET + 1024, "{}", got.len());
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert!(v["a"].as_array().unwrap().len() > 1000);
        assert_eq!(v["runwire.cut"][2], true, "members were left out");
        // Past the budget a member's value is null (its key is short and kept) or left out.
        assert!(v.get("big").is_none_or(|b| b.is_null()), "{}", v["big"]);
        let deep = |n| format!("{{\"d\":{}{}}}", "[".repeat(n), "]".repeat(n));
        let v: serde_json::Value = serde_json::from_str(&skim(&deep(200)).unwrap()).unwrap();
        assert!(v["d"].is_array());
        assert_eq!(skim(&deep(MAX_NESTING + 1)), None);
    }
}
