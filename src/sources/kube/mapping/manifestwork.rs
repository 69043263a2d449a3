//! ManifestWorks in the management cluster's `local-cluster` namespace: hop
//! `manifestwork`, one object per work keyed by its name (a cluster has
//! several in ARO HCP: the HostedCluster's and one per NodePool; the hop
//! aggregates them, docs/design/02-hops-and-phases.md §2.5). All live in the one configured
//! namespace, so the name alone is unique.

use super::{Emitted, Facts, Mapper, MapperConfig, ObjRef, ToFacts, created, deleting, label};
use crate::model::{Hop, HopView, IdentityPatch};
use crate::sources::kube::objects;
use crate::views::{UnknownValue, conditions, work};

#[derive(Clone, Debug, PartialEq)]
pub struct ManifestWorkFacts {
    pub label_id: Option<String>,
    pub name_label: Option<String>,
    pub view: HopView,
}

impl ToFacts for objects::ManifestWork {
    fn facts(&self, cfg: &MapperConfig, unknown: &mut Vec<UnknownValue>) -> Facts {
        let wire = self.status.as_ref().map(|s| s.conditions.as_slice());
        let mut view = work::read(
            conditions::read(wire.unwrap_or_default(), unknown),
            deleting(&self.metadata),
        );
        view.created_at = created(&self.metadata);
        super::mark_deletion(&self.metadata, &mut view);
        let ids = super::upstream_ids(&self.metadata);
        if !ids.is_empty() {
            view.identity_mut().upstream_ids = ids;
        }
        Facts::ManifestWork(ManifestWorkFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            name_label: label(&self.metadata, &cfg.name_label),
            view,
        })
    }
}

impl Mapper {
    pub(super) fn manifestwork_view(&self, at: &ObjRef) -> Option<Emitted> {
        let f = self.manifestworks.get(at)?;
        let mut view = f.view.clone();
        view.set_identity(IdentityPatch {
            name: f.name_label.clone(),
            upstream_ids: f.view.identity().upstream_ids.clone(),
            ..self.identity()
        });
        Some(Emitted {
            cluster_id: f.label_id.clone()?,
            hop: Hop::Manifestwork,
            object: at.name().to_string(),
            view,
        })
    }
}
