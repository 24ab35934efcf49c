//! `runwire-cluster setup`: the streams and buckets, created by an admin
//! (nodes and hubs only bind to them).

use crate::names;
use anyhow::anyhow;
use async_nats::jetstream::{self, stream};
use std::time::Duration;

pub struct Opts {
    pub replicas: usize,
    /// Per stream: how long and how many bytes each keeps (zero: no limit).
    pub feed: Limits,
    pub files: Limits,
}

/// A stream's limits: the oldest messages go first once either is reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub max_age: Duration,
    /// Bytes (messages with their subjects and headers), 0: no limit.
    pub max_bytes: u64,
}

/// How many servers the cluster has, as the server we are connected to
/// advertises them (its `connect_urls`, itself included): `None` when it
/// is clustered but advertises none (`no_advertise`), so the size cannot
/// be told. Addresses are compared as host and port (`[::1]:4222` and
/// `::1:4222` are one server); the connected server's own `host:port` is
/// added only when it is a real address missing from the list: a server
/// listening on `0.0.0.0` or `::` advertises its interfaces' addresses
/// instead, and counting the wildcard too made three servers four (and a
/// setup without `--replicas` fail placement).
pub fn cluster_size(info: &async_nats::ServerInfo) -> Option<usize> {
    if info.cluster.is_none() {
        return Some(1);
    }
    let mut servers: std::collections::BTreeSet<(String, u16)> =
        info.connect_urls.iter().filter_map(|u| host_port(u)).collect();
    if servers.is_empty() {
        return None;
    }
    let wildcard = info.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    if !wildcard && !info.host.is_empty() {
        servers.insert((info.host.trim_matches(['[', ']']).to_ascii_lowercase(), info.port));
    }
    Some(servers.len())
}

/// `host:port`, `[v6]:port` or `v6:port` (the last colon splits) as a
/// comparable pair; `None` without a port.
fn host_port(url: &str) -> Option<(String, u16)> {
    let url = url.rsplit("://").next().unwrap_or(url);
    let (host, port) = url.rsplit_once(':')?;
    Some((host.trim_matches(['[', ']']).to_ascii_lowercase(), port.parse().ok()?))
}

/// The replica count to use: `asked`, else the cluster's size (at most 5,
/// JetStream's most). One replica on a cluster of several servers loses
/// the streams with the server that holds them: refused unless `single`.
pub fn replicas(asked: Option<usize>, size: Option<usize>, single: bool) -> anyhow::Result<usize> {
    let n = match (asked, size) {
        (Some(n), _) => n,
        (None, Some(s)) => s.clamp(1, 5),
        (None, None) => anyhow::bail!(
            "the cluster's size cannot be told (its servers advertise no client URLs: no_advertise?): give --replicas"
        ),
    };
    if n == 1 && size != Some(1) && !single {
        anyhow::bail!(
            "--replicas 1 on a cluster of {} servers: the streams would live on one server and go with it; \
             give --allow-single-replica to mean it",
            size.map_or("several".to_string(), |s| s.to_string())
        );
    }
    Ok(n)
}

/// The least byte limit of `RUNWIRE_FILES` (0, none, aside): a node's chunk
/// is at most a sixteenth of the limit ([`crate::node::STREAM_SHARE`]), and
/// at least 4 KiB here. A message larger than a stream's byte limit empties
/// the stream (discard old: every other message goes, then it).
pub const MIN_FILES_BYTES: u64 = 64 * 1024;
/// The least byte limit of `RUNWIRE_FEED`: sixteen of its largest events
/// (64 KiB: larger records are reference events).
pub const MIN_FEED_BYTES: u64 = 1024 * 1024;

/// Byte limits too small for the messages the streams carry: refused.
pub fn check_limits(o: &Opts) -> anyhow::Result<()> {
    for (flag, l, min) in
        [("--files-max-bytes", o.files, MIN_FILES_BYTES), ("--feed-max-bytes", o.feed, MIN_FEED_BYTES)]
    {
        if l.max_bytes != 0 && l.max_bytes < min {
            anyhow::bail!(
                "{flag} {}: less than {min} bytes, the least a stream of the cluster keeps (its messages are up to \
                 a sixteenth of that; a message larger than the limit empties the stream): give {min} or more, \
                 or 0 for no limit",
                l.max_bytes
            );
        }
    }
    Ok(())
}

/// The duplicate window of the streams (at most their max_age).
pub const DUP_WINDOW: Duration = Duration::from_secs(600);

/// The stream configurations (also what spec/CLUSTER.md shows).
pub fn streams(o: &Opts) -> Vec<stream::Config> {
    let base = stream::Config {
        num_replicas: o.replicas,
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        allow_direct: true,
        // `runs rm` at a node: the node replaces each of the run's file
        // subjects by one empty tombstone (a rollup on its own subjects:
        // nodes may not purge).
        allow_rollup: true,
        ..Default::default()
    };
    let limited = |l: Limits| stream::Config {
        max_age: l.max_age,
        max_bytes: if l.max_bytes == 0 { -1 } else { l.max_bytes.min(i64::MAX as u64) as i64 },
        // Message ids are kept this long (a node republishing after a crash
        // between store and acknowledgement is dropped within it), at most
        // max_age (the server refuses more).
        duplicate_window: if l.max_age.is_zero() { DUP_WINDOW } else { DUP_WINDOW.min(l.max_age) },
        ..base.clone()
    };
    vec![
        stream::Config {
            name: names::FEED_STREAM.into(),
            // rwnode.<node>: a hub's `node` events (lost, up again), in the same feed.
            subjects: vec!["rwfeed.*".into(), "rwnode.*".into()],
            description: Some("runwire: each node's change feed, and the nodes' liveness (spec/CLUSTER.md)".into()),
            ..limited(o.feed)
        },
        stream::Config {
            name: names::FILES_STREAM.into(),
            subjects: vec!["rwfile.*.*.*".into()],
            description: Some("runwire: each node's run files, in chunks (spec/CLUSTER.md)".into()),
            ..limited(o.files)
        },
    ]
}

