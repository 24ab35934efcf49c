//! The thin IO around a [`Session`](super::Session): runs the agent with its
//! input open, feeds the session its lines, the session input and the time,
//! and applies each [`Step`](super::Step). (In progress.)
