//! CPU time of the scheduler's threads only: the driver creating pods and watching them
//! runs in the same process, so the process's total would count it too. The scheduler
//! runs on a runtime whose threads are named [`SCHEDULER_THREAD_NAME`], and its worker
//! pool names its threads `kubesched-worker-N`; Linux shows each thread's name (cut to 15
//! bytes) and its time on CPU under /proc/self/task: to the nanosecond in `sched` where
//! the kernel has it, else in 10 ms ticks in `stat`.

use std::collections::HashMap;

/// The name of the scheduler runtime's threads (15 bytes: Linux keeps it whole).
pub const SCHEDULER_THREAD_NAME: &str = "kubesched-sched";

/// Thread names (as /proc shows them) that count as the scheduler's.
const SCHEDULER_THREADS: &[&str] = &[SCHEDULER_THREAD_NAME, "kubesched-worke"];

/// CPU seconds per thread id, for the scheduler's threads alive at one moment; None
/// where /proc is not available.
#[derive(Debug, Clone, Default)]
pub struct ThreadTimes(Option<HashMap<u64, f64>>);

impl ThreadTimes {
    /// CPU seconds the scheduler's threads used since `before` (threads born since count
    /// whole; threads that ended in between are lost, which the runtime's long keep-alive
    /// avoids).
    pub fn since(&self, before: &ThreadTimes) -> Option<f64> {
        let (now, before) = (self.0.as_ref()?, before.0.as_ref()?);
        Some(
            now.iter()
                .map(|(tid, s)| (s - before.get(tid).copied().unwrap_or(0.0)).max(0.0))
                .sum(),
        )
    }
}

/// The scheduler's threads' CPU times now.
pub fn scheduler_threads() -> ThreadTimes {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return ThreadTimes(None);
    };
    let mut times = HashMap::new();
    for entry in dir.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u64>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !SCHEDULER_THREADS.contains(&comm.trim_end()) {
            continue;
        }
        // The scheduler's own accounting, to the nanosecond, where the kernel shows it;
        // else the tick counts (10 ms apiece: a run of a few dozen pods may use less than
        // one, and then measured nothing).
        let precise = std::fs::read_to_string(path.join("sched"))
            .ok()
            .and_then(|sched| run_time_seconds(&sched));
        let seconds = precise.or_else(|| {
            std::fs::read_to_string(path.join("stat"))
                .ok()
                .and_then(|stat| cpu_seconds(&stat))
        });
        if let Some(s) = seconds {
            times.insert(tid, s);
        }
    }
    ThreadTimes(Some(times))
}

/// The time on CPU from a /proc `sched` file (`se.sum_exec_runtime`, in milliseconds
/// with six decimals), in seconds.
fn run_time_seconds(sched: &str) -> Option<f64> {
    let line = sched
        .lines()
        .find(|l| l.trim_start().starts_with("se.sum_exec_runtime"))?;
    let ms: f64 = line.rsplit(':').next()?.trim().parse().ok()?;
    Some(ms / 1000.0)
}

/// User + system seconds from a /proc `stat` line.
fn cpu_seconds(stat: &str) -> Option<f64> {
    // The name may hold spaces: count fields after its closing parenthesis (state is the
    // first, utime the 12th, stime the 13th), in USER_HZ ticks (100 per second).
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_scheduler_threads_count() {
        let stat = "7 (kubesched-sched) S 1 1 1 0 -1 0 0 0 0 0 250 50 0 0";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        let before = ThreadTimes(Some(HashMap::from([(1, 1.0), (2, 5.0)])));
        let after = ThreadTimes(Some(HashMap::from([(1, 1.5), (3, 0.25)])));
        // Thread 2 ended (lost), thread 3 is new (counted whole).
        assert_eq!(after.since(&before), Some(0.75));
        assert_eq!(ThreadTimes(None).since(&before), None);
    }

    #[test]
    fn the_precise_run_time_is_read_from_sched() {
        let sched = "kubesched-sched (7, #threads: 3)\n\
            -------------------------------------------------------------------\n\
            se.exec_start                                :       6768130.605849\n\
            se.sum_exec_runtime                          :            12.345678\n\
            se.nr_migrations                             :                    3\n";
        let s = run_time_seconds(sched).expect("parsed");
        assert!((s - 0.012_345_678).abs() < 1e-12, "{s}");
        assert_eq!(run_time_seconds("no such line"), None);
    }

    #[test]
    fn a_named_thread_is_found() {
        let spin = std::thread::Builder::new()
            .name(SCHEDULER_THREAD_NAME.into())
            .spawn(|| {
                let t = std::time::Instant::now();
                let mut x = 0u64;
                while t.elapsed() < std::time::Duration::from_millis(60) {
                    x = x.wrapping_add(1);
                }
                std::hint::black_box(x);
                std::thread::sleep(std::time::Duration::from_millis(200));
            })
            .expect("thread");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let times = scheduler_threads();
        spin.join().expect("join");
        if let Some(t) = &times.0 {
            assert_eq!(t.len(), 1, "{t:?}");
        }
    }
}
