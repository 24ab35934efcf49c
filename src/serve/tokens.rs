//! `--token-file`: one anonymous token, or several named ones (`NAME:TOKEN`
//! a line), so that the journal names the person who answered, steered,
//! stopped or killed, not the server. The one parser of the file: the
//! cluster sidecar reads it through [`read_first`] too.
//!
//! A file of one line with no `NAME:` prefix is the single anonymous token
//! (what the file always held). Otherwise every non-blank line is
//! `NAME:TOKEN`, NAME of `[A-Za-z0-9._-]+` (at most 64 bytes), names and
//! tokens unique. Every token is at least 16 bytes of printable ASCII
//! without spaces (it travels in a header).

use super::http::Request;
use std::path::Path;

/// Longest name of a token (it is journaled as `by`).
pub const MAX_NAME: usize = 64;

/// One token of the file and the person it names (`None`: the anonymous token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub name: Option<String>,
    pub token: Vec<u8>,
}

/// Every token the server takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens(pub Vec<Named>);

/// A name of `[A-Za-z0-9._-]+`, at most [`MAX_NAME`] bytes.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= MAX_NAME && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn check_token(t: &[u8], line: usize) -> Result<(), String> {
    if t.len() < 16 {
        return Err(format!(
            "line {line}: the token must be at least 16 bytes after trimming whitespace (found {})",
            t.len()
        ));
    }
    if t.iter().any(|b| !b.is_ascii_graphic()) {
        return Err(format!("line {line}: the token must be printable ASCII without spaces (it travels in a header)"));
    }
    Ok(())
}

/// `NAME:TOKEN` when the line has a name's prefix.
fn split_named(line: &[u8]) -> Option<(&str, &[u8])> {
    let i = line.iter().position(|&b| b == b':')?;
    let name = std::str::from_utf8(&line[..i]).ok().filter(|n| valid_name(n))?;
    Some((name, &line[i + 1..]))
}

/// Parses the file's content; the error names the line and what is wrong.
pub fn parse(raw: &[u8]) -> Result<Tokens, String> {
    let lines: Vec<(usize, &[u8])> =
        raw.split(|&b| b == b'\n').map(<[u8]>::trim_ascii).enumerate().filter(|(_, l)| !l.is_empty()).collect();
    if lines.is_empty() {
        return Err("the token must be at least 16 bytes after trimming whitespace (found 0)".into());
    }
    if let [(n, only)] = lines[..] {
        if split_named(only).is_none() {
            check_token(only, n + 1)?;
            return Ok(Tokens(vec![Named { name: None, token: only.to_vec() }]));
        }
    }
    let mut out: Vec<Named> = Vec::with_capacity(lines.len());
    for (n, l) in lines {
        let Some((name, token)) = split_named(l) else {
            return Err(format!(
                "line {}: expected NAME:TOKEN (NAME of A-Z a-z 0-9 . _ -, at most {MAX_NAME} bytes): a file of several tokens names each one",
                n + 1
            ));
        };
        check_token(token, n + 1)?;
        if out.iter().any(|o| o.name.as_deref() == Some(name)) {
            return Err(format!("line {}: the name {name:?} is given twice", n + 1));
        }
        if out.iter().any(|o| o.token == token) {
            return Err(format!("line {}: the same token is given twice (each person has their own)", n + 1));
        }
        out.push(Named { name: Some(name.to_string()), token: token.to_vec() });
    }
    Ok(Tokens(out))
}

/// Reads and parses `path`; the error starts with `--token-file PATH:`.
pub fn read(path: &Path) -> Result<Tokens, crate::util::cli::StartError> {
    use crate::util::cli::StartError;
    let raw = std::fs::read(path).map_err(|e| StartError::Io(format!("--token-file {}: {e}", path.display())))?;
    parse(&raw).map_err(|e| StartError::Usage(format!("--token-file {}: {e}", path.display())))
}

/// The name of the cluster sidecar's own token: a request made with it may
/// say whom it acts for ([`acting_for`]).
pub const SIDECAR: &str = "cluster";

