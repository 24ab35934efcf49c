//! The line loop every filter binary runs: bytes in, records out, flushed as
//! soon as the input runs dry so a live pipeline never sits on output, but
//! without a syscall per record when input is plentiful.
//!
//! Also [`Follow`], a reader that waits on inotify at end of file instead of
//! polling, for `--follow` on a log that is still being written.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bad input lines reported one by one; past this, only their count.
pub const MAX_REPORTED: u64 = 100;

/// Input buffer: big enough that flushing when it runs dry is rare on a file.
const IN_BUF: usize = 256 * 1024;

pub use crate::util::lines::{Flow, Line, MAX_LINE, TOO_LONG_HEAD};

/// Where the line loop failed: reading the input (after `line` complete
/// lines), or writing the output. Callers name the input or `stdout` in
/// their message; the io::Error stays the source, so a closed pipe is still
/// recognised.
#[derive(Debug)]
pub enum DriveError {
    Read { line: u64, err: io::Error },
    Write(io::Error),
}

impl DriveError {
    /// `<source>:<line>: <what>` for a read, `stdout: <what>` for a write.
    pub fn named(self, source: &str) -> anyhow::Error {
        match self {
            DriveError::Read { line, err } => anyhow::Error::from(err).context(format!("{source}:{line}")),
            DriveError::Write(err) => anyhow::Error::from(err).context("stdout"),
        }
    }
}

/// Reads `input` line by line (LF, with an optional CR before it stripped),
/// calls `handle(line_no, line, out)` for each, and writes what the handler
/// appended to `out`. Output is flushed whenever the input buffer is empty,
/// i.e. before any read that could block, and at the end. A line over
/// [`MAX_LINE`] is handed over as an empty line (it keeps its number, so
/// line-derived ids stay right); use [`drive_lines`] to report it.
pub fn drive<R: Read, W: Write>(
    input: R,
    output: &mut W,
    mut handle: impl FnMut(u64, &[u8], &mut Vec<u8>) -> Flow,
) -> Result<(), DriveError> {
    drive_lines(input, output, |n, line, out| match line {
        Line::Whole(l) => handle(n, l, out),
        Line::TooLong { .. } => handle(n, b"", out),
    })
}

/// [`drive`], with lines over [`MAX_LINE`] handed over as [`Line::TooLong`]:
/// such a line is skimmed as it streams past ([`crate::util::lines`]) and only
/// its head is kept, so memory stays bounded whatever the input.
pub fn drive_lines<R: Read, W: Write>(
    input: R,
    output: &mut W,
    mut handle: impl FnMut(u64, Line<'_>, &mut Vec<u8>) -> Flow,
) -> Result<(), DriveError> {
    let mut reader = BufReader::with_capacity(IN_BUF, input);
    let mut lines = crate::util::lines::Lines::new(MAX_LINE);
    let mut out = Vec::with_capacity(64 * 1024);
    let mut n = 0u64;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(DriveError::Read { line: n + 1, err: e }),
        };
        let (used, flow) = if buf.is_empty() {
            (
                0,
                lines.finish(|l| {
                    n += 1;
                    handle(n, l, &mut out)
                }),
            )
        } else {
            lines.push(buf, |l| {
                n += 1;
                handle(n, l, &mut out)
            })
        };
        let at_end = used == 0;
        reader.consume(used);
        if !out.is_empty() {
            output.write_all(&out).map_err(DriveError::Write)?;
            out.clear();
            // One huge line's output is not kept allocated for the rest of the stream.
            out.shrink_to(crate::util::lines::KEEP_CAPACITY);
        }
        if flow == Flow::Stop || at_end {
            break;
        }
        // Flushed before any read that could block.
        if reader.buffer().is_empty() {
            output.flush().map_err(DriveError::Write)?;
        }
    }
    output.flush().map_err(DriveError::Write)
}

