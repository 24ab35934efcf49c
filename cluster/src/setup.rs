//! `runwire-cluster setup`: the streams and buckets, created by an admin
//! (nodes and hubs only bind to them).

use crate::names;
use anyhow::anyhow;
use async_nats::jetstream::{self, stream};
use std::time::Duration;

pub struct Opts {
    pub replicas: usize,
    pub max_age: Duration,
}

/// The stream configurations (also what spec/CLUSTER.md shows).
pub fn streams(o: &Opts) -> Vec<stream::Config> {
    let base = stream::Config {
        num_replicas: o.replicas,
        max_age: o.max_age,
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        // Message ids are kept this long: a node republishing after a crash
        // between store and acknowledgement is dropped within it.
        duplicate_window: Duration::from_secs(600),
        allow_direct: true,
        ..Default::default()
    };
    vec![
        stream::Config {
            name: names::FEED_STREAM.into(),
            // rwnode.<node>: a hub's `node` events (lost, up again), in the same feed.
            subjects: vec!["rwfeed.*".into(), "rwnode.*".into()],
            description: Some("runwire: each node's change feed, and the nodes' liveness (spec/CLUSTER.md)".into()),
            ..base.clone()
        },
        stream::Config {
            name: names::FILES_STREAM.into(),
            subjects: vec!["rwfile.*.*.*".into()],
            description: Some("runwire: each node's run files, in chunks (spec/CLUSTER.md)".into()),
            ..base
        },
    ]
}

pub async fn run(client: async_nats::Client, o: Opts) -> anyhow::Result<()> {
    let js = jetstream::new(client);
    for cfg in streams(&o) {
        let name = cfg.name.clone();
        js.create_or_update_stream(cfg).await.map_err(|e| anyhow!("stream {name}: {e}"))?;
        println!("stream {name}: ready ({} replicas)", o.replicas);
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
    ]
    .into_iter()
    .map(|(bucket, what, lease)| stream::Config {
        name: format!("KV_{bucket}"),
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
