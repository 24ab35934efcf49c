//! Reading files a run's writers (and the agents they start) control,
//! safely: every reader of a runstate directory opens through here.
//!
//! - A file is opened relative to its run's directory and must resolve
//!   inside it: `openat2(RESOLVE_BENEATH)` where the kernel has it (a
//!   symlink that stays inside is followed, one that leaves is refused),
//!   else `O_NOFOLLOW` (no symlink followed at all). One plain name is
//!   tried first with `openat` and `O_NOFOLLOW`: the same outcome for any
//!   file that is not a symlink, with fewer checks.
//! - It is opened with `O_NONBLOCK` (a FIFO never blocks the open) and its
//!   type is checked with `fstat` after the open (no race with a rename):
//!   only regular files are read, so a FIFO, a device (`/dev/zero`) or a
//!   socket is refused, never read.
//! - Whole-file reads have a size bound; a file over it is refused.
//!
//! A refusal is an [`Unreadable`]: the file's name and why, which the views
//! show as the run's `reason` with the status `unreadable`.

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode, SFlag};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

/// Bound on a registry pointer (a few hundred bytes in practice).
pub const MAX_POINTER: u64 = 64 * 1024;
/// Bound on a plan.
pub const MAX_PLAN: u64 = 4 * 1024 * 1024;
/// Bound on a journal read whole (about 100,000 records).
pub const MAX_JOURNAL: u64 = 16 * 1024 * 1024;
/// Longest log line the listing's cost and token totals look at; a longer
/// line (a huge message or tool result: never a `turn_end`) is skipped, so
/// the totals read any log in bounded memory.
pub const MAX_TOTALS_LINE: usize = 1024 * 1024;

/// Why a file of a run cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The file, as named in the run's directory (or the path given).
    pub file: String,
    pub why: String,
    /// The file does not exist (`ENOENT`): for most readers simply absent.
    pub absent: bool,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.why)
    }
}

impl Unreadable {
    pub fn new(file: impl Into<String>, why: impl Into<String>) -> Unreadable {
        Unreadable { file: file.into(), why: why.into(), absent: false }
    }

    fn errno(file: String, e: Errno) -> Unreadable {
        Unreadable { absent: e == Errno::ENOENT, ..Unreadable::new(file, describe(e)) }
    }
}

/// `openat2` is not available (old kernel, or a seccomp filter refusing it):
/// fall back to `O_NOFOLLOW`, for good.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
/// `O_NOATIME` refused (files of another user): not tried again.
static NO_NOATIME: AtomicBool = AtomicBool::new(false);

