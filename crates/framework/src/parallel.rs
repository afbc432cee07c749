//! The parallelizer: runs per-node work on a bounded pool, as upstream's parallelism does.

use std::sync::Arc;

use rayon::prelude::*;

/// Runs closures over index ranges on a pool of `parallelism` threads (capped by the
/// machine's cores), or inline for small inputs where threads cost more than they save.
#[derive(Clone)]
pub struct Parallelizer {
    pool: Option<Arc<rayon::ThreadPool>>,
    parallelism: usize,
}

impl std::fmt::Debug for Parallelizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parallelizer")
            .field("parallelism", &self.parallelism)
            .finish()
    }
}

/// Below this many items work runs on the calling thread.
const MIN_PARALLEL_ITEMS: usize = 256;

impl Parallelizer {
    /// A parallelizer with `parallelism` workers (1 runs everything inline).
    pub fn new(parallelism: usize) -> Self {
        Self::build(parallelism, false)
    }

    /// As [`Parallelizer::new`], with the calling thread as one of the workers, for a
    /// caller that drives all scheduling from this one thread (a simulation): parallel
    /// passes started from it then run partly in place instead of handing the thread's
    /// work to the pool and sleeping until it is done. Falls back to a separate pool when
    /// this thread already works for another pool. (Such a pool lives as long as the
    /// process: rayon cannot release a pool its builder thread belongs to.)
    pub fn joining_current_thread(parallelism: usize) -> Self {
        Self::build(parallelism, true)
    }

    fn build(parallelism: usize, join: bool) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = parallelism.clamp(1, cores.max(1));
        let builder = |join: bool| {
            let b = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("kubesched-worker-{i}"));
            if join { b.use_current_thread() } else { b }
        };
        let pool = (threads > 1)
            .then(|| {
                let joined = if join {
                    builder(true).build().ok()
                } else {
                    None
                };
                joined.or_else(|| builder(false).build().ok()).map(Arc::new)
            })
            .flatten();
        Self { pool, parallelism }
    }

    /// The configured parallelism.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// `f(i)` for every `i < n`, results in index order.
    pub fn map<T: Send>(&self, n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
        match &self.pool {
            Some(pool) if n >= MIN_PARALLEL_ITEMS => {
                pool.install(|| (0..n).into_par_iter().with_min_len(64).map(&f).collect())
            }
            _ => (0..n).map(f).collect(),
        }
    }

    /// As [`Parallelizer::map`], with a value made by `init` for each piece of the work a
    /// thread takes on (once when inline) and handed to `f` for every index of that piece:
    /// a per-worker buffer. Pieces are dropped where they ran, when their work is done.
    pub fn map_init<T: Send, S>(
        &self,
        n: usize,
        init: impl Fn() -> S + Sync + Send,
        f: impl Fn(&mut S, usize) -> T + Sync + Send,
    ) -> Vec<T> {
        match &self.pool {
            Some(pool) if n >= MIN_PARALLEL_ITEMS => pool.install(|| {
                (0..n)
                    .into_par_iter()
                    .with_min_len(64)
                    .map_init(&init, &f)
                    .collect()
            }),
            _ => {
                let mut s = init();
                (0..n).map(|i| f(&mut s, i)).collect()
            }
        }
    }

    /// Runs a closure on the pool (so nested parallel iterators use it).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// Whether work is spread over threads at all.
    pub fn is_parallel(&self) -> bool {
        self.pool.is_some()
    }
}

impl Default for Parallelizer {
    fn default() -> Self {
        Self::new(1)
    }
}
