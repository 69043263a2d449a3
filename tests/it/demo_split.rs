//! `hcp-flow demo --topology split` as a user runs it: the binary prints
//! each instance and a scrape configuration, and every instance shows only
//! what its side of ARO HCP reads (docs/design/08-scopes-and-scale-out.md §8.2): the service side
//! hops 1–3 and Maestro's feedback view, each management instance the
//! direct hops of its own management cluster.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::demo::{BIN, DemoProcess as Demo, Instance, lines};

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

fn read_banner(
    demo: &Demo,
    stdout: &std::sync::mpsc::Receiver<String>,
) -> crate::common::demo::Banner {
    crate::common::demo::read_banner(demo, stdout, LIMIT)
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
    let demo = Demo::new(child);
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
    let child = Command::new(BIN)
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
    let demo = Demo::new(child);
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
