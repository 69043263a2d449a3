//! The wire types of Maestro's gRPC CloudEvents API, written by hand from
//! the proto of the open-cluster-management SDK
//! (`io.cloudevents.v1.CloudEventService`; field numbers as there), and the
//! names sdk-go gives the attributes (docs/design.md §10.12).
//!
//! Only what hcp-flow reads or the simulated server writes: `proto_data`
//! (an `Any`) is kept as opaque bytes, `Publish` is named only so the
//! simulated server can refuse it and count it.

use bytes::Bytes;

/// The service's gRPC name.
pub const SERVICE: &str = "io.cloudevents.v1.CloudEventService";
/// The streaming method hcp-flow calls, as an HTTP/2 path.
pub const SUBSCRIBE_PATH: &str = "/io.cloudevents.v1.CloudEventService/Subscribe";
/// The method hcp-flow never calls (docs/design.md §9.10).
pub const PUBLISH_PATH: &str = "/io.cloudevents.v1.CloudEventService/Publish";

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
}

/// `CloudEvent`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CloudEvent {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub source: String,
    #[prost(string, tag = "3")]
    pub spec_version: String,
    #[prost(string, tag = "4")]
    pub r#type: String,
    #[prost(map = "string, message", tag = "5")]
    pub attributes: std::collections::HashMap<String, AttributeValue>,
    #[prost(oneof = "Data", tags = "6, 7, 8")]
    pub data: Option<Data>,
}

/// `CloudEvent.data`.
#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum Data {
    /// Where sdk-go puts the JSON payload.
    #[prost(bytes = "bytes", tag = "6")]
    BinaryData(Bytes),
    /// Ignored by Maestro; not read.
    #[prost(string, tag = "7")]
    TextData(String),
    /// A `google.protobuf.Any`, kept encoded; not read.
    #[prost(bytes = "bytes", tag = "8")]
    ProtoData(Bytes),
}

/// `CloudEventAttributeValue`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AttributeValue {
    #[prost(oneof = "Attr", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub attr: Option<Attr>,
}

/// `CloudEventAttributeValue.attr`.
#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum Attr {
    #[prost(bool, tag = "1")]
    Boolean(bool),
    #[prost(int32, tag = "2")]
    Integer(i32),
    #[prost(string, tag = "3")]
    String(String),
    #[prost(bytes = "bytes", tag = "4")]
    Bytes(Bytes),
    #[prost(string, tag = "5")]
    Uri(String),
    #[prost(string, tag = "6")]
    UriRef(String),
    #[prost(message, tag = "7")]
    Timestamp(Timestamp),
}

/// `google.protobuf.Timestamp`.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `SubscriptionRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SubscriptionRequest {
    #[prost(string, tag = "1")]
    pub source: String,
    #[prost(string, tag = "2")]
    pub cluster_name: String,
    #[prost(string, tag = "3")]
    pub data_type: String,
}

/// `PublishRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PublishRequest {
    #[prost(message, optional, tag = "1")]
    pub event: Option<CloudEvent>,
}

/// `google.protobuf.Empty`.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Empty {}

impl AttributeValue {
    pub fn string(s: impl Into<String>) -> AttributeValue {
        AttributeValue {
            attr: Some(Attr::String(s.into())),
        }
    }

    pub fn integer(i: i32) -> AttributeValue {
        AttributeValue {
            attr: Some(Attr::Integer(i)),
        }
    }

    pub fn timestamp(t: jiff::Timestamp) -> AttributeValue {
        AttributeValue {
            attr: Some(Attr::Timestamp(Timestamp {
                seconds: t.as_second(),
                nanos: t.subsec_nanosecond(),
            })),
        }
    }

    /// The value as text, whatever its string-like kind; integers in
    /// decimal (a `resourceversion` is either, by transport).
    pub fn as_text(&self) -> Option<String> {
        match self.attr.as_ref()? {
            Attr::String(s) | Attr::Uri(s) | Attr::UriRef(s) => Some(s.clone()),
            Attr::Integer(i) => Some(i.to_string()),
            Attr::Boolean(_) | Attr::Bytes(_) | Attr::Timestamp(_) => None,
        }
    }

    /// The value as an instant: a timestamp, or RFC 3339 text.
    pub fn as_time(&self) -> Option<jiff::Timestamp> {
        match self.attr.as_ref()? {
            Attr::Timestamp(t) => jiff::Timestamp::new(t.seconds, t.nanos).ok(),
            Attr::String(s) => s.parse().ok(),
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
