//! The bearer-token parser sees every request's Authorization header: it must never panic, and what
//! it accepts must print back to the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiplock::auth::Token;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(token) = Token::parse(text) {
            assert_eq!(token.to_text(), text);
        }
    }
});
