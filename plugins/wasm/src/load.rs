//! Reading a guest, compiling it once per process, and reading its extension points from its
//! exports (with upstream's signature checks and refusals).

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use kubesched_framework::{ExtensionPoint, PointSet};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmtime::{Engine, ExternType, Module, ValType};

use crate::WasmArgs;

/// Why a guest cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The args do not decode.
    #[error("decoding the wasm plugin's args: {0}")]
    Args(String),
    /// No guestURL.
    #[error("wasm: guestURL is required")]
    NoUrl,
    /// The guest could not be read.
    #[error("wasm: error reading guestURL {url}: {reason}")]
    Read {
        /// The URL as configured.
        url: String,
        /// Why.
        reason: String,
    },
    /// The guest was read but is refused (bad module, wrong exports, not a plugin).
    #[error("wasm: guest {url}: {reason}")]
    Guest {
        /// The URL as configured.
        url: String,
        /// Why, in upstream's words where it has them.
        reason: String,
    },
    /// A new instance failed (e.g. its `_start` trapped).
    #[error("failed to create a guest pool: {0}")]
    Instantiate(String),
}

/// The extension points a guest's exports implement (upstream's interface bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Interfaces {
    /// `enqueue`.
    pub enqueue: bool,
    /// `addpod` / `removepod`.
    pub pre_filter_extensions: bool,
    /// `prefilter`.
    pub pre_filter: bool,
    /// `filter`.
    pub filter: bool,
    /// `postfilter`.
    pub post_filter: bool,
    /// `prescore`.
    pub pre_score: bool,
    /// `normalizescore`.
    pub normalize_score: bool,
    /// `score`.
    pub score: bool,
    /// `reserve` / `unreserve`.
    pub reserve: bool,
    /// `permit`.
    pub permit: bool,
    /// `prebind`.
    pub pre_bind: bool,
    /// `bind`.
    pub bind: bool,
    /// `postbind`.
    pub post_bind: bool,
}

impl Interfaces {
    /// The framework points the plugin object implements, after upstream's masking: Filter
    /// brings PostFilter; Score brings PreScore; Bind brings PreBind and PostBind; PreFilter
    /// is there whenever the guest exports it (it resets the guest's cycle state).
    pub fn points(&self) -> PointSet {
        let mut p = PointSet::EMPTY.with(ExtensionPoint::EnqueueExtensions);
        if self.pre_filter {
            p = p.with(ExtensionPoint::PreFilter);
        }
        if self.filter {
            p = p.with(ExtensionPoint::Filter);
            if self.post_filter {
                p = p.with(ExtensionPoint::PostFilter);
            }
        }
        if self.score {
            p = p.with(ExtensionPoint::Score);
            if self.pre_score {
                p = p.with(ExtensionPoint::PreScore);
            }
        }
        if self.reserve {
            p = p.with(ExtensionPoint::Reserve);
        }
        if self.permit {
            p = p.with(ExtensionPoint::Permit);
        }
        if self.bind {
            p = p.with(ExtensionPoint::Bind);
            if self.pre_bind {
                p = p.with(ExtensionPoint::PreBind);
            }
            if self.post_bind {
                p = p.with(ExtensionPoint::PostBind);
            }
        }
        p
    }

    fn any(&self) -> bool {
        *self != Self::default()
    }

    /// Upstream's `maskInterfaces`: the combinations of filter (F), score (S), reserve (R),
    /// permit (P) and bind (B) it accepts, or a guest that exports only `prefilter`.
    fn check_mask(&self) -> Result<(), String> {
        const F: u8 = 1;
        const S: u8 = 2;
        const R: u8 = 4;
        const P: u8 = 8;
        const B: u8 = 16;
        const ACCEPTED: [u8; 23] = [
            F,
            F | S,
            F | S | B,
            R,
            P,
            B,
            F | R,
            F | P,
            F | B,
            S,
            S | R,
            S | P,
            S | B,
            R | B,
            P | B,
            F | S | R,
            F | S | P,
            F | S | B | R,
            F | S | B | P,
            S | R | B,
            S | P | B,
            R | P | B,
            F | S | R | P | B,
        ];
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        let mask = bit(self.filter, F)
            | bit(self.score, S)
            | bit(self.reserve, R)
            | bit(self.permit, P)
            | bit(self.bind, B);
        let only_pre_filter = *self
            == (Self {
                pre_filter: true,
                ..Self::default()
            });
        if ACCEPTED.contains(&mask) || (mask == 0 && only_pre_filter) {
            Ok(())
        } else {
            Err("wasm: filter, score, reserve, permit or bind must be exported".into())
        }
    }
}

/// A compiled guest and what it implements.
#[derive(Clone)]
pub(crate) struct Guest {
    pub module: Module,
    pub interfaces: Interfaces,
    /// Its imports of WASI (wasi_snapshot_preview1), for upstream's host detection.
    pub imports_wasi: bool,
}

/// The process-wide engine: Cranelift, epoch interruption, a 10 ms epoch ticker thread.
pub(crate) fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap_or_else(|_| Engine::default());
        let ticker = engine.clone();
        let spawned = std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    ticker.increment_epoch();
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "wasm: no epoch ticker thread: guest calls have no deadline");
        }
        engine
    })
}

