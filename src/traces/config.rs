//! OTLP export settings, read only from the standard OpenTelemetry variables.
//!
//! Everything takes an explicit variable map: the process environment is
//! global, and tests that build several configurations must not race on it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use percent_encoding::percent_decode_str;
use url::Url;

pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
pub const OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
pub const OTEL_EXPORTER_OTLP_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
pub const OTEL_EXPORTER_OTLP_TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
pub const OTEL_EXPORTER_OTLP_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
pub const OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
pub const OTEL_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
pub const OTEL_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
pub const OTEL_BSP_SCHEDULE_DELAY: &str = "OTEL_BSP_SCHEDULE_DELAY";
pub const OTEL_BSP_MAX_QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
pub const OTEL_BSP_MAX_EXPORT_BATCH_SIZE: &str = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE";

/// The service name when neither `OTEL_SERVICE_NAME` nor a `service.name`
/// resource attribute says otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "hcp-flow";

/// The process environment as a map (the one place that reads it).
pub fn process_env() -> HashMap<String, String> {
    std::env::vars().collect()
}

#[derive(Debug, thiserror::Error)]
pub enum OtlpConfigError {
    #[error("{var}={value:?} is not a valid URL")]
    Endpoint {
        var: &'static str,
        value: String,
        #[source]
        cause: url::ParseError,
    },
    #[error("{var}={value:?} must use http or https")]
    Scheme { var: &'static str, value: String },
    #[error("{var}={value:?} is not supported: use grpc or http/protobuf")]
    Protocol { var: &'static str, value: String },
    #[error("{var}: entry {entry:?} is not key=value")]
    Pair { var: &'static str, entry: String },
    #[error("{var}={value:?} is not a whole number")]
    Number {
        var: &'static str,
        value: String,
        #[source]
        cause: std::num::ParseIntError,
    },
}

/// The OTLP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// Batching limits, from the standard `OTEL_BSP_*` variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSettings {
    /// Spans waiting for export; beyond this new spans are dropped (and counted).
    pub max_queue: usize,
    pub max_batch: usize,
    /// A partial batch is sent after this long.
    pub delay: Duration,
}

impl Default for BatchSettings {
    fn default() -> Self {
        // The OpenTelemetry specification's defaults.
        BatchSettings {
            max_queue: 2048,
            max_batch: 512,
            delay: Duration::from_secs(5),
        }
    }
}

/// Where and how traces are exported.
#[derive(Clone, Debug, PartialEq)]
pub struct OtlpConfig {
    pub protocol: Protocol,
    /// The full traces URL: `/v1/traces` already appended for HTTP when it
    /// came from `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Url,
    /// Sent with every export request (tokens for a hosted backend). Never logged.
    pub headers: BTreeMap<String, String>,
    pub timeout: Duration,
    /// `service.name` and the `OTEL_RESOURCE_ATTRIBUTES` pairs.
    pub resource: BTreeMap<String, String>,
    pub batch: BatchSettings,
}

impl OtlpConfig {
    /// The configuration the standard variables describe, or `None` when no
    /// endpoint is set (or the SDK or trace export is switched off).
    pub fn from_env(env: &HashMap<String, String>) -> Result<Option<OtlpConfig>, OtlpConfigError> {
        let get = |var: &str| env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty());
        if get(OTEL_SDK_DISABLED).is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || get(OTEL_TRACES_EXPORTER).is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }

        let (protocol_var, protocol) = match get(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) {
            Some(p) => (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, Some(p)),
            None => (
                OTEL_EXPORTER_OTLP_PROTOCOL,
                get(OTEL_EXPORTER_OTLP_PROTOCOL),
            ),
        };
        // The specification's default transport.
        let protocol = match protocol {
            None | Some("http/protobuf") => Protocol::HttpProtobuf,
            Some("grpc") => Protocol::Grpc,
            Some(other) => {
                return Err(OtlpConfigError::Protocol {
                    var: protocol_var,
                    value: other.to_string(),
                });
            }
        };

        let endpoint = if let Some(value) = get(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
            // The per-signal variable is used as given.
            parse_endpoint(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, value)?
        } else if let Some(value) = get(OTEL_EXPORTER_OTLP_ENDPOINT) {
            match protocol {
                Protocol::Grpc => parse_endpoint(OTEL_EXPORTER_OTLP_ENDPOINT, value)?,
                Protocol::HttpProtobuf => {
                    let base = value.trim_end_matches('/');
                    parse_endpoint(OTEL_EXPORTER_OTLP_ENDPOINT, &format!("{base}/v1/traces"))?
                }
            }
        } else {
            return Ok(None);
        };

        let headers = match get(OTEL_EXPORTER_OTLP_TRACES_HEADERS) {
            Some(v) => parse_pairs(OTEL_EXPORTER_OTLP_TRACES_HEADERS, v)?,
            None => match get(OTEL_EXPORTER_OTLP_HEADERS) {
                Some(v) => parse_pairs(OTEL_EXPORTER_OTLP_HEADERS, v)?,
                None => BTreeMap::new(),
            },
        };

        let timeout_ms = match get(OTEL_EXPORTER_OTLP_TRACES_TIMEOUT) {
            Some(v) => Some(parse_number(OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, v)?),
            None => get(OTEL_EXPORTER_OTLP_TIMEOUT)
                .map(|v| parse_number(OTEL_EXPORTER_OTLP_TIMEOUT, v))
                .transpose()?,
        };

        let defaults = BatchSettings::default();
        let number_or = |var: &'static str, default: u64| -> Result<u64, OtlpConfigError> {
            get(var).map_or(Ok(default), |v| parse_number(var, v))
        };
        let batch = BatchSettings {
            max_queue: number_or(OTEL_BSP_MAX_QUEUE_SIZE, defaults.max_queue as u64)?.max(1)
                as usize,
            max_batch: number_or(OTEL_BSP_MAX_EXPORT_BATCH_SIZE, defaults.max_batch as u64)?.max(1)
                as usize,
            delay: Duration::from_millis(number_or(
                OTEL_BSP_SCHEDULE_DELAY,
                defaults.delay.as_millis() as u64,
            )?),
        };

