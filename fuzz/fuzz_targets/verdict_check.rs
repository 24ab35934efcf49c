//! Any bytes into the verdict checker: it must return findings or a summary, never panic, and
//! the summary must render in every format. The first byte, when present, picks whether the rest
//! is also offered as the two `revision.json` files of an evidence directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runwire::tools::verdict;

fuzz_target!(|data: &[u8]| {
    let (with_revisions, bytes) = match data.split_first() {
        Some((b, rest)) => (b & 1 == 1, rest),
        None => (false, data),
    };
    let revisions = with_revisions.then_some((bytes, br#"{"revisionId":"hr_candidate"}"#.as_slice()));
    match verdict::check(bytes, revisions) {
        Ok(summary) => {
            let mut out = Vec::new();
            verdict::render::table(&summary, &mut out).unwrap();
            verdict::render::json(&summary, &mut out).unwrap();
            verdict::render::tsv(&summary, &mut out).unwrap();
        }
        Err(rejection) => {
            assert!(rejection.total >= rejection.findings.len());
            assert!(!rejection.findings.is_empty());
            assert!(rejection.findings.len() <= verdict::MAX_FINDINGS);
        }
    }
});
