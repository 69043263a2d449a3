//! `hcp-flow diagnose TARGET`: where is this creation stuck, since when, and
//! why — the on-call walk of every hop, done live (docs/design/12-interfaces.md §12.4).
//!
//! Live, it starts the exporter's own sources with `serve`'s configuration
//! (files, credentials, kubeconfig contexts) and its own model, waits until
//! every source has listed once, finds the target and judges it with the
//! same verdict the JSON and the web UI show. `--from URL` asks a running
//! exporter instead. Either way the result is one [`Report`], rendered by
//! [`render`], and its exit code says the verdict to a script.

pub mod render;
pub mod scope;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::api::timeline_json;
use crate::app::{AppError, Exporter};
use crate::config::{Config, KubeMode};
use crate::model::{Hop, OperationKind, Status};
use crate::sources::health::SourceStatus;
use scope::{Known, Target};

#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    #[error("the exporter's sources could not start")]
    Start(#[source] AppError),
    #[error("cannot ask the exporter at {url}")]
    From {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the exporter at {url} answered {status}: {body}")]
    FromStatus {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the exporter at {url} sent JSON diagnose cannot read")]
    FromBody {
        url: String,
        #[source]
        source: reqwest::Error,
    },
}

/// A source that could not be read, and the hops it alone shows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unreadable {
    pub source: String,
    pub hops: Vec<Hop>,
    /// Why: its last error, or that it never listed within the wait.
    pub error: String,
}

/// What diagnose found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub target: String,
    /// `live` or the exporter's URL.
    pub read_from: String,
    pub checked_at: Timestamp,
    /// The target's timeline as `/api/v1/clusters/{id}` serves it (with its
    /// verdict); None when no source shows it.
    pub timeline: Option<Value>,
    /// Budgets per hop, in seconds, from the configuration the exporter uses.
    pub budgets: BTreeMap<Hop, f64>,
    pub unreadable: Vec<Unreadable>,
}

/// What the exit code says (docs/design/12-interfaces.md §12.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ready = 0,
    InProgress = 1,
    Stuck = 2,
    Failed = 3,
    Unreadable = 4,
    /// No operation in flight and a hop regressed since the last ended.
    Degraded = 5,
}

impl Report {
    pub fn status(&self) -> Option<Status> {
        let status = self
            .timeline
            .as_ref()?
            .pointer("/verdict/status")?
            .as_str()?;
        Status::parse(status)
    }

    /// A failure seen is certain whatever else could not be read; any other
    /// verdict may be wrong while a source is unreadable (the hop it hides
    /// could be the stuck one), so that says 4; a target no source shows is
    /// 4 too.
    pub fn outcome(&self) -> Outcome {
        match self.status() {
            Some(Status::Failed) => Outcome::Failed,
            _ if !self.unreadable.is_empty() => Outcome::Unreadable,
            None => Outcome::Unreadable,
            Some(Status::Stuck) => Outcome::Stuck,
            Some(Status::Degraded) => Outcome::Degraded,
            Some(Status::AtRisk | Status::InProgress | Status::Deleted) => Outcome::InProgress,
            Some(Status::Ready) => Outcome::Ready,
        }
    }

    pub fn exit_code(&self) -> u8 {
        self.outcome() as u8
    }

    /// Whether `diagnose --watch` stops at this report: the verdict says the
    /// operation ended — ready, failed, degraded (nothing in flight holds
    /// the hop that regressed) or deleted. Stuck, at risk, in progress and
    /// unreadable keep watching: each may still change.
    pub fn watch_ends(&self) -> bool {
        matches!(
            self.outcome(),
            Outcome::Ready | Outcome::Failed | Outcome::Degraded
        ) || self.status() == Some(Status::Deleted)
    }

