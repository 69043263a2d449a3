//! What the benches read back from a scrape of the exporter they measure:
//! one family's samples, a sample's labels and value. A bench reads the
//! text Prometheus reads, not the exporter's insides.
//!
//! A family's samples follow one another, after its `# HELP`/`# TYPE`
//! lines and before the next family's: a family is found by its first
//! sample and read up to the next comment line, so a bench that reads a
//! few self-metrics of a 50 MiB body does not walk the whole body.

use std::collections::HashSet;

/// One sample line: its metric name, labels and value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// What is between the braces, `""` when there are none.
    labels: &'a str,
    pub value: f64,
}

impl<'a> Sample<'a> {
    /// Parses one line of the text or OpenMetrics format; `None` for
    /// comments, empty lines and anything malformed.
    pub fn parse(line: &'a str) -> Option<Sample<'a>> {
        if line.starts_with('#') || line.is_empty() {
            return None;
        }
        let name_end = line.find(['{', ' '])?;
        let name = &line[..name_end];
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(after) => {
                let close = labels_end(after)?;
                (&after[..close], &after[close + 1..])
            }
            None => ("", &line[name_end..]),
        };
        let value = rest.split_whitespace().next()?.parse().ok()?;
        Some(Sample {
            name,
            labels,
            value,
        })
    }

    /// The value of label `key`, as written (escapes kept).
    pub fn label(&self, key: &str) -> Option<&'a str> {
        let mut rest = self.labels;
        while !rest.is_empty() {
            let eq = rest.find("=\"")?;
            let (name, after) = (&rest[..eq], &rest[eq + 2..]);
            let end = quote_end(after)?;
            if name == key {
                return Some(&after[..end]);
            }
            rest = after[end + 1..].trim_start_matches(',');
        }
        None
    }
}

/// Where a label value that starts at `s` ends: its closing quote,
/// skipping escaped characters.
fn quote_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Where the label set that starts at `s` (after its `{`) ends: the `}`
/// outside any quoted value.
fn labels_end(s: &str) -> Option<usize> {
    let mut i = 0;
    while i < s.len() {
        match s.as_bytes()[i] {
            b'}' => return Some(i),
            b'"' => i += quote_end(&s[i + 1..])? + 2,
            _ => i += 1,
        }
    }
    None
}

/// The samples named exactly `name` (`hcpflow_source_requests_total`,
/// `hcpflow_cluster_info`, ...) in a scrape's body.
pub fn family<'a>(body: &'a str, name: &'a str) -> impl Iterator<Item = Sample<'a>> + 'a {
    let start = first_sample(body, name);
    start
        .map(|at| body[at..].lines())
        .into_iter()
        .flatten()
        .take_while(|line| !line.starts_with('#'))
        .filter_map(Sample::parse)
        .filter(move |s| s.name == name)
}

/// Where the first sample line of `name` starts.
fn first_sample(body: &str, name: &str) -> Option<usize> {
    let starts = |at: usize| {
        body[at..]
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(['{', ' ']))
    };
    if starts(0) {
        return Some(0);
    }
    let needle = format!("\n{name}");
    let mut from = 0;
    while let Some(found) = body[from..].find(&needle) {
        let at = from + found + 1;
        if starts(at) {
            return Some(at);
        }
        from = at;
    }
    None
}

/// A counter or gauge by its `source` label: `(source, value)` for each
/// sample of `name`.
pub fn by_source(body: &str, name: &str) -> Vec<(String, f64)> {
    family(body, name)
        .filter_map(|s| Some((s.label("source")?.to_string(), s.value)))
        .collect()
}

/// `value` of the sample of `name` whose `key` label is `value`.
pub fn value_where(body: &str, name: &str, key: &str, value: &str) -> Option<f64> {
    family(body, name)
        .find(|s| s.label(key) == Some(value))
        .map(|s| s.value)
}

/// The value of an unlabelled gauge or counter.
pub fn value_of(body: &str, name: &str) -> Option<f64> {
    family(body, name).next().map(|s| s.value)
}

/// `hcpflow_source_up{source}`: `Some(true)` when 1, `None` when the
/// scrape has no such sample.
pub fn source_up(body: &str, source: &str) -> Option<bool> {
    value_where(body, "hcpflow_source_up", "source", source).map(|v| v == 1.0)
}

/// `hcpflow_source_kind_info{source}`: each kind of `source` with its state.
pub fn kind_states(body: &str, source: &str) -> Vec<(String, String)> {
    family(body, "hcpflow_source_kind_info")
        .filter(|s| s.label("source") == Some(source))
        .filter_map(|s| Some((s.label("kind")?.to_string(), s.label("state")?.to_string())))
        .collect()
}

/// Clusters an exporter tracks (`hcpflow_cluster_info` has one series per
/// tracked cluster), by id.
pub fn cluster_ids(body: &str) -> HashSet<&str> {
    family(body, "hcpflow_cluster_info")
        .filter_map(|s| s.label("cluster_id"))
        .collect()
}

