//! The channel: one long-lived pipe pair between this server and its one
//! `runwire-cluster` child (its stdin and stdout). Frames both ways are
//! `[u32 BE length of the rest][u32 BE length of the head][head: JSON][data]`,
//! at most MAX_FRAME bytes; every request and stream has an id, so any
//! number of them share the pipes. Nothing of a request, a query or a
//! credential is on any command line.

pub use crate::supervise::request::monotonic_ms;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const MAX_FRAME: usize = 4 * 1024 * 1024;
/// Frames queued for one stream at the server; a stream whose client does
/// not take them (queue full) is dropped, never blocking the others.
pub const STREAM_QUEUE: usize = 1024;

/// A frame's head. `op`: from the server `control`, `link`, `agui`,
/// `thread` (a thread's read; its id in data), `feed`, `cancel`, `ping`;
/// from the sidecar `took` (it read a request within its deadline and
/// forwards it), `answer` (status, body in data), `data` (a stream's
/// bytes), `end` (the stream is over; `error` says why when it is cut
/// short), `pong`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Head {
    pub op: String,
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The node's run id (without the hub's `<node>.`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// A control verb (spec/CLUSTER.md lists them; the sidecar checks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// The idempotency key (the client's `Idempotency-Key`; else the sidecar makes one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Who asks (this server's name, for now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// A hub's command or AG-UI run: whether the hub checked its caller's
    /// bearer token. A node whose own server needs a token takes neither
    /// from a hub that checks none (spec/CLUSTER.md, "No door weaker").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checked: bool,
    /// Milliseconds the command has left (never an absolute time: clocks differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_ms: Option<u64>,
    /// A request's deadline, in CLOCK_MONOTONIC milliseconds ([`monotonic_ms`]:
    /// the server and its sidecar share the machine's clock, as the
    /// supervisor socket's `deadline`). The sidecar refuses a request it
    /// reads past it (nothing is forwarded) and gives the node no more than
    /// what is left of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// A feed's query string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// A feed's resume point (the client's Last-Event-ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// A `link` request's token (`/a/<token>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A `link` request's method (`GET` or `POST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A `link` request's body's type; an answer's (a link's page is HTML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One frame's bytes.
pub fn encode(head: &Head, data: &[u8]) -> std::io::Result<Vec<u8>> {
    let h = serde_json::to_vec(head).map_err(std::io::Error::other)?;
    let len = 4 + h.len() + data.len();
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a frame of {len} bytes (at most {MAX_FRAME})"),
        ));
    }
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    Ok(out)
}

/// A frame's head and data from its bytes after the length (`rest`).
pub fn decode(rest: &[u8]) -> std::io::Result<(Head, Vec<u8>)> {
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
    let hl = rest.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let Some(hl) = hl.filter(|hl| 4 + hl <= rest.len()) else {
        return Err(bad(format!("a frame of {} bytes without its head", rest.len())));
    };
    let head = serde_json::from_slice(&rest[4..4 + hl]).map_err(|e| bad(format!("a frame's head: {e}")))?;
    Ok((head, rest[4 + hl..].to_vec()))
}

/// Reads one frame; `None` at the end of the pipe.
pub fn read_frame(r: &mut impl std::io::Read) -> std::io::Result<Option<(Head, Vec<u8>)>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut rest = vec![0u8; frame_len(len)?];
    r.read_exact(&mut rest)?;
    decode(&rest).map(Some)
}

/// A frame's length from its 4-byte prefix, refused over [`MAX_FRAME`]
/// before anything is allocated: the one check of both ends (the sidecar's
/// async reader calls it too).
pub fn frame_len(prefix: [u8; 4]) -> std::io::Result<usize> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {MAX_FRAME})"),
        ));
    }
    Ok(len)
}

/// What a stream of the channel receives.
pub(super) type Frame = (Head, Vec<u8>);

pub(super) struct Slot {
    pub(super) tx: std::sync::mpsc::SyncSender<Frame>,
    /// Set when the stream was dropped for not keeping up.
    pub(super) dropped: Arc<AtomicBool>,
}

/// The server's end of the channel (see above): the sidecar's stdin, and
/// the streams waiting for frames from its stdout.
#[derive(Default)]
pub(super) struct Channel {
    pub(super) writer: Mutex<Option<std::process::ChildStdin>>,
    /// The sidecar's pid (0: none), killed when it takes no frame for
    /// [`WRITE_WAIT`] or says nothing for [`SILENT_MS`] ([`Channel::stop_hung`]).
    pub(super) pid: std::sync::atomic::AtomicI32,
    pub(super) streams: Mutex<std::collections::HashMap<u64, Slot>>,
    pub(super) next: std::sync::atomic::AtomicU64,
    /// When the sidecar last said anything (a frame; it answers every
    /// `ping`), or was started: [`monotonic_ms`].
    pub(super) heard: AtomicU64,
    /// Set when the sidecar was killed for not answering: its thread starts
    /// the next one at once.
    pub(super) hung: AtomicBool,
}