/// How often the engine's epoch advances (the granularity of call deadlines).
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Compiled guests by the SHA-256 of their bytes, so config validation and the factory (and
/// several profiles) compile a guest once.
type Compiled = Mutex<HashMap<[u8; 32], Result<Guest, String>>>;

fn cache() -> &'static Compiled {
    static CACHE: OnceLock<Compiled> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Reads the guest's bytes from its URL (upstream's `getURL`: `file://` stripped by hand so a
/// relative path works; a bare path is accepted too).
fn read(args: &WasmArgs) -> Result<Vec<u8>, LoadError> {
    let url = args.guest_url.as_str();
    if url.is_empty() {
        return Err(LoadError::NoUrl);
    }
    let err = |reason: String| LoadError::Read {
        url: url.to_string(),
        reason,
    };
    let path = match url.split_once(':') {
        Some(("file", _)) => url.strip_prefix("file://").unwrap_or(&url[5..]),
        Some(("http" | "https", _)) => {
            return Err(err(
                "http(s) guests are not fetched by kubesched: download the guest and name the file"
                    .into(),
            ));
        }
        Some((scheme, _)) if scheme.len() > 1 => {
            return Err(err(format!("unsupported URL scheme: {scheme}")));
        }
        // No scheme (or a Windows drive letter, which upstream refuses as a scheme).
        Some((scheme, _)) => return Err(err(format!("unsupported URL scheme: {scheme}"))),
        None => url,
    };
    std::fs::read(path).map_err(|e| err(e.to_string()))
}

/// The compiled guest the args name (compiled once per distinct bytes).
pub(crate) fn load(args: &WasmArgs) -> Result<Guest, LoadError> {
    let bytes = read(args)?;
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    if let Some(want) = &args.guest_sha256 {
        let have: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        if !want.eq_ignore_ascii_case(&have) {
            return Err(LoadError::Read {
                url: args.guest_url.clone(),
                reason: format!("guestSHA256 is {want} but the guest's is {have}"),
            });
        }
    }
    let guest_err = |reason: String| LoadError::Guest {
        url: args.guest_url.clone(),
        reason,
    };
    if let Some(done) = cache().lock().get(&digest) {
        return done.clone().map_err(guest_err);
    }
    let compiled = compile(&bytes);
    cache().lock().insert(digest, compiled.clone());
    compiled.map_err(guest_err)
}

/// Compiles bytes (binary or, for tests and hand-written guests, text) into a guest.
pub(crate) fn compile(bytes: &[u8]) -> Result<Guest, String> {
    let module = Module::new(engine(), bytes)
        .map_err(|e| format!("wasm: error compiling guest: {}", root(&e)))?;
    if !module
        .exports()
        .any(|e| e.name() == "memory" && matches!(e.ty(), ExternType::Memory(_)))
    {
        return Err("wasm: guest doesn't export memory[memory]".into());
    }
    let interfaces = detect(&module)?;
    if !interfaces.any() {
        return Err("wasm: guest does not export any plugin functions".into());
    }
    interfaces.check_mask()?;
    let imports_wasi = module
        .imports()
        .any(|i| i.module() == crate::host::WASI_MODULE);
    Ok(Guest {
        module,
        interfaces,
        imports_wasi,
    })
}

/// The innermost message of an error chain.
pub(crate) fn root(e: &wasmtime::Error) -> String {
    e.root_cause().to_string()
}

/// Upstream's `detectInterfaces`: every known export must have its signature.
fn detect(module: &Module) -> Result<Interfaces, String> {
    let mut i = Interfaces::default();
    for export in module.exports() {
        let ExternType::Func(f) = export.ty() else {
            continue;
        };
        let name = export.name();
        let (flag, want): (&mut bool, Option<Want>) = match name {
            "enqueue" => (&mut i.enqueue, Some(Want::Unit)),
            "prefilter" => (&mut i.pre_filter, Some(Want::I32)),
            "filter" => (&mut i.filter, Some(Want::I32)),
            "postfilter" => (&mut i.post_filter, Some(Want::I64)),
            "prescore" => (&mut i.pre_score, Some(Want::I32)),
            "score" => (&mut i.score, Some(Want::I64)),
            "normalizescore" => (&mut i.normalize_score, Some(Want::I32)),
            "reserve" => (&mut i.reserve, Some(Want::I32)),
            "unreserve" => (&mut i.reserve, Some(Want::Unit)),
            "permit" => (&mut i.permit, Some(Want::I64)),
            "prebind" => (&mut i.pre_bind, Some(Want::I32)),
            "bind" => (&mut i.bind, Some(Want::I32)),
            "postbind" => (&mut i.post_bind, Some(Want::Unit)),
            "addpod" | "removepod" => (&mut i.pre_filter_extensions, Some(Want::I32Unit)),
            _ => continue,
        };
        let Some(want) = want else { continue };
        let params = f.params().count();
        let results: Vec<ValType> = f.results().collect();
        let ok = params == 0
            && match want {
                Want::Unit => results.is_empty(),
                Want::I32 | Want::I32Unit => {
                    results.len() == 1 && matches!(results[0], ValType::I32)
                }
                Want::I64 => results.len() == 1 && matches!(results[0], ValType::I64),
            };
        if !ok {
            let sig = match want {
                Want::Unit | Want::I32Unit => "() -> ()",
                Want::I32 => "() -> (i32)",
                Want::I64 => "() -> (i64)",
            };
            return Err(format!(
                "wasm: guest exports the wrong signature for func[{name}]. should be {sig}"
            ));
        }
        *flag = true;
    }
    Ok(i)
}

/// The signature an export must have. (`addpod`/`removepod` return i32; upstream's message
/// for them says `() -> ()`, kept.)
#[derive(Clone, Copy)]
enum Want {
    Unit,
    I32,
    I64,
    I32Unit,
}
