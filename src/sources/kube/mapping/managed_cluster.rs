//! ManagedClusters on the hub: hop `managed_cluster`. ARO names each by the
//! cluster id; a self-managed hub names it after its HostedCluster.

use super::{Emitted, Facts, Mapper, MapperConfig, ToFacts, deleting, label};
use crate::model::{Hop, HopView};
use crate::sources::kube::config::KubeMode;
use crate::sources::kube::objects;
use crate::views::{UnknownValue, managed_cluster};

#[derive(Clone, Debug, PartialEq)]
pub struct ManagedClusterFacts {
    pub label_id: Option<String>,
    pub view: HopView,
}

impl ToFacts for objects::ManagedCluster {
    fn facts(&self, cfg: &MapperConfig, unknown: &mut Vec<UnknownValue>) -> Facts {
        let mut view =
            managed_cluster::read(self.status.as_ref(), deleting(&self.metadata), unknown);
        view.created_at = super::created(&self.metadata);
        super::mark_deletion(&self.metadata, &mut view);
        Facts::ManagedCluster(ManagedClusterFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            view,
        })
    }
}

impl Mapper {
    pub(super) fn managed_cluster_view(&self, name: &str) -> Option<Emitted> {
        let f = self.managed_clusters.get(name)?;
        let cluster_id = match self.cfg.mode {
            // Named by the id; the hub's own registration is not a creation.
            KubeMode::Aro => f.label_id.clone().or_else(|| {
                (name != self.cfg.manifestwork_namespace && name != "local-cluster")
                    .then(|| name.to_string())
            }),
            KubeMode::SelfManaged => self
                .hosted_clusters_by_name
                .get(name)
                .into_iter()
                .flatten()
                .find_map(|k| self.hosted_cluster_id(k, self.hosted_clusters.get(k)?)),
        }?;
        let mut view = f.view.clone();
        view.set_identity(self.identity());
        Some(Emitted {
            cluster_id,
            hop: Hop::ManagedCluster,
            object: String::new(),
            view,
        })
    }
}
