//! The interactive sessions' book, as types: every thread's [`Thread`]
//! (its live agent, [`State`]) in [`Sessions`]. A leaf: the server's state
//! holds the book; `threads.rs` keeps, starts and ends the sessions.

use crate::pipeline::normalize::Normalizer;
use crate::runs::record::Recorder;
use crate::serve::interrupts::Raised;
use crate::session::engine::Engine;
use crate::session::tap::Feed;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// The live agent of a thread and what the server knows about it.
pub struct Thread {
    pub id: String,
    pub(super) st: Mutex<State>,
    /// Notified when a start ends ([`State::starting`] turns false): a
    /// caller that must see the session as started waits here, with the
    /// thread's lock let go.
    pub(super) started: Condvar,
}

/// Why a session is taken off its thread (what its record then says).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// The agent's process exited on its own.
    Exited,
    /// `POST …/kill`.
    Killed,
    /// Ended to make room for another thread's session.
    Evicted,
    /// The server shuts down.
    Shutdown,
}

pub(super) struct State {
    pub(super) agent: Option<Engine>,
    /// A run is starting the session (making its record, spawning its
    /// agent) with no lock of the thread held: no second start, and the
    /// thread counts as live (never evicted nor forgotten meanwhile).
    pub(super) starting: bool,
    /// The session's output, with the reader's cursor, held here while no
    /// run streams it.
    pub(super) rx: Option<Feed>,
    pub(super) norm: Normalizer,
    /// Every request the session raised, as AG-UI interrupts.
    pub(super) raised: Raised,
    /// Agent tool id -> AG-UI toolCallId of every call streamed on the thread.
    pub(super) tool_ids: crate::util::bounded::Bounded<String>,
    /// The agent's session id, for `--resume` when the process is gone.
    pub(super) resume: Option<String>,
    /// The session's record; its log is written as lines arrive (by the
    /// session's reader), whether a run is streaming or not.
    pub(super) rec: Arc<Mutex<Option<Recorder>>>,
    /// The recorded run's id (`GET /runs/:id`, the task routes).
    pub(super) record_id: Option<String>,
    /// Agent processes the thread has started: the running one's
    /// generation (on its status and its open requests).
    pub(super) generation: u64,
    /// When a run last used the session (the idle one used least recently is ended first).
    pub(super) last_used: Instant,
    /// The name approval links are minted for: the named person whose
    /// message the agent is working on, else `link`.
    pub(super) link_for: Arc<Mutex<String>>,
}

/// Every thread's session, and the recorded run id -> thread index.
#[derive(Default)]
pub struct Sessions {
    pub(super) threads: Mutex<HashMap<String, Arc<Thread>>>,
    pub(super) by_record: Mutex<HashMap<String, String>>,
}
