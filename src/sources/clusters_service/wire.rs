//! What Clusters Service serves and how it is read: the fields of a cluster
//! the source reads, its provision shard, the phase of its state, and the
//! searches the polls send (docs/design/10-upstream-facts.md §10.8).

use super::*;

/// The `kind` this source reports in `/readyz` and
/// `hcpflow_source_kind_info`: the collection Clusters Service lists.
pub const KIND: &str = "clusters";

/// The `kind` of the cluster list envelope, under both APIs
/// (docs/design/10-upstream-facts.md §10.8).
pub const LIST_KIND: &str = "ClusterList";

/// States a creation does not leave by itself; everything else is in flight.
pub const SETTLED_STATES: [&str; 3] = ["ready", "hibernating", "error"];

/// Ids per `id in (...)` query: keeps URLs well under common proxy limits.
pub(super) const IDS_PER_QUERY: usize = 50;

/// Provision shard reads per poll: a restart in front of 10,000 clusters
/// fills the management cluster names over a few polls instead of one burst.
pub(super) const SHARD_READS_PER_POLL: usize = 64;

/// Wait before asking again for a shard that failed or was not assigned yet.
pub(super) const SHARD_RETRY: Duration = Duration::from_secs(300);

/// The fields of a Clusters Service cluster the exporter reads.
#[derive(Debug, Clone, Deserialize)]
pub struct CsCluster {
    /// Filled from `href` when absent (see [`CsCluster::normalize`]).
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub href: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// Top-level state, the fallback when there is no `status` block.
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub status: Option<CsStatus>,
    #[serde(default)]
    pub creation_timestamp: Option<String>,
    #[serde(default)]
    pub azure: Option<CsAzure>,
    #[serde(default)]
    pub version: Option<CsVersion>,
    #[serde(default)]
    pub cloud_provider: Option<CsRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CsStatus {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub provision_error_code: Option<String>,
    #[serde(default)]
    pub provision_error_message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CsAzure {
    #[serde(default)]
    pub subscription_id: Option<String>,
    #[serde(default)]
    pub resource_group_name: Option<String>,
    #[serde(default)]
    pub resource_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CsVersion {
    #[serde(default)]
    pub id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CsRef {
    #[serde(default)]
    pub id: Option<String>,
}

/// `GET .../clusters/{id}/provision_shard`, the fields read.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProvisionShard {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub azure_shard: Option<AzureShard>,
    #[serde(default)]
    pub maestro_config: Option<MaestroShardConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AzureShard {
    #[serde(default)]
    pub aks_management_cluster_resource_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MaestroShardConfig {
    #[serde(default)]
    pub consumer_name: Option<String>,
}

impl CsCluster {
    /// Some CS answers carry the id only in `href`
    /// (`.../clusters/{id}`); take it from there. False when the cluster has
    /// no id at all.
    pub fn normalize(&mut self) -> bool {
        if self.id.is_empty()
            && let Some(href) = self.href.as_deref()
        {
            self.id = href
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string();
        }
        !self.id.is_empty()
    }
}

/// Decode one list item into a cluster with an id, or count it.
pub fn decode_cluster(
    item: &serde_json::value::RawValue,
    unknown: &mut Vec<UnknownValue>,
) -> Option<CsCluster> {
    let mut cluster = http::decode_item::<CsCluster>(item, "items[]", unknown)?;
    if cluster.normalize() {
        Some(cluster)
    } else {
        unknown.push(UnknownValue {
            field: "items[].id",
            value: String::new(),
        });
        None
    }
}

pub(super) fn non_empty(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// The management cluster a shard names: the AKS cluster's name, else the
/// Maestro consumer, else the shard id.
pub fn mgmt_cluster_of(shard: &ProvisionShard) -> Option<String> {
    let aks = shard
        .azure_shard
        .as_ref()
        .and_then(|a| non_empty(a.aks_management_cluster_resource_id.as_deref()))
        .and_then(|id| id.trim_end_matches('/').rsplit('/').next())
        .filter(|s| !s.is_empty());
    let consumer = shard
        .maestro_config
        .as_ref()
        .and_then(|m| non_empty(m.consumer_name.as_deref()));
    aks.or(consumer)
        .or(non_empty(shard.id.as_deref()))
        .map(str::to_string)
}

/// The ARM resource id a CS cluster stands for, lower-cased: THE join with
/// the RP frontend.
pub fn arm_resource_id(azure: &CsAzure) -> Option<String> {
    let sub = non_empty(azure.subscription_id.as_deref())?;
    let rg = non_empty(azure.resource_group_name.as_deref())?;
    let name = non_empty(azure.resource_name.as_deref())?;
    Some(
        format!(
            "/subscriptions/{sub}/resourcegroups/{rg}/providers/microsoft.redhatopenshift/hcpopenshiftclusters/{name}"
        )
        .to_lowercase(),
    )
}

/// The cluster's state: `status.state`, else the top-level `state`.
pub fn raw_state(cluster: &CsCluster) -> &str {
    cluster
        .status
        .as_ref()
        .and_then(|s| non_empty(s.state.as_deref()))
        .or(non_empty(cluster.state.as_deref()))
        .unwrap_or("")
}

pub(super) fn is_in_flight(cluster: &CsCluster) -> bool {
    !SETTLED_STATES.contains(&raw_state(cluster))
}

/// Turn one CS cluster into its `clusters_service` observation.
pub fn parse_cluster(
    cluster: &CsCluster,
    api: ClustersServiceApi,
    mgmt_cluster: Option<String>,
    unknown: &mut Vec<UnknownValue>,
) -> Observation {
    let status = cluster.status.clone().unwrap_or_default();
    let raw_state = raw_state(cluster);
    let phase = match crate::views::clusters_service::phase(raw_state) {
        Some(phase) => phase,
        None => {
            unknown.push(UnknownValue {
                field: "status.state",
                value: raw_state.to_string(),
            });
            Phase::Unknown
        }
    };
    let code = non_empty(status.provision_error_code.as_deref());
    let message = non_empty(status.provision_error_message.as_deref()).or(
        // The description explains an error state when no message is given
        // (how the RP backend words a CS failure, docs/design/02-hops-and-phases.md §2.4, §10.7).
        if code.is_some() || phase == Phase::Failed {
            non_empty(status.description.as_deref())
        } else {
            None
        },
    );
    let error = (code.is_some() || message.is_some()).then(|| HopError {
        code: code.unwrap_or_default().to_string(),
        message: message.unwrap_or_default().to_string(),
    });
    let azure = cluster.azure.clone().unwrap_or_default();
    let platform = match api {
        ClustersServiceApi::AroHcpV1alpha1 => Some("azure".to_string()),
        ClustersServiceApi::ClustersMgmtV1 => cluster
            .cloud_provider
            .as_ref()
            .and_then(|c| non_empty(c.id.as_deref()))
            .map(str::to_string),
    };
    let view = HopView {
        created_at: http::parse_time(
            cluster.creation_timestamp.as_deref(),
            "creation_timestamp",
            unknown,
        ),
        error: error.map(Box::new),
        identity: IdentityPatch {
            name: non_empty(cluster.name.as_deref()).map(str::to_string),
            resource_id: arm_resource_id(&azure),
            subscription_id: non_empty(azure.subscription_id.as_deref()).map(str::to_lowercase),
            resource_group: non_empty(azure.resource_group_name.as_deref()).map(str::to_string),
            version: cluster
                .version
                .as_ref()
                .and_then(|v| non_empty(v.id.as_deref()))
                .map(str::to_string),
            platform,
            mgmt_cluster,
            ..IdentityPatch::default()
        }
        .boxed(),
        ..HopView::new(raw_state, phase)
    };
    Observation {
        key: ClusterKey::Id(cluster.id.clone()),
        hop: Hop::ClustersService,
        via: Via::Direct,
        object: String::new(),
        change: Change::Upsert(Box::new(view)),
    }
}

/// Turn one list's raw items into observations; `mgmt_for` gives the cached
/// management cluster of a cluster id.
pub fn parse_items(
    items: Vec<http::RawItem>,
    api: ClustersServiceApi,
    mgmt_for: impl Fn(&str) -> Option<String>,
) -> Parsed {
    let mut parsed = Parsed::default();
    for item in items {
        if let Some(c) = decode_cluster(&item, &mut parsed.unknown) {
            let mgmt = mgmt_for(&c.id);
            let obs = parse_cluster(&c, api, mgmt, &mut parsed.unknown);
            parsed.observations.push(obs);
        }
    }
    parsed
}

/// The `search` of the fast poll.
pub fn in_flight_search() -> String {
    format!(
        "state not in ({})",
        quoted_list(SETTLED_STATES.iter().copied())
    )
}

/// The `search` of the slow poll.
pub fn settled_search() -> String {
    format!("state in ({})", quoted_list(SETTLED_STATES.iter().copied()))
}

/// How far before the previous poll's start the fast poll's "created since"
/// query reaches: clock skew between the exporter and Clusters Service.
pub const CREATED_SINCE_OVERLAP: jiff::SignedDuration = jiff::SignedDuration::from_secs(30);

/// The `search` of clusters created since `began` (minus the overlap),
/// whatever their state: one created and settled (failed) between two fast
/// polls is never in flight when a poll looks, and would otherwise wait for
/// the slow poll.
pub fn created_since_search(began: jiff::Timestamp) -> String {
    let from = began.checked_sub(CREATED_SINCE_OVERLAP).unwrap_or(began);
    format!("creation_timestamp >= {}", sql_quote(&from.to_string()))
}

/// `search` narrowed by the source's scope (docs/design/12-interfaces.md §12.4). Every
/// search this source sends is a conjunction, so ANDing needs no brackets.
pub fn scoped_search(search: Option<&str>, scope: Option<&str>) -> Option<String> {
    match (search, scope.filter(|c| !c.trim().is_empty())) {
        (None, None) => None,
        (Some(s), None) => Some(s.to_string()),
        (None, Some(c)) => Some(c.to_string()),
        (Some(s), Some(c)) => Some(format!("{s} and {c}")),
    }
}

/// The `search` that reads these clusters by id.
pub fn ids_search<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    format!("id in ({})", quoted_list(ids))
}

fn quoted_list<'a>(values: impl Iterator<Item = &'a str>) -> String {
    values.map(sql_quote).collect::<Vec<_>>().join(",")
}
