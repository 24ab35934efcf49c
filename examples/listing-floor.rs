//! The syscall floor of a listing, for `bench/runs.sh`: opens, `fstat`s,
//! reads and closes every regular file in the given directories, as the
//! listing does (relative to the directory's descriptor, `O_NOATIME`, one
//! thread per core), with no parsing and the file names gathered before the
//! clock starts. The listing's time over this one is what its own code adds.
//!
//!     listing-floor DIR...   # prints: files=N ms=T

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn main() {
    let dirs: Vec<String> = std::env::args().skip(1).collect();
    if dirs.is_empty() || dirs[0] == "--help" {
        println!("usage: listing-floor DIR...");
        return;
    }
    let mut files: Vec<(usize, String)> = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let fd = nix::fcntl::open(d.as_str(), OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        // SAFETY: `open` just returned this descriptor and nothing else owns it.
        fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
        for e in std::fs::read_dir(d).unwrap_or_else(|e| panic!("{d}: {e}")).flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                files.push((i, e.file_name().to_string_lossy().into_owned()));
            }
        }
    }
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let t = std::time::Instant::now();
    let fds = &fds;
    let bytes: usize = std::thread::scope(|s| {
        let hs: Vec<_> = files
            .chunks(files.len().div_ceil(workers).max(1))
            .map(|chunk| {
                s.spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut n = 0;
                    for (d, name) in chunk {
                        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOATIME;
                        let Ok(fd) = nix::fcntl::openat(Some(fds[*d].as_raw_fd()), name.as_str(), flags, Mode::empty())
                        else {
                            continue;
                        };
                        // SAFETY: `openat` just returned this descriptor and nothing else owns it.
                        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
                        let _ = std::hint::black_box(nix::sys::stat::fstat(f.as_raw_fd()));
                        n += f.read(&mut buf).unwrap_or(0);
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    std::hint::black_box(bytes);
    println!("files={} ms={ms:.1}", files.len());
}