/// One request or stream open on the channel; closing it (drop) tells the
/// sidecar when the stream is not over yet.
pub(super) struct Open {
    pub(super) id: u64,
    /// The sidecar the request was written to.
    pub(super) pid: i32,
    pub(super) rx: std::sync::mpsc::Receiver<Frame>,
    pub(super) dropped: Arc<AtomicBool>,
    pub(super) ended: bool,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(ch) = CHANNEL.get() {
            let was = ch.streams.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id).is_some();
            if was && !self.ended {
                let _ = ch.send(&Head { op: "cancel".into(), id: self.id, ..Default::default() }, &[]);
            }
        }
    }
}

impl Channel {
    pub(super) fn send(&self, head: &Head, data: &[u8]) -> std::io::Result<()> {
        let bytes = encode(head, data)?;
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pipe) = w.as_mut() else {
            return Err(std::io::Error::new(std::io::ErrorKind::NotConnected, "the cluster sidecar is not running"));
        };
        let r = write_within(pipe, &bytes, WRITE_WAIT);
        if let Err(e) = &r {
            // A frame may be cut: this channel is over. The sidecar is
            // stopped, and started again (with a new channel) by its thread.
            drop(w);
            self.stop_hung(self.pid.load(Ordering::SeqCst), &format!("took no frame: {e}"));
        }
        r
    }

    /// A hub's check of its sidecar, at each turn of its thread's wait: a
    /// `ping` every [`PING_EVERY`] (`pinged`: when the last went), and one
    /// that said nothing for [`SILENT_MS`] (stopped, hung) killed.
    pub(super) fn watch(&self, pinged: &mut Instant) {
        if pinged.elapsed() >= PING_EVERY {
            *pinged = Instant::now();
            let _ = self.send(&Head { op: "ping".into(), ..Default::default() }, &[]);
        }
        if !self.answering() {
            let quiet = SILENT_MS / 1000;
            let why = format!("answered nothing on its channel for {quiet} s (stopped or hung)");
            self.stop_hung(self.pid.load(Ordering::SeqCst), &why);
        }
    }

    /// Whether the sidecar answers: one runs and said something (a `pong`
    /// at least) within [`SILENT_MS`]. What a sidecar that does not answer
    /// wrote before (its nodes' liveness) is not current.
    pub(super) fn answering(&self) -> bool {
        self.pid.load(Ordering::SeqCst) > 0
            && monotonic_ms().saturating_sub(self.heard.load(Ordering::SeqCst)) < SILENT_MS
    }

    /// Kills sidecar `pid` (when it is still this channel's) that does not
    /// take or answer frames (`why`): SIGKILL, as it may be stopped; its
    /// pipe closed. Nothing of it acts any more; what it wrote before is
    /// still read, to the pipe's end. Its thread starts a new one at once.
    pub(super) fn stop_hung(&self, pid: i32, why: &str) {
        if pid <= 0 || self.pid.load(Ordering::SeqCst) != pid || self.hung.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.writer.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        crate::util::cli::report(
            crate::serve::options::BIN,
            format!("cluster: runwire-cluster (pid {pid}) {why}: killed, starting it again"),
        );
    }

    /// The first word of the sidecar on a request that carries a
    /// `deadline` ([`Head::deadline_ms`]) other than `took`: its answer
    /// (or whatever else it said first). `Err` the status and message to
    /// answer when it has none: 504 when it did not take the request by
    /// its deadline (it is then killed, so it never will: nothing is
    /// forwarded), 502 when it took it and then ended or said nothing for
    /// `running` (it may have run). `who` and `what` name the node and the
    /// request in the messages.
    pub(super) fn wait(
        &self,
        open: &mut Open,
        deadline: u64,
        running: Duration,
        who: &str,
        what: &str,
    ) -> Result<Frame, (u16, String)> {
        use std::sync::mpsc::RecvTimeoutError;
        let left = Duration::from_millis(deadline.saturating_sub(monotonic_ms()));
        // The sidecar says `took` as soon as it reads a request: a moment past the deadline for it to come.
        let mut until = Instant::now() + left + TOOK_SLACK;
        let (mut took, mut killed) = (false, false);
        loop {
            match open.rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok((h, _)) if h.op == "took" => {
                    took = true;
                    until = Instant::now() + running;
                }
                Ok(f) => return Ok(f),
                Err(RecvTimeoutError::Timeout) if !took && !killed => {
                    // Not taken by its deadline: stopped or hung. Killed, it
                    // forwards nothing later; a `took` it wrote before still comes.
                    self.stop_hung(open.pid, &format!("did not take a {what} by its deadline (stopped or hung)"));
                    killed = true;
                    until = Instant::now() + Duration::from_secs(5);
                }
                Err(e) if !took => {
                    // Gone or killed without a word: make sure it never reads the frame.
                    if e == RecvTimeoutError::Disconnected {
                        self.stop_hung(open.pid, &format!("ended its channel before it took a {what}"));
                    }
                    return Err((
                        504,
                        format!(
                            "{who}: the hub's cluster sidecar did not take the {what} by its deadline (stopped or \
                             hung; it is started again): it will not run"
                        ),
                    ));
                }
                Err(_) => {
                    return Err((
                        502,
                        format!(
                            "{who}: the hub's cluster sidecar took the {what} and ended or went silent without its \
                             answer: it may have run"
                        ),
                    ))
                }
            }
        }
    }

    /// Opens a request or stream: `head` (its id set here) and `data` sent.
    pub(super) fn open(&self, mut head: Head, data: &[u8]) -> std::io::Result<Open> {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        head.id = id;
        let (tx, rx) = std::sync::mpsc::sync_channel(STREAM_QUEUE);
        let dropped = Arc::new(AtomicBool::new(false));
        self.streams.lock().unwrap_or_else(|e| e.into_inner()).insert(id, Slot { tx, dropped: dropped.clone() });
        let open = Open { id, pid: self.pid.load(Ordering::SeqCst), rx, dropped, ended: false };
        self.send(&head, data)?;
        Ok(open)
    }

    /// Reads the sidecar's frames until its stdout ends, handing each to
    /// its stream without ever waiting: a stream whose queue is full is
    /// dropped (its client is told) and the sidecar told to stop it.
    pub(super) fn read(&self, out: impl std::io::Read) {
        let mut r = std::io::BufReader::with_capacity(256 * 1024, out);
        let pid = self.pid.load(Ordering::SeqCst);
        loop {
            let (head, data) = match read_frame(&mut r) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    // Its frames cannot be read: what it says next would be lost.
                    self.stop_hung(pid, &format!("wrote a frame that does not read ({e})"));
                    break;
                }
            };
            self.heard.store(monotonic_ms(), Ordering::SeqCst);
            let id = head.id;
            let last = head.op == "end";
            let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
            let Some(slot) = streams.get(&id) else { continue };
            match slot.tx.try_send((head, data)) {
                Ok(()) if last => {
                    streams.remove(&id);
                }
                Ok(()) => {}
                Err(std::sync::mpsc::TrySendError::Full(_)) => {
                    slot.dropped.store(true, Ordering::SeqCst);
                    streams.remove(&id);
                    drop(streams);
                    let _ = self.send(&Head { op: "cancel".into(), id, ..Default::default() }, &[]);
                }
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => {
                    streams.remove(&id);
                }
            }
        }
        // The sidecar is gone: every stream ends (its client is told by its relay).
        self.streams.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// How long a frame may wait for the sidecar to read it: one that does
