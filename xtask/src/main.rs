//! `cargo xtask`: repository chores for kubesched (`deploy`, `build`). The work is in the
//! library (xtask/src/lib.rs); this file reads the command line, writes files, runs cargo
//! and kubectl, and reports.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};

use xtask::args::{self, BenchPlotArgs, BuildArgs, Command, DeployArgs, NewPluginArgs, StressArgs};
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
    // A busy process of `cargo xtask stress`'s load: not a command for people.
    if std::env::args().nth(1).as_deref() == Some(BURN) {
        burn();
    }
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
        Command::Stress(a) => stress(a),
    }
}

/// The hidden argument that makes this program one busy process of the stress load.
const BURN: &str = "__stress-burn";

/// Keeps one core busy until standard input closes, which it does when the stress run
/// that started this process ends, however it ends.
fn burn() -> ! {
    std::thread::spawn(|| {
        let mut buf = [0u8; 64];
        loop {
            match std::io::Read::read(&mut std::io::stdin(), &mut buf) {
                Ok(0) | Err(_) => std::process::exit(0),
                Ok(_) => {}
            }
        }
    });
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// The busy processes beside the tests; they end when this is dropped.
struct Load(Vec<std::process::Child>);

impl Load {
    /// Starts `processes` busy copies of `exe` (a copy of this program).
    fn start(exe: &Path, processes: usize) -> Result<Self, Error> {
        let mut children = Vec::with_capacity(processes);
        for _ in 0..processes {
            let child = Process::new(exe)
                .arg(BURN)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| Error::new(format!("starting a load process: {e}")))?;
            children.push(child);
        }
        Ok(Self(children))
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How a finished process ended, in words.
fn ended(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with {code}"),
        None => "ended without an exit code".to_string(),
    }
}

/// Waits for `child` at most `limit`; kills it past that. Returns whether it succeeded
/// and how it ended.
fn wait_at_most(child: &mut std::process::Child, limit: std::time::Duration) -> (bool, String) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (status.success(), ended(status)),
            Ok(None) if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return (false, format!("was cut off after {} s", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(100)),
            Err(e) => return (false, format!("could not be waited for: {e}")),
        }
    }
}

