//! The route table, and the boundary every request crosses before it: the
//! request head read in time, Host (DNS rebinding), Origin (exact-origin
//! CORS), the token, and a request body's media type and size. Everything
//! here runs before any handler or agent starts.
//!
//! This file points down only: to the handlers ([`agui`], [`supervisor`],
//! [`evidence`], [`runs`], [`studio`]) and to the HTTP helpers ([`http`]).
//! A handler never calls back up here; it gets the request, an already read
//! body and the CORS headers to answer with. A new route is one arm of
//! `route`.

use super::http::{self, method_not_allowed, respond, respond_error, BodyError, Close, ReadError, Request, Timed};
use super::options::Config;
use super::state::Shared;
use super::{agui, evidence, feed, idempotency, links, runs, studio, supervisor};
use crate::control::{Door, Verb};
use crate::runs::{valid_id, valid_run_id};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Instant;

/// Request body, at most (413 beyond): the routes' one limit (`http`'s).
pub use super::http::MAX_BODY;

type Cors = Vec<(&'static str, String)>;

/// Reads one request, applies the boundary, and routes it.
pub fn handle(shared: &Shared, mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(http::WRITE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let idle = shared.cfg.read_timeout;
    let until = Instant::now() + idle.saturating_mul(http::REQUEST_DEADLINE_FACTOR);
    let (req, rest) = match http::read_head(&mut Timed { stream: &stream, idle, until }) {
        Ok(r) => r,
        Err(ReadError::Reject(code, m)) => {
            respond_error(&mut stream, code, &[], &m);
            http::linger_close(&stream);
            return;
        }
        Err(ReadError::Gone) => return,
    };
    let close = match boundary(&shared.cfg, &mut stream, &req) {
        Ok(cors) => route(shared, &mut stream, &req, Pending { rest, until }, &cors),
        Err(close) => close,
    };
    if close == Close::Linger {
        http::linger_close(&stream);
    }
}

/// The checks before any route: Host, Origin, CORS preflight. `Ok` holds
/// the CORS headers every answer carries; `Err` how the connection ends
/// after the refusal already sent.
fn boundary(cfg: &Config, stream: &mut TcpStream, req: &Request) -> Result<Cors, Close> {
    // Two of either would let two readers of the request disagree on which one counts.
    for name in ["Host", "Origin"] {
        if req.header_count(name) > 1 {
            respond_error(stream, 400, &[], &format!("more than one {name} header"));
            return Err(Close::Linger);
        }
    }
    // DNS rebinding: a page on evil.example that resolves to 127.0.0.1 sends
    // `Host: evil.example`; refuse it before anything else, even /healthz.
    if !cfg.allow_remote {
        match req.header("host") {
            Some(h) if is_loopback_host(h) => {}
            // --public-url: the name people reach the server by (through its proxy).
            Some(h) if cfg.public.as_ref().is_some_and(|p| h.trim().eq_ignore_ascii_case(&p.host)) => {}
            Some(h) => {
                respond_error(stream, 403, &[], &format!("Host {h:?} is not a loopback name; refused"));
                return Err(Close::Linger);
            }
            None if req.http11 => {
                respond_error(stream, 400, &[], "missing Host header");
                return Err(Close::Linger);
            }
            None => {}
        }
    }
    let origin = req.header("origin");
    if let Some(o) = origin {
        let public = cfg.public.as_ref().is_some_and(|p| o.trim().eq_ignore_ascii_case(&p.origin));
        if !public && !origin_allowed(o, cfg.ip, cfg.port, &cfg.allow_origins) {
            respond_error(stream, 403, &[], &origin_refusal(o));
            return Err(Close::Linger);
        }
    }
    // Only 100-continue is known (honoured where a body is read); RFC 9110 §10.1.1.
    if let Some(e) = req.header("expect").filter(|e| !e.eq_ignore_ascii_case("100-continue")) {
        respond_error(stream, 417, &[], &format!("Expect {e:?} is not supported (only 100-continue)"));
        return Err(Close::Linger);
    }
    let cors = cors_headers(origin);
    if req.method == "OPTIONS" {
        // A preflight never carries credentials: answer it before the token check.
        if origin.is_none() {
            respond_error(stream, 400, &[], "OPTIONS is only answered as a CORS preflight (with an Origin)");
            return Err(Close::Linger);
        }
        let mut h = cors.clone();
        h.push(("Access-Control-Allow-Methods", "GET, POST, OPTIONS".into()));
        // Every request header a client of the routes sends: a task stream
        // or the feed resumed by `Last-Event-ID` too.
        h.push(("Access-Control-Allow-Headers", "content-type, authorization, idempotency-key, last-event-id".into()));
        h.push(("Access-Control-Max-Age", "600".into()));
        let _ = respond(stream, 204, &h, "");
        return Err(Close::Linger);
    }
    Ok(cors)
}

/// The part of a request not read yet: the bytes read past the head, and
/// when the whole request must have arrived.
struct Pending {
    rest: Vec<u8>,
    until: Instant,
}

/// The route table.
fn route(shared: &Shared, stream: &mut TcpStream, req: &Request, body: Pending, cors: &Cors) -> Close {
    let cfg = &shared.cfg;
    if req.path == "/healthz" {
        return match req.method.as_str() {
            "GET" => {
                let _ = respond(stream, 200, cors, r#"{"ok":true}"#);
                Close::Linger
            }
            _ => method_not_allowed(stream, cors, "GET"),
        };
    }
    // The page and its files are constants of the binary and hold no data:
    // they load without the token, and the page sends it on each API call.
    if studio::is_static(&req.path) {
        return studio::get(stream, req, cors);
    }
    // An approval link is its own capability (one answer): no bearer token.
    if let Some(token) = req.path.strip_prefix(links::PREFIX) {
        return link_route(shared, stream, req, body, cors, token);
    }
    if let Some(tokens) = &cfg.token {
        if super::tokens::caller(tokens, req).is_none() {
            respond_error(stream, 401, cors, "missing or wrong token: send Authorization: Bearer <token>");
            return Close::Linger;
        }
    }
    match (req.path.as_str(), req.method.as_str()) {
        ("/api/info", "GET") => {
            let _ = respond(stream, 200, cors, &info(shared).to_string());
            Close::Linger
        }
        ("/api/info", _) => method_not_allowed(stream, cors, "GET"),
        ("/api/evidence", _) => evidence::get(shared, stream, req, cors),
        ("/agui", "POST") => match read_json_body(cfg, stream, req, body, cors) {
            Ok(body) => match bound_key(shared, stream, req, cors, &body) {
                // A hub: the thread's node runs it (spec/CLUSTER.md).
                Ok(()) => super::cluster::agui(cfg, stream, req, &body, cors)
                    .unwrap_or_else(|| agui::post(shared, stream, req, &body, cors)),
                Err(close) => close,
            },
            Err(close) => close,
        },
        ("/agui", _) => method_not_allowed(stream, cors, "POST"),
        // AG-UI AgentCapabilities (the @ag-ui/core shape).
        ("/agui/capabilities", "GET") => {
            let _ = respond(stream, 200, cors, &agui::capabilities(shared).to_string());
            Close::Linger
        }
        ("/agui/capabilities", _) => method_not_allowed(stream, cors, "GET"),
        // A thread's messages, to show a reopened thread at once.
        ("/agui/thread", "GET") => {
            agui::history::get(shared, stream, req, cors);
            Close::Linger
        }
        ("/agui/thread", _) => method_not_allowed(stream, cors, "GET"),
        ("/runs", _) => runs_route(shared, stream, req, body, cors, &[]),
        (p, _) if p.starts_with("/runs/") => {
            let segs: Vec<&str> = p["/runs/".len()..].split('/').collect();
            // `/runs/` is the listing too.
            let segs: &[&str] = if segs == [""] { &[] } else { &segs };
            runs_route(shared, stream, req, body, cors, segs)
        }
        _ => {
            respond_error(stream, 404, cors, &format!("no route {}", req.path));
            Close::Linger
        }
    }
}

/// Everything under `/runs`: the durable views and streams (GET), the control verbs (POST).
fn runs_route(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    body: Pending,
    cors: &Cors,
    segs: &[&str],
) -> Close {
    match (req.method.as_str(), segs) {
        ("GET", []) => runs::list(shared, stream, req, cors),
        // Never a run id (those are `<hash>--<slug>`).
        // A hub: the cluster's feed, ids its stream sequences (spec/CLUSTER.md).
        ("GET", ["events"]) => {
            super::cluster::feed(&shared.cfg, stream, req, cors).unwrap_or_else(|| feed::get(shared, stream, req, cors))
        }
        (_, ["events"]) => method_not_allowed(stream, cors, "GET"),
        ("GET", [id]) => runs::show(shared, stream, cors, id),
        ("GET", [id, "journal"]) => feed::record(shared, stream, req, cors, id),
        ("GET", [id, "tasks", tid]) => runs::task(shared, stream, cors, id, tid),
        ("GET", [id, "tasks", tid, "stream"]) => runs::stream(shared, stream, req, cors, id, tid),
        // A run id may be a hub's `<node>.<run>`, longer than other ids.
        ("GET", [id, rest @ ..]) if !valid_run_id(id) || rest.iter().any(|s| !valid_id(s)) => {
            let m = format!(
                "{}: every path segment must be an id of A-Z a-z 0-9 . _ - (no \"..\", no empty segment)",
                req.path
            );
            respond_error(stream, 400, cors, &m);
            Close::Linger
        }
        ("GET", _) => {
            respond_error(stream, 404, cors, &format!("no route {}", req.path));
            Close::Linger
        }
        // The verb names are `crate::control::Verb`'s.
        ("POST", [id, "tasks", tid, verb]) if is_verb(verb, &Verb::TASK_ROUTE) => {
            control_route(shared, stream, req, body, cors, id, Some(tid), verb)
        }
        ("POST", [id, verb]) if is_verb(verb, &Verb::RUN_ROUTE) => {
            control_route(shared, stream, req, body, cors, id, None, verb)
        }
        _ => method_not_allowed(stream, cors, "GET"),
    }
}

fn is_verb(name: &str, of: &[Verb]) -> bool {
    Verb::parse(name).is_some_and(|v| of.contains(&v))
}

/// A control verb: ids checked, then the body (required for steer; any
/// other verb may send one, and it is then held to the same JSON boundary).
#[allow(clippy::too_many_arguments)]
fn control_route(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    body: Pending,
    cors: &Cors,
    id: &str,
    task: Option<&str>,
    verb: &str,
) -> Close {
    if !valid_run_id(id) || task.is_some_and(|t| !valid_id(t)) {
        respond_error(stream, 400, cors, &format!("{}: run and task must be ids of A-Z a-z 0-9 . _ -", req.path));
        return Close::Linger;
    }
    let has_body =
        req.header("transfer-encoding").is_some() || req.header("content-length").is_some_and(|l| l.trim() != "0");
    let body = if matches!(Verb::parse(verb), Some(Verb::Steer | Verb::Answer)) || has_body {
        match read_json_body(&shared.cfg, stream, req, body, cors) {
            Ok(b) => b,
            Err(close) => return close,
        }
    } else {
        Vec::new()
    };
    // Who asks: the name of a named token, else the server (the journal's actor and `by`);
    // for a hub's command, the person the hub's caller is (the sidecar's token says so).
    let tokens = shared.cfg.token.as_ref();
    // A hub's command journals the hub too: `<person>@<hub>` (spec/CLUSTER.md, Control).
    let via_hub = tokens.and_then(|t| super::tokens::acting_for_via_hub(t, req));
    let (person, door) = match via_hub.as_deref() {
        Some(p) => (Some(p), Door::Hub),
        None => (tokens.and_then(|t| super::tokens::caller(t, req)).flatten(), Door::TaskRoute),
    };
    keyed(shared, stream, req, cors, person.unwrap_or(""), &body, |out| {
        // A hub: the run is a node's, the request goes to it (spec/CLUSTER.md).
        if let Some((code, answer)) =
            super::cluster::forward(id, task, verb, &body, req.header(idempotency::HEADER), person, tokens.is_some())
        {
            // The node's 503 (its supervisor busy, its agent not reading)
            // or the hub's own (no node): nothing ran, try again.
            let _ = respond(out, code, &super::http::with_retry(cors, code), &answer);
            return Close::Linger;
        }
        supervisor::post(shared, out, cors, id, task, verb, &body, person, door)
    })
}

/// A command under the request's `Idempotency-Key` ([`idempotency`]): run
/// once (its reply kept), replayed, or refused; without a key it just runs.
/// `caller` is who asks (a token's name, or a link), so that two people's
/// keys never meet.
fn keyed(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    cors: &Cors,
    caller: &str,
    body: &[u8],
    run: impl FnOnce(&mut Vec<u8>) -> Close,
) -> Close {
    let Some(key) = req.header(idempotency::HEADER).map(str::trim) else {
        let mut out = Vec::new();
        let close = run(&mut out);
        let _ = stream.write_all(&out);
        return close;
    };
    if !idempotency::valid(key) {
        let m = format!("Idempotency-Key: 1 to {} printable ASCII characters", idempotency::MAX_KEY);
        respond_error(stream, 400, cors, &m);
        return Close::Linger;
    }
    let fingerprint = idempotency::fingerprint(caller, &req.method, &req.path, body);
    let held = idempotency::held_as(caller, key);
    match shared.keys.claim(&held, fingerprint, false) {
        idempotency::Claim::Conflict => {
            let m = format!(
                "Idempotency-Key {key:?} was used for another request (another body, route or caller): nothing was done; a new command takes a new key"
            );
            respond_error(stream, 422, cors, &m);
            Close::Linger
        }
        idempotency::Claim::Running => {
            let mut h = cors.clone();
            h.push(("Retry-After", "1".into()));
            let m = format!(
                "the command of Idempotency-Key {key:?} is still running: it is not run again; retry for its reply"
            );
            respond_error(stream, 409, &h, &m);
            Close::Linger
        }
        idempotency::Claim::Replay(first) => {
            let _ = stream.write_all(&idempotency::replayed(&first, cors));
            Close::Linger
        }
        idempotency::Claim::Run => {
            // A panic in `run` must not leave the key running for ever.
            struct Forget<'a>(&'a idempotency::Keys, &'a str, bool);
            impl Drop for Forget<'_> {
                fn drop(&mut self) {
                    if !self.2 {
                        self.0.forget(self.1);
                    }
                }
            }
            let mut guard = Forget(&shared.keys, &held, false);
            let mut out = Vec::new();
            let close = run(&mut out);
            // A hub's 502 says the node may have run it: a retry goes on to
            // the node, whose own key store knows what it did.
            if super::cluster::is_hub() && idempotency::status_of(&out) == Some(502) {
                shared.keys.forget(&held);
            } else {
                shared.keys.done(&held, &out);
            }
            guard.2 = true;
            let _ = stream.write_all(&out);
            close
        }
    }
}

/// `POST /agui` under an `Idempotency-Key`: its reply is a stream, which
/// its `runId` already replays (`agui::Book`), so the key binds the body
/// only: the same key with another body is refused (422), nothing run.
fn bound_key(shared: &Shared, stream: &mut TcpStream, req: &Request, cors: &Cors, body: &[u8]) -> Result<(), Close> {
    let Some(key) = req.header(idempotency::HEADER).map(str::trim) else { return Ok(()) };
    let caller = shared.cfg.token.as_ref().and_then(|t| super::tokens::caller(t, req)).flatten().unwrap_or("");
    let refusal = if !idempotency::valid(key) {
        (400, format!("Idempotency-Key: 1 to {} printable ASCII characters", idempotency::MAX_KEY))
    } else if shared.keys.claim(
        &idempotency::held_as(caller, key),
        idempotency::fingerprint(caller, &req.method, &req.path, body),
        true,
    ) == idempotency::Claim::Conflict
    {
        (
            422,
            format!(
                "Idempotency-Key {key:?} was used for another request: nothing was done; a new run takes a new key"
            ),
        )
    } else {
        return Ok(());
    };
    respond_error(stream, refusal.0, cors, &refusal.1);
    Err(Close::Linger)
}

/// `GET|POST /a/<token>`: rate-limited before anything is read or looked
/// up; a POST's body is a form or JSON. At a hub, the node that minted the
/// link answers it (through the cluster, as a command).
fn link_route(
    shared: &Shared,
    stream: &mut TcpStream,
    req: &Request,
    body: Pending,
    cors: &Cors,
    token: &str,
) -> Close {
    let peer = stream.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    // A caller holding one of this server's tokens is not limited by its
    // address: a node's cluster sidecar forwards every hub's link requests
    // from one address, and the hub limited each of its own clients'. Every
    // request still counts against its link's limit.
    let known = shared.cfg.token.as_ref().is_some_and(|t| super::tokens::caller(t, req).is_some());
    // A server that mints links checks the MAC first (a hub holds no secret:
    // its node does): a made-up token counts only against its address, and
    // is refused before a window or an idempotency key is kept for it.
    let forged = !super::cluster::is_hub() && shared.cfg.links.as_ref().is_some_and(|k| k.verify(token).is_none());
    // `|`, not `||`: every request counts against both limits.
    if (!forged && !shared.link_limits.allow(&links::limit_key(token), links::PER_TOKEN))
        | (!known && !shared.link_limits.allow(&format!("a:{peer}"), links::PER_ADDRESS))
    {
        let mut h = cors.clone();
        h.push(("Retry-After", "60".into()));
        respond_error(stream, 429, &h, "too many requests for this link or from this address; try again in a minute");
        return Close::Linger;
    }
    let body = match req.method.as_str() {
        "GET" => None,
        "POST" => {
            let json = req.header("content-type").is_some_and(is_json_media_type);
            let form = req.header("content-type").is_some_and(|ct| {
                ct.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
            });
            if !json && !form {
                respond_error(stream, 415, cors, "expected application/x-www-form-urlencoded or application/json");
                return Close::Linger;
            }
            match read_body_checked(&shared.cfg, stream, req, body, cors) {
                Ok(b) => Some((b, json)),
                Err(close) => return close,
            }
        }
        _ => return method_not_allowed(stream, cors, "GET, POST"),
    };
    if super::cluster::is_hub() {
        return links::at_hub(&shared.cfg.harness_home, stream, cors, req, token, body);
    }
    // A hub's link request, made by this node's sidecar: journaled as the
    // link's name at that hub (`<name>@<hub>`), as a forwarded command is.
    let via = shared.cfg.token.as_ref().and_then(|t| super::tokens::forwarding_hub(t, req));
    match body {
        // Refused before it is keyed ([`links::handle`] says why).
        Some(b) if forged => links::handle(shared, stream, cors, token, Some(b), via),
        // A link is its own caller: its token is in the path.
        Some(b) => {
            let bytes = b.0.clone();
            keyed(shared, stream, req, cors, "link", &bytes, |out| {
                links::handle(shared, out, cors, token, Some(b), via)
            })
        }
        None => links::handle(shared, stream, cors, token, None, via),
    }
}

/// `GET /api/info`: what the page needs to know about this server.
fn info(shared: &Shared) -> serde_json::Value {
    let cfg = &shared.cfg;
    let mut v = serde_json::json!({
        "name": super::options::BIN,
        "version": env!("CARGO_PKG_VERSION"),
        "agui": "/agui",
        // One vocabulary of modes (serve::Mode): replay, demo, agent (and which), hub.
        "mode": cfg.mode.word(),
        "agent": cfg.agent_name,
        "evidence": cfg.evidence.is_some(),
        "tokenRequired": cfg.token.is_some(),
        "interactive": cfg.interactive,
        "capabilities": agui::capabilities(shared),
    });
    // A hub: its nodes and their liveness (the chat's node picker).
    if let Some(nodes) = super::cluster::nodes_info() {
        v["nodes"] = nodes;
    }
    v
}

/// The boundary for a request body: a JSON media type, `Expect:
/// 100-continue` honoured, at most [`MAX_BODY`] bytes, in time. `Err` holds
/// how the connection ends after the error reply already sent.
fn read_json_body(
    cfg: &Config,
    stream: &mut TcpStream,
    req: &Request,
    pending: Pending,
    cors: &Cors,
) -> Result<Vec<u8>, Close> {
    match req.header("content-type") {
        Some(ct) if is_json_media_type(ct) => {}
        Some(ct) => {
            respond_error(stream, 415, cors, &format!("Content-Type {ct:?}: expected application/json"));
            return Err(Close::Linger);
        }
        None => {
            respond_error(stream, 415, cors, "missing Content-Type: expected application/json");
            return Err(Close::Linger);
        }
    }
    read_body_checked(cfg, stream, req, pending, cors)
}

/// [`read_json_body`] past its media type: `Expect`, size, time.
fn read_body_checked(
    cfg: &Config,
    stream: &mut TcpStream,
    req: &Request,
    pending: Pending,
    cors: &Cors,
) -> Result<Vec<u8>, Close> {
    if req.header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        // A client that waits for our go-ahead need not send a body we would refuse.
        let declared = req.header("content-length").and_then(|l| l.trim().parse::<u64>().ok());
        if req.header("transfer-encoding").is_none() && declared.is_some_and(|l| l > MAX_BODY as u64) {
            respond_error(stream, 413, cors, &format!("the request body is larger than {MAX_BODY} bytes"));
            return Err(Close::Linger);
        }
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let src = io::Cursor::new(pending.rest).chain(Timed { stream, idle: cfg.read_timeout, until: pending.until });
    let body = match http::read_body(req, src, MAX_BODY) {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            respond_error(stream, 413, cors, &format!("the request body is larger than {MAX_BODY} bytes"));
            return Err(Close::Linger);
        }
        Err(BodyError::Bad(m)) => {
            respond_error(stream, 400, cors, &m);
            return Err(Close::Linger);
        }
        Err(BodyError::Timeout) => {
            respond_error(stream, 408, cors, "the request body did not arrive in time");
            return Err(Close::Linger);
        }
        Err(BodyError::Gone) => return Err(Close::Now),
    };
    Ok(body)
}

/// The CORS headers for an allowed `Origin` (none without one).
pub fn cors_headers(origin: Option<&str>) -> Vec<(&'static str, String)> {
    match origin {
        // The response headers a page must read to follow the docs: when to
        // retry (`Retry-After` of a 503 or 429), and that a keyed request
        // was a replay.
        Some(o) => vec![
            ("Access-Control-Allow-Origin", o.trim().to_string()),
            ("Access-Control-Expose-Headers", format!("Retry-After, {}", super::idempotency::REPLAYED)),
            ("Vary", "Origin".to_string()),
        ],
        None => Vec::new(),
    }
}

/// True for `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    let name = if let Some(r) = host.strip_prefix('[') {
        match r.split_once(']') {
            Some((inside, rest)) if rest.is_empty() || is_port_suffix(rest) => {
                return inside.parse::<std::net::Ipv6Addr>().is_ok_and(|a| a.is_loopback());
            }
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((n, p)) if is_port_suffix(&format!(":{p}")) => n,
            Some(_) => return false,
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

/// `:PORT` with PORT in 1..=65535 (a port no socket can have names no server).
fn is_port_suffix(s: &str) -> bool {
    s.strip_prefix(':').is_some_and(|d| {
        !d.is_empty()
            && d.len() <= 5
            && d.bytes().all(|b| b.is_ascii_digit())
            && d.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p))
    })
}

