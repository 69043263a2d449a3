//! `hcp-flow demo --topology split` as a user runs it: the binary prints
//! each instance and a scrape configuration, and every instance shows only
//! what its side of ARO HCP reads (docs/design.md §8.2): the service side
//! hops 1–3 and Maestro's feedback view, each management instance the
//! direct hops of its own management cluster.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_hcp-flow");

/// How long the demo may take to print, to be ready, and to show hops.
const LIMIT: Duration = Duration::from_secs(60);

const SERVICE_HOPS: [&str; 3] = ["rp_frontend", "clusters_service", "maestro_bundle"];
const MANAGEMENT_HOPS: [&str; 5] = [
    "manifestwork",
    "hosted_cluster",
    "control_plane",
    "managed_cluster",
    "node_pool",
];

/// The demo process, killed (by its pid) if the test ends before it exits.
struct Demo {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

#[derive(Debug)]
struct Instance {
    name: String,
    role: String,
    /// `http://host:port`
    base: String,
}

/// What the demo printed at startup.
struct Banner {
    instances: Vec<Instance>,
    scrape_yaml: String,
    scrape_path: std::path::PathBuf,
}

/// Every line of `stream`, read on a thread so the child never blocks on
/// a full pipe.
fn lines(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn drain(stream: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    let rx = lines(stream);
    std::thread::spawn(move || {
        for line in rx {
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

/// The banner up to its last line, within [`LIMIT`].
fn read_banner(demo: &Demo, stdout: &mpsc::Receiver<String>) -> Banner {
    let deadline = Instant::now() + LIMIT;
    let mut printed = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match stdout.recv_timeout(left) {
            Ok(line) => {
                let last = line.trim() == "Ctrl-C stops.";
                printed.push(line);
                if last {
                    break;
                }
            }
            Err(e) => panic!(
                "the demo's banner did not end ({e:?}):\n{}\n--- stderr ---\n{}",
                printed.join("\n"),
                demo.stderr()
            ),
        }
    }
    parse_banner(&printed)
}

fn parse_banner(printed: &[String]) -> Banner {
    let text = printed.join("\n");
    let mut instances: Vec<Instance> = Vec::new();
    let mut scrape = None;
    for (at, line) in printed.iter().enumerate() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("instance ") {
            // "instance NAME, role ROLE, reads …"
            let mut parts = rest.split(", ");
            let name = parts.next().unwrap().to_string();
            let role = parts
                .next()
                .and_then(|p| p.strip_prefix("role "))
                .unwrap_or_else(|| panic!("no role in `{line}`"))
                .to_string();
            instances.push(Instance {
                name,
                role,
                base: String::new(),
            });
        } else if let Some(url) = trimmed.split_whitespace().next()
            && let Some(base) = url.strip_suffix("/metrics")
        {
            let instance = instances
                .last_mut()
                .unwrap_or_else(|| panic!("a URL before any instance:\n{text}"));
            instance.base = base.to_string();
        } else if let Some(rest) = trimmed.strip_prefix("Prometheus scrape configuration (also in ")
        {
            // The YAML follows flush left, between blank lines, to paste.
            let yaml: Vec<&str> = printed[at + 1..]
                .iter()
                .skip_while(|l| l.is_empty())
                .take_while(|l| !l.is_empty())
                .map(String::as_str)
                .collect();
            let path = rest.trim_end_matches("):");
            scrape = Some((yaml.join("\n"), std::path::PathBuf::from(path)));
        }
    }
    assert!(
        instances.iter().all(|i| i.base.starts_with("http://")),
        "every instance has a metrics URL: {instances:?}\n{text}"
    );
    let (scrape_yaml, scrape_path) =
        scrape.unwrap_or_else(|| panic!("no scrape configuration printed:\n{text}"));
    Banner {
        instances,
        scrape_yaml,
        scrape_path,
    }
}

fn client() -> reqwest::blocking::Client {
    crate::common::init();
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Polls `probe` until it returns `Some`, for [`LIMIT`] at most.
fn wait_for<T>(what: &str, demo: &Demo, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            start.elapsed() < LIMIT,
            "gave up waiting for {what} after {LIMIT:?}\n--- stderr ---\n{}",
            demo.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A sample line's labels, unescaped.
fn labels(line: &str) -> Vec<(String, String)> {
    let Some(open) = line.find('{') else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut chars = line[open + 1..].chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let name = name.trim_start_matches(',').trim().to_string();
        if name.is_empty() || name.starts_with('}') || chars.next() != Some('"') {
            return out;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(escaped) = chars.next() {
                        value.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((name, value));
    }
}

fn label<'a>(labels: &'a [(String, String)], name: &str) -> &'a str {
    labels
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// `(hop, via)` of every `hcpflow_hop_phase` series.
fn hop_phases(metrics: &str) -> Vec<(String, String)> {
    metrics
        .lines()
        .filter(|l| l.starts_with("hcpflow_hop_phase{"))
        .map(|l| {
            let labels = labels(l);
            (
                label(&labels, "hop").to_string(),
                label(&labels, "via").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_split_demo_runs_the_service_side_and_each_management_cluster_apart() {
    let _machine = crate::common::load::share();
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--topology",
            "split",
            "--listen",
            "127.0.0.1:0",
            "--clusters",
            "6",
            "--speed",
            "60",
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let demo = Demo { child, stderr };
    let banner = read_banner(&demo, &stdout);

    // One service instance and one per management cluster of the ARO world.
    let service: Vec<&Instance> = banner
        .instances
        .iter()
        .filter(|i| i.role == "service")
        .collect();
    let management: Vec<&Instance> = banner
        .instances
        .iter()
        .filter(|i| i.role == "management")
        .collect();
    assert_eq!(service.len(), 1, "{:?}", banner.instances);
    assert_eq!(management.len(), 2, "{:?}", banner.instances);
    assert_eq!(
        service.len() + management.len(),
        banner.instances.len(),
        "{:?}",
        banner.instances
    );
    let bases: BTreeSet<&str> = banner.instances.iter().map(|i| i.base.as_str()).collect();
    assert_eq!(bases.len(), banner.instances.len(), "a port each");

    // The printed scrape configuration is YAML naming every instance, and
    // is the file the demo wrote.
    let scrape: serde_json::Value = serde_saphyr::from_str(&banner.scrape_yaml)
        .unwrap_or_else(|e| panic!("{e}:\n{}", banner.scrape_yaml));
    let jobs = scrape["scrape_configs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{}", banner.scrape_yaml);
    assert_eq!(jobs[0]["job_name"], "hcp-flow", "{}", banner.scrape_yaml);
    let mut targets = BTreeSet::new();
    for target in jobs[0]["static_configs"].as_array().unwrap() {
        let addr = target["targets"][0].as_str().unwrap();
        targets.insert(addr.to_string());
        let instance = banner
            .instances
            .iter()
            .find(|i| i.base == format!("http://{addr}"))
            .unwrap_or_else(|| panic!("target {addr} is no printed instance"));
        assert_eq!(target["labels"]["instance_role"], instance.role.as_str());
        assert_eq!(target["labels"]["instance_name"], instance.name.as_str());
    }
    let printed: BTreeSet<String> = banner
        .instances
        .iter()
        .map(|i| i.base.trim_start_matches("http://").to_string())
        .collect();
    assert_eq!(targets, printed, "{}", banner.scrape_yaml);
    let written = std::fs::read_to_string(&banner.scrape_path).unwrap();
    assert_eq!(written.trim_end(), banner.scrape_yaml.trim_end());

    let client = client();
    let get = |url: &str| -> Option<(u16, String)> {
        let response = client.get(url).send().ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().ok()?))
    };
    for instance in &banner.instances {
        wait_for(&format!("{} ready", instance.name), &demo, || {
            get(&format!("{}/readyz", instance.base)).filter(|(status, _)| *status == 200)
        });
    }
    // The ground truth is the world's: served once, by the service side.
    let truth = hcp_flow::demo::GROUND_TRUTH_PATH;
    assert_eq!(
        get(&format!("{}{truth}", service[0].base)).map(|(s, _)| s),
        Some(200)
    );
    for instance in &management {
        assert_eq!(
            get(&format!("{}{truth}", instance.base)).map(|(s, _)| s),
            Some(404),
            "{}",
            instance.name
        );
    }

    // The service side: hops 1–3 directly, the management hops only as
    // Maestro's feedback shows them.
    let metrics = wait_for("the service side's hops", &demo, || {
        let (_, body) = get(&format!("{}/metrics", service[0].base))?;
        let hops = hop_phases(&body);
        let hops: BTreeSet<&str> = hops.iter().map(|(hop, _)| hop.as_str()).collect();
        SERVICE_HOPS
            .iter()
            .all(|hop| hops.contains(hop))
            .then_some(body)
    });
    for (hop, via) in hop_phases(&metrics) {
        assert!(
            SERVICE_HOPS.contains(&hop.as_str()) || via == "maestro",
            "the service instance shows {hop} via {via}"
        );
    }

    // Each management instance: the direct management hops of its own
    // management cluster, nothing of the service side or the other one.
    for instance in &management {
        let metrics = wait_for(&format!("{}'s hops", instance.name), &demo, || {
            let (_, body) = get(&format!("{}/metrics", instance.base))?;
            let own = format!("mgmt_cluster=\"{}\"", instance.name);
            (!hop_phases(&body).is_empty() && body.contains(&own)).then_some(body)
        });
        for (hop, via) in hop_phases(&metrics) {
            assert!(
                MANAGEMENT_HOPS.contains(&hop.as_str()) && via == "direct",
                "{} shows {hop} via {via}",
                instance.name
            );
        }
        let mgmt_clusters: BTreeSet<String> = metrics
            .lines()
            .filter(|l| !l.starts_with('#'))
            .flat_map(labels)
            .filter(|(name, value)| name == "mgmt_cluster" && !value.is_empty())
            .map(|(_, value)| value)
            .collect();
        assert_eq!(
            mgmt_clusters,
            BTreeSet::from([instance.name.clone()]),
            "{} names only its own management cluster",
            instance.name
        );
    }

    // One signal stops every instance, and the demo's files go with it.
    let mut demo = demo;
    let status = Command::new("kill")
        .args(["-TERM", &demo.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The demo's grace is 2 s; allow for start-up noise of the machine.
    let start = Instant::now();
    let exited = loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the demo did not exit within 10 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exited.success(), "{exited:?}\n{}", demo.stderr());
    assert!(
        !banner.scrape_path.exists(),
        "{} is removed with the demo",
        banner.scrape_path.display()
    );
}

#[test]
fn split_is_refused_outside_the_aro_world_and_single_stays_the_default() {
    use clap::Parser;
    use clap::error::ErrorKind;
    use hcp_flow::cli::{Cli, Command as Cmd};
    use hcp_flow::demo::Topology;

    let cli = Cli::try_parse_from(["hcp-flow", "demo"])
        .unwrap()
        .checked()
        .unwrap();
    let Cmd::Demo(demo) = &cli.command else {
        panic!("{cli:?}")
    };
    assert_eq!(demo.topology, Topology::Single);
    for world in ["aro", "self-managed", "both"] {
        let checked =
            Cli::try_parse_from(["hcp-flow", "demo", "--topology", "split", "--world", world])
                .unwrap()
                .checked();
        match world {
            "aro" => assert!(checked.is_ok(), "{checked:?}"),
            _ => assert_eq!(
                checked.unwrap_err().kind(),
                ErrorKind::ArgumentConflict,
                "{world}"
            ),
        }
    }

    // The binary says so and exits as clap does, before starting anything.
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--topology",
            "split",
            "--world",
            "self-managed",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    let demo = Demo { child, stderr };
    let start = Instant::now();
    let mut demo = demo;
    let status = loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the demo started instead of refusing the flags"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(2), "{}", demo.stderr());
    let stderr = wait_for("the error message", &demo, || {
        let text = demo.stderr();
        text.contains("--topology split needs --world aro")
            .then_some(text)
    });
    assert!(stderr.starts_with("error:"), "{stderr}");
}
