//! `runwire-cluster setup`: the streams and buckets, created by an admin
//! (nodes and hubs only bind to them).

use crate::names;
use anyhow::anyhow;
use async_nats::jetstream::{self, kv, stream};
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
            subjects: vec!["rwfeed.*".into()],
            description: Some("runwire: each node's change feed (spec/CLUSTER.md)".into()),
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
    for (bucket, what) in [(names::RUNS_BUCKET, "run summaries"), (names::NODES_BUCKET, "node heartbeats")] {
        let cfg = kv::Config {
            bucket: bucket.into(),
            description: format!("runwire: {what} (spec/CLUSTER.md)"),
            history: 1,
            num_replicas: o.replicas,
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        };
        match js.get_key_value(bucket).await {
            Ok(_) => {}
            Err(_) => {
                js.create_key_value(cfg).await.map_err(|e| anyhow!("bucket {bucket}: {e}"))?;
            }
        }
        println!("bucket {bucket}: ready ({} replicas)", o.replicas);
    }
    Ok(())
}
