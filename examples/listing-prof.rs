//! The listing's own cost, for profiling (`bench/runs.sh` times it end to
//! end through the server): runs one page of `$HARNESS_HOME`'s registry N
//! times through the run index (with `FROM_FILES=1`, from every run's
//! files), and prints the wall time and the CPU time (user, system) of one,
//! and with `ALLOC=1` the allocations one makes. Deterministic counts for
//! comparing two builds: `valgrind --tool=callgrind listing-prof 1 running 50`.
//!
//!     listing-prof N [STATUS[,STATUS]] [LIMIT]   # prints: ms=T user=U sys=S bytes=B

use runwire::runs::list::{self, Query};
use runwire::runs::registry::Registry;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(n) = args.get(1).and_then(|n| n.parse::<usize>().ok()).filter(|&n| n > 0) else {
        println!("usage: listing-prof N [STATUS[,STATUS]] [LIMIT]  (HARNESS_HOME names the registry)");
        return;
    };
    let status = args.get(2).map(String::as_str).filter(|s| !s.is_empty());
    let q = match Query::parse(args.get(3).map(String::as_str), None, status, None) {
        Ok(q) => q,
        Err(e) => return eprintln!("listing-prof: {e}"),
    };
    let reg = Registry::at(&runwire::runs::harness_home());
    let o = match std::env::var_os("FROM_FILES") {
        Some(_) => list::Options { use_index: false, repair: false, ..Default::default() },
        None => list::Options::default(),
    };
    COUNTING.store(std::env::var_os("ALLOC").is_some(), Relaxed);
    let (u0, s0) = cpu_ms();
    let t = std::time::Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        bytes += list::page_with(&reg, &q, o).json().len();
    }
    let ms = t.elapsed().as_secs_f64() * 1000.0 / n as f64;
    let (u1, s1) = cpu_ms();
    COUNTING.store(false, Relaxed);
    if std::env::var_os("ALLOC").is_some() {
        let per = |a: &AtomicUsize| a.load(Relaxed) / n;
        eprintln!("allocations={} bytes_allocated={} of_1KiB_or_more={}", per(&ALLOCS), per(&BYTES), per(&LARGE));
    }
    let per = |x: f64| x / n as f64;
    println!("ms={ms:.1} user={:.1} sys={:.1} bytes={}", per(u1 - u0), per(s1 - s0), bytes / n);
}

/// User and system CPU time of the process so far, in ms.
fn cpu_ms() -> (f64, f64) {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is a valid target.
    unsafe { nix::libc::getrusage(nix::libc::RUSAGE_SELF, &mut u) };
    let ms = |t: nix::libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    (ms(u.ru_utime), ms(u.ru_stime))
}

/// The system allocator, counting while `COUNTING` is set.
struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);
/// 1 KiB or more: glibc tidies its free lists before each such request.
static LARGE: AtomicUsize = AtomicUsize::new(0);

fn count(size: usize) {
    if COUNTING.load(Relaxed) {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(size, Relaxed);
        LARGE.fetch_add(usize::from(size >= 1008), Relaxed);
    }
}

// SAFETY: every call is passed on to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size());
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System` with this layout.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        count(size);
        // SAFETY: `p` came from `System` with this layout.
        unsafe { System.realloc(p, l, size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;
