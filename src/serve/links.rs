//! Approval links (`--public-url URL --link-secret-file F`): for every
//! approval and every question the server's sessions raise, a link
//! `URL/a/<token>` that is the capability for that one answer and nothing
//! else (a question's page lists its choices: [`form_answers`]). It is journaled with
//! the request (the `requested` record's `links`), so the change feed's
//! `needs_input` event carries it. A supervisor given the same flags mints
//! links for its tasks' approvals the same way; those are answered here
//! through its socket (`super::supervisor::link_answer`).
//!
//! The token is `<claims>.<mac>`: the claims (run, task, runwire's
//! interrupt id, the decisions offered, the interrupt's own deadline, the
//! name the link was minted for, the tool) as JSON in base64url, and an
//! HMAC-SHA256 of that text under the link secret, base64url. A token is
//! checked before anything is looked up: a tampered or foreign token names
//! nothing. `GET` shows what is asked and never acts; `POST` answers once,
//! through the same [`Command`] path as every other door (door `link`).
//! Used, expired or superseded links get a refusal page and change
//! nothing. Link routes need no bearer token and are rate-limited
//! ([`PER_TOKEN`] a minute per token, [`PER_ADDRESS`] per client address,
//! at most [`MAX_KEYS`] keys held, the oldest window making room). At a
//! server that mints links, a token whose MAC fails is refused before any
//! book is touched but its address's count: it takes no token's window and
//! no idempotency key, so made-up tokens crowd out nobody's.
//!
//! [`Command`]: crate::control::Command

use super::http::Close;
use serde::Deserialize;

pub use super::link_keys::*;

/// Text for HTML (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font:16px/1.4 system-ui,sans-serif;margin:0 auto;padding:12px;max-width:40em}\
pre{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;padding:8px;font-size:14px}\
.add{color:#060}.del{color:#a00}form{margin:12px 0}button{font-size:18px;padding:10px 18px;width:100%}\
input[type=text]{font-size:16px;width:100%;box-sizing:border-box;padding:8px;margin-bottom:6px}\
fieldset{border:1px solid #ccc;margin:0 0 12px;min-width:0}label.opt{display:block;padding:8px 0;font-size:17px}\
input[type=radio],input[type=checkbox]{width:22px;height:22px;vertical-align:middle}";

/// The page's `Content-Security-Policy`: nothing loads, no script runs,
/// and the one style allowed is the page's own `<style>` by its hash (not
/// `'unsafe-inline'`: text a request carries into the page, escaped as it
/// is, still could not style it).
fn csp() -> &'static str {
    static CSP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSP.get_or_init(|| {
        use base64::Engine as _;
        use sha2::Digest as _;
        let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE.as_bytes()));
        format!("default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; frame-ancestors 'none'")
    })
}

/// A whole page.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{t}</title>\
<style>{STYLE}</style></head><body><h1>{t}</h1>{body}</body></html>",
        t = esc(title)
    )
}

