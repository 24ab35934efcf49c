//! A task log's reader: its lines, normalizer and framing (events/v1 or
//! AG-UI), making batches of frames from each piece read, and noticing in
//! the journal when the task is over. One reader serves a [`Tap`]'s every
//! client, or one client catching up on its own ([`super::follow`]).
//!
//! [`Tap`]: super::follow::Tap

use super::task::{open_log, task_over, AguiId, JOURNAL_EVERY};
use crate::pipeline::encode::{Encoder, SseOptions};
use crate::pipeline::events::{Data, Event, Seq, Writer};
use crate::pipeline::normalize::{Adapter, Normalizer, Options};
use crate::pipeline::translate::{AguiEvent, TranslateOptions, Translator};
use crate::runs::view::Loaded;
use crate::util::lines::{Flow, Line, Lines, KEEP_CAPACITY};
use crate::util::pipe::MAX_LINE;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The log is read in pieces of up to this size: one batch of frames each.
pub(super) const READ: usize = 128 * 1024;

/// A reader's first piece: small, so a new client's first frame is not
/// held up by the normalizing of a whole piece (the pieces then double).
const FIRST_READ: usize = 16 * 1024;

/// Frames made from one read of the log, shared by every client.
pub(super) struct Batch {
    /// The frames' SSE text, one after another.
    pub(super) text: Vec<u8>,
    /// Each frame's id, source seq, and end in `text`.
    pub(super) frames: Vec<(AguiId, Seq, usize)>,
    /// The session id known after these frames (for a drop notice).
    pub(super) session: Option<String>,
}

impl Batch {
    pub(super) fn new() -> Batch {
        Batch { text: Vec::new(), frames: Vec::new(), session: None }
    }

    pub(super) fn push(&mut self, id: AguiId, seq: Seq, frame: &[u8]) {
        self.text.extend_from_slice(frame);
        self.frames.push((id, seq, self.text.len()));
    }

    pub(super) fn last_id(&self) -> Option<AguiId> {
        self.frames.last().map(|f| f.0)
    }

    /// The first frame with an id past `after`.
    pub(super) fn first_after(&self, after: Option<AguiId>) -> usize {
        match after {
            None => 0,
            Some(a) => self.frames.partition_point(|f| f.0 <= a),
        }
    }

    pub(super) fn start_of(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.frames[i - 1].2
        }
    }
}

/// The events/v1 or AG-UI framing of a stream.
enum Framing {
    Events {
        writer: Writer,
        enc: Encoder,
    },
    /// One events/v1 event becomes zero or more AG-UI events, so each
    /// frame's `id:` is `<seq>/<k>`: the source event's seq and the frame's
    /// place among that event's frames. The translation is a pure function
    /// of the log, so a resumed stream translates from the start again and
    /// sends only the frames past the client's last id.
    Agui {
        tr: Box<Translator>,
        /// The last source event translated, and how many frames it made
        /// (the closing frames of `finish` continue its count).
        last: AguiId,
    },
}

/// The log's normalizer and framing, making batches.
pub(super) struct Tail {
    norm: Normalizer,
    framing: Framing,
    exited: bool,
    json: Vec<u8>,
    /// The log's arrival-time sidecar, when it has one.
    times: Option<crate::util::arrival::Reader>,
    /// Frames up to here are not made at all (a reader of its own resuming).
    pub(super) skip_through: Option<AguiId>,
    batch: Batch,
    /// The last frame id made or skipped.
    pub(super) last: Option<AguiId>,
}

impl Tail {
    fn line(&mut self, line: Line) -> Flow {
        let at = self.times.as_mut().and_then(|t| t.at(self.norm.lines() + 1));
        // The normalizer's own reading of a line over the cap, the same as
        // normalize-events' and the live run's.
        for ev in self.norm.push_line_at(line, at) {
            if matches!(ev.data, Data::Exit(_)) {
                self.exited = true;
            }
            self.event(&ev);
        }
        // One huge event's text is not kept for the rest of the stream.
        self.json.shrink_to(KEEP_CAPACITY);
        Flow::Continue
    }

    fn skip(&mut self, id: AguiId) -> bool {
        self.last = Some(id);
        self.skip_through.is_some_and(|a| id <= a)
    }

    fn event(&mut self, ev: &Event) {
        match &mut self.framing {
            Framing::Events { writer, enc } => {
                let id = AguiId { seq: ev.seq, k: 0 };
                self.last = Some(id);
                if self.skip_through.is_some_and(|a| id <= a) {
                    return;
                }
                self.json.clear();
                writer.write(ev, &mut self.json);
                let line = self.json.strip_suffix(b"\n").unwrap_or(&self.json);
                if let Ok(Some(f)) = enc.push(line) {
                    self.batch.push(id, ev.seq, f.as_bytes());
                }
            }
            Framing::Agui { tr, .. } => {
                let events = tr.push(ev);
                self.agui_frames(ev.seq, events);
            }
        }
    }

    fn agui_frames(&mut self, seq: Seq, events: Vec<AguiEvent>) {
        for a in events {
            let Framing::Agui { last, .. } = &mut self.framing else { return };
            if last.seq != seq {
                *last = AguiId { seq, k: 0 };
            }
            let id = *last;
            last.k += 1;
            if self.skip(id) {
                continue;
            }
            let frame = crate::pipeline::encode::frame(None, Some(&format!("{}/{}", id.seq, id.k)), &a.to_json());
            self.batch.push(id, seq, frame.as_bytes());
        }
    }