/// The server's own origins: what a page it served itself would send,
/// loaded from the loopback names or from the address it listens on
/// (`--listen 127.0.0.2:8787` serves its page from there).
pub fn own_origins(ip: IpAddr, port: u16) -> Vec<String> {
    let mut v =
        vec![format!("http://127.0.0.1:{port}"), format!("http://localhost:{port}"), format!("http://[::1]:{port}")];
    if !ip.is_unspecified() {
        let own = format!("http://{}", SocketAddr::new(ip, port));
        if !v.contains(&own) {
            v.push(own);
        }
    }
    v
}

/// Whether a request's `Origin` may use the server.
pub fn origin_allowed(origin: &str, ip: IpAddr, port: u16, extra: &[String]) -> bool {
    let o = origin.trim();
    own_origins(ip, port).iter().chain(extra).any(|a| a.eq_ignore_ascii_case(o))
}

/// Why an origin is refused, and the way out only where there is one:
/// `--allow-origin` takes exactly `scheme://host[:port]`, never the opaque
/// origin `null` (any sandboxed frame or file:// page anywhere sends it, so
/// allowing it would allow every such page).
fn origin_refusal(o: &str) -> String {
    if o.trim().eq_ignore_ascii_case("null") {
        return "Origin \"null\" (an opaque origin: a file:// page, a sandboxed frame or a redirect) is not allowed \
                and cannot be: serve the page from an http(s) origin and pass --allow-origin for that origin"
            .to_string();
    }
    match crate::util::origin::parse_origin(o.trim()) {
        Ok(ok) => format!("Origin {o:?} is not allowed; start the server with --allow-origin {ok} to allow it"),
        Err(_) => format!("Origin {o:?} is not allowed (not of the form scheme://host[:port])"),
    }
}

