//! Config tests with fakes of every upstream default plugin registered (a full build), plus
//! the small custom plugins upstream's framework tests use for multiPoint cases.

#[path = "../common/mod.rs"]
mod common;

mod args;
mod defaults;
mod multipoint;
mod validation;

register_upstream_defaults!();

fake_plugin!(
    "TestPlugin",
    [
        QueueSort, PreFilter, Filter, PostFilter, PreScore, Score, Reserve, Permit, PreBind, Bind,
        PostBind
    ]
);
fake_plugin!("ScorePlugin1", [PreScore, Score]);
fake_plugin!("ScorePlugin2", [Score]);
fake_plugin!("ScoreWithNormalizePlugin1", [Score]);
fake_plugin!("QueueSortPlugin", [QueueSort]);
fake_plugin!("BindPlugin", [Bind]);