/// Opens a directory (following symlinks: the runstate directory named by a
/// pointer is the trust anchor; what is read is checked beneath it).
pub fn open_dir(path: &Path) -> nix::Result<OwnedFd> {
    let fd = nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
    // SAFETY: `open` just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `rel` is a relative path of normal components only (no `..`,
/// no root, not empty): the only shape opened beneath a directory.
pub fn plain_relative(rel: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let b = rel.as_os_str().as_bytes();
    // One name, what the listing opens by the thousand: no component walk.
    if !b.is_empty() && !b.contains(&b'/') {
        return b != b"." && b != b"..";
    }
    rel.components().next().is_some() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

fn describe(errno: Errno) -> String {
    match errno {
        Errno::ENOENT => "no such file".into(),
        Errno::ELOOP => "a symbolic link (not followed)".into(),
        Errno::EXDEV => "resolves outside the run's directory (refused)".into(),
        Errno::EACCES | Errno::EPERM => "permission denied".into(),
        e => e.desc().to_lowercase(),
    }
}

/// What a file of this mode (`st_mode`) is, for the error refusing it.
pub(crate) fn kind(mode: nix::sys::stat::mode_t) -> &'static str {
    match SFlag::from_bits_truncate(mode) & SFlag::S_IFMT {
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFLNK => "a symbolic link",
        _ => "not a regular file",
    }
}

fn raw_open(dir: BorrowedFd, rel: &Path, flags: OFlag) -> nix::Result<i32> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    use std::os::unix::ffi::OsStrExt;
    // One plain name (the caller refused `..`) opened without following a
    // symlink cannot leave the directory: there is nothing to walk through.
    // Only a symlink (ELOOP) needs the rules below. Cheaper than openat2's
    // checks, for the thousands of files a listing opens.
    if !rel.as_os_str().as_bytes().contains(&b'/') {
        match nix::fcntl::openat(Some(dir.as_raw_fd()), rel, flags | OFlag::O_NOFOLLOW, Mode::empty()) {
            Err(Errno::ELOOP) => {}
            r => return r,
        }
    }
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let how =
            OpenHow::new().flags(flags).resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        match nix::fcntl::openat2(dir.as_raw_fd(), rel, how) {
            Err(Errno::ENOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            // A seccomp filter that answers EPERM for unknown syscalls.
            Err(Errno::EPERM) if !flags.contains(OFlag::O_NOATIME) => NO_OPENAT2.store(true, Ordering::Relaxed),
            r => return r,
        }
    }
    // Without openat2, no symlink at all (RESOLVE_BENEATH's `..` check is
    // already done: `rel` has normal components only).
    nix::fcntl::openat(Some(dir.as_raw_fd()), rel, flags | OFlag::O_NOFOLLOW, Mode::empty())
}

/// Opens `rel` beneath `dir` for reading: never blocks, never leaves the
/// directory, and only a regular file is returned, with its `fstat`.
pub fn open_beneath(dir: BorrowedFd, rel: &Path) -> Result<(File, FileStat), Unreadable> {
    let name = || rel.display().to_string();
    if !plain_relative(rel) {
        return Err(Unreadable::new(name(), "not a plain path inside the run's directory (refused)"));
    }
    let base = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = if NO_NOATIME.load(Ordering::Relaxed) {
        raw_open(dir, rel, base)
    } else {
        // O_NOATIME: a listing is no use of the file, and the first read of
        // a fresh file would otherwise dirty its inode.
        match raw_open(dir, rel, base | OFlag::O_NOATIME) {
            Err(Errno::EPERM) => {
                NO_NOATIME.store(true, Ordering::Relaxed);
                raw_open(dir, rel, base)
            }
            r => r,
        }
    }
    .map_err(|e| Unreadable::errno(name(), e))?;
    // SAFETY: the open just returned this descriptor and nothing else owns it.
    let f = unsafe { File::from_raw_fd(fd) };
    let st = nix::sys::stat::fstat(f.as_raw_fd()).map_err(|e| Unreadable::new(name(), describe(e)))?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(Unreadable::new(name(), format!("{} (only regular files are read)", kind(st.st_mode))));
    }
    Ok((f, st))
}

/// Reads an opened regular file whole into `buf` (reused), refusing it when
/// it is (or grows) over `cap` bytes. Returns the length read.
pub fn read_capped(f: &mut File, st: &FileStat, buf: &mut Vec<u8>, cap: u64, name: &str) -> Result<usize, Unreadable> {
    let too_big = || Unreadable::new(name, format!("larger than {cap} bytes (refused)"));
    if st.st_size < 0 || st.st_size as u64 > cap {
        return Err(too_big());
    }
    // Room for the whole file and one byte more, to see it grow past the cap.
    let want = (st.st_size as usize + 1).clamp(4096, cap as usize + 1);
    if buf.len() < want {
        buf.resize(want, 0);
    }
    let mut len = 0;
    loop {
        if len == buf.len() {
            if len as u64 > cap {
                return Err(too_big());
            }
            buf.resize((len * 2).min(cap as usize + 1), 0);
        }
        match std::io::Read::read(f, &mut buf[len..]) {
            Ok(0) => return Ok(len),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Unreadable::new(name, e.to_string())),
        }
        // A short read of a regular file is its end: the read that would say so is skipped.
        if len < buf.len() {
            if len as u64 > cap {
                return Err(too_big());
            }
            return Ok(len);
        }
    }
}

