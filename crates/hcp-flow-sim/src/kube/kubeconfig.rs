//! Kubeconfig files pointing at simulated API servers, so the exporter's
//! real kube client reaches them as it would a real cluster.

use std::path::Path;

use super::KubeSimError;

/// Write a kubeconfig with one context (and cluster and user) per server:
/// plain http, no auth.
pub fn write_kubeconfig(path: &Path, servers: &[(&str, &str)]) -> Result<(), KubeSimError> {
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, url) in servers {
        out.push_str(&format!("- name: {name}\n  cluster:\n    server: {url}\n"));
    }
    out.push_str("users:\n");
    for (name, _) in servers {
        out.push_str(&format!("- name: {name}\n  user: {{}}\n"));
    }
    out.push_str("contexts:\n");
    for (name, _) in servers {
        out.push_str(&format!(
            "- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n"
        ));
    }
    if let Some((first, _)) = servers.first() {
        out.push_str(&format!("current-context: {first}\n"));
    }
    std::fs::write(path, out).map_err(|cause| KubeSimError::Kubeconfig {
        path: path.display().to_string(),
        cause,
    })
}
