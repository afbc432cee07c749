//! How a plugin's trait impls become its declaration of extension points.
//!
//! [`impl_plugin!`](crate::impl_plugin) (and [`register_plugin!`](crate::register_plugin),
//! which uses it) expands, for the concrete plugin type `T`, to calls such as
//! `(&Probe::<T>::new()).filter_side(plugin)`. Method resolution tries the receiver
//! `&Probe<T>` first: the `Implemented*` trait, implemented for `Probe<T>` only when
//! `T: FilterPlugin`, answers there with `Some(plugin)`. When `T` lacks the impl, resolution
//! goes on to the auto-referenced `&&Probe<T>`, where the `Missing*` trait answers `None`.
//! The choice is made at compile time on a concrete type (inside a generic function it
//! would always pick `Missing*`, which is why only the macros call these), so the generated
//! `as_*` methods compile to a constant `Some(self)` or `None`, exactly what a hand-written
//! `impl Plugin` did, and the extension-point set the registry reports is read from the
//! same impls.
//!
//! Nothing here is meant to be called by hand.

use std::marker::PhantomData;

use crate::plugin::*;
use crate::workload::{PlacementFeasiblePlugin, PlacementGeneratePlugin, PlacementScorePlugin};

/// The compile-time probe of plugin type `T`. See the module docs.
pub struct Probe<T>(PhantomData<fn() -> T>);

impl<T> Probe<T> {
    /// A probe (zero-sized).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

macro_rules! probes {
    ($($trait:ident => $side:ident, $has:ident, $yes:ident, $no:ident;)*) => {
        $(
            #[doc = concat!("Answers for plugin types that implement [`", stringify!($trait), "`].")]
            pub trait $yes<T> {
                #[doc = concat!("The plugin as a `dyn ", stringify!($trait), "`.")]
                fn $side<'a>(&self, plugin: &'a T) -> Option<&'a dyn $trait>;
                #[doc = concat!("Whether `T` implements ", stringify!($trait), ".")]
                fn $has(&self) -> bool;
            }
            impl<T: $trait + 'static> $yes<T> for Probe<T> {
                #[inline(always)]
                fn $side<'a>(&self, plugin: &'a T) -> Option<&'a dyn $trait> {
                    Some(plugin)
                }
                #[inline(always)]
                fn $has(&self) -> bool {
                    true
                }
            }
            #[doc = concat!("Answers for plugin types that do not implement [`", stringify!($trait), "`].")]
            pub trait $no<T> {
                #[doc = concat!("None: `T` has no ", stringify!($trait), " side.")]
                fn $side<'a>(&self, plugin: &'a T) -> Option<&'a dyn $trait>;
                #[doc = "False."]
                fn $has(&self) -> bool;
            }
            impl<T> $no<T> for &Probe<T> {
                #[inline(always)]
                fn $side<'a>(&self, _plugin: &'a T) -> Option<&'a dyn $trait> {
                    None
                }
                #[inline(always)]
                fn $has(&self) -> bool {
                    false
                }
            }
        )*

    };
}

probes! {
    QueueSortPlugin => queue_sort_side, has_queue_sort, ImplementedQueueSort, MissingQueueSort;
    PreEnqueuePlugin => pre_enqueue_side, has_pre_enqueue, ImplementedPreEnqueue, MissingPreEnqueue;
    PreFilterPlugin => pre_filter_side, has_pre_filter, ImplementedPreFilter, MissingPreFilter;
    FilterPlugin => filter_side, has_filter, ImplementedFilter, MissingFilter;
    PostFilterPlugin => post_filter_side, has_post_filter, ImplementedPostFilter, MissingPostFilter;
    PreScorePlugin => pre_score_side, has_pre_score, ImplementedPreScore, MissingPreScore;
    ScorePlugin => score_side, has_score, ImplementedScore, MissingScore;
    ReservePlugin => reserve_side, has_reserve, ImplementedReserve, MissingReserve;
    PermitPlugin => permit_side, has_permit, ImplementedPermit, MissingPermit;
    PreBindPlugin => pre_bind_side, has_pre_bind, ImplementedPreBind, MissingPreBind;
    BindPlugin => bind_side, has_bind, ImplementedBind, MissingBind;
    PostBindPlugin => post_bind_side, has_post_bind, ImplementedPostBind, MissingPostBind;
    EnqueueExtensions => enqueue_extensions_side, has_enqueue_extensions, ImplementedEnqueueExtensions, MissingEnqueueExtensions;
    PodEventsPlugin => pod_events_side, has_pod_events, ImplementedPodEvents, MissingPodEvents;
    PlacementFeasiblePlugin => placement_feasible_side, has_placement_feasible, ImplementedPlacementFeasible, MissingPlacementFeasible;
    PlacementGeneratePlugin => placement_generate_side, has_placement_generate, ImplementedPlacementGenerate, MissingPlacementGenerate;
    PlacementScorePlugin => placement_score_side, has_placement_score, ImplementedPlacementScore, MissingPlacementScore;
}

