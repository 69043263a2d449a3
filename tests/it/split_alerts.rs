//! Alerts over ARO HCP's production shape: `hcp-flow demo --topology split`
//! (the service-side exporter and one per management cluster, over one
//! simulated world with faults on, docs/design/08-scopes-and-scale-out.md §8.2) scraped by one real
//! Prometheus that loads every rule file of `alerts/`, as Prometheus or
//! Thanos evaluates the rules over the instances' union. From the world's
//! ground truth (`/api/v1/demo/ground-truth`, served by the service side)
//! each fault whose alert came due while the run watched must raise that
//! alert once and on time: at some instant a firing series of it for the
//! fault's cluster (its pool, its operation), first firing neither before
//! the fault took effect nor after its due time and a slack, and never two
//! at once for one
//! subject (cluster, hop, pool, operation, object). None is a miss; two at
//! once (one per instance, or one per view of the hop) is a duplicate,
//! which would notify twice. Across every cluster, faulty or not, no two
//! firing series may differ only in the labels that name the instance they
//! came from, nor fire for one subject at once. The run prints a table:
//! fault, alert, the instances that exposed the signal the alert reads,
//! the firing series and the instances they came from.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::common::demo::{self, Banner, DemoProcess};
use crate::common::load;
use crate::common::procs::{self, query, tempdir};
use hcp_flow::demo::GROUND_TRUTH_PATH;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

const SCRAPE: Duration = Duration::from_secs(1);
/// How late an alert may fire after its due time and still be judged at the
/// end: alert_fidelity's slack (two evaluations, a scrape, a slow poll, a
/// second of rounding, three of processing) and two seconds for the demo's
/// realistic upstream latency (a list of a hundred objects takes half a
/// second) across three exporters in one debug-built child.
const SLACK: Duration = Duration::from_secs(14);
/// How long the demo may take to print its banner and be ready and scraped.
const START: Duration = Duration::from_secs(90);
/// The longest the run watches for the faults below to come due.
const WATCH: Duration = Duration::from_secs(300);

/// The faults the run waits for, each judged at least once: every fault
/// whose alert reads a hop both sides show (the management instance reads
/// it, the service side through Maestro's feedback), and the service
/// side's and the management side's own.
const REQUIRED: [&str; 9] = [
    "hosted_cluster_degraded",
    "hosted_cluster_unavailable",
    "node_pool_stuck",
    "node_pool_never_reaches_ignition",
    "upgrade_stuck_partial",
    "manifestwork_agent_gone",
    "clusters_service_error",
    "bundle_never_applied",
    "managed_cluster_never_joins",
];

/// Labels that say which instance a series came from, not what it is
/// about: Prometheus' own target labels, a pod's in Kubernetes, and the
/// target labels the split demo's scrape configuration adds.
const INSTANCE_LABELS: [&str; 5] = ["instance", "job", "pod", "instance_role", "instance_name"];

/// What an alert is about: one firing series of each at a time. The rest
/// of its labels say how it is seen (`via`, `instance`), or what its
/// subject reads now (`phase`, `state`, `reason`, `code`), which may
/// change while it fires.
const SUBJECT_LABELS: [&str; 7] = [
    "alertname",
    "cluster_id",
    "hop",
    "operation",
    "node_pool",
    "object",
    "source",
];

/// The split demo, a Prometheus over it, and the machine's heavy share: an
/// alert is judged within seconds of its due time.
struct Run {
    demo: DemoProcess,
    banner: Banner,
    _prometheus: procs::Process,
    prometheus: String,
    client: reqwest::Client,
    log: std::path::PathBuf,
    _machine: load::Share,
}

