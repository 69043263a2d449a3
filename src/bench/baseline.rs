//! The yardstick of the exposition bench (docs/performance.md): the same
//! series, rendered by prometheus-client's generic encoder in the same
//! process, so our scrape time is reported as a ratio that holds on a
//! noisy machine.
//!
//! The series are read back from our own OpenMetrics body: every sample
//! line becomes a gauge sample in a `Family<Vec<(String, String)>, _>` of
//! its metric name, which is how a generic exporter keeps arbitrary label
//! sets. Counter and histogram samples are rendered as gauges: the encoder
//! does the same work per sample (a name, a label set, a value).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type Samples = Family<Labels, Gauge<f64, AtomicU64>>;

/// A registry holding every sample of `openmetrics`, and how many it holds.
pub fn registry_of(openmetrics: &str) -> (Registry, usize) {
    let mut families: BTreeMap<String, Samples> = BTreeMap::new();
    let mut samples = 0;
    for line in openmetrics.lines() {
        let Some((name, labels, value)) = parse_sample(line) else {
            continue;
        };
        families
            .entry(name.to_string())
            .or_default()
            .get_or_create(&labels)
            .set(value);
        samples += 1;
    }
    let mut registry = Registry::default();
    for (name, family) in families {
        registry.register(name, "baseline copy of an hcp-flow family", family);
    }
    (registry, samples)
}

/// Render `registry` as prometheus-client does for its own exporters.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// `name{a="b",...} value [timestamp]` → its parts; None for comments,
/// blank lines and what does not parse.
fn parse_sample(line: &str) -> Option<(&str, Labels, f64)> {
    if line.starts_with('#') || line.is_empty() {
        return None;
    }
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(inner) => parse_labels(inner)?,
        None => (Vec::new(), rest),
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// The label pairs up to the closing `}`, and what follows it.
fn parse_labels(mut s: &str) -> Option<(Labels, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches(',');
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let (key, rest) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((key.to_string(), value));
        s = &rest[end + 1..];
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_of_an_exposition_is_registered_and_rendered() {
        let body = "# TYPE hcpflow_hop_phase gauge\n\
                    hcpflow_hop_phase{cluster_id=\"a\",hop=\"rp_frontend\",phase=\"ready\"} 1\n\
                    hcpflow_hop_phase{cluster_id=\"b\\\"q\",hop=\"rp_frontend\",phase=\"ready\"} 0\n\
                    hcpflow_creations_total 7\n\
                    # EOF\n";
        let (registry, samples) = registry_of(body);
        assert_eq!(samples, 3);
        let text = encode(&registry);
        assert!(
            text.contains(
                "hcpflow_hop_phase{cluster_id=\"a\",hop=\"rp_frontend\",phase=\"ready\"} 1.0"
            ),
            "{text}"
        );
        assert!(text.contains("cluster_id=\"b\\\"q\""), "{text}");
        // The generic encoder writes floats and an empty label set as such.
        assert!(text.contains("hcpflow_creations_total{} 7.0"), "{text}");
    }
}
