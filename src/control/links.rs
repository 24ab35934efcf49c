//! Approval links' tokens: the link secret, the claims a link is bound to
//! and the token that carries them ([`Keys`], [`Claims`]). No IO but
//! reading the secret file at start: the server (`runwire-serve --public-url`) and the supervisor
//! (`runwire-supervise --public-url`) mint with it, the server's link
//! routes (`crate::serve::links`) check with it; the routes' rate limits
//! stay with the server (`crate::serve::link_keys`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::path::Path;

/// The route's prefix.
pub const PREFIX: &str = "/a/";
/// Longest token taken (a real one is a few hundred bytes).
pub const MAX_TOKEN: usize = 2048;
/// The name a link is minted for when no named person is behind the
/// request (journaled as who answered, with the door `link`).
pub const LINK_NAME: &str = "link";
/// Shortest link secret.
pub const MIN_SECRET: usize = 32;

/// The address people reach a server at (`--public-url`): its Host and
/// Origin are accepted, and links are minted under it. A server may have
/// one without minting links (a hub behind a proxy: the links it serves
/// are its nodes').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Public {
    /// `--public-url`, without a trailing slash.
    pub url: String,
    /// `scheme://host[:port]` of it (accepted as an Origin).
    pub origin: String,
    /// `host[:port]` of it (accepted as a Host).
    pub host: String,
}

impl Public {
    /// `--public-url`: `http(s)://host[:port][/path]`, no query or fragment.
    pub fn parse(s: &str) -> Result<Public, String> {
        let bad = || format!("{s:?}: expected http(s)://host[:port][/path], e.g. https://runwire.example.net");
        let t = s.trim_end_matches('/');
        let (scheme, rest) = t.split_once("://").ok_or_else(bad)?;
        if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") || t.contains(['?', '#', '@']) {
            return Err(bad());
        }
        let host = rest.split('/').next().unwrap_or_default();
        let origin = crate::util::origin::parse_origin(&format!("{scheme}://{host}")).map_err(|_| bad())?;
        Ok(Public { url: t.to_string(), origin, host: host.to_ascii_lowercase() })
    }
}

/// The link settings of a server or a supervisor (`--public-url`, `--link-secret-file`).
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    /// `--public-url`: links are minted under it.
    pub public: Public,
    /// The cluster node this server is (`--node`): every link it mints
    /// names it ([`Claims::o`]), so that a hub knows where to forward the
    /// link, and it takes no link that names another node.
    pub node: Option<String>,
    secret: Vec<u8>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Keys").field("public", &self.public).field("node", &self.node).finish_non_exhaustive()
    }
}

impl Keys {
    /// From `--public-url` and the secret file's content (trimmed, at least [`MIN_SECRET`] bytes).
    pub fn new(public_url: &str, secret: &[u8]) -> Result<Keys, String> {
        let public = Public::parse(public_url)?;
        let secret = secret.trim_ascii().to_vec();
        if secret.len() < MIN_SECRET {
            return Err(format!("the secret must be at least {MIN_SECRET} bytes (found {})", secret.len()));
        }
        Ok(Keys { public, node: None, secret })
    }

    /// These keys at cluster node `node` (`runwire-serve --node`).
    pub fn at_node(self, node: Option<String>) -> Keys {
        Keys { node, ..self }
    }

    /// Reads `--link-secret-file`.
    pub fn read(public_url: &str, secret_file: &Path) -> Result<Keys, crate::util::cli::StartError> {
        use crate::util::cli::StartError;
        let raw = std::fs::read(secret_file)
            .map_err(|e| StartError::Io(format!("--link-secret-file {}: {e}", secret_file.display())))?;
        Keys::new(public_url, &raw).map_err(|e| {
            let flag = if e.contains("secret") { "--link-secret-file" } else { "--public-url" };
            StartError::Usage(format!("{flag}: {e}"))
        })
    }

    /// The MAC of a token's claims text, keyed by the secret, in its own domain.
    fn hmac(&self, text: &[u8]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes a key of any length");
        m.update(b"runwire-link/v1\n");
        m.update(text);
        m
    }

