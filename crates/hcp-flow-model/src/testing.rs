//! Builders for observations and batches, for tests and benchmarks:
//! `obs("c1", Hop::ClustersService).state("installing", Phase::Progressing).created(t)`.

use jiff::Timestamp;

use super::condition::Condition;
use super::hop::{ConditionStatus, Hop, Phase, Via};
use super::observation::{
    Batch, Change, ClusterKey, FailsAfterBudget, HopError, HopView, Observation, PodCounts,
    Replicas,
};
use super::text::Text;

/// Builds one observation; `.build()` or pass it to [`batch`].
#[derive(Clone, Debug)]
pub struct Obs {
    pub observation: Observation,
}

/// An upsert of `hop` for the cluster with this id.
pub fn obs(cluster_id: &str, hop: Hop) -> Obs {
    Obs {
        observation: Observation {
            key: ClusterKey::Id(cluster_id.to_string()),
            hop,
            via: Via::Direct,
            object: String::new(),
            change: Change::Upsert(Box::new(HopView::new("", Phase::Pending))),
        },
    }
}

/// An RP frontend upsert keyed by ARM resource id (joined through Clusters Service).
pub fn rp(resource_id: &str) -> Obs {
    Obs {
        observation: Observation {
            key: ClusterKey::ArmResourceId(resource_id.to_ascii_lowercase()),
            hop: Hop::RpFrontend,
            via: Via::Direct,
            object: String::new(),
            change: Change::Upsert(Box::new(HopView::new("Accepted", Phase::Pending))),
        },
    }
}

impl Obs {
    fn view(&mut self) -> &mut HopView {
        if let Change::Gone = self.observation.change {
            self.observation.change = Change::Upsert(Box::new(HopView::new("", Phase::Pending)));
        }
        match &mut self.observation.change {
            Change::Upsert(v) => v,
            Change::Gone => unreachable!("replaced above"),
        }
    }
    pub fn state(mut self, state: &str, phase: Phase) -> Obs {
        let v = self.view();
        v.state = state.into();
        v.phase = phase;
        self
    }
    pub fn since(mut self, at: Timestamp) -> Obs {
        self.view().since = Some(at.into());
        self
    }
    pub fn created(mut self, at: Timestamp) -> Obs {
        self.view().created_at = Some(at.into());
        self
    }
    pub fn updated(mut self, at: Timestamp) -> Obs {
        self.view().updated_at = Some(at.into());
        self
    }
    pub fn resource_id(mut self, rid: &str) -> Obs {
        self.view().identity_mut().resource_id = Some(rid.to_string());
        self
    }
    pub fn name(mut self, name: &str) -> Obs {
        self.view().identity_mut().name = Some(name.to_string());
        self
    }
    pub fn platform(mut self, platform: &str) -> Obs {
        self.view().identity_mut().platform = Some(platform.to_string());
        self
    }
    pub fn mgmt_cluster(mut self, mgmt: &str) -> Obs {
        self.view().identity_mut().mgmt_cluster = Some(mgmt.to_string());
        self
    }
    pub fn condition(
        mut self,
        kind: &str,
        status: ConditionStatus,
        reason: &str,
        at: Timestamp,
    ) -> Obs {
        let view = self.view();
        let added = Condition::new(kind, status, reason, Text::default(), Some(at.into()));
        view.conditions = view.conditions.iter().cloned().chain([added]).collect();
        self
    }
    pub fn error(mut self, code: &str, message: &str) -> Obs {
        self.view().error = Some(Box::new(HopError {
            code: code.to_string(),
            message: message.to_string(),
        }));
        self
    }
    pub fn replicas(mut self, desired: u32, current: u32, ready: u32) -> Obs {
        self.view().replicas = Some(Replicas {
            desired,
            current,
            ready,
        });
        self
    }
    pub fn pods(mut self, ready: u32, not_ready: u32) -> Obs {
        self.view().pods = Some(PodCounts { ready, not_ready });
        self
    }
    pub fn via(mut self, via: Via) -> Obs {
        self.observation.via = via;
        self
    }
    pub fn object(mut self, object: &str) -> Obs {
        self.observation.object = object.to_string();
        self
    }
    /// Fails once `budget(hop)` has passed since `since`, if still so read.
    pub fn fails_after_budget(mut self, since: Timestamp, code: &str) -> Obs {
        self.view().fails_after_budget = Some(Box::new(FailsAfterBudget {
            since,
            error: HopError {
                code: code.to_string(),
                message: String::new(),
            },
        }));
        self
    }
    /// Reports an upgrade rolling out to `target` since `started` (`None`:
    /// no upstream start yet).
    pub fn upgrading(mut self, target: &str, started: Option<Timestamp>) -> Obs {
        self.view().identity_mut().rollout = Some(super::observation::Rollout {
            target: target.to_string(),
            started_at: started.map(Into::into),
            completed: false,
            completed_at: None,
            upgrade: true,
        });
        self
    }
    /// Reports an upgrade to `target` rolled out at `completed`.
    pub fn upgraded(mut self, target: &str, started: Timestamp, completed: Timestamp) -> Obs {
        self.view().identity_mut().rollout = Some(super::observation::Rollout {
            target: target.to_string(),
            started_at: Some(started.into()),
            completed: true,
            completed_at: Some(completed.into()),
            upgrade: true,
        });
        self
    }
    pub fn gone(mut self) -> Obs {
        self.observation.change = Change::Gone;
        self
    }
    pub fn build(self) -> Observation {
        self.observation
    }
}

/// A batch from source `test`.
pub fn batch(initial: bool, at: Timestamp, observations: Vec<Obs>) -> Batch {
    Batch {
        source: "test".to_string(),
        initial,
        observed_at: at,
        observations: observations.into_iter().map(Obs::build).collect(),
    }
}
