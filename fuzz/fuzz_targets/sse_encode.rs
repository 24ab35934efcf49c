//! Fuzzes `sse-encode`: the first byte picks the options (`--id-from seq`,
//! `--after 3`), the rest is split into lines, each pushed into the encoder.
//! Whatever frame it writes must be LF-only SSE ending in a blank line, since
//! the AG-UI client splits frames on "\n\n" alone.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runwire::pipeline::encode::{Encoder, SseOptions};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let id_from = (mode & 1 == 1).then(|| "seq".to_string());
    let after = (mode & 3 == 3).then(|| "3".to_string());
    let mut enc = Encoder::new(SseOptions { id_from, after });
    for line in rest.split(|&b| b == b'\n') {
        if let Ok(Some(frame)) = enc.push(line) {
            assert!(!frame.contains('\r'), "CR in an SSE frame: {frame:?}");
            assert!(frame.ends_with("\n\n"), "SSE frame not closed by a blank line: {frame:?}");
            assert!(!frame[..frame.len() - 2].contains("\n\n"), "one line became several frames: {frame:?}");
        }
    }
});
