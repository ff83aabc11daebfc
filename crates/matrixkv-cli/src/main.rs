//! The `matrixkv` command line.
fn main() {}
