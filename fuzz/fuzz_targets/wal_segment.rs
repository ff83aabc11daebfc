//! Fuzz target `wal_segment`: see `matrixkv::fuzzing::wal_segment`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::wal_segment(data));
