//! Fuzz target `sst`: see `matrixkv::fuzzing::sst`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::sst(data));
