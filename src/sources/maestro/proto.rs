//! The wire types of Maestro's gRPC CloudEvents API
//! (`io.cloudevents.v1.CloudEventService`), generated at build time from
//! Maestro's own proto (build.rs, `proto/io/cloudevents/v1/cloudevent.proto`,
//! a verbatim copy of sdk-go's), and the names sdk-go gives the attributes
//! (docs/design/10-upstream-facts.md §10.12).
//!
//! The messages are not written here: a hand-written field number or type
//! that differed from upstream's would decode Maestro's events wrongly and
//! no test against our own encoder would notice. The simulated Maestro
//! includes the same generated code into a module of its own, so neither
//! side checks the other against a shared mistake.
//!
//! The service itself is called by hand (stream.rs): only `Subscribe` is
//! named, never `Publish` (docs/design/09b-reading-the-upstreams.md §9.10).

/// The messages of `io.cloudevents.v1`, as prost-build writes them: its
/// code, not ours, to lint; `PublishRequest` stays unused, as the source
/// never publishes.
#[allow(clippy::all, clippy::pedantic, dead_code)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/io.cloudevents.v1.rs"));
}

pub use generated::cloud_event::Data;
pub use generated::cloud_event_attribute_value::Attr;
pub use generated::{CloudEvent, CloudEventAttributeValue as AttributeValue, SubscriptionRequest};

/// The service's gRPC name.
pub const SERVICE: &str = "io.cloudevents.v1.CloudEventService";
/// The streaming method hcp-flow calls, as an HTTP/2 path.
pub const SUBSCRIBE_PATH: &str = "/io.cloudevents.v1.CloudEventService/Subscribe";

/// The event type of a heartbeat: `spec_version` and `id` only.
pub const HEARTBEAT_TYPE: &str = "io.open-cluster-management.cloudevents.heartbeat";
/// The event type of a bundle's status.
pub const STATUS_UPDATE_TYPE: &str =
    "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request";

/// The attribute keys sdk-go writes: `contenttype` bare, the others
/// prefixed `ce-`.
pub mod attr {
    pub const CONTENT_TYPE: &str = "contenttype";
    pub const TIME: &str = "ce-time";
    pub const RESOURCE_ID: &str = "ce-resourceid";
    pub const RESOURCE_VERSION: &str = "ce-resourceversion";
    pub const SEQUENCE_ID: &str = "ce-sequenceid";
    pub const STATUS_HASH: &str = "ce-statushash";
    pub const CLUSTER_NAME: &str = "ce-clustername";
    pub const ORIGINAL_SOURCE: &str = "ce-originalsource";
    pub const METADATA: &str = "ce-metadata";
    pub const DELETION_TIMESTAMP: &str = "ce-deletiontimestamp";
    /// OCM's log tracing: a JSON object of the object's
    /// `logging.open-cluster-management.io/` annotations.
    pub const LOG_TRACING: &str = "ce-logtracing";
}

impl AttributeValue {
    pub fn string(s: impl Into<String>) -> AttributeValue {
        AttributeValue {
            attr: Some(Attr::CeString(s.into())),
        }
    }

    pub fn integer(i: i32) -> AttributeValue {
        AttributeValue {
            attr: Some(Attr::CeInteger(i)),
        }
    }

    pub fn timestamp(t: jiff::Timestamp) -> AttributeValue {
        AttributeValue {
            attr: Some(Attr::CeTimestamp(prost_types::Timestamp {
                seconds: t.as_second(),
                nanos: t.subsec_nanosecond(),
            })),
        }
    }

    /// The value as text, whatever its string-like kind; integers in
    /// decimal (a `resourceversion` is either, by transport).
    pub fn as_text(&self) -> Option<String> {
        match self.attr.as_ref()? {
            Attr::CeString(s) | Attr::CeUri(s) | Attr::CeUriRef(s) => Some(s.clone()),
            Attr::CeInteger(i) => Some(i.to_string()),
            Attr::CeBoolean(_) | Attr::CeBytes(_) | Attr::CeTimestamp(_) => None,
        }
    }

    /// The value as an instant: a timestamp, or RFC 3339 text.
    pub fn as_time(&self) -> Option<jiff::Timestamp> {
        match self.attr.as_ref()? {
            Attr::CeTimestamp(t) => jiff::Timestamp::new(t.seconds, t.nanos).ok(),
            Attr::CeString(s) => s.parse().ok(),
            _ => None,
        }
    }
}

impl CloudEvent {
    pub fn attribute(&self, key: &str) -> Option<&AttributeValue> {
        self.attributes.get(key)
    }

    pub fn is_heartbeat(&self) -> bool {
        self.r#type == HEARTBEAT_TYPE
    }
}
