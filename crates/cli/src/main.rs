//! The `kubesched` binary: command-line parsing and reporting, nothing else. Scheduling
//! lives in the library crates; the plugin set comes from this crate's Cargo features.
//! kube-scheduler's own flags (src/kube_flags.rs) are accepted at the top level, where
//! they mean `kubesched run`, and on `run`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use kubesched::framework::{FeatureGates, Version, registry};
use kubesched::{kube_flags, logs, version};
use kubesched_config::LoadedConfig;
use kubesched_sim::{Simulation, SimulationOptions, Workload, load_paths};

// With the `mimalloc` feature, mimalloc replaces the system's malloc. It keeps allocations
// of one size together, so the node and pod records a pass walks sit closer in memory, and
// allocating is cheaper: about a fifth more pods/s at 5000 nodes. The heap grows too (a fifth
// at 5000 nodes, 5 % at 50,000, past 1 GiB there; docs/benchmarks.md, round four), which is
// why the default build keeps the system's malloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "kubesched",
    disable_version_flag = true,
    about = "A Kubernetes scheduler built on the kube-scheduler framework",
    long_about = "kubesched implements the kube-scheduler scheduling framework in Rust. \
                  `kubesched simulate` answers \"where would these pods go, and why?\" on an \
                  in-memory cluster built from ordinary manifests. Without a subcommand, \
                  kubesched takes kube-scheduler v1.37's command line and runs as `kubesched run` \
                  (`kubesched --config /etc/kubesched/scheduler.yaml`)."
)]
struct Cli {
    /// More logs on standard error (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// klog's verbosity, as kube-scheduler takes it (`--v=2`, `-v=4`): 0-1 errors,
    /// warnings and info, 2-3 also the scheduling loop's per-pod lines, 4 debug, 5+ trace.
    #[arg(long = "v", value_name = "N", global = true)]
    klog_v: Option<u32>,
    /// Log format: `text` (klog-like lines) or `json` (kube-scheduler's JSON lines).
    #[arg(
        long = "log-format",
        visible_alias = "logging-format",
        value_enum,
        global = true
    )]
    log_format: Option<logs::Format>,
    /// Feature gates as kube-scheduler takes them (`Name=true,Other=false`, or
    /// `kube:Name=true`; repeat or separate with commas), checked against the release of
    /// `--emulated-version`. Unknown gates are refused; `kubesched config defaults` lists
    /// every gate with its value in effect.
    #[arg(long, value_name = "NAME=BOOL,...", global = true)]
    feature_gates: Vec<String>,
    /// The Kubernetes release whose feature gates (stages and defaults) apply, as
    /// kube-scheduler's `--emulated-version` takes it: `1.34` to `1.37` (or `kube=1.36`).
    #[arg(long, value_name = "VERSION", global = true, default_value = "1.37")]
    emulated_version: String,
    /// kube-scheduler's `--min-compatibility-version` (v1.35+): the oldest control-plane
    /// release to stay compatible with, at most `--emulated-version` (one release before it
    /// when unset). Checked; it changes no gate kubesched honours.
    #[arg(long, value_name = "VERSION", global = true)]
    min_compatibility_version: Option<String>,
    /// Print the version, git commit, Kubernetes release and plugins, then exit
    /// (`--version=raw`: as JSON).
    #[arg(
        long = "version",
        value_name = "raw",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    version_flag: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

/// `kubesched plugins -o`.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum PluginsOutput {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Output {
    Table,
    /// kubectl's `-o wide`: the table with the NOMINATED column always and each pod's
    /// attempts.
    Wide,
    /// kubectl's `-o name`: `pod/NAME`, one a line.
    Name,
    Json,
    Yaml,
}

/// A pod state for `--status` (kubesched_sim::PodState).
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum StatusFilter {
    Scheduled,
    Unschedulable,
    Error,
    Pending,
    Preempted,
    Terminating,
    Invalid,
}

impl StatusFilter {
    fn state(self) -> kubesched_sim::PodState {
        use kubesched_sim::PodState as S;
        match self {
            Self::Scheduled => S::Scheduled,
            Self::Unschedulable => S::Unschedulable,
            Self::Error => S::Error,
            Self::Pending => S::Pending,
            Self::Preempted => S::Preempted,
            Self::Terminating => S::Terminating,
            Self::Invalid => S::Invalid,
        }
    }
}

/// "once", "twice", "N times".
fn plural_times(n: u32) -> String {
    match n {
        1 => "once".to_string(),
        2 => "twice".to_string(),
        n => format!("{n} times"),
    }
}

/// Prints a report in the chosen format (`--no-headers` applies to the tables).
fn print_report_as(
    report: &kubesched_sim::SimReport,
    output: Output,
    with_timing: bool,
    headers: bool,
) {
    let table = |wide| {
        report.to_table_with(kubesched_sim::TableOptions {
            with_timing,
            wide,
            headers,
        })
    };
    match output {
        Output::Table => print(&table(false)),
        Output::Wide => print(&table(true)),
        Output::Name => print(&report.to_names()),
        Output::Json => print(&format!("{}\n", report.to_json())),
        Output::Yaml => print(&report.to_yaml()),
    }
}

/// A `--fail-on` condition (kubesched_sim::Gate).
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, PartialOrd, Ord)]
enum FailOn {
    /// A pod ends Unschedulable (its last attempt failed, an error included) or Invalid (an
    /// API server would refuse it), or --add-nodes finds no count within --max.
    Unschedulable,
    /// A pod ends unbound, whatever the reason (unschedulable, invalid, never attempted,
    /// evicted), or --add-nodes finds no count within --max.
    Pending,
    /// Preemption evicted a pod.
    Evictions,
    /// The input had problems (a document that does not parse, an object an API server
    /// would refuse, a file in a folder that cannot be read).
    Problems,
    /// A pod's last attempt failed with an error (an extender that is down, a plugin error).
    Errors,
}

impl From<FailOn> for kubesched_sim::Gate {
    fn from(f: FailOn) -> Self {
        match f {
            FailOn::Unschedulable => Self::Unschedulable,
            FailOn::Pending => Self::Pending,
            FailOn::Evictions => Self::Evictions,
            FailOn::Problems => Self::Problems,
            FailOn::Errors => Self::Errors,
        }
    }
}

/// `simulate`'s exit status when a `--fail-on` condition holds.
const EXIT_CONDITION: u8 = 1;
/// `simulate`'s (and `explain`'s) exit status for a wrong command line or input: nothing
/// was simulated. Clap's own usage errors exit 2 as well.
const EXIT_INPUT: u8 = 2;
/// `simulate`'s exit status when the simulation could not finish.
const EXIT_RUN: u8 = 3;