/// The page of an open request: what is asked, the tool and its input
/// (the diff of an edit), and the two forms; a question's choices.
pub fn ask_page(c: &Claims, request: Option<&crate::pipeline::events::InputRequest>) -> String {
    if c.d.iter().any(|d| d == "answer") {
        return question_page(c, request);
    }
    let tool = request.and_then(|r| r.tool.clone()).or_else(|| c.k.clone()).unwrap_or_else(|| "a tool".into());
    let mut b = format!("<p>The agent asks to use <b>{}</b>.</p>", esc(&tool));
    if let Some(m) = request.and_then(|r| r.message.as_deref()) {
        b.push_str(&format!("<p>{}</p>", esc(m)));
    }
    if let Some(input) = request.and_then(|r| r.input.as_ref()) {
        let old = input.get("old_string").and_then(|v| v.as_str());
        let new = input.get("new_string").and_then(|v| v.as_str());
        if let (Some(old), Some(new)) = (old, new) {
            if let Some(f) = input.get("file_path").and_then(|v| v.as_str()) {
                b.push_str(&format!("<p>File: <code>{}</code></p>", esc(f)));
            }
            b.push_str("<pre>");
            for l in old.lines() {
                b.push_str(&format!("<span class=\"del\">- {}</span>\n", esc(l)));
            }
            for l in new.lines() {
                b.push_str(&format!("<span class=\"add\">+ {}</span>\n", esc(l)));
            }
            b.push_str("</pre>");
        } else {
            let pretty = serde_json::to_string_pretty(input).unwrap_or_default();
            b.push_str(&format!("<pre>{}</pre>", esc(&pretty)));
        }
    }
    b.push_str(&format!("<p>Run <code>{}</code>, task <code>{}</code>. ", esc(&c.r), esc(&c.t)));
    b.push_str(&format!(
        "Unanswered, it is denied at {} UTC.</p>",
        esc(crate::util::time::format_ms(c.e).replace('T', " ").trim_end_matches('Z'))
    ));
    if c.d.iter().any(|d| d == "allow") {
        b.push_str("<form method=\"post\"><input type=\"hidden\" name=\"decision\" value=\"allow\"><button type=\"submit\">Approve</button></form>");
    }
    if c.d.iter().any(|d| d == "deny") {
        b.push_str(
            "<form method=\"post\"><input type=\"hidden\" name=\"decision\" value=\"deny\">\
<label>Reason (told to the agent)<input type=\"text\" name=\"reason\" maxlength=\"2000\"></label>\
<button type=\"submit\">Deny</button></form>",
        );
    }
    page("Approve or deny?", &b)
}

/// A question's page: each question with its choices (radio buttons, or
/// checkboxes for a multi-select one; a text box where the person's own
/// words are taken), one Send, and Dismiss. Form fields: `q<N>` a chosen
/// label (repeated for several), `q<N>-own` the person's own words.
fn question_page(c: &Claims, request: Option<&crate::pipeline::events::InputRequest>) -> String {
    let mut b = String::new();
    let deadline = format!(
        "<p>Run <code>{}</code>, task <code>{}</code>. Unanswered, it is dismissed at {} UTC.</p>",
        esc(&c.r),
        esc(&c.t),
        esc(crate::util::time::format_ms(c.e).replace('T', " ").trim_end_matches('Z'))
    );
    let questions = request.and_then(|r| r.questions.clone()).unwrap_or_default();
    if questions.is_empty() {
        b.push_str("<p>The agent asks a question this server cannot show here; answer it in the studio.</p>");
    } else {
        b.push_str("<form method=\"post\"><input type=\"hidden\" name=\"decision\" value=\"answer\">");
        for (n, q) in questions.iter().enumerate() {
            let legend = match &q.header {
                Some(h) => format!("{}: {}", h, q.question),
                None => q.question.clone(),
            };
            b.push_str(&format!("<fieldset><legend>{}</legend>", esc(&legend)));
            let kind = if q.multi_select { "checkbox" } else { "radio" };
            for o in &q.options {
                let more = o.description.as_deref().map(|d| format!(" <small>{}</small>", esc(d))).unwrap_or_default();
                b.push_str(&format!(
                    "<label class=\"opt\"><input type=\"{kind}\" name=\"q{n}\" value=\"{}\"> {}{more}</label>",
                    esc(&o.label),
                    esc(&o.label)
                ));
            }
            if q.free_text || q.options.is_empty() {
                let what = if q.options.is_empty() { "Your answer" } else { "Or in your own words" };
                b.push_str(&format!("<label>{what}<input type=\"text\" name=\"q{n}-own\" maxlength=\"2000\"></label>"));
            }
            b.push_str("</fieldset>");
        }
        b.push_str("<button type=\"submit\">Send answer</button></form>");
    }
    b.push_str(&deadline);
    if c.d.iter().any(|d| d == "deny") {
        b.push_str(
            "<form method=\"post\"><input type=\"hidden\" name=\"decision\" value=\"deny\">\
<button type=\"submit\">Dismiss the question</button></form>",
        );
    }
    page("The agent asks", &b)
}

