//! Fuzz target `backup_meta`: see `matrixkv::fuzzing::backup_meta`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::backup_meta(data));