fn stress(a: StressArgs) -> Result<(), Error> {
    use std::time::{Duration, Instant};
    let root = xtask::workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let logs = target.join("stress");
    let bin = logs.join("bin");
    std::fs::create_dir_all(&bin)
        .map_err(|e| Error::new(format!("creating {}: {e}", bin.display())))?;
    // This program, copied before anything rebuilds it (the build below may, and so may a
    // build of the tests during the run): the load processes are started from the copy.
    let own = if Path::new("/proc/self/exe").exists() {
        PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe()
            .map_err(|e| Error::new(format!("finding xtask's own executable: {e}")))?
    };
    let burner = bin.join("load");
    std::fs::copy(&own, &burner).map_err(|e| {
        Error::new(format!(
            "copying {} to {}: {e}",
            own.display(),
            burner.display()
        ))
    })?;
    // The README's test command's own build, so nothing is compiled twice with other
    // features.
    say("building the test binaries (cargo test --workspace --no-run)");
    let mut cargo = Process::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // `cargo run` (which `cargo xtask` is) sets the package variables of xtask itself;
    // build scripts that watch them (ring's do) would see a change from the same command
    // typed in a shell, and everything above them would be built again, twice.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || matches!(
                name.as_ref(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_RUSTC_CURRENT_DIR"
            )
        {
            cargo.env_remove(name.as_ref());
        }
    }
    let build = cargo
        .current_dir(&root)
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| Error::new(format!("running cargo: {e}")))?;
    if !build.status.success() {
        return Err(Error::new("building the tests failed (see above)"));
    }
    let messages = String::from_utf8_lossy(&build.stdout);
    let binaries = xtask::stress::test_binaries(&messages, "kubesched-tests", &a.tests)?;
    if binaries.is_empty() {
        return Err(Error::new(format!(
            "no test target of kubesched-tests matches {}",
            a.tests.join(",")
        )));
    }
    let processes = a
        .load
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    say(&format!(
        "{} runs of {} binaries ({}) beside {processes} busy processes; logs of failed runs in {}",
        a.runs,
        binaries.len(),
        binaries
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        logs.display()
    ));
    // Links of their own (copies where a hard link cannot be made), so that building the
    // tests again meanwhile does not change what runs: the linker writes a new file rather
    // than into the old one. A link costs no disk, which CI's machines have little of.
    let mut binaries = binaries;
    for binary in &mut binaries {
        let copy = bin.join(&binary.name);
        // A leftover of an earlier run would make the link fail; it is ours to replace.
        let _ = std::fs::remove_file(&copy);
        std::fs::hard_link(&binary.path, &copy)
            .or_else(|_| std::fs::copy(&binary.path, &copy).map(|_| ()))
            .map_err(|e| {
                Error::new(format!(
                    "copying {} to {}: {e}",
                    binary.path,
                    copy.display()
                ))
            })?;
        binary.path = copy.display().to_string();
    }
    let load = Load::start(&burner, processes)?;
    let mut tally = xtask::stress::Tally::default();
    let started = Instant::now();
    for run in 1..=a.runs {
        for binary in &binaries {
            let log = logs.join(format!("{}-{run}.log", binary.name));
            let file = std::fs::File::create(&log)
                .map_err(|e| Error::new(format!("creating {}: {e}", log.display())))?;
            let err = file
                .try_clone()
                .map_err(|e| Error::new(format!("opening {}: {e}", log.display())))?;
            let at = Instant::now();
            // Integration tests run in their package's folder, as under cargo test.
            let mut command = Process::new(&binary.path);
            command
                .current_dir(root.join("tests"))
                .env("RUST_BACKTRACE", "1");
            // The fault test's two minutes of faults and 5,000 pods, cut to half a minute
            // and 1,500 pods a run unless asked otherwise: many short runs find more races
            // than a few long ones.
            for (name, value) in [
                ("KUBESCHED_FAULT_SECS", "30"),
                ("KUBESCHED_FAULT_PODS", "1500"),
            ] {
                if std::env::var_os(name).is_none() {
                    command.env(name, value);
                }
            }
            let spawned = command.stdout(file).stderr(err).spawn();
            let (ok, how) = match spawned {
                Ok(mut child) => wait_at_most(&mut child, Duration::from_secs(900)),
                Err(e) => (false, format!("could not start: {e}")),
            };
            let output = std::fs::read_to_string(&log).unwrap_or_default();
            tally.add_run(&binary.name, &output, ok, &how);
            say(&format!(
                "run {run}/{}: {} {} in {:.0} s",
                a.runs,
                binary.name,
                if ok { "passed" } else { "FAILED" },
                at.elapsed().as_secs_f64()
            ));
            if ok {
                let _ = std::fs::remove_file(&log);
            }
        }
    }
    drop(load);
    say(tally.report(a.runs, binaries.len()).trim_end());
    say(&format!(
        "stress took {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    match tally.failures() {
        0 => Ok(()),
        n => Err(Error::new(format!(
            "{n} failed test runs under load (logs in {})",
            logs.display()
        ))),
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
        service_monitor: a.service_monitor,
        plugins,
        plugins_arg: a.plugins,
        extra_config,
        out_label: a
            .out
            .as_ref()
            .map_or(defaults.out_label, |p| p.display().to_string()),
    };
    let rendered = xtask::deploy::render(&opts)?;
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
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map_or_else(|| root.join("target"), |t| root.join(t));
    let (cargo_args, target) = build_command(&features, a.plugins.is_some(), &target);
    say(&format!("running cargo {}", cargo_args.join(" ")));
    let status = Process::new(&cargo)
        .args(&cargo_args)
        .current_dir(&root)
        .status()
        .map_err(|e| Error::new(format!("running cargo: {e}")))?;
    if !status.success() {
        return Err(Error::new(format!("cargo build failed ({status})")));
    }
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

/// The cargo arguments of `cargo xtask build` and the target directory it builds into: a
/// slim build goes to a directory of its own (`<target>/slim`), so it never replaces the
/// full binary at `target/release/kubesched`.
fn build_command(features: &str, slim: bool, target: &Path) -> (Vec<String>, PathBuf) {
    let mut args: Vec<String> = [
        "build",
        "--release",
        "-p",
        "kubesched",
        "--no-default-features",
        "--features",
        features,
    ]
    .map(String::from)
    .to_vec();
    let target = if slim {
        let slim_dir = target.join("slim");
        args.extend(["--target-dir".to_string(), slim_dir.display().to_string()]);
        slim_dir
    } else {
        target.to_path_buf()
    };
    (args, target)
}

fn human_size(bytes: u64) -> String {
    // Precision loss is irrelevant for a size shown with one decimal.
    #[allow(clippy::cast_precision_loss)]
    let mib = bytes as f64 / (1024.0 * 1024.0);
    format!("{mib:.1} MiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slim_build_has_a_target_directory_of_its_own() {
        let (args, dir) = build_command("inventory,plugin-node-name", true, Path::new("/t"));
        assert_eq!(dir, Path::new("/t/slim"));
        assert_eq!(&args[args.len() - 2..], ["--target-dir", "/t/slim"]);
        let (args, dir) = build_command("inventory,all-plugins", false, Path::new("/t"));
        assert_eq!(dir, Path::new("/t"));
        assert!(!args.iter().any(|a| a == "--target-dir"));
    }
}
