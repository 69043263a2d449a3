//! Deterministic trace and span ids (DESIGN section 4): every instance and every
//! restart derives the same ids from the cluster id, so spans from the service
//! and management sides land in one trace without coordination.

use sha2::{Digest, Sha256};

use crate::model::Hop;

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

#[cfg(test)]
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

    const EXPECTED_ABC: &str = "b5b726468cd96d6f947e49a384df83ed";
}