/// `application/json`, parameters allowed (`; charset=utf-8`).
pub fn is_json_media_type(v: &str) -> bool {
    v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

pub use super::tokens::ct_eq;
pub use super::tokens::query_token;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_and_origins() {
        for h in ["127.0.0.1:8787", "localhost", "LOCALHOST:1", "[::1]:80", "127.1.2.3"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["evil.example:8787", "0.0.0.0:1", "[::2]:1", "localhost.evil.example", "127.0.0.1:x", ""] {
            assert!(!is_loopback_host(h), "{h}");
        }
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(origin_allowed("http://localhost:9", lo, 9, &[]));
        assert!(!origin_allowed("http://localhost:10", lo, 9, &[]));
        assert!(origin_allowed("https://app.example", lo, 9, &["https://app.example".into()]));
        assert!(!origin_allowed("null", lo, 9, &[]));
        // The address it listens on is its own origin too.
        assert!(!origin_allowed("http://127.0.0.2:9", lo, 9, &[]));
        assert!(origin_allowed("http://127.0.0.2:9", "127.0.0.2".parse().unwrap(), 9, &[]));
        assert!(origin_allowed("http://[::1]:9", "::1".parse().unwrap(), 9, &[]));
        // Ports are 1 to 65535.
        for h in ["localhost:99999", "localhost:0", "127.0.0.1:65536", "[::1]:70000"] {
            assert!(!is_loopback_host(h), "{h}");
        }
        assert!(is_loopback_host("localhost:65535"));
    }

    #[test]
    fn tokens() {
        assert!(ct_eq(b"abc", b"abc") && !ct_eq(b"abc", b"abd") && !ct_eq(b"abc", b"ab"));
        assert_eq!(query_token("a=1&token=x%2By+z").unwrap(), b"x+y+z");
        assert_eq!(query_token("token=%zz%4").unwrap(), b"%zz%4");
        assert!(is_json_media_type("Application/JSON; charset=utf-8") && !is_json_media_type("text/plain"));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn no_input_panics(head in ".{0,300}", bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = is_loopback_host(&head);
            let _ = query_token(&head);
            let _ = crate::util::origin::parse_origin(&head);
            let _ = agui::parse_input(&bytes);
        }
    }
}