/// Opens and reads `name` in the directory `dir` whole, with a bound.
pub fn read_in(dir: &Path, name: &str, cap: u64) -> Result<Vec<u8>, Unreadable> {
    let fd = open_dir(dir).map_err(|e| Unreadable::errno(dir.display().to_string(), e))?;
    let (mut f, st) = open_beneath(std::os::fd::AsFd::as_fd(&fd), Path::new(name))?;
    let mut buf = Vec::new();
    let n = read_capped(&mut f, &st, &mut buf, cap, name)?;
    buf.truncate(n);
    Ok(buf)
}

/// Appends `line` to the existing regular file `name` of the run's
/// directory `dir`, in one `write` with `O_APPEND`: the one write into a
/// directory the agent can write (a runner's steer inbox). The file is
/// opened with `O_NOFOLLOW` and checked with `fstat`: a symlink (the
/// agent's way to aim the write at any file the server may write, even one
/// inside the directory), a FIFO or a device is refused, never written;
/// nothing is created.
///
/// `cap`: the size the file may reach. A line that would take it past
/// `cap` (or a file already past it) is refused, the file untouched; its
/// size comes from the same `fstat`, nothing of it is read. This process's
/// appends take turns (`APPENDS`), so two of them never both pass the
/// check and together go past `cap`.
pub fn append_in(dir: &Path, name: &str, line: &[u8], cap: u64) -> Result<(), Unreadable> {
    use std::io::Write;
    if !plain(name) {
        return Err(Unreadable::new(name, "not a plain name inside the run's directory (refused)"));
    }
    let fd = open_dir(dir).map_err(|e| Unreadable::errno(dir.display().to_string(), e))?;
    let flags = OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let raw = nix::fcntl::openat(Some(fd.as_raw_fd()), name, flags | OFlag::O_NOFOLLOW, Mode::empty())
        .map_err(|e| Unreadable::errno(name.into(), e))?;
    // SAFETY: the open just returned this descriptor and nothing else owns it.
    let mut f = unsafe { File::from_raw_fd(raw) };
    let _turn = APPENDS.lock().unwrap_or_else(|p| p.into_inner());
    let st = nix::sys::stat::fstat(f.as_raw_fd()).map_err(|e| Unreadable::new(name, describe(e)))?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(Unreadable::new(name, format!("{} (only a regular file is written)", kind(st.st_mode))));
    }
    let have = u64::try_from(st.st_size).unwrap_or(0);
    if have.saturating_add(line.len() as u64) > cap {
        return Err(Unreadable::new(
            name,
            format!(
                "it holds {have} bytes and this line is {} more, past the {cap} bytes it may hold: nothing was written",
                line.len()
            ),
        ));
    }
    f.write_all(line).map_err(|e| Unreadable::new(name, e.to_string()))
}

/// [`append_in`]'s turns: one check of a file's size and its write at a time.
static APPENDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Splits what `r` yields into lines (LF, an optional CR stripped), in
/// bounded memory: a line longer than `max` is not handed over (its length
/// is counted in the result instead). Returns how many lines were skipped.
pub fn bounded_lines(mut r: impl std::io::Read, max: usize, mut line: impl FnMut(&[u8])) -> std::io::Result<usize> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut split = Splitter::default();
    let mut skipped = 0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => skipped += split.push(&buf[..n], max, &mut line),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if !split.skipping && !split.pending.is_empty() {
        line(strip_cr(&split.pending));
    }
    Ok(skipped)
}

/// [`bounded_lines`]' splitting, for chunks read as they come (a log
/// followed from where it was last read).
#[derive(Default)]
pub struct Splitter {
    /// The start of a line that straddles chunks (at most `max` bytes).
    pending: Vec<u8>,
    /// Inside a line already over `max`: its bytes are dropped until its end.
    skipping: bool,
}

