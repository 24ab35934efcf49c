//! Fuzzes the `events/v1` reader every downstream stage starts with: any
//! record `Event::parse` accepts must write back to a line it accepts again,
//! unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runwire::pipeline::events::Event;

fuzz_target!(|data: &[u8]| {
    if let Ok(ev) = Event::parse(data) {
        let json = ev.to_json();
        let again =
            Event::parse(json.as_bytes()).unwrap_or_else(|e| panic!("wrote a record it cannot read: {e}: {json}"));
        assert_eq!(again.to_json(), json, "not a fixed point");
    }
});
