//! HostedClusters: hop `hosted_cluster`, and the anchor other kinds resolve
//! their cluster through (node pools by `spec.clusterName`, control planes by
//! namespace, self-managed ManagedClusters by name).

use super::{
    Emitted, Facts, Mapper, MapperConfig, ObjRef, ToFacts, created, deleting, label, trace_parents,
};
use crate::model::{Hop, IdentityPatch};
use crate::sources::kube::config::KubeMode;
use crate::sources::kube::objects;
use crate::views::UnknownValue;
use crate::views::hosted_cluster::{self, HAS_BEEN_AVAILABLE_ANNOTATION, HostedClusterReading};

#[derive(Clone, Debug, PartialEq)]
pub struct HostedClusterFacts {
    pub label_id: Option<String>,
    pub spec_cluster_id: Option<String>,
    pub name_label: Option<String>,
    pub platform: Option<String>,
    pub reading: HostedClusterReading,
}

impl ToFacts for objects::HostedCluster {
    fn facts(&self, cfg: &MapperConfig, unknown: &mut Vec<UnknownValue>) -> Facts {
        let annotated = self
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(HAS_BEEN_AVAILABLE_ANNOTATION));
        let mut reading = hosted_cluster::read(
            self.status.as_ref(),
            deleting(&self.metadata),
            annotated,
            unknown,
        );
        reading.view.created_at = created(&self.metadata);
        super::mark_deletion(&self.metadata, &mut reading.view);
        // Kept in the view's identity box: no cost without annotations.
        let parents = trace_parents(&self.metadata, unknown);
        if !parents.is_empty() {
            reading.view.identity_mut().trace_parents = parents;
        }
        let ids = super::upstream_ids(&self.metadata);
        if !ids.is_empty() {
            reading.view.identity_mut().upstream_ids = ids;
        }
        Facts::HostedCluster(Box::new(HostedClusterFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            spec_cluster_id: self.spec.cluster_id.clone().filter(|s| !s.is_empty()),
            name_label: label(&self.metadata, &cfg.name_label),
            // Lower-cased so the management view agrees with the service
            // side's platform label values.
            platform: self
                .spec
                .platform
                .as_ref()
                .and_then(|p| p.kind.as_deref())
                .filter(|p| !p.is_empty())
                .map(str::to_ascii_lowercase),
            reading,
        }))
    }
}

impl Mapper {
    pub(super) fn hosted_cluster_view(&self, at: &ObjRef) -> Option<Emitted> {
        let f = self.hosted_clusters.get(at)?;
        let cluster_id = self.hosted_cluster_id(at, f)?;
        let mut view = f.reading.view.clone();
        view.set_identity(IdentityPatch {
            name: match self.cfg.mode {
                KubeMode::Aro => f.name_label.clone(),
                KubeMode::SelfManaged => Some(at.name().to_string()),
            },
            namespace: Some(at.namespace().to_string()),
            platform: f.platform.clone(),
            version: f.reading.version.clone(),
            trace_parents: f.reading.view.identity().trace_parents.clone(),
            upstream_ids: f.reading.view.identity().upstream_ids.clone(),
            rollout: f.reading.rollout.as_deref().cloned(),
            ..self.identity()
        });
        Some(Emitted {
            cluster_id,
            hop: Hop::HostedCluster,
            object: String::new(),
            view,
        })
    }
}