impl Splitter {
    /// Takes in `chunk`, handing `line` each line it ends that is at most
    /// `max` bytes; returns how many longer ones it skipped.
    pub fn push(&mut self, chunk: &[u8], max: usize, mut line: impl FnMut(&[u8])) -> usize {
        let (mut start, mut skipped) = (0, 0);
        for i in memchr::memchr_iter(b'\n', chunk) {
            let seg = &chunk[start..i];
            start = i + 1;
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            if self.pending.len() + seg.len() > max {
                skipped += 1;
            } else if self.pending.is_empty() {
                line(strip_cr(seg));
            } else {
                self.pending.extend_from_slice(seg);
                line(strip_cr(&self.pending));
            }
            self.pending.clear();
        }
        let rest = &chunk[start..];
        if !self.skipping && !rest.is_empty() {
            if self.pending.len() + rest.len() > max {
                self.pending = Vec::new();
                self.skipping = true;
                skipped += 1;
            } else {
                self.pending.extend_from_slice(rest);
            }
        }
        skipped
    }
}

fn strip_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

// Removal beneath the home (`runs reap`, `runs rm`, `runs prune`: see
// `super::remove`), here below the registry that reaps with it.

/// A name that is one plain path component: what may be opened or removed
/// in a directory descriptor.
fn plain(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

fn refused(path: &Path, e: Errno) -> std::io::Error {
    let why = match e {
        Errno::ELOOP | Errno::ENOTDIR => {
            "a symbolic link or not a directory (not followed; nothing removed there)".into()
        }
        e => e.desc().to_lowercase(),
    };
    std::io::Error::new(std::io::Error::from(e).kind(), format!("{}: {why}", path.display()))
}

/// Opens `home/dirs[0]/dirs[1]/…` for removals, following no symlink below
/// `home`. `Ok(None)` when one of them does not exist (nothing to remove).
pub fn open_below(home: &Path, dirs: &[&str]) -> std::io::Result<Option<OwnedFd>> {
    let mut fd = match open_dir(home) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(refused(home, e)),
    };
    let mut path = home.to_path_buf();
    for d in dirs {
        path.push(d);
        if !plain(d) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{}: not a plain name", path.display()),
            ));
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match nix::fcntl::openat(Some(fd.as_raw_fd()), *d, flags, Mode::empty()) {
            // SAFETY: openat just returned this descriptor and nothing else owns it.
            Ok(raw) => fd = unsafe { OwnedFd::from_raw_fd(raw) },
            Err(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(refused(&path, e)),
        }
    }
    Ok(Some(fd))
}

/// Removes the entry `name` of the directory `dir` (`unlinkat`: a symlink
/// is removed, not its target; a directory is refused). `Ok(false)` when
/// there was none.
pub fn unlink(dir: BorrowedFd, name: &str) -> std::io::Result<bool> {
    if !plain(name) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{name:?}: not a plain name")));
    }
    match nix::unistd::unlinkat(Some(dir.as_raw_fd()), name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
        Ok(()) => Ok(true),
        Err(Errno::ENOENT) => Ok(false),
        Err(e) => {
            Err(std::io::Error::new(std::io::Error::from(e).kind(), format!("{name}: {}", e.desc().to_lowercase())))
        }
    }
}

