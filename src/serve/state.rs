//! The state every connection shares: the options, the shutdown flag, and
//! the handlers' books (threads, live sessions, the change feed, the link
//! limits). Handlers take it from here, not from the server's root.

use super::agui::book::Book;
use super::agui::interactive::sessions::Sessions;
use super::feed_hub::FeedHub;
use super::link_keys;
use super::options::Config;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// State shared by every connection.
pub struct Shared {
    pub cfg: Config,
    pub shutdown: AtomicBool,
    pub book: std::sync::Mutex<Book>,
    pub(super) connections: AtomicUsize,
    /// The change feed's follower, started by the first `GET /runs/events`.
    feed: std::sync::Mutex<Option<Arc<FeedHub>>>,
    /// Interactive mode's live sessions, one per thread.
    pub sessions: Sessions,
    /// The link routes' rate limits.
    pub link_limits: link_keys::Limiter,
    /// The `Idempotency-Key`s of the doors that run commands.
    pub keys: super::idempotency::Keys,
}

impl Shared {
    pub fn new(cfg: Config) -> Shared {
        Shared {
            cfg,
            shutdown: AtomicBool::new(false),
            book: std::sync::Mutex::new(Book::default()),
            connections: AtomicUsize::new(0),
            feed: std::sync::Mutex::new(None),
            sessions: Sessions::default(),
            link_limits: link_keys::Limiter::default(),
            keys: super::idempotency::Keys::default(),
        }
    }

    /// The process's file watcher ([`crate::util::watch`]), started on first use.
    pub fn hub(&self) -> Result<Arc<crate::util::watch::Hub>, String> {
        crate::util::watch::Hub::global().map_err(|e| e.to_string())
    }

    /// The change feed's follower, started on first use.
    /// (A failure, e.g. out of inotify instances, is tried again by the next request.)
    pub fn feed(&self) -> Result<Arc<FeedHub>, String> {
        let mut f = self.feed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = f.as_ref() {
            return Ok(h.clone());
        }
        let h = FeedHub::start(&self.cfg.harness_home)
            .map_err(|e| format!("{}: {e}", self.cfg.harness_home.join("feed").display()))?;
        *f = Some(h.clone());
        Ok(h)
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }
}
