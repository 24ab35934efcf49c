//! The crate's one integration test binary: one module per area (the files
//! beside this one), the helpers once (`tests/support/`: example programs,
//! the one skip rule, the `runwire-serve` fixture, the SSE reader). One
//! binary links the crate once; `cargo test --test it NAME::` runs one
//! area (`cargo test --test it real_agents::`).
//!
//! A new area is a file here and a `mod` line below; in it, `use
//! crate::support;` (not `mod support;`), and paths in `include_str!` are
//! relative to `tests/it/`. A test file left in `tests/` builds as a binary
//! of its own until it is moved here (`git mv tests/X.rs tests/it/`).

#[path = "../support/mod.rs"]
mod support;

mod agui_check;
mod agui_props;
mod agui_translate;
mod architecture;
mod claims;
mod codex_schema;
mod conformance;
mod control_doors;
mod demo;
mod doctor;
mod exit_codes;
mod faithful;
mod feed;
mod filters;
mod follow;
mod harness;
mod index_pages;
mod index_totals;
mod install_man;
mod interactive;
mod interactive_agents;
mod links;
mod live_task;
mod normalize_events;
mod notify;
mod pipeline;
mod procs;
mod quickstart;
mod real_agents;
mod remote;
mod run_store;
mod runs;
mod runs_index;
mod runs_schemas;
mod serve;
mod serve_conformance;
mod session;
mod session_engine;
mod session_normalize;
mod session_order;
mod session_protocol;
mod session_record;
mod session_replay;
mod session_signals;
mod spec_contracts;
mod sse_encode;
mod studio;
mod subagents;
mod supervise;
mod supervise_agents;
mod supervise_live;
mod task_viewers;
mod thread_snapshots;
mod timestamps;
mod trust_answers;
mod verdict_check;
mod wrappers;