    /// The one-line answer.
    pub fn verdict_line(&self) -> String {
        match (&self.timeline, self.status()) {
            (Some(t), Some(_)) => {
                let reason = t
                    .pointer("/verdict/reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if self.unreadable.is_empty() || self.outcome() == Outcome::Failed {
                    reason.to_string()
                } else {
                    let sources: Vec<&str> =
                        self.unreadable.iter().map(|u| u.source.as_str()).collect();
                    format!(
                        "{reason} — but {} could not be read, so a hop may be missing",
                        sources.join(", ")
                    )
                }
            }
            _ if self.unreadable.is_empty() => format!(
                "{} is not known to any source: check the id (an ARM resource id, a Clusters Service id, or a HostedCluster namespace/name)",
                self.target
            ),
            _ => format!(
                "{} was not found, and {} could not be read",
                self.target,
                self.unreadable
                    .iter()
                    .map(|u| u.source.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The hops a source alone shows (Maestro also carries the management hops
/// in its bundles' status feedback, so those are not lost with a kube source
/// when Maestro is read).
fn hops_of(source: &str) -> Vec<Hop> {
    match source {
        "rp_frontend" => vec![Hop::RpFrontend],
        "clusters_service" => vec![Hop::ClustersService],
        "maestro" => vec![Hop::MaestroBundle],
        _ => vec![
            Hop::Manifestwork,
            Hop::HostedCluster,
            Hop::ControlPlane,
            Hop::ManagedCluster,
            Hop::NodePool,
        ],
    }
}

/// The sources that could not be read and matter to `mgmt_cluster`'s
/// creation: every service source, and the kube source of its management
/// cluster (all of them while it is unknown).
fn unreadable(sources: &[SourceStatus], mgmt_cluster: Option<&str>) -> Vec<Unreadable> {
    sources
        .iter()
        .filter(|s| !(s.synced && s.up))
        .filter(|s| match (s.source.strip_prefix("kube/"), mgmt_cluster) {
            (Some(name), Some(mgmt)) if !mgmt.is_empty() => name == mgmt,
            _ => true,
        })
        .map(|s| Unreadable {
            source: s.source.clone(),
            hops: hops_of(&s.source),
            error: match &s.last_error {
                Some(e) => format!("{} ({})", e.message, e.kind),
                None if s.restored => {
                    "serving what the last run read of it; not listed since the restart".to_string()
                }
                None if !s.synced => format!(
                    "never listed within the wait ({} pending)",
                    s.pending.join(", ")
                ),
                None => "down".to_string(),
            },
        })
        .collect()
}

/// How long a live walk keeps retrying a source that fails while every
/// other source has listed.
const GIVE_UP_ON_FAILING: Duration = Duration::from_secs(8);

/// The walk itself: `serve`'s sources with `config`, narrowed to the target
/// (see [`scope`]), run until a run reveals nothing its configuration did
/// not use. `wait` bounds the whole walk.
pub async fn live(config: &Config, target: &str, wait: Duration) -> Result<Report, DiagnoseError> {
    let deadline = tokio::time::Instant::now() + wait;
    let parsed = Target::parse(target);
    let mut known = Known::of(&parsed);
    let mut run = None;
    for _ in 0..MAX_RUNS {
        if let Some(Run { learned, .. }) = &run
            && !known.learn(learned.clone())
        {
            break;
        }
        locate(config, &mut known).await;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let this = run_sources(&scope::scoped(config, &known), target, &known, left).await?;
        tracing::debug!(?known, learned = ?this.learned, found = this.report.timeline.is_some(), "diagnose: one narrowed run");
        run = Some(this);
    }
    let mut run = match run {
        Some(run) => run,
        None => run_sources(&scope::scoped(config, &known), target, &known, wait).await?,
    };
    // A target no narrowed read finds (a self-managed cluster named by its
    // spec.clusterID) may still be on a management cluster: a bare id that
    // Clusters Service does not know is looked for in every management
    // cluster's HostedClusters, the one read a walk makes that grows with
    // the fleet. An ARM id the RP does not have, or a namespace/name no
    // management cluster has, is not found: those reads were exact.
    if run.report.timeline.is_none()
        && known.mgmt_cluster.is_none()
        && matches!(parsed, Target::ClusterId(_))
        && !config.sources.kube.is_empty()
    {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let mut management_side = config.clone();
        management_side.shard = Default::default();
        management_side.sources.rp_frontend = None;
        management_side.sources.clusters_service = None;
        management_side.sources.maestro = None;
        run = run_sources(&management_side, target, &Known::default(), left).await?;
    }
    Ok(run.report)
}

/// Runs of the sources one walk may need: the RP and Clusters Service to
/// learn the ids, the management side to read them, one more for a
/// HostedCluster named by namespace/name whose services come last.
const MAX_RUNS: usize = 4;

/// What one run of the sources answered, and the identities it revealed.
struct Run {
    report: Report,
    learned: Known,
}

/// Where an ARO HCP creation's HostedCluster is: its name, and so its
/// control plane's namespace, is not the cluster's, so one list by the id
/// label asks (the cheatsheet's `oc get hc -A -l api.openshift.com/id=…`).
/// A HostedCluster named by the target is looked for on every management
/// cluster until one has it. A failed list leaves the walk without the
/// control plane's hops, and the run then reports the source unreadable.
async fn locate(config: &Config, known: &mut Known) {
    use crate::sources::kube::locate_hosted_clusters;
    let kube = &config.sources.kube;
    match (
        &known.mgmt_cluster,
        &known.hosted_cluster,
        &known.cluster_id,
    ) {
        (Some(mgmt), None, Some(id)) => {
            let Some(cfg) = kube
                .iter()
                .find(|k| &k.mgmt_cluster == mgmt && k.mode == KubeMode::Aro)
            else {
                return;
            };
            let labels = format!("{}={id}", cfg.manifestwork_label);
            match locate_hosted_clusters(cfg, None, Some(&labels), None).await {
                Ok(found) => {
                    known.hosted_cluster = found.into_iter().next().map(|h| (h.namespace, h.name))
                }
                Err(error) => {
                    tracing::debug!(error = %crate::sources::health::cause_chain(&error), "locating the HostedCluster failed")
                }
            }
        }
        (None, Some((namespace, name)), _) => {
            let fields = format!("metadata.name={name}");
            for cfg in kube {
                let Ok(found) =
                    locate_hosted_clusters(cfg, Some(namespace), None, Some(&fields)).await
                else {
                    continue;
                };
                if let Some(hc) = found.into_iter().next() {
                    known.mgmt_cluster = Some(cfg.mgmt_cluster.clone());
                    if cfg.mode == KubeMode::Aro {
                        known.cluster_id = hc.labels.get(&cfg.manifestwork_label).cloned();
                    }
                    return;
                }
            }
        }
        _ => {}
    }
}

/// One run: start the sources of `config`, wait until every one has listed
/// once (or failed for a while, or `wait` is over), and judge the target.
async fn run_sources(
    config: &Config,
    target: &str,
    known: &Known,
    wait: Duration,
) -> Result<Run, DiagnoseError> {
    let exporter = Exporter::start_for_diagnosis(config).map_err(DiagnoseError::Start)?;
    let store = exporter.store.clone();
    let started = tokio::time::Instant::now();
    let deadline = started + wait;
    loop {
        let sources = store.source_status();
        let now = tokio::time::Instant::now();
        // Every source listed: the answer is complete. Every source listed
        // or failing, for a few retries' worth: waiting longer for one that
        // is down only delays the answer, which will say it is down.
        let settled = sources.iter().all(|s| s.synced || !s.failing.is_empty());
        if sources.iter().all(|s| s.synced)
            || (settled && now >= started + GIVE_UP_ON_FAILING.min(wait))
            || now >= deadline
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let judge = store.judge();
    let self_managed = |mgmt: &str| {
        config
            .sources
            .kube
            .iter()
            .any(|k| k.mgmt_cluster == mgmt && k.mode == KubeMode::SelfManaged)
    };
    // The cluster id, the ARM resource id or the HostedCluster ns/name:
    // what the JSON route resolves.
    let found = store.resolve(&known.key(target), |t| {
        let id = &t.identity;
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let learned = Known {
            resource_id: some(&id.resource_id),
            resource_group: None,
            cluster_id: (!crate::model::is_provisional(&t.cluster_id))
                .then(|| t.cluster_id.clone()),
            mgmt_cluster: some(&id.mgmt_cluster),
            // In self-managed mode the identity's name is the HostedCluster's.
            hosted_cluster: (self_managed(&id.mgmt_cluster)
                && !id.namespace.is_empty()
                && !id.name.is_empty())
            .then(|| (id.namespace.clone(), id.name.clone())),
        };
        (learned, serde_json::to_value(timeline_json(t, &judge)))
    });
    exporter.stop();
    let (learned, timeline) = match found {
        Some((learned, Ok(json))) => (learned, Some(json)),
        _ => (Known::default(), None),
    };
    let sources = store.source_status();
    let operation = judged_operation(timeline.as_ref());
    Ok(Run {
        report: Report {
            target: target.to_string(),
            read_from: "live".to_string(),
            checked_at: judge.now,
            timeline,
            budgets: judge
                .budgets
                .of(operation)
                .iter()
                .map(|(hop, d)| (hop, d.as_secs_f64()))
                .collect(),
            unreadable: unreadable(&sources, learned.mgmt_cluster.as_deref()),
        },
        learned,
    })
}

/// Ask a running exporter: its timeline of the target (with the verdict it
/// judged), its sources' health, and the budgets it publishes.
pub async fn from_exporter(base: &url::Url, target: &str) -> Result<Report, DiagnoseError> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|source| DiagnoseError::From {
            url: base.to_string(),
            source,
        })?;
    let base_str = base.as_str().trim_end_matches('/');
    let get = |path: String| {
        let client = client.clone();
        async move {
            let url = format!("{base_str}{path}");
            let response = client
                .get(&url)
                .send()
                .await
                .map_err(|source| DiagnoseError::From {
                    url: url.clone(),
                    source,
                })?;
            Ok::<_, DiagnoseError>((url, response))
        }
    };
    // The path takes ids with their slashes as they are (docs/design/12-interfaces.md §12.2).
    let (url, response) = get(format!(
        "/api/v1/clusters/{}",
        target.trim_start_matches('/')
    ))
    .await?;
    let timeline: Option<Value> = match response.status().as_u16() {
        200 => Some(
            response
                .json()
                .await
                .map_err(|source| DiagnoseError::FromBody { url, source })?,
        ),
        404 => None,
        status => {
            let body = response.text().await.unwrap_or_default();
            return Err(DiagnoseError::FromStatus {
                url,
                status,
                body: body.chars().take(200).collect(),
            });
        }
    };
    // /readyz answers 503 while a source is not synced: its body is what we want.
    let (url, response) = get("/readyz".to_string()).await?;
    let readyz: Value = response
        .json()
        .await
        .map_err(|source| DiagnoseError::FromBody { url, source })?;
    let sources: Vec<SourceStatus> = readyz["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(source_status_of)
        .collect();
    let (_, response) = get("/metrics".to_string()).await?;
    let metrics = response.text().await.unwrap_or_default();
    let mgmt = timeline
        .as_ref()
        .and_then(|t| t["mgmt_cluster"].as_str())
        .map(str::to_string);
    let operation = judged_operation(timeline.as_ref());
    Ok(Report {
        target: target.to_string(),
        read_from: base.to_string(),
        checked_at: Timestamp::now(),
        timeline,
        budgets: budgets_in(&metrics, operation),
        unreadable: unreadable(&sources, mgmt.as_deref()),
    })
}

/// The fields of `/readyz`'s source entries diagnose reads.
fn source_status_of(v: &Value) -> Option<SourceStatus> {
    let strings = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    Some(SourceStatus {
        source: v["source"].as_str()?.to_string(),
        synced: v["synced"].as_bool()?,
        // Exporters before restored readings do not say: not restored.
        restored: v["restored"].as_bool().unwrap_or(false),
        up: v["up"].as_bool()?,
        pending: strings("pending"),
        failing: strings("failing"),
        disabled: Vec::new(),
        down_since: v["down_since"].as_str().and_then(|s| s.parse().ok()),
        last_error: match &v["last_error"] {
            Value::Object(e) => Some(crate::sources::health::LastError {
                kind: e.get("kind")?.as_str()?.to_string(),
                at: e.get("at")?.as_str()?.parse().ok()?,
                message: e.get("message")?.as_str()?.to_string(),
            }),
            _ => None,
        },
    })
}

/// `hcpflow_hop_budget_seconds{operation="<operation>",hop="…"} N` lines of
/// an exposition: the budgets of one operation kind.
fn budgets_in(exposition: &str, operation: OperationKind) -> BTreeMap<Hop, f64> {
    let prefix = format!(
        "hcpflow_hop_budget_seconds{{operation=\"{}\",hop=\"",
        operation.as_str()
    );
    exposition
        .lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .filter_map(|rest| {
            let (hop, rest) = rest.split_once('"')?;
            let value = rest.rsplit(' ').next()?.parse().ok()?;
            Some((Hop::parse(hop)?, value))
        })
        .collect()
}

/// The operation a served timeline's verdict judged (creation when it says
/// none: a degraded cluster is judged by creation's budgets).
fn judged_operation(timeline: Option<&Value>) -> OperationKind {
    timeline
        .and_then(|t| t.pointer("/verdict/operation"))
        .and_then(Value::as_str)
        .and_then(OperationKind::parse)
        .unwrap_or(OperationKind::Create)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_read_from_the_exposition() {
        let text = "# TYPE hcpflow_hop_budget_seconds gauge\n\
                    hcpflow_hop_budget_seconds{operation=\"create\",hop=\"maestro_bundle\"} 10.0\n\
                    hcpflow_hop_budget_seconds{operation=\"create\",hop=\"node_pool\"} 30\n\
                    hcpflow_hop_budget_seconds{operation=\"delete\",hop=\"node_pool\"} 20\n\
                    hcpflow_hop_budget_seconds{operation=\"create\",hop=\"nonsense\"} 1\n";
        let b = budgets_in(text, OperationKind::Create);
        assert_eq!(b.get(&Hop::MaestroBundle), Some(&10.0));
        assert_eq!(b.get(&Hop::NodePool), Some(&30.0));
        assert_eq!(b.len(), 2);
        let d = budgets_in(text, OperationKind::Delete);
        assert_eq!(d.get(&Hop::NodePool), Some(&20.0));
        assert_eq!(d.len(), 1);
    }

    fn report(status: Option<&str>, unreadable: bool) -> Report {
        Report {
            target: "c1".into(),
            read_from: "live".into(),
            checked_at: Timestamp::UNIX_EPOCH,
            timeline: status.map(|s| serde_json::json!({"verdict": {"status": s, "reason": "r"}})),
            budgets: BTreeMap::new(),
            unreadable: if unreadable {
                vec![Unreadable {
                    source: "maestro".into(),
                    hops: vec![Hop::MaestroBundle],
                    error: "down".into(),
                }]
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn exit_codes_follow_the_verdict_and_what_could_not_be_read() {
        let cases = [
            (Some("ready"), false, 0),
            (Some("in_progress"), false, 1),
            (Some("at_risk"), false, 1),
            (Some("deleted"), false, 1),
            (Some("stuck"), false, 2),
            (Some("failed"), false, 3),
            (Some("failed"), true, 3),
            (Some("stuck"), true, 4),
            (Some("ready"), true, 4),
            (None, false, 4),
            (None, true, 4),
        ];
        for (status, unreadable, want) in cases {
            assert_eq!(
                report(status, unreadable).exit_code(),
                want,
                "{status:?} unreadable={unreadable}"
            );
        }
    }

    /// A cluster whose creation completed and whose day-2 pool never gets
    /// its nodes: the table and the Markdown name the pool's own verdict,
    /// from the timeline JSON the exporter serves; the exit code still
    /// judges the cluster's own operations.
    #[test]
    fn day_two_operations_in_flight_are_listed_with_their_own_verdict() {
        use crate::model::testing::{batch, obs};
        use crate::model::{Fleet, ModelConfig, Phase};
        let at = |m: i64| Timestamp::from_second(1_800_000_000 + m * 60).unwrap();
        let mut fleet = Fleet::new(ModelConfig::default());
        fleet.apply(
            batch(
                false,
                at(0),
                vec![
                    obs("c1", Hop::HostedCluster)
                        .state("Available", Phase::Ready)
                        .created(at(0))
                        .since(at(9)),
                ],
            ),
            at(9),
        );
        fleet.apply(
            batch(
                false,
                at(30),
                vec![
                    obs("c1", Hop::NodePool)
                        .object("np-2")
                        .state("ignitionNotReached", Phase::Progressing)
                        .created(at(30))
                        .since(at(30))
                        .replicas(2, 0, 0),
                ],
            ),
            at(30),
        );
        let judge = crate::api::Judge {
            rp_in_scope: false,
            budgets: Default::default(),
            p95: Default::default(),
            now: at(70),
        };
        let timeline = fleet.get("c1").unwrap();
        let report = Report {
            target: "c1".into(),
            read_from: "live".into(),
            checked_at: at(70),
            timeline: Some(serde_json::to_value(timeline_json(timeline, &judge)).unwrap()),
            budgets: BTreeMap::new(),
            unreadable: Vec::new(),
        };
        let table = render::render(&report, render::Output::Table);
        assert!(
            table.contains("node pool and upgrade operations in flight:"),
            "{table}"
        );
        assert!(
            table.contains("stuck       node_pool_create of node pool np-2 stuck at node_pool for 40m (budget 30m)"),
            "{table}"
        );
        let markdown = render::render(&report, render::Output::Markdown);
        assert!(
            markdown.contains("- **stuck**: node_pool_create of node pool np-2 stuck at node_pool"),
            "{markdown}"
        );
        // The creation that ended is the history's first row, with its hop.
        assert!(markdown.contains("\n## History\n"), "{markdown}");
        assert!(
            markdown.contains(
                "| create | 2027-01-15T08:00:00Z | 9m | succeeded | good | hosted_cluster 9m |"
            ),
            "{markdown}"
        );
        // The cluster's verdict is the worst of its operations in flight
        // (docs/design/15-operations.md §15.7): the pool's stuck creation, exit code 2.
        assert_eq!(report.exit_code(), 2, "the worst operation decides");
    }
}
