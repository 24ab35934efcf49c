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
