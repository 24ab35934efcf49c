//! Interactive sessions: an agent running with its input open, answered
//! while it works (approvals, questions, plan approval), steered mid-turn,
//! interrupted without losing the session.
//!
//! Shaped like every other stage: [`Session`] is a state object with no IO.
//! It is fed the agent's lines ([`Session::agent_line`]), the session input
//! ([`Session::input`], the format of `spec/SESSION-INPUT.md`) and the time
//! ([`Session::tick`]), and each call returns a [`Step`]: lines for the
//! session's output (the task log: the agent's lines verbatim plus the
//! session's own `runwire.request` / `runwire.answer` lines, and the
//! `runwire.idle` line the driver adds from [`Session::idle_line`]), lines to write
//! to the agent, and the requests raised and closed (for the journal).
//! What is generic (pending requests, expiry, fail-closed denial, checking
//! answers, the record) lives here; what one agent's wire protocol says is
//! an [`Agent`] ([`claude::Claude`], [`codex::Codex`], [`acp::Acp`]). The
//! IO around it, its one loop included, is [`crate::session::io`], used by
//! `runwire-session`, the server and the supervisor. Processes themselves
//! (start, signal, reap, never leave a descendant behind) are
//! [`crate::session::proc`]'s, for sessions and batch runs alike.

pub mod acp;
pub mod claude;
pub mod codex;
pub mod input;
pub mod reach;
mod session;
mod types;

pub use input::{AnswerInput, Input, SteerInput};
pub use session::{answer_label, answer_of, Session};
pub(crate) use session::{json_line, options_of, questions_of, refusal, same_answer};
pub use types::*;
