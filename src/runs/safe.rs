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
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
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

/// Gives the calling thread a descriptor table of its own, holding only
/// 0, 1 and 2 (`close_range(3, ~0, CLOSE_RANGE_UNSHARE)`); `false` where
/// the kernel refuses (before Linux 5.9, or a seccomp filter): the table is
/// then still shared and nothing changed. Threads sharing a table take one
/// lock for each open and close, and a reference on each descriptor a call
/// names; a listing's two workers do that 120,000 times between them, and
/// the lock was contended.
///
/// Closes nothing another thread can see: the kernel copies the table
/// (below 3) first and closes in the copy; a table no other thread shares
/// is this thread's alone already. For a thread spawned for the work and
/// ending with it only (crate-private for that reason: on a thread whose
/// table is its own already, such as a lone main thread, it closes every
/// descriptor from 3 up): what it opens afterwards is valid in it alone (an
/// `OwnedFd` of it must be dropped by it), and what it leaves open is
/// closed when it ends.
pub(crate) fn private_fd_table() -> bool {
    // SAFETY: close_range takes integers and touches no memory of ours; see
    // above for why no descriptor in use elsewhere is closed.
    let r = unsafe { nix::libc::syscall(nix::libc::SYS_close_range, 3u32, u32::MAX, nix::libc::CLOSE_RANGE_UNSHARE) };
    r == 0
}

/// `close_range` refused (before Linux 5.9, or a seccomp filter): closes
/// go one by one, for good.
static NO_CLOSE_RANGE: AtomicBool = AtomicBool::new(false);

/// Descriptors closed together, each run of consecutive numbers in one
/// `close_range` call: here a syscall costs about as much as what a close
/// does, and a listing closes 30,000 files (a worker with a table of its
/// own gets consecutive numbers for them). It owns what it
/// holds: each range it closes holds only descriptors it was given, so
/// nothing else is closed. What is left is closed when it is dropped.
#[derive(Default)]
pub struct Closer {
    fds: Vec<OwnedFd>,
}

impl Closer {
    /// How many it holds before it closes them.
    const BATCH: usize = 64;

    /// Closes `fd` with the others, soon.
    pub fn close(&mut self, fd: impl Into<OwnedFd>) {
        self.fds.push(fd.into());
        if self.fds.len() >= Self::BATCH {
            self.flush();
        }
    }

    /// Closes all it holds now.
    pub fn flush(&mut self) {
        self.fds.sort_unstable_by_key(|f| f.as_raw_fd());
        let mut run: Vec<OwnedFd> = Vec::with_capacity(self.fds.len());
        for fd in self.fds.drain(..) {
            if run.last().is_some_and(|l: &OwnedFd| l.as_raw_fd() + 1 != fd.as_raw_fd()) {
                close_run(&mut run);
            }
            run.push(fd);
        }
        close_run(&mut run);
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.flush();
    }
}

/// `fd` moved up, out of the way of the files a [`Closer`] closes in runs:
/// to the lowest free number from 1024 (or from half of what this process
/// may open, when that is less; not higher, as a table grows to its highest
/// number), or left where it is when none is free. A thread with a table of
/// its own that keeps its few long-lived descriptors there leaves the low
/// numbers to its files, which then come in runs.
pub fn moved_high(fd: OwnedFd) -> OwnedFd {
    static FLOOR: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    let floor = *FLOOR.get_or_init(|| {
        let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map_or(0, |(s, _)| s);
        i32::try_from(soft / 2).unwrap_or(i32::MAX).min(1024)
    });
    if floor <= 4 * Closer::BATCH as i32 {
        return fd;
    }
    match nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(floor)) {
        // SAFETY: fcntl just returned this descriptor and nothing else owns it.
        Ok(high) => unsafe { OwnedFd::from_raw_fd(high) },
        Err(_) => fd,
    }
}

/// Closes `run`, descriptors of consecutive numbers, in one call when it
/// can; else one by one (dropped).
fn close_run(run: &mut Vec<OwnedFd>) {
    if let (Some(lo), Some(hi)) = (run.first(), run.last()) {
        if run.len() > 1 && !NO_CLOSE_RANGE.load(Ordering::Relaxed) {
            let (lo, hi) = (lo.as_raw_fd() as u32, hi.as_raw_fd() as u32);
            // SAFETY: integers only; every number in lo..=hi is a descriptor `run`
            // owns (distinct, open, consecutive), so only those are closed.
            if unsafe { nix::libc::syscall(nix::libc::SYS_close_range, lo, hi, 0u32) } == 0 {
                // Closed: their numbers are not closed again.
                run.drain(..).for_each(|fd| {
                    let _ = fd.into_raw_fd();
                });
                return;
            }
            NO_CLOSE_RANGE.store(true, Ordering::Relaxed);
        }
    }
    run.clear();
}

