//! The HTTP layer's one streaming response: an SSE body on a non-blocking
//! socket with chunked framing on HTTP/1.1, a bounded queue of pieces
//! written with `writev` (frames shared by many clients are queued by
//! reference, never copied), keep-alive comments when idle, and the
//! progress check that lets a client go once it takes nothing for the
//! write timeout. `/agui`, task streams and the change feed all write
//! through it; what differs between them (what to do when the queue is
//! full, what to replay) stays with the caller.

use super::http::{client_gone, Progress, Request};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a waiting stream looks at its client (gone? taking nothing?).
pub const TICK: Duration = Duration::from_millis(500);

/// Bytes many clients send the same of (a batch of frames, one feed event).
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

enum Piece {
    /// A range of bytes shared with other clients.
    Shared(SharedBytes, usize, usize),
    Own(Vec<u8>),
}

impl Piece {
    fn bytes(&self) -> &[u8] {
        match self {
            Piece::Shared(b, from, to) => &(**b).as_ref()[*from..*to],
            Piece::Own(v) => v,
        }
    }
}

/// A streaming response body. Pushing only queues; [`Stream::flush`] writes
/// what the socket takes now, [`Stream::drain`] waits until all is taken.
pub struct Stream<'a> {
    stream: &'a mut TcpStream,
    chunked: bool,
    queue: VecDeque<Piece>,
    /// Bytes of the front piece already written.
    sent: usize,
    queued: usize,
    /// Bytes of the response head still queued in front (not body: not
    /// counted by [`Stream::queued`]).
    head: usize,
    /// The queue's bound: callers check [`Stream::has_room`] before pushing
    /// what they may drop; an empty queue takes any frame.
    pub cap: usize,
    last_write: Instant,
    last_peek: Instant,
    progress: Progress,
}