        Ok(Some(OtlpConfig {
            protocol,
            endpoint,
            headers,
            timeout: Duration::from_millis(timeout_ms.unwrap_or(10_000)),
            resource: resource_attributes(env)?,
            batch,
        }))
    }

    /// The OpenTelemetry resource every exported span carries.
    pub fn resource(&self) -> Resource {
        Resource::builder_empty()
            .with_attributes(
                self.resource
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
            )
            .build()
    }

    pub fn service_name(&self) -> &str {
        self.resource
            .get("service.name")
            .map_or(DEFAULT_SERVICE_NAME, String::as_str)
    }
}

/// `OTEL_RESOURCE_ATTRIBUTES`, then `OTEL_SERVICE_NAME` over its
/// `service.name`, then the defaults for what is still missing.
pub fn resource_attributes(
    env: &HashMap<String, String>,
) -> Result<BTreeMap<String, String>, OtlpConfigError> {
    let get = |var: &str| env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut attributes = match get(OTEL_RESOURCE_ATTRIBUTES) {
        Some(v) => parse_pairs(OTEL_RESOURCE_ATTRIBUTES, v)?,
        None => BTreeMap::new(),
    };
    if let Some(name) = get(OTEL_SERVICE_NAME) {
        attributes.insert("service.name".to_string(), name.to_string());
    }
    attributes
        .entry("service.name".to_string())
        .or_insert_with(|| DEFAULT_SERVICE_NAME.to_string());
    attributes
        .entry("service.version".to_string())
        .or_insert_with(|| env!("CARGO_PKG_VERSION").to_string());
    Ok(attributes)
}

fn parse_endpoint(var: &'static str, value: &str) -> Result<Url, OtlpConfigError> {
    let url = Url::parse(value).map_err(|cause| OtlpConfigError::Endpoint {
        var,
        value: value.to_string(),
        cause,
    })?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        _ => Err(OtlpConfigError::Scheme {
            var,
            value: value.to_string(),
        }),
    }
}

fn parse_number(var: &'static str, value: &str) -> Result<u64, OtlpConfigError> {
    value.parse().map_err(|cause| OtlpConfigError::Number {
        var,
        value: value.to_string(),
        cause,
    })
}

