//! CEL device selectors: compiling an expression once, evaluating it against a device, and
//! the parts of Kubernetes' CEL environment DRA selectors use (`device.driver`,
//! `device.attributes[domain].id`, `device.capacity[domain].id` as quantities, the
//! quantity and semver libraries).
//!
//! The `cel` crate has no cost accounting, so the cost limit is enforced with a worst-case
//! estimate computed from the expression tree when it is compiled: every node costs one
//! unit, a comprehension costs its body times the size of what it iterates (a list
//! literal's length, or the most entries a device map can hold). An expression whose
//! estimate exceeds [`CEL_SELECTOR_MAX_COST`] fails at evaluation as upstream's runtime
//! limit does; real selectors stay far below it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, OnceLock};

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{Context, Env, ExecutionError, Program};
use kubesched_framework::model::Quantity;
use kubesched_framework::model::k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};
use parking_lot::Mutex;

/// Upstream's `CELSelectorExpressionMaxCost`: the cost limit of one selector.
pub const CEL_SELECTOR_MAX_COST: u64 = 1_000_000;
/// Upstream's `ResourceSliceMaxAttributesAndCapacitiesPerDevice`: bounds the device maps.
const MAX_ATTRIBUTES_PER_DEVICE: u64 = 32;
/// How many compiled expressions stay cached (upstream keeps an LRU of 10; selectors of a
/// few classes are reused by every pod).
const CACHE_SIZE: usize = 64;

/// A compiled selector.
pub struct CompiledExpression {
    /// The source.
    pub expression: String,
    program: Result<Program, String>,
    /// Worst-case cost estimate.
    pub max_cost: u64,
    /// String literals of the expression: the attribute domains it may look up, which a
    /// device without them must still answer with an empty map.
    literals: Vec<Arc<String>>,
}

impl fmt::Debug for CompiledExpression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledExpression")
            .field("expression", &self.expression)
            .field("max_cost", &self.max_cost)
            .finish_non_exhaustive()
    }
}

impl CompiledExpression {
    /// The compile error, if the expression does not compile.
    pub fn error(&self) -> Option<&str> {
        self.program.as_ref().err().map(String::as_str)
    }

    /// Evaluates the selector for one device. `Err` carries upstream's runtime-error text.
    pub fn matches(&self, device: &DeviceValue) -> Result<bool, String> {
        let program = self.program.as_ref().map_err(Clone::clone)?;
        if self.max_cost > CEL_SELECTOR_MAX_COST {
            return Err("operation cancelled: actual cost limit exceeded".into());
        }
        let value = device.with_domains(&self.literals);
        ROOT_CONTEXT.with(|root| {
            let mut scope = root.new_inner_scope();
            scope.add_variable_from_value("device", value);
            match program.execute(&scope) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!(
                    "CEL result of type {} could not be converted to bool",
                    other.type_of()
                )),
                Err(e) => Err(enhance_runtime_error(&e)),
            }
        })
    }
}

/// Upstream adds a hint to "no such key" errors, which are the usual mistake.
fn enhance_runtime_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(key) => format!(
            "no such key: {key} (hint: the key may be absent on some devices: use has() or the \
             `in` operator to check for it first)"
        ),
        other => other.to_string(),
    }
}

/// A cache of compiled expressions shared by all cycles.
#[derive(Debug, Default)]
pub struct CelCache {
    entries: Mutex<HashMap<String, Arc<CompiledExpression>>>,
}

impl CelCache {
    /// The compiled form of `expression`, compiling it on first use.
    pub fn get_or_compile(&self, expression: &str) -> Arc<CompiledExpression> {
        if let Some(c) = self.entries.lock().get(expression) {
            return c.clone();
        }
        let compiled = Arc::new(compile(expression));
        let mut entries = self.entries.lock();
        if entries.len() >= CACHE_SIZE {
            // Selectors are few in practice; starting over beats tracking recency.
            entries.clear();
        }
        entries.insert(expression.to_string(), compiled.clone());
        compiled
    }
}

fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib()))
}

thread_local! {
    /// The functions of the DRA environment, added once per thread.
    static ROOT_CONTEXT: Context<'static, 'static> = root_context();
}

