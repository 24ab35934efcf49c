//! Arrival times of a log's lines: the sidecar `<log>.at` beside a task log.
//!
//! The processes that see an agent's lines as they arrive (the supervisor,
//! the server's recorder for `POST /agui` runs) keep, for each line they
//! append to a log, the moment it arrived, without changing the log's bytes.
//! The sidecar is text, one entry a line: `<ordinal> <epoch ms>\n`, where
//! the ordinal is the 1-based number of the log line it times (the same
//! number as the events' `seq`). Entries are appended in increasing ordinal
//! order, each *before* the bytes that complete its line, so a reader that
//! sees a complete line finds its time. A reader tolerates a sidecar shorter
//! than the log (a line without an entry has no arrival time), a torn last
//! entry (ignored until complete) and a repeated ordinal (the first wins).
//!
//! `spec/LAYOUT.md` ("who writes what") names the file; the `ts` rule that
//! uses it is [`crate::pipeline::normalize::Normalizer::push_at`]'s.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The clock arrival times are read from: the wall clock, or `None` when
/// `SOURCE_DATE_EPOCH` pins time (a pinned clock is no arrival time; output
/// is then what a pipeline on stdin gives for the same lines).
pub fn clock() -> Option<crate::util::time::Clock> {
    match crate::util::time::Clock::from_env() {
        crate::util::time::Clock::Wall => Some(crate::util::time::Clock::Wall),
        crate::util::time::Clock::Fixed(_) => None,
    }
}

/// The `ts` of a file's lines before any line is timed: its modification
/// time (epoch ms), or `SOURCE_DATE_EPOCH` when set.
pub fn file_time(f: &File) -> i64 {
    if let crate::util::time::Clock::Fixed(ms) = crate::util::time::Clock::from_env() {
        return ms;
    }
    f.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The sidecar of `log`: the same path with `.at` appended.
pub fn sidecar_path(log: &Path) -> PathBuf {
    let mut s = log.as_os_str().to_owned();
    s.push(".at");
    PathBuf::from(s)
}

/// Appends entries to a sidecar.
#[derive(Debug)]
pub struct Writer {
    file: File,
    next: u64,
}

impl Writer {
    /// A new sidecar for a log being created afresh (line 1 next).
    pub fn create(log: &Path) -> io::Result<Writer> {
        let file = File::create(sidecar_path(log))?;
        Ok(Writer { file, next: 1 })
    }

    /// The sidecar of a log that is appended to: the next entry times the
    /// line after the log's last complete line (a torn last line of the log
    /// is continued by what is appended, so it is that line).
    pub fn append(log: &Path) -> io::Result<Writer> {
        let mut complete = 0u64;
        // Only a regular file is counted (a log that is a device, such as
        // /dev/full in a test, never ends).
        if let Ok(mut f) = File::open(log).and_then(|f| {
            if f.metadata()?.is_file() {
                Ok(f)
            } else {
                Err(io::ErrorKind::Unsupported.into())
            }
        }) {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                complete += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
            }
        }
        let path = sidecar_path(log);
        let mut file = OpenOptions::new().create(true).append(true).read(true).open(&path)?;
        // A torn entry (a writer killed mid-write) is ended and spoilt, so
        // it neither swallows the next one nor passes for a whole one.
        let len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"!\n")?;
            }
        }
        Ok(Writer { file, next: complete + 1 })
    }

    /// The next line has no arrival time (its ordinal is passed over).
    pub fn skip(&mut self) {
        self.next += 1;
    }

    /// Records that the next line arrived at `at_ms`; call it before
    /// writing the bytes that complete that line to the log.
    pub fn line(&mut self, at_ms: i64) -> io::Result<()> {
        let entry = format!("{} {}\n", self.next, at_ms);
        self.file.write_all(entry.as_bytes())?;
        self.next += 1;
        Ok(())
    }
}

/// Reads a sidecar alongside its log, line by line and in step with it.
#[derive(Debug)]
pub struct Reader {
    r: BufReader<File>,
    partial: Vec<u8>,
    /// The entry read but not yet used (its ordinal is ahead of the reader).
    ahead: Option<(u64, i64)>,
}

/// Longest sidecar entry read; anything longer is not an entry.
const MAX_ENTRY: usize = 64;

impl Reader {
    /// The sidecar of `log`, or `None` when it has none.
    pub fn open(log: &Path) -> Option<Reader> {
        Reader::from_file(File::open(sidecar_path(log)).ok()?)
    }

    /// A sidecar opened by the caller (beneath a run's directory, say);
    /// `None` unless it is a regular file.
    pub fn from_file(f: File) -> Option<Reader> {
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            return None;
        }
        Some(Reader { r: BufReader::with_capacity(16 * 1024, f), partial: Vec::new(), ahead: None })
    }

    fn next_entry(&mut self) -> Option<(u64, i64)> {
        loop {
            let buf = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            if buf.is_empty() {
                // A torn entry stays in `partial` until its newline arrives.
                return None;
            }
            let (chunk, used, end) = match memchr::memchr(b'\n', buf) {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            if self.partial.len() + chunk.len() <= MAX_ENTRY {
                self.partial.extend_from_slice(chunk);
            } else {
                self.partial.clear();
                self.partial.push(b'!');
            }
            self.r.consume(used);
            if end {
                let e = std::mem::take(&mut self.partial);
                if let Some(entry) = parse_entry(&e) {
                    return Some(entry);
                }
            }
        }
    }

    /// The arrival time of log line `line`; lines must be asked for in
    /// increasing order (skipping is fine).
    pub fn at(&mut self, line: u64) -> Option<i64> {
        loop {
            let (n, ms) = match self.ahead {
                Some(e) => e,
                None => self.next_entry()?,
            };
            self.ahead = None;
            if n == line {
                return Some(ms);
            }
            if n > line {
                self.ahead = Some((n, ms));
                return None;
            }
        }
    }
}

fn parse_entry(e: &[u8]) -> Option<(u64, i64)> {
    let s = std::str::from_utf8(e).ok()?;
    let (n, ms) = s.split_once(' ')?;
    Some((n.parse().ok()?, ms.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_in_step_and_a_short_or_torn_sidecar_is_tolerated() {
        let dir = std::env::temp_dir().join(format!("runwire-arrival-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("a.log");
        std::fs::write(&log, b"one\ntwo\n").unwrap();
        let mut w = Writer::create(&log).unwrap();
        w.line(10).unwrap();
        w.line(20).unwrap();
        // A later writer appends after a torn entry and the log's 2 lines.
        std::fs::OpenOptions::new().append(true).open(sidecar_path(&log)).unwrap().write_all(b"3 2").unwrap();
        let mut w = Writer::append(&log).unwrap();
        w.line(30).unwrap();
        let mut r = Reader::open(&log).unwrap();
        assert_eq!([r.at(1), r.at(2), r.at(3), r.at(4)], [Some(10), Some(20), Some(30), None]);
        let mut r = Reader::open(&log).unwrap();
        assert_eq!([r.at(2), r.at(3)], [Some(20), Some(30)]);
        assert!(Reader::open(&dir.join("none.log")).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
