//! The line loop every filter binary runs: bytes in, records out, flushed as
//! soon as the input runs dry so a live pipeline never sits on output, but
//! without a syscall per record when input is plentiful.
//!
//! Also [`Follow`], a reader that waits on inotify at end of file instead of
//! polling, for `--follow` on a log that is still being written.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bad input lines reported one by one; past this, only their count.
pub const MAX_REPORTED: u64 = 100;

/// Input buffer: big enough that flushing when it runs dry is rare on a file.
const IN_BUF: usize = 256 * 1024;

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

/// What the handler wants after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Reads `input` line by line (LF, with an optional CR before it stripped),
/// calls `handle(line_no, line, out)` for each, and writes what the handler
/// appended to `out`. Output is flushed whenever the input buffer is empty,
/// i.e. before any read that could block, and at the end.
pub fn drive<R: Read, W: Write>(
    input: R,
    output: &mut W,
    mut handle: impl FnMut(u64, &[u8], &mut Vec<u8>) -> Flow,
) -> Result<(), DriveError> {
    let mut reader = BufReader::with_capacity(IN_BUF, input);
    // A line that straddles the buffer's end is assembled here; whole lines
    // are handled in place, without a copy.
    let mut pending: Vec<u8> = Vec::new();
    let mut out = Vec::with_capacity(64 * 1024);
    let mut n = 0u64;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(DriveError::Read { line: n + 1, err: e }),
        };
        if buf.is_empty() {
            if !pending.is_empty() {
                n += 1;
                handle(n, strip_cr(&pending), &mut out);
                output.write_all(&out).map_err(DriveError::Write)?;
            }
            break;
        }
        let (flow, used) = match memchr::memchr(b'\n', buf) {
            Some(i) => {
                n += 1;
                let flow = if pending.is_empty() {
                    handle(n, strip_cr(&buf[..i]), &mut out)
                } else {
                    pending.extend_from_slice(&buf[..i]);
                    let f = handle(n, strip_cr(&pending), &mut out);
                    pending.clear();
                    f
                };
                (flow, i + 1)
            }
            None => {
                pending.extend_from_slice(buf);
                (Flow::Continue, buf.len())
            }
        };
        reader.consume(used);
        if !out.is_empty() {
            output.write_all(&out).map_err(DriveError::Write)?;
            out.clear();
        }
        if flow == Flow::Stop {
            break;
        }
        if reader.buffer().is_empty() {
            output.flush().map_err(DriveError::Write)?;
        }
    }
    output.flush().map_err(DriveError::Write)
}

fn strip_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// The loop of a filter whose stage can reject a line: `stage(line, out)`
/// appends its output or says what is wrong with the line, which is reported
/// as `<bin>: <source>:<line>: <what>` while the stream goes on (exit 1 at the
/// end); `finish(out)` appends what the stage emits at end of input. Blank
/// lines are skipped.
pub fn filter(
    bin: &str,
    input: Option<&Path>,
    mut stage: impl FnMut(&[u8], &mut Vec<u8>) -> Result<(), String>,
    finish: impl FnOnce(&mut Vec<u8>),
) -> anyhow::Result<crate::cli::Exit> {
    use anyhow::Context;
    let source = crate::cli::source_name(input);
    let reader = open_input(input).with_context(|| source.clone())?;
    let stdout = io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut bad = 0u64;
    drive(reader, &mut out, |lineno, line, buf| {
        if !line.iter().all(u8::is_ascii_whitespace) {
            if let Err(e) = stage(line, buf) {
                bad += 1;
                // Bounded: a stream of garbage must not become a flood on stderr.
                if bad <= MAX_REPORTED {
                    crate::cli::report(bin, format!("{source}:{lineno}: {e}"));
                }
            }
        }
        Flow::Continue
    })
    .map_err(|e| e.named(&source))?;
    if bad > MAX_REPORTED {
        crate::cli::report(
            bin,
            format!("{source}: {bad} bad lines in all; only the first {MAX_REPORTED} were reported"),
        );
    }
    let exit = if bad > 0 { crate::cli::Exit::Flagged } else { crate::cli::Exit::Ok };
    let mut tail = Vec::new();
    finish(&mut tail);
    out.write_all(&tail).and_then(|_| out.flush()).context("stdout")?;
    Ok(exit)
}

/// What a follower of a growing file is woken by: writes, the writer
/// closing it, and the file going away (deleted, renamed, truncated).
pub const FILE_CHANGES: AddWatchFlags = AddWatchFlags::IN_MODIFY
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ATTRIB);

/// A file reader for `--follow`, like `tail -F`: at end of file it blocks
/// on inotify until the file changes, and reports end of file only once
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
    inotify: Inotify,
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
        let file = File::open(path)?;
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(io::Error::from)?;
        inotify.add_watch(path, FILE_CHANGES).map_err(io::Error::from)?;
        Ok(Follow {
            file,
            path: path.to_path_buf(),
            bin,
            inotify,
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
            return match File::open(&self.path) {
                Ok(f) => {
                    self.inotify.add_watch(&self.path, FILE_CHANGES).map_err(io::Error::from)?;
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
        crate::cli::report(self.bin, format!("{}: {what}", self.path.display()));
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
            match self.inotify.read_events() {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
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
