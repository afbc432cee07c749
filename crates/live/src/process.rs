//! The process collector every Prometheus client library exposes and Kubernetes dashboards
//! key on (kubernetes-mixin fills its instance picker from `process_cpu_seconds_total`):
//! CPU time, memory, file descriptors and start time, read from Linux's /proc. Elsewhere,
//! or where /proc cannot be read, the families are left out rather than made up.

use std::fmt::Write as _;

/// Linux reports process times in USER_HZ ticks, which its ABI fixes at 100 a second on
/// every architecture Rust targets but Alpha.
const TICKS_PER_SECOND: f64 = 100.0;

/// What /proc says of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<f64>,
    /// Virtual memory size, in bytes.
    pub virtual_memory_bytes: f64,
    /// The soft limit on the address space, in bytes (2^64 for "unlimited", as the Go
    /// collector reports it).
    pub virtual_memory_max_bytes: Option<f64>,
    /// Resident set size, in bytes.
    pub resident_memory_bytes: f64,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// This process's figures, or None where /proc/self cannot be read.
    pub fn of_self() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let mut stats = from_proc(&stat, &status)?;
        stats.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|entries| entries.count() as u64);
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
            stats.max_fds = soft_limit(&limits, "Max open files");
            stats.virtual_memory_max_bytes = soft_limit(&limits, "Max address space");
        }
        if let (Some(ticks), Ok(proc_stat)) =
            (start_ticks(&stat), std::fs::read_to_string("/proc/stat"))
        {
            stats.start_time_seconds =
                boot_time(&proc_stat).map(|boot| boot + ticks / TICKS_PER_SECOND);
        }
        Some(stats)
    }

    /// The families in Prometheus text format; with `openmetrics`, the counter's family is
    /// named without `_total`, as OpenMetrics names it.
    pub fn metrics_text(&self, openmetrics: bool) -> String {
        let mut out = String::new();
        let cpu_family = if openmetrics {
            "process_cpu_seconds"
        } else {
            "process_cpu_seconds_total"
        };
        let _ = writeln!(
            out,
            "# HELP {cpu_family} Total user and system CPU time spent in seconds.\n# TYPE {cpu_family} counter\nprocess_cpu_seconds_total {}",
            self.cpu_seconds
        );
        let gauges = [
            (
                "process_open_fds",
                "Number of open file descriptors.",
                self.open_fds.map(|n| n as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                self.max_fds,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                Some(self.virtual_memory_bytes),
            ),
            (
                "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes.",
                self.virtual_memory_max_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                Some(self.resident_memory_bytes),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                self.start_time_seconds,
            ),
        ];
        for (family, help, value) in gauges {
            if let Some(value) = value {
                let _ = writeln!(
                    out,
                    "# HELP {family} {help}\n# TYPE {family} gauge\n{family} {value}"
                );
            }
        }
        out
    }
}

/// The fields of /proc/PID/stat after the command name, which may itself hold spaces and
/// parentheses: it ends at the last `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after = stat.rfind(')')?;
    Some(stat[after + 1..].split_whitespace().collect())
}

/// CPU time and memory from /proc/PID/stat and /proc/PID/status.
fn from_proc(stat: &str, status: &str) -> Option<ProcessStats> {
    // After the name: state is field 3, utime 14, stime 15 (1-based, as proc(5) counts).
    let fields = stat_fields(stat)?;
    let ticks = |field: usize| fields.get(field - 3)?.parse::<f64>().ok();
    let cpu_seconds = (ticks(14)? + ticks(15)?) / TICKS_PER_SECOND;
    let kib = |key: &str| {
        status.lines().find_map(|line| {
            let rest = line.strip_prefix(key)?.strip_prefix(':')?;
            let number = rest.trim().strip_suffix("kB")?.trim();
            number.parse::<f64>().ok().map(|k| k * 1024.0)
        })
    };
    Some(ProcessStats {
        cpu_seconds,
        open_fds: None,
        max_fds: None,
        virtual_memory_bytes: kib("VmSize").unwrap_or(0.0),
        virtual_memory_max_bytes: None,
        resident_memory_bytes: kib("VmRSS").unwrap_or(0.0),
        start_time_seconds: None,
    })
}

/// The process's start, in ticks after boot (field 22 of /proc/PID/stat).
fn start_ticks(stat: &str) -> Option<f64> {
    stat_fields(stat)?.get(22 - 3)?.parse().ok()
}

/// The boot time, in seconds since the epoch (`btime` of /proc/stat).
fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of one row of /proc/PID/limits ("unlimited" as 2^64).
fn soft_limit(limits: &str, row: &str) -> Option<f64> {
    let rest = limits.lines().find_map(|line| line.strip_prefix(row))?;
    let soft = rest.split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(18_446_744_073_709_551_615.0);
    }
    soft.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (kube sched (x)) S 1 4242 4242 0 -1 4194560 9000 0 0 0 \
                        250 120 0 0 20 0 7 0 123456 104857600 5000 18446744073709551615";

    const STATUS: &str = "Name:\tkubesched\nVmPeak:\t  210000 kB\nVmSize:\t  102400 kB\n\
                          VmRSS:\t   20000 kB\nThreads:\t7\n";

    #[test]
    fn cpu_and_memory_come_from_stat_and_status() {
        let stats = from_proc(STAT, STATUS).expect("parsed");
        assert_eq!(stats.cpu_seconds, 3.7);
        assert_eq!(stats.virtual_memory_bytes, 102_400.0 * 1024.0);
        assert_eq!(stats.resident_memory_bytes, 20_000.0 * 1024.0);
        assert_eq!(start_ticks(STAT), Some(123_456.0));
    }

    #[test]
    fn limits_and_boot_time_are_read_by_row() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1048576              1048576              files\n\
                      Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1_048_576.0));
        assert_eq!(
            soft_limit(limits, "Max address space"),
            Some(18_446_744_073_709_551_615.0)
        );
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1764633600\n"),
            Some(1_764_633_600.0)
        );
    }

    #[test]
    fn this_process_is_described_in_both_formats() {
        let stats = ProcessStats::of_self().expect("Linux's /proc");
        assert!(stats.resident_memory_bytes > 0.0);
        assert!(stats.open_fds.is_some_and(|n| n > 0));
        assert!(stats.start_time_seconds.is_some_and(|t| t > 1.0e9));
        let text = stats.metrics_text(false);
        for family in [
            "process_cpu_seconds_total ",
            "process_open_fds ",
            "process_max_fds ",
            "process_virtual_memory_bytes ",
            "process_resident_memory_bytes ",
            "process_start_time_seconds ",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(family)),
                "{family} in:\n{text}"
            );
        }
        assert!(
            stats
                .metrics_text(true)
                .contains("# TYPE process_cpu_seconds counter\n")
        );
    }

    #[test]
    fn a_garbled_stat_line_gives_nothing_rather_than_zeroes() {
        assert_eq!(from_proc("4242 (x) S 1 2", STATUS), None);
        assert_eq!(from_proc("no parenthesis", STATUS), None);
    }
}