    /// The token for `claims` (naming this server's node, when it is one).
    pub fn token(&self, claims: &Claims) -> String {
        let mut claims = claims.clone();
        if claims.o.is_none() {
            claims.o.clone_from(&self.node);
        }
        let body = B64.encode(serde_json::to_vec(&claims).expect("claims serialize"));
        let mac = B64.encode(self.hmac(body.as_bytes()).finalize().into_bytes());
        format!("{body}.{mac}")
    }

    /// The link for `claims`.
    pub fn link(&self, claims: &Claims) -> String {
        format!("{}{PREFIX}{}", self.public.url, self.token(claims))
    }

    /// The claims of a token this server signed; `None` for anything else
    /// (tampered, foreign, malformed, another node's: one answer, so a
    /// guess learns nothing). Nodes that share a secret still never take
    /// each other's links.
    pub fn verify(&self, token: &str) -> Option<Claims> {
        if token.len() > MAX_TOKEN {
            return None;
        }
        let (body, mac) = token.split_once('.')?;
        let given = B64.decode(mac).ok()?;
        // Constant-time comparison (hmac's verify).
        self.hmac(body.as_bytes()).verify_slice(&given).ok()?;
        let c = claims_of(body)?;
        (c.o.is_none() || c.o == self.node).then_some(c)
    }
}

/// The claims a token says, **not checked**: a hub reads them only to know
/// which node to forward the link to (the node checks the token; a hub has
/// no secret). `None` when the token is not shaped as one.
pub fn unchecked_claims(token: &str) -> Option<Claims> {
    if token.len() > MAX_TOKEN || !valid_token_text(token) {
        return None;
    }
    claims_of(token.split_once('.')?.0)
}

/// The claims a token's first part (base64url JSON) holds.
fn claims_of(body: &str) -> Option<Claims> {
    serde_json::from_slice(&B64.decode(body).ok()?).ok()
}

/// Whether `token` is made of a token's characters (base64url and one
/// `.`), within [`MAX_TOKEN`]: what a link route may carry anywhere
/// (a forwarded path included).
pub fn valid_token_text(token: &str) -> bool {
    token.len() <= MAX_TOKEN
        && token.bytes().filter(|&b| b == b'.').count() == 1
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// What a link is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// The run (its record id).
    pub r: String,
    /// The task.
    pub t: String,
    /// runwire's interrupt id (this request of this agent process).
    pub i: String,
    /// The decisions offered.
    pub d: Vec<String>,
    /// The interrupt's deadline, ms since the epoch.
    pub e: i64,
    /// The name the link was minted for (journaled as who answered).
    pub n: String,
    /// The tool asking, for the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<String>,
    /// The cluster node that minted it (its server's `--node`), which a
    /// hub forwards it to; absent outside a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub o: Option<String>,
}

/// The claims of a raised request's link: tool and plan approvals (approve
/// or deny), questions (answer, or dismiss: deny).
pub fn claims_for(run: &str, task: &str, r: &crate::pipeline::events::InputRequest, name: &str) -> Option<Claims> {
    use crate::pipeline::events::InputKind;
    let d = match r.kind {
        InputKind::ToolApproval | InputKind::PlanApproval => vec!["allow".into(), "deny".into()],
        InputKind::Question => vec!["answer".into(), "deny".into()],
    };
    Some(Claims {
        r: run.into(),
        t: task.into(),
        i: r.interrupt_id.clone()?,
        d,
        e: crate::util::time::parse_rfc3339_ms(r.expires_at.as_deref()?)?,
        n: name.into(),
        k: r.tool.clone(),
        o: None,
    })
}

impl Claims {
    /// The link's answer as every door gives one: the one [`Command`] rule
    /// (`crate::control`), by the name the link was minted for, door `link`.
    /// `request` is runwire's interrupt id the link is bound to.
    ///
    /// [`Command`]: super::Command
    pub fn answer(
        &self,
        decision: &str,
        reason: Option<String>,
        answers: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<super::AnswerInput, String> {
        let mut body = serde_json::json!({"request": self.i, "decision": decision});
        if let Some(r) = reason {
            body["message"] = r.into();
        }
        if let Some(a) = answers {
            body["answers"] = a.into();
        }
        let command = super::Command::from_route(super::Verb::Answer, body.to_string().as_bytes(), &self.n)?;
        let super::Command::Answer { mut answer } = command.by_person(&self.n) else {
            return Err("not an answer".into());
        };
        answer.door = Some(super::Door::Link);
        Ok(answer)
    }
}