fn root_context() -> Context<'static, 'static> {
    let mut ctx = Context::with_env(env().clone());
    add(
        &mut ctx,
        "quantity",
        |This(this): This<Value>| match &this {
            Value::String(s) => parse_quantity(s),
            other => Err(ExecutionError::function_error(
                "quantity",
                format!("expected a string, got {}", other.type_of()),
            )),
        },
    );
    add(&mut ctx, "isQuantity", |This(this): This<Value>| {
        Ok(Value::Bool(
            matches!(&this, Value::String(s) if Quantity::parse(s).is_ok()),
        ))
    });
    add(&mut ctx, "semver", |This(this): This<Value>| match &this {
        Value::String(s) => parse_semver(s),
        other => Err(ExecutionError::function_error(
            "semver",
            format!("expected a string, got {}", other.type_of()),
        )),
    });
    add(&mut ctx, "isSemver", |This(this): This<Value>| {
        Ok(Value::Bool(
            matches!(&this, Value::String(s) if Semver::parse(s).is_some()),
        ))
    });
    add2(&mut ctx, "compareTo", |a, b| {
        Ok(Value::Int(compare(a, b, "compareTo")? as i64))
    });
    add2(&mut ctx, "isLessThan", |a, b| {
        Ok(Value::Bool(compare(a, b, "isLessThan")?.is_lt()))
    });
    add2(&mut ctx, "isGreaterThan", |a, b| {
        Ok(Value::Bool(compare(a, b, "isGreaterThan")?.is_gt()))
    });
    add2(&mut ctx, "add", |a, b| arith(a, b, "add", 1));
    add2(&mut ctx, "sub", |a, b| arith(a, b, "sub", -1));
    add(&mut ctx, "sign", |This(this): This<Value>| {
        let q = as_quantity(&this, "sign")?;
        Ok(Value::Int(q.nanos().signum() as i64))
    });
    add(&mut ctx, "isInteger", |This(this): This<Value>| {
        let q = as_quantity(&this, "isInteger")?;
        Ok(Value::Bool(
            q.nanos() % 1_000_000_000 == 0 && i64::try_from(q.nanos() / 1_000_000_000).is_ok(),
        ))
    });
    add(&mut ctx, "asInteger", |This(this): This<Value>| {
        let q = as_quantity(&this, "asInteger")?;
        if q.nanos() % 1_000_000_000 != 0 {
            return Err(ExecutionError::function_error(
                "asInteger",
                "cannot convert value to integer",
            ));
        }
        i64::try_from(q.nanos() / 1_000_000_000)
            .map(Value::Int)
            .map_err(|_| {
                ExecutionError::function_error("asInteger", "cannot convert value to integer")
            })
    });
    add(&mut ctx, "asApproximateFloat", |This(this): This<Value>| {
        let q = as_quantity(&this, "asApproximateFloat")?;
        Ok(Value::Float(q.nanos() as f64 / 1e9))
    });
    for (name, part) in [("major", 0usize), ("minor", 1), ("patch", 2)] {
        add(&mut ctx, name, move |This(this): This<Value>| {
            let v = as_semver(&this, name)?;
            Ok(Value::Int(
                i64::try_from([v.major, v.minor, v.patch][part]).unwrap_or(i64::MAX),
            ))
        });
    }
    ctx
}

fn add<F>(ctx: &mut Context<'static, 'static>, name: &str, f: F)
where
    F: Fn(This<Value>) -> Result<Value, ExecutionError> + Send + Sync + 'static,
{
    if let Err(e) = ctx.add_function(name, f) {
        tracing::error!(function = name, error = %e, "DRA CEL environment: function not added");
    }
}

fn add2<F>(ctx: &mut Context<'static, 'static>, name: &'static str, f: F)
where
    F: Fn(&Value, &Value) -> Result<Value, ExecutionError> + Send + Sync + 'static,
{
    add_with_arg(ctx, name, move |This(this): This<Value>, arg: Value| {
        f(&this, &arg)
    });
}

fn add_with_arg<F>(ctx: &mut Context<'static, 'static>, name: &str, f: F)
where
    F: Fn(This<Value>, Value) -> Result<Value, ExecutionError> + Send + Sync + 'static,
{
    if let Err(e) = ctx.add_function(name, f) {
        tracing::error!(function = name, error = %e, "DRA CEL environment: function not added");
    }
}

/// A resource quantity as a CEL value (Kubernetes' `kubernetes.Quantity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelQuantity(pub Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version as a CEL value (Kubernetes' `kubernetes.Semver`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<String>,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    /// Parses a semver 2.0.0 version (build metadata is accepted and ignored).
    pub fn parse(text: &str) -> Option<Self> {
        let core_and_pre = text.split('+').next()?;
        let (core, pre) = match core_and_pre.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (core_and_pre, None),
        };
        let mut nums = core.split('.');
        let mut next = || -> Option<u64> {
            let n = nums.next()?;
            if n.is_empty() || (n.len() > 1 && n.starts_with('0')) {
                return None;
            }
            n.parse().ok()
        };
        let (major, minor, patch) = (next()?, next()?, next()?);
        if nums.next().is_some() {
            return None;
        }
        let pre = match pre {
            None => Vec::new(),
            Some(p) => {
                let parts: Vec<String> = p.split('.').map(str::to_string).collect();
                if parts.iter().any(|s| {
                    s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                }) {
                    return None;
                }
                parts
            }
        };
        Some(Self {
            major,
            minor,
            patch,
            pre,
        })
    }

    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let core =
            (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let o = match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                (Ok(_), Err(_)) => Ordering::Less,
                (Err(_), Ok(_)) => Ordering::Greater,
                (Err(_), Err(_)) => a.cmp(b),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

fn parse_quantity(s: &str) -> Result<Value, ExecutionError> {
    Quantity::parse(s)
        .map(|q| Value::Opaque(Arc::new(CelQuantity(q))))
        .map_err(|e| ExecutionError::function_error("quantity", e))
}

fn parse_semver(s: &str) -> Result<Value, ExecutionError> {
    Semver::parse(s)
        .map(|v| Value::Opaque(Arc::new(v)))
        .ok_or_else(|| ExecutionError::function_error("semver", format!("invalid semver: {s}")))
}

fn as_quantity(v: &Value, function: &str) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<CelQuantity>()
            .map(|q| q.0)
            .ok_or_else(|| type_error(function, v)),
        _ => Err(type_error(function, v)),
    }
}

