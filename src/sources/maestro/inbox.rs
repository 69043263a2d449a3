//! What the task reading Maestro's stream hands the source: events,
//! evidence of life, and why the stream was lost (docs/design/09b-reading-the-upstreams.md §9.10).
//! Apart from the stream and the poller, which both read it.

use std::time::Duration;

use tokio::sync::mpsc;

use super::proto::CloudEvent;
use crate::metrics::exporter::RequestErrorKind;
use crate::sources::health::cause_chain;

/// Events read ahead of the source: past this the source is too far behind
/// (a list of minutes under heavy churn), and the stream is dropped and
/// reconnected rather than holding unbounded memory; the reconnect's list
/// reconciles.
pub(super) const QUEUE: usize = 20_000;

/// Events applied in one batch.
pub(super) const BATCH: usize = 512;

/// Why the stream could not be had or was lost.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("reading the gRPC bearer token file {path}")]
    Token {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the gRPC bearer token in {path} is not a valid header value")]
    TokenValue { path: String },
    #[error("reading TLS material from {path}")]
    TlsFile {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("building the TLS 1.3 client")]
    Tls(#[source] rustls::Error),
    #[error("the gRPC address {0} has no host")]
    Address(String),
    #[error("connecting to {address}")]
    Connect {
        address: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("no connection to {address} within {timeout:?}")]
    ConnectTimeout { address: String, timeout: Duration },
    #[error("subscribing as source {source_id}")]
    Subscribe {
        source_id: String,
        #[source]
        source: tonic::Status,
    },
    #[error("no answer to the subscription within {0:?}")]
    SubscribeTimeout(Duration),
    #[error("the stream failed")]
    Stream(#[source] tonic::Status),
    #[error("the server ended the stream")]
    Ended,
    #[error("the stream was silent for {0:?}: no heartbeat, no event")]
    Quiet(Duration),
    #[error("more than {QUEUE} events waited for the source")]
    Overflow,
    #[error("the re-list after subscribing failed")]
    Relist,
}

impl StreamError {
    /// The `kind` label of `hcpflow_source_request_errors_total`.
    pub fn kind(&self) -> RequestErrorKind {
        use tonic::Code;
        let status_kind = |s: &tonic::Status| match s.code() {
            Code::Unavailable => RequestErrorKind::connect,
            Code::DeadlineExceeded => RequestErrorKind::timeout,
            Code::Unauthenticated | Code::PermissionDenied | Code::NotFound => {
                RequestErrorKind::status_4xx
            }
            // tonic reports a connection that broke under the call (a TLS
            // refusal heard only as a closed connection, a reset) as
            // `Unknown` with the transport's error as its source: the
            // connection's failure, not an error Maestro answered.
            Code::Unknown if std::error::Error::source(s).is_some() => RequestErrorKind::connect,
            Code::Internal | Code::Unknown => RequestErrorKind::status_5xx,
            _ => RequestErrorKind::other,
        };
        // A TLS failure may surface only once the channel is used: in TLS
        // 1.3 the client finishes its handshake before the server checks
        // the client certificate, so a refused one arrives as an alert on
        // the subscription's first read, which tonic reports as an
        // `Unknown` transport error, not as a connect failure.
        if tls_failure(self) {
            return RequestErrorKind::tls;
        }
        match self {
            StreamError::Token { .. } | StreamError::TokenValue { .. } => {
                RequestErrorKind::credentials
            }
            StreamError::TlsFile { .. } | StreamError::Tls(_) => RequestErrorKind::tls,
            StreamError::Address(_) => RequestErrorKind::other,
            StreamError::Connect { source, .. } => {
                let chain = cause_chain(source);
                if chain.contains("refused") {
                    RequestErrorKind::connect_refused
                } else if chain.contains("certificate") || chain.contains("tls") {
                    RequestErrorKind::tls
                } else {
                    RequestErrorKind::connect
                }
            }
            StreamError::ConnectTimeout { .. }
            | StreamError::SubscribeTimeout(_)
            | StreamError::Quiet(_) => RequestErrorKind::timeout,
            StreamError::Subscribe { source, .. } | StreamError::Stream(source) => {
                status_kind(source)
            }
            StreamError::Ended | StreamError::Overflow | StreamError::Relist => {
                RequestErrorKind::other
            }
        }
    }
}

/// Whether `error` or one of its causes is rustls refusing the connection
/// (an alert received, a certificate not trusted). Looked for by type
/// where the chain keeps it (an `io::Error` hides what it wraps from
/// `source()`, so that is looked into), and otherwise by rustls's words:
/// h2 keeps only an I/O error's kind and text to share it between the
/// streams of a connection, so the alert on a subscription arrives as text.
fn tls_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        let wrapped = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        if e.is::<rustls::Error>() || wrapped.is_some_and(|w| w.is::<rustls::Error>()) {
            return true;
        }
        next = e.source();
    }
    let chain = cause_chain(error);
    chain.contains("received fatal alert") || chain.contains("invalid peer certificate")
}