/// The W3C baggage-like list both `*_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES`
/// use: `key=value` pairs separated by commas, values percent-encoded.
fn parse_pairs(
    var: &'static str,
    value: &str,
) -> Result<BTreeMap<String, String>, OtlpConfigError> {
    let mut pairs = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(OtlpConfigError::Pair {
                var,
                // Only the key part: a header value may be a secret.
                entry: entry.chars().take_while(|c| *c != ':').take(40).collect(),
            });
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(OtlpConfigError::Pair {
                var,
                entry: String::new(),
            });
        }
        let value = percent_decode_str(value.trim()).decode_utf8_lossy();
        pairs.insert(key.to_string(), value.into_owned());
    }
    Ok(pairs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn no_endpoint_means_no_export() {
        assert_eq!(OtlpConfig::from_env(&env(&[])).unwrap(), None);
        let only_protocol = env(&[(OTEL_EXPORTER_OTLP_PROTOCOL, "grpc")]);
        assert_eq!(OtlpConfig::from_env(&only_protocol).unwrap(), None);
        let disabled = env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318"),
            (OTEL_SDK_DISABLED, "true"),
        ]);
        assert_eq!(OtlpConfig::from_env(&disabled).unwrap(), None);
        let none = env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318"),
            (OTEL_TRACES_EXPORTER, "none"),
        ]);
        assert_eq!(OtlpConfig::from_env(&none).unwrap(), None);
    }

    #[test]
    fn http_appends_the_signal_path_to_the_base_endpoint_only() {
        let base = env(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318/")]);
        let config = OtlpConfig::from_env(&base).unwrap().unwrap();
        assert_eq!(config.protocol, Protocol::HttpProtobuf);
        assert_eq!(config.endpoint.as_str(), "http://collector:4318/v1/traces");

        let signal = env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://ignored:4318"),
            (
                OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
                "https://tempo:8443/otlp/traces",
            ),
        ]);
        let config = OtlpConfig::from_env(&signal).unwrap().unwrap();
        assert_eq!(config.endpoint.as_str(), "https://tempo:8443/otlp/traces");
    }

    #[test]
    fn grpc_uses_the_endpoint_as_given() {
        let grpc = env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4317"),
            (OTEL_EXPORTER_OTLP_PROTOCOL, "grpc"),
            (OTEL_EXPORTER_OTLP_TIMEOUT, "2500"),
        ]);
        let config = OtlpConfig::from_env(&grpc).unwrap().unwrap();
        assert_eq!(config.protocol, Protocol::Grpc);
        assert_eq!(config.endpoint.as_str(), "http://collector:4317/");
        assert_eq!(config.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn headers_and_resource_attributes_are_percent_decoded_pairs() {
        let vars = env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318"),
            (
                OTEL_EXPORTER_OTLP_HEADERS,
                "authorization=Bearer%20abc, x-scope-orgid=ops",
            ),
            (
                OTEL_RESOURCE_ATTRIBUTES,
                "service.name=from-attrs,deployment.environment.name=int%2Fwest",
            ),
            (OTEL_SERVICE_NAME, "hcp-flow-mgmt-1"),
            (OTEL_BSP_MAX_QUEUE_SIZE, "16"),
        ]);
        let config = OtlpConfig::from_env(&vars).unwrap().unwrap();
        assert_eq!(config.headers["authorization"], "Bearer abc");
        assert_eq!(config.headers["x-scope-orgid"], "ops");
        assert_eq!(config.service_name(), "hcp-flow-mgmt-1");
        assert_eq!(config.resource["deployment.environment.name"], "int/west");
        assert_eq!(config.batch.max_queue, 16);
        assert_eq!(config.batch.max_batch, 512);
    }

    #[test]
    fn bad_values_are_errors_naming_the_variable() {
        let json = env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318"),
            (OTEL_EXPORTER_OTLP_PROTOCOL, "http/json"),
        ]);
        let err = OtlpConfig::from_env(&json).unwrap_err();
        assert!(
            err.to_string().contains(OTEL_EXPORTER_OTLP_PROTOCOL),
            "{err}"
        );

        let bad_url = env(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "collector:4318")]);
        assert!(matches!(
            OtlpConfig::from_env(&bad_url),
            Err(OtlpConfigError::Scheme { .. })
        ));

        let secret = env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318"),
            (OTEL_EXPORTER_OTLP_HEADERS, "authorization: Bearer s3cret"),
        ]);
        let err = OtlpConfig::from_env(&secret).unwrap_err().to_string();
        assert!(!err.contains("s3cret"), "{err}");
    }
}
