//! Fuzz target `manifest`: see `matrixkv::fuzzing::manifest`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::manifest(data));