/// Removes `home/dirs…/name`, following no symlink below `home`.
/// `Ok(false)` when it (or a directory on the way) does not exist.
pub fn remove(home: &Path, dirs: &[&str], name: &str) -> std::io::Result<bool> {
    match open_below(home, dirs)? {
        None => Ok(false),
        Some(d) => unlink(d.as_fd(), name).map_err(|e| {
            let mut p = home.to_path_buf();
            dirs.iter().for_each(|d| p.push(d));
            std::io::Error::new(e.kind(), format!("{}/{e}", p.display()))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("runwire-safe-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_append_writes_only_an_existing_regular_file_of_the_directory() {
        let d = tmp("append");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let run = d.join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("inbox"), "").unwrap();
        std::fs::write(run.join("journal"), "").unwrap();
        std::os::unix::fs::symlink(&victim, run.join("out")).unwrap();
        std::os::unix::fs::symlink("journal", run.join("in")).unwrap();
        nix::unistd::mkfifo(&run.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        append_in(&run, "inbox", b"one\n", 64).unwrap();
        append_in(&run, "inbox", b"two\n", 64).unwrap();
        assert_eq!(std::fs::read_to_string(run.join("inbox")).unwrap(), "one\ntwo\n");
        for bad in ["out", "in", "fifo", "none", "../victim", ".", ""] {
            let e = append_in(&run, bad, b"x\n", 64).err().unwrap_or_else(|| panic!("{bad} written"));
            assert_eq!(e.file, bad);
        }
        assert!(append_in(&run, "out", b"x\n", 64).unwrap_err().why.contains("symbolic link"));
        assert!(append_in(&run, "none", b"x\n", 64).unwrap_err().absent);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(std::fs::read_to_string(run.join("journal")).unwrap(), "");
        assert!(!run.join("none").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_append_past_the_cap_is_refused_and_writes_nothing() {
        let d = tmp("cap");
        std::fs::write(d.join("inbox"), "12345\n").unwrap();
        // Up to the cap exactly: written.
        append_in(&d, "inbox", b"678\n", 10).unwrap();
        let e = append_in(&d, "inbox", b"x\n", 10).unwrap_err();
        assert!(e.why.contains("holds 10 bytes") && e.why.contains("past the 10 bytes"), "{}", e.why);
        assert_eq!(std::fs::read_to_string(d.join("inbox")).unwrap(), "12345\n678\n");
        // A file already past the cap (a sparse one: its size, not its bytes).
        std::fs::File::options().write(true).open(d.join("inbox")).unwrap().set_len(1 << 40).unwrap();
        assert!(append_in(&d, "inbox", b"", 10).unwrap_err().why.contains("nothing was written"));
        assert_eq!(std::fs::metadata(d.join("inbox")).unwrap().len(), 1 << 40);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn only_regular_files_inside_the_directory_are_opened() {
        let d = tmp("open");
        std::fs::write(d.join("ok"), "x").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/in"), "y").unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", d.join("out")).unwrap();
        std::os::unix::fs::symlink("../../../../etc/hostname", d.join("up")).unwrap();
        nix::unistd::mkfifo(&d.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let fd = open_dir(&d).unwrap();
        assert!(open_beneath(fd.as_fd(), Path::new("ok")).is_ok());
        assert!(open_beneath(fd.as_fd(), Path::new("sub/in")).is_ok());
        for bad in ["zero", "out", "up", "fifo", "sub", "../ok", "/etc/hostname", "none"] {
            let e = open_beneath(fd.as_fd(), Path::new(bad)).err().unwrap_or_else(|| panic!("{bad} opened"));
            assert_eq!(e.file, bad);
        }
        let e = open_beneath(fd.as_fd(), Path::new("fifo")).unwrap_err();
        assert!(e.why.contains("FIFO"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn whole_reads_are_bounded_and_long_lines_skipped() {
        let d = tmp("cap");
        std::fs::write(d.join("f"), vec![b'a'; 5000]).unwrap();
        assert_eq!(read_in(&d, "f", 5000).unwrap().len(), 5000);
        assert!(read_in(&d, "f", 4999).unwrap_err().why.contains("larger than 4999"));
        let text = format!("one\r\n{}\nthree\n{}", "x".repeat(200_000), "tail");
        let mut got = Vec::new();
        let skipped =
            bounded_lines(text.as_bytes(), 1000, |l| got.push(String::from_utf8_lossy(l).into_owned())).unwrap();
        assert_eq!((got, skipped), (vec!["one".to_string(), "three".into(), "tail".into()], 1));
        let _ = std::fs::remove_dir_all(&d);
    }
}
