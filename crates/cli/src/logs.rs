//! The binary's log output, in kube-scheduler's two formats: `text` (klog's header
//! `I1202 08:44:31.123456   12345 file.rs:42] "message" key="value"`) and `json` (one
//! object per line as component-base's JSON logger writes them: `ts` in seconds as a float,
//! `caller`, `msg`, `v`, then the keys; an error's `error` field is written as `err` and an
//! error line has no `v`). Lines go to standard error, unbuffered; ANSI colour only when
//! standard error is a terminal.
//!
//! **Verbosity.** kubesched logs through `tracing` levels, which [`klog_v`] puts on klog's
//! V scale: errors, warnings and info are V(0) (kube-scheduler's start-up, leader election,
//! serving and shutdown lines are unconditional or V(1) upstream), the scheduling loop's
//! per-pod debug lines ("bound pod", "unable to schedule pod; no fit; waiting") are V(2)
//! as upstream logs them, other debug lines V(4), trace V(5). `--v=N` shows every line of
//! V(N) or less; without `--v` the commands other than `run` show warnings and errors only
//! (`-v`, `-vv`, `-vvv` still mean info, debug, trace). `KUBESCHED_LOG` (an `EnvFilter`
//! directive such as `kubesched_live=debug`) replaces the filter when set.
//!
//! The binary's own lines ([`error`], [`warning`], [`note`]) come in the same format: in
//! `text` the human `error: …` / `warning: …` lines, in `json` objects like every other line
//! (the last error is `{"msg":"command failed","err":"…"}` as kube-scheduler's).

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// A log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// klog-like text lines (and `error: …` lines of the binary's own).
    #[default]
    Text,
    /// JSON lines as kube-scheduler's `--logging-format=json`.
    Json,
}

/// Which lines are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// Errors and warnings only (the default of the commands other than `run`).
    Quiet,
    /// klog's `--v=N`: every line of V(N) or less.
    V(u32),
}

/// The target of the scheduling loop, whose debug lines upstream logs at V(2).
const LOOP_TARGET: &str = "kubesched_scheduler::scheduler";

/// A line's klog verbosity: see the module documentation.
pub fn klog_v(level: &Level, target: &str) -> u32 {
    if *level <= Level::INFO {
        0
    } else if *level == Level::DEBUG {
        if target == LOOP_TARGET { 2 } else { 4 }
    } else {
        5
    }
}

/// Whether a line of `level` and `target` is shown at `verbosity`.
pub fn shown(verbosity: Verbosity, level: &Level, target: &str) -> bool {
    match verbosity {
        Verbosity::Quiet => *level <= Level::WARN,
        Verbosity::V(n) => klog_v(level, target) <= n,
    }
}

static FORMAT: OnceLock<Format> = OnceLock::new();

/// The format in effect (text until [`init`] runs).
pub fn format() -> Format {
    FORMAT.get().copied().unwrap_or_default()
}

/// Installs the log output: every `tracing` line and the binary's own lines in `format`.
pub fn init(format: Format, verbosity: Verbosity) {
    let _ = FORMAT.set(format);
    let colour = std::io::stderr().is_terminal();
    let layer = KlogLayer { format, colour };
    match tracing_subscriber::EnvFilter::try_from_env("KUBESCHED_LOG") {
        Ok(filter) => {
            let _ = tracing_subscriber::registry()
                .with(layer.with_filter(filter))
                .try_init();
        }
        Err(_) => {
            let filter = tracing_subscriber::filter::filter_fn(move |meta| {
                shown(verbosity, meta.level(), meta.target())
            });
            let _ = tracing_subscriber::registry()
                .with(layer.with_filter(filter))
                .try_init();
        }
    }
}

/// A field value: JSON keeps numbers and booleans as they are.
#[derive(Debug, Clone, PartialEq)]
enum FieldValue {
    Str(String),
    Int(i128),
    Float(f64),
    Bool(bool),
}

