//! HostedControlPlanes and control-plane pods: hop `control_plane`, one per
//! control-plane namespace (`<hc namespace>-<hc name>`).

use super::{Emitted, Facts, Mapper, MapperConfig, ObjRef, ToFacts, created};
use crate::model::{Hop, PodCounts};
use crate::sources::kube::objects;
use crate::views::{UnknownValue, conditions, control_plane};

impl ToFacts for objects::HostedControlPlane {
    fn facts(&self, _cfg: &MapperConfig, unknown: &mut Vec<UnknownValue>) -> Facts {
        Facts::HostedControlPlane(control_plane::read_hosted_control_plane(
            self.status.as_ref(),
            self.metadata
                .deletion_timestamp
                .as_ref()
                .map(|t| t.0.into()),
            created(&self.metadata),
            unknown,
        ))
    }
}

impl ToFacts for objects::ControlPlanePod {
    fn facts(&self, _cfg: &MapperConfig, unknown: &mut Vec<UnknownValue>) -> Facts {
        let Some(status) = self.status.as_ref() else {
            return Facts::Pod(Some(false));
        };
        // Finished job pods are neither ready nor a problem.
        if matches!(status.phase.as_deref(), Some("Succeeded")) {
            return Facts::Pod(None);
        }
        let conds = conditions::read(&status.conditions, unknown);
        Facts::Pod(Some(conditions::is_true(&conds, "Ready")))
    }
}

impl Mapper {
    pub(super) fn control_plane_view(&self, namespace: &str) -> Option<Emitted> {
        let hcp = self
            .control_planes
            .range(ObjRef::new(namespace, "")..)
            .take_while(|(k, _)| k.namespace() == namespace)
            .map(|(_, f)| f)
            .next();
        let mut pods = PodCounts::default();
        for (_, ready) in self
            .pods
            .range(ObjRef::new(namespace, "")..)
            .take_while(|(k, _)| k.namespace() == namespace)
        {
            match ready {
                Some(true) => pods.ready += 1,
                Some(false) => pods.not_ready += 1,
                None => {}
            }
        }
        if hcp.is_none() && pods.ready + pods.not_ready == 0 {
            return None;
        }
        let cluster_id = self
            .hosted_cluster_by_cp_namespace(namespace)
            .or_else(|| self.id_from_namespace(namespace))?;
        let mut view = control_plane::read(hcp.map(Box::as_ref), pods);
        view.set_identity(self.identity());
        Some(Emitted {
            cluster_id,
            hop: Hop::ControlPlane,
            object: String::new(),
            view,
        })
    }
}