/// The request header naming the person a hub's command is for (the
/// caller's token name at the hub), taken from the [`SIDECAR`] token only.
pub const ACTOR_HEADER: &str = "rw-actor";

/// The request header naming the hub that forwarded a command (its name),
/// taken, as [`ACTOR_HEADER`], from the [`SIDECAR`] token only.
pub const HUB_HEADER: &str = "rw-hub";

/// The cluster sidecar's way in to its own node's server: the token named
/// [`SIDECAR`] when the file has one, else the file's first (the sidecar
/// then speaks as the file's first person).
pub fn read_first(path: &Path) -> Result<Vec<u8>, String> {
    let raw = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let t = parse(&raw).map_err(|e| format!("{}: {e}", path.display()))?;
    let sidecar = t.0.iter().position(|n| n.name.as_deref() == Some(SIDECAR)).unwrap_or(0);
    Ok(t.0.into_iter().nth(sidecar).map(|n| n.token).unwrap_or_default())
}

/// The person a request acts for when the cluster sidecar makes it for a
/// hub: `Rw-Actor: NAME`, honoured only from the token named [`SIDECAR`]
/// (no one else can speak in another's name; a file without that token
/// honours it from no one).
pub fn acting_for<'a>(tokens: &Tokens, req: &'a Request) -> Option<&'a str> {
    from_sidecar(tokens, req, ACTOR_HEADER)
}

/// A name header (`Rw-Actor`, `Rw-Hub`), honoured from the [`SIDECAR`]
/// token only.
fn from_sidecar<'a>(tokens: &Tokens, req: &'a Request, header: &str) -> Option<&'a str> {
    if caller(tokens, req) != Some(Some(SIDECAR)) {
        return None;
    }
    req.header(header).map(str::trim).filter(|n| valid_name(n))
}

/// The actor of a command a hub forwarded, for the journal: the person
/// ([`acting_for`]) and the hub, `<person>@<hub>` (`@` is in neither name,
/// so the two read apart); the person alone when no hub is named.
pub fn acting_for_via_hub(tokens: &Tokens, req: &Request) -> Option<String> {
    let person = acting_for(tokens, req)?;
    Some(match forwarding_hub(tokens, req) {
        Some(hub) => format!("{person}@{hub}"),
        None => person.to_string(),
    })
}

/// The hub a request was forwarded by (`Rw-Hub`), honoured, as
/// [`ACTOR_HEADER`], from the [`SIDECAR`] token only.
pub fn forwarding_hub<'a>(tokens: &Tokens, req: &'a Request) -> Option<&'a str> {
    from_sidecar(tokens, req, HUB_HEADER)
}

/// The `token` query parameter, percent-decoded.
pub fn query_token(query: &str) -> Option<Vec<u8>> {
    query.split('&').find_map(|kv| kv.strip_prefix("token=")).map(super::http::percent_decode)
}

/// Compares in time independent of where the first difference is.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// The token presented, if it is one of these: `Some(name)` (`None`
    /// inside for the anonymous token). Every token is compared, so the
    /// time taken does not say which one matched.
    pub fn find(&self, presented: &[u8]) -> Option<Option<&str>> {
        let mut found = None;
        for n in &self.0 {
            if ct_eq(presented, &n.token) && found.is_none() {
                found = Some(n.name.as_deref());
            }
        }
        found
    }

    /// The first token (the studio's address carries it when it is the only one).
    pub fn first(&self) -> &[u8] {
        self.0.first().map_or(&[], |n| &n.token)
    }

    /// Whether the tokens name people.
    pub fn named(&self) -> bool {
        self.0.iter().any(|n| n.name.is_some())
    }
}

/// The token a request presents: `Authorization: Bearer <token>`, or
/// `?token=` on a GET (an EventSource cannot set headers).
pub fn presented(req: &Request) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    if let Some((scheme, cred)) = req.header("authorization").and_then(|h| h.split_once(' ')) {
        if scheme.eq_ignore_ascii_case("bearer") {
            v.push(cred.trim().as_bytes().to_vec());
        }
    }
    if req.method == "GET" {
        if let Some(t) = req.query.as_deref().and_then(query_token) {
            v.push(t);
        }
    }
    v
}

