//! Kube sources against simulated API servers, into a store of their own:
//! the real `KubeSource` through a kubeconfig, as `serve` starts it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hcp_flow::metrics::exporter::{SourceLabels, UnknownValueLabels, WatchEventLabels};
use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{Batch, Hop, Phase};
use hcp_flow::sim::kube::write_kubeconfig;
use hcp_flow::sources::ObservationSink;
use hcp_flow::sources::kube::{KubeMetrics, KubeMode, KubeSource, KubeSourceConfig};
use hcp_flow::store::Store;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;

/// The world's layout the exporter's `mode` reads: a test that states one
/// cluster for both sides names the exporter's mode and lays the world's
/// objects out to match.
pub fn layout_of(mode: KubeMode) -> hcp_flow::sim::kube::ClusterLayout {
    match mode {
        KubeMode::Aro => hcp_flow::sim::kube::ClusterLayout::Aro,
        KubeMode::SelfManaged => hcp_flow::sim::kube::ClusterLayout::SelfManaged,
    }
}

/// Forwards each batch to the store and remembers its (source, initial, size).
pub struct Recorder {
    store: Arc<Store>,
    pub batches: Mutex<Vec<(String, bool, usize)>>,
}

impl ObservationSink for Recorder {
    fn apply(&self, batch: Batch) {
        self.batches.lock().push((
            batch.source.clone(),
            batch.initial,
            batch.observations.len(),
        ));
        self.store.apply(batch);
    }
}

/// A store, the kube sources started into it, their self-metrics and a
/// directory for their kubeconfig; the sources stop when dropped.
pub struct KubeHarness {
    pub store: Arc<Store>,
    pub recorder: Arc<Recorder>,
    pub kube_metrics: KubeMetrics,
    pub registry: Registry,
    tasks: Vec<JoinHandle<()>>,
    dir: PathBuf,
}

impl Drop for KubeHarness {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A harness named `name` (its directory) whose store waits for no source.
pub fn harness(name: &str) -> KubeHarness {
    harness_waiting_for(name, &[])
}

/// A harness whose store is ready once each of `sources` synced.
pub fn harness_waiting_for(name: &str, sources: &[&str]) -> KubeHarness {
    super::init();
    let store = super::store::builder().sources(sources).build();
    let mut registry = Registry::default();
    let kube_metrics = KubeMetrics::register(&mut registry);
    let dir = std::env::temp_dir().join(format!("hcpflow-kube-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    KubeHarness {
        recorder: Arc::new(Recorder {
            store: store.clone(),
            batches: Mutex::new(Vec::new()),
        }),
        store,
        kube_metrics,
        registry,
        tasks: Vec::new(),
        dir,
    }
}

impl KubeHarness {
    /// Starts a source `kube/<context>` for each (context, url, mode) through
    /// one kubeconfig: environment `prod`, backoffs of 100–400 ms unless
    /// `tweak` says otherwise.
    pub async fn start(
        &mut self,
        servers: &[(&str, &str, KubeMode)],
        tweak: impl Fn(&mut KubeSourceConfig),
    ) {
        let path = self.dir.join("kubeconfig");
        let contexts: Vec<(&str, &str)> = servers.iter().map(|(c, u, _)| (*c, *u)).collect();
        write_kubeconfig(&path, &contexts).expect("the kubeconfig is written");
        for (context, _, mode) in servers {
            let mut cfg = KubeSourceConfig::new(context, *mode);
            cfg.kubeconfig = Some(path.clone());
            cfg.context = Some(context.to_string());
            cfg.environment = "prod".to_string();
            cfg.min_backoff = Duration::from_millis(100);
            cfg.max_backoff = Duration::from_millis(400);
            tweak(&mut cfg);
            let ctx = self
                .store
                .source_context(&cfg.source_name())
                .with_sink(self.recorder.clone());
            let source = KubeSource::new(cfg, ctx, self.kube_metrics.clone())
                .await
                .expect("the kube source starts");
            self.tasks.push(tokio::spawn(source.run()));
        }
    }

    pub fn phase(&self, id: &str, hop: Hop) -> Option<Phase> {
        self.store.with_timeline(id, |tl| tl.phase(hop)).flatten()
    }

    pub fn up(&self, source: &str) -> i64 {
        self.store
            .exporter_metrics()
            .source_up
            .get_or_create(&SourceLabels {
                source: source.to_string(),
            })
            .get()
    }

    pub fn last_success(&self, source: &str) -> f64 {
        self.store
            .exporter_metrics()
            .source_last_success
            .get_or_create(&SourceLabels {
                source: source.to_string(),
            })
            .get()
    }

    pub fn unknown(&self, source: &str, field: &str) -> u64 {
        self.store
            .exporter_metrics()
            .unknown_values
            .get_or_create(&UnknownValueLabels {
                source: source.to_string(),
                field: field.to_string(),
            })
            .get()
    }

    pub fn events(&self, source: &str, event: &str) -> u64 {
        self.store
            .exporter_metrics()
            .watch_events
            .get_or_create(&WatchEventLabels {
                source: source.to_string(),
                event: event.to_string(),
            })
            .get()
    }

    /// The kube sources' own families.
    pub fn kube_text(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("text encoding into a String");
        out
    }

    /// The store's scrape followed by the kube sources' own families.
    pub fn text(&self) -> String {
        let mut out = self.store.scrape(Format::Text);
        out.push_str(&self.kube_text());
        out
    }

    /// `hcpflow_watch_restarts_total` of `source` for `reason` (0 when absent).
    pub fn restarts(&self, source: &str, reason: &str) -> u64 {
        let prefix =
            format!(r#"hcpflow_watch_restarts_total{{source="{source}",reason="{reason}"}} "#);
        self.text()
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.parse().ok()))
            .unwrap_or(0)
    }
}

/// Waits (15 s at most) until `check` holds, polling every 50 ms.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