impl<'a> Stream<'a> {
    /// A body on `stream` whose head is already sent (or not needed).
    pub fn new(stream: &'a mut TcpStream, chunked: bool, cap: usize, write_timeout: Duration) -> Stream<'a> {
        // Non-blocking: a write never waits on the client; the progress check does.
        let _ = stream.set_nonblocking(true);
        let now = Instant::now();
        Stream {
            stream,
            chunked,
            queue: VecDeque::new(),
            sent: 0,
            queued: 0,
            head: 0,
            cap,
            last_write: now,
            last_peek: now,
            progress: Progress::new(write_timeout),
        }
    }

    /// Sends the `200 text/event-stream` head and returns the body.
    pub fn start(
        stream: &'a mut TcpStream,
        req: &Request,
        cors: &[(&'static str, String)],
        cap: usize,
        write_timeout: Duration,
    ) -> io::Result<Stream<'a>> {
        let mut s = Stream::held(stream, req, cors, cap, write_timeout);
        s.drain()?;
        Ok(s)
    }

    /// [`Stream::start`] with the head queued, not sent: it goes out in
    /// the first [`Stream::flush`], with the frames queued by then, in one
    /// write (a new client of a live task stream gets its head and first
    /// frames at once).
    pub fn held(
        stream: &'a mut TcpStream,
        req: &Request,
        cors: &[(&'static str, String)],
        cap: usize,
        write_timeout: Duration,
    ) -> Stream<'a> {
        let mut s = Stream::new(stream, req.http11, cap, write_timeout);
        let head = super::http::sse_head(req, cors).into_bytes();
        s.queued += head.len();
        s.head = head.len();
        s.queue.push_back(Piece::Own(head));
        s
    }

    /// The socket, for what is not body (a peek for the client's bytes).
    pub fn socket(&self) -> &TcpStream {
        self.stream
    }

    /// Bytes of body queued and not yet written.
    pub fn queued(&self) -> usize {
        self.queued - self.head
    }

    pub fn has_room(&self) -> bool {
        self.queued() < self.cap
    }

    /// How long since anything was written.
    pub fn idle_for(&self) -> Duration {
        self.last_write.elapsed()
    }

    fn push_piece(&mut self, p: Piece, len: usize) {
        if self.chunked {
            self.push_own(format!("{len:x}\r\n").into_bytes());
        }
        // No piece is empty (the chunked end is its size line and CRLF alone).
        if len > 0 {
            self.queued += len;
            self.queue.push_back(p);
        }
        if self.chunked {
            self.push_own(b"\r\n".to_vec());
        }
    }

    fn push_own(&mut self, v: Vec<u8>) {
        self.queued += v.len();
        self.queue.push_back(Piece::Own(v));
    }

    /// Queues one frame (or keep-alive) of its own, as one chunk.
    pub fn push(&mut self, frame: &[u8]) {
        if !frame.is_empty() {
            self.push_piece(Piece::Own(frame.to_vec()), frame.len());
        }
    }

    /// Queues `bytes[from..to]`, shared with other clients, as one chunk.
    pub fn push_shared(&mut self, bytes: SharedBytes, from: usize, to: usize) {
        if to > from {
            self.push_piece(Piece::Shared(bytes, from, to), to - from);
        }
    }

    /// Writes what the socket takes now; `Err` when the client is gone.
    pub fn flush(&mut self) -> io::Result<()> {
        while !self.queue.is_empty() {
            let mut slices = [IoSlice::new(&[]); 64];
            let mut k = 0;
            for (j, p) in self.queue.iter().take(slices.len()).enumerate() {
                let bytes = if j == 0 { &p.bytes()[self.sent..] } else { p.bytes() };
                slices[k] = IoSlice::new(bytes);
                k += 1;
            }
            let mut n = match self.stream.write_vectored(&slices[..k]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.progress.wrote(n);
            self.last_write = Instant::now();
            self.queued -= n;
            self.head -= n.min(self.head);
            while n > 0 {
                let Some(front) = self.queue.front() else { break };
                let left = front.bytes().len() - self.sent;
                if n >= left {
                    n -= left;
                    self.sent = 0;
                    self.queue.pop_front();
                } else {
                    self.sent += n;
                    n = 0;
                }
            }
        }
        if self.queue.is_empty() {
            // A frame larger than the bound (taken by an empty queue) is not kept.
            self.queue.shrink_to(64);
        }
        Ok(())
    }

    /// Sends what is queued, as long as the client takes it (see [`Progress`]).
    pub fn drain(&mut self) -> io::Result<()> {
        loop {
            self.flush()?;
            if self.queue.is_empty() {
                return Ok(());
            }
            self.progress.check(self.stream, true)?;
            self.wait_writable(Duration::from_millis(100));
        }
    }

    /// Waits (bounded) until the socket takes more.
    pub fn wait_writable(&self, timeout: Duration) {
        let mut fds = [PollFd::new(self.stream.as_fd(), PollFlags::POLLOUT)];
        let _ = poll(&mut fds, PollTimeout::try_from(timeout).unwrap_or(PollTimeout::ZERO));
    }

    /// `Err` when bytes wait for the client and it took none for the write timeout.
    pub fn check(&mut self) -> io::Result<()> {
        self.progress.check(self.stream, self.queued > 0)
    }

    /// Once a [`TICK`] (more often is free): `Err` when the client left or
    /// took nothing for the write timeout, and a keep-alive comment (sent
    /// now) when nothing was written for `keepalive`.
    pub fn heartbeat(&mut self, keepalive: Duration) -> io::Result<()> {
        if self.last_peek.elapsed() < TICK {
            return Ok(());
        }
        self.last_peek = Instant::now();
        if client_gone(self.stream) {
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        self.progress.check(self.stream, self.queued > 0)?;
        if self.queued == 0 && self.last_write.elapsed() >= keepalive {
            self.push(b": keep-alive\n\n");
            self.flush()?;
        }
        Ok(())
    }

    /// Ends the body (the chunked terminator) and sends everything queued.
    pub fn end(&mut self) -> io::Result<()> {
        if self.chunked {
            self.push_own(b"0\r\n\r\n".to_vec());
        }
        self.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (l.accept().unwrap().0, c)
    }

    #[test]
    fn chunks_frames_and_shares_bytes() {
        let (mut s, mut c) = pair();
        let shared: SharedBytes = Arc::new(b"data: a\n\ndata: b\n\n".to_vec());
        {
            let mut out = Stream::new(&mut s, true, 1024, Duration::from_secs(5));
            out.push(b"data: 0\n\n");
            out.push_shared(shared.clone(), 9, 18);
            out.push(b"");
            out.end().unwrap();
        }
        drop(s);
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        assert_eq!(got, "9\r\ndata: 0\n\n\r\n9\r\ndata: b\n\n\r\n0\r\n\r\n");
    }

    #[test]
    fn a_client_that_takes_nothing_is_let_go() {
        let (mut s, _c) = pair();
        let mut out = Stream::new(&mut s, false, usize::MAX, Duration::from_millis(300));
        let big = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            out.push(&big);
        }
        let t = Instant::now();
        let e = out.drain().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(t.elapsed() < Duration::from_secs(10));
    }
}