/// Who a request is, by its token: `Some(Some(name))` a named token,
/// `Some(None)` the anonymous one, `None` no token of these.
pub fn caller<'a>(tokens: &'a Tokens, req: &Request) -> Option<Option<&'a str>> {
    presented(req).iter().find_map(|t| tokens.find(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_without_a_name_is_the_anonymous_token() {
        let t = parse(b"  0123456789abcdef0123\n\n").unwrap();
        assert_eq!(t.0, vec![Named { name: None, token: b"0123456789abcdef0123".to_vec() }]);
        assert_eq!(t.find(b"0123456789abcdef0123"), Some(None));
        assert!(!t.named());
        // A token may hold a colon when what precedes it is no name.
        let t = parse(b"a b:0123456789abcdef").unwrap_err();
        assert!(t.contains("printable"), "{t}");
    }

    #[test]
    fn named_tokens_name_people() {
        let t = parse(b"ana:0123456789abcdef-ana\n# no\n").unwrap_err();
        assert!(t.contains("line 2") && t.contains("NAME:TOKEN"), "{t}");
        let t = parse(b"ana:0123456789abcdef-ana\nbo.b_2:0123456789abcdef-bob\n").unwrap();
        assert_eq!(t.find(b"0123456789abcdef-bob"), Some(Some("bo.b_2")));
        assert_eq!(t.find(b"0123456789abcdef-ana"), Some(Some("ana")));
        assert_eq!(t.find(b"ana:0123456789abcdef-ana"), None);
        assert_eq!(t.first(), b"0123456789abcdef-ana");
        assert!(t.named());
        let one = parse(b"ana:0123456789abcdef-ana").unwrap();
        assert_eq!(one.find(b"0123456789abcdef-ana"), Some(Some("ana")));
        for (bad, why) in [
            (&b"ana:0123456789abcdef-ana\nana:0123456789abcdef-bob"[..], "twice"),
            (b"ana:0123456789abcdef-ana\nbob:0123456789abcdef-ana", "same token"),
            (b"ana:short\nbob:0123456789abcdef-bob", "at least 16"),
            (b"", "at least 16"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn the_sidecar_uses_its_own_token_and_only_it_may_name_whom_it_acts_for() {
        let dir = std::env::temp_dir().join(format!("rw-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("tokens");
        std::fs::write(&f, "ana:0123456789abcdef-ana\ncluster:0123456789abcdef-cluster\n").unwrap();
        assert_eq!(read_first(&f).unwrap(), b"0123456789abcdef-cluster");
        std::fs::write(&f, "ana:0123456789abcdef-ana\nbob:0123456789abcdef-bob\n").unwrap();
        assert_eq!(read_first(&f).unwrap(), b"0123456789abcdef-ana");
        std::fs::remove_dir_all(&dir).unwrap();
        let t = parse(b"ana:0123456789abcdef-ana\ncluster:0123456789abcdef-cluster\n").unwrap();
        let req = |token: &str, actor: &str| {
            super::super::http::parse_head(&format!(
                "POST /x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nRw-Actor: {actor}"
            ))
            .unwrap()
        };
        assert_eq!(acting_for(&t, &req("0123456789abcdef-cluster", "bob")), Some("bob"));
        assert_eq!(acting_for(&t, &req("0123456789abcdef-ana", "bob")), None);
        assert_eq!(acting_for(&t, &req("0123456789abcdef-cluster", "not a name")), None);
        // The hub that forwarded it goes with the person, from the sidecar's token only.
        let via = |token: &str, hub: &str| {
            let r = super::super::http::parse_head(&format!(
                "POST /x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nRw-Actor: bob\r\nRw-Hub: {hub}"
            ))
            .unwrap();
            acting_for_via_hub(&t, &r)
        };
        assert_eq!(via("0123456789abcdef-cluster", "hub-1").as_deref(), Some("bob@hub-1"));
        assert_eq!(via("0123456789abcdef-cluster", "a b").as_deref(), Some("bob"));
        assert_eq!(via("0123456789abcdef-ana", "hub-1"), None);
    }
}
