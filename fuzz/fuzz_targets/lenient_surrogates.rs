//! Fuzzes the surrogate repair every reader of agent output relies on
//! (`runwire::pipeline::normalize::lenient`): on any text it never panics, it changes
//! only unpaired `\uD800`–`\uDFFF` escapes, each into `\uFFFD` (same length),
//! and what it returns needs no second repair.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runwire::pipeline::normalize::lenient;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some(fixed) = lenient::repair_surrogates(text) else {
        return;
    };
    assert_eq!(fixed.len(), text.len(), "an escape is replaced by one of the same length");
    assert_eq!(lenient::repair_surrogates(&fixed), None, "the repair is complete in one pass");
    let (a, b) = (text.as_bytes(), fixed.as_bytes());
    let mut i = 0;
    while i < a.len() {
        if a[i] == b[i] {
            i += 1;
            continue;
        }
        // A difference lies inside a replaced escape: `\uXXXX` became `\uFFFD`.
        let start = (0..=i).rev().find(|&k| b[k..].starts_with(b"\\uFFFD") && k + 6 > i).expect("inside an escape");
        assert!(a[start..start + 2] == *b"\\u", "only escapes change");
        i = start + 6;
    }
});
