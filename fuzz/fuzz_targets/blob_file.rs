//! Fuzz target `blob_file`: see `matrixkv::fuzzing::blob_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::blob_file(data));
