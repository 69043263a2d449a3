//! Maestro heard over its gRPC CloudEvents stream, as Clusters Service
//! hears it (docs/design/09b-reading-the-upstreams.md §9.10): `Subscribe` as the bundles' source,
//! each status event read by the same code as a listed bundle, and one REST
//! list after every (re)subscription (and every `full_relist_interval`) to
//! reconcile what the stream did not say.
//!
//! - One task reads the stream and does nothing else, so Maestro's
//!   100-event buffer per subscriber never fills while the source lists;
//!   heartbeats are told apart by their type before any payload is read.
//! - Any message (heartbeat or event) is evidence of life; none for
//!   `heartbeat_timeout` and the stream is dropped and reconnected.
//! - The source is down (kind `resource-bundle-stream` failing) from the
//!   moment the stream is lost until a new subscription and its list have
//!   both succeeded; reconnects back off from `reconnect_backoff`, doubling
//!   to a minute, with jitter.
//! - Nothing is ever published: the only RPC this module names is
//!   `Subscribe` (a status resync request would make Maestro re-send the
//!   source's bundles to every subscriber, Clusters Service included).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

pub use super::inbox::StreamError;
use super::inbox::{Inbox, Incoming, QUEUE};
use super::poller::MaestroSource;
use super::proto::{self, CloudEvent, SubscriptionRequest};
use super::{KIND, PollKind};
use crate::config::{MaestroGrpcConfig, grpc_defaults};
use crate::sources::SourceContext;
use crate::sources::health::cause_chain;
use crate::sources::http::{Backoff, after};

/// The kind the stream reports in `/readyz` and `hcpflow_source_kind_info`.
pub const STREAM_KIND: &str = "resource-bundle-stream";

/// Run the Maestro source: poll forever, or, with `grpc` configured, hear
/// the stream and list only to reconcile. Abort the task to stop.
pub async fn run_configured(source: MaestroSource) {
    match source.grpc() {
        Some(grpc) => run(source, grpc).await,
        None => source.run().await,
    }
}

