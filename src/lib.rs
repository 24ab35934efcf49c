//! runwire: watch and control CLI coding agents.
//!
//! Each pipeline stage is a module holding a state object with no IO
//! (`push(line) -> events`, `finish()`); the binaries in `src/bin/` and the
//! server drive the same objects, so there is exactly one implementation of
//! every stage.
//!
//! The modules below are declared by layer, lowest first. A module imports
//! only from its own layer or the ones below it, and no two modules import
//! each other; `tests/it/architecture.rs` holds the crate to that
//! (docs/ARCHITECTURE.md, "What the architecture test enforces").
#![deny(clippy::print_stdout, clippy::print_stderr)]

// Layer 0, util: line reading, hashing, clocks, arrival order, process
// identity, the file watcher, the pipe stages' shell, CLI conventions.
pub mod util;

// Layer 1, pipeline: the stages, pure state objects: agent lines →
// normalized events → AG-UI events → SSE frames (and the event vocabulary).
pub mod pipeline;

// Layer 2, control: the one command module (Command, its rules, Verb, Door).
pub mod control;

// Layer 3, runs: the run store (registry, journals, index, views, the change
// feed), below everything that reads it.
pub mod runs;

// Layer 4, session: one live agent session (its pure protocol cores, and the
// IO that starts, drives and records the agent's process).
pub mod session;

// Layer 5, supervise: plans of many tasks, run in waves.
pub mod supervise;

// Layer 6, tools: what the binaries and the server compose (verdicts,
// notifications, doctor, the demo agent); and the AG-UI checker, apart.
pub mod aguicheck;
pub mod tools;

// Layer 7, serve: the server's doors, above everything.
pub mod serve;