/// The loop of a filter whose stage can reject a line: `stage(line, out)`
/// appends its output or says what is wrong with the line, which is reported
/// as `<bin>: <source>:<line>: <what>` while the stream goes on (exit 1 at the
/// end); `finish(out)` appends what the stage emits at end of input. Blank
/// lines are skipped; a line over [`MAX_LINE`] is reported so, with its size.
pub fn filter(
    bin: &str,
    input: Option<&Path>,
    mut stage: impl FnMut(&[u8], &mut Vec<u8>) -> Result<(), String>,
    finish: impl FnOnce(&mut Vec<u8>),
) -> anyhow::Result<crate::util::cli::Exit> {
    use anyhow::Context;
    let source = crate::util::cli::source_name(input);
    let reader = open_input(input).with_context(|| source.clone())?;
    let stdout = io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut bad = 0u64;
    drive_lines(reader, &mut out, |lineno, line, buf| {
        let checked = match line {
            Line::Whole(l) if l.iter().all(u8::is_ascii_whitespace) => Ok(()),
            Line::Whole(l) => stage(l, buf),
            Line::TooLong { size, .. } => Err(Line::too_long_reason(size)),
        };
        if let Err(e) = checked {
            bad += 1;
            // Bounded: a stream of garbage must not become a flood on stderr.
            if bad <= MAX_REPORTED {
                crate::util::cli::report(bin, format!("{source}:{lineno}: {e}"));
            }
        }
        Flow::Continue
    })
    .map_err(|e| e.named(&source))?;
    if bad > MAX_REPORTED {
        crate::util::cli::report(
            bin,
            format!("{source}: {bad} bad lines in all; only the first {MAX_REPORTED} were reported"),
        );
    }
    let exit = if bad > 0 { crate::util::cli::Exit::Flagged } else { crate::util::cli::Exit::Ok };
    let mut tail = Vec::new();
    finish(&mut tail);
    out.write_all(&tail).and_then(|_| out.flush()).context("stdout")?;
    Ok(exit)
}

/// A file reader for `--follow`, like `tail -F`: at end of file it waits
/// on the process's watcher ([`crate::util::watch`]) until the file changes, and reports end of file only once
/// `done` is set or the file is gone. What happens to the path is checked
/// each time the reader is at the end of what it has:
///
/// - removed (or renamed away): what is left is read, then the end;
/// - replaced (another file renamed over the path): the old file is read to
///   its end, then the new one from its start;
/// - truncated (shorter than what was read): read again from its start.
///
/// Each is reported on stderr as `<bin>: <path>: <what>`. A replacement or
/// truncation starts a new generation ([`Follow::generation`]): the
/// caller's line count for the new content restarts there. A last line the
/// old content left without its newline is ended with one, so it never
/// runs into the new content's first line.
pub struct Follow {
    file: File,
    path: std::path::PathBuf,
    bin: &'static str,
    sub: crate::util::watch::Sub,
    done: Arc<AtomicBool>,
    gone: bool,
    /// The last byte handed out (to end a cut line at a switch).
    last: Option<u8>,
    newline_due: bool,
    /// Bumped when the first byte of new content is handed out.
    generation: Arc<std::sync::atomic::AtomicU64>,
    switch_due: bool,
}

/// What the followed path is now, compared with the open file.
enum PathNow {
    Same,
    Truncated,
    Replaced(File),
    Removed,
}

impl Follow {
    /// Watches before the first read, so no write between a read and the wait is missed.
    pub fn open(path: &Path, done: Arc<AtomicBool>, bin: &'static str) -> io::Result<Follow> {
        let sub = crate::util::watch::Hub::global()?.subscribe(path)?;
        let file = File::open(path)?;
        Ok(Follow {
            file,
            path: path.to_path_buf(),
            bin,
            sub,
            done,
            gone: false,
            last: None,
            newline_due: false,
            generation: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            switch_due: false,
        })
    }

    /// The content generation: 0 for the file first opened, one more for
    /// each replacement or truncation, counted when its first byte is read.
    pub fn generation(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.generation.clone()
    }

    fn path_now(&mut self) -> io::Result<PathNow> {
        use std::os::unix::fs::MetadataExt;
        let mine = self.file.metadata()?;
        let there = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(PathNow::Removed),
            Err(e) => return Err(e),
        };
        if (there.dev(), there.ino()) != (mine.dev(), mine.ino()) {
            // Watch the newcomer before reading it, so no write is missed.
            let sub = match crate::util::watch::Hub::global()?.subscribe(&self.path) {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(PathNow::Removed),
                Err(e) => return Err(e),
            };
            return match File::open(&self.path) {
                Ok(f) => {
                    self.sub = sub;
                    Ok(PathNow::Replaced(f))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(PathNow::Removed),
                Err(e) => Err(e),
            };
        }
        let pos = io::Seek::stream_position(&mut self.file)?;
        Ok(if mine.len() < pos { PathNow::Truncated } else { PathNow::Same })
    }

