//! What every binary shares: exit codes, the `<bin>: <where>: <what>` error
//! form, quiet exit on a closed pipe, and the line loop over bytes.
//!
//! The exit codes are the table in `spec/exit-codes.md`; a test keeps the two
//! in step.

use std::io::{self, Write};
use std::process::ExitCode;

/// Exit codes shared by all binaries (see `spec/exit-codes.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// The run completed but found what it was asked to flag: input lines
    /// that were unusable (the filters: every usable line still written),
    /// a run not found or not removed (`runs`), or (verdict-check) a status
    /// other than expected.
    Flagged = 1,
    /// Usage error: a bad flag or argument; nothing was read or written.
    Usage = 2,
    /// Input or output failed: a file could not be opened or read, a write failed.
    Io = 3,
}

impl Exit {
    pub const ALL: [Exit; 4] = [Exit::Ok, Exit::Flagged, Exit::Usage, Exit::Io];

    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// Why a long-running binary (the server, the supervisor) could not start:
/// a usage error (exit 2) or an I/O failure (exit 3).
#[derive(Debug)]
pub enum StartError {
    Usage(String),
    Io(String),
}

impl StartError {
    /// Reports the error as `<bin>: <what>` and gives its exit code.
    pub fn exit(self, bin: &str) -> ExitCode {
        let (code, m) = match self {
            StartError::Usage(m) => (Exit::Usage, m),
            StartError::Io(m) => (Exit::Io, m),
        };
        report(bin, m);
        code.into()
    }
}

/// Ends the process quietly (status 0, as for any closed pipe) as soon as
/// standard output's reader is gone, also while the process waits for
/// something to happen: a follow (`runs watch`, `normalize-events
/// --follow`) writes only when there is news, so without this `runs watch |
/// head -1` would live on until the next event, or for ever. A thread
/// waits in `poll` for the error or hang-up the kernel reports on a pipe
/// or a unix socket whose reader closed (a file or a terminal never reports
/// one). A TCP peer's close is only its end of sending (`POLLRDHUP`, as a
/// half-close that still reads looks): not taken for a reader gone, so
/// there the close is noticed at the next write, as by every other filter.
pub fn exit_when_stdout_closes() {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    std::thread::spawn(|| {
        let out = io::stdout();
        loop {
            let mut fds = [PollFd::new(out.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {
                    let closed = PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL;
                    if fds[0].revents().is_some_and(|r| r.intersects(closed)) {
                        std::process::exit(0);
                    }
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    });
}

/// True when an error chain bottoms out in a closed downstream pipe: the
/// reader left, which for a filter is a normal end, not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
}

/// A failed write to stdout, said as `stdout: <what>` (the `<where>` of
/// `<bin>: <where>: <what>`); its kind is the write's, so a closed pipe is
/// still one ([`is_broken_pipe`]).
#[derive(Debug)]
pub struct OnStdout(pub io::Error);

impl std::fmt::Display for OnStdout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stdout: {}", self.0)
    }
}

impl std::error::Error for OnStdout {}

impl OnStdout {
    /// Whether `e` is a failed write to stdout ([`Stdout`]'s).
    pub fn is(e: &io::Error) -> bool {
        e.get_ref().is_some_and(|i| i.is::<OnStdout>())
    }
}

/// A writer to stdout whose errors say so ([`OnStdout`]).
pub struct Stdout<W: Write>(pub W);

impl<W: Write> Stdout<W> {
    fn said(e: io::Error) -> io::Error {
        if OnStdout::is(&e) {
            return e;
        }
        io::Error::new(e.kind(), OnStdout(e))
    }
}

impl<W: Write> Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(Self::said)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(Self::said)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(Self::said)
    }
}

/// A usage error the binary found itself (a value clap took, out of its
/// range; an id outside the strict set): said as clap's are, `<bin>:
/// usage: <what>`, so every exit 2 reads alike.
pub fn usage(bin: &str, msg: impl std::fmt::Display) -> Exit {
    report(bin, format!("usage: {msg}"));
    Exit::Usage
}

/// Prints `<bin>: <msg>` on stderr as one line of text
/// ([`super::printable`]): messages quote what they refuse (an input line's
/// unknown key, a file's name), and an agent or a caller who chose that text
/// could otherwise forge a line of the report or drive the reader's
/// terminal. Stderr failures are ignored: there is nowhere left to report them.
pub fn report(bin: &str, msg: impl std::fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "{bin}: {}", super::printable(&msg.to_string()));
}

/// Turns the result of a binary's `run` into its exit code: a broken pipe is a
/// quiet success, any other error is reported with its whole chain.
pub fn finish(bin: &str, r: anyhow::Result<Exit>) -> ExitCode {
    match r {
        Ok(e) => e.into(),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            report(bin, format!("{e:#}"));
            Exit::Io.into()
        }
    }
}

/// Handles clap's outcome: `--help`/`--version` print and exit 0 before any
/// side effect; a usage error is said as every other error is, `<bin>:
/// usage: <what>` (in a pipeline of filters, which one failed), with
/// clap's tip and usage lines after it, and exits 2.
pub fn parse_args<T: clap::Parser>() -> Result<T, ExitCode> {
    use clap::error::ErrorKind;
    T::try_parse().map_err(|e| match e.kind() {
        // Asked for: on stdout, as clap prints them.
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => match e.print() {
            // A reader that left (`| head -1`) had what it wanted.
            Err(w) if w.kind() != io::ErrorKind::BrokenPipe => {
                report(T::command().get_name(), OnStdout(w));
                Exit::Io.into()
            }
            _ => ExitCode::SUCCESS,
        },
        _ => {
            let _ = write!(io::stderr().lock(), "{}", usage_text(&T::command(), &e));
            Exit::Usage.into()
        }
    })
}

/// What a usage error says on stderr: `<bin>: usage: <what>` and clap's
/// tip and usage lines (a bare command that needs more: its help).
fn usage_text(cmd: &clap::Command, e: &clap::Error) -> String {
    let text = e.render().to_string();
    match (e.kind(), text.strip_prefix("error: ")) {
        (clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand, _) | (_, None) => text,
        (_, Some(what)) => format!("{}: usage: {what}", cmd.get_name()),
    }
}

/// Where an input line came from, for error messages (`stdin:12`, `run.log:12`).
pub fn source_name(path: Option<&std::path::Path>) -> String {
    match path {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdin".to_string(),
    }
}

#[cfg(test)]
mod tests {
    /// A reported message is one line, its control characters escaped: an
    /// input line's unknown key cannot forge another line or drive a terminal.
    #[test]
    fn a_report_is_one_line_with_its_control_characters_escaped() {
        assert_eq!(crate::util::printable("plain: \"x\" é"), "plain: \"x\" é");
        let forged = "unknown variant `x\u{1b}[2J\nrunwire-session: input:7: forged\u{202e}`";
        let said = crate::util::printable(forged);
        assert!(!said.chars().any(char::is_control), "{said}");
        assert_eq!(said, "unknown variant `x\\u{1b}[2J\\nrunwire-session: input:7: forged\\u{202e}`");
    }
}
