//! Faults under load, end to end: two kubesched processes with leader election schedule
//! pods created and deleted in waves on 200 nodes while the test API server drops watches,
//! forgets its history (410 Gone on resume), answers binds with 500 and 409, answers
//! slowly, restarts with its state kept, and the leader is SIGKILLed every 20 s. The
//! invariants are checked from the server's own record of accepted bindings: no pod bound
//! twice, no node ever over its allocatable CPU, memory or pod count, every pod ends
//! bound, the standby takes over within leaseDuration + renewDeadline of a kill, no
//! process panics, and memory stays bounded.
//!
//! The CI size takes about three minutes. For a longer run:
//! `KUBESCHED_FAULT_SECS=900 KUBESCHED_FAULT_PODS=20000 cargo test -p kubesched-tests --test kube_faults -- --nocapture`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kubesched_live::RunError;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    LEASE_NAME, LEASE_NAMESPACE, bounded, lease_holder, node, options_for, pod,
};
use serde_json::json;

const CHILD_KUBECONFIG: &str = "KUBESCHED_FAULT_CHILD_KUBECONFIG";
const CHILD_IDENTITY: &str = "KUBESCHED_FAULT_CHILD_IDENTITY";

const LEASE_DURATION: Duration = Duration::from_secs(4);
const RENEW_DEADLINE: Duration = Duration::from_secs(3);
const NODES: usize = 200;
const NODE_CPU_MILLI: i64 = 4000;
const WAVES: usize = 10;
const KILL_EVERY: Duration = Duration::from_secs(20);
/// Resident memory a scheduler process may reach (a debug build holds about 70 MiB with
/// 1,500 live pods on 200 nodes; the live set stays that size however long the run).
const MAX_RSS_BYTES: u64 = 256 << 20;
/// Memory of the nodes that run out of memory first: 8 pods of 256Mi.
const SMALL_MEMORY: &str = "2Gi";
/// How many 256Mi pods fit on such a node.
const SMALL_MEMORY_SLOTS: usize = 8;
/// The taint (and label) that keeps every other pod off those nodes, so the pods made
/// for them fill their memory.
const SMALL_MEMORY_KEY: &str = "kubesched.test/small-memory";
/// Pod slots of the nodes that run out of slots first.
const FEW_PODS: &str = "10";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn child_config() -> kubesched_config::LoadedConfig {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
clientConnection:
  qps: 100
  burst: 200
leaderElection:
  leaderElect: true
  leaseDuration: {}s
  renewDeadline: {}s
  retryPeriod: 500ms
  resourceName: {LEASE_NAME}
  resourceNamespace: {LEASE_NAMESPACE}
",
        LEASE_DURATION.as_secs(),
        RENEW_DEADLINE.as_secs()
    );
    kubesched_config::load_str(&text, "faults.yaml").expect("valid configuration")
}

/// Not a test on its own: the body of the scheduler processes the fault test starts (this
/// test binary run again with the variables set).
#[test]
fn fault_child_process() {
    let (Ok(kubeconfig), Ok(identity)) = (
        std::env::var(CHILD_KUBECONFIG),
        std::env::var(CHILD_IDENTITY),
    ) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut options = options_for(kubeconfig.into(), true, &identity);
    options.config = child_config();
    options.seed = None;
    let result = runtime.block_on(kubesched_live::run(
        options,
        kubesched_live::shutdown_signal(),
    ));
    std::process::exit(match result {
        Ok(()) => 0,
        Err(RunError::LeaderLost) => 3,
        Err(_) => 4,
    });
}

struct Scheduler {
    identity: String,
    child: Child,
    stderr: PathBuf,
    peak_rss: u64,
}

fn spawn(dir: &Path, kubeconfig: &Path, identity: &str) -> Scheduler {
    let stderr = dir.join(format!("{identity}.stderr"));
    let file = std::fs::File::create(&stderr).expect("stderr file");
    let child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "fault_child_process",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_KUBECONFIG, kubeconfig)
        .env(CHILD_IDENTITY, identity)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("starting a scheduler process");
    Scheduler {
        identity: identity.to_string(),
        child,
        stderr,
        peak_rss: 0,
    }
}

fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Whether node `i` is one of the small-memory nodes (tainted for the pods made for them).
fn small_memory(i: usize) -> bool {
    i % 4 == 1
}

/// Node `i`: 4 CPUs; every fourth has little memory (and is kept for the pods made for
/// it) and every fourth (another) few pod slots, so all three allocatable amounts fill up.
fn fault_node(i: usize) -> serde_json::Value {
    let mut n = node(&format!("node-{i:03}"), "4");
    for part in ["capacity", "allocatable"] {
        match i % 4 {
            1 => n["status"][part]["memory"] = json!(SMALL_MEMORY),
            2 => n["status"][part]["pods"] = json!(FEW_PODS),
            _ => {}
        }
    }
    if small_memory(i) {
        n["metadata"]["labels"][SMALL_MEMORY_KEY] = json!("true");
        n["spec"]["taints"] =
            json!([{"key": SMALL_MEMORY_KEY, "value": "true", "effect": "NoSchedule"}]);
    }
    n
}

/// A wave pod for the small-memory nodes: it tolerates their taint and selects them.
fn small_memory_pod(name: &str, cpu_milli: i64) -> serde_json::Value {
    let mut p = wave_pod(name, cpu_milli, false);
    p["spec"]["nodeSelector"] = json!({SMALL_MEMORY_KEY: "true"});
    p["spec"]["tolerations"] =
        json!([{"key": SMALL_MEMORY_KEY, "operator": "Exists", "effect": "NoSchedule"}]);
    p
}