/// What a link's POST says: a form (`decision=allow|deny|answer`,
/// `reason`, a question's `q<N>` and `q<N>-own`) or JSON
/// (`{"decision":"deny","reason":…}`, `{"decision":"answer","answers":{question: label}}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    pub decision: String,
    pub reason: Option<String>,
    /// JSON: the answers as given.
    pub answers: Option<serde_json::Map<String, serde_json::Value>>,
    /// A form: each question's fields, by the question's place: chosen labels, own words.
    pub fields: Vec<(usize, String, bool)>,
}

/// Reads a link's POST body ([`Given`]).
pub fn decision_of(body: &[u8], json: bool) -> Result<Given, String> {
    let mut given = if json {
        // A key given twice reads one way and acts another: refused, as on every door.
        crate::util::lenient::unique_keys(body)?;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct B {
            decision: String,
            #[serde(default)]
            reason: Option<String>,
            #[serde(default)]
            answers: Option<serde_json::Map<String, serde_json::Value>>,
        }
        let b: B = serde_json::from_slice(body).map_err(|e| {
            format!("{e} (expected {{\"decision\": \"allow\"|\"deny\"|\"answer\", \"reason\"?: string, \"answers\"?: object}})")
        })?;
        Given { decision: b.decision, reason: b.reason, answers: b.answers, fields: Vec::new() }
    } else {
        let text = std::str::from_utf8(body).map_err(|_| "the form is not UTF-8".to_string())?;
        let mut d = None;
        let mut reason = None;
        let mut fields = Vec::new();
        for kv in text.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let v = String::from_utf8_lossy(&super::http::percent_decode(&v.replace('+', " "))).into_owned();
            let question = k.strip_prefix('q').and_then(|n| match n.strip_suffix("-own") {
                Some(m) => m.parse::<usize>().ok().map(|m| (m, true)),
                None => n.parse::<usize>().ok().map(|n| (n, false)),
            });
            match (k, question) {
                // Given twice, a form reads one way and acts another (a
                // multi-select question's field repeats; these do not).
                ("decision", _) if d.is_some() => return Err("decision is given twice".into()),
                ("reason", _) if reason.is_some() => return Err("reason is given twice".into()),
                ("decision", _) => d = Some(v),
                ("reason", _) => reason = Some(v),
                (_, Some((n, own))) if n < 64 && fields.len() < 256 => fields.push((n, v, own)),
                _ => return Err(format!("unknown form field {k:?}")),
            }
        }
        Given { decision: d.ok_or("decision is required")?, reason, answers: None, fields }
    };
    if !["allow", "deny", "answer"].contains(&given.decision.as_str()) {
        return Err(format!("decision {:?}: allow, deny or answer", given.decision));
    }
    given.reason = given.reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
    if given.reason.as_ref().is_some_and(|r| r.len() > 2000) {
        return Err("the reason is longer than 2000 bytes".into());
    }
    Ok(given)
}

/// A question form's fields as the answers to `questions` (question text
/// to a label, or a list of them for a multi-select one; the person's own
/// words where given). The session checks each answer against its question.
pub fn form_answers(
    questions: &[crate::pipeline::events::Question],
    fields: &[(usize, String, bool)],
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    use serde_json::Value;
    let mut out = serde_json::Map::new();
    for (n, q) in questions.iter().enumerate() {
        let mut chosen: Vec<String> =
            fields.iter().filter(|(i, v, own)| *i == n && !own && !v.is_empty()).map(|(_, v, _)| v.clone()).collect();
        let own = fields.iter().find(|(i, v, own)| *i == n && *own && !v.trim().is_empty()).map(|(_, v, _)| v.trim());
        chosen.extend(own.map(str::to_string));
        if chosen.is_empty() {
            return Err(format!("no answer to {:?}", q.question));
        }
        let v = if q.multi_select {
            Value::Array(chosen.into_iter().map(Value::String).collect())
        } else if chosen.len() == 1 {
            Value::String(chosen.remove(0))
        } else {
            return Err(format!("{:?} takes one answer", q.question));
        };
        out.insert(q.question.clone(), v);
    }
    if let Some((n, _, _)) = fields.iter().find(|(i, _, _)| *i >= questions.len()) {
        return Err(format!("no question q{n} was asked"));
    }
    Ok(out)
}

