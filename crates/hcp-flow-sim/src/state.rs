//! What every upstream object looks like at a given instant, derived from a
//! [`Plan`] alone. The wire renderers and the ground truth both read these
//! views, never each other.

use super::plan::{BundlePlan, Ms, Plan};

pub(crate) fn reached(ev: Option<Ms>, t: Ms) -> bool {
    ev.is_some_and(|e| e <= t)
}

/// Kubernetes condition times have whole-second precision.
pub(crate) fn trunc_s(ms: Ms) -> Ms {
    ms.div_euclid(1000) * 1000
}

/// One Kubernetes-style condition (`since` = lastTransitionTime, whole seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cond {
    pub kind: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: &'static str,
    pub since: Ms,
}

impl Cond {
    fn new(
        kind: &'static str,
        ok: bool,
        since: Ms,
        good: (&'static str, &'static str),
        bad: (&'static str, &'static str),
    ) -> Cond {
        let (reason, message) = if ok { good } else { bad };
        Cond {
            kind,
            status: if ok { "True" } else { "False" },
            reason,
            message,
            since: trunc_s(since),
        }
    }

    /// A condition that is True once `ev` has happened (by `t`), False before
    /// (since `start`).
    fn at(
        kind: &'static str,
        ev: Option<Ms>,
        t: Ms,
        start: Ms,
        good: (&'static str, &'static str),
        bad: (&'static str, &'static str),
    ) -> Cond {
        match ev.filter(|e| *e <= t) {
            Some(e) => Cond::new(kind, true, e, good, bad),
            None => Cond::new(kind, false, start, good, bad),
        }
    }

    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

pub(crate) fn find<'a>(conds: &'a [Cond], kind: &str) -> Option<&'a Cond> {
    conds.iter().find(|c| c.kind == kind)
}

impl Plan {
    /// The creation's own progress stops at the user's DELETE.
    pub fn creation_time(&self, t: Ms) -> Ms {
        self.delete_requested.map_or(t, |d| t.min(d))
    }

    /// Clusters Service's uninstall has failed and not been retried yet.
    pub fn uninstall_failed(&self, t: Ms) -> bool {
        reached(self.cs_uninstall_error, t) && !reached(self.bundle_deleted, t)
    }

    pub fn rp_exists(&self, t: Ms) -> bool {
        self.created <= t && !reached(self.rp_gone, t)
    }

