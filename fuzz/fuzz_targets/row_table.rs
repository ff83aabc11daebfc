//! Fuzz target `row_table`: see `matrixkv::fuzzing::row_table`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::row_table(data));
