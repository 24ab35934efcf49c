//! A run's scratch directory (`$RUNWIRE_RUN_TMPDIR`): made by the run's
//! reaper (`super::reaper`) and removed by it when the run is over; removed
//! by the reaper's caller (`super::proc`) when the reaper itself was killed
//! by a signal, so that its own cleanup never ran: before the reaper is
//! reaped (or, not our child, before it is killed), while its pid cannot
//! name another reaper. A leaf: both use it.

use std::io;
use std::path::{Path, PathBuf};

/// The environment variable naming a run's scratch directory, which the
/// reaper makes (`$TMPDIR/runwire-run.<pid>.<n>`, mode 0700: [`prefix`]) and removes
/// when the run is over; the wrappers keep their temporary files there
/// (spec/WRAPPER-CONTRACT.md, "Timeout and stopping").
pub const RUN_TMPDIR_ENV: &str = "RUNWIRE_RUN_TMPDIR";

/// A run's scratch directory, removed with everything in it when dropped
/// (`None`: it could not be made; the wrapper then uses `$TMPDIR` itself).
pub(super) struct RunTmp(pub(super) Option<PathBuf>);

impl RunTmp {
    pub(super) fn make() -> RunTmp {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        for n in 0..16u32 {
            let d = base.join(format!("{}{}", prefix(std::process::id() as i32), nanos.wrapping_add(n)));
            match std::fs::DirBuilder::new().mode(0o700).create(&d) {
                Ok(()) => return RunTmp(Some(d)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(_) => break,
            }
        }
        RunTmp(None)
    }
}

impl Drop for RunTmp {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The start of the names of the scratch directories the reaper of pid
/// `reaper` makes.
pub fn prefix(reaper: i32) -> String {
    format!("runwire-run.{reaper}.")
}

/// Removes the scratch directories in `base` of the reaper of pid `reaper`,
/// which was killed by a signal and so removed nothing itself: called by
/// its caller before it reaps it (or, at exit or for a stale group, as it
/// SIGKILLs it).
pub fn remove_of(base: &Path, reaper: i32) {
    let p = prefix(reaper);
    for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
        if e.file_name().to_str().is_some_and(|n| n.starts_with(&p)) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sigkilled_reapers_directories_go_and_no_others() {
        let base = std::env::temp_dir().join(format!("rw-run-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for d in ["runwire-run.123.5/w", "runwire-run.123.9", "runwire-run.1234.6", "other.123.5"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("runwire-run.123.5/w/f"), "x").unwrap();
        remove_of(&base, 123);
        let mut left: Vec<String> =
            std::fs::read_dir(&base).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["other.123.5", "runwire-run.1234.6"]);
        let _ = std::fs::remove_dir_all(&base);
    }
}