    /// The normalizer's and translator's last frames.
    pub(super) fn finish(&mut self) {
        for ev in self.norm.finish() {
            self.event(&ev);
        }
        if let Framing::Agui { tr, last } = &mut self.framing {
            let events = tr.finish();
            let seq = last.seq;
            self.agui_frames(seq, events);
        }
    }

    pub(super) fn take_batch(&mut self) -> Batch {
        let mut b = std::mem::replace(&mut self.batch, Batch::new());
        b.session = self.norm.session().map(str::to_string);
        b
    }
}

/// What a stream is of: the task's log, its adapter, run and task ids, the framing.
pub(super) struct Source<'a> {
    pub l: &'a Loaded,
    pub log: &'a Path,
    pub adapter: Adapter,
    pub run: &'a str,
    pub task: &'a str,
    pub agui: bool,
    pub journal_path: &'a Path,
}

/// A reader of the log: its file, lines, tail, and when it ends.
pub(super) struct Reader {
    pub(super) tail: Tail,
    file: File,
    lines: Lines,
    buf: Vec<u8>,
    /// The size of the next piece read.
    piece: usize,
    journal_path: PathBuf,
    task: String,
    journal_seen: Option<u64>,
    last_journal: Instant,
    /// The journal says the task is over: the log is read to its end once more, then ends.
    over: bool,
    ended: bool,
}

/// One step of a [`Reader`].
pub(super) enum Step {
    /// Frames made (possibly none: lines that made no event).
    Made(Batch),
    /// At the end of what the log holds now.
    Idle,
    /// The last frames: the stream ends after them.
    Ended(Batch),
}

impl Reader {
    /// A reader from the log's start, or `None` when it cannot be opened.
    pub(super) fn open(src: &Source, skip_through: Option<AguiId>) -> Option<Reader> {
        let file = open_log(src.l, src.log).ok().flatten()?;
        let tail = Tail::new(src, skip_through, Some(&file));
        Some(Reader {
            tail,
            file,
            lines: Lines::new(MAX_LINE),
            buf: vec![0; READ],
            piece: FIRST_READ,
            journal_path: src.journal_path.to_path_buf(),
            task: src.task.to_string(),
            journal_seen: None,
            last_journal: Instant::now().checked_sub(JOURNAL_EVERY).unwrap_or_else(Instant::now),
            over: false,
            ended: false,
        })
    }
}

impl Tail {
    /// The tail of `src`'s log, opened as `file` (none: a task that wrote no log).
    pub(super) fn new(src: &Source, skip_through: Option<AguiId>, file: Option<&File>) -> Tail {
        let framing = if src.agui {
            Framing::Agui {
                tr: Box::new(Translator::new(TranslateOptions {
                    thread_id: Some(src.run.to_string()),
                    run_id: Some(src.task.to_string()),
                })),
                last: AguiId { seq: Seq { line: 0, sub: 0 }, k: 0 },
            }
        } else {
            Framing::Events {
                writer: Writer::default(),
                enc: Encoder::new(SseOptions { id_from: Some("seq".into()), after: None }),
            }
        };
        let mut norm = Normalizer::new(
            src.adapter,
            Options { run: Some(src.run.to_string()), task: Some(src.task.to_string()), ..Options::default() },
        );
        let mut times = None;
        if let Some(file) = file {
            // Timed as every reader of a file times its lines (`Normalizer::push_at`, `crate::util::arrival`).
            norm.for_file(crate::util::arrival::file_time(file));
            let at = open_log(src.l, &crate::util::arrival::sidecar_path(src.log)).ok().flatten();
            times = at.and_then(crate::util::arrival::Reader::from_file);
        }
        Tail { norm, framing, exited: false, json: Vec::new(), times, skip_through, batch: Batch::new(), last: None }
    }
}

impl Reader {
    /// Reads what the log holds now (one piece), or looks at the journal
    /// at its end (`journal_gen`: the journal's watch, when it has one).
    pub(super) fn step(&mut self, journal_gen: Option<u64>) -> io::Result<Step> {
        if self.ended {
            return Ok(Step::Ended(Batch::new()));
        }
        let piece = self.piece;
        self.piece = (piece * 2).min(READ);
        let n = loop {
            match self.file.read(&mut self.buf[..piece]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        if n > 0 {
            let tail = &mut self.tail;
            let mut rest = &self.buf[..n];
            // An exit event ends the stream: what follows it is not read.
            while !rest.is_empty() && !tail.exited {
                let (used, _) = self.lines.push(rest, |l| {
                    tail.line(l);
                    if tail.exited {
                        Flow::Stop
                    } else {
                        Flow::Continue
                    }
                });
                rest = &rest[used..];
            }
            if self.tail.exited {
                return Ok(self.end());
            }
            return Ok(Step::Made(self.tail.take_batch()));
        }
        if self.over {
            // The exit is journaled and the log was read to its end once
            // more: a final line without a newline is still a line.
            let tail = &mut self.tail;
            self.lines.finish(|l| tail.line(l));
            return Ok(self.end());
        }
        let due = match journal_gen {
            Some(g) => self.journal_seen != Some(g),
            None => self.last_journal.elapsed() >= JOURNAL_EVERY,
        };
        if due {
            self.last_journal = Instant::now();
            self.journal_seen = journal_gen;
            if task_over(&self.journal_path, &self.task) {
                self.over = true;
                return self.step(journal_gen);
            }
        }
        Ok(Step::Idle)
    }

    /// The stream's end: the normalizer's and translator's last frames.
    pub(super) fn end(&mut self) -> Step {
        self.ended = true;
        self.tail.finish();
        Step::Ended(self.tail.take_batch())
    }
}

impl AsRef<[u8]> for Batch {
    fn as_ref(&self) -> &[u8] {
        &self.text
    }
}
