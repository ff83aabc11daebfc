//! Fuzz target `write_batch`: see `matrixkv::fuzzing::write_batch`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::write_batch(data));
