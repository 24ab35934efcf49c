//! Approval links at a hub (spec/CLUSTER.md, "Approval links at a hub"):
//! which node a link goes to, and its request forwarded there over the
//! channel as a command is. A hub holds no link secret and decides nothing.

use super::{Head, FORWARD_BUDGET_MS};
use std::path::Path;

/// At a hub, the node an approval link goes to: the node its claims name
/// (`o`: a node's server names itself in every link it mints), else the one
/// node whose mirror holds the link's run (a supervisor's links name no
/// node). The claims are read **unchecked** (a hub has no link secret):
/// they only pick the node, which checks the token itself and takes no
/// link minted by another node. `Err`: the refusal page's text.
pub fn link_node(home: &Path, token: &str) -> Result<String, String> {
    let not_valid = || "This link is not valid (changed or cut short). Nothing was done.".to_string();
    let c = crate::control::links::unchecked_claims(token).ok_or_else(not_valid)?;
    if let Some(o) = c.o {
        return if crate::runs::valid_node(&o) { Ok(o) } else { Err(not_valid()) };
    }
    if !crate::runs::valid_id(&c.r) {
        return Err(not_valid());
    }
    let mut nodes: Vec<String> = std::fs::read_dir(home.join("cluster").join("nodes"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(&c.r).is_dir())
        .filter_map(|e| e.file_name().to_str().filter(|n| crate::runs::valid_node(n)).map(str::to_string))
        .collect();
    nodes.sort();
    match nodes.len() {
        1 => Ok(nodes.remove(0)),
        0 => Err(format!("No node of this cluster has shown this hub run {} yet. Nothing was done.", c.r)),
        _ => Err(format!(
            "Run {} is on several nodes ({}): open the link at its node's own address. Nothing was done.",
            c.r,
            nodes.join(", ")
        )),
    }
}

/// A forwarded link request's answer: status, content type, body.
pub struct LinkAnswer {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: String,
}

/// At a hub, `GET|POST /a/<token>` made at `node`, which minted the link:
/// sent over the channel as a `link` command (the token, the method, a
/// POST's body and its content type, the client's idempotency key) that
/// the sidecar forwards as a command is (the node asks before running it,
/// so a 504 never runs later). The node's own link route answers it, with
/// its own checks; its page is relayed as it is.
pub fn link(
    node: &str,
    token: &str,
    method: &str,
    body: &[u8],
    content_type: Option<&str>,
    key: Option<&str>,
) -> LinkAnswer {
    let head = Head {
        op: "link".into(),
        node: Some(node.into()),
        token: Some(token.into()),
        method: Some(method.into()),
        content_type: content_type.map(str::to_string),
        key: key.map(str::to_string),
        actor: Some(crate::control::links::LINK_NAME.into()),
        budget_ms: Some(FORWARD_BUDGET_MS),
        deadline_ms: super::deadline(),
        ..Default::default()
    };
    match super::ask(node, head, body) {
        Ok((h, data)) => LinkAnswer {
            status: h.status.unwrap_or(502),
            content_type: h.content_type,
            body: String::from_utf8_lossy(&data).into_owned(),
        },
        Err((status, body)) => LinkAnswer { status, content_type: None, body },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hub places a link by the node its claims name, else (a
    /// supervisor's links name none) by the one node whose mirror holds its
    /// run; a run on no node or on several is refused, naming it.
    #[test]
    fn a_hub_places_a_link_by_its_node_else_by_its_runs_one_node() {
        use crate::control::links::{Claims, Keys};
        let home = std::env::temp_dir().join(format!("rw-link-node-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let keys = Keys::new("https://hub.example", &[b'k'; 40]).unwrap();
        let claims = |r: &str| Claims {
            r: r.into(),
            t: "agent".into(),
            i: "rw-1".into(),
            d: vec!["allow".into(), "deny".into()],
            e: 1,
            n: "link".into(),
            k: None,
            o: None,
        };
        let named = keys.clone().at_node(Some("beta".into())).token(&claims("r1"));
        assert_eq!(link_node(&home, &named).unwrap(), "beta");
        let plain = keys.token(&claims("r1"));
        assert!(link_node(&home, &plain).unwrap_err().contains("No node"), "no mirror yet");
        std::fs::create_dir_all(home.join("cluster/nodes/alpha/r1")).unwrap();
        assert_eq!(link_node(&home, &plain).unwrap(), "alpha");
        std::fs::create_dir_all(home.join("cluster/nodes/gamma/r1")).unwrap();
        let both = link_node(&home, &plain).unwrap_err();
        assert!(both.contains("several") && both.contains("alpha") && both.contains("gamma"), "{both}");
        // A run id that is no run's, and no token at all.
        assert!(link_node(&home, &keys.token(&claims("../x"))).unwrap_err().contains("not valid"));
        assert!(link_node(&home, "nothing").unwrap_err().contains("not valid"));
        let _ = std::fs::remove_dir_all(&home);
    }
}
