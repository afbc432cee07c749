//! `cargo xtask`: repository chores for kubesched (`deploy`, `build`). The work is in the
//! library (xtask/src/lib.rs); this file reads the command line, writes files, runs cargo
//! and kubectl, and reports.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};

use xtask::args::{self, BenchPlotArgs, BuildArgs, Command, DeployArgs, NewPluginArgs};
use xtask::plugins::{self, DEFAULT_FEATURES};
use xtask::render::{self, DeployOptions, ExtraConfig, MANIFESTS_FILE};
use xtask::{Error, yaml};

#[allow(clippy::print_stdout)]
fn say(text: &str) {
    println!("{text}");
}

#[allow(clippy::print_stderr)]
fn warn(text: &str) {
    eprintln!("warning: {text}");
}

#[allow(clippy::print_stderr)]
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    match args::parse(std::env::args().skip(1))? {
        Command::Help => {
            say(args::USAGE.trim_end());
            Ok(())
        }
        Command::Deploy(a) => deploy(a),
        Command::Build(a) => build(a),
        Command::NewPlugin(a) => new_plugin(a),
        Command::BenchPlot(a) => bench_plot(a),
    }
}

fn new_plugin(a: NewPluginArgs) -> Result<(), Error> {
    let plugin = xtask::scaffold::NewPlugin::new(&a.name, &a.points, a.args)?;
    let root = xtask::workspace_root();
    let written = xtask::scaffold::create(&root, &plugin)?;
    for path in written {
        say(&format!("wrote {}", path.display()));
    }
    // The generated code is laid out by rustfmt, like the rest of the tree.
    let formatted = Process::new("cargo")
        .current_dir(&root)
        .args(["fmt", "-p", &plugin.package()])
        .status();
    if !formatted.is_ok_and(|s| s.success()) {
        warn(&format!(
            "cargo fmt -p {} failed; run it yourself",
            plugin.package()
        ));
    }
    say(&format!(
        "next: cargo test -p {} (then make the behaviour yours and re-record the snapshot)",
        plugin.package()
    ));
    Ok(())
}

fn bench_plot(a: BenchPlotArgs) -> Result<(), Error> {
    let mut runs = Vec::new();
    for path in &a.inputs {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::new(format!("reading {}: {e}", path.display())))?;
        runs.push((path.display().to_string(), text));
    }
    let points = xtask::bench_plot::scale_points(&runs)?;
    xtask::bench_plot::render_svg(&points, &a.out)?;
    say(xtask::bench_plot::markdown(&points).trim_end());
    say(&format!("wrote {}", a.out.display()));
    Ok(())
}

fn deploy(a: DeployArgs) -> Result<(), Error> {
    let defaults = DeployOptions::default();
    let plugins = match &a.plugins {
        Some(list) => Some(plugins::resolve(list, &xtask::known_plugins()?)?),
        None => None,
    };
    let extra_config = match &a.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::new(format!("reading {}: {e}", path.display())))?;
            let value =
                yaml::parse(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
            Some(ExtraConfig {
                source: path.display().to_string(),
                value,
            })
        }
        None => None,
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| xtask::workspace_root().join(render::DEFAULT_OUT));
    let opts = DeployOptions {
        scheduler_name: a.scheduler_name.unwrap_or(defaults.scheduler_name),
        namespace: a.namespace.unwrap_or(defaults.namespace),
        image: a.image.unwrap_or(defaults.image),
        replicas: a.replicas.unwrap_or(defaults.replicas),
        leader_election: !a.no_leader_election,
        plugins,
        plugins_arg: a.plugins,
        extra_config,
        out_label: a
            .out
            .as_ref()
            .map_or(defaults.out_label, |p| p.display().to_string()),
    };
    let rendered = render::render(&opts)?;
    for note in &rendered.notes {
        warn(note);
    }
    for file in &rendered.files {
        let path = out.join(file.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::new(format!("creating {}: {e}", dir.display())))?;
        }
        std::fs::write(&path, &file.contents)
            .map_err(|e| Error::new(format!("writing {}: {e}", path.display())))?;
        say(&format!("wrote {}", path.display()));
    }
    say(&format!(
        "image recipe: docker build -f {} -t {} .   (features: {})",
        out.join("Dockerfile").display(),
        opts.image,
        opts.cargo_features()
    ));
    let manifests = out.join(MANIFESTS_FILE);
    if a.apply {
        apply(&manifests)?;
    } else {
        say(&format!(
            "apply with: kubectl apply -f {}",
            manifests.display()
        ));
    }
    Ok(())
}

/// The first `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let exe = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(&exe))
            .find(|p| p.is_file())
    })
}

fn apply(manifests: &Path) -> Result<(), Error> {
    let Some(kubectl) = on_path("kubectl") else {
        say(&format!(
            "kubectl is not on PATH, so nothing was applied; where it is, run: kubectl apply -f {}",
            manifests.display()
        ));
        return Ok(());
    };
    say(&format!(
        "running {} apply -f {}",
        kubectl.display(),
        manifests.display()
    ));
    let status = Process::new(&kubectl)
        .arg("apply")
        .arg("-f")
        .arg(manifests)
        .status()
        .map_err(|e| Error::new(format!("running {}: {e}", kubectl.display())))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::new(format!("kubectl apply failed ({status})")))
    }
}

fn build(a: BuildArgs) -> Result<(), Error> {
    let (features, count) = match &a.plugins {
        Some(list) => {
            let sel = plugins::resolve(list, &xtask::known_plugins()?)?;
            let count = sel.plugins.len().to_string();
            (sel.cargo_features(), count)
        }
        None => (DEFAULT_FEATURES.to_string(), "every in-tree".to_string()),
    };
    let root = xtask::workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let cargo_args = [
        "build",
        "--release",
        "-p",
        "kubesched",
        "--no-default-features",
        "--features",
        &features,
    ];
    say(&format!("running cargo {}", cargo_args.join(" ")));
    let status = Process::new(&cargo)
        .args(cargo_args)
        .current_dir(&root)
        .status()
        .map_err(|e| Error::new(format!("running cargo: {e}")))?;
    if !status.success() {
        return Err(Error::new(format!("cargo build failed ({status})")));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map_or_else(|| root.join("target"), |t| root.join(t));
    let binary = target
        .join("release")
        .join(format!("kubesched{}", std::env::consts::EXE_SUFFIX));
    let size = std::fs::metadata(&binary)
        .map_err(|e| Error::new(format!("reading {}: {e}", binary.display())))?
        .len();
    say(&format!(
        "{}: {} ({size} bytes), {count} plugins (features {features})",
        binary.display(),
        human_size(size)
    ));
    Ok(())
}

fn human_size(bytes: u64) -> String {
    // Precision loss is irrelevant for a size shown with one decimal.
    #[allow(clippy::cast_precision_loss)]
    let mib = bytes as f64 / (1024.0 * 1024.0);
    format!("{mib:.1} MiB")
}
