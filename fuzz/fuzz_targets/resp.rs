//! Fuzz target `resp`: the server's RESP request decoder (`matrixkv_server::resp::parse`) on
//! arbitrary bytes, under both limit sets: it must return, never panic, consume at most what
//! it was given, and make progress whenever it reports a command.
#![no_main]

use matrixkv_server::resp::{Limits, Parse, parse};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for limits in [Limits::UNAUTHENTICATED, Limits::AUTHENTICATED] {
        let mut rest = data;
        loop {
            match parse(rest, &limits) {
                Parse::Command(args, used) => {
                    assert!(used > 0 && used <= rest.len(), "consumed {used} of {}", rest.len());
                    assert!(args.len() <= limits.max_args);
                    assert!(args.iter().all(|a| a.len() <= limits.max_bulk.max(limits.max_inline)));
                    rest = &rest[used..];
                }
                Parse::Incomplete | Parse::Error(_) => break,
            }
        }
    }
});
