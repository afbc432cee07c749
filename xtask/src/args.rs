//! Command-line parsing for `cargo xtask`, by hand: two commands and a few options do not
//! justify a parser dependency. `--name value` and `--name=value` are both accepted.

use std::path::PathBuf;

use crate::Error;

/// What `cargo xtask` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Render deploy/.
    Deploy(DeployArgs),
    /// Build a slim release binary.
    Build(BuildArgs),
    /// Create a plugin crate.
    NewPlugin(NewPluginArgs),
    /// Draw the scale curve from bench results.
    BenchPlot(BenchPlotArgs),
    /// Run test binaries again and again under load.
    Stress(StressArgs),
    /// Print the usage.
    Help,
}

/// `cargo xtask deploy` options, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployArgs {
    /// `--scheduler-name`.
    pub scheduler_name: Option<String>,
    /// `--namespace`.
    pub namespace: Option<String>,
    /// `--image`.
    pub image: Option<String>,
    /// `--replicas`.
    pub replicas: Option<u32>,
    /// `--plugins`, the comma list as given.
    pub plugins: Option<String>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--out`.
    pub out: Option<PathBuf>,
    /// `--apply`.
    pub apply: bool,
    /// `--no-leader-election`.
    pub no_leader_election: bool,
    /// `--service-monitor`.
    pub service_monitor: bool,
}

/// `cargo xtask build` options, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildArgs {
    /// `--plugins`, the comma list as given (the default build when absent).
    pub plugins: Option<String>,
}

/// `cargo xtask new-plugin` arguments, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewPluginArgs {
    /// The plugin's name.
    pub name: String,
    /// `--points`, the comma list as given.
    pub points: String,
    /// `--args`.
    pub args: bool,
}

/// `cargo xtask bench-plot` arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BenchPlotArgs {
    /// `kubesched bench --output json` files, one per run.
    pub inputs: Vec<PathBuf>,
    /// The SVG to write.
    pub out: PathBuf,
}

/// `cargo xtask stress` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StressArgs {
    /// `--runs`: how many times each binary runs.
    pub runs: u32,
    /// `--load`: busy processes kept running beside the tests (the core count by default).
    pub load: Option<usize>,
    /// `--tests`: the test targets of kubesched-tests to run (`*` matches any run of
    /// characters).
    pub tests: Vec<String>,
}

impl Default for StressArgs {
    fn default() -> Self {
        Self {
            runs: 20,
            load: None,
            tests: vec!["kube_*".to_string()],
        }
    }
}

/// The usage text.
pub const USAGE: &str = "\
cargo xtask <command> [options]

Commands:
  deploy   Render the manifests, the Helm chart, the Grafana dashboard, the Dockerfile and
           example workloads (into deploy/)
  build    Build a release kubesched with exactly the given plugins and print its size
           (with --plugins into target/slim/release/, leaving target/release/kubesched be)
  new-plugin NAME --points Filter,Score [--args]
           Create plugins/<kebab-name>: the plugin with a small tested behaviour per point,
           its registration, an args type (--args), a snapshot test, and its feature and
           line in crates/cli
  stress   Run the cluster-mode test binaries (kube_*) again and again while other
           processes keep every core busy, and report the failures per test (kube_faults
           gets 30 s of faults and 1,500 pods a run unless KUBESCHED_FAULT_SECS or
           KUBESCHED_FAULT_PODS say otherwise)
  bench-plot RUN.json... OUT.svg
           Draw the scale curve (pods/s, nodes examined/s, peak RSS against nodes) of the
           medians over the given `kubesched bench --output json` runs, and print it as a table

deploy options:
  --scheduler-name NAME   spec.schedulerName the scheduler serves; names every object [kubesched]
  --namespace NS          namespace of the scheduler and its lease [kube-system]
  --image IMAGE           container image [kubesched:<version>]
  --replicas N            Deployment replicas (more than one needs leader election; adds a
                          PodDisruptionBudget and pod anti-affinity on hostname) [1]
  --plugins A,B,...       plugin set (`default` = upstream's default plugins); selects the
                          image's Cargo features and the profile's multiPoint [every in-tree plugin]
  --config FILE           a KubeSchedulerConfiguration to start from (options fill in what it leaves unset)
  --no-leader-election    turn leader election off (single replica only)
  --service-monitor       add a prometheus-operator ServiceMonitor for the metrics Service
  --out DIR               output folder [deploy/ of the repository]
  --apply                 run `kubectl apply -f DIR/kubesched.yaml` afterwards (when kubectl is on PATH)

build options:
  --plugins A,B,...       plugin set (`default` = upstream's default plugins) [every in-tree plugin]

stress options:
  --runs N                runs of each test binary [20]
  --load N                busy processes beside the tests [the number of cores]
  --tests A,B,...         test targets of kubesched-tests, `*` as a wildcard [kube_*]
";

/// Parses the arguments after `cargo xtask`.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, Error> {
    let mut args = args.into_iter();
    let Some(command) = args.next() else {
        return Ok(Command::Help);
    };
    let mut rest = Options::new(args.collect());
    let parsed = match command.as_str() {
        "deploy" => Command::Deploy(DeployArgs {
            scheduler_name: rest.value("scheduler-name")?,
            namespace: rest.value("namespace")?,
            image: rest.value("image")?,
            replicas: rest
                .value("replicas")?
                .map(|v| {
                    v.parse::<u32>()
                        .map_err(|_| Error::new(format!("--replicas {v:?} is not a whole number")))
                })
                .transpose()?,
            plugins: rest.value("plugins")?,
            config: rest.value("config")?.map(PathBuf::from),
            out: rest.value("out")?.map(PathBuf::from),
            apply: rest.flag("apply"),
            no_leader_election: rest.flag("no-leader-election"),
            service_monitor: rest.flag("service-monitor"),
        }),
        "build" => Command::Build(BuildArgs {
            plugins: rest.value("plugins")?,
        }),
        "stress" => {
            let defaults = StressArgs::default();
            let runs = match rest.value("runs")? {
                Some(v) => v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    Error::new(format!("--runs {v:?} is not a whole number above 0"))
                })?,
                None => defaults.runs,
            };
            let load = rest
                .value("load")?
                .map(|v| {
                    v.parse::<usize>()
                        .map_err(|_| Error::new(format!("--load {v:?} is not a whole number")))
                })
                .transpose()?;
            let tests = match rest.value("tests")? {
                Some(list) => list
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect(),
                None => defaults.tests,
            };
            Command::Stress(StressArgs { runs, load, tests })
        }
        "new-plugin" => {
            let name = rest.positional().ok_or_else(|| {
                Error::new("new-plugin needs the plugin's name, e.g. `cargo xtask new-plugin RoomyNodes --points Filter,Score`")
            })?;
            Command::NewPlugin(NewPluginArgs {
                name,
                points: rest
                    .value("points")?
                    .ok_or_else(|| Error::new("new-plugin needs --points (Filter, Score)"))?,
                args: rest.flag("args"),
            })
        }
        "bench-plot" => {
            if rest.flag("help") || rest.flag("h") {
                return Ok(Command::Help);
            }
            let mut files = rest.all_positional()?;
            let out = files.pop().filter(|o| o.ends_with(".svg")).ok_or_else(|| {
                Error::new("bench-plot needs the JSON runs and then the SVG to write (OUT.svg)")
            })?;
            if files.is_empty() {
                return Err(Error::new("bench-plot needs at least one JSON run"));
            }
            return Ok(Command::BenchPlot(BenchPlotArgs {
                inputs: files.into_iter().map(PathBuf::from).collect(),
                out: PathBuf::from(out),
            }));
        }
        "help" | "--help" | "-h" => return Ok(Command::Help),
        other => {
            return Err(Error::new(format!(
                "unknown command `{other}` (commands: deploy, build, new-plugin, bench-plot, stress)"
            )));
        }
    };
    if rest.flag("help") || rest.flag("h") {
        return Ok(Command::Help);
    }
    rest.finish()?;
    Ok(parsed)
}

/// Arguments not yet consumed.
struct Options {
    args: Vec<String>,
}

impl Options {
    fn new(args: Vec<String>) -> Self {
        Self { args }
    }

    /// Takes `--name value` or `--name=value` (the last one wins when repeated).
    fn value(&mut self, name: &str) -> Result<Option<String>, Error> {
        let flag = format!("--{name}");
        let prefix = format!("--{name}=");
        let mut found = None;
        let mut i = 0;
        while i < self.args.len() {
            if self.args[i] == flag {
                let Some(v) = self.args.get(i + 1).filter(|v| !v.starts_with("--")) else {
                    return Err(Error::new(format!("{flag} needs a value")));
                };
                found = Some(v.clone());
                self.args.drain(i..i + 2);
            } else if let Some(v) = self.args[i].strip_prefix(&prefix) {
                found = Some(v.to_string());
                self.args.remove(i);
            } else {
                i += 1;
            }
        }
        Ok(found)
    }

    /// Takes the first argument that is not an option.
    fn positional(&mut self) -> Option<String> {
        let at = self.args.iter().position(|a| !a.starts_with('-'))?;
        Some(self.args.remove(at))
    }

    /// Takes `--name` (or `-name` for one-letter names).
    fn flag(&mut self, name: &str) -> bool {
        let flag = if name.len() == 1 {
            format!("-{name}")
        } else {
            format!("--{name}")
        };
        let before = self.args.len();
        self.args.retain(|a| *a != flag);
        self.args.len() != before
    }

    /// Takes every remaining argument as a positional one; an option is an error.
    fn all_positional(self) -> Result<Vec<String>, Error> {
        match self.args.iter().find(|a| a.starts_with('-')) {
            Some(a) => Err(Error::new(format!(
                "unexpected option `{a}` (see `cargo xtask help`)"
            ))),
            None => Ok(self.args),
        }
    }

    fn finish(self) -> Result<(), Error> {
        match self.args.first() {
            None => Ok(()),
            Some(a) => Err(Error::new(format!(
                "unexpected argument `{a}` (see `cargo xtask help`)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &str, expect: Result<Command, &str>) {
        let got = parse(args.split_whitespace().map(String::from));
        assert_eq!(got, expect.map_err(Error::new), "for `{args}`");
    }

    #[test]
    fn stress_options() {
        check("stress", Ok(Command::Stress(StressArgs::default())));
        check(
            "stress --runs 3 --load=4 --tests kube_watch,kube_*_binding",
            Ok(Command::Stress(StressArgs {
                runs: 3,
                load: Some(4),
                tests: vec!["kube_watch".into(), "kube_*_binding".into()],
            })),
        );
        check(
            "stress --runs 0",
            Err("--runs \"0\" is not a whole number above 0"),
        );
        check(
            "stress --load many",
            Err("--load \"many\" is not a whole number"),
        );
        check(
            "stress --fast",
            Err("unexpected argument `--fast` (see `cargo xtask help`)"),
        );
    }

    #[test]
    fn deploy_options() {
        check(
            "deploy --scheduler-name s --namespace=ns --image i:1 --replicas 2 --plugins A,B --config c.yaml --out o --apply --no-leader-election --service-monitor",
            Ok(Command::Deploy(DeployArgs {
                scheduler_name: Some("s".into()),
                namespace: Some("ns".into()),
                image: Some("i:1".into()),
                replicas: Some(2),
                plugins: Some("A,B".into()),
                config: Some("c.yaml".into()),
                out: Some("o".into()),
                apply: true,
                no_leader_election: true,
                service_monitor: true,
            })),
        );
        check("deploy", Ok(Command::Deploy(DeployArgs::default())));
    }

    #[test]
    fn build_and_help() {
        check(
            "build --plugins NodeName,PrioritySort",
            Ok(Command::Build(BuildArgs {
                plugins: Some("NodeName,PrioritySort".into()),
            })),
        );
        check("", Ok(Command::Help));
        check("help", Ok(Command::Help));
        check("deploy --help", Ok(Command::Help));
    }

    #[test]
    fn new_plugin() {
        check(
            "new-plugin RoomyNodes --points Filter,Score --args",
            Ok(Command::NewPlugin(NewPluginArgs {
                name: "RoomyNodes".into(),
                points: "Filter,Score".into(),
                args: true,
            })),
        );
        check(
            "new-plugin --points=Score Roomy",
            Ok(Command::NewPlugin(NewPluginArgs {
                name: "Roomy".into(),
                points: "Score".into(),
                args: false,
            })),
        );
        check(
            "new-plugin Roomy",
            Err("new-plugin needs --points (Filter, Score)"),
        );
        check(
            "new-plugin Roomy Extra --points Filter",
            Err("unexpected argument `Extra` (see `cargo xtask help`)"),
        );
    }

    #[test]
    fn bench_plot_takes_runs_then_the_svg() {
        check(
            "bench-plot a.json b.json docs/scale.svg",
            Ok(Command::BenchPlot(BenchPlotArgs {
                inputs: vec!["a.json".into(), "b.json".into()],
                out: "docs/scale.svg".into(),
            })),
        );
        check(
            "bench-plot a.json b.json",
            Err("bench-plot needs the JSON runs and then the SVG to write (OUT.svg)"),
        );
        check(
            "bench-plot out.svg",
            Err("bench-plot needs at least one JSON run"),
        );
        check(
            "bench-plot --x a.json o.svg",
            Err("unexpected option `--x` (see `cargo xtask help`)"),
        );
    }

    #[test]
    fn mistakes() {
        check(
            "ship",
            Err("unknown command `ship` (commands: deploy, build, new-plugin, bench-plot, stress)"),
        );
        check("deploy --image", Err("--image needs a value"));
        check("deploy --image --apply", Err("--image needs a value"));
        check(
            "deploy --replicas two",
            Err("--replicas \"two\" is not a whole number"),
        );
        check(
            "deploy --imag x",
            Err("unexpected argument `--imag` (see `cargo xtask help`)"),
        );
        check(
            "build --apply",
            Err("unexpected argument `--apply` (see `cargo xtask help`)"),
        );
    }
}
