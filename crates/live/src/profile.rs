//! `/debug/pprof/profile?seconds=N`: a CPU profile of the whole process in Go's pprof
//! format (gzipped protobuf), as upstream's profiling handlers serve it when
//! `enableProfiling` is on, so `go tool pprof https://scheduler:10259/debug/pprof/profile`
//! works unchanged. The Go runtime's other profiles (heap, goroutine, block, mutex, trace)
//! have no Rust counterpart and answer 404 with Go's "Unknown profile".

use std::io::Write as _;
use std::time::Duration;

use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use pprof::protos::Message as _;

/// Go's default when `seconds` is absent, zero, negative or not a number.
const DEFAULT_SECONDS: u64 = 30;

/// Go's sampling rate (`runtime.SetCPUProfileRate(100)`).
const SAMPLES_PER_SECOND: i32 = 100;

/// The `seconds` query parameter as Go's handler reads it.
pub fn profile_seconds(query: &std::collections::HashMap<String, String>) -> u64 {
    match query.get("seconds").map(|s| s.parse::<i64>()) {
        Some(Ok(n)) if n > 0 => n as u64,
        _ => DEFAULT_SECONDS,
    }
}

/// Why no profile came back.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Another profile is being taken (one profiler per process, as in Go).
    #[error("cpu profiling already in use")]
    InUse,
    /// The profiler or the encoding failed.
    #[error("{0}")]
    Failed(String),
}

/// Samples every thread for `duration` and returns the gzipped pprof protobuf.
pub fn cpu_profile(duration: Duration) -> Result<Vec<u8>, ProfileError> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(SAMPLES_PER_SECOND)
        // Unwinding through these from a signal handler can crash; pprof-rs's advice.
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(|e| match e {
            pprof::Error::Running => ProfileError::InUse,
            other => ProfileError::Failed(other.to_string()),
        })?;
    // The profile is the waiting: the process runs on while this thread sleeps.
    std::thread::sleep(duration);
    let report = guard
        .report()
        .build()
        .map_err(|e| ProfileError::Failed(e.to_string()))?;
    drop(guard);
    let profile = report
        .pprof()
        .map_err(|e| ProfileError::Failed(e.to_string()))?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())
        .and_then(|()| gz.finish())
        .map_err(|e| ProfileError::Failed(e.to_string()))
}

/// The handler of `/debug/pprof/profile`.
pub async fn handler(Query(query): Query<std::collections::HashMap<String, String>>) -> Response {
    let seconds = profile_seconds(&query);
    let taken =
        tokio::task::spawn_blocking(move || cpu_profile(Duration::from_secs(seconds))).await;
    match taken {
        Ok(Ok(body)) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"profile\"",
                ),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            body,
        )
            .into_response(),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Could not enable CPU profiling: {e}\n"),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Could not enable CPU profiling: {e}\n"),
        )
            .into_response(),
    }
}

/// `/debug/pprof/`: what is served here.
pub async fn index() -> &'static str {
    "/debug/pprof/\n\nprofile: CPU profile of the process (?seconds=N, default 30), in pprof format.\n\
     The Go runtime's other profiles (heap, goroutine, threadcreate, block, mutex, allocs, trace) have no counterpart in kubesched.\n"
}

/// Any other `/debug/pprof/<name>`: Go's answer for a profile it does not know.
pub async fn unknown() -> Response {
    (StatusCode::NOT_FOUND, "Unknown profile\n").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Read as _;

    #[test]
    fn seconds_are_read_as_gos_handler_reads_them() {
        let q = |v: &str| HashMap::from([("seconds".to_string(), v.to_string())]);
        assert_eq!(profile_seconds(&HashMap::new()), 30);
        assert_eq!(profile_seconds(&q("5")), 5);
        assert_eq!(profile_seconds(&q("0")), 30);
        assert_eq!(profile_seconds(&q("-3")), 30);
        assert_eq!(profile_seconds(&q("soon")), 30);
    }

    #[test]
    fn one_profile_at_a_time_and_it_is_gzipped_pprof_with_cpu_samples() {
        let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let spinner = {
            let busy = busy.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while busy.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        };
        // One profiler per process: while one is held, another is refused.
        let held = pprof::ProfilerGuardBuilder::default()
            .build()
            .expect("a profiler");
        assert!(matches!(
            cpu_profile(Duration::ZERO),
            Err(ProfileError::InUse)
        ));
        drop(held);
        let first = cpu_profile(Duration::from_millis(600));
        busy.store(false, std::sync::atomic::Ordering::Relaxed);
        spinner.join().expect("spinner");
        let gz = first.expect("a profile");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(gz.as_slice())
            .read_to_end(&mut raw)
            .expect("gzip");
        let profile = pprof::protos::Profile::decode(raw.as_slice()).expect("pprof protobuf");
        let types: Vec<&str> = profile
            .sample_type
            .iter()
            .map(|t| profile.string_table[t.ty as usize].as_str())
            .collect();
        // As Go writes a CPU profile: samples/count and cpu/nanoseconds.
        assert_eq!(types, ["samples", "cpu"]);
        assert!(profile.duration_nanos > 0);
        assert!(
            !profile.sample.is_empty(),
            "a spinning thread for 0.6 s gives samples"
        );
    }
}
