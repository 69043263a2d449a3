//! `/metrics` bodies: content negotiation between OpenMetrics and the 0.0.4
//! text format, and the assembly of pre-rendered fleet lines with the registry.

use std::collections::HashSet;
use std::sync::Arc;

use prometheus_client::registry::Registry;

use super::fleet::{FamilyId, RenderedCluster, all_families, write_header};

pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text,
}

impl Format {
    /// OpenMetrics when the client accepts it (Prometheus does), the 0.0.4 text
    /// format otherwise (curl, older scrapers). A `q=0` entry does not count.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let wants_openmetrics = accept.split(',').any(|entry| {
            let mut parts = entry.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        });
        if wants_openmetrics {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::Text => TEXT_CONTENT_TYPE,
        }
    }
}

/// Where a body is written: a `String` for a whole body, or a writer that
/// streams it out in chunks as it is assembled.
pub trait Sink {
    fn put(&mut self, text: &str) -> std::io::Result<()>;

    /// `family` of `cluster`'s lines. By default put together in
    /// `scratch` and handed on in one [`put`](Self::put); a sink that owns
    /// its buffer makes room for [`RenderedCluster::family_len`] bytes once
    /// and takes the pieces straight into it, saving a copy of the body
    /// (docs/design/05-metrics.md §5.5).
    fn put_family(
        &mut self,
        cluster: &RenderedCluster,
        family: FamilyId,
        scratch: &mut String,
    ) -> std::io::Result<()> {
        let lines = cluster.family_lines(family, scratch);
        if lines.is_empty() {
            return Ok(());
        }
        self.put(lines)
    }
}

impl Sink for String {
    fn put(&mut self, text: &str) -> std::io::Result<()> {
        self.push_str(text);
        Ok(())
    }

    fn put_family(
        &mut self,
        cluster: &RenderedCluster,
        family: FamilyId,
        _scratch: &mut String,
    ) -> std::io::Result<()> {
        self.reserve(cluster.family_len(family));
        cluster.write_family(family, self);
        Ok(())
    }
}

/// Any `io::Write` (a socket's chunk writer, a gzip encoder) as a [`Sink`].
pub struct WriteSink<W>(pub W);

impl<W: std::io::Write> Sink for WriteSink<W> {
    fn put(&mut self, text: &str) -> std::io::Result<()> {
        self.0.write_all(text.as_bytes())
    }
}

/// How many clusters ahead of the one being written a scrape asks the CPU
/// for the text it will read: far enough for a load from memory to arrive,
/// near enough for it to stay in the first-level cache until it is used
/// (docs/performance.md).
const PREFETCH_AHEAD: usize = 4;

/// The whole body: fleet families first (each header once, then every
/// cluster's lines), then the registry's families, then `# EOF` for OpenMetrics.
pub fn render(format: Format, clusters: &[Arc<RenderedCluster>], registry: &Registry) -> String {
    let fleet_bytes: usize = clusters.iter().map(|c| c.len()).sum();
    let mut out = String::with_capacity(fleet_bytes + 64 * 1024);
    // Writing to a String cannot fail.
    let _ = render_to(format, clusters, registry, &mut out);
    out
}

/// [`render`] into any sink, piece by piece: a streamed body is never
/// whole in memory (docs/performance.md).
pub fn render_to(
    format: Format,
    clusters: &[Arc<RenderedCluster>],
    registry: &Registry,
    out: &mut impl Sink,
) -> std::io::Result<()> {
    let mut header = String::new();
    let mut scratch = String::with_capacity(16 * 1024);
    for family in all_families() {
        let id = family.id;
        header.clear();
        write_header(&mut header, family);
        out.put(&header)?;
        for (at, cluster) in clusters.iter().enumerate() {
            // Each cluster's fields and text are somewhere else in memory:
            // its fields are asked for two steps ahead of its text, as the
            // fields say where the text is (docs/design/05-metrics.md §5.5).
            if let Some(ahead) = clusters.get(at + 2 * PREFETCH_AHEAD) {
                ahead.prefetch_fields(id);
            }
            if let Some(ahead) = clusters.get(at + PREFETCH_AHEAD) {
                ahead.prefetch_family(id);
            }
            out.put_family(cluster, id, &mut scratch)?;
        }
    }
    let mut registry_text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode_registry(&mut registry_text, registry);
    let registry_text = normalize_bucket_bounds(&registry_text);
    match format {
        Format::OpenMetrics => {
            out.put(&registry_text)?;
            out.put("# EOF\n")
        }
        Format::Text => out.put(&openmetrics_to_text(&registry_text)),
    }
}

/// `le="1200.0"` → `le="1200"`: the form Go clients write and dashboards and
/// alerts match on.
pub fn normalize_bucket_bounds(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("le=\"") {
        let (head, tail) = rest.split_at(pos + 4);
        out.push_str(head);
        match tail.find('"') {
            Some(end) => {
                let value = &tail[..end];
                out.push_str(value.strip_suffix(".0").unwrap_or(value));
                rest = &tail[end..];
            }
            None => {
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Rewrite prometheus-client's OpenMetrics text so a 0.0.4 parser keeps the
/// types: a counter family `x` with samples `x_total` is declared as
/// `x_total`; exemplars, `# UNIT` and `# EOF` go; OpenMetrics-only types map
/// to their 0.0.4 equivalents.
pub fn openmetrics_to_text(text: &str) -> String {
    let counters: HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            let kind = &line[..7];
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let tail = match (kind, tail) {
                ("# TYPE ", "unknown") => "untyped",
                ("# TYPE ", "info") | ("# TYPE ", "stateset") => "gauge",
                ("# TYPE ", "gaugehistogram") => "histogram",
                _ => tail,
            };
            out.push_str(kind);
            out.push_str(name);
            if counters.contains(name) {
                out.push_str("_total");
            }
            out.push(' ');
            out.push_str(tail);
            out.push('\n');
            continue;
        }
        let sample = match line.find(" # {") {
            Some(pos) => &line[..pos],
            None => line,
        };
        out.push_str(sample);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_prefers_openmetrics_when_accepted() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Format::Text
        );
    }

    #[test]
    fn counters_keep_their_type_in_the_text_format() {
        let om = "# HELP x_events Things.\n# TYPE x_events counter\nx_events_total{a=\"1\"} 3\n# HELP h Hist.\n# TYPE h histogram\nh_bucket{le=\"1.0\"} 1 # {trace_id=\"ab\"} 0.5\nh_count 1\n# UNIT h seconds\n# EOF\n";
        let text = openmetrics_to_text(&normalize_bucket_bounds(om));
        assert_eq!(
            text,
            "# HELP x_events_total Things.\n# TYPE x_events_total counter\nx_events_total{a=\"1\"} 3\n# HELP h Hist.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n"
        );
    }

    #[test]
    fn bucket_bounds_lose_only_a_trailing_point_zero() {
        assert_eq!(
            normalize_bucket_bounds("a{le=\"1200.0\"} 1\na{le=\"0.5\"} 1\na{le=\"+Inf\"} 1\n"),
            "a{le=\"1200\"} 1\na{le=\"0.5\"} 1\na{le=\"+Inf\"} 1\n"
        );
    }
}