/// What the reading task hands the source.
pub(super) enum Incoming {
    /// A heartbeat: the stream is alive.
    Alive,
    Event(CloudEvent),
    Lost(StreamError),
}

/// What the reading task has queued for the source, and what it said of
/// the stream: alive since last drained, or lost.
pub(super) struct Inbox {
    rx: mpsc::Receiver<Incoming>,
    /// A message [`Inbox::wait`] received, handed out first.
    lookahead: Option<Incoming>,
    pub(super) lost: Option<StreamError>,
}

impl Inbox {
    pub(super) fn new(rx: mpsc::Receiver<Incoming>) -> Inbox {
        Inbox {
            rx,
            lookahead: None,
            lost: None,
        }
    }

    /// Events queued now (at most [`BATCH`]), and whether anything (a
    /// heartbeat too) arrived. Notes the stream's loss.
    pub(super) fn drain(&mut self) -> (Vec<CloudEvent>, bool) {
        let mut events = Vec::new();
        let mut alive = false;
        if let Some(m) = self.lookahead.take() {
            self.take(m, &mut events, &mut alive);
        }
        while events.len() < BATCH && self.lost.is_none() {
            match self.rx.try_recv() {
                Ok(m) => self.take(m, &mut events, &mut alive),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.lost = Some(StreamError::Ended);
                }
            }
        }
        (events, alive)
    }

    pub(super) fn take(&mut self, m: Incoming, events: &mut Vec<CloudEvent>, alive: &mut bool) {
        match m {
            Incoming::Alive => *alive = true,
            Incoming::Event(ev) => {
                *alive = true;
                events.push(ev);
            }
            Incoming::Lost(err) => self.lost = Some(err),
        }
    }

    /// Messages queued now (heartbeats too), the one a wait received
    /// included.
    pub(super) fn queued(&self) -> usize {
        self.rx.len() + usize::from(self.lookahead.is_some())
    }

    /// Why the stream was lost, once it was.
    pub(super) fn lost(&self) -> Option<&StreamError> {
        self.lost.as_ref()
    }

    /// Wait up to `at_most` for something to arrive; it stays for the next
    /// [`Inbox::drain`].
    pub(super) async fn wait(&mut self, at_most: Duration) {
        if self.lost.is_some() || self.lookahead.is_some() {
            return;
        }
        match tokio::time::timeout(at_most, self.rx.recv()).await {
            Ok(Some(m)) => self.lookahead = Some(m),
            Ok(None) => self.lost = Some(StreamError::Ended),
            Err(_) => {}
        }
    }

    /// The next message; `None` when the reading task is gone.
    pub(super) async fn next(&mut self) -> Option<Incoming> {
        match self.lookahead.take() {
            Some(m) => Some(m),
            None => self.rx.recv().await,
        }
    }
}