    /// `properties.provisioningState`, `None` when the resource does not exist.
    pub fn rp_state(&self, t: Ms) -> Option<&'static str> {
        if !self.rp_exists(t) {
            return None;
        }
        if reached(self.delete_requested, t) {
            return Some(
                if self.uninstall_failed(t) && reached(self.rp_delete_failed, t) {
                    "Failed"
                } else {
                    "Deleting"
                },
            );
        }
        Some(if reached(self.rp_failed, t) {
            "Failed"
        } else if self.updating(t) {
            // The backend maps Clusters Service's `updating` (and the RP
            // says so from the user's request on).
            "Updating"
        } else if reached(self.rp_succeeded, t) {
            "Succeeded"
        } else if reached(self.rp_provisioning, t) {
            if self.fault == Some(super::FaultKind::UnknownProvisioningState) {
                "Migrating"
            } else {
                "Provisioning"
            }
        } else {
            "Accepted"
        })
    }

    /// `properties.status.conditions` (api-version 2026-06-30-preview and newer).
    pub fn rp_conditions(&self, t: Ms) -> Vec<Cond> {
        let tc = self.creation_time(t);
        let failed = self.rp_failed.filter(|f| *f <= tc);
        let succeeded = self.rp_succeeded.filter(|s| *s <= tc);
        let deleting = self.delete_requested.filter(|d| *d <= t);
        let available = match (succeeded, failed) {
            (Some(s), _) => Cond::new(
                "Available",
                true,
                s,
                ("AsExpected", "Cluster is available"),
                ("", ""),
            ),
            (None, Some(f)) => Cond::new(
                "Available",
                false,
                f,
                ("", ""),
                ("ProvisioningFailed", "Cluster provisioning failed"),
            ),
            (None, None) => Cond::new(
                "Available",
                false,
                self.created,
                ("", ""),
                ("Provisioning", "Cluster is being provisioned"),
            ),
        };
        let upgrade = self
            .day2
            .upgrade
            .as_ref()
            .filter(|u| u.rp_reports_updating && u.requested <= t && succeeded.is_some());
        let progressing = match (deleting, succeeded.or(failed)) {
            (None, Some(_)) if upgrade.is_some() => match upgrade {
                Some(u) if self.updating(t) => Cond::new(
                    "Progressing",
                    true,
                    u.requested,
                    ("Updating", "Cluster is being updated"),
                    ("", ""),
                ),
                _ => Cond::new(
                    "Progressing",
                    false,
                    upgrade.and_then(|u| u.rp_succeeded).unwrap_or(t),
                    ("", ""),
                    ("AsExpected", "Cluster is not progressing"),
                ),
            },
            (Some(d), _) => Cond::new(
                "Progressing",
                true,
                d,
                ("Deleting", "Cluster is being deleted"),
                ("", ""),
            ),
            (None, Some(end)) => Cond::new(
                "Progressing",
                false,
                end,
                ("", ""),
                ("AsExpected", "Cluster is not progressing"),
            ),
            (None, None) => Cond::new(
                "Progressing",
                true,
                self.created,
                ("Provisioning", "Cluster is being provisioned"),
                ("", ""),
            ),
        };
        let degraded = match failed {
            Some(f) => Cond::new(
                "Degraded",
                true,
                f,
                ("ProvisioningFailed", "Inflight checks failed"),
                ("", ""),
            ),
            None => Cond::new(
                "Degraded",
                false,
                self.created,
                ("", ""),
                ("AsExpected", "Cluster is not degraded"),
            ),
        };
        vec![available, degraded, progressing]
    }

    /// The RP says `Updating`: the control plane's upgrade asked for, the
    /// RP not `Succeeded` again yet (and no deletion), in a world that
    /// serves it ([`super::Day2Config::rp_updating`]).
    pub fn updating(&self, t: Ms) -> bool {
        !reached(self.delete_requested, t)
            && self.day2.upgrade.as_ref().is_some_and(|u| {
                u.rp_reports_updating && u.requested <= t && !reached(u.rp_succeeded, t)
            })
    }

    /// Clusters Service says `updating` (ARO HCP only).
    pub fn cs_updating(&self, t: Ms) -> bool {
        self.day2
            .upgrade
            .as_ref()
            .is_some_and(|u| u.cs_updating <= t && !reached(u.cs_ready, t))
    }

    /// The release the user asked for at `t` (`status.version.desired`,
    /// the RP's `version`).
    pub fn desired_version(&self, t: Ms) -> &'static str {
        match &self.day2.upgrade {
            Some(u) if u.requested <= t => u.to,
            _ => self.version,
        }
    }

    /// The release the cluster runs at `t` (its upgrade completed).
    pub fn current_version(&self, t: Ms) -> &'static str {
        match &self.day2.upgrade {
            Some(u) if reached(u.completed, t) => u.to,
            _ => self.version,
        }
    }

    pub fn cs_exists(&self, t: Ms) -> bool {
        reached(self.cs_created, t) && !reached(self.cs_gone, t)
    }

    /// Clusters Service `status.state`.
    pub fn cs_state(&self, t: Ms) -> Option<&'static str> {
        if !self.cs_exists(t) {
            return None;
        }
        if self.uninstall_failed(t) {
            return Some("error");
        }
        if reached(self.cs_uninstalling, t) {
            return Some("uninstalling");
        }
        let tc = self.creation_time(t);
        Some(if reached(self.cs_error, tc) {
            "error"
        } else if reached(self.cs_ready, tc) && self.cs_updating(t) {
            "updating"
        } else if reached(self.cs_ready, tc) {
            "ready"
        } else if self.cs_installing <= tc {
            if self.fault == Some(super::FaultKind::UnknownClustersServiceState) {
                "frobnicating"
            } else {
                "installing"
            }
        } else if self.cs_pending <= tc {
            "pending"
        } else {
            "validating"
        })
    }

    /// Whether bundle `b` of this plan is served at `t`. A cluster the RP
    /// never handed over has no bundle at all; the others go together when
    /// the cluster is deleted.
    pub fn bundle_exists(&self, b: &BundlePlan, t: Ms) -> bool {
        self.cs_created.is_some()
            && b.created <= t
            && !reached(self.bundle_gone, t)
            && !reached(b.removed.map(|r| r.1), t)
    }

    /// The bundles served at `t`.
    pub fn bundles_at(&self, t: Ms) -> impl Iterator<Item = &BundlePlan> {
        self.bundles
            .iter()
            .filter(move |b| self.bundle_exists(b, t))
    }

    /// Bundle `b`'s `deleted_at`: its own (its pool removed) or the
    /// cluster's.
    pub fn bundle_deleted_at(&self, b: &BundlePlan, t: Ms) -> Option<Ms> {
        [b.removed.map(|r| r.0), self.bundle_deleted]
            .into_iter()
            .flatten()
            .filter(|d| *d <= t)
            .min()
    }

    /// The instant bundle `b`'s served status describes, `None` while its
    /// status is still null. Frozen by the status-not-updated fault and at
    /// the user's DELETE (the agent stops reporting progress of a creation).
    pub fn status_time(&self, b: &BundlePlan, t: Ms) -> Option<Ms> {
        let mut st = self.creation_time(t);
        if let Some(f) = b.frozen {
            st = st.min(f);
        }
        // A removed pool's bundle reports no more once it is deleted.
        if let Some((deleted, _)) = b.removed {
            st = st.min(deleted);
        }
        reached(b.applied, st).then_some(st)
    }

    /// Bundle `b`'s `updated_at`: the last change of its served content.
    pub fn updated_at(&self, b: &BundlePlan, t: Ms) -> Ms {
        let mut u = b.created;
        if let Some(st) = self.status_time(b, t) {
            let i = b.status_events.partition_point(|e| *e <= st);
            if i > 0 {
                u = u.max(b.status_events[i - 1]);
            }
        }
        if let Some(d) = self.bundle_deleted_at(b, t) {
            u = u.max(d);
        }
        u
    }

    /// When the HostedCluster's bundle was applied (its objects' conditions
    /// start there).
    fn applied_at(&self) -> Ms {
        self.bundle_applied.unwrap_or(self.bundle_created)
    }

    /// Bundle `b`'s own `status.conditions` (the Maestro agent applying the
    /// ManifestWork to the management cluster).
    pub fn bundle_conditions(&self, b: &BundlePlan, st: Ms) -> Vec<Cond> {
        let s = b.applied.unwrap_or(b.created);
        vec![
            Cond::new(
                "Applied",
                true,
                s,
                (
                    "AppliedManifestWorkComplete",
                    "Apply manifest work complete",
                ),
                ("", ""),
            ),
            Cond::at(
                "Available",
                b.available,
                st,
                s,
                ("ResourcesAvailable", "All resources are available"),
                (
                    "ResourcesNotAvailable",
                    "One or more resources are not available",
                ),
            ),
        ]
    }

    /// The `.status.conditions` of the ManifestWork bundle `b` carries (the
    /// work agent applying the HostedCluster, or one NodePool).
    pub fn mw_conditions(&self, b: &BundlePlan, st: Ms) -> Vec<Cond> {
        let s = b.applied.unwrap_or(b.created);
        vec![
            Cond::new(
                "Applied",
                true,
                s,
                (
                    "AppliedManifestWorkComplete",
                    "Apply manifest work complete",
                ),
                ("", ""),
            ),
            Cond::at(
                "Available",
                b.mw_available,
                st,
                s,
                ("ResourcesAvailable", "All resources are available"),
                (
                    "ResourcesNotAvailable",
                    "One or more resources are not available",
                ),
            ),
        ]
    }

    /// `Progressing`: the upgrade's rollout once requested, else blocked by
    /// an invalid image, done at the creation's completion, or deploying.
    fn hc_progressing(&self, st: Ms, s: Ms, invalid: Option<Ms>, completed: Option<Ms>) -> Cond {
        let upgrade = self.day2.upgrade.as_ref().filter(|u| u.requested <= st);
        match (invalid, completed) {
            (None, Some(_)) if upgrade.is_some() => match upgrade.and_then(|u| u.completed) {
                Some(done) if done <= st => Cond::new(
                    "Progressing",
                    false,
                    done,
                    ("", ""),
                    ("AsExpected", "HostedCluster is at expected version"),
                ),
                _ => Cond::new(
                    "Progressing",
                    true,
                    upgrade.map_or(st, |u| u.requested),
                    (
                        "Progressing",
                        "HostedCluster is deploying, upgrading, or reconfiguring",
                    ),
                    ("", ""),
                ),
            },
            (Some(e), _) => Cond::new(
                "Progressing",
                false,
                e,
                ("", ""),
                ("Blocked", "Release image is invalid"),
            ),
            (None, Some(e)) => Cond::new(
                "Progressing",
                false,
                e,
                ("", ""),
                ("AsExpected", "HostedCluster is at expected version"),
            ),
            (None, None) => Cond::new(
                "Progressing",
                true,
                s,
                ("Progressing", "HostedCluster is deploying"),
                ("", ""),
            ),
        }
    }

    /// `Available`: as planned, or lost for a while after the creation.
    fn hc_available_condition(&self, st: Ms, s: Ms) -> Cond {
        let available_good = ("AsExpected", "The hosted control plane is available");
        match self.hc_lost {
            Some((lost, back)) if lost <= st && st < back => Cond::new(
                "Available",
                false,
                lost,
                available_good,
                (
                    "ComponentsNotAvailable",
                    "kube-apiserver deployment has 0 available replicas",
                ),
            ),
            Some((_, back)) if back <= st => {
                Cond::new("Available", true, back, available_good, ("", ""))
            }
            _ => Cond::at(
                "Available",
                self.hc_available,
                st,
                s,
                available_good,
                (
                    "WaitingForAvailable",
                    "Waiting for hosted control plane to be healthy",
                ),
            ),
        }
    }

    pub fn hc_conditions(&self, st: Ms) -> Vec<Cond> {
        let s = self.applied_at();
        let invalid = self.hc_invalid_image.filter(|e| *e <= st);
        let completed = self.hc_completed.filter(|e| *e <= st);
        let progressing = self.hc_progressing(st, s, invalid, completed);
        let degraded = match invalid {
            Some(e) => Cond::new(
                "Degraded",
                true,
                e,
                ("InvalidImage", "Release image is invalid"),
                ("", ""),
            ),
            None => Cond::new(
                "Degraded",
                false,
                s,
                ("", ""),
                ("AsExpected", "The hosted cluster is not degraded"),
            ),
        };
        let valid_image = match invalid {
            Some(e) => Cond::new(
                "ValidReleaseImage",
                false,
                e,
                ("", ""),
                ("InvalidImage", "Release image is invalid"),
            ),
            None => Cond::new(
                "ValidReleaseImage",
                true,
                s,
                ("AsExpected", "Release image is valid"),
                ("", ""),
            ),
        };
        let available = self.hc_available_condition(st, s);
        vec![
            available,
            progressing,
            degraded,
            Cond::at(
                "InfrastructureReady",
                self.hc_infra_ready,
                st,
                s,
                ("AsExpected", "All is well"),
                (
                    "WaitingOnInfrastructureReady",
                    "Cluster infrastructure is still provisioning",
                ),
            ),
            Cond::at(
                "EtcdAvailable",
                self.hc_etcd_available,
                st,
                s,
                ("QuorumAvailable", ""),
                ("EtcdWaitingForQuorum", "Waiting for etcd to reach quorum"),
            ),
            Cond::at(
                "KubeAPIServerAvailable",
                self.hc_kas_available,
                st,
                s,
                ("AsExpected", "Kube APIServer deployment is available"),
                (
                    "WaitingForAvailable",
                    "Waiting for Kube APIServer deployment to become available",
                ),
            ),
            Cond::new(
                "ValidConfiguration",
                true,
                s,
                ("AsExpected", "Configuration passes validation"),
                ("", ""),
            ),
            valid_image,
            Cond::new(
                "ReconciliationActive",
                true,
                s,
                ("AsExpected", "Reconciliation active on resource"),
                ("", ""),
            ),
        ]
    }

    /// `version.history`, newest first: the upgrade's entry once it
    /// started, then the creation's.
    pub fn hc_history(&self, st: Ms) -> Vec<HistoryEntry> {
        let entry = |version, started, completed: Option<Ms>| {
            let completed = completed.filter(|e| *e <= st);
            HistoryEntry {
                state: if completed.is_some() {
                    "Completed"
                } else {
                    "Partial"
                },
                version,
                started: trunc_s(started),
                completed: completed.map(trunc_s),
            }
        };
        let mut out = Vec::with_capacity(2);
        if let Some(u) = self.day2.upgrade.as_ref().filter(|u| u.started <= st) {
            out.push(entry(u.to, u.started, u.completed));
        }
        out.push(entry(self.version, self.applied_at(), self.hc_completed));
        out
    }

    /// The NodePool of `pools[i]` at status time `st` of its bundle; its
    /// conditions start when that bundle was applied.
    pub fn np_view(&self, i: usize, st: Ms) -> NodePoolView {
        let pool = &self.pools[i];
        let s = self
            .bundles
            .iter()
            .find(|b| b.pool == Some(i))
            .and_then(|b| b.applied)
            .unwrap_or(self.applied_at());
        // A pool added after the creation has times of its own.
        let added = self.day2.added.as_ref().filter(|a| a.pool == i);
        let (ignition, machines_at, nodes_at, ready_at) = match added {
            Some(a) => (a.ignition, a.machines, a.nodes, a.ready),
            None => (
                self.np_machines,
                self.np_machines,
                self.np_ready,
                self.np_ready,
            ),
        };
        let machines = reached(machines_at, st);
        let nodes = reached(nodes_at, st);
        let ready = reached(ready_at, st);
        let mut conditions = vec![
            Cond::at(
                "Ready",
                ready_at,
                st,
                s,
                ("AsExpected", ""),
                (
                    "WaitingForAvailableMachines",
                    "Minimum availability requires replicas",
                ),
            ),
            Cond::at(
                "AllMachinesReady",
                machines_at,
                st,
                s,
                ("AsExpected", "All is well"),
                ("WaitingForAvailableMachines", "Machines are not ready"),
            ),
            Cond::at(
                "AllNodesHealthy",
                nodes_at,
                st,
                s,
                ("AsExpected", "All is well"),
                ("NodeProvisioning", "Nodes are not healthy yet"),
            ),
            Cond::at(
                "ReachedIgnitionEndpoint",
                ignition,
                st,
                s,
                ("AsExpected", ""),
                (
                    "ignitionNotReached",
                    "Machines have not reached the ignition endpoint",
                ),
            ),
            Cond::new(
                "ValidReleaseImage",
                true,
                s,
                ("AsExpected", "Release image is valid"),
                ("", ""),
            ),
            Cond::new("ValidPlatformImage", true, s, ("AsExpected", ""), ("", "")),
            Cond::new("ValidMachineConfig", true, s, ("AsExpected", ""), ("", "")),
        ];
        // An upgrade in flight: HyperShift's UpdatingVersion, True until
        // the pool runs the target (then removed).
        let upgrade = self
            .day2
            .pool_upgrade(i)
            .filter(|u| u.started <= st && !reached(u.done, st));
        if let Some(u) = upgrade {
            conditions.push(Cond::new(
                "UpdatingVersion",
                true,
                u.started,
                ("AsExpected", super::day2::updating_message(u.to)),
                ("", ""),
            ));
        }
        NodePoolView {
            conditions,
            desired: pool.replicas,
            current: if machines { pool.replicas } else { 0 },
            ready: if nodes { pool.replicas } else { 0 },
            version: ready.then(|| self.day2.pool_version(i, self.version, st)),
        }
    }
}

/// One entry of a HostedCluster's `status.version.history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HistoryEntry {
    pub state: &'static str,
    pub version: &'static str,
    /// Whole seconds, as served.
    pub started: Ms,
    pub completed: Option<Ms>,
}

#[derive(Debug, Clone)]
pub(crate) struct NodePoolView {
    pub conditions: Vec<Cond>,
    pub desired: i64,
    pub current: i64,
    pub ready: i64,
    /// Empty until the first rollout finished.
    pub version: Option<&'static str>,
}