fn as_semver(v: &Value, function: &str) -> Result<Semver, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<Semver>()
            .cloned()
            .ok_or_else(|| type_error(function, v)),
        _ => Err(type_error(function, v)),
    }
}

fn type_error(function: &str, v: &Value) -> ExecutionError {
    ExecutionError::function_error(function, format!("no such overload for {}", v.type_of()))
}

fn compare(a: &Value, b: &Value, function: &str) -> Result<std::cmp::Ordering, ExecutionError> {
    if let (Ok(x), Ok(y)) = (as_quantity(a, function), as_quantity(b, function)) {
        return Ok(x.cmp(&y));
    }
    let x = as_semver(a, function)?;
    let y = as_semver(b, function)?;
    Ok(x.cmp(&y))
}

fn arith(a: &Value, b: &Value, function: &str, sign: i128) -> Result<Value, ExecutionError> {
    let x = as_quantity(a, function)?;
    let y = match b {
        Value::Int(i) => Quantity::from_units(*i),
        other => as_quantity(other, function)?,
    };
    let nanos = x.nanos() + sign * y.nanos();
    // Quantities are exact to the nano-unit; rebuild through the milli and unit constructors.
    let q = Quantity::parse(&format!("{nanos}n"))
        .map_err(|e| ExecutionError::function_error(function, e))?;
    Ok(Value::Opaque(Arc::new(CelQuantity(q))))
}

/// A device as selectors see it, built once per device and shared by its evaluations.
#[derive(Debug, Clone)]
pub struct DeviceValue {
    driver: Arc<String>,
    attributes: HashMap<Arc<String>, HashMap<Arc<String>, Value>>,
    capacity: HashMap<Arc<String>, HashMap<Arc<String>, Value>>,
    /// `allowMultipleAllocations` (DRAConsumableCapacity), false when unset.
    allow_multiple: bool,
}

/// Splits a qualified name into domain and id; the driver is the default domain.
pub fn split_qualified_name<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    match name.split_once('/') {
        Some((domain, id)) => (domain, id),
        None => (driver, name),
    }
}

impl DeviceValue {
    /// Builds the value; a version attribute that is not valid semver is an error, as
    /// upstream reports it.
    pub fn new(
        driver: &str,
        attributes: Option<&BTreeMap<String, DeviceAttribute>>,
        capacity: Option<&BTreeMap<String, DeviceCapacity>>,
    ) -> Result<Self, String> {
        let mut attrs: HashMap<Arc<String>, HashMap<Arc<String>, Value>> = HashMap::new();
        for (name, attr) in attributes.into_iter().flatten() {
            let value = if let Some(i) = attr.int {
                Value::Int(i)
            } else if let Some(b) = attr.bool {
                Value::Bool(b)
            } else if let Some(s) = &attr.string {
                Value::String(Arc::new(s.clone()))
            } else if let Some(v) = &attr.version {
                let parsed = Semver::parse(v)
                    .ok_or_else(|| format!("attribute {name}: parse semantic version: {v:?}"))?;
                Value::Opaque(Arc::new(parsed))
            } else {
                return Err(format!("attribute {name}: unsupported attribute value"));
            };
            let (domain, id) = split_qualified_name(name, driver);
            attrs
                .entry(Arc::new(domain.to_string()))
                .or_default()
                .insert(Arc::new(id.to_string()), value);
        }
        let mut caps: HashMap<Arc<String>, HashMap<Arc<String>, Value>> = HashMap::new();
        for (name, cap) in capacity.into_iter().flatten() {
            let q = Quantity::parse(&cap.value.0).map_err(|e| format!("capacity {name}: {e}"))?;
            let (domain, id) = split_qualified_name(name, driver);
            caps.entry(Arc::new(domain.to_string()))
                .or_default()
                .insert(
                    Arc::new(id.to_string()),
                    Value::Opaque(Arc::new(CelQuantity(q))),
                );
        }
        Ok(Self {
            driver: Arc::new(driver.to_string()),
            attributes: attrs,
            capacity: caps,
            allow_multiple: false,
        })
    }

