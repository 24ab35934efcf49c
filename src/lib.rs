//! runwire: watch and control CLI coding agents.
//!
//! Each pipeline stage is a module holding a state object with no IO
//! (`push(line) -> events`, `finish()`); the binaries in `src/bin/` and the
//! server drive the same objects, so there is exactly one implementation of
//! every stage.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod aguicheck;
pub mod arrival;
pub mod cli;
pub mod control;
pub mod demo;
pub mod doctor;
pub mod hash;
pub mod lines;
pub mod notify;
pub mod pipe;
pub mod pipeline;
pub mod procid;
pub mod runs;
pub mod serve;
pub mod session;
pub mod supervise;
pub mod time;
pub mod verdict;
pub mod watch;
pub mod wrappers;
