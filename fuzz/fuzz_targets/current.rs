//! Fuzz target `current`: see `matrixkv::fuzzing::current`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::current(data));