    /// The device's `allowMultipleAllocations`, as `device.allowMultipleAllocations`.
    pub fn with_allow_multiple(mut self, allow: bool) -> Self {
        self.allow_multiple = allow;
        self
    }

    /// The `device` variable; domains named in `literals` that the device lacks are
    /// present as empty maps (upstream answers an unknown domain with an empty map).
    fn with_domains(&self, literals: &[Arc<String>]) -> Value {
        let build = |maps: &HashMap<Arc<String>, HashMap<Arc<String>, Value>>| -> Value {
            let mut outer: HashMap<String, Value> = maps
                .iter()
                .map(|(d, inner)| {
                    let inner: HashMap<String, Value> = inner
                        .iter()
                        .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                        .collect();
                    (d.as_str().to_string(), Value::from(inner))
                })
                .collect();
            for l in literals {
                if !outer.contains_key(l.as_str()) {
                    outer.insert(
                        l.as_str().to_string(),
                        Value::from(HashMap::<String, Value>::new()),
                    );
                }
            }
            Value::from(outer)
        };
        let mut device: HashMap<String, Value> = HashMap::with_capacity(4);
        device.insert("driver".into(), Value::String(self.driver.clone()));
        device.insert("attributes".into(), build(&self.attributes));
        device.insert("capacity".into(), build(&self.capacity));
        device.insert(
            "allowMultipleAllocations".into(),
            Value::Bool(self.allow_multiple),
        );
        Value::from(device)
    }
}

/// Compiles one expression (no caching).
pub fn compile(expression: &str) -> CompiledExpression {
    let parsed = env().parser().parse(expression);
    let (max_cost, literals) = match &parsed {
        Ok(ast) => {
            let mut literals = HashSet::new();
            collect_literals(ast, &mut literals);
            (
                estimate_cost(ast),
                literals.into_iter().map(Arc::new).collect(),
            )
        }
        Err(_) => (u64::MAX, Vec::new()),
    };
    let program = env()
        .compile(expression)
        .map_err(|e| format!("compilation failed: {e}"));
    CompiledExpression {
        expression: expression.to_string(),
        program,
        max_cost,
        literals,
    }
}

fn collect_literals(e: &IdedExpr, out: &mut HashSet<String>) {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => {
            // Only names that can be domains: DNS subdomains with a dot.
            if s.contains('.')
                && s.len() <= 63
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
            {
                out.insert(s.to_string());
            }
        }
        _ => for_children(e, |c| collect_literals(c, out)),
    }
}

fn for_children(e: &IdedExpr, mut f: impl FnMut(&IdedExpr)) {
    match &e.expr {
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                f(t);
            }
            call.args.iter().for_each(&mut f);
        }
        Expr::Comprehension(c) => {
            f(&c.iter_range);
            f(&c.accu_init);
            f(&c.loop_cond);
            f(&c.loop_step);
            f(&c.result);
        }
        Expr::List(l) => l.elements.iter().for_each(&mut f),
        Expr::Map(m) => {
            for entry in &m.entries {
                for_entry(entry, &mut f);
            }
        }
        Expr::Select(s) => f(&s.operand),
        Expr::Struct(s) => {
            for entry in &s.entries {
                for_entry(entry, &mut f);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn for_entry(entry: &cel::common::ast::IdedEntryExpr, f: &mut impl FnMut(&IdedExpr)) {
    use cel::common::ast::EntryExpr;
    match &entry.expr {
        EntryExpr::StructField(s) => f(&s.value),
        EntryExpr::MapEntry(m) => {
            f(&m.key);
            f(&m.value);
        }
    }
}

/// Worst-case cost: one unit per node, comprehension bodies times the iterated size.
fn estimate_cost(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Comprehension(c) => {
            let size = match &c.iter_range.expr {
                Expr::List(l) => l.elements.len() as u64,
                Expr::Map(m) => m.entries.len() as u64,
                _ => MAX_ATTRIBUTES_PER_DEVICE,
            };
            let body = estimate_cost(&c.loop_cond).saturating_add(estimate_cost(&c.loop_step));
            estimate_cost(&c.iter_range)
                .saturating_add(estimate_cost(&c.accu_init))
                .saturating_add(size.saturating_mul(body))
                .saturating_add(estimate_cost(&c.result))
        }
        _ => {
            let mut cost = 1u64;
            for_children(e, |c| cost = cost.saturating_add(estimate_cost(c)));
            cost
        }
    }
}
