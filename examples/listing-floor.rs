//! The syscall floors of a listing, for `bench/runs.sh`: opens, `fstat`s,
//! reads and closes every regular file in the given directories, as the
//! listing does (relative to the directory's descriptor, `O_NOATIME`, one
//! thread per core), with no parsing and the file names gathered before the
//! clock starts; or, with `--stat`, only `fstatat`s each one (what sorting
//! runs by their pointer's and journal's times costs at the least). The
//! listing's time over this one is what its own code adds. `DIR:SUFFIX`
//! takes only the files of DIR whose names end with SUFFIX.
//!
//!     listing-floor [--stat] DIR[:SUFFIX]...   # prints: files=N cpu_ms=C ms=T

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let stat_only = args.first().is_some_and(|a| a == "--stat");
    if stat_only {
        args.remove(0);
    }
    if args.is_empty() || args[0] == "--help" {
        println!("usage: listing-floor [--stat] DIR[:SUFFIX]...");
        return;
    }
    let specs: Vec<(String, String)> = args
        .iter()
        .map(|a| match a.rsplit_once(':') {
            Some((d, suffix)) => (d.to_string(), suffix.to_string()),
            None => (a.clone(), String::new()),
        })
        .collect();
    let dirs: Vec<&String> = specs.iter().map(|(d, _)| d).collect();
    let mut files: Vec<(usize, String)> = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let fd = nix::fcntl::open(d.as_str(), OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        // SAFETY: `open` just returned this descriptor and nothing else owns it.
        fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
        let suffix = &specs[i].1;
        for e in std::fs::read_dir(d).unwrap_or_else(|e| panic!("{d}: {e}")).flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) && e.file_name().to_string_lossy().ends_with(suffix.as_str()) {
                files.push((i, e.file_name().to_string_lossy().into_owned()));
            }
        }
    }
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let cpu0 = cpu_ms();
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
                        if stat_only {
                            let st = nix::sys::stat::fstatat(
                                Some(fds[*d].as_raw_fd()),
                                name.as_str(),
                                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                            );
                            n += std::hint::black_box(st).map_or(0, |s| (s.st_size > 0) as usize);
                            continue;
                        }
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
    let cpu = cpu_ms() - cpu0;
    std::hint::black_box(bytes);
    println!("files={} cpu_ms={cpu:.0} ms={ms:.1}", files.len());
}

/// CPU time of the whole process (every thread), user + system, in ms
/// (clock ticks: 10 ms granularity), as the bench reads the server's.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let ticks: f64 = [11, 12].iter().filter_map(|&i| fields.get(i)?.parse::<f64>().ok()).sum();
    // SC_CLK_TCK is 100 on Linux.
    ticks * 10.0
}