/// Objects of `hcpflow_hop_condition` for a Maestro bundle whose Available
/// is True, in a scrape's body.
pub fn available_bundles(body: &str) -> HashSet<&str> {
    family(body, "hcpflow_hop_condition")
        .filter(|s| {
            s.label("hop") == Some("maestro_bundle")
                && s.label("condition") == Some("Available")
                && s.label("status") == Some("true")
        })
        .filter_map(|s| s.label("object"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::in_process::synthetic_store;
    use crate::metrics::exposition::Format;

    /// The Maestro figure reads the exporter's real exposition: every
    /// synthetic cluster's bundle is Available, and only bundles are found
    /// (the ManifestWork carries the same condition under another hop).
    #[test]
    fn available_bundles_are_read_from_a_real_scrape() {
        let store = synthetic_store(3);
        for format in [Format::OpenMetrics, Format::Text] {
            let body = store.scrape(format);
            let found: std::collections::BTreeSet<&str> =
                available_bundles(&body).into_iter().collect();
            assert_eq!(
                found,
                ["bundle-0", "bundle-1", "bundle-2"].into_iter().collect()
            );
        }
    }

    /// Every tracked cluster has one `hcpflow_cluster_info`.
    #[test]
    fn cluster_ids_are_read_from_a_real_scrape() {
        let store = synthetic_store(4);
        let body = store.scrape(Format::OpenMetrics);
        let ids = cluster_ids(&body);
        assert_eq!(ids.len(), 4, "{ids:?}");
        assert_eq!(ids.len(), store.len());
        assert!(ids.iter().all(|id| !id.is_empty() && !id.contains('"')));
    }

    /// The warm restart and the requests figure read the sources' own
    /// series from a real scrape: Maestro down while its stream has not
    /// listed, up once it has, each kind in its state, and its requests.
    #[test]
    fn source_health_and_requests_are_read_from_a_real_scrape() {
        let store = synthetic_store(2);
        let health = store.health();
        health.declare("maestro", &["resource-bundles", "resource-bundle-stream"]);
        health.declare("rp_frontend", &["hcpOpenShiftClusters"]);
        health.listed("maestro", "resource-bundles");
        health.listed("rp_frontend", "hcpOpenShiftClusters");
        let metrics = store.exporter_metrics();
        for _ in 0..3 {
            metrics.request_done("maestro", 0.01);
        }
        metrics.request_done("rp_frontend", 0.01);

        let body = store.scrape(Format::OpenMetrics);
        assert_eq!(source_up(&body, "maestro"), Some(false), "{body}");
        assert_eq!(source_up(&body, "rp_frontend"), Some(true));
        assert_eq!(source_up(&body, "clusters_service"), None);
        let mut kinds = kind_states(&body, "maestro");
        kinds.sort();
        assert_eq!(
            kinds,
            [
                ("resource-bundle-stream".to_string(), "pending".to_string()),
                ("resource-bundles".to_string(), "ok".to_string()),
            ]
        );
        let mut requests = by_source(&body, "hcpflow_source_requests_total");
        requests.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            requests,
            [
                ("maestro".to_string(), 3.0),
                ("rp_frontend".to_string(), 1.0),
                // The synthetic store's own source.
                ("test".to_string(), 0.0),
            ]
        );

        health.listed("maestro", "resource-bundle-stream");
        let body = store.scrape(Format::Text);
        assert_eq!(source_up(&body, "maestro"), Some(true));
        assert!(
            kind_states(&body, "maestro")
                .iter()
                .all(|(_, state)| state == "ok")
        );
    }

    /// The state store's series, unlabelled and by `result`, as the
    /// exporter's registry encodes them.
    #[test]
    fn the_state_stores_series_are_read_from_a_real_encoding() {
        use crate::state_store::{StateStoreMetrics, WriteLabels, WriteResult};
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = StateStoreMetrics::register(&mut registry);
        let encode = |registry: &prometheus_client::registry::Registry| {
            let mut body = String::new();
            prometheus_client::encoding::text::encode(&mut body, registry).unwrap();
            body
        };
        let body = encode(&registry);
        assert_eq!(value_of(&body, "hcpflow_state_store_clusters"), Some(0.0));
        let ok = |body: &str| value_where(body, "hcpflow_state_store_writes_total", "result", "ok");
        assert_eq!(ok(&body), Some(0.0), "{body}");
        for _ in 0..2 {
            metrics
                .writes
                .get_or_create(&WriteLabels {
                    result: WriteResult::ok,
                })
                .inc();
        }
        metrics.clusters.set(30);
        let body = encode(&registry);
        assert_eq!(ok(&body), Some(2.0));
        assert_eq!(
            value_where(&body, "hcpflow_state_store_writes_total", "result", "error"),
            Some(0.0)
        );
        assert_eq!(value_of(&body, "hcpflow_state_store_clusters"), Some(30.0));
    }

    /// Labels are read whole, whatever their order and escapes; a name
    /// that merely starts another's is not that family; a family is read
    /// up to the next one's comments.
    #[test]
    fn samples_are_parsed_whole() {
        let line = r#"m{a="x,y=\"z\"",b="}"} 2.5 # {trace_id="1"} 1"#;
        let sample = Sample::parse(line).unwrap();
        assert_eq!(sample.name, "m");
        assert_eq!(sample.label("a"), Some(r#"x,y=\"z\""#));
        assert_eq!(sample.label("b"), Some("}"));
        assert_eq!(sample.label("y"), None);
        assert_eq!(sample.value, 2.5);
        assert_eq!(Sample::parse("plain 7").map(|s| s.value), Some(7.0));
        assert_eq!(Sample::parse("# HELP m x"), None);
        assert_eq!(Sample::parse("m{a=\"1\"} notanumber"), None);

        let body = "# TYPE up_total counter\nup_total_more 9\nup_total{s=\"a\"} 1\nup_total{s=\"b\"} 2\n# TYPE other gauge\nup_total{s=\"c\"} 3\n";
        let values: Vec<f64> = family(body, "up_total").map(|s| s.value).collect();
        assert_eq!(values, [1.0, 2.0]);
        assert_eq!(family(body, "up").count(), 0);
        assert_eq!(value_of("only 4\n", "only"), Some(4.0));
    }
}
