//! What a self-managed MCE hub shows beside the hops: the MultiClusterEngine
//! phase and the Agents of the Agent platform (metrics of their own).

use super::{Facts, MapperConfig, ToFacts};
use crate::sources::kube::objects;
use crate::views::UnknownValue;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentFacts {
    pub approved: bool,
    /// `status.progress.currentStage`, raw.
    pub stage: String,
    /// `spec.clusterDeploymentName` as `<namespace>/<name>`, when bound.
    pub bound_to: Option<String>,
}

impl ToFacts for objects::MultiClusterEngine {
    fn facts(&self, _cfg: &MapperConfig, _unknown: &mut Vec<UnknownValue>) -> Facts {
        Facts::MultiClusterEngine(self.status.as_ref().and_then(|s| s.phase.clone()))
    }
}

impl ToFacts for objects::Agent {
    fn facts(&self, _cfg: &MapperConfig, _unknown: &mut Vec<UnknownValue>) -> Facts {
        Facts::Agent(AgentFacts {
            approved: self.spec.approved,
            stage: self
                .status
                .as_ref()
                .and_then(|s| s.progress.as_ref())
                .and_then(|p| p.current_stage.clone())
                .unwrap_or_default(),
            bound_to: self
                .spec
                .cluster_deployment_name
                .as_ref()
                .filter(|c| !c.name.is_empty())
                .map(|c| format!("{}/{}", c.namespace, c.name)),
        })
    }
}