impl FieldValue {
    fn json(&self) -> serde_json::Value {
        match self {
            FieldValue::Str(s) => serde_json::Value::String(s.clone()),
            FieldValue::Int(i) => serde_json::Number::from_i128(*i).map_or_else(
                || serde_json::Value::String(i.to_string()),
                serde_json::Value::Number,
            ),
            FieldValue::Float(f) => serde_json::Number::from_f64(*f).map_or_else(
                || serde_json::Value::String(f.to_string()),
                serde_json::Value::Number,
            ),
            FieldValue::Bool(b) => serde_json::Value::Bool(*b),
        }
    }

    fn text(&self) -> String {
        match self {
            FieldValue::Str(s) => quote(s),
            FieldValue::Int(i) => i.to_string(),
            FieldValue::Float(f) => f.to_string(),
            FieldValue::Bool(b) => b.to_string(),
        }
    }
}

/// A string as klog quotes it (Go's strconv.Quote is close to JSON's escaping).
fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<(String, FieldValue)>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: FieldValue) {
        let name = match field.name() {
            // component-base's structured logs name the error `err`.
            "error" => "err",
            n => n,
        };
        self.pairs.push((name.to_string(), value));
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.push(field, FieldValue::Str(value.to_string()));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, FieldValue::Int(value.into()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, FieldValue::Int(value.into()));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, FieldValue::Int(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        match i128::try_from(value) {
            Ok(v) => self.push(field, FieldValue::Int(v)),
            Err(_) => self.push(field, FieldValue::Str(value.to_string())),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, FieldValue::Float(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, FieldValue::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, FieldValue::Str(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.push(field, FieldValue::Str(text));
        }
    }
}

/// One line's parts, however it was produced.
struct Line<'a> {
    severity: Severity,
    v: u32,
    caller: Option<String>,
    message: &'a str,
    pairs: &'a [(String, FieldValue)],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    fn letter(self) -> char {
        match self {
            Severity::Error => 'E',
            Severity::Warning => 'W',
            Severity::Info => 'I',
        }
    }
}

fn now() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// A JSON line (without the newline), keys in upstream's order: `ts`, `caller`, `msg`,
/// `v`, then the line's own keys.
fn json_line(line: &Line<'_>) -> String {
    let mut out = String::from("{");
    let ts = serde_json::Number::from_f64(now().as_secs_f64())
        .map_or(serde_json::Value::Null, serde_json::Value::Number);
    let _ = write!(out, "\"ts\":{ts}");
    let key = |out: &mut String, k: &str, v: serde_json::Value| {
        let _ = write!(out, ",{}:{v}", serde_json::Value::String(k.to_string()));
    };
    if let Some(caller) = &line.caller {
        key(&mut out, "caller", caller.clone().into());
    }
    key(&mut out, "msg", line.message.into());
    if line.severity != Severity::Error {
        key(&mut out, "v", line.v.into());
    }
    for (k, v) in line.pairs {
        key(&mut out, k, v.json());
    }
    out.push('}');
    out
}