impl Run {
    async fn start(clusters: usize, seed: u64) -> Run {
        crate::common::init();
        let machine = load::heavy();
        let dir = tempdir("split-alerts");
        let (clusters, seed) = (clusters.to_string(), seed.to_string());
        let (demo, stdout) = demo::spawn(
            &[
                "--topology",
                "split",
                "--listen",
                "127.0.0.1:0",
                "--clusters",
                &clusters,
                "--seed",
                &seed,
                "--speed",
                "60",
            ],
            "warn",
        );
        let banner = tokio::task::block_in_place(|| demo::read_banner(&demo, &stdout, START));
        let (prometheus_process, prometheus) = procs::prometheus("prometheus")
            .every(SCRAPE)
            .shipped_rules()
            .scrape_configs(&banner.scrape_yaml)
            .start(&dir);
        let run = Run {
            demo,
            banner,
            _prometheus: prometheus_process,
            prometheus,
            client: reqwest::Client::new(),
            log: dir.join("prometheus.log"),
            _machine: machine,
        };
        // ARO HCP's shape: one service side, one instance per management
        // cluster of the world (two).
        let roles: Vec<&str> = run
            .banner
            .instances
            .iter()
            .map(|i| i.role.as_str())
            .collect();
        assert_eq!(roles, ["service", "management", "management"], "{roles:?}");
        // Every instance ready and scraped: no alert can be judged before.
        let instances = run.banner.instances.len();
        let ready = procs::wait_for("every instance ready and scraped", START, async || {
            for instance in &run.banner.instances {
                let ready = run
                    .client
                    .get(format!("{}/readyz", instance.base))
                    .send()
                    .await
                    .ok()?;
                ready.status().is_success().then_some(())?;
            }
            let up = query(
                &run.client,
                &run.prometheus,
                "count(up{job=\"hcp-flow\"} == 1)",
            )
            .await
            .ok()?;
            let up = up[0]["value"][1].as_str()?.parse::<usize>().ok()?;
            (up == instances).then_some(())
        })
        .await;
        assert!(ready.is_some(), "never ready\n{}", run.logs());
        run
    }

    fn service(&self) -> &str {
        let service = self
            .banner
            .instances
            .iter()
            .find(|i| i.role == "service")
            .unwrap_or_else(|| panic!("no service instance: {:?}", self.banner.instances));
        &service.base
    }

    /// The name of the instance scraped at `addr` (a series' `instance`).
    fn name_of<'a>(&'a self, addr: &'a str) -> &'a str {
        self.banner
            .instances
            .iter()
            .find(|i| i.base.strip_prefix("http://") == Some(addr))
            .map_or(addr, |i| i.name.as_str())
    }

