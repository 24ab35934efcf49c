//! The ground floor: helpers every layer may use and that use nothing of
//! the crate above them (a line reader, hashing, clocks, the arrival order
//! of files, process identity, the file watcher, the pipe stages' shell,
//! the binaries' shared command-line conventions).

pub mod arrival;
pub mod cli;
pub mod hash;
pub mod lenient;
pub mod lines;
pub mod origin;
pub mod pipe;
pub mod procid;
pub mod time;
pub mod watch;
