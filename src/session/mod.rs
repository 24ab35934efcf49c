//! Agent sessions: the processes a run or an interactive session owns.
//!
//! [`proc`] starts, signals and reaps agent processes for the server, the
//! supervisor and interactive sessions alike.

pub mod proc;
