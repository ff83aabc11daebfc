//! Fuzz target `container_pages`: see `matrixkv::fuzzing::container_pages`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| matrixkv::fuzzing::container_pages(data));