/// The extension points plugin type `$t` implements, read from its trait impls, as a
/// [`PointSet`](crate::PointSet). Expanded by the macros for a concrete type; from generic
/// code it would see no impl at all.
#[macro_export]
#[doc(hidden)]
macro_rules! __kubesched_points_of {
    ($t:ty) => {{
        #[allow(unused_imports)]
        use $crate::__private::probe::*;
        let probe = Probe::<$t>::new();
        let sides = [
            ($crate::ExtensionPoint::QueueSort, (&probe).has_queue_sort()),
            (
                $crate::ExtensionPoint::PreEnqueue,
                (&probe).has_pre_enqueue(),
            ),
            ($crate::ExtensionPoint::PreFilter, (&probe).has_pre_filter()),
            ($crate::ExtensionPoint::Filter, (&probe).has_filter()),
            (
                $crate::ExtensionPoint::PostFilter,
                (&probe).has_post_filter(),
            ),
            ($crate::ExtensionPoint::PreScore, (&probe).has_pre_score()),
            ($crate::ExtensionPoint::Score, (&probe).has_score()),
            ($crate::ExtensionPoint::Reserve, (&probe).has_reserve()),
            ($crate::ExtensionPoint::Permit, (&probe).has_permit()),
            ($crate::ExtensionPoint::PreBind, (&probe).has_pre_bind()),
            ($crate::ExtensionPoint::Bind, (&probe).has_bind()),
            ($crate::ExtensionPoint::PostBind, (&probe).has_post_bind()),
            (
                $crate::ExtensionPoint::PlacementGenerate,
                (&probe).has_placement_generate(),
            ),
            (
                $crate::ExtensionPoint::PlacementScore,
                (&probe).has_placement_score(),
            ),
            (
                $crate::ExtensionPoint::EnqueueExtensions,
                (&probe).has_enqueue_extensions(),
            ),
        ];
        sides
            .into_iter()
            .filter(|(_, has)| *has)
            .map(|(point, _)| point)
            .collect::<$crate::PointSet>()
    }};
}

