//! A webhook receiver's answer is untrusted input: parsing and resolving it must never panic, and the
//! resolution must decide every message of the batch exactly once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiplock::queue::answer;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(actions)) = answer::parse(data) {
        let batch = ["a", "b", "c"];
        let decided = answer::resolve(&actions, &batch);
        assert_eq!(decided.len(), batch.len());
    }
});
