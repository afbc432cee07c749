//! `Status`: the outcome of running a plugin, with upstream's codes.

use std::fmt;
use std::sync::Arc;

/// The outcome code of a plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Code {
    /// The plugin ran and the pod may go on.
    Success,
    /// An internal error: the pod is retried with backoff, no preemption.
    Error,
    /// The pod does not fit now; preemption may help.
    Unschedulable,
    /// The pod does not fit and preemption cannot help on this node.
    UnschedulableAndUnresolvable,
    /// Permit: the pod waits for approval.
    Wait,
    /// The plugin has nothing to do for this pod (PreFilter, PreScore, Bind, PreBind).
    Skip,
    /// The pod waits for something outside the scheduler; it is retried without backoff.
    Pending,
}

impl Code {
    /// The name used in metrics labels and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Wait => "Wait",
            Code::Skip => "Skip",
            Code::Pending => "Pending",
        }
    }
}

/// A plugin's answer: a code, human-readable reasons, the plugin that gave it and, for
/// errors, the cause.
///
/// Everything but the code sits behind one box that Success and Skip do without: Filter
/// returns a status per plugin per node, and the common answer stays two words wide with
/// nothing to free.
#[derive(Clone, PartialEq)]
pub struct Status {
    code: Code,
    detail: Option<Box<Detail>>,
}

#[derive(Clone, PartialEq, Default)]
struct Detail {
    reasons: Reasons,
    /// Shared: the framework names the rejecting plugin on every rejected node.
    plugin: Option<Arc<str>>,
    cause: Option<Arc<str>>,
}

/// A status's reasons. Nearly every rejection gives one, kept without a vector of its own:
/// a failed Filter pass makes one status per node.
#[derive(Clone)]
enum Reasons {
    One(String),
    Many(Vec<String>),
}

impl Reasons {
    fn as_slice(&self) -> &[String] {
        match self {
            Reasons::One(r) => std::slice::from_ref(r),
            Reasons::Many(rs) => rs,
        }
    }

    fn push(&mut self, reason: String) {
        match self {
            Reasons::Many(rs) => rs.push(reason),
            Reasons::One(r) => {
                let first = std::mem::take(r);
                *self = Reasons::Many(vec![first, reason]);
            }
        }
    }
}

impl Default for Reasons {
    fn default() -> Self {
        Reasons::Many(Vec::new())
    }
}

impl PartialEq for Reasons {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Status");
        d.field("code", &self.code);
        if !self.reasons().is_empty() {
            d.field("reasons", &self.reasons());
        }
        if let Some(p) = self.plugin() {
            d.field("plugin", &p);
        }
        d.finish()
    }
}

impl Default for Status {
    fn default() -> Self {
        Self::success()
    }
}

impl Status {
    /// A status with a code and reasons.
    pub fn new(code: Code, reasons: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut reasons = reasons.into_iter().map(Into::into);
        let Some(first) = reasons.next() else {
            return Self::bare(code);
        };
        let reasons = match reasons.next() {
            None => Reasons::One(first),
            Some(second) => Reasons::Many([first, second].into_iter().chain(reasons).collect()),
        };
        Self {
            code,
            detail: Some(Box::new(Detail {
                reasons,
                ..Detail::default()
            })),
        }
    }

    const fn bare(code: Code) -> Self {
        Self { code, detail: None }
    }

    /// Success.
    pub const fn success() -> Self {
        Self::bare(Code::Success)
    }

    /// The internal error of a plugin that finds no state of its own in the cycle state
    /// where `point` (`"PreFilter"`, `"PreScore"`) should have written it.
    pub fn missing_state(plugin: &str, point: &str) -> Self {
        Self::error(format!(
            "reading the {point} state of {plugin} from the cycle state: {point} did not run"
        ))
    }

    /// An internal error with its cause.
    pub fn error(cause: impl fmt::Display) -> Self {
        let text = cause.to_string();
        Self {
            code: Code::Error,
            detail: Some(Box::new(Detail {
                cause: Some(text.as_str().into()),
                reasons: Reasons::One(text),
                plugin: None,
            })),
        }
    }

    /// Unschedulable, with one reason.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, [reason.into()])
    }

    /// UnschedulableAndUnresolvable, with one reason.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, [reason.into()])
    }

    /// Skip.
    pub const fn skip() -> Self {
        Self::bare(Code::Skip)
    }

    /// Wait (Permit).
    pub fn wait() -> Self {
        Self::bare(Code::Wait)
    }

    /// Pending, with one reason.
    pub fn pending(reason: impl Into<String>) -> Self {
        Self::new(Code::Pending, [reason.into()])
    }

    fn detail_mut(&mut self) -> &mut Detail {
        self.detail.get_or_insert_with(Box::default)
    }

    /// Sets the plugin that gave the status (kept if already set).
    pub fn with_plugin(mut self, plugin: &str) -> Self {
        if self.plugin().is_none() {
            self.detail_mut().plugin = Some(plugin.into());
        }
        self
    }

    /// [`Status::with_plugin`] with a name the caller keeps: no copy of it is made.
    pub fn with_plugin_shared(mut self, plugin: &Arc<str>) -> Self {
        if self.plugin().is_none() {
            self.detail_mut().plugin = Some(Arc::clone(plugin));
        }
        self
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons.
    pub fn reasons(&self) -> &[String] {
        self.detail.as_ref().map_or(&[], |d| d.reasons.as_slice())
    }

    /// The plugin that gave the status, when known.
    pub fn plugin(&self) -> Option<&str> {
        self.detail.as_ref().and_then(|d| d.plugin.as_deref())
    }

    /// The reasons joined by `, `.
    pub fn message(&self) -> String {
        self.reasons().join(", ")
    }

    /// The cause of an error.
    pub fn cause(&self) -> Option<&str> {
        self.detail.as_ref().and_then(|d| d.cause.as_deref())
    }

    /// Whether the code is Success.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// Whether the code is Skip.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// Whether the code is Wait.
    pub fn is_wait(&self) -> bool {
        self.code == Code::Wait
    }

    /// Whether the code is Error.
    pub fn is_error(&self) -> bool {
        self.code == Code::Error
    }

    /// Whether the pod was rejected: Unschedulable, UnschedulableAndUnresolvable or Pending.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending
        )
    }

    /// Appends a reason.
    pub fn push_reason(&mut self, reason: impl Into<String>) {
        self.detail_mut().reasons.push(reason.into());
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reasons().is_empty() {
            f.write_str(self.code.as_str())
        } else {
            f.write_str(&self.message())
        }
    }
}