#[derive(Subcommand)]
enum Command {
    /// List the plugins compiled into this binary, with their extension points
    /// (`-o json`: also each one's Cargo feature, crate, args kind, the kinds it reads and
    /// the writes it makes; what xtask and the tests check their own lists against).
    Plugins {
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = PluginsOutput::Table)]
        output: PluginsOutput,
    },
    /// Work with KubeSchedulerConfiguration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Schedule pending pods on an in-memory cluster built from manifests or a workload.
    Simulate(SimulateArgs),
    /// Explain where a pod of a live cluster would go: reads the cluster once (list only,
    /// nothing is written) and runs the pod's profile as a dry run, with every node's Filter
    /// verdict and every Score plugin's scores. For a bound pod: would it go there again?
    Explain(ExplainArgs),
    /// Write a live cluster as a dump that `simulate` reads: every object of the kinds the
    /// compiled-in plugins read (and pods and nodes), listed page by page (read-only), as
    /// one `v1` List in YAML or JSON.
    Snapshot(SnapshotArgs),
    /// Run the benchmark suite: each workload under benchmarks/ in its own child process,
    /// with the default profile and every plugin on.
    Bench(BenchArgs),
    /// Schedule a real cluster's pending pods of this scheduler's profiles through its API
    /// server, with leader election and the health, metrics and configz endpoints. Takes
    /// kube-scheduler v1.37's flags; with no subcommand, kubesched behaves as `run`.
    Run,
    /// Print the version, git commit, Kubernetes release reproduced and compiled-in plugins.
    Version {
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = VersionOutput::Text)]
        output: VersionOutput,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on standard
    /// output, e.g. `kubesched completion bash > /etc/bash_completion.d/kubesched`.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) generated from the command-line definitions, or with
    /// `--dir` write one page per command there (kubesched.1, kubesched-run.1, ...).
    Man {
        /// Write every command's page into this folder instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum VersionOutput {
    Text,
    Json,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a configuration file; prints every problem with its field path.
    Validate {
        /// The KubeSchedulerConfiguration file (YAML or JSON).
        file: PathBuf,
    },
    /// Print the effective default configuration as YAML.
    Defaults,
    /// Print a configuration (v1beta3 or v1) as kubescheduler.config.k8s.io/v1.
    Migrate {
        /// The KubeSchedulerConfiguration file (YAML or JSON).
        file: PathBuf,
    },
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Manifest files or folders (Nodes, Pods, Namespaces, Services, PVs, PVCs, ...; `List`
    /// objects and multi-document YAML are fine), `-` for standard input. Pods with
    /// spec.nodeName are running.
    paths: Vec<PathBuf>,
    /// A KubeSchedulerConfiguration (the default profile otherwise).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A workload file of operations (create nodes, create pods, ...), run after the manifests.
    #[arg(long)]
    workload: Option<PathBuf>,
    /// Explain one pod: every node's Filter verdict, every Score plugin's scores, and when no
    /// node fits, what preemption considered (candidates, victims, the deciding criterion).
    /// A bare POD is looked up in --namespace, else in `default`, as `kubesched explain` does.
    #[arg(long, value_name = "NAMESPACE/POD")]
    explain: Option<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// List only the pods of this namespace (the whole input is simulated all the same, and
    /// the summary counts every pod).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// List only pods in these states (comma-separated, e.g. `--status
    /// unschedulable,pending`).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "STATE")]
    status: Vec<StatusFilter>,
    /// Leave the tables' header rows out, as kubectl's `--no-headers` does.
    #[arg(long)]
    no_headers: bool,
    /// Simulate a live cluster: read it once (list only, nothing is written) and schedule
    /// its pending pods offline, with the manifests given as paths applied on top (a pod
    /// file answers "where would these go?"). With `--context` alone, kubectl's kubeconfig
    /// (KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to read (kubectl's `--context`); the current one otherwise.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// Also write one self-contained HTML page (inline SVG charts, no external files):
    /// summary, node utilisation before and after (for --workload: before its measured
    /// pods), unschedulable reasons, score distribution per Score plugin, the pods, and the
    /// explanations of those that did not end Scheduled or that preemption touched, with a
    /// sample of the rest (bounded, so that big runs give a small page).
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
    /// Seed for tie-breaking between equally scored nodes (runs are reproducible).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Leave wall-clock timings out (the table's pods/s and latencies, the summary's
    /// duration_seconds, pods_per_second and latency_ms_* in JSON and YAML), so that two runs
    /// of the same input print the same bytes.
    #[arg(long)]
    no_timing: bool,
    /// Exit with status 1 after printing the report when one of these holds (a
    /// comma-separated list; repeat or combine, e.g. `--fail-on unschedulable,problems`);
    /// each condition that holds is named on standard error.
    ///
    /// Exit status of `simulate`:
    ///
    /// 0: the run finished, and no --fail-on condition holds. Problems inside a readable
    /// file (a document that does not parse, an object an API server would refuse) are
    /// listed in the report, not a failure, unless `--fail-on problems`.
    ///
    /// 1: a --fail-on condition holds (the report is printed all the same).
    ///
    /// 2: the command line or its input is wrong, and nothing was simulated: a path (or the
    /// --config, --workload or --add-nodes file) that cannot be read at all (missing, a
    /// folder that cannot be listed, not a regular file), a configuration or workload that
    /// does not load, --explain of a pod the input does not have, a what-if the input
    /// cannot answer.
    ///
    /// 3: the simulation could not finish (a workload op or expectation failed, the
    /// --report file could not be written).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "CONDITION[,...]"
    )]
    fail_on: Vec<FailOn>,
    /// What if: the smallest number of copies of the Node(s) in this file that lets every
    /// pending pod schedule without evicting anyone, found by re-running the simulation.
    #[arg(
        long,
        value_name = "TEMPLATE.yaml",
        group = "what_if",
        requires = "paths"
    )]
    add_nodes: Option<PathBuf>,
    /// The most copies --add-nodes tries.
    #[arg(long, default_value_t = 10, requires = "add_nodes")]
    max: usize,
    /// What if: cordon these nodes and evict their pods as `kubectl drain
    /// --ignore-daemonsets` would; where do the replacements go, which
    /// PodDisruptionBudgets hold the drain up?
    #[arg(
        long,
        value_name = "NODE[,NODE...]",
        value_delimiter = ',',
        group = "what_if",
        requires = "paths"
    )]
    drain: Vec<String>,
    /// What if: scale a Deployment, StatefulSet or ReplicaSet of the input to REPLICAS pods;
    /// where do the new ones go?
    #[arg(
        long,
        value_name = "KIND/NAMESPACE/NAME=REPLICAS",
        group = "what_if",
        requires = "paths"
    )]
    scale_workload: Option<kubesched_sim::ScaleTarget>,
    /// What if: which nodes can go? The nodes, emptiest first, each added to the removable
    /// set when draining the whole set still reschedules every evicted pod, keeps every
    /// scheduled pod scheduled, meets every PodDisruptionBudget and loses no pod without a
    /// controller (one drain simulation per node). Works on manifests or `--kubeconfig`.
    #[arg(long, group = "what_if")]
    consolidate: bool,
}

#[allow(clippy::print_stdout)]
fn print(text: &str) {
    print!("{text}");
}

fn fail(message: &str) -> ExitCode {
    logs::error(message);
    ExitCode::FAILURE
}

/// Reports `message` and exits with `code`.
fn fail_with(code: u8, message: &str) -> ExitCode {
    logs::error(message);
    ExitCode::from(code)
}

/// The exit status of a simulation error: the input's fault, or the run's.
fn sim_failed(e: &kubesched_sim::SimError) -> ExitCode {
    use kubesched_sim::SimError;
    let code = match e {
        SimError::Build(_) | SimError::WhatIf(_) | SimError::PodNotFound { .. } => EXIT_INPUT,
        SimError::Expectation { .. } | SimError::Op { .. } => EXIT_RUN,
    };
    fail_with(code, &e.to_string())
}

fn warn(message: &str) {
    logs::warning(message);
}

/// The whole command line: the derive definitions plus kube-scheduler's flags, at the top
/// level (no subcommand means `run`) and on `run`.
fn command() -> clap::Command {
    Cli::command()
        .args(kube_flags::args())
        .mut_subcommand("run", |c| c.args(kube_flags::args()))
}

/// Whether the argument list asks for JSON logs (read before parsing, so that a parse error
/// comes out in the format asked for).
fn json_asked(args: &[String]) -> bool {
    let mut json = false;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        for name in ["--log-format", "--logging-format"] {
            if let Some(v) = a.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                json = v == "json";
            } else if a == name {
                json = it.peek().is_some_and(|v| *v == "json");
            }
        }
    }
    json
}