    fn logs(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- prometheus ---\n{}\n--- demo ---\n{}",
            lines[lines.len().saturating_sub(20)..].join("\n"),
            self.demo.stderr_tail(20)
        )
    }

    async fn ground_truth(&self) -> Value {
        self.client
            .get(format!("{}{GROUND_TRUTH_PATH}", self.service()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Every series of `expr` from `since` to now, each with the instants
    /// (Unix seconds) it had a sample at.
    async fn series(&self, expr: &str, since: Timestamp) -> Vec<Series> {
        let result = procs::query_range(
            &self.client,
            &self.prometheus,
            expr,
            since.as_second() as f64,
            Timestamp::now().as_second() as f64,
            1.0,
        )
        .await
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
        result
            .as_array()
            .unwrap()
            .iter()
            .map(|series| Series {
                labels: series["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect(),
                at: series["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|v| v[0].as_f64())
                    .map(|t| t as i64)
                    .collect(),
            })
            .collect()
    }

    /// The instances (`instance_name`) that exposed any series of
    /// `selector` for `cluster` since `since`.
    async fn exposed_by(&self, selector: &str, cluster: &str, since: Timestamp) -> String {
        let window = Timestamp::now().duration_since(since).as_secs().max(1);
        let selector = match selector.strip_suffix('}') {
            Some(open) => format!("{open},cluster_id=\"{cluster}\"}}"),
            None => format!("{selector}{{cluster_id=\"{cluster}\"}}"),
        };
        let expr = format!("group by (instance_name) (last_over_time({selector}[{window}s]))");
        let names: BTreeSet<String> = query(&self.client, &self.prometheus, &expr)
            .await
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["metric"]["instance_name"].as_str().map(str::to_string))
            .collect();
        if names.is_empty() {
            "-".to_string()
        } else {
            names.into_iter().collect::<Vec<_>>().join(" + ")
        }
    }
}

/// A firing series' [`SUBJECT_LABELS`] and their values.
type Subject<'a> = Vec<(&'static str, &'a str)>;

struct Series {
    labels: BTreeMap<String, String>,
    /// Unix seconds of each sample.
    at: Vec<i64>,
}

impl Series {
    fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }

    /// What it is about ([`SUBJECT_LABELS`]).
    fn subject(&self) -> Subject<'_> {
        SUBJECT_LABELS
            .iter()
            .map(|l| (*l, self.label(l).unwrap_or_default()))
            .collect()
    }

    /// Its labels without those naming the instance it came from.
    fn what(&self) -> BTreeMap<&str, &str> {
        self.labels
            .iter()
            .filter(|(k, _)| !INSTANCE_LABELS.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

/// The most series of one subject firing at one instant, over `series`.
fn most_at_once(series: &[&Series]) -> usize {
    let mut at_once: BTreeMap<(Subject<'_>, i64), usize> = BTreeMap::new();
    for s in series {
        for t in &s.at {
            *at_once.entry((s.subject(), *t)).or_default() += 1;
        }
    }
    at_once.values().copied().max().unwrap_or(0)
}

fn parse(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

/// A fault the run judges, from its cluster's last ground-truth record.
struct Judged {
    fault: String,
    /// When the fault took effect in the world.
    fault_at: Timestamp,
    /// The latest its alert may first fire: due, and [`SLACK`].
    deadline: Timestamp,
    alert: String,
    per_cluster: bool,
    operation: Option<String>,
    pool: Option<String>,
}

/// A fault is judged when it took effect while Prometheus watched (before,
/// the exporters may have seen it only at their first list, with an
/// observed time), its alert came due a [`SLACK`] before `end`, and its
/// cluster was still served then.
fn judged(
    item: &Value,
    last_served: Timestamp,
    since: Timestamp,
    end: Timestamp,
) -> Option<Judged> {
    let fault_at = parse(&item["fault_at"])?;
    let due = parse(&item["alert_due_at"])?;
    let deadline = due
        .checked_add(SignedDuration::try_from(SLACK).ok()?)
        .ok()?;
    let alive = last_served >= deadline.checked_sub(SignedDuration::from_secs(2)).ok()?;
    (fault_at >= since && deadline <= end && alive).then(|| Judged {
        fault: item["fault"].as_str().unwrap_or_default().to_string(),
        fault_at,
        deadline,
        alert: item["expected_alert"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        per_cluster: item["per_cluster"].as_bool().unwrap_or(true),
        operation: item["operation"].as_str().map(str::to_string),
        pool: item["node_pool"].as_str().map(str::to_string),
    })
}

/// The series the alert reads for a fault, to tell which instances
/// exposed it.
fn signal(j: &Judged) -> &'static str {
    match (j.alert.as_str(), j.operation.as_deref()) {
        ("HCPHopFailed", _) => "hcpflow_hop_failure_info",
        ("HCPMaestroStatusNotUpdated", _) => {
            "hcpflow_hop_status_updated_timestamp_seconds{hop=\"maestro_bundle\"}"
        }
        ("HCPHostedClusterDegraded", _) => {
            "hcpflow_hop_condition{hop=\"hosted_cluster\",condition=\"Degraded\",status=\"true\"}"
        }
        ("HCPHostedClusterUnavailable", _) => "hcpflow_hop_phase{hop=\"hosted_cluster\"}",
        ("HCPNodePoolBelowDesired", _) => "hcpflow_node_pool_replicas",
        ("HCPManagedClusterNotJoined", _) => "hcpflow_hop_phase{hop=\"managed_cluster\"}",
        ("HCPOperationFailed", _) => "hcpflow_operation_failed_timestamp_seconds",
        ("HCPCreationNotHandedOver", _) => "hcpflow_hop_phase{hop=\"rp_frontend\"}",
        ("HCPOperationStuckAtHop", Some("create" | "delete") | None) => {
            "hcpflow_hop_phase{phase=~\"pending|progressing|unknown|deleting\"}"
        }
        _ => "hcpflow_operation_waiting_since_timestamp_seconds",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_fault_raises_its_alert_once_over_the_split_instances() {
    let run = Run::start(80, 11).await;
    let since = Timestamp::now();

    // Watch the ground truth until every required fault has been judgeable
    // (its alert due a slack ago), for [`WATCH`] at most.
    let mut seen: BTreeMap<String, (Value, Timestamp)> = BTreeMap::new();
    let started = Instant::now();
    loop {
        let truth = run.ground_truth().await;
        let at = parse(&truth["at"]).unwrap();
        for item in truth["items"].as_array().unwrap() {
            let id = item["cluster_id"].as_str().unwrap().to_string();
            seen.insert(id, (item.clone(), at));
        }
        let now = Timestamp::now();
        let judgeable: BTreeSet<String> = seen
            .values()
            .filter_map(|(item, last)| judged(item, *last, since, now))
            .map(|j| j.fault)
            .collect();
        if REQUIRED.iter().all(|f| judgeable.contains(*f)) || started.elapsed() >= WATCH {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let end = Timestamp::now();
    let fired = run.series("ALERTS{alertstate=\"firing\"}", since).await;

    // Each judged fault: the series of its alert for its cluster (its pool,
    // its operation), how many at once at most, from which instances.
    let mut table = "| fault | cluster | alert | signal exposed by | firing series (max at once / distinct) | fired by |\n|---|---|---|---|---|---|\n".to_string();
    let mut wrong = Vec::new();
    let mut judged_faults: BTreeSet<String> = BTreeSet::new();
    for (id, (item, last)) in &seen {
        let Some(j) = judged(item, *last, since, end) else {
            continue;
        };
        judged_faults.insert(j.fault.clone());
        let names_it = |s: &Series| {
            if s.label("alertname") != Some(j.alert.as_str()) {
                return false;
            }
            if !j.per_cluster {
                // About a source, not a cluster: the source the fault's
                // unknown value came from.
                let source = if j.fault == "unknown_provisioning_state" {
                    "rp_frontend"
                } else {
                    "clusters_service"
                };
                return s.label("source") == Some(source);
            }
            if s.label("cluster_id") != Some(id.as_str()) {
                return false;
            }
            // A stuck or failed operation's alert names the operation and
            // the pool the fault hit.
            !matches!(
                j.alert.as_str(),
                "HCPOperationStuckAtHop" | "HCPOperationFailed"
            ) || (j
                .operation
                .as_deref()
                .is_none_or(|o| s.label("operation") == Some(o))
                && j.pool.as_deref().is_none_or(|p| {
                    s.label("node_pool")
                        .is_some_and(|n| hcp_flow::model::same_pool(p, n))
                }))
        };
        let matching: Vec<&Series> = fired.iter().filter(|s| names_it(s)).collect();
        let most = most_at_once(&matching);
        let fired_by: BTreeSet<&str> = matching
            .iter()
            .filter_map(|s| s.label("instance"))
            .map(|addr| run.name_of(addr))
            .collect();
        let exposed = if j.per_cluster {
            run.exposed_by(signal(&j), id, since).await
        } else {
            "service".to_string()
        };
        let row = format!(
            "| {} | {id} | {} | {exposed} | {most} / {} | {} |\n",
            j.fault,
            j.alert,
            matching.len(),
            fired_by.into_iter().collect::<Vec<_>>().join(" + ")
        );
        table.push_str(&row);
        // On time, as alert_fidelity judges one instance: not before the
        // fault took effect (a second's rounding), not after its deadline.
        // `first` is the first step of a range query sampled every second:
        // an episode that began at its deadline shows at the next whole
        // second.
        let first = matching.iter().filter_map(|s| s.at.iter().min()).min();
        if let Some(&first) = first {
            let early = j.fault_at.as_second() - 1;
            let late = j.deadline.as_second() + 1;
            if first < early || first > late {
                wrong.push(format!(
                    "{} on {id}: {} first fired at {} ({}), the fault took effect at {} and its alert was due by {}",
                    j.fault,
                    j.alert,
                    Timestamp::from_second(first).unwrap_or(Timestamp::UNIX_EPOCH),
                    if first < early { "early" } else { "late" },
                    j.fault_at,
                    j.deadline
                ));
            }
        }
        if most != 1 {
            let what: Vec<String> = matching
                .iter()
                .map(|s| format!("    {:?}", s.labels))
                .collect();
            wrong.push(format!(
                "{} on {id}: {} {} at once of one subject ({})\n{}",
                j.fault,
                j.alert,
                most,
                if most == 0 { "a miss" } else { "a duplicate" },
                what.join("\n")
            ));
        }
    }

    // Across every cluster, alerted or not: no alert once per instance
    // (series that differ only in the instance's labels), and no subject
    // firing twice at once (one per instance's view of it).
    let per_cluster: Vec<&Series> = fired
        .iter()
        .filter(|s| s.label("cluster_id").is_some())
        .collect();
    let mut by_what: BTreeMap<BTreeMap<&str, &str>, Vec<&Series>> = BTreeMap::new();
    for s in &per_cluster {
        by_what.entry(s.what()).or_default().push(s);
    }
    let mut per_instance: Vec<String> = by_what
        .iter()
        .filter(|(_, series)| series.len() > 1)
        .map(|(what, series)| {
            let from: Vec<&str> = series
                .iter()
                .map(|s| run.name_of(s.label("instance").unwrap_or("?")))
                .collect();
            format!("{what:?} from {from:?}")
        })
        .collect();
    let mut by_subject: BTreeMap<Subject<'_>, Vec<&Series>> = BTreeMap::new();
    for s in &per_cluster {
        by_subject.entry(s.subject()).or_default().push(s);
    }
    per_instance.extend(
        by_subject
            .iter()
            .filter(|(_, series)| most_at_once(series) > 1)
            .map(|(subject, series)| {
                let seen: Vec<String> = series
                    .iter()
                    .map(|s| {
                        format!(
                            "{} via {}",
                            run.name_of(s.label("instance").unwrap_or("?")),
                            s.label("via").unwrap_or("?")
                        )
                    })
                    .collect();
                format!("{subject:?} twice at once: {seen:?}")
            }),
    );

    eprintln!(
        "split alerts over {:.0}s, {} instances ({}), {} clusters seen, {} firing series:\n{table}",
        end.duration_since(since).as_secs_f64(),
        run.banner.instances.len(),
        run.banner
            .instances
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        seen.len(),
        fired.len(),
    );
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|f| !judged_faults.contains(*f))
        .collect();
    assert!(
        missing.is_empty(),
        "faults never judged in {WATCH:?} (none came due while the run watched): {missing:?}\n{table}"
    );
    assert!(
        wrong.is_empty(),
        "faults whose alert did not fire exactly once over the split:\n{}\n{table}\n{}",
        wrong.join("\n"),
        run.logs()
    );
    assert!(
        per_instance.is_empty(),
        "alerts firing once per instance or per view over the split:\n  {}",
        per_instance.join("\n  ")
    );
}
