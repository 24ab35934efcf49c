//! Stage 1: raw agent JSON lines → `events/v1`.