/// Reports a command line clap refused (or help and version it printed), in the log
/// format asked for.
fn clap_failed(e: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) || !json
    {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
    }
    logs::init(logs::Format::Json, logs::Verbosity::Quiet);
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("invalid command line");
    logs::error(first.strip_prefix("error: ").unwrap_or(first));
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args = kube_flags::normalize(std::env::args());
    let json = json_asked(&args);
    // A bare `kubesched` prints the help, unless it runs in a pod (as a kube-scheduler
    // Deployment without arguments would run with the defaults).
    if args.len() == 1 && std::env::var_os("KUBERNETES_SERVICE_HOST").is_none() {
        let _ = command().print_help();
        return ExitCode::from(2);
    }
    let matches = match command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return clap_failed(e, json),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return clap_failed(e, json),
    };
    let is_run = matches!(cli.command, None | Some(Command::Run));
    let verbosity = match (cli.klog_v, cli.verbose) {
        (Some(n), _) => logs::Verbosity::V(n),
        (None, 0) if is_run => logs::Verbosity::V(0),
        (None, 0) => logs::Verbosity::Quiet,
        (None, 1) => logs::Verbosity::V(0),
        (None, 2) => logs::Verbosity::V(4),
        (None, _) => logs::Verbosity::V(5),
    };
    logs::init(cli.log_format.unwrap_or_default(), verbosity);
    if let Some(v) = &cli.version_flag {
        match (v.as_str(), kube_flags::parse_bool(v)) {
            (_, Some(true)) => {
                print(&version::text());
                return ExitCode::SUCCESS;
            }
            ("raw", _) => {
                print(&format!("{:#}\n", version::json()));
                return ExitCode::SUCCESS;
            }
            (_, Some(false)) => {}
            (other, None) => {
                return fail(&format!(
                    "--version={other} is not supported: kubesched reports its own version (use --version or --version=raw)"
                ));
            }
        }
    }
    if let Err(e) = registry::check_unique() {
        return fail(&e.to_string());
    }
    let gate_values: Vec<String> = cli
        .feature_gates
        .iter()
        .map(|v| kube_flags::strip_component_prefix(v))
        .collect();
    let gates = match Version::parse_emulated(&cli.emulated_version)
        .and_then(|version| FeatureGates::parse_at(version, gate_values.iter().map(String::as_str)))
    {
        Ok(g) => g,
        Err(e) => return fail(&e.to_string()),
    };
    if let Some(min) = &cli.min_compatibility_version {
        match Version::parse_emulated(min) {
            Ok(v) if v > gates.version() => {
                return fail(&format!(
                    "--min-compatibility-version={min}: must be less or equal to the emulated-version ({})",
                    gates.version()
                ));
            }
            Ok(_) => {}
            Err(_) => {
                return fail(&format!(
                    "--min-compatibility-version={min}: not a release kubesched knows (1.34 to 1.37, or kube=1.36)"
                ));
            }
        }
    }
    for name in gates.set_but_graduated() {
        warn(&format!(
            "setting GA or deprecated feature gate {name}; it will be removed in a future release"
        ));
    }
    for name in gates.without_effect() {
        warn(&format!(
            "feature gate {name} is set away from its default, but kubesched does not change its behaviour for it"
        ));
    }
    let top_level_flags = kube_flags::any_given(&matches);
    let subcommand = match cli.command {
        None => return run(&matches, gates),
        Some(c) => c,
    };
    if top_level_flags {
        return fail(
            "kube-scheduler's flags go after `run` or without a subcommand (`kubesched --config FILE` runs the scheduler)",
        );
    }
    // Global flags the command would silently ignore are refused instead.
    let gates_given = !cli.feature_gates.is_empty()
        || cli.emulated_version != "1.37"
        || cli.min_compatibility_version.is_some();
    let ignores_gates = match &subcommand {
        Command::Plugins { .. } => Some("plugins"),
        Command::Bench(_) => Some("bench"),
        Command::Snapshot(_) => Some("snapshot"),
        _ => None,
    };
    if let Some(name) = ignores_gates
        && gates_given
    {
        return fail(&format!(
            "--feature-gates and --emulated-version have no effect on `kubesched {name}`: it runs with v1.37's default gates"
        ));
    }
    match subcommand {
        Command::Plugins { output } => {
            match output {
                PluginsOutput::Table => print(&plugins_listing()),
                PluginsOutput::Json => print(&format!("{:#}\n", plugins_json())),
            }
            ExitCode::SUCCESS
        }
        Command::Version { output } => {
            match output {
                VersionOutput::Text => print(&version::text()),
                VersionOutput::Json => print(&format!("{:#}\n", version::json())),
            }
            ExitCode::SUCCESS
        }
        Command::Completion { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command(), "kubesched", &mut out);
            print(&String::from_utf8_lossy(&out));
            ExitCode::SUCCESS
        }
        Command::Man { dir } => man(dir),
        Command::Config { command } => match command {
            ConfigCommand::Validate { file } => {
                match kubesched_config::load_file_with_gates(&file, &gates) {
                    Ok(loaded) => {
                        report_absent(&loaded);
                        report_warnings(&loaded);
                        print(&format!(
                            "{}: valid ({} profile{})\n",
                            file.display(),
                            loaded.profiles.len(),
                            if loaded.profiles.len() == 1 { "" } else { "s" }
                        ));
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(&e.to_string()),
                }
            }
            ConfigCommand::Migrate { file } => {
                let name = file.display().to_string();
                match kubesched_config::input::read_text_file(
                    &file,
                    kubesched_config::input::MAX_CONFIG_BYTES,
                )
                .map_err(|e| format!("{name}: {e}"))
                .and_then(|text| {
                    kubesched_config::migrate_to_v1(&text, &name).map_err(|e| e.to_string())
                }) {
                    Ok(v1) => {
                        print(&v1);
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(&e),
                }
            }
            ConfigCommand::Defaults => {
                let loaded = kubesched_config::default_config_with_gates(&gates);
                report_absent(&loaded);
                print(&gates_comment(&gates));
                print(&kubesched_config::to_yaml(&loaded.config));
                ExitCode::SUCCESS
            }
        },
        Command::Simulate(args) => simulate(args, gates),
        Command::Explain(args) => explain(args, gates),
        Command::Snapshot(args) => snapshot(args),
        Command::Bench(args) => bench(args),
        Command::Run => match matches.subcommand_matches("run") {
            Some(m) => run(m, gates),
            None => fail("the run subcommand's flags were not parsed (a bug in kubesched)"),
        },
    }
}

/// `kubesched man`: the top page on standard output, or every page into a folder.
fn man(dir: Option<PathBuf>) -> ExitCode {
    match dir {
        Some(dir) => {
            if let Err(e) = std::fs::create_dir_all(&dir)
                .and_then(|()| clap_mangen::generate_to(command(), &dir))
            {
                return fail(&format!("writing the man pages to {}: {e}", dir.display()));
            }
            ExitCode::SUCCESS
        }
        None => {
            let mut out = Vec::new();
            if let Err(e) = clap_mangen::Man::new(command()).render(&mut out) {
                return fail(&format!("rendering the man page: {e}"));
            }
            print(&String::from_utf8_lossy(&out));
            ExitCode::SUCCESS
        }
    }
}

/// The feature gates in effect as YAML comments (they are flags, not configuration, so the
/// printed file stays a valid configuration).
fn gates_comment(gates: &FeatureGates) -> String {
    let mut out = format!(
        "# Kubernetes release emulated (set with --emulated-version): {}\n\
         # Feature gates in effect (set with --feature-gates):\n",
        gates.version()
    );
    for (spec, on) in gates.effective_specs() {
        let locked = if spec.locked { ", locked" } else { "" };
        out.push_str(&format!(
            "#   {}={on} ({} - default={}{locked})\n",
            spec.name,
            spec.stage.as_str(),
            spec.default
        ));
    }
    out
}

