//! The `kubesched` binary (under construction).

fn main() {}
