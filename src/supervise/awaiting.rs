//! A control request waiting for its session's acknowledgement: what the
//! supervisor keeps of a session input line it wrote into a running turn
//! (the [`super::runner::Running`] step holds them) and the reply an
//! acknowledgement makes. A leaf: the loop, the runner and the commands use it.

use crate::control::{Door, Reply};
use crate::session::input::AckLine;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a control request waits for the session's acknowledgement
/// before it is answered without it (the line was written).
pub const ACK_WAIT: Duration = Duration::from_secs(1);

/// A control request waiting for the session's acknowledgement of the
/// session input line it wrote: the session applies the steer / stop /
/// answer rules (`spec/SESSION-INPUT.md`), the supervisor reports what it did.
pub struct Awaiting {
    /// The line's number in the session input.
    pub line: u64,
    pub what: Asked,
    pub actor: String,
    pub door: Door,
    /// Taken once the request is answered: at the acknowledgement, or
    /// without it after [`ACK_WAIT`] (the entry then stays for the
    /// acknowledgement's effects: a steer's record, the hold it ends).
    pub reply: Option<mpsc::Sender<Reply>>,
    pub since: Instant,
}

pub enum Asked {
    /// A steer of this many bytes.
    Steer(usize),
    Stop,
    /// An answer to this request.
    Answer(String),
}

/// The reply to a request whose line the session acknowledged with `ack`
/// (`None`: no acknowledgement came), and for a steer taken, the detail of
/// its `steer-queued` record.
pub fn acked(id: &str, w: &Awaiting, ack: Option<&AckLine>, state: Option<String>) -> (Reply, Option<String>) {
    let Some(a) = ack else {
        let why = format!(
            "task {id}: written to its session (input line {}); the session has not acknowledged it yet",
            w.line
        );
        return (Reply::ok(why, state), None);
    };
    if let Some(why) = &a.refused {
        let r = Reply::refuse(format!("task {id}: {why}"), state);
        // Wrong in itself (an answer that does not fit its request): said
        // as every door says it (`bad_request`, HTTP 400), not as a refusal
        // for the task's state.
        let r = if a.invalid == Some(true) { Reply { code: Some(crate::control::BAD_REQUEST.into()), ..r } } else { r };
        return (r, None);
    }
    let detail = a.detail.as_deref().unwrap_or("taken");
    match &w.what {
        Asked::Steer(n) => {
            // The journal's word for what the message did (the session's ack).
            let how = match a.ack.as_deref() {
                Some("started") => "live, new turn",
                Some("interrupted_then_started") => "live, interrupt",
                Some("cancelled_then_prompted") => "live, cancel then prompt",
                Some("pending") => "live, joined or next turn (the task log shows which)",
                _ => "live",
            };
            let reply = Reply::ok(format!("task {id}: {detail} (live: no kill, no resume)"), state);
            (reply, Some(format!("task {id}: {n} bytes, {how}")))
        }
        Asked::Stop => (Reply::ok(format!("task {id}: {detail} (steer to go on, kill to end it)"), state), None),
        Asked::Answer(rid) => {
            let sent = a.ack.as_deref() != Some(crate::session::input::ack_name(crate::session::Ack::Replay));
            (Reply::answered(sent, format!("task {id}: answer to {rid:?}: {detail}"), state), None)
        }
    }
}