/// `kubesched plugins -o json`: what each compiled-in plugin is, as its registration says.
fn plugins_json() -> serde_json::Value {
    let kind = |k: &kubesched::framework::ObjectKind| {
        serde_json::json!({
            "apiVersion": k.api_version(),
            "kind": k.kind,
            "resource": k.resource(),
            "namespaced": k.namespaced,
        })
    };
    let plugins: Vec<serde_json::Value> = registry::plugins()
        .iter()
        .map(|d| {
            serde_json::json!({
                "name": d.name,
                "feature": registry::feature_for(d.name),
                "crate": d.crate_name,
                "extensionPoints": d.extension_points().iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                "argsKind": d.args.kind,
                "kinds": d.kinds.iter().map(kind).collect::<Vec<_>>(),
                "writes": d.writes.iter().map(|w| serde_json::json!({
                    "kind": kind(&w.kind),
                    "verbs": w.verbs,
                    "statusVerbs": w.status_verbs,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({ "plugins": plugins })
}

fn plugins_listing() -> String {
    let mut out = String::new();
    let plugins = registry::plugins();
    let width = plugins
        .iter()
        .map(|d| d.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out.push_str(&format!("{:<width$}  EXTENSION POINTS\n", "NAME"));
    for d in plugins {
        let points: Vec<&str> = d.extension_points().iter().map(|p| p.as_str()).collect();
        out.push_str(&format!("{:<width$}  {}\n", d.name, points.join(", ")));
    }
    out
}

/// Finishes a loaded configuration for a command: the error if it did not load, else the
/// feature gates set and what it lacks or ignores said on stderr.
fn configured(
    loaded: Result<LoadedConfig, kubesched_config::ConfigError>,
    gates: FeatureGates,
) -> Result<LoadedConfig, ExitCode> {
    let mut loaded = loaded.map_err(|e| fail_with(EXIT_INPUT, &e.to_string()))?;
    loaded.feature_gates = gates;
    report_absent(&loaded);
    report_warnings(&loaded);
    Ok(loaded)
}

fn report_warnings(loaded: &LoadedConfig) {
    for w in &loaded.warnings {
        warn(w);
    }
}

fn report_absent(loaded: &LoadedConfig) {
    if !loaded.absent_default_plugins.is_empty() {
        warn(&format!(
            "upstream default plugins not compiled into this binary: {} (the default profile runs without them)",
            loaded.absent_default_plugins.join(", ")
        ));
    }
}

fn simulate(mut args: SimulateArgs, gates: FeatureGates) -> ExitCode {
    if let Some(pod) = &args.explain
        && !pod.contains('/')
    {
        let namespace = args.namespace.as_deref().unwrap_or("default");
        args.explain = Some(format!("{namespace}/{pod}"));
    }
    // As a kubectl plugin (`kubectl kubesched simulate`) a run without input reads the
    // cluster of kubectl's current context, as every kubectl command does.
    let live = args.kubeconfig.is_some()
        || args.context.is_some()
        || (invoked_as_kubectl_plugin() && args.paths.is_empty() && args.workload.is_none());
    if args.paths.is_empty() && args.workload.is_none() && !live {
        return fail_with(
            EXIT_INPUT,
            "give manifest files or folders, --workload FILE or --kubeconfig FILE (try: kubesched simulate examples/cluster)",
        );
    }
    // A path that cannot be read at all stops the command: a report of the rest would
    // answer a question nobody asked. Bad documents inside readable files are problems.
    let named: Vec<PathBuf> = args
        .paths
        .iter()
        .chain(&args.config)
        .chain(&args.workload)
        .chain(&args.add_nodes)
        .chain(&args.kubeconfig)
        .cloned()
        .collect();
    let unreadable = kubesched_sim::unreadable_paths(&named);
    if !unreadable.is_empty() {
        for u in &unreadable {
            logs::error(&u.to_string());
        }
        return ExitCode::from(EXIT_INPUT);
    }
    let cluster = if live {
        match read_live(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
            kubesched_live::read::DEFAULT_PAGE_SIZE,
        ) {
            Ok(read) => Some(read.to_list_json()),
            Err(e) => return fail_with(EXIT_INPUT, &e),
        }
    } else {
        None
    };
    let (manifests, problems) = match &cluster {
        Some(text) => kubesched_sim::load_after(Some((CLUSTER_SOURCE, text)), &args.paths),
        None => load_paths(&args.paths),
    };
    let workload = match &args.workload {
        Some(path) => match Workload::from_file(path) {
            Ok(w) => Some(w),
            Err(e) => return fail_with(EXIT_INPUT, &e.to_string()),
        },
        None => None,
    };
    // A workload's featureGates hold unless --feature-gates sets the same gate.
    let mut gates = gates;
    for (name, on) in workload.iter().flat_map(|w| &w.feature_gates) {
        if gates.is_set(name) {
            continue;
        }
        gates = match gates.with_name(name, *on) {
            Ok(g) => g,
            Err(e) => {
                let file = args.workload.as_deref().unwrap_or(Path::new("")).display();
                return fail_with(EXIT_INPUT, &format!("{file}: featureGates: {e}"));
            }
        };
    }
    // A configuration found among the manifests is used unless --config names one.
    let loaded = match (&args.config, &manifests.config) {
        (Some(path), _) => kubesched_config::load_file_with_gates(path, &gates),
        (None, Some((file, text))) => kubesched_config::load_str_with_gates(text, file, &gates),
        (None, None) => Ok(kubesched_config::default_config_with_gates(&gates)),
    };
    let loaded = match configured(loaded, gates) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if args.add_nodes.is_some()
        || !args.drain.is_empty()
        || args.scale_workload.is_some()
        || args.consolidate
    {
        if args.workload.is_some() {
            return fail_with(
                EXIT_INPUT,
                "--add-nodes, --drain, --scale-workload and --consolidate work on manifests, not with --workload",
            );
        }
        if args.report.is_some() {
            return fail_with(
                EXIT_INPUT,
                "--report works on a plain simulation, not with --add-nodes, --drain, --scale-workload or --consolidate",
            );
        }
        return what_if(args, loaded, manifests, problems);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail_with(EXIT_RUN, &format!("starting the async runtime: {e}")),
    };
    let bar = progress_bar();
    let progress: Option<Box<dyn Fn(kubesched_sim::Progress) + Send + Sync>> =
        bar.clone().map(|bar| {
            Box::new(move |p: kubesched_sim::Progress| {
                bar.set_length(p.total);
                bar.set_position(p.done);
            }) as Box<dyn Fn(kubesched_sim::Progress) + Send + Sync>
        });
    let options = SimulationOptions {
        seed: Some(args.seed),
        explain: args.explain.clone(),
        progress,
    };
    let input_pods: Vec<String> = manifests
        .pods
        .iter()
        .map(|p| p.name_key().to_string())
        .collect();
    let result = runtime.block_on(async {
        let mut sim = Simulation::new(&loaded, options)?;
        // The HTML report explains every pod, condensed as the run goes; the printed report
        // keeps only the one asked for, whole.
        if args.report.is_some() {
            sim.condense_explanations();
        }
        sim.add_problems(problems);
        let hint = args
            .paths
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        sim.load(manifests, &hint);
        let mut before = sim.node_usage();
        sim.settle().await;
        if let Some(w) = &workload {
            // "Before" is the cluster the measured pods meet: the workload's setup ops
            // (nodes, running pods) belong to it, not to the run.
            match kubesched_sim::html::measured_phase(w) {
                Some(first) => {
                    sim.run_workload_ops(w, 0..first).await?;
                    before = sim.node_usage();
                    sim.run_workload_ops(w, first..w.ops.len()).await?;
                }
                None => sim.run_workload(w).await?,
            }
        }
        let others = sim.pods_of_other_schedulers().clone();
        let after = sim.node_usage();
        let explained = sim.take_explained();
        Ok::<_, kubesched_sim::SimError>((sim.into_report(), explained, before, after, others))
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let (mut report, explained, before, after, others) = match result {
        Ok(r) => r,
        Err(e) => return sim_failed(&e),
    };
    warn_other_schedulers(&others);
    if let Err(code) = explained_pod_exists(&args, &report, &input_pods) {
        return code;
    }
    if let Some(path) = &args.report {
        let mut title = kubesched_sim::html::title(&args.paths, args.workload.as_deref());
        // A live cluster's run names the cluster it read.
        if let Some(kubeconfig) = &args.kubeconfig {
            title.push_str(&format!(" --kubeconfig {}", kubeconfig.display()));
        }
        if let Some(context) = &args.context {
            title.push_str(&format!(" --context {context}"));
        }
        let data = kubesched_sim::html::ReportData::with_explained(
            &title, &report, &explained, &before, &after,
        );
        if let Err(e) = std::fs::write(path, kubesched_sim::html::render(&data)) {
            return fail_with(
                EXIT_RUN,
                &format!("writing the report {}: {e}", path.display()),
            );
        }
    }
    print_report(&mut report, &args)
}

/// Whether the binary runs as kubectl's plugin `kubectl kubesched` (installed or linked as
/// `kubectl-kubesched` on the PATH).
fn invoked_as_kubectl_plugin() -> bool {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .is_some_and(|name| name == "kubectl-kubesched")
}

#[derive(clap::Args)]
struct SnapshotArgs {
    /// The kubeconfig of the cluster; without it, KUBECONFIG, ~/.kube/config, then the
    /// in-cluster configuration.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to read (kubectl's `--context`); the current one otherwise.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// `yaml` or `json` on standard output, or a file to write (`-o dump.yaml`; JSON for a
    /// name ending in `.json`, else YAML as `kubectl get -o yaml` writes a List).
    #[arg(long, short, value_name = "yaml|json|FILE", default_value = "yaml")]
    output: String,
    /// Objects per list request.
    #[arg(long, default_value_t = kubesched_live::read::DEFAULT_PAGE_SIZE, hide = true)]
    page_size: u32,
}

/// `kubesched snapshot -o`: the format and where it goes.
fn snapshot_target(output: &str) -> (bool, Option<PathBuf>) {
    match output {
        "yaml" => (false, None),
        "json" => (true, None),
        file => (file.ends_with(".json"), Some(PathBuf::from(file))),
    }
}

/// `kubesched snapshot`: the cluster read once, written as a dump.
fn snapshot(args: SnapshotArgs) -> ExitCode {
    let read = match read_live(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        args.page_size,
    ) {
        Ok(read) => read,
        Err(e) => return fail(&e),
    };
    let (json, file) = snapshot_target(&args.output);
    let text = if json {
        read.to_list_json() + "\n"
    } else {
        match read.to_list_yaml() {
            Ok(yaml) => yaml,
            Err(e) => return fail(&format!("writing the snapshot as YAML: {e}")),
        }
    };
    match &file {
        Some(path) => match std::fs::write(path, text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&format!("writing {}: {e}", path.display())),
        },
        None => {
            print(&text);
            ExitCode::SUCCESS
        }
    }
}

/// What the objects read from a cluster are named as in problems and messages.
const CLUSTER_SOURCE: &str = "the cluster";

/// Reads a live cluster once (lists only), for `simulate --kubeconfig` and `snapshot`.
fn read_live(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    page_size: u32,
) -> Result<kubesched_live::read::ClusterRead, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    runtime.block_on(async {
        let client = kubesched_live::read::connect_in(kubeconfig, context)
            .await
            .map_err(|e| e.to_string())?;
        kubesched_live::read::read_cluster(&client, page_size)
            .await
            .map_err(|e| e.to_string())
    })
}

/// Pending pods that name a scheduler no profile is are left alone (kube-scheduler leaves
/// another scheduler's pods), which an empty result would not explain: say so, once per
/// scheduler name.
fn warn_other_schedulers(others: &std::collections::BTreeMap<String, Vec<String>>) {
    for (scheduler, pods) in others {
        let shown: Vec<&str> = pods.iter().take(3).map(String::as_str).collect();
        let more = if pods.len() > shown.len() {
            format!(" and {} more", pods.len() - shown.len())
        } else {
            String::new()
        };
        let count = pods.len();
        let noun = if count == 1 { "pod names" } else { "pods name" };
        warn(&format!(
            "{count} pending {noun} scheduler {scheduler:?}, which no profile of the configuration is ({}{more}): left alone, as kube-scheduler leaves another scheduler's pods; a profile with that schedulerName (--config) simulates them",
            shown.join(", ")
        ));
    }
}

/// With `--explain POD`: an error (exit 2) when the pod is neither in the input nor in the
/// report (a workload creates pods as it runs, so the report is looked at too).
fn explained_pod_exists(
    args: &SimulateArgs,
    report: &kubesched_sim::SimReport,
    input_pods: &[String],
) -> Result<(), ExitCode> {
    let Some(pod) = &args.explain else {
        return Ok(());
    };
    if input_pods.iter().any(|k| k == pod) || report.pods.iter().any(|p| p.key() == *pod) {
        return Ok(());
    }
    let hint = if pod.contains('/') {
        ""
    } else {
        " (name it as NAMESPACE/POD)"
    };
    Err(fail_with(
        EXIT_INPUT,
        &format!("--explain {pod}: no such pod in the input{hint}"),
    ))
}

/// Prints a simulation's report in the chosen format, warning first when the pod asked to
/// be explained was never attempted; then the exit status of the `--fail-on` conditions.
fn print_report(report: &mut kubesched_sim::SimReport, args: &SimulateArgs) -> ExitCode {
    if let Some(pod) = &args.explain
        && report.explanations.is_empty()
    {
        let row = report.pods.iter().find(|p| p.key() == *pod);
        match row {
            Some(p) if p.attempts > 0 => warn(&format!(
                "{pod} was attempted {} but no attempt got as far as judging nodes (the last one ended: {}), so there is no node to explain",
                plural_times(p.attempts),
                p.message.as_deref().unwrap_or("without a message")
            )),
            _ => warn(&format!(
                "no scheduling attempt of {pod} was seen, so there is nothing to explain"
            )),
        }
    }
    if args.no_timing {
        report.drop_timing();
    }
    // --fail-on judges the whole run; --namespace and --status only narrow what is listed.
    let mut conditions = args.fail_on.clone();
    conditions.sort();
    conditions.dedup();
    let held: Vec<(kubesched_sim::Gate, String)> = conditions
        .into_iter()
        .map(kubesched_sim::Gate::from)
        .filter_map(|gate| report.gate(gate).map(|why| (gate, why)))
        .collect();
    let states: Vec<_> = args.status.iter().map(|s| s.state()).collect();
    report.retain_pods(args.namespace.as_deref(), &states);
    print_report_as(report, args.output, !args.no_timing, !args.no_headers);
    for (gate, why) in &held {
        logs::error(&format!("--fail-on {}: {why}", gate.as_str()));
    }
    if !held.is_empty() {
        ExitCode::from(EXIT_CONDITION)
    } else {
        ExitCode::SUCCESS
    }
}

/// Answers `--add-nodes`, `--drain` or `--scale-workload` on the loaded manifests.
fn what_if(
    args: SimulateArgs,
    config: LoadedConfig,
    manifests: kubesched_sim::Manifests,
    problems: Vec<kubesched_sim::InputProblem>,
) -> ExitCode {
    let input_pods: Vec<String> = manifests
        .pods
        .iter()
        .map(|p| p.name_key().to_string())
        .collect();
    let scenario = kubesched_sim::Scenario {
        config,
        manifests,
        problems,
        seed: args.seed,
        explain: args.explain.clone(),
        file_hint: args
            .paths
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    let templates = match &args.add_nodes {
        Some(path) => {
            let (m, problems) = load_paths(std::slice::from_ref(path));
            if let Some(p) = problems.first() {
                return fail_with(EXIT_INPUT, &format!("--add-nodes: {p}"));
            }
            if m.nodes.is_empty() {
                return fail_with(
                    EXIT_INPUT,
                    &format!("--add-nodes: {} holds no Node", path.display()),
                );
            }
            m.nodes
        }
        None => Vec::new(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail_with(EXIT_RUN, &format!("starting the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        if args.add_nodes.is_some() {
            kubesched_sim::add_nodes(&scenario, &templates, args.max).await
        } else if let Some(target) = &args.scale_workload {
            kubesched_sim::scale_workload(&scenario, target).await
        } else if args.consolidate {
            kubesched_sim::consolidate(&scenario).await
        } else {
            kubesched_sim::drain(&scenario, &args.drain).await
        }
    });
    match result {
        Ok(mut report) => match explained_pod_exists(&args, &report, &input_pods) {
            Ok(()) => print_report(&mut report, &args),
            Err(code) => code,
        },
        Err(e) => sim_failed(&e),
    }
}

fn progress_bar() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} scheduling {pos}/{len} pods [{elapsed_precise}] {wide_bar}",
    ) {
        bar.set_style(style);
    }
    Some(bar)
}

#[derive(clap::Args)]
struct ExplainArgs {
    /// The pod. Exit status 2 when the cluster has no such pod (or the configuration does
    /// not load), 1 when the cluster cannot be read.
    #[arg(value_name = "NAMESPACE/POD")]
    pod: String,
    /// The kubeconfig of the cluster; without it, KUBECONFIG, ~/.kube/config, then the
    /// in-cluster configuration.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to read (kubectl's `--context`); the current one otherwise.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// A KubeSchedulerConfiguration (the default profile otherwise).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The profile to run (default: the pod's schedulerName).
    #[arg(long)]
    profile: Option<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Seed for tie-breaking between equally scored nodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Objects per list request.
    #[arg(long, default_value_t = kubesched_live::read::DEFAULT_PAGE_SIZE, hide = true)]
    page_size: u32,
}

/// `kubesched explain`: list the cluster once, then a dry run on the in-memory copy.
fn explain(args: ExplainArgs, gates: FeatureGates) -> ExitCode {
    let loaded = match configured(
        args.config.as_deref().map_or_else(
            || Ok(kubesched_config::default_config_with_gates(&gates)),
            |path| kubesched_config::load_file_with_gates(path, &gates),
        ),
        gates,
    ) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let pod = if args.pod.contains('/') {
        args.pod.clone()
    } else {
        format!("default/{}", args.pod)
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&format!("starting the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        let client =
            kubesched_live::read::connect_in(args.kubeconfig.as_deref(), args.context.as_deref())
                .await
                .map_err(|e| (1, e.to_string()))?;
        let read = kubesched_live::read::read_cluster(&client, args.page_size)
            .await
            .map_err(|e| (1, e.to_string()))?;
        let text = read.to_list_json();
        let mut manifests = kubesched_sim::Manifests::default();
        let mut problems = Vec::new();
        kubesched_sim::load_text(&text, "the cluster", &mut manifests, &mut problems);
        let scenario = kubesched_sim::Scenario {
            config: loaded,
            manifests,
            problems,
            seed: args.seed,
            explain: None,
            file_hint: "the cluster".into(),
        };
        kubesched_sim::explain_pod(&scenario, &pod, args.profile.as_deref())
            .await
            .map_err(|e| match e {
                // The one answer that is the caller's input, not the cluster's or ours.
                kubesched_sim::SimError::PodNotFound { .. } => (EXIT_INPUT, e.to_string()),
                e => (1, e.to_string()),
            })
    });
    let report = match result {
        Ok(r) => r,
        Err((code, e)) => return fail_with(code, &e),
    };
    print_report_as(&report, args.output, false, true);
    ExitCode::SUCCESS
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum BenchOutput {
    Markdown,
    Json,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Only workloads whose name contains this (e.g. `SchedulingBasic`, `/5000Nodes`).
    #[arg(long)]
    filter: Option<String>,
    /// Output format: a Markdown table (with the plugin time breakdown) or a JSON list.
    #[arg(long, short, value_enum, default_value_t = BenchOutput::Markdown)]
    output: BenchOutput,
    /// The folder of workload files.
    #[arg(long, default_value = "benchmarks")]
    dir: PathBuf,
    /// Multiply every node and pod count by this factor, in (0, 1]: a quick check that the
    /// workloads run, not a measurement (their `expect` ops are skipped).
    #[arg(long, default_value_t = 1.0, value_parser = parse_scale)]
    scale: f64,
    /// Seed for tie-breaking between equally scored nodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Leave the plugin time breakdown out of the Markdown output.
    #[arg(long)]
    no_breakdown: bool,
    /// Also write the results as JSON to this file (for before/after comparisons).
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Run this one workload file in this process and print its result as JSON (what the
    /// suite runs in each child process).
    #[arg(long, value_name = "FILE", hide = true)]
    single: Option<PathBuf>,
    /// Run the workloads against the API server of this kubeconfig instead of the
    /// in-memory cluster: nodes and pods are created through it, the scheduler runs in
    /// cluster mode, and everything created is deleted at the end.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The scheduler's configuration for every workload (default: the default profile; with
    /// --kubeconfig, with clientConnection qps and burst 5000), e.g. a profile with a
    /// WebAssembly plugin to compare with the same workload without it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["load", "scheduler_perf"])]
    config: Option<PathBuf>,
    /// With --kubeconfig: seconds to wait for the scheduler (caches synced, pods bound).
    #[arg(long, default_value_t = 600, requires = "kubeconfig")]
    timeout: u64,
    /// Run the load benchmark instead of the workloads: generate a cluster dump as
    /// `kubectl get nodes,pods -A` writes one (managedFields included), 90 % of the pods
    /// bound, in each shape (YAML documents, a YAML List, a JSON List), and simulate each
    /// in its own child process, timing parse, build, scheduling and report.
    #[arg(long, conflicts_with_all = ["kubeconfig", "single", "filter"])]
    load: bool,
    /// Run upstream scheduler_perf's own test cases from this performance-config.yaml
    /// (unchanged; templates relative to it), each workload in this process, with upstream's
    /// threshold beside the result; --filter picks by `TestCase/Workload` name. Test cases
    /// kubesched cannot run are listed with the reason.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "single", "load"])]
    scheduler_perf: Option<PathBuf>,
    /// With --load: nodes of the generated cluster (times --scale).
    #[arg(long, default_value_t = 5000, requires = "load")]
    load_nodes: usize,
    /// With --load: pods of the generated cluster (times --scale).
    #[arg(long, default_value_t = 100_000, requires = "load")]
    load_pods: usize,
    /// With --load: only these shapes (default: all three).
    #[arg(long, value_enum, value_delimiter = ',', requires = "load")]
    shape: Vec<LoadShape>,
    /// With --load: write the dumps into this folder and keep them (default: a temporary
    /// folder, removed at the end). Existing dumps of the same size are reused.
    #[arg(long, value_name = "DIR", requires = "load")]
    load_dir: Option<PathBuf>,
    /// Simulate this one dump file in this process and print its result as JSON (what
    /// --load runs in each child process).
    #[arg(long, value_name = "FILE", hide = true)]
    single_load: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum LoadShape {
    Documents,
    ListYaml,
    ListJson,
}

impl From<LoadShape> for kubesched_sim::bench::dump::DumpShape {
    fn from(s: LoadShape) -> Self {
        match s {
            LoadShape::Documents => Self::Documents,
            LoadShape::ListYaml => Self::ListYaml,
            LoadShape::ListJson => Self::ListJson,
        }
    }
}

/// `--scale`: refused before any workload starts when it is outside (0, 1] (every child
/// would fail the same way otherwise).
fn parse_scale(text: &str) -> Result<f64, String> {
    let scale: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if scale > 0.0 && scale <= 1.0 {
        Ok(scale)
    } else {
        Err(format!("must be in (0, 1], got {text}"))
    }
}

/// `kubesched bench --scheduler-perf FILE`: upstream's test cases, run one after another.
fn scheduler_perf_bench(args: &BenchArgs, file: &Path) -> ExitCode {
    use kubesched_sim::bench;
    let cases = match bench::scheduler_perf::read(file) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    let options = bench::BenchOptions {
        seed: args.seed,
        scale: args.scale,
    };
    let mut rows = Vec::new();
    let mut failed = false;
    for case in cases
        .iter()
        .filter(|c| args.filter.as_deref().is_none_or(|f| c.name.contains(f)))
    {
        let outcome = match &case.workload {
            Err(why) => Err(why.clone()),
            Ok(w) => bench::run_workload_blocking(w, options).map_err(|e| {
                failed = true;
                e.to_string()
            }),
        };
        rows.push((case, outcome));
    }
    if rows.is_empty() {
        return fail(&format!(
            "no test case of {} matches the filter",
            file.display()
        ));
    }
    match args.output {
        BenchOutput::Json => {
            let list: Vec<serde_json::Value> = rows
                .iter()
                .map(|(case, outcome)| match outcome {
                    Ok(r) => serde_json::json!({
                        "name": case.name, "labels": case.labels, "threshold": case.threshold,
                        "result": r,
                    }),
                    Err(why) => serde_json::json!({
                        "name": case.name, "labels": case.labels, "threshold": case.threshold,
                        "notRun": why,
                    }),
                })
                .collect();
            print(&format!(
                "{}\n",
                serde_json::to_string_pretty(&list).unwrap_or_default()
            ));
        }
        BenchOutput::Markdown => {
            let mut out = String::from(
                "| test case | labels | pods/s | upstream threshold | p99 ms |\n|---|---|---:|---:|---:|\n",
            );
            let mut not_run = String::new();
            for (case, outcome) in &rows {
                let threshold = case
                    .threshold
                    .map(|t| format!("{t:.0}"))
                    .unwrap_or_else(|| "-".into());
                match outcome {
                    Ok(r) => out.push_str(&format!(
                        "| {} | {} | {:.0} | {threshold} | {:.2} |\n",
                        case.name,
                        case.labels.join(", "),
                        r.pods_per_second,
                        r.latency_ms.p99
                    )),
                    Err(why) => not_run.push_str(&format!("- {}: {why}\n", case.name)),
                }
            }
            if !not_run.is_empty() {
                out.push_str("\nNot run:\n");
                out.push_str(&not_run);
            }
            print(&out);
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn bench(args: BenchArgs) -> ExitCode {
    use kubesched_sim::bench;
    if let Some(kubeconfig) = &args.kubeconfig {
        return kube_bench(&args, kubeconfig.clone());
    }
    if let Some(file) = &args.single_load {
        let name = args
            .filter
            .clone()
            .unwrap_or_else(|| file.display().to_string());
        return match bench::load::run_load(file, &name) {
            Ok(r) => {
                print(&format!(
                    "{}\n",
                    serde_json::to_string(&[r]).unwrap_or_default()
                ));
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e.to_string()),
        };
    }
    if args.load {
        return load_bench(&args);
    }
    if let Some(file) = &args.scheduler_perf {
        return scheduler_perf_bench(&args, file);
    }
    let options = bench::BenchOptions {
        seed: args.seed,
        scale: args.scale,
    };
    if let Some(file) = &args.single {
        let workload = match Workload::from_file(file) {
            Ok(w) => w,
            Err(e) => return fail(&e.to_string()),
        };
        // The workload's own featureGates hold for the configuration it is run with.
        let loaded = match &args.config {
            Some(path) => bench::workload_gates(&workload, &FeatureGates::defaults())
                .map_err(|e| e.to_string())
                .and_then(|gates| {
                    let mut loaded = kubesched_config::load_file_with_gates(path, &gates)
                        .map_err(|e| e.to_string())?;
                    loaded.feature_gates = gates;
                    Ok(loaded)
                }),
            None => bench::default_config_for(&workload).map_err(|e| e.to_string()),
        };
        let loaded = match loaded {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        let result = bench::run_workload_blocking_with(&workload, options, &loaded);
        return match result {
            Ok(r) => {
                print(&format!("{}\n", bench::to_json(&[r])));
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e.to_string()),
        };
    }
    let workloads = match bench::discover(&args.dir, args.filter.as_deref()) {
        Ok(w) => w,
        Err(e) => return fail(&e.to_string()),
    };
    if workloads.is_empty() {
        return fail(&format!(
            "no workload in {} matches {:?}",
            args.dir.display(),
            args.filter.as_deref().unwrap_or("")
        ));
    }
    // A configuration that does not load fails once here, not in every child.
    if let Some(path) = &args.config
        && let Err(e) = kubesched_config::load_file(path)
    {
        return fail(&e.to_string());
    }
    // On Linux the children run /proc/self/exe: the very binary of this process, even when
    // a rebuild replaced the file meanwhile, so every workload measures the same code.
    let proc_exe = PathBuf::from("/proc/self/exe");
    let exe = if proc_exe.exists() {
        proc_exe
    } else {
        match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => return fail(&format!("finding this binary to run the workloads: {e}")),
        }
    };
    let bar = bench_progress_bar(workloads.len() as u64);
    let mut results = Vec::new();
    let mut failures = 0usize;
    for w in &workloads {
        if let Some(bar) = &bar {
            bar.set_message(w.workload.name.clone());
        }
        let started = std::time::Instant::now();
        let outcome = run_bench_child(&exe, &w.path, &args);
        let took = bench::short_duration(started.elapsed());
        let line = match outcome {
            Ok(r) => {
                let line = format!(
                    "{}: {:.0} pods/s, p99 {:.3} ms ({took})",
                    r.workload, r.pods_per_second, r.latency_ms.p99
                );
                results.push(r);
                line
            }
            Err(e) => {
                failures += 1;
                format!("{}: failed: {e}", w.workload.name)
            }
        };
        match &bar {
            Some(bar) => {
                bar.println(&line);
                bar.inc(1);
            }
            None => note(&line),
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(absent) = results
        .iter()
        .map(|r| &r.absent_default_plugins)
        .find(|a| !a.is_empty())
    {
        warn(&format!(
            "the default profile ran without these upstream plugins, not compiled into this binary: {}",
            absent.join(", ")
        ));
    }
    if let Some(path) = &args.save
        && let Err(e) = std::fs::write(path, format!("{}\n", bench::to_json(&results)))
    {
        warn(&format!("writing {}: {e}", path.display()));
    }
    match args.output {
        BenchOutput::Json => print(&format!("{}\n", bench::to_json(&results))),
        BenchOutput::Markdown => {
            let mut out = bench::to_markdown(&results);
            if !args.no_breakdown {
                out.push_str(&bench::breakdown_markdown(&results, 8));
            }
            print(&out);
        }
    }
    if failures > 0 {
        return fail(&format!("{failures} workload(s) failed"));
    }
    ExitCode::SUCCESS
}

/// `kubesched bench --kubeconfig`: the workloads one after the other in this process (the
/// scheduler's CPU time is read from its own threads), against the API server.
fn kube_bench(args: &BenchArgs, kubeconfig: PathBuf) -> ExitCode {
    use kubesched_kube_bench as kb;
    let workloads = match kubesched_sim::bench::discover(&args.dir, args.filter.as_deref()) {
        Ok(w) => w,
        Err(e) => return fail(&e.to_string()),
    };
    if workloads.is_empty() {
        return fail(&format!(
            "no workload in {} matches {:?}",
            args.dir.display(),
            args.filter.as_deref().unwrap_or("")
        ));
    }
    let mut options = kb::KubeBenchOptions::new(kubeconfig);
    options.scale = args.scale;
    options.seed = args.seed;
    options.timeout = std::time::Duration::from_secs(args.timeout);
    if let Some(path) = &args.config {
        match kubesched_config::load_file(path) {
            Ok(c) => options.config = Some(c),
            Err(e) => return fail(&e.to_string()),
        }
    }
    let mut results = Vec::new();
    let mut failures = 0usize;
    for w in &workloads {
        let started = std::time::Instant::now();
        match kb::run_workload_blocking(&w.workload, &options) {
            Ok(r) => {
                note(&format!(
                    "{}: {:.0} pods/s, first bind {} s, {} CPU-s per 10k pods ({})",
                    r.workload,
                    r.pods_per_second,
                    r.first_bind_seconds
                        .map_or_else(|| "-".into(), |s| format!("{s:.2}")),
                    r.cpu_seconds_per_10k_pods
                        .map_or_else(|| "-".into(), |s| format!("{s:.2}")),
                    kubesched_sim::bench::short_duration(started.elapsed())
                ));
                results.push(r);
            }
            Err(e) => {
                failures += 1;
                note(&format!("{}: failed: {e}", w.workload.name));
            }
        }
    }
    if let Some(path) = &args.save
        && let Err(e) = std::fs::write(path, format!("{}\n", kb::to_json(&results)))
    {
        warn(&format!("writing {}: {e}", path.display()));
    }
    match args.output {
        BenchOutput::Json => print(&format!("{}\n", kb::to_json(&results))),
        BenchOutput::Markdown => print(&kb::to_markdown(&results)),
    }
    if failures > 0 {
        return fail(&format!("{failures} workload(s) failed"));
    }
    ExitCode::SUCCESS
}

/// `kubesched bench --load`: generates each dump (unless the folder has it already) and
/// simulates it in a child process.
fn load_bench(args: &BenchArgs) -> ExitCode {
    use kubesched_sim::bench::{self, dump};
    if !(args.scale > 0.0 && args.scale <= 1.0) {
        return fail(&format!("--scale must be in (0, 1], not {}", args.scale));
    }
    let spec = dump::DumpSpec {
        nodes: ((args.load_nodes as f64 * args.scale).ceil() as usize).max(1),
        pods: (args.load_pods as f64 * args.scale).ceil() as usize,
        bound_percent: 90,
    };
    let shapes: Vec<dump::DumpShape> = if args.shape.is_empty() {
        dump::DumpShape::ALL.to_vec()
    } else {
        args.shape.iter().map(|&s| s.into()).collect()
    };
    let (dir, temporary) = match &args.load_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("kubesched-load-{}", std::process::id())),
            true,
        ),
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return fail(&format!("creating {}: {e}", dir.display()));
    }
    let exe = PathBuf::from("/proc/self/exe");
    let exe = if exe.exists() {
        exe
    } else {
        match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => return fail(&format!("finding this binary to run the dumps: {e}")),
        }
    };
    let mut results = Vec::new();
    let mut failures = 0;
    for shape in shapes {
        let name = format!("LoadDump/{}Nodes/{}", spec.nodes, shape.name());
        let path = dir.join(format!(
            "dump-{}nodes-{}pods-{}.{}",
            spec.nodes,
            spec.pods,
            shape.name(),
            shape.extension()
        ));
        if !path.exists() {
            let written = std::fs::File::create(&path).and_then(|f| {
                let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
                dump::write_dump(&spec, shape, &mut w)?;
                std::io::Write::flush(&mut w)
            });
            if let Err(e) = written {
                let _ = std::fs::remove_file(&path);
                return fail(&format!("writing {}: {e}", path.display()));
            }
        }
        let started = std::time::Instant::now();
        let output = std::process::Command::new(&exe)
            .arg("bench")
            .arg("--single-load")
            .arg(&path)
            .arg("--filter")
            .arg(&name)
            .stdin(std::process::Stdio::null())
            .output();
        let outcome = match output {
            Err(e) => Err(format!("starting {}: {e}", exe.display())),
            Ok(o) if !o.status.success() => {
                Err(String::from_utf8_lossy(&o.stderr).trim().to_string())
            }
            Ok(o) => serde_json::from_slice::<Vec<bench::load::LoadResult>>(&o.stdout)
                .map_err(|e| format!("reading the child's result: {e}"))
                .and_then(|mut r| r.pop().ok_or_else(|| "the child printed no result".into())),
        };
        match outcome {
            Ok(r) => {
                note(&format!(
                    "{name}: parse {:.2} s, build {:.2} s, schedule {:.2} s, total {:.2} s, peak {} MiB ({})",
                    r.parse_seconds,
                    r.build_seconds,
                    r.schedule_seconds,
                    r.total_seconds,
                    r.peak_rss_bytes.map_or(0, |b| b >> 20),
                    bench::short_duration(started.elapsed())
                ));
                results.push(r);
            }
            Err(e) => {
                failures += 1;
                note(&format!("{name}: failed: {e}"));
            }
        }
    }
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let Some(path) = &args.save
        && let Err(e) = std::fs::write(
            path,
            serde_json::to_string_pretty(&results).unwrap_or_default(),
        )
    {
        warn(&format!("writing {}: {e}", path.display()));
    }
    match args.output {
        BenchOutput::Json => print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&results).unwrap_or_default()
        )),
        BenchOutput::Markdown => print(&bench::load::load_markdown(&results)),
    }
    if failures > 0 {
        return fail(&format!("{failures} dump(s) failed"));
    }
    ExitCode::SUCCESS
}

/// Runs one workload in a child process of this binary, so its peak RSS is its own.
fn run_bench_child(
    exe: &std::path::Path,
    file: &std::path::Path,
    args: &BenchArgs,
) -> Result<kubesched_sim::bench::BenchResult, String> {
    let output = std::process::Command::new(exe)
        .arg("bench")
        .arg("--single")
        .arg(file)
        .arg("--scale")
        .arg(args.scale.to_string())
        .arg("--seed")
        .arg(args.seed.to_string())
        .args(
            args.config
                .iter()
                .flat_map(|c| [std::ffi::OsStr::new("--config"), c.as_os_str()]),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(stderr
            .trim()
            .strip_prefix("error: ")
            .unwrap_or(stderr.trim())
            .to_string());
    }
    let mut results: Vec<kubesched_sim::bench::BenchResult> =
        serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("reading the child's result: {e}"))?;
    results
        .pop()
        .ok_or_else(|| "the child printed no result".to_string())
}

fn note(message: &str) {
    logs::note(message);
}

fn bench_progress_bar(len: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} {pos}/{len} workloads [{elapsed_precise}] {wide_bar} {msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    Some(bar)
}

/// `kubesched run` (or no subcommand): kube-scheduler's flags onto the configuration, then
/// the scheduler until SIGTERM (or the configuration written, with `--write-config-to`).
fn run(matches: &clap::ArgMatches, gates: FeatureGates) -> ExitCode {
    let mut warnings = Vec::new();
    let planned = kube_flags::plan(matches, gates, &mut warnings);
    for w in &warnings {
        warn(w);
    }
    let plan = match planned {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    report_absent(&plan.options.config);
    report_warnings(&plan.options.config);
    if let Some(path) = &plan.write_config_to {
        let yaml = kubesched_config::to_yaml(&plan.options.config.config);
        if let Err(e) = std::fs::write(path, yaml) {
            return fail(&format!(
                "writing the configuration to {}: {e}",
                path.display()
            ));
        }
        tracing::info!(file = %path.display(), "Wrote configuration");
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&format!("starting the async runtime: {e}")),
    };
    match runtime.block_on(kubesched_live::run(
        plan.options,
        kubesched_live::shutdown_signal(),
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}
