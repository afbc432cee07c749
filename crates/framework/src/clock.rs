//! Injectable time, so tests and simulations never sleep.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> Instant;

    /// Now as a wall-clock time, for comparing with the timestamps of API objects (a
    /// pod's `status.startTime`) and for stamping them. The machine's time unless the
    /// clock is a virtual one.
    fn wall_now(&self) -> SystemTime {
        SystemTime::now()
    }

    /// Whether time moves only when told to (a simulation): a plugin waiting for the
    /// cluster must not wait on the machine's time then.
    fn is_virtual(&self) -> bool {
        false
    }
}

/// The machine's monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Clone)]
pub struct FakeClock {
    base: Instant,
    /// The wall-clock time at `base`.
    wall_base: SystemTime,
    offset: Arc<Mutex<Duration>>,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A clock stopped at the moment it is made (its wall time starts at the machine's).
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            wall_base: SystemTime::now(),
            offset: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.offset.lock() += by;
    }

    /// Time since the clock was made.
    pub fn elapsed(&self) -> Duration {
        *self.offset.lock()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.base + *self.offset.lock()
    }

    fn wall_now(&self) -> SystemTime {
        self.wall_base + *self.offset.lock()
    }

    fn is_virtual(&self) -> bool {
        true
    }
}