/// Run the Maestro source on the stream forever. Abort the task to stop.
pub async fn run(mut source: MaestroSource, cfg: MaestroGrpcConfig) {
    let ctx = source.context().clone();
    ctx.health.declare(&ctx.name, &[KIND, STREAM_KIND]);
    source.remember_for_stream();
    let relist_every = source.relist_interval();
    let mut backoff = Backoff::new(cfg.reconnect_backoff, grpc_defaults::MAX_RECONNECT_BACKOFF);
    loop {
        let lost = match subscribe(&cfg).await {
            Err(err) => err,
            Ok(stream) => {
                tracing::debug!(source = %ctx.name, address = %cfg.address, "subscribed to Maestro's stream");
                let (tx, rx) = mpsc::channel(QUEUE);
                let reader = tokio::spawn(read(stream, tx, cfg.heartbeat_timeout));
                let lost = follow(&mut source, &ctx, rx, relist_every, &mut backoff).await;
                reader.abort();
                lost
            }
        };
        ctx.metrics.request_failed(&ctx.name, lost.kind());
        ctx.health
            .failed(&ctx.name, STREAM_KIND, &cause_chain(&lost));
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// After a subscription: list, then apply events as they come, listing
/// again every `relist_every`. Events that arrive while a list pages are
/// applied between its pages. Returns why the stream was lost.
async fn follow(
    source: &mut MaestroSource,
    ctx: &SourceContext,
    rx: mpsc::Receiver<Incoming>,
    relist_every: Duration,
    backoff: &mut Backoff,
) -> StreamError {
    // The list that reconciles what the stream missed while it was not
    // there (docs/design/09b-reading-the-upstreams.md §9.10). It is paced when state is already
    // served: after a first sync, or with the last run's readings restored.
    source.inbox = Some(Inbox::new(rx));
    let paced = source.synced() || ctx.health.restoring(&ctx.name);
    source.paced = paced;
    let listed = source.poll(PollKind::Full).await;
    let Some(mut inbox) = source.inbox.take() else {
        return StreamError::Relist;
    };
    if let Some(lost) = inbox.lost.take() {
        return lost;
    }
    if !listed {
        return StreamError::Relist;
    }
    backoff.reset();
    ctx.health.listed(&ctx.name, STREAM_KIND);
    let mut next_relist = after(Instant::now(), relist_every);
    loop {
        let unread_due = source.unread_due();
        let forget_due = source.forget_due();
        let first = tokio::select! {
            m = inbox.next() => m,
            () = sleep_until_some(unread_due) => {
                source.read_unread().await;
                continue;
            }
            () = sleep_until_some(forget_due) => {
                source.forget_deleted();
                continue;
            }
            () = tokio::time::sleep_until(next_relist.into()) => {
                source.paced = true;
                source.inbox = Some(inbox);
                source.poll(PollKind::Full).await;
                match source.inbox.take() {
                    Some(back) => inbox = back,
                    None => return StreamError::Relist,
                }
                next_relist = after(Instant::now(), relist_every);
                if let Some(lost) = inbox.lost.take() {
                    return lost;
                }
                continue;
            }
        };
        let mut batch = Vec::new();
        let mut alive = false;
        if let Some(m) = first {
            inbox.take(m, &mut batch, &mut alive);
        } else {
            inbox.lost = Some(StreamError::Ended);
        }
        let (more, more_alive) = inbox.drain();
        batch.extend(more);
        if alive || more_alive {
            ctx.health.alive(&ctx.name);
        }
        if !batch.is_empty() {
            source.apply_events(batch).await;
        }
        if let Some(lost) = inbox.lost.take() {
            return lost;
        }
    }
}

/// Sleep until `at`; forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Read the stream into `tx` until it fails, ends or goes quiet.
async fn read(
    mut stream: tonic::Streaming<CloudEvent>,
    tx: mpsc::Sender<Incoming>,
    quiet: Duration,
) {
    let lost = loop {
        let message = match tokio::time::timeout(quiet, stream.message()).await {
            Err(_) => break StreamError::Quiet(quiet),
            Ok(Err(status)) => break StreamError::Stream(status),
            Ok(Ok(None)) => break StreamError::Ended,
            Ok(Ok(Some(ev))) if ev.is_heartbeat() => Incoming::Alive,
            Ok(Ok(Some(ev))) => Incoming::Event(ev),
        };
        match tx.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => break StreamError::Overflow,
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    };
    // The queue may be full: the source reads `Lost` after what is queued.
    let _ = tx.send(Incoming::Lost(lost)).await;
}

/// Connect and subscribe as `cfg.source_id`.
async fn subscribe(cfg: &MaestroGrpcConfig) -> Result<tonic::Streaming<CloudEvent>, StreamError> {
    let channel = connect(cfg).await?;
    let mut request = tonic::Request::new(SubscriptionRequest {
        source: cfg.source_id.clone(),
        cluster_name: String::new(),
        data_type: String::new(),
    });
    if let Some(path) = &cfg.bearer_token_file {
        let shown = path.display().to_string();
        let token = std::fs::read_to_string(path).map_err(|source| StreamError::Token {
            path: shown.clone(),
            source,
        })?;
        let value = format!("Bearer {}", token.trim())
            .parse()
            .map_err(|_| StreamError::TokenValue { path: shown })?;
        request.metadata_mut().insert("authorization", value);
    }
    let mut grpc = tonic::client::Grpc::new(channel);
    let call = async {
        grpc.ready().await.map_err(|e| StreamError::Connect {
            address: cfg.address.to_string(),
            source: e,
        })?;
        grpc.server_streaming(
            request,
            http::uri::PathAndQuery::from_static(proto::SUBSCRIBE_PATH),
            tonic_prost::ProstCodec::<SubscriptionRequest, CloudEvent>::default(),
        )
        .await
        .map_err(|source| StreamError::Subscribe {
            source_id: cfg.source_id.clone(),
            source,
        })
    };
    let response = tokio::time::timeout(cfg.connect_timeout, call)
        .await
        .map_err(|_| StreamError::SubscribeTimeout(cfg.connect_timeout))??;
    Ok(response.into_inner())
}

/// The HTTP/2 channel: plaintext for `http://`, TLS 1.3 only for
/// `https://` (what Maestro's server allows), with the configured CA or
/// the system's roots and, when configured, a client certificate.
async fn connect(cfg: &MaestroGrpcConfig) -> Result<tonic::transport::Channel, StreamError> {
    let address = cfg.address.to_string();
    let host = cfg
        .address
        .host_str()
        .ok_or_else(|| StreamError::Address(address.clone()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = cfg
        .address
        .port_or_known_default()
        .ok_or_else(|| StreamError::Address(address.clone()))?;
    let authority = match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    };
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{authority}"))
        .map_err(|source| StreamError::Connect {
            address: address.clone(),
            source,
        })?
        .connect_timeout(cfg.connect_timeout)
        // Maestro lets a client ping no more often than every 5 s, and only
        // with a stream open.
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(false);
    let connecting = async {
        if cfg.tls() {
            let tls = tokio_rustls::TlsConnector::from(Arc::new(tls_config(cfg)?));
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|_| StreamError::Address(address.clone()))?;
            let connector = tower::service_fn(move |_: http::Uri| {
                let tls = tls.clone();
                let name = name.clone();
                let authority = authority.clone();
                async move {
                    let tcp = tokio::net::TcpStream::connect(authority).await?;
                    tcp.set_nodelay(true)?;
                    let stream = tls.connect(name, tcp).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            });
            endpoint.connect_with_connector(connector).await
        } else {
            endpoint.connect().await
        }
        .map_err(|source| StreamError::Connect {
            address: address.clone(),
            source,
        })
    };
    tokio::time::timeout(cfg.connect_timeout, connecting)
        .await
        .map_err(|_| StreamError::ConnectTimeout {
            address: address.clone(),
            timeout: cfg.connect_timeout,
        })?
}

fn tls_config(cfg: &MaestroGrpcConfig) -> Result<rustls::ClientConfig, StreamError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let file_err = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |source| StreamError::TlsFile {
            path: path.clone(),
            source,
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    match &cfg.ca_file {
        Some(path) => {
            for cert in CertificateDer::pem_file_iter(path).map_err(file_err(path))? {
                roots
                    .add(cert.map_err(file_err(path))?)
                    .map_err(StreamError::Tls)?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            for err in &native.errors {
                tracing::debug!(error = %err, "a system CA could not be loaded");
            }
            let (added, _) = roots.add_parsable_certificates(native.certs);
            tracing::debug!(added, "system CAs trusted for Maestro's gRPC server");
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .map_err(StreamError::Tls)?
    .with_root_certificates(roots);
    let mut config = match (&cfg.client_cert_file, &cfg.client_key_file) {
        (Some(cert), Some(key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
                .map_err(file_err(cert))?
                .collect::<Result<_, _>>()
                .map_err(file_err(cert))?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(file_err(key))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(StreamError::Tls)?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::config::{HttpSourceConfig, MaestroConfig};
    use crate::metrics::exporter::ExporterMetrics;
    use crate::model::Batch;
    use crate::sources::ObservationSink;

    struct Discard;

    impl ObservationSink for Discard {
        fn apply(&self, _: Batch) {}
    }

    /// Maestro's REST list: one bundle, one page.
    async fn one_bundle_list() -> url::Url {
        let body = serde_json::json!({
            "kind": "ResourceBundleList", "page": 1, "size": 1, "total": 1,
            "items": [{
                "id": "00000000-0000-4000-8000-000000000001", "kind": "ResourceBundle",
                "name": "work-1", "consumer_name": "mgmt-1",
                "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:05:00Z",
                "metadata": {"name": "work-1", "labels": {"api.openshift.com/id": "cluster-1"}},
                "manifests": [], "status": {"conditions": []},
            }],
        })
        .to_string();
        let app = axum::Router::new().route(
            super::super::BUNDLES_PATH,
            axum::routing::get(move || std::future::ready(body.clone())),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let address = listener.local_addr().expect("a bound port");
        tokio::spawn(async move { axum::serve(listener, app).await });
        url::Url::parse(&format!("http://{address}")).expect("a loopback URL")
    }

    /// A list on the stream ends while events keep coming: between two
    /// pages the source applies what was queued, not what arrives while
    /// it applies that, or a steady stream holds the list forever.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_ends_while_events_keep_coming() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = ExporterMetrics::register(&mut registry);
        let ctx = SourceContext::detached("maestro", Arc::new(Discard), metrics);
        let cfg = MaestroConfig {
            http: HttpSourceConfig::new(one_bundle_list().await),
            search_scope: None,
            grpc: None,
        };
        let mut source = MaestroSource::new(cfg, ctx).expect("a source");
        source.remember_for_stream();
        source.paced = true;

        // The listed bundle's status, long to read and cheap to send: the
        // queue holds twice a batch and is refilled faster than the source
        // applies it, so it never runs dry.
        let condition = serde_json::json!({"type": "Applied", "status": "True",
            "reason": "AppliedManifestWorkComplete", "message": "x".repeat(200),
            "lastTransitionTime": "2025-01-01T00:05:00Z"});
        let payload = serde_json::json!({"conditions": vec![condition; 50]}).to_string();
        let status = CloudEvent {
            id: "event".to_string(),
            spec_version: "1.0".to_string(),
            r#type: proto::STATUS_UPDATE_TYPE.to_string(),
            attributes: [(
                proto::attr::RESOURCE_ID.to_string(),
                proto::AttributeValue::string("00000000-0000-4000-8000-000000000001"),
            )]
            .into(),
            data: Some(proto::Data::BinaryData(payload.into())),
            ..CloudEvent::default()
        };
        let (tx, rx) = mpsc::channel(2 * super::super::inbox::BATCH);
        let sent = Arc::new(AtomicU64::new(0));
        let counted = sent.clone();
        let producer = tokio::spawn(async move {
            loop {
                let event = status.clone();
                if tx.send(Incoming::Event(event)).await.is_err() {
                    return;
                }
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        source.inbox = Some(Inbox::new(rx));
        let mut listing = tokio::spawn(async move {
            let listed = source.poll(PollKind::Full).await;
            (listed, source)
        });
        let (listed, mut source) =
            match tokio::time::timeout(Duration::from_secs(20), &mut listing).await {
                Ok(done) => done.expect("the list does not panic"),
                Err(_) => {
                    listing.abort();
                    producer.abort();
                    panic!("the list did not end while events kept coming");
                }
            };
        assert!(listed, "the list failed");
        let inbox = source.inbox.take().expect("the inbox is handed back");
        assert!(
            sent.load(Ordering::SeqCst) > inbox.queued() as u64,
            "no event was applied between the pages"
        );
        producer.abort();
    }
}
