//! Fuzzes `agui-translate`: arbitrary bytes, split into lines; each line that
//! parses as an `events/v1` record is pushed into the translator, then it is
//! finished. Seed the corpus with `normalize-events` output to get past the
//! parser quickly (see fuzz/README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;
use runwire::pipeline::events::Event;
use runwire::pipeline::translate::{TranslateOptions, Translator};

fuzz_target!(|data: &[u8]| {
    let mut t = Translator::new(TranslateOptions::default());
    for line in data.split(|&b| b == b'\n') {
        if let Ok(ev) = Event::parse(line) {
            let _ = t.push(&ev);
        }
    }
    let _ = t.finish();
});
