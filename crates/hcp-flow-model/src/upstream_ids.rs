//! The ids the upstreams give an operation, which SREs search their logs
//! by (docs/design/15b-operations.md §15.13): Open Cluster Management's log-tracing
//! annotations (`logging.open-cluster-management.io/<name>`, such as
//! `op-id`), which Clusters Service sets on what it creates and Maestro
//! carries to the ManifestWork (its CloudEvents' `logtracing` extension).
//! Kept bounded like every label value: a few per object, short.

use serde::Serialize;

use super::hop::Hop;

/// The annotations' prefix (OCM sdk-go's log tracing).
pub const LOG_TRACING_PREFIX: &str = "logging.open-cluster-management.io/";
/// At most this many per object: the ones OCM sets are one or two.
pub const MAX_PER_OBJECT: usize = 4;
/// Longest name (after the prefix) and value kept; longer ones are dropped,
/// not cut, so a kept id is always the whole id.
pub const MAX_NAME: usize = 63;
pub const MAX_VALUE: usize = 128;

/// One id an upstream gave: its name without the prefix, and its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct UpstreamId {
    pub name: Box<str>,
    pub value: Box<str>,
}

/// The log-tracing ids among an object's annotations, in name order,
/// bounded (see the constants).
pub fn log_tracing_ids<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<UpstreamId> {
    let mut ids: Vec<UpstreamId> = annotations
        .into_iter()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix(LOG_TRACING_PREFIX)?;
            let printable = |s: &str| s.chars().all(|c| !c.is_control());
            (!name.is_empty()
                && !value.is_empty()
                && name.len() <= MAX_NAME
                && value.len() <= MAX_VALUE
                && printable(name)
                && printable(value))
            .then(|| UpstreamId {
                name: name.into(),
                value: value.as_str().into(),
            })
        })
        .collect();
    ids.sort_by(|a, b| a.name.cmp(&b.name));
    ids.truncate(MAX_PER_OBJECT);
    ids
}

/// An upstream id as the timeline keeps it: which hop's object gave it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpstreamIdOf {
    pub hop: Hop,
    pub object: Box<str>,
    #[serde(flatten)]
    pub id: UpstreamId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_log_tracing_annotations_whole_and_bounded() {
        let long = "x".repeat(MAX_VALUE + 1);
        let annotations: Vec<(String, String)> = vec![
            (
                "logging.open-cluster-management.io/op-id".into(),
                "4c1d".into(),
            ),
            (
                "logging.open-cluster-management.io/zz".into(),
                "last".into(),
            ),
            ("traceparent".into(), "00-…".into()),
            ("logging.open-cluster-management.io/too-long".into(), long),
            (
                "logging.open-cluster-management.io/".into(),
                "no name".into(),
            ),
            ("logging.open-cluster-management.io/a".into(), "1".into()),
            ("logging.open-cluster-management.io/b".into(), "2".into()),
            ("logging.open-cluster-management.io/c".into(), "3".into()),
        ];
        let ids = log_tracing_ids(annotations.iter().map(|(k, v)| (k, v)));
        let names: Vec<&str> = ids.iter().map(|i| &*i.name).collect();
        assert_eq!(names, ["a", "b", "c", "op-id"], "sorted, four at most");
        assert_eq!(&*ids[3].value, "4c1d");
    }
}
