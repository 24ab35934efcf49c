//! runwire's cluster sidecar: one studio for agents on many machines, on
//! NATS JetStream (spec/CLUSTER.md). `runwire-serve --cluster URL --node
//! NAME` starts `runwire-cluster node`, which publishes the node's harness
//! home; `runwire-serve --cluster URL --hub` starts `runwire-cluster hub`,
//! which mirrors every node into the hub's home for the ordinary server.
//! tokio and async-nats live here only: the core crate stays free of them.

pub mod channel;
pub mod conn;
pub mod fanout;
pub mod follow;
pub mod forward;
pub mod hub;
pub mod keys;
pub mod liveness;
pub mod names;
pub mod node;
pub mod setup;
pub mod util;
mod wake;
pub mod wire;

/// The binary's name, first in every message.
pub const BIN: &str = "runwire-cluster";

/// Says `msg` on stderr as `runwire-cluster: <msg>`.
pub fn report(msg: impl std::fmt::Display) {
    runwire::util::cli::report(BIN, msg);
}
