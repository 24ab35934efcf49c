//! Shared by the three normalize targets: arbitrary bytes, split into lines,
//! through one adapter. Every event it emits must survive the trip through its
//! own wire form, since `agui-translate` reads exactly that.

use runwire::pipeline::events::Event;
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};

fn check(events: Vec<Event>) {
    for ev in events {
        let json = ev.to_json();
        assert!(!json.contains('\n'), "an events/v1 record must be one line: {json}");
        if let Err(e) = Event::parse(json.as_bytes()) {
            panic!("normalize wrote a record it cannot read back: {e}: {json}");
        }
    }
}

pub fn normalize(adapter: Adapter, data: &[u8]) {
    let mut n = Normalizer::new(adapter, Options::default());
    for line in data.split(|&b| b == b'\n') {
        check(n.push(line));
    }
    check(n.finish());
}
