//! The ground floor: helpers every layer may use and that use nothing of
//! the crate above them (a line reader, hashing, clocks, the arrival order
//! of files, process identity, the file watcher, the pipe stages' shell,
//! the binaries' shared command-line conventions, finding a program on
//! `PATH`).

pub mod arrival;
pub mod bounded;
pub mod cli;
pub mod hash;
pub mod lenient;
pub mod lines;
pub mod origin;
pub mod pipe;
pub mod procid;
pub mod time;
pub mod watch;

/// `s` as a terminal shows it as text, on one line: control characters
/// (C0, DEL and C1: a newline or bare CR that forges or writes over a line,
/// the escape sequences that set a title or clear the screen) and the
/// bidirectional marks that reorder how a line reads are escaped
/// (`\n`, `\r`, `\u{1b}`, `\u{202e}`). The one rule for text that comes
/// from outside (an agent's files, a caller's input) on its way to a
/// terminal: the `runs list` table and every binary's error report.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let odd = |c: char| {
        c.is_control()
            || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(odd) {
        return std::borrow::Cow::Borrowed(s);
    }
    s.chars().map(|c| if odd(c) { c.escape_default().to_string() } else { c.to_string() }).collect::<String>().into()
}

/// The program a command names, as `execvp` would find it: `name` itself when
/// it has a slash, else the first executable `name` in a `PATH` directory;
/// `None` when there is none (or `name` is empty). The one lookup of a
/// program: the server's agent and sidecar checks, the doctor's and every
/// agent launch go through it, so they never disagree about whether a
/// program is there.
pub fn which(name: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let ok =
        |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.is_empty() {
        return None;
    }
    if name.as_encoded_bytes().contains(&b'/') {
        let p = std::path::PathBuf::from(name);
        return ok(&p).then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).map(|d| d.join(name)).find(|p| ok(p))
}
