//! The connections' threads: one per connection, as before, but a thread
//! whose connection ended waits a while for the next one instead of
//! exiting, so a new request does not wait for a thread to be made (its
//! stack mapped, its signal stack set up, the scheduler's first run of it):
//! the first frame to a new client of a live task stream is a few syscalls
//! and a wakeup after its accept, not a thread start.
//!
//! Nothing is bounded here that was not before: the accept loop still
//! counts connections against `--max-connections`; this only keeps up to
//! [`IDLE_MAX`] finished threads parked for [`IDLE_FOR`].

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How many finished threads wait for the next connection.
const IDLE_MAX: usize = 8;
/// How long a finished thread waits for one before it exits.
const IDLE_FOR: Duration = Duration::from_secs(30);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One connection's work.
pub type Job = Box<dyn FnOnce() + Send>;

/// Parked threads and the connections handed to them.
pub struct Pool {
    q: Mutex<Queue>,
    cv: Condvar,
}

struct Queue {
    /// Connections handed over and not yet taken: never more than `idle`.
    jobs: VecDeque<Job>,
    /// Threads parked, waiting for a connection.
    idle: usize,
}

impl Pool {
    pub const fn new() -> Pool {
        Pool { q: Mutex::new(Queue { jobs: VecDeque::new(), idle: 0 }), cv: Condvar::new() }
    }

    /// Runs `job` (one connection) in a parked thread, or in a new one
    /// (which parks when done): `Err` when no thread could be started.
    pub fn run(&'static self, job: Job) -> std::io::Result<()> {
        {
            let mut q = lock(&self.q);
            // Each job handed over has a parked thread of its own to take it.
            if q.idle > q.jobs.len() {
                q.jobs.push_back(job);
                drop(q);
                self.cv.notify_one();
                return Ok(());
            }
        }
        std::thread::Builder::new().name("conn".into()).spawn(move || {
            let mut next = Some(job);
            while let Some(job) = next.take() {
                job();
                next = self.park();
            }
        })?;
        Ok(())
    }

    /// Waits for the next job (`None`: none came, or enough threads wait).
    fn park(&self) -> Option<Job> {
        let mut q = lock(&self.q);
        if q.idle >= IDLE_MAX {
            return None;
        }
        q.idle += 1;
        let (mut q, _) =
            self.cv.wait_timeout_while(q, IDLE_FOR, |q| q.jobs.is_empty()).unwrap_or_else(|e| e.into_inner());
        q.idle -= 1;
        q.jobs.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_finished_thread_takes_the_next_connection() {
        static POOL: Pool = Pool::new();
        let pool = &POOL;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let served = Arc::new(AtomicUsize::new(0));
        let (t, n) = (threads.clone(), served.clone());
        for _ in 0..5 {
            let mut c = TcpStream::connect(addr).unwrap();
            let (mut s, _) = listener.accept().unwrap();
            let (t, n) = (t.clone(), n.clone());
            let job = move || {
                lock(&t).insert(std::thread::current().id());
                let _ = s.write_all(b"x");
                n.fetch_add(1, Ordering::SeqCst);
            };
            pool.run(Box::new(job)).unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            // Wait until the thread parked again before the next connection.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while lock(&pool.q).idle == 0 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(served.load(Ordering::SeqCst), 5);
        assert_eq!(lock(&threads).len(), 1, "one thread served the five connections one after another");
    }
}
