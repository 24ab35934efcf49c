//! `GET /agui/thread?threadId=ID`: a thread's messages as this server
//! recorded them (`runs::thread`), the `MESSAGES_SNAPSHOT` a client that
//! holds none of them would get with its next run, without starting one.
//! So a page that opens a thread (a reload, a link on another device) shows
//! its conversation at once, not with the reply to its next message. At a
//! hub, which records no thread, the thread's node answers
//! (`serve::cluster::thread`, over the cluster).

use super::super::http::{respond, respond_error, Request};
use crate::serve::state::Shared;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The route. 400 without a valid `threadId` (the one rule of `POST
/// /agui`'s); 404 for a thread this server has no record of (none, or a
/// server that records nothing); 503 with `Retry-After` while [`READERS`]
/// threads are being read. At a hub, which holds no thread, the thread's
/// node answers (`serve::cluster::thread::get`).
pub fn get(shared: &Shared, stream: &mut TcpStream, req: &Request, cors: &[(&'static str, String)]) {
    let thread_id = match thread_param(req.query.as_deref().unwrap_or_default()) {
        Ok(t) => t,
        Err(m) => {
            respond_error(stream, 400, cors, &m);
            return;
        }
    };
    // A hub holds no thread: its node does, and answers (over the cluster).
    if shared.cfg.mode == super::super::options::Mode::Hub {
        if crate::serve::cluster::thread::get(&shared.cfg, stream, req, cors, &thread_id).is_none() {
            respond_error(stream, 503, cors, "this hub's cluster sidecar has not started");
        }
        return;
    }
    let file = crate::runs::thread::path(&shared.cfg.harness_home, &thread_id);
    if !shared.cfg.record || !file.is_file() {
        respond_error(stream, 404, cors, &format!("no thread {thread_id:?} is recorded here"));
        return;
    }
    // A thread's file is read whole (up to MAX_THREAD_FILE) and folded:
    // a few times its size in memory for the request's length. At most
    // READERS at once keep that bounded whoever asks; the others retry.
    let Some(_reading) = Reader::take() else {
        let h = crate::serve::http::with_retry(cors, 503);
        respond_error(stream, 503, &h, &format!("{READERS} threads are being read now: retry in a second"));
        return;
    };
    let t = crate::runs::thread::Thread::from_lines(crate::runs::thread::read(&file), None);
    // Serialized from the thread's own messages, not a copy of them.
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer<'a> {
        thread_id: &'a str,
        messages: Vec<&'a serde_json::Value>,
    }
    let body = serde_json::to_string(&Answer { thread_id: &thread_id, messages: t.messages() }).unwrap_or_default();
    drop(t);
    let _ = respond(stream, 200, cors, &body);
}

/// Threads read at once by this route ([`get`]): a page opening a thread
/// reads one, and a 32 MiB thread costs a few hundred MB while it is read.
pub const READERS: usize = 1;

static READING: AtomicUsize = AtomicUsize::new(0);

/// One of the [`READERS`] places, given back when dropped.
struct Reader;

impl Reader {
    fn take() -> Option<Reader> {
        READING
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < READERS).then_some(n + 1))
            .ok()
            .map(|_| Reader)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        READING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The `threadId` of a query string, percent-decoded, held to `POST /agui`'s rule.
fn thread_param(query: &str) -> Result<String, String> {
    let raw = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("threadId="))
        .ok_or("threadId: missing (GET /agui/thread?threadId=ID)")?;
    // `+` is a space in a form-encoded query (URLSearchParams writes one so).
    let bytes = super::super::http::percent_decode(&raw.replace('+', " "));
    let id = String::from_utf8(bytes).map_err(|_| "threadId: not UTF-8 once percent-decoded".to_string())?;
    if id.is_empty() || id.len() > super::MAX_ID || id.chars().any(char::is_control) {
        return Err(format!(
            "threadId: must be a non-empty string of at most {} bytes without control characters",
            super::MAX_ID
        ));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::{thread_param, Reader, READERS};

    /// Past READERS readers the route answers 503 (the test holds every place).
    #[test]
    fn readers_beyond_the_limit_wait_their_turn() {
        let held: Vec<Reader> = (0..READERS).map(|_| Reader::take().expect("a free place")).collect();
        assert!(Reader::take().is_none());
        drop(held);
        assert!(Reader::take().is_some());
    }

    #[test]
    fn a_thread_id_is_decoded_and_held_to_the_runs_rule() {
        assert_eq!(thread_param("threadId=thread-1").unwrap(), "thread-1");
        assert_eq!(thread_param("x=1&threadId=a%2Fb+c%C3%A9").unwrap(), "a/b cé");
        for bad in ["", "threadId=", "threadId=%0A", "threadId=%FF", &format!("threadId={}", "x".repeat(257))] {
            assert!(thread_param(bad).is_err(), "{bad}");
        }
    }
}
