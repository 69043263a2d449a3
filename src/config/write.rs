//! Writing a configuration back as the file `serve` and `diagnose` read:
//! the demo hands its world's configuration to the user this way
//! (docs/design/11-simulated-world.md §11.5), so `diagnose --config` points at the demo.

use std::path::Path;

use super::types::Config;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("the configuration could not be written as YAML")]
    Yaml(#[source] serde_saphyr::SerializeError),
    #[error("the configuration could not be serialised")]
    Tree(#[source] serde_json::Error),
    #[error("cannot write {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Config {
    /// The YAML file that [`Config::load`] reads back to this configuration.
    pub fn to_yaml(&self) -> Result<String, WriteError> {
        // Through a JSON tree: unset options (null) are left out, as a person
        // would write the file, and the file reader drops nulls anyway.
        let tree = serde_json::to_value(self).map_err(WriteError::Tree)?;
        serde_saphyr::to_string(&without_nulls(tree)).map_err(WriteError::Yaml)
    }

    /// [`Config::to_yaml`] into `path`, with a header saying where it came from.
    pub fn write_yaml(&self, path: &Path, header: &str) -> Result<(), WriteError> {
        let mut text = String::new();
        for line in header.lines() {
            text.push_str("# ");
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&self.to_yaml()?);
        std::fs::write(path, text).map_err(|source| WriteError::Io {
            path: path.display().to_string(),
            source,
        })
    }
}

fn without_nulls(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use std::time::Duration;

    use super::*;
    use crate::config::{
        ClustersServiceApi, ClustersServiceConfig, HttpSourceConfig, KubeMode, KubeSourceConfig,
        MaestroConfig, Overrides,
    };
    use crate::model::Hop;

    #[test]
    fn a_written_configuration_loads_back_the_same() {
        let url = |s: &str| url::Url::parse(s).unwrap();
        let mut config = Config::default();
        config.slo.creation_target = Duration::from_secs(20);
        config
            .slo
            .hop_budgets
            .set(Hop::MaestroBundle, Duration::from_secs(10));
        let mut http = HttpSourceConfig::new(url("http://127.0.0.1:8000/"));
        http.fast_poll_interval = Duration::from_millis(500);
        config.sources.clusters_service = Some(ClustersServiceConfig {
            http,
            api: ClustersServiceApi::AroHcpV1alpha1,
            search_scope: None,
            node_pool_rotation: Duration::from_secs(1800),
        });
        config.sources.maestro = Some(MaestroConfig {
            http: HttpSourceConfig::new(url("http://127.0.0.1:8001/")),
            search_scope: None,
            grpc: None,
        });
        let dir = std::env::temp_dir().join(format!("hcp-flow-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The loader opens the kubeconfig it is given.
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: mc-1\n  cluster:\n    server: http://127.0.0.1:8002\nusers:\n- name: mc-1\n  user: {}\ncontexts:\n- name: mc-1\n  context:\n    cluster: mc-1\n    user: mc-1\ncurrent-context: mc-1\n",
        )
        .unwrap();
        let mut kube = KubeSourceConfig::new("mc-1", KubeMode::SelfManaged);
        kube.kubeconfig = Some(kubeconfig);
        kube.context = Some("mc-1".into());
        config.sources.kube = vec![kube];

        let path = dir.join("hcp-flow.yaml");
        config.write_yaml(&path, "written by a test").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# written by a test\n"), "{text}");
        let loaded = Config::load(Some(&path), &Overrides::default()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(loaded, config, "{text}");
    }
}