/// The civil date and time (UTC) of seconds since the epoch: (month, day, h, m, s).
fn civil(secs: u64) -> (u64, u64, u64, u64, u64) {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    (month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A klog text line (without the newline).
fn text_line(line: &Line<'_>, colour: bool) -> String {
    let t = now();
    let (month, day, h, m, s) = civil(t.as_secs());
    let mut out = String::new();
    let header = format!(
        "{}{month:02}{day:02} {h:02}:{m:02}:{s:02}.{:06} {:>7} {}]",
        line.severity.letter(),
        t.subsec_micros(),
        std::process::id(),
        line.caller.as_deref().unwrap_or("kubesched"),
    );
    match (colour, line.severity) {
        (true, Severity::Error) => {
            let _ = write!(out, "\x1b[31m{header}\x1b[0m");
        }
        (true, Severity::Warning) => {
            let _ = write!(out, "\x1b[33m{header}\x1b[0m");
        }
        _ => out.push_str(&header),
    }
    let _ = write!(out, " {}", quote(line.message));
    for (k, v) in line.pairs {
        let _ = write!(out, " {k}={}", v.text());
    }
    out
}

fn emit(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

struct KlogLayer {
    format: Format,
    colour: bool,
}

impl<S: Subscriber> Layer<S> for KlogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let severity = match *meta.level() {
            Level::ERROR => Severity::Error,
            Level::WARN => Severity::Warning,
            _ => Severity::Info,
        };
        let caller = meta.file().map(|f| {
            let base = f.rsplit('/').next().unwrap_or(f);
            match meta.line() {
                Some(l) => format!("{base}:{l}"),
                None => base.to_string(),
            }
        });
        let line = Line {
            severity,
            v: klog_v(meta.level(), meta.target()),
            caller,
            message: &fields.message,
            pairs: &fields.pairs,
        };
        emit(&match self.format {
            Format::Json => json_line(&line),
            Format::Text => text_line(&line, self.colour),
        });
    }
}

/// The binary's last line when it fails: `error: message`, or in JSON kube-scheduler's
/// `{"msg":"command failed","err":"message"}`.
pub fn error(message: &str) {
    match format() {
        Format::Text => emit(&format!("error: {message}")),
        Format::Json => emit(&json_line(&Line {
            severity: Severity::Error,
            v: 0,
            caller: None,
            message: "command failed",
            pairs: &[("err".to_string(), FieldValue::Str(message.to_string()))],
        })),
    }
}

/// A warning of the binary's own: `warning: message`, or a JSON line.
pub fn warning(message: &str) {
    match format() {
        Format::Text => emit(&format!("warning: {message}")),
        Format::Json => emit(&json_line(&Line {
            severity: Severity::Warning,
            v: 0,
            caller: None,
            message,
            pairs: &[],
        })),
    }
}

/// A progress note of the binary's own: the message as it is, or a JSON line.
pub fn note(message: &str) {
    match format() {
        Format::Text => emit(message),
        Format::Json => emit(&json_line(&Line {
            severity: Severity::Info,
            v: 0,
            caller: None,
            message,
            pairs: &[],
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn klog_levels() {
        assert_eq!(klog_v(&Level::ERROR, "x"), 0);
        assert_eq!(klog_v(&Level::INFO, "x"), 0);
        assert_eq!(klog_v(&Level::DEBUG, LOOP_TARGET), 2);
        assert_eq!(klog_v(&Level::DEBUG, "kubesched_live::watch"), 4);
        assert_eq!(klog_v(&Level::TRACE, "x"), 5);
        assert!(shown(Verbosity::V(0), &Level::INFO, "x"));
        assert!(!shown(Verbosity::V(0), &Level::DEBUG, LOOP_TARGET));
        assert!(shown(Verbosity::V(2), &Level::DEBUG, LOOP_TARGET));
        assert!(!shown(
            Verbosity::V(3),
            &Level::DEBUG,
            "kubesched_live::watch"
        ));
        assert!(!shown(Verbosity::Quiet, &Level::INFO, "x"));
        assert!(shown(Verbosity::Quiet, &Level::WARN, "x"));
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1, 1, 0, 0, 0));
        // 2026-12-02 08:44:31 UTC.
        assert_eq!(civil(1_796_201_071), (12, 2, 8, 44, 31));
    }

    #[test]
    fn json_lines_have_upstream_keys() {
        let pairs = [("err".to_string(), FieldValue::Str("boom".into()))];
        let line = Line {
            severity: Severity::Error,
            v: 0,
            caller: Some("run.rs:1".into()),
            message: "command failed",
            pairs: &pairs,
        };
        let json = json_line(&line);
        assert!(json.starts_with("{\"ts\":"), "{json}");
        assert!(json.find("\"msg\"") < json.find("\"err\""), "{json}");
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert!(v["ts"].is_f64());
        assert_eq!(v["msg"], "command failed");
        assert_eq!(v["err"], "boom");
        assert!(v.get("v").is_none(), "error lines carry no v");
        let text = text_line(&line, false);
        assert!(text.starts_with('E'), "{text}");
        assert!(
            text.ends_with("run.rs:1] \"command failed\" err=\"boom\""),
            "{text}"
        );
        assert!(!text.contains('\x1b'));
    }
}
