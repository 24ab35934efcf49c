//! The cluster crate's integration tests, one binary: real 3-server NATS
//! JetStream clusters on loopback, `runwire-serve` nodes and hubs, and the
//! sidecar. One module per area; what they share is in `common`.
//!
//! `cargo test -p runwire-cluster --test it` runs them all;
//! `cargo test -p runwire-cluster --test it security::` one module.

mod common;

mod channel;
mod cluster;
mod decentralized;
mod doors;
mod examples;
mod hub_channel;
mod hub_studio;
mod node_field;
mod nodes;
mod resume;
mod retention;
mod security;
mod threads;