/// Calls `f` with the name of each entry of the directory `fd` (`.` and
/// `..` too) from its current offset on, which it moves to the end. Raw
/// `getdents64` into a buffer the thread reuses: no allocation, no copy and
/// no call per entry (a listing reads the registry and one directory a
/// repository, thousands of names). An error ends the walk: the names seen
/// so far stand.
pub fn each_name(fd: BorrowedFd, mut f: impl FnMut(&[u8])) {
    thread_local! {
        /// Where `getdents64` writes a directory's entries.
        static DENTS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut walk = |buf: &mut Vec<u8>| {
        if buf.is_empty() {
            buf.resize(32 * 1024, 0);
        }
        loop {
            // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
            let n =
                unsafe { nix::libc::syscall(nix::libc::SYS_getdents64, fd.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
            let Some(n) = usize::try_from(n).ok().filter(|&n| n > 0 && n <= buf.len()) else { return };
            // Records: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), then
            // the name, NUL-terminated and padded to the record's length.
            let mut at = 0;
            while let Some(head) = buf[..n].get(at..at + 19) {
                let len = usize::from(u16::from_ne_bytes([head[16], head[17]]));
                let Some(name) = buf[..n].get(at + 19..at + len) else { return };
                f(&name[..memchr::memchr(0, name).unwrap_or(name.len())]);
                at += len;
            }
        }
    };
    // An `f` that walks another directory gets a buffer of its own.
    DENTS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => walk(&mut buf),
        Err(_) => walk(&mut Vec::new()),
    })
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

fn kind(st: &FileStat) -> &'static str {
    match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
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
        return Err(Unreadable::new(name(), format!("{} (only regular files are read)", kind(&st))));
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

/// Splits what `r` yields into lines (LF, an optional CR stripped), in
/// bounded memory: a line longer than `max` is not handed over (its length
/// is counted in the result instead). Returns how many lines were skipped.
pub fn bounded_lines(mut r: impl std::io::Read, max: usize, mut line: impl FnMut(&[u8])) -> std::io::Result<usize> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    // Inside a line already over `max`: its bytes are dropped until its end.
    let mut skipping = false;
    let mut skipped = 0;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut start = 0;
        for i in memchr::memchr_iter(b'\n', &buf[..n]) {
            let seg = &buf[start..i];
            if skipping {
                skipping = false;
            } else if pending.is_empty() {
                line(strip_cr(seg));
            } else if pending.len() + seg.len() <= max {
                pending.extend_from_slice(seg);
                line(strip_cr(&pending));
                pending.clear();
            } else {
                pending.clear();
                skipped += 1;
            }
            start = i + 1;
        }
        let rest = &buf[start..n];
        if !skipping && !rest.is_empty() {
            if pending.len() + rest.len() > max {
                pending.clear();
                pending.shrink_to(64 * 1024);
                skipping = true;
                skipped += 1;
            } else {
                pending.extend_from_slice(rest);
            }
        }
    }
    if !skipping && !pending.is_empty() {
        line(strip_cr(&pending));
    }
    Ok(skipped)
}

