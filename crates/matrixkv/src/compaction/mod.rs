//! Compaction: choosing what to compact ([`picker`], pure) and, in later modules, running it.
//!
//! The picker is a pure function of a `Version`, the configuration and the compaction
//! pointers; the DB calls it under its state mutex and runs the resulting [`Plan`] outside it.

pub(crate) mod column;
pub(crate) mod partition;
pub mod picker;
pub(crate) mod selective;