/// not read (stopped, hung) never holds the server's threads longer.
pub(super) const WRITE_WAIT: Duration = Duration::from_secs(5);

/// How long a sidecar may say nothing (it answers each `ping` at once)
/// before it is judged stopped or hung, and killed.
pub(super) const SILENT_MS: u64 = 5000;

/// How often the server pings its sidecar.
pub(super) const PING_EVERY: Duration = Duration::from_secs(1);

/// How long past a request's deadline its `took` may take to arrive.
const TOOK_SLACK: Duration = Duration::from_secs(1);

/// Writes `bytes` to a non-blocking pipe, waiting while it is full, but
/// `TimedOut` once nothing was taken for `wait`.
pub(super) fn write_within(
    pipe: &mut (impl std::io::Write + std::os::fd::AsFd),
    bytes: &[u8],
    wait: Duration,
) -> std::io::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut off = 0;
    let mut last = std::time::Instant::now();
    while off < bytes.len() {
        match pipe.write(&bytes[off..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                off += n;
                last = std::time::Instant::now();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if last.elapsed() >= wait {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the cluster sidecar read nothing for {} s", wait.as_secs()),
                    ));
                }
                let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLOUT)];
                let _ = poll(&mut fds, PollTimeout::from(100u8));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The channel to this server's sidecar (set by [`start`]).
pub(super) static CHANNEL: std::sync::OnceLock<std::sync::Arc<Channel>> = std::sync::OnceLock::new();
