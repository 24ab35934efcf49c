//! Interactive sessions: an agent running with its input open, answered
//! while it works (approvals, questions, plan approval), steered mid-turn,
//! interrupted without losing the session.
//!
//! Two halves:
//! - [`core`]: pure. [`Session`] is a state object with no IO, fed the
//!   agent's lines, the session input and the time, returning a [`Step`]
//!   for each; what one agent's wire protocol says is an [`Agent`]
//!   ([`claude`], [`codex`], [`acp`]); the session input format
//!   ([`input`]); where a grant reaches ([`reach`]).
//! - [`io`]: the processes and the loop. Agent processes are started,
//!   signalled and reaped only in [`proc`]; each live session has one loop
//!   ([`io::engine`]) that alone steps it and writes its output and its
//!   agent's input ([`writer`]), driven on `runwire-session`'s main thread
//!   ([`driver::run`]) or on a thread of its own for the server
//!   ([`engine::Engine`], the handle callers command); its output is tapped
//!   for the server's reader ([`tap`]) and recorded ([`record`]); agents
//!   are launched by kind ([`launch`]).
//!
//! The modules are also reachable at their old paths (`session::proc`,
//! `session::input`, …), so code written against them keeps building.

pub mod core;
pub mod io;

pub use self::core::*;
pub use self::core::{acp, claude, codex, input, reach};
pub use io::{driver, engine, launch, proc, reaper, record, tap, wrappers, writer};
