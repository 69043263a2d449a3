//! Why a list-then-watch session failed, classified for the metric label,
//! the log line and `/readyz`, and whether it disables an optional kind.

use std::time::Duration;

use crate::metrics::exporter::{KindState, RequestErrorKind};

use super::config::WatchKind;

/// Why one list-then-watch session of a kind ended.
#[derive(Debug, thiserror::Error)]
pub enum WatchFailure {
    #[error("nothing received from the API server, not even a bookmark, for {0:?}")]
    Idle(Duration),
    #[error("{verb} {resource}")]
    Request {
        verb: &'static str,
        resource: String,
        #[source]
        cause: kube::Error,
    },
    #[error("watch {resource}: the API server sent an error event: {} ({}, {})", .status.message, .status.reason, .status.code)]
    Event {
        resource: String,
        status: Box<kube::core::Status>,
    },
    #[error("list {0}: the answer carries no resourceVersion")]
    NoResourceVersion(String),
}

impl WatchFailure {
    /// The HTTP status the API server answered, if it answered one.
    pub(super) fn code(&self) -> Option<u16> {
        match self {
            WatchFailure::Request {
                cause: kube::Error::Api(status),
                ..
            } => Some(status.code),
            WatchFailure::Event { status, .. } => Some(status.code),
            _ => None,
        }
    }

    /// The exporter-wide error kind (the label of
    /// `hcpflow_source_request_errors_total`).
    pub(super) fn kind(&self) -> RequestErrorKind {
        match self {
            WatchFailure::Idle(_) => RequestErrorKind::timeout,
            WatchFailure::Request { cause, .. } => match cause_of(cause) {
                Cause::Timeout => RequestErrorKind::timeout,
                Cause::ConnectRefused | Cause::Dns | Cause::Tls | Cause::Connect => {
                    RequestErrorKind::connect
                }
                Cause::Status(code) => status_kind(code),
                Cause::Decode => RequestErrorKind::decode,
                Cause::Credentials => RequestErrorKind::credentials,
                Cause::Other => RequestErrorKind::other,
            },
            WatchFailure::Event { status, .. } => status_kind(status.code),
            WatchFailure::NoResourceVersion(_) => RequestErrorKind::decode,
        }
    }

    /// A finer cause than the metric label can hold (the label set is
    /// shared with the HTTP sources): for the log line and `/readyz`.
    pub(super) fn cause(&self) -> Cause {
        match self {
            WatchFailure::Idle(_) => Cause::Timeout,
            WatchFailure::Request { cause, .. } => cause_of(cause),
            WatchFailure::Event { status, .. } => Cause::Status(status.code),
            WatchFailure::NoResourceVersion(_) => Cause::Decode,
        }
    }
}

/// What went wrong with a kube request, as a person debugging it asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    ConnectRefused,
    Dns,
    Tls,
    Timeout,
    /// Another connection failure (reset, unreachable, closed early).
    Connect,
    /// The API server answered this HTTP status (its message is in the chain).
    Status(u16),
    Decode,
    Credentials,
    Other,
}

impl Cause {
    pub fn describe(self) -> String {
        match self {
            Cause::ConnectRefused => "connection refused".into(),
            Cause::Dns => "DNS lookup failed".into(),
            Cause::Tls => "TLS handshake failed".into(),
            Cause::Timeout => "timed out".into(),
            Cause::Connect => "connection failed".into(),
            Cause::Status(code) => format!("HTTP {code}"),
            Cause::Decode => "unreadable answer".into(),
            Cause::Credentials => "credentials".into(),
            Cause::Other => "error".into(),
        }
    }
}

/// Classify a kube client error by walking its causes: kube wraps hyper,
/// hyper-util, rustls and io errors in each other, and only the innermost
/// says whether it was a refused connection, a DNS failure or TLS.
pub fn cause_of(error: &kube::Error) -> Cause {
    match error {
        kube::Error::Api(status) => return Cause::Status(status.code),
        kube::Error::SerdeError(_)
        | kube::Error::FromUtf8(_)
        | kube::Error::LinesCodecMaxLineLengthExceeded => return Cause::Decode,
        kube::Error::Auth(_) => return Cause::Credentials,
        kube::Error::RustlsTls(_) => return Cause::Tls,
        _ => {}
    }
    let mut transport = false;
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Cause::ConnectRefused,
                std::io::ErrorKind::TimedOut => return Cause::Timeout,
                _ => transport = true,
            }
        }
        if e.is::<rustls::Error>() {
            return Cause::Tls;
        }
        if e.is::<tokio::time::error::Elapsed>() {
            return Cause::Timeout;
        }
        let text = e.to_string().to_ascii_lowercase();
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return Cause::Dns;
        }
        if text.contains("certificate") || text.contains("tls") {
            return Cause::Tls;
        }
        next = e.source();
    }
    match error {
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Cause::Connect
        }
        _ if transport => Cause::Connect,
        _ => Cause::Other,
    }
}

fn status_kind(code: u16) -> RequestErrorKind {
    match code {
        500..=599 => RequestErrorKind::status_5xx,
        400..=499 => RequestErrorKind::status_4xx,
        _ => RequestErrorKind::other,
    }
}

/// Whether `failure` disables `kind` rather than holding the source down:
/// a 404 or 403 of an optional kind (docs/design/09-reading-the-upstreams.md §9.7); every other
/// configured kind is required.
pub(super) fn disables(kind: WatchKind, failure: &WatchFailure) -> bool {
    kind.optional() && matches!(failure.code(), Some(404 | 403))
}

/// A 404 or 403 of an optional kind: absent or forbidden, with the cause a
/// person fixes it by.
pub(super) fn disabled_reason(failure: &WatchFailure, resource: &str) -> (KindState, String) {
    let message = match failure {
        WatchFailure::Request {
            cause: kube::Error::Api(status),
            ..
        } => status.message.clone(),
        WatchFailure::Event { status, .. } => status.message.clone(),
        _ => String::new(),
    };
    match failure.code() {
        Some(404) => (
            KindState::absent,
            format!("{resource} is not served by this API server (CRD not installed)"),
        ),
        _ => (
            KindState::forbidden,
            format!("RBAC forbids list/watch of {resource}: {message}"),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn causes_name_what_went_wrong() {
        let status = kube::core::Status::failure("agents is forbidden", "Forbidden").with_code(403);
        let api = kube::Error::Api(Box::new(status));
        assert_eq!(cause_of(&api), Cause::Status(403));
        let failure = WatchFailure::Request {
            verb: "list",
            resource: "agent-install.openshift.io/v1beta1/agents".into(),
            cause: api,
        };
        assert_eq!(failure.kind(), RequestErrorKind::status_4xx);
        let refused =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(cause_of(&refused), Cause::ConnectRefused);
        let reset =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(cause_of(&reset), Cause::Connect);
        let dns = kube::Error::Service("dns error: failed to lookup address information".into());
        assert_eq!(cause_of(&dns), Cause::Dns);
        let idle = WatchFailure::Idle(Duration::from_secs(90));
        assert_eq!(idle.kind(), RequestErrorKind::timeout);
        assert_eq!(idle.cause().describe(), "timed out");
    }
}