/// What one wave pod asks for.
fn wave_pod(name: &str, cpu_milli: i64, big: bool) -> serde_json::Value {
    let mut p = pod(name, &format!("{cpu_milli}m"));
    p["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("256Mi");
    p["spec"]["terminationGracePeriodSeconds"] = json!(2);
    p["spec"]["priority"] = json!(if big { 1000 } else { 0 });
    p
}

#[derive(Default)]
struct Tally {
    kills: usize,
    takeovers: Vec<Duration>,
    leader_lost_exits: usize,
    watch_drops: usize,
    compactions: usize,
    restarts: usize,
    created: usize,
    deleted: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invariants_hold_under_faults_and_leader_kills() {
    let fault_secs = env_or("KUBESCHED_FAULT_SECS", 120);
    let total_pods = env_or("KUBESCHED_FAULT_PODS", 5000) as usize;
    bounded(fault_secs + 240, "faults under load", async {
        let server = TestApiServer::start().await;
        let kubeconfig = server.write_kubeconfig();
        let dir = server.dir().to_path_buf();
        for i in 0..NODES {
            server.create("nodes", fault_node(i));
        }
        let mut next_id = 0usize;
        let mut schedulers = vec![
            spawn(&dir, &kubeconfig, &format!("s{next_id}")),
            spawn(&dir, &kubeconfig, &format!("s{}", next_id + 1)),
        ];
        next_id += 2;
        let mut retired: Vec<Scheduler> = Vec::new();
        assert!(
            server
                .wait_until(Duration::from_secs(60), |s| !lease_holder(s).is_empty())
                .await,
            "someone leads"
        );

        // Faults that run the whole time.
        server.fail_at_random("POST", "/binding", 0.05, 500);
        server.fail_at_random("POST", "/binding", 0.03, 409);
        server.delay_at_random("POST", "/binding", 0.10, Duration::from_millis(400));
        server.delay_at_random("GET", "/api", 0.05, Duration::from_millis(300));
        server.delay_at_random("PATCH", "/status", 0.10, Duration::from_millis(300));

        // CPU of the nodes every pod may use; the small-memory nodes are bounded by count.
        let small_nodes = (0..NODES).filter(|i| small_memory(*i)).count();
        let capacity: i64 = (NODES - small_nodes) as i64 * NODE_CPU_MILLI;
        let small_cap = small_nodes * SMALL_MEMORY_SLOTS * 95 / 100;
        let mut small_live = 0usize;
        let per_wave = total_pods.div_ceil(WAVES);
        let wave_every = Duration::from_secs(fault_secs) / WAVES as u32;
        // Live pods, oldest first: name, CPU counted in `demand` (0 for small-memory pods),
        // whether made for the small-memory nodes.
        let mut live: VecDeque<(String, i64, bool)> = VecDeque::new();
        let mut demand: i64 = 0;
        let mut tally = Tally::default();
        let mut rng = fastrand_like(7);

        let start = Instant::now();
        let mut waves_done = 0usize;
        let mut last_kill = start;
        let mut last_drop = start;
        let mut last_compact = start;
        let mut restarted = false;
        let mut pending_kill: Option<(String, Instant)> = None;
        let mut last_sample = start;
        // The run ends after its time and its waves, and once the last kill was taken over.
        while start.elapsed() < Duration::from_secs(fault_secs)
            || waves_done < WAVES
            || pending_kill.is_some()
        {
            let now = Instant::now();
            // A wave: make room (deleting the oldest pods, gracefully), then create.
            if waves_done < WAVES && now >= start + wave_every * waves_done as u32 {
                let wave_demand: i64 = per_wave as i64 * 300 + 2 * 3500;
                while demand + wave_demand > capacity * 55 / 100 {
                    let Some((name, cpu, small)) = live.pop_front() else { break };
                    demand -= cpu;
                    small_live -= usize::from(small);
                    tally.deleted += 1;
                    if rng.next().is_multiple_of(2) {
                        server.delete_with_grace("default", &name, 1);
                    } else {
                        server.delete("pods", "default", &name);
                    }
                }
                for i in 0..per_wave {
                    let cpu = 100 + (rng.next() % 5) as i64 * 100;
                    let name = format!("w{waves_done}-{i:04}");
                    if i % 2 == 0 && small_live < small_cap {
                        server.create("pods", small_memory_pod(&name, cpu));
                        live.push_back((name, 0, true));
                        small_live += 1;
                    } else {
                        server.create("pods", wave_pod(&name, cpu, false));
                        live.push_back((name, cpu, false));
                        demand += cpu;
                    }
                }
                // Two pods that mostly need preemption: their victims terminate for 2 s.
                for i in 0..2 {
                    let name = format!("big{waves_done}-{i}");
                    server.create("pods", wave_pod(&name, 3500, true));
                    live.push_back((name, 3500, false));
                    demand += 3500;
                }
                tally.created += per_wave + 2;
                waves_done += 1;
            }
            if start.elapsed() < Duration::from_secs(fault_secs) {
                if now.duration_since(last_drop) >= Duration::from_secs(7) {
                    last_drop = now;
                    tally.watch_drops += server.drop_watches("pods", true);
                    tally.watch_drops += server.drop_watches("nodes", false);
                }
                if now.duration_since(last_compact) >= Duration::from_secs(15) {
                    last_compact = now;
                    server.compact();
                    tally.compactions += 1;
                }
                // Not while a takeover is timed: the server's two seconds away would count
                // as the new leader's (a short run, KUBESCHED_FAULT_SECS=30, put the restart
                // five seconds after the first kill).
                if !restarted
                    && pending_kill.is_none()
                    && start.elapsed() >= Duration::from_secs(fault_secs / 2 + 10)
                {
                    restarted = true;
                    server.restart(Duration::from_secs(2)).await;
                    tally.restarts += 1;
                }
                if pending_kill.is_none() && now.duration_since(last_kill) >= KILL_EVERY {
                    let holder = lease_holder(&server);
                    if let Some(i) = schedulers.iter().position(|s| s.identity == holder) {
                        let mut victim = schedulers.remove(i);
                        let _ = victim.child.kill();
                        let _ = victim.child.wait();
                        let killed_at = Instant::now();
                        last_kill = killed_at;
                        tally.kills += 1;
                        pending_kill = Some((holder, killed_at));
                        retired.push(victim);
                        schedulers.push(spawn(&dir, &kubeconfig, &format!("s{next_id}")));
                        next_id += 1;
                    }
                }
            }
            if let Some((old, at)) = &pending_kill {
                let holder = lease_holder(&server);
                if !holder.is_empty() && &holder != old {
                    tally.takeovers.push(at.elapsed());
                    pending_kill = None;
                } else if at.elapsed() > Duration::from_secs(60) {
                    panic!("nobody took over from {old} within 60 s");
                }
            }
            // A process that lost its lease exits (as upstream's does); start another.
            for i in (0..schedulers.len()).rev() {
                if let Some(status) = schedulers[i].child.try_wait().expect("waiting") {
                    assert_eq!(
                        status.code(),
                        Some(3),
                        "{} exited with {status}",
                        schedulers[i].identity
                    );
                    tally.leader_lost_exits += 1;
                    retired.push(schedulers.remove(i));
                    schedulers.push(spawn(&dir, &kubeconfig, &format!("s{next_id}")));
                    next_id += 1;
                }
            }
            if now.duration_since(last_sample) >= Duration::from_secs(1) {
                last_sample = now;
                for s in &mut schedulers {
                    if let Some(rss) = rss_bytes(s.child.id()) {
                        s.peak_rss = s.peak_rss.max(rss);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Calm: no more faults; every pod the server still has must end bound.
        server.clear_faults();
        let unbound = |s: &TestApiServer| {
            s.list("pods")
                .iter()
                .filter(|p| p.pointer("/spec/nodeName").and_then(|n| n.as_str()).is_none())
                .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        };
        let settled = server
            .wait_until(Duration::from_secs(120), |s| unbound(s).is_empty())
            .await;
        let left = unbound(&server);

        // The server's record of accepted bindings.
        let bindings = server.bindings();
        let mut seen = HashSet::new();
        let twice: Vec<&str> = bindings
            .iter()
            .filter(|b| !seen.insert(b.uid.clone()))
            .map(|b| b.pod.as_str())
            .collect();
        let over: Vec<_> = bindings.iter().filter(|b| b.overcommitted()).collect();
        let mut per_node: HashMap<&str, usize> = HashMap::new();
        for b in &bindings {
            *per_node.entry(b.node.as_str()).or_default() += 1;
        }
        let peak = |f: fn(&kubesched_tests::apiserver::BindingRecord) -> (i64, i64)| {
            bindings
                .iter()
                .map(|b| {
                    let (used, allocatable) = f(b);
                    used * 100 / allocatable.max(1)
                })
                .max()
                .unwrap_or(0)
        };
        let peak_cpu = peak(|b| (b.cpu_used, b.cpu_allocatable));
        let peak_memory = peak(|b| (b.memory_used, b.memory_allocatable));
        let peak_pods = peak(|b| (b.pods_used, b.pods_allocatable));
        let big_bound = bindings.iter().filter(|b| b.pod.starts_with("default/big")).count();
        // What the schedulers asked of the server: binds by answer, and preemption's
        // deletions (the test deletes its pods directly, never over HTTP).
        let requests = server.requests();
        let binds = |status: u16| {
            requests
                .iter()
                .filter(|r| r.method == "POST" && r.path.ends_with("/binding") && r.status == Some(status))
                .count()
        };
        let (binds_ok, binds_500, binds_409) = (binds(201), binds(500), binds(409));
        let victims = requests
            .iter()
            .filter(|r| r.method == "DELETE" && r.path.contains("/pods/"))
            .count();
        let peak_connections = server
            .connections()
            .peak
            .load(std::sync::atomic::Ordering::SeqCst);

        // Stop the survivors cleanly; read every process's stderr for panics.
        for s in &mut schedulers {
            if let Some(rss) = rss_bytes(s.child.id()) {
                s.peak_rss = s.peak_rss.max(rss);
            }
            let _ = Command::new("kill")
                .args(["-TERM", &s.child.id().to_string()])
                .status();
        }
        let mut exits = Vec::new();
        for s in &mut schedulers {
            let deadline = Instant::now() + Duration::from_secs(20);
            let code = loop {
                if let Some(st) = s.child.try_wait().expect("waiting") {
                    break st.code();
                }
                if Instant::now() > deadline {
                    let _ = s.child.kill();
                    break None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            exits.push((s.identity.clone(), code));
        }
        let all: Vec<&Scheduler> = schedulers.iter().chain(retired.iter()).collect();
        let panics: Vec<String> = all
            .iter()
            .filter_map(|s| {
                let text = std::fs::read_to_string(&s.stderr).unwrap_or_default();
                text.contains("panicked")
                    .then(|| format!("{}:\n{text}", s.identity))
            })
            .collect();
        let peak_rss = all.iter().map(|s| s.peak_rss).max().unwrap_or(0);
        let longest_takeover = tally.takeovers.iter().max().copied().unwrap_or_default();

        eprintln!(
            "fault run: {fault_secs} s, {} pods created in {WAVES} waves on {NODES} nodes, {} deleted by the test; \
             {} bindings accepted ({big_bound} of them pods that needed preemption; {} pods still unbound); \
             bind answers: {binds_ok} 201, {binds_500} 500, {binds_409} 409; {victims} victims deleted by preemption; \
             {} leader kills, takeovers {:?} (longest {:?}, bound {:?}); \
             {} exits after a lost lease; {} watches dropped, {} compactions, {} restarts; \
             injected: 5% 500 and 3% 409 on bind, slow binds/lists/patches; \
             peak node usage after a binding: CPU {peak_cpu}%, memory {peak_memory}%, pods {peak_pods}%; \
             peak RSS {} MiB; peak TCP connections {peak_connections}; processes {}",
            tally.created,
            tally.deleted,
            bindings.len(),
            left.len(),
            tally.kills,
            tally.takeovers,
            longest_takeover,
            LEASE_DURATION + RENEW_DEADLINE,
            tally.leader_lost_exits,
            tally.watch_drops,
            tally.compactions,
            tally.restarts,
            peak_rss >> 20,
            all.len(),
        );
        assert!(panics.is_empty(), "panics:\n{}", panics.join("\n"));
        assert!(twice.is_empty(), "bound twice: {twice:?}");
        assert!(over.is_empty(), "over allocatable: {:?}", &over[..over.len().min(5)]);
        assert!(settled, "{} pods never bound: {:?}", left.len(), &left[..left.len().min(10)]);
        assert!(tally.kills >= (fault_secs / KILL_EVERY.as_secs()).saturating_sub(1) as usize);
        // The faults happened and preemption ran with its victims terminating.
        assert!(binds_500 > 0 && binds_409 > 0, "no bind failed");
        assert!(tally.watch_drops > 0 && tally.compactions > 0 && tally.restarts == 1);
        assert!(victims > 0 && big_bound > 0, "preemption never ran");
        assert_eq!(tally.takeovers.len(), tally.kills, "every kill was followed by a takeover");
        assert!(
            longest_takeover <= LEASE_DURATION + RENEW_DEADLINE,
            "takeovers {:?}",
            tally.takeovers
        );
        assert!(peak_rss <= MAX_RSS_BYTES, "peak RSS {} MiB", peak_rss >> 20);
        for (identity, code) in exits {
            assert_eq!(code, Some(0), "{identity} did not stop cleanly");
        }
    })
    .await;
}

/// A small deterministic generator (the test needs no cryptographic quality).
struct Lcg(u64);

fn fastrand_like(seed: u64) -> Lcg {
    Lcg(seed)
}

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}
