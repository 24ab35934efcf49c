//! Tools the server and the binaries compose, above the supervisor and
//! below the server: the verdict checker (`verdict-check`, the studio's
//! Compare view), notifications, `runs doctor` (the tested agent versions,
//! also warned about at `runwire-serve`'s start), the built-in demo agent
//! (`runwire-serve --demo`). None of them imports `supervise` or `serve`.

pub mod demo;
pub mod doctor;
pub mod notify;
pub mod verdict;