/// Implements [`Plugin`](crate::Plugin) for a concrete type from its trait impls: `name()`
/// returns the given name and every `as_*` method returns `Some(self)` exactly when the
/// type implements that point's trait. [`register_plugin!`](crate::register_plugin) calls
/// it for registered plugins; call it yourself only for plugin objects you build by hand
/// (test doubles handed to a `Framework` or a harness).
///
/// ```
/// use kubesched_framework::model::{NodeInfo, PodInfo};
/// use kubesched_framework::{CycleState, ExtensionPoint, FilterPlugin, Plugin, Status};
///
/// struct AdmitAll;
/// impl FilterPlugin for AdmitAll {
///     fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
///         Status::success()
///     }
/// }
/// kubesched_framework::impl_plugin!(AdmitAll, name: "AdmitAll");
///
/// assert!(AdmitAll.as_filter().is_some());
/// assert!(AdmitAll.as_score().is_none());
/// assert_eq!(
///     kubesched_framework::implemented_points(&AdmitAll),
///     [ExtensionPoint::Filter]
/// );
/// ```
///
/// The impls are the only declaration, so a second, hand-written list cannot disagree
/// with them: writing `as_*` methods yourself next to the macro does not compile.
///
/// ```compile_fail
/// use kubesched_framework::model::{NodeInfo, PodInfo};
/// use kubesched_framework::{CycleState, FilterPlugin, Plugin, ScorePlugin, Status};
///
/// struct AdmitAll;
/// impl FilterPlugin for AdmitAll {
///     fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
///         Status::success()
///     }
/// }
/// kubesched_framework::impl_plugin!(AdmitAll, name: "AdmitAll");
/// // A Score side claimed without a ScorePlugin impl: conflicting `impl Plugin`.
/// impl Plugin for AdmitAll {
///     fn name(&self) -> &str { "AdmitAll" }
///     fn as_score(&self) -> Option<&dyn ScorePlugin> { None }
/// }
/// ```
#[macro_export]
macro_rules! impl_plugin {
    ($t:ty, name: $name:expr $(,)?) => {
        impl $crate::Plugin for $t {
            fn name(&self) -> &str {
                $name
            }
            fn as_queue_sort(&self) -> ::std::option::Option<&dyn $crate::QueueSortPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).queue_sort_side(self)
            }
            fn as_pre_enqueue(&self) -> ::std::option::Option<&dyn $crate::PreEnqueuePlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).pre_enqueue_side(self)
            }
            fn as_pre_filter(&self) -> ::std::option::Option<&dyn $crate::PreFilterPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).pre_filter_side(self)
            }
            fn as_filter(&self) -> ::std::option::Option<&dyn $crate::FilterPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).filter_side(self)
            }
            fn as_post_filter(&self) -> ::std::option::Option<&dyn $crate::PostFilterPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).post_filter_side(self)
            }
            fn as_pre_score(&self) -> ::std::option::Option<&dyn $crate::PreScorePlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).pre_score_side(self)
            }
            fn as_score(&self) -> ::std::option::Option<&dyn $crate::ScorePlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).score_side(self)
            }
            fn as_reserve(&self) -> ::std::option::Option<&dyn $crate::ReservePlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).reserve_side(self)
            }
            fn as_permit(&self) -> ::std::option::Option<&dyn $crate::PermitPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).permit_side(self)
            }
            fn as_pre_bind(&self) -> ::std::option::Option<&dyn $crate::PreBindPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).pre_bind_side(self)
            }
            fn as_bind(&self) -> ::std::option::Option<&dyn $crate::BindPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).bind_side(self)
            }
            fn as_post_bind(&self) -> ::std::option::Option<&dyn $crate::PostBindPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).post_bind_side(self)
            }
            fn as_enqueue_extensions(
                &self,
            ) -> ::std::option::Option<&dyn $crate::EnqueueExtensions> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).enqueue_extensions_side(self)
            }
            fn as_pod_events(&self) -> ::std::option::Option<&dyn $crate::PodEventsPlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).pod_events_side(self)
            }
            fn as_placement_feasible(
                &self,
            ) -> ::std::option::Option<&dyn $crate::workload::PlacementFeasiblePlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).placement_feasible_side(self)
            }
            fn as_placement_generate(
                &self,
            ) -> ::std::option::Option<&dyn $crate::workload::PlacementGeneratePlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).placement_generate_side(self)
            }
            fn as_placement_score(
                &self,
            ) -> ::std::option::Option<&dyn $crate::workload::PlacementScorePlugin> {
                use $crate::__private::probe::*;
                (&Probe::<Self>::new()).placement_score_side(self)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use kubesched_model::{NodeInfo, PodInfo};

    use crate::events::ClusterEventWithHint;
    use crate::{CycleState, ExtensionPoint, Plugin, PointSet, Status, implemented_points};

    use super::*;

    struct Nothing;
    crate::impl_plugin!(Nothing, name: "Nothing");

    struct FilterAndScore;
    impl FilterPlugin for FilterAndScore {
        fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
            Status::success()
        }
    }
    impl ScorePlugin for FilterAndScore {
        fn score(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Result<i64, Status> {
            Ok(7)
        }
    }
    crate::impl_plugin!(FilterAndScore, name: "FilterAndScore");

    struct Gate;
    impl PreEnqueuePlugin for Gate {
        fn pre_enqueue(&self, _: &PodInfo) -> Status {
            Status::success()
        }
    }
    impl PermitPlugin for Gate {
        fn permit(&self, _: &CycleState, _: &PodInfo, _: &str) -> (Status, Duration) {
            (Status::success(), Duration::ZERO)
        }
    }
    impl EnqueueExtensions for Gate {
        fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
            Vec::new()
        }
    }
    crate::impl_plugin!(Gate, name: "Gate");

    #[test]
    fn the_probe_sees_exactly_the_impls() {
        assert_eq!(crate::__kubesched_points_of!(Nothing).to_vec(), []);
        assert_eq!(
            crate::__kubesched_points_of!(FilterAndScore).to_vec(),
            [ExtensionPoint::Filter, ExtensionPoint::Score]
        );
        assert_eq!(
            crate::__kubesched_points_of!(Gate).to_vec(),
            [
                ExtensionPoint::PreEnqueue,
                ExtensionPoint::Permit,
                ExtensionPoint::EnqueueExtensions
            ]
        );
    }

    #[test]
    fn the_generated_sides_agree_with_the_probe() {
        let plugins: [(Arc<dyn Plugin>, PointSet); 3] = [
            (Arc::new(Nothing), crate::__kubesched_points_of!(Nothing)),
            (
                Arc::new(FilterAndScore),
                crate::__kubesched_points_of!(FilterAndScore),
            ),
            (Arc::new(Gate), crate::__kubesched_points_of!(Gate)),
        ];
        for (plugin, declared) in plugins {
            assert_eq!(
                implemented_points(plugin.as_ref()),
                declared.to_vec(),
                "{}",
                plugin.name()
            );
        }
        let fs = FilterAndScore;
        let score = fs.as_score().expect("score side");
        assert_eq!(
            score.score(
                &CycleState::default(),
                &kubesched_testing::PodBuilder::new("p").info(),
                &NodeInfo::default()
            ),
            Ok(7)
        );
        assert_eq!(fs.name(), "FilterAndScore");
    }
}