pub async fn run(client: async_nats::Client, o: Opts) -> anyhow::Result<()> {
    check_limits(&o)?;
    let js = jetstream::new(client);
    for cfg in streams(&o) {
        let name = cfg.name.clone();
        let (age, bytes) = (cfg.max_age.as_secs(), cfg.max_bytes);
        js.create_or_update_stream(cfg).await.map_err(|e| anyhow!("stream {name}: {e}"))?;
        let age = if age == 0 { "no age limit".to_string() } else { format!("max age {age} s") };
        let bytes = if bytes < 0 { "no byte limit".to_string() } else { format!("max {bytes} bytes") };
        println!("stream {name}: ready ({} replicas, {age}, {bytes})", o.replicas);
    }
    // A bucket is a stream named KV_<bucket> on `$KV.<bucket>.>` (the KV
    // convention). Made as a stream: async-nats's create_key_value first
    // reads the account's info, whose 2.9 form it cannot parse.
    for cfg in buckets(&o) {
        let name = cfg.name.clone();
        js.create_or_update_stream(cfg).await.map_err(|e| anyhow!("bucket {name}: {e}"))?;
        println!("bucket {name}: ready ({} replicas)", o.replicas);
    }
    Ok(())
}

/// The buckets' streams: history 1, new writes refused when full. The
/// nodes bucket's beats are the names' leases: kept [`crate::liveness::LEASE`]
/// (nats-server 2.9 has no per-key TTL), so a dead node's name is freed.
pub fn buckets(o: &Opts) -> Vec<stream::Config> {
    [
        (names::RUNS_BUCKET, "run summaries", None),
        (names::NODES_BUCKET, "node heartbeats (leases)", Some(crate::liveness::LEASE)),
        (names::THREADS_BUCKET, "AG-UI threads' nodes", None),
    ]
    .into_iter()
    .map(|(bucket, what, lease)| stream::Config {
        name: names::kv_stream(bucket),
        description: Some(format!("runwire: {what} (spec/CLUSTER.md)")),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        num_replicas: o.replicas,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        max_age: lease.unwrap_or_default(),
        // At most max_age (the server refuses more); nothing here relies on it.
        duplicate_window: lease.unwrap_or_default(),
        ..Default::default()
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(host: &str, port: u16, urls: &[&str]) -> async_nats::ServerInfo {
        async_nats::ServerInfo {
            host: host.into(),
            port,
            cluster: Some("c".into()),
            connect_urls: urls.iter().map(|u| u.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn byte_limits_below_the_floor_are_refused_and_none_or_enough_accepted() {
        let o = |files: u64, feed: u64| Opts {
            replicas: 3,
            files: Limits { max_bytes: files, ..Default::default() },
            feed: Limits { max_bytes: feed, ..Default::default() },
        };
        assert!(check_limits(&o(0, 0)).is_ok());
        assert!(check_limits(&o(MIN_FILES_BYTES, MIN_FEED_BYTES)).is_ok());
        let e = check_limits(&o(MIN_FILES_BYTES - 1, 0)).unwrap_err().to_string();
        assert!(e.starts_with("--files-max-bytes 65535: "), "{e}");
        let e = check_limits(&o(0, 1000)).unwrap_err().to_string();
        assert!(e.starts_with("--feed-max-bytes 1000: "), "{e}");
    }

    /// Three servers are three, however the connected one writes itself:
    /// IPv6 with and without brackets, a wildcard listener (which
    /// advertises its interfaces, not `0.0.0.0`), an address missing from
    /// the list.
    #[test]
    fn the_cluster_size_counts_each_server_once() {
        let v6 = info("::1", 4001, &["[::1]:4001", "[::1]:4002", "[::1]:4003"]);
        assert_eq!(cluster_size(&v6), Some(3));
        let wild = info("0.0.0.0", 4222, &["10.0.0.1:4222", "10.0.0.2:4222", "10.0.0.3:4222"]);
        assert_eq!(cluster_size(&wild), Some(3));
        assert_eq!(cluster_size(&info("::", 4222, &["[fd00::1]:4222", "[fd00::2]:4222"])), Some(2));
        let v4 = info("127.0.0.1", 4001, &["127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003"]);
        assert_eq!(cluster_size(&v4), Some(3));
        assert_eq!(cluster_size(&info("127.0.0.1", 4001, &["127.0.0.1:4002"])), Some(2), "itself added when missing");
        assert_eq!(cluster_size(&info("127.0.0.1", 4001, &[])), None, "no_advertise");
        let alone = async_nats::ServerInfo { cluster: None, ..Default::default() };
        assert_eq!(cluster_size(&alone), Some(1));
    }
}