fn strip_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
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
    fn each_name_lists_every_entry_across_many_reads_and_nested_walks() {
        // Long names, thousands of them: many 32 KiB reads of the kernel's records.
        let d = tmp("names");
        let long = "n".repeat(200);
        let mut want: Vec<Vec<u8>> = (0..1500).map(|i| format!("{long}{i}").into_bytes()).collect();
        for n in &want {
            std::fs::write(d.join(std::str::from_utf8(n).unwrap()), b"").unwrap();
        }
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/inner"), b"").unwrap();
        want.extend([b".".to_vec(), b"..".to_vec(), b"sub".to_vec()]);
        want.sort();
        let dir = open_dir(&d).unwrap();
        let (mut got, mut inner) = (Vec::new(), Vec::new());
        each_name(dir.as_fd(), |n| {
            // A walk inside a walk (its own buffer), once.
            if n == b"sub" && inner.is_empty() {
                let sub = open_dir(&d.join("sub")).unwrap();
                each_name(sub.as_fd(), |m| inner.push(m.to_vec()));
            }
            got.push(n.to_vec());
        });
        got.sort();
        inner.sort();
        assert_eq!(got, want);
        assert_eq!(inner, [b".".to_vec(), b"..".to_vec(), b"inner".to_vec()]);
        // The offset is at the end: a second walk of the same descriptor sees nothing.
        let mut again = 0;
        each_name(dir.as_fd(), |_| again += 1);
        assert_eq!(again, 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_private_table_closes_nothing_the_other_threads_use() {
        let d = tmp("private");
        std::fs::write(d.join("a"), "from the caller").unwrap();
        std::fs::write(d.join("b"), "from the thread").unwrap();
        let mine = File::open(d.join("a")).unwrap();
        let raw = mine.as_raw_fd();
        let valid = |fd: i32| nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).is_ok();
        let (private, seen, opened) = std::thread::scope(|s| {
            s.spawn(|| {
                let private = private_fd_table();
                // The caller's descriptor is not in the thread's table; what the
                // thread opens is in it alone (and left open, for its end).
                let seen = valid(raw);
                let opened = File::open(d.join("b")).unwrap().into_raw_fd();
                (private, seen, opened)
            })
            .join()
            .unwrap()
        });
        use std::io::Read;
        use std::os::fd::IntoRawFd;
        let mut got = String::new();
        (&mine).read_to_string(&mut got).unwrap();
        assert_eq!(got, "from the caller", "the caller's descriptor still works");
        if private {
            assert!(!seen, "the thread saw the caller's descriptor");
            // The thread's descriptor is not the caller's to use: here it names
            // nothing, or whatever the caller has at that number.
            let b = nix::sys::stat::stat(&d.join("b")).unwrap();
            if let Ok(st) = nix::sys::stat::fstat(opened) {
                assert_ne!((st.st_dev, st.st_ino), (b.st_dev, b.st_ino), "the thread's file is open here");
            }
        } else {
            // No private table here (an old kernel): the thread's open is the caller's to close.
            // SAFETY: the thread opened it in the shared table and gave it up.
            drop(unsafe { File::from_raw_fd(opened) });
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_closer_closes_what_it_was_given_and_nothing_between() {
        let d = tmp("closer");
        for n in ["a", "keep"] {
            std::fs::write(d.join(n), n).unwrap();
        }
        let open = |fd: i32| nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).is_ok();
        // On a thread with a table of its own: numbers come in order, and no
        // other test opens one that was just closed.
        let d2 = d.clone();
        std::thread::spawn(move || {
            if !private_fd_table() {
                return;
            }
            let files = |n: usize| (0..n).map(|_| OwnedFd::from(File::open(d2.join("a")).unwrap())).collect::<Vec<_>>();
            let first = files(5);
            let keep = File::open(d2.join("keep")).unwrap();
            let second = files(Closer::BATCH + 3);
            let given: Vec<i32> = first.iter().chain(&second).map(|f| f.as_raw_fd()).collect();
            let mut c = Closer::default();
            // Given out of order; a batch closes once it is full.
            second.into_iter().rev().chain(first).for_each(|f| c.close(f));
            let still: Vec<i32> = given.iter().copied().filter(|&fd| open(fd)).collect();
            assert_eq!(still.len(), (5 + Closer::BATCH + 3) % Closer::BATCH, "one batch closed");
            drop(c);
            assert!(given.iter().all(|&fd| !open(fd)), "all closed once dropped");
            let mut got = String::new();
            std::io::Read::read_to_string(&mut &keep, &mut got).unwrap();
            assert_eq!(got, "keep", "the descriptor between them stays open");
            // A long-lived descriptor moved out of the files' way, its old number closed.
            let dir = open_dir(&d2).unwrap();
            let low = dir.as_raw_fd();
            let high = moved_high(dir);
            assert!(open(high.as_raw_fd()));
            if high.as_raw_fd() != low {
                assert!(high.as_raw_fd() > low + 4 * Closer::BATCH as i32 && !open(low));
            }
        })
        .join()
        .unwrap();
        let _ = std::fs::remove_dir_all(&d);
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
