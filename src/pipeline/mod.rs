//! The pipeline's stages, each a state object with no IO, lowest layer
//! above `util` (issue 36's layout): an agent's log line in, AG-UI frames out.
//!
//! - [`normalize`]: an agent's JSON lines → events/v1 ([`events`]), with
//!   [`dialect`] telling `normalize-events` which lines were unusable and
//!   whose stream they look like;
//! - [`translate`]: events/v1 → AG-UI 1.0 events;
//! - [`encode`]: JSON lines → Server-Sent Events frames.
//!
//! The binaries (`normalize-events`, `agui-translate`, `sse-encode`) and the
//! server drive the same objects.

pub mod dialect;
pub mod encode;
pub mod events;
pub mod normalize;
pub mod translate;
