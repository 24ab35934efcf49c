//! Fuzzes `normalize-events claude` (see `common/mod.rs`).
#![no_main]

#[path = "common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use runwire::pipeline::normalize::Adapter;

fuzz_target!(|data: &[u8]| common::normalize(Adapter::Claude, data));
