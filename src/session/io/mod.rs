//! A session's IO: agent processes ([`proc`]), the session's one loop and
//! the handle its callers hold ([`engine`]), the events that feed it and
//! `runwire-session`'s run of it ([`driver`]), the agent's input writer
//! ([`writer`]), the output tap the server reads ([`tap`]), the record
//! lines and journal input records ([`record`]), and launching an agent by
//! kind ([`launch`]).

pub mod driver;
pub mod engine;
pub mod events;
pub mod launch;
pub mod proc;
pub mod reaper;
pub mod record;
pub mod run_tmp;
pub mod tap;
pub mod wrappers;
pub mod writer;
