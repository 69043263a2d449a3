//! Links into the controllers' own traces (docs/design/07-traces.md §7.7).
//!
//! Clusters Service sets a W3C `traceparent` annotation on the HostedCluster
//! and NodePool it creates, and HyperShift links its reconcile spans to it;
//! a Kubernetes enhancement proposes `tracing.k8s.io/traceparent` for the
//! same purpose. When an object carries one, the hop span links to that
//! context, so an SRE goes from "stuck at hosted_cluster" to the reconcile
//! that handled it. Only a well-formed context is kept: an annotation is
//! upstream text, never trusted as ids until it parses.

/// The annotations read, in the order their links are added.
pub const TRACEPARENT_ANNOTATIONS: [&str; 2] = ["tracing.k8s.io/traceparent", "traceparent"];

/// A W3C trace context (`traceparent`): the span an object's controller
/// trace hangs from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

/// Why an annotation is not a trace context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceParentError {
    #[error("not four dash-separated fields of the W3C traceparent form")]
    Shape,
    #[error("version ff is invalid")]
    Version,
    #[error("not lower-case hexadecimal")]
    Hex,
    #[error("an all-zero trace id or parent id")]
    Zero,
}

fn hex_bytes<const N: usize>(s: &str) -> Result<[u8; N], TraceParentError> {
    if s.len() != N * 2
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(TraceParentError::Hex);
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).map_err(|_| TraceParentError::Hex)?;
    }
    Ok(out)
}

impl TraceParent {
    /// Parse a `traceparent` value as W3C Trace Context level 1 says: version
    /// `00` is exactly `00-<32 hex>-<16 hex>-<2 hex>`; a later version may
    /// append fields after a dash, and its first four are read the same way;
    /// `ff`, upper case, and all-zero ids are invalid.
    pub fn parse(value: &str) -> Result<TraceParent, TraceParentError> {
        let value = value.trim();
        let mut fields = value.splitn(5, '-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(TraceParentError::Shape);
        };
        let rest = fields.next();
        let [version] = hex_bytes::<1>(version)?;
        if version == 0xff {
            return Err(TraceParentError::Version);
        }
        // Version 00 has exactly four fields; a later one may have more.
        if version == 0 && rest.is_some() {
            return Err(TraceParentError::Shape);
        }
        let trace_id = hex_bytes::<16>(trace)?;
        let span_id = hex_bytes::<8>(span)?;
        let [flags] = hex_bytes::<1>(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return Err(TraceParentError::Zero);
        }
        Ok(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }

    /// Whether the caller sampled the trace.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-")?;
        for b in self.span_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

/// One link a hop's span carries: an object of the hop and the context its
/// annotation named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceLink {
    pub hop: super::Hop,
    pub object: Box<str>,
    pub context: TraceParent,
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_w3c_example_parses_and_prints_back() {
        let parsed = TraceParent::parse(VALID).expect("the W3C example");
        assert_eq!(parsed.trace_id[0], 0x4b);
        assert_eq!(parsed.span_id[7], 0xb7);
        assert!(parsed.sampled());
        assert_eq!(parsed.to_string(), VALID);
        // A later version may append fields; its first four read alike.
        let later = TraceParent::parse(
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes",
        )
        .expect("a later version");
        assert!(!later.sampled());
        assert_eq!(later.trace_id, parsed.trace_id);
    }

    #[test]
    fn malformed_contexts_are_refused_with_why() {
        for (value, why) in [
            ("", TraceParentError::Shape),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                TraceParentError::Shape,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                TraceParentError::Shape,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceParentError::Version,
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                TraceParentError::Hex,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                TraceParentError::Hex,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
                TraceParentError::Hex,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                TraceParentError::Zero,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                TraceParentError::Zero,
            ),
            ("not a context at all", TraceParentError::Shape),
        ] {
            assert_eq!(TraceParent::parse(value), Err(why), "{value:?}");
        }
    }
}
