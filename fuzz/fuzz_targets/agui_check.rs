//! Any bytes into agui-check's stream checker: never a panic, every finding
//! names a rule of `RULES` and an event that was read, and the findings do
//! not depend on how the input was cut into reads (a frame or line split
//! across two reads is the same frame). The first byte picks the framing
//! (auto, SSE, JSON lines), `--one-run`, and where the reads are cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runwire::aguicheck::stream::{check_bytes, Format, Stream};
use runwire::aguicheck::{Options, RULES};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, input)) = data.split_first() else { return };
    let format = match mode % 3 {
        0 => None,
        1 => Some(Format::Sse),
        _ => Some(Format::Jsonl),
    };
    let opts = Options { one_run: mode & 4 != 0, ..Options::default() };
    let whole = check_bytes(input, format, opts.clone());
    let step = 1 + (mode as usize >> 3);
    let mut s = Stream::new(format, opts);
    let mut cut = Vec::new();
    for chunk in input.chunks(step) {
        cut.extend(s.feed(chunk));
    }
    cut.extend(s.finish());
    assert_eq!(whole, cut, "the findings depend on where the reads were cut (step {step})");
    let events = s.checker().events();
    for f in &whole {
        assert!(RULES.iter().any(|r| r.id == f.rule), "unknown rule {}", f.rule);
        assert!(f.index.map_or(true, |i| i >= 1 && i <= events + 1), "index {:?} of {events} events", f.index);
        assert!(f.to_line().starts_with("{\"rule\":") && !f.to_json().is_null(), "{}", f.to_line());
    }
});