/// A page (or, for a JSON request, `{"ok","detail"}`) with the headers
/// that keep a capability URL to itself: no caching, no referrer, no frames, no script.
fn answer(
    stream: &mut impl std::io::Write,
    cors: &[(&'static str, String)],
    code: u16,
    json: bool,
    title: &str,
    detail: &str,
) -> Close {
    let (ctype, body) = if json {
        ("application/json", serde_json::json!({"ok": code == 200, "detail": detail}).to_string())
    } else {
        ("text/html; charset=utf-8", page(title, &format!("<p>{}</p>", esc(detail))))
    };
    send(stream, cors, code, ctype, &body);
    let _ = stream.flush();
    Close::Linger
}

fn send(stream: &mut impl std::io::Write, cors: &[(&'static str, String)], code: u16, ctype: &str, body: &str) {
    let reason = super::http::reason(code);
    // `same-origin`, not `no-referrer`: the token still never leaves in a
    // Referer to another site, and the page's own form POST keeps its real
    // `Origin` (under `no-referrer` Chromium sends `Origin: null`, which the
    // boundary refuses: the Approve button never worked in a browser).
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
Referrer-Policy: same-origin\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n\
Content-Security-Policy: {}\r\n",
        body.len(),
        csp()
    );
    for (n, v) in cors {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body.as_bytes()));
}

/// At a hub, `GET|POST /a/<token>` once the router rate-limited it and
/// read the body: forwarded to the node that minted the link
/// ([`super::cluster::link::link_node`]), whose own route answers it; its page
/// (or JSON) is relayed with this route's headers. A hub holds no secret
/// and decides nothing: a link it cannot place is refused here, and
/// nothing was done.
pub fn at_hub(
    home: &std::path::Path,
    stream: &mut impl std::io::Write,
    cors: &[(&'static str, String)],
    req: &super::http::Request,
    token: &str,
    body: Option<(Vec<u8>, bool)>,
) -> Close {
    let json = body.as_ref().is_some_and(|(_, j)| *j);
    let node = match super::cluster::link::link_node(home, token) {
        Ok(n) => n,
        Err(why) => return answer(stream, cors, 404, json, "No such link here", &why),
    };
    let (bytes, ctype) = match &body {
        Some((b, true)) => (&b[..], Some("application/json")),
        Some((b, false)) => (&b[..], Some("application/x-www-form-urlencoded")),
        None => (&[][..], None),
    };
    // A POST's key goes with it; a GET acts on nothing and keeps no key,
    // as at the node itself (forwarded, its page was kept under the key,
    // and the POST that followed with it got the page, answering nothing).
    let key = req
        .header(super::idempotency::HEADER)
        .map(str::trim)
        .filter(|k| body.is_some() && super::idempotency::valid(k));
    let a = super::cluster::link::link(&node, token, &req.method, bytes, ctype, key);
    if a.content_type.as_deref().is_some_and(|t| t.starts_with("text/html")) {
        send(stream, cors, a.status, "text/html; charset=utf-8", &a.body);
    } else if json {
        send(stream, cors, a.status, "application/json", &a.body);
    } else {
        // An error of the way there (the node not connected, its server's
        // refusal before the link route), said as a page to a person.
        let v: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
        let why = v["error"].as_str().or(v["detail"].as_str()).unwrap_or("the node did not answer as expected");
        return answer(stream, cors, a.status, false, "Not answered", &format!("{why}. Nothing was done."));
    }
    let _ = stream.flush();
    Close::Linger
}

/// `GET|POST /a/<token>` once the router rate-limited it and read the
/// body (`Some((body, is_json))` for a POST): the token checked first,
/// then its deadline, then the session; `GET` never acts. `via`: the hub
/// that forwarded it (this node's sidecar says so), journaled with the
/// answer's name (`<name>@<hub>`).
pub fn handle(
    shared: &super::state::Shared,
    stream: &mut impl std::io::Write,
    cors: &[(&'static str, String)],
    token: &str,
    body: Option<(Vec<u8>, bool)>,
    via: Option<&str>,
) -> Close {
    let json = body.as_ref().is_some_and(|(_, j)| *j);
    let Some(keys) = shared.cfg.links.as_ref() else {
        return answer(stream, cors, 404, json, "No such link", "This server mints no approval links.");
    };
    let Some(c) = keys.verify(token) else {
        return answer(
            stream,
            cors,
            403,
            json,
            "Link not valid",
            "This link is not valid (changed, cut short, or not this server's). Nothing was done.",
        );
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    if now >= c.e {
        return answer(
            stream,
            cors,
            410,
            json,
            "Link expired",
            "This request's time ran out: it was denied, as every unanswered request is. Nothing was done now.",
        );
    }
    use super::agui::interactive as routes;
    // The server's own session, else the run's supervisor, which minted it
    // (`runwire-supervise --public-url`) and answers it over its socket.
    let own = routes::holds_link(shared, &c);
    let request = || if own { routes::link_request(shared, &c) } else { super::supervisor::link_request(shared, &c) };
    let Some((body, _)) = body else {
        return match request() {
            Ok(r) => {
                send(stream, cors, 200, "text/html; charset=utf-8", &ask_page(&c, r.as_ref()));
                Close::Linger
            }
            Err(why) => answer(stream, cors, 410, json, "Link no longer valid", &why),
        };
    };
    let Given { decision, reason, answers: given, fields } = match decision_of(&body, json) {
        Ok(d) => d,
        Err(e) => return answer(stream, cors, 400, json, "Not understood", &format!("{e}. Nothing was done.")),
    };
    if !c.d.contains(&decision) {
        return answer(
            stream,
            cors,
            403,
            json,
            "Not offered",
            &format!("This link does not offer {decision}. Nothing was done."),
        );
    }
    // A question's answers: as given (JSON), or read from the form against the questions asked.
    let answers = match (decision.as_str(), given) {
        ("answer", Some(a)) => Some(a),
        ("answer", None) => {
            let asked = request().ok().flatten().and_then(|r| r.questions);
            match asked.map(|q| form_answers(&q, &fields)) {
                Some(Ok(a)) => Some(a),
                Some(Err(e)) => {
                    return answer(stream, cors, 400, json, "Not understood", &format!("{e}. Nothing was done."))
                }
                None => {
                    return answer(
                        stream,
                        cors,
                        410,
                        json,
                        "Link no longer valid",
                        "This question is no longer open here. Nothing was done.",
                    )
                }
            }
        }
        _ => None,
    };
    // Who answered: the link's person, at the hub it came through (a link
    // minted for a hub's caller is named `<person>@<hub>` already: the hub
    // it is answered through replaces that one).
    let by = match via {
        Some(hub) => {
            let person = c.n.split('@').next().unwrap_or_default();
            Claims { n: format!("{person}@{hub}"), ..c.clone() }
        }
        None => c.clone(),
    };
    let r = if own {
        routes::link_answer(shared, &by, &decision, reason, answers)
    } else {
        super::supervisor::link_answer(shared, &by, &decision, reason, answers)
    };
    if r.ok && r.sent != Some(false) {
        let done = match decision.as_str() {
            "allow" => "Approved",
            "answer" => "Answered",
            _ if c.d.iter().any(|d| d == "answer") => "Dismissed",
            _ => "Denied",
        };
        answer(stream, cors, 200, json, done, &format!("{done}: the agent was told. This link is now used."))
    } else if r.ok {
        // A used link: its request is closed, as its page says (410).
        answer(stream, cors, 410, json, "Already answered", "This request was already answered: nothing more was done.")
    } else if r.http_status() == 503 {
        // The session is not reading now: worth trying again.
        answer(stream, cors, 503, json, "Not now", &r.detail)
    } else if r.http_status() == 400 {
        // An answer that does not fit the request (a question not asked):
        // the link still works, and says what to correct.
        answer(stream, cors, 400, json, "Not understood", &format!("{} Nothing was done.", r.detail))
    } else {
        answer(stream, cors, 410, json, "Link no longer valid", &r.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use base64::Engine as _;

    fn keys() -> Keys {
        Keys::new("https://rw.example.net/", b"0123456789abcdef0123456789abcdef\n").unwrap()
    }

    fn claims() -> Claims {
        Claims {
            r: "run1".into(),
            t: "agent".into(),
            i: "rw-00ff".into(),
            d: vec!["allow".into(), "deny".into()],
            e: 1_800_000_000_000,
            n: "ana".into(),
            k: Some("Bash".into()),
            o: None,
        }
    }

    /// A node's server names itself in every link it mints, so that a hub
    /// can place it (reading the claims unchecked); it takes no link that
    /// names another node, even under the same secret.
    #[test]
    fn a_nodes_link_names_it_and_no_other_node_takes_it() {
        let (alpha, beta) = (keys().at_node(Some("alpha".into())), keys().at_node(Some("beta".into())));
        let t = alpha.token(&claims());
        let seen = unchecked_claims(&t).unwrap();
        assert_eq!(seen.o.as_deref(), Some("alpha"));
        assert_eq!(alpha.verify(&t), Some(seen.clone()));
        assert_eq!(beta.verify(&t), None, "another node, the same secret");
        assert_eq!(keys().verify(&t), None, "a server that is no node");
        // A token minted outside a cluster is still taken by the node it was minted at after a restart with --node.
        let plain = keys().token(&claims());
        assert_eq!(unchecked_claims(&plain).unwrap().o, None);
        assert_eq!(alpha.verify(&plain), Some(claims()));
        // Only a token's characters are read at all.
        assert!(valid_token_text(&t));
        for bad in ["", "abc", "a.b.c", "a/b.c", "a.b?x", "../x.y", &format!("{}.x", "a".repeat(MAX_TOKEN))] {
            assert!(!valid_token_text(bad), "{bad}");
            assert!(unchecked_claims(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_token_verifies_and_a_changed_one_names_nothing() {
        let k = keys();
        assert_eq!((k.public.origin.as_str(), k.public.host.as_str()), ("https://rw.example.net", "rw.example.net"));
        let t = k.token(&claims());
        assert_eq!(k.verify(&t), Some(claims()));
        assert!(k.link(&claims()).starts_with("https://rw.example.net/a/"));
        // Another interrupt under the same signature, a flipped signature, another key.
        let (_, mac) = t.split_once('.').unwrap();
        let other = Claims { i: "rw-0100".into(), ..claims() };
        let forged = format!("{}.{mac}", B64.encode(serde_json::to_vec(&other).unwrap()));
        assert_eq!(k.verify(&forged), None);
        let mut flipped = t.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(k.verify(&String::from_utf8(flipped).unwrap()), None);
        let k2 = Keys::new("https://rw.example.net", b"another secret of at least thirty-two bytes").unwrap();
        assert_eq!(k2.verify(&t), None);
        for junk in ["", ".", "x.y", "a.b.c"] {
            assert_eq!(k.verify(junk), None, "{junk}");
        }
        assert!(Keys::new("https://rw.example.net", b"short").unwrap_err().contains("at least"));
        assert!(Keys::new("ftp://x", &[b'a'; 40]).is_err());
    }

    #[test]
    fn the_limiter_counts_a_minute_in_bounded_memory() {
        let l = Limiter::default();
        assert!((0..3).all(|_| l.allow("a", 3)));
        assert!(!l.allow("a", 3));
        assert!(l.allow("b", 3));
        for n in 0..MAX_KEYS {
            l.allow(&format!("k{n}"), 3);
        }
        assert!(l.counts.lock().unwrap().len() <= MAX_KEYS);
        // A full table of live windows makes room: a new key is counted, never refused for it.
        assert!((0..3).all(|_| l.allow("new", 3)), "a full table let a new key in");
        assert!(!l.allow("new", 3), "and counts it");
        assert!(l.counts.lock().unwrap().len() <= MAX_KEYS);
    }

    #[test]
    fn decisions_by_form_or_json_and_a_page_without_script() {
        let g = |d: &str, reason: Option<&str>| Given {
            decision: d.into(),
            reason: reason.map(str::to_string),
            answers: None,
            fields: Vec::new(),
        };
        assert_eq!(decision_of(b"decision=deny&reason=not+now%21", false).unwrap(), g("deny", Some("not now!")));
        assert_eq!(decision_of(br#"{"decision":"allow"}"#, true).unwrap(), g("allow", None));
        assert!(decision_of(b"decision=maybe", false).is_err());
        assert!(decision_of(br#"{"decision":"deny","by":"x"}"#, true).is_err());
        assert!(decision_of(b"decision=answer&q70=x", false).is_err(), "at most 64 questions");
        // Given twice, by form or by JSON (in any object): refused, as on every door.
        assert!(decision_of(b"decision=deny&decision=allow", false).unwrap_err().contains("twice"));
        assert!(decision_of(b"decision=deny&reason=a&reason=b", false).unwrap_err().contains("twice"));
        assert!(decision_of(br#"{"decision":"answer","answers":{"q":"a","q":"b"}}"#, true)
            .unwrap_err()
            .contains("twice"));
        assert!(decision_of(b"decision=answer&q0=a&q0=b", false).is_ok(), "a multi-select question's field repeats");
        let p = ask_page(&Claims { k: Some("<Bash>".into()), ..claims() }, None);
        assert!(p.contains("&lt;Bash&gt;") && !p.contains("<script") && p.contains("width=device-width"));
    }

    /// A question's link: its page lists the choices (one, or several, and
    /// the person's own words where taken), and its form reads back as the
    /// answers the session checks.
    #[test]
    fn a_questions_page_and_its_form() {
        use crate::pipeline::events::{Question, QuestionOption};
        let opt = |l: &str| QuestionOption { label: l.into(), description: None };
        let qs = vec![
            Question {
                question: "Tabs or spaces?".into(),
                header: Some("Indent".into()),
                options: vec![opt("tabs"), opt("spaces")],
                multi_select: false,
                free_text: false,
            },
            Question {
                question: "Which <checks>?".into(),
                header: None,
                options: vec![opt("lint"), opt("test")],
                multi_select: true,
                free_text: true,
            },
        ];
        let c = Claims { d: vec!["answer".into(), "deny".into()], k: Some("AskUserQuestion".into()), ..claims() };
        let req = crate::pipeline::events::InputRequest {
            interrupt_id: Some("rw-00ff".into()),
            id: "q1".into(),
            kind: crate::pipeline::events::InputKind::Question,
            tool_call_id: None,
            tool: Some("AskUserQuestion".into()),
            input: None,
            suggestions: None,
            questions: Some(qs.clone()),
            message: None,
            expires_at: None,
            blocking: None,
        };
        let p = ask_page(&c, Some(&req));
        assert!(p.contains("Indent: Tabs or spaces?") && p.contains("Which &lt;checks&gt;?"), "{p}");
        assert!(
            p.contains(r#"type="radio" name="q0" value="tabs""#)
                && p.contains(r#"type="checkbox" name="q1" value="test""#)
        );
        assert!(p.contains(r#"name="q1-own""#) && !p.contains(r#"name="q0-own""#) && p.contains("Dismiss"));
        let given = decision_of(b"decision=answer&q0=spaces&q1=lint&q1=test&q1-own=my+own", false).unwrap();
        let a = form_answers(&qs, &given.fields).unwrap();
        assert_eq!(
            serde_json::Value::Object(a),
            serde_json::json!({"Tabs or spaces?": "spaces", "Which <checks>?": ["lint", "test", "my own"]})
        );
        let none = decision_of(b"decision=answer&q1=lint", false).unwrap();
        assert!(form_answers(&qs, &none.fields).unwrap_err().contains("Tabs or spaces?"));
        let two = decision_of(b"decision=answer&q0=tabs&q0=spaces&q1=lint", false).unwrap();
        assert!(form_answers(&qs, &two.fields).is_err());
    }
}