    fn report(&self, what: &str) {
        crate::util::cli::report(self.bin, format!("{}: {what}", self.path.display()));
    }

    /// New content follows: end a cut line first, count the generation
    /// with its first byte.
    fn switch(&mut self) {
        self.newline_due = self.last.is_some_and(|b| b != b'\n');
        self.last = None;
        self.switch_due = true;
    }
}

impl Read for Follow {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.newline_due && !buf.is_empty() {
                self.newline_due = false;
                buf[0] = b'\n';
                return Ok(1);
            }
            // Read the counter first: a write after it wakes the wait below.
            let seen = self.sub.generation();
            let n = self.file.read(buf)?;
            if n > 0 {
                if std::mem::take(&mut self.switch_due) {
                    self.generation.fetch_add(1, Ordering::SeqCst);
                }
                self.last = Some(buf[n - 1]);
                return Ok(n);
            }
            if self.gone || self.done.load(Ordering::Relaxed) {
                return Ok(0);
            }
            match self.path_now()? {
                PathNow::Same => {}
                PathNow::Truncated => {
                    self.report("truncated; reading it again from the start");
                    io::Seek::seek(&mut self.file, io::SeekFrom::Start(0))?;
                    self.switch();
                    continue;
                }
                PathNow::Replaced(f) => {
                    self.report("replaced; following the new file from its start");
                    self.file = f;
                    self.switch();
                    continue;
                }
                PathNow::Removed => {
                    self.report("removed; the follow ends");
                    // Read what is left once more, then end.
                    self.gone = true;
                    continue;
                }
            }
            // The timeout only bounds how late `done` is noticed.
            self.sub.wait(seen, std::time::Duration::from_millis(500));
        }
    }
}

/// Opens `path` for reading, or stdin for `None` / `-`.
pub fn open_input(path: Option<&Path>) -> io::Result<Box<dyn Read>> {
    match path {
        Some(p) if p.as_os_str() != "-" => Ok(Box::new(File::open(p)?)),
        _ => Ok(Box::new(io::stdin())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as handed over: whole, or too long (its head and size).
    type Got = (u64, Result<Vec<u8>, (Vec<u8>, u64)>);

    /// Every line `drive_lines` hands over, read through a reader that gives
    /// `chunk` bytes at a time (lines straddle reads).
    fn lines(input: &[u8], chunk: usize) -> Vec<Got> {
        struct Chunked<'a>(&'a [u8], usize);
        impl Read for Chunked<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut got = Vec::new();
        drive_lines(Chunked(input, chunk), &mut io::sink(), |n, l, _| {
            got.push((
                n,
                match l {
                    Line::Whole(w) => Ok(w.to_vec()),
                    Line::TooLong { head, size, .. } => Err((head.to_vec(), size)),
                },
            ));
            Flow::Continue
        })
        .unwrap();
        got
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_with_its_size_and_the_stream_goes_on() {
        let mut input = b"first\n".to_vec();
        input.extend(vec![b'x'; MAX_LINE + 10]);
        input.extend_from_slice(b"\r\nlast\n");
        for chunk in [7, 4096, IN_BUF + 3, 1 << 30] {
            let got = lines(&input, chunk);
            assert_eq!(got.len(), 3, "chunk {chunk}");
            assert_eq!(got[0], (1, Ok(b"first".to_vec())));
            match &got[1] {
                (2, Err((head, size))) => {
                    assert_eq!(*size, (MAX_LINE + 10) as u64, "chunk {chunk}");
                    assert_eq!(head.len(), TOO_LONG_HEAD);
                    assert!(head.iter().all(|&b| b == b'x'));
                }
                other => panic!("chunk {chunk}: {other:?}"),
            }
            assert_eq!(got[2], (3, Ok(b"last".to_vec())));
        }
    }

    #[test]
    fn a_line_of_exactly_the_cap_is_whole() {
        let mut input = vec![b'y'; MAX_LINE];
        input.extend_from_slice(b"\r\n");
        let got = lines(&input, 100_000);
        assert!(matches!(&got[..], [(1, Ok(l))] if l.len() == MAX_LINE));
    }

    #[test]
    fn an_unterminated_line_over_the_cap_at_the_end_is_reported_too() {
        let input = vec![b'z'; MAX_LINE + 1];
        let got = lines(&input, 65_536);
        assert!(matches!(&got[..], [(1, Err((_, size)))] if *size == (MAX_LINE + 1) as u64), "{:?}", got.len());
    }
}
