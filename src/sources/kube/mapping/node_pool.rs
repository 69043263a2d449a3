//! NodePools: hop `node_pool`, one object per pool; the hop aggregates them.

use super::{
    Emitted, Facts, Mapper, MapperConfig, ObjRef, ToFacts, created, deleting, label, trace_parents,
};
use crate::model::{Hop, HopView, IdentityPatch};
use crate::sources::kube::config::KubeMode;
use crate::sources::kube::objects;
use crate::views::UnknownValue;
use crate::views::node_pool::{self, count};

#[derive(Clone, Debug, PartialEq)]
pub struct NodePoolFacts {
    pub label_id: Option<String>,
    pub name_label: Option<String>,
    pub cluster_name: String,
    pub view: HopView,
}

impl ToFacts for objects::NodePool {
    fn facts(&self, cfg: &MapperConfig, unknown: &mut Vec<UnknownValue>) -> Facts {
        // An autoscaling pool wants at least its minimum.
        let desired = count(self.spec.replicas, "spec.replicas", unknown).or_else(|| {
            self.spec
                .auto_scaling
                .as_ref()
                .and_then(|a| count(a.min, "spec.autoScaling.min", unknown))
        });
        let mut view = node_pool::read(
            self.status.as_ref(),
            deleting(&self.metadata),
            desired,
            unknown,
        );
        view.created_at = created(&self.metadata);
        super::mark_deletion(&self.metadata, &mut view);
        // Kept in the view's identity box: no cost without annotations.
        let parents = trace_parents(&self.metadata, unknown);
        if !parents.is_empty() {
            view.identity_mut().trace_parents = parents;
        }
        let ids = super::upstream_ids(&self.metadata);
        if !ids.is_empty() {
            view.identity_mut().upstream_ids = ids;
        }
        Facts::NodePool(NodePoolFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            name_label: label(&self.metadata, &cfg.name_label),
            cluster_name: self.spec.cluster_name.clone(),
            view,
        })
    }
}

impl Mapper {
    pub(super) fn node_pool_view(&self, at: &ObjRef) -> Option<Emitted> {
        let f = self.node_pools.get(at)?;
        let by_hosted_cluster = || {
            let hc = ObjRef::new(at.namespace(), &f.cluster_name);
            let hf = self.hosted_clusters.get(&hc)?;
            self.hosted_cluster_id(&hc, hf)
        };
        let cluster_id = match self.cfg.mode {
            KubeMode::Aro => f
                .label_id
                .clone()
                .or_else(by_hosted_cluster)
                .or_else(|| self.id_from_namespace(at.namespace())),
            KubeMode::SelfManaged => by_hosted_cluster(),
        }?;
        let mut view = f.view.clone();
        view.set_identity(IdentityPatch {
            name: f.name_label.clone(),
            trace_parents: f.view.identity().trace_parents.clone(),
            upstream_ids: f.view.identity().upstream_ids.clone(),
            rollout: f.view.identity().rollout.clone(),
            ..self.identity()
        });
        Some(Emitted {
            cluster_id,
            hop: Hop::NodePool,
            object: at.name().to_string(),
            view,
        })
    }
}
