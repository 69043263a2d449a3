//! Trace and span ids of a creation, derived from the cluster id alone, so
//! every instance and every restart agrees on them without coordination.
//! They belong to the model because both the metrics (exemplars) and the
//! traces name a creation by them.

use sha2::{Digest, Sha256};

use super::hop::{Hop, Via};

/// First 16 bytes of SHA-256 of `"hcp-flow/" + cluster_id`.
pub fn trace_id(cluster_id: &str) -> [u8; 16] {
    let digest = Sha256::digest(format!("hcp-flow/{cluster_id}").as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

/// The trace id as 32 lower-case hex digits (the W3C and exemplar form).
pub fn trace_id_hex(cluster_id: &str) -> String {
    hex::encode(trace_id(cluster_id))
}

/// First 8 bytes of SHA-256 of `<trace id hex> + "/" + <hop>`; the root span
/// uses the hop name `root`.
pub fn span_id(cluster_id: &str, hop: Option<Hop>) -> [u8; 8] {
    let name = hop.map(Hop::as_str).unwrap_or("root");
    let digest = Sha256::digest(format!("{}/{name}", trace_id_hex(cluster_id)).as_bytes());
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    id
}

/// The span id of a hop as seen through `via`: [`span_id`] for the direct
/// view; for the view through Maestro's status feedback, the same derivation
/// over `<hop>/maestro`, so a service-scope and a management-scope instance
/// never export two different spans under one id.
pub fn span_id_of(cluster_id: &str, hop: Option<Hop>, via: Via) -> [u8; 8] {
    match (hop, via) {
        (Some(hop), Via::Maestro) => {
            let name = format!("{}/{}/maestro", trace_id_hex(cluster_id), hop.as_str());
            let digest = Sha256::digest(name.as_bytes());
            let mut id = [0u8; 8];
            id.copy_from_slice(&digest[..8]);
            id
        }
        _ => span_id(cluster_id, hop),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn trace_id_is_the_truncated_sha256_of_the_prefixed_cluster_id() {
        // Independently computed: printf 'hcp-flow/abc' | sha256sum | cut -c1-32
        assert_eq!(trace_id_hex("abc"), EXPECTED_ABC);
        assert_ne!(span_id("abc", None), span_id("abc", Some(Hop::RpFrontend)));
        assert_eq!(
            span_id("abc", Some(Hop::NodePool)),
            span_id("abc", Some(Hop::NodePool))
        );
    }

    #[test]
    fn the_worked_example_of_docs_traces_md_holds() {
        assert_eq!(trace_id_hex("2f8a1c"), "146d347c53f06b77ec6f196d44cf72e7");
        assert_eq!(hex::encode(span_id("2f8a1c", None)), "2615d52725aef81d");
        assert_eq!(
            hex::encode(span_id("2f8a1c", Some(Hop::ClustersService))),
            "b8efbc8f0199aab2"
        );
        assert_eq!(
            hex::encode(span_id_of("2f8a1c", Some(Hop::HostedCluster), Via::Maestro)),
            "89115303413c7396"
        );
        assert_eq!(
            span_id_of("2f8a1c", Some(Hop::HostedCluster), Via::Direct),
            span_id("2f8a1c", Some(Hop::HostedCluster))
        );
    }

    const EXPECTED_ABC: &str = "b5b726468cd96d6f947e49a384df83ed";
}
