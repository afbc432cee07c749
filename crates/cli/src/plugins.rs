//! The plugin set of this build: one `use <crate> as _;` line per plugin crate, each behind
//! its Cargo feature, and the list of the binary's plugin features for the registry.
//!
//! rustc links no crate that no source line names, so a Cargo dependency alone registers
//! nothing; the `use … as _;` lines are what pull each enabled plugin's link-time
//! registration into the binary. They are not written by hand: build.rs derives them from
//! the `plugin-<folder> = ["dep:<crate>"]` features of crates/cli/Cargo.toml, the one list
//! Cargo cannot derive (a test checks it against the crates under plugins/, and the
//! binary's `kubesched plugins -o json` against it).

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
