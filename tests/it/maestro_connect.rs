//! Every way the Maestro source connects to Maestro's gRPC stream
//! (docs/design/09b-reading-the-upstreams.md §9.10, §10.12), through its own connect, TLS and auth
//! code (`stream::run_configured` with a `MaestroGrpcConfig`), against a
//! stand-in server written here that is as strict as Maestro's:
//! - plaintext, Maestro's chart default;
//! - TLS 1.3 only, the server's certificate from a CA the client is
//!   configured with (and refused from a CA it is not);
//! - a bearer token over TLS: `Unauthenticated` without it or with another,
//!   the source down with the server's reason, and subscribed with it;
//! - mutual TLS: a client certificate the server's client CA did not sign
//!   is refused in the handshake, one it signed is subscribed.
//!
//! The CAs and certificates are made fresh by each test (rcgen). Every
//! wait is on a condition, with a bound.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::common::source::{Harness, harness};
use crate::common::standin::{Behaviour, StandIn};
use crate::maestro_stream::until;
use hcp_flow::config::{HttpSourceConfig, MaestroConfig, MaestroGrpcConfig};
use hcp_flow::metrics::exporter::RequestErrorKind;
use hcp_flow::sources::maestro::{self, MaestroSource};

#[allow(clippy::all, clippy::pedantic, dead_code)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/io.cloudevents.v1.rs"));
}

const SUBSCRIBE: &str = "/io.cloudevents.v1.CloudEventService/Subscribe";
const BOUND: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// Certificates.

/// A CA: its certificate (PEM) and what signs with it.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `names` (DNS names or IP addresses) with common name
    /// `cn`: certificate and key, PEM.
    fn leaf(&self, cn: &str, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn tempdir(test: &str) -> PathBuf {
    crate::common::procs::tempdir(&format!("maestro-connect-{test}"))
}

/// What the server presents and, for mutual TLS, which client CA it trusts:
/// TLS 1.3 only, as Maestro's server.
fn server_tls(ca: &Ca, client_ca: Option<&Ca>) -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (cert, key) = ca.leaf("maestro-grpc", &["localhost", "127.0.0.1"]);
    let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(client_ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(client_ca.pem.as_bytes()).unwrap())
                .unwrap();
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

// ---------------------------------------------------------------------------
// The stand-in server.

/// What the stand-in saw.
#[derive(Default)]
struct Seen {
    /// Each call's path and `authorization`.
    calls: Mutex<Vec<(String, Option<String>)>>,
    /// Subscriptions it accepted.
    subscribed: AtomicU64,
    /// TLS handshakes it refused (a client certificate it does not trust).
    refused_handshakes: AtomicU64,
}

/// Maestro's `Subscribe` and nothing else: with `token`, a call without
/// `authorization: Bearer <token>` is `Unauthenticated` (Maestro's token
/// interceptor says "invalid token"); an accepted subscription stays open
/// and silent.
#[derive(Clone)]
struct Server {
    seen: Arc<Seen>,
    token: Option<String>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Events = Pin<Box<dyn futures::Stream<Item = Result<pb::CloudEvent, tonic::Status>> + Send>>;

impl tower::Service<http::Request<tonic::body::Body>> for Server {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let path = req.uri().path().to_string();
        let auth = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        self.seen.calls.lock().push((path.clone(), auth));
        let me = self.clone();
        Box::pin(async move {
            if path != SUBSCRIBE {
                return Ok(tonic::Status::unimplemented("Subscribe only").into_http());
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<
                pb::CloudEvent,
                pb::SubscriptionRequest,
            >::default());
            Ok(grpc.server_streaming(Sub(me), req).await)
        })
    }
}

struct Sub(Server);

impl tonic::server::ServerStreamingService<pb::SubscriptionRequest> for Sub {
    type Response = pb::CloudEvent;
    type ResponseStream = Events;
    type Future = BoxFuture<Result<tonic::Response<Events>, tonic::Status>>;

    fn call(&mut self, req: tonic::Request<pb::SubscriptionRequest>) -> Self::Future {
        let server = self.0.clone();
        Box::pin(async move {
            if let Some(token) = &server.token {
                let sent = req
                    .metadata()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok());
                if sent != Some(format!("Bearer {token}").as_str()) {
                    return Err(tonic::Status::unauthenticated("invalid token"));
                }
            }
            server.seen.subscribed.fetch_add(1, Ordering::SeqCst);
            let silent: Events = Box::pin(futures::stream::pending());
            Ok(tonic::Response::new(silent))
        })
    }
}

/// A TLS connection as the server takes it.
struct Tls(tokio_rustls::server::TlsStream<tokio::net::TcpStream>);

impl tonic::transport::server::Connected for Tls {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Tls {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tls {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Serve on loopback, in plaintext or with `tls`; the address the client
/// is configured with (`https://localhost:<port>` with TLS, so the server
/// name is checked).
async fn serve(server: Server, tls: Option<Arc<rustls::ServerConfig>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let Some(tls) = tls else {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        tokio::spawn(tonic::transport::Server::builder().serve_with_incoming(server, incoming));
        return format!("http://127.0.0.1:{port}");
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Tls>>(16);
    let seen = server.seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, tx, seen) = (acceptor.clone(), tx.clone(), seen.clone());
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(stream) => {
                        let _ = tx.send(Ok(Tls(stream))).await;
                    }
                    Err(_) => {
                        seen.refused_handshakes.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let incoming = tokio_stream::wrappers::ReceiverStream::new(rx);
    tokio::spawn(tonic::transport::Server::builder().serve_with_incoming(server, incoming));
    format!("https://localhost:{port}")
}

// ---------------------------------------------------------------------------
// The source.

/// Maestro's REST list: no bundle.
async fn rest() -> StandIn {
    let empty = r#"{"kind":"ResourceBundleList","page":1,"size":0,"total":0,"items":[]}"#;
    StandIn::start(move |_| Behaviour::Answer(200, empty.to_string())).await
}

/// The Maestro source on `rest` and the stream at `grpc`, configured by
/// `with`, running until the returned task is aborted.
fn run(
    rest: &StandIn,
    grpc: &str,
    name: &str,
    with: impl FnOnce(&mut MaestroGrpcConfig),
) -> (tokio::task::JoinHandle<()>, Harness) {
    let h = harness(name);
    let mut http = HttpSourceConfig::new(rest.base.clone());
    http.full_relist_interval = Duration::from_secs(3600);
    let mut g = MaestroGrpcConfig::new(url::Url::parse(grpc).unwrap(), "cs-source");
    g.heartbeat_timeout = Duration::from_secs(60);
    g.reconnect_backoff = Duration::from_millis(100);
    g.connect_timeout = Duration::from_secs(5);
    with(&mut g);
    let cfg = MaestroConfig {
        http,
        search_scope: None,
        grpc: Some(Box::new(g)),
    };
    let source = MaestroSource::new(cfg, h.ctx.clone()).unwrap();
    (tokio::spawn(maestro::stream::run_configured(source)), h)
}

/// The stream's kind failing, with the error `/readyz` shows.
fn stream_error(h: &Harness) -> Option<String> {
    h.ctx.health.status().into_iter().find_map(|s| {
        s.failing
            .iter()
            .any(|k| k == maestro::stream::STREAM_KIND)
            .then(|| s.last_error.as_ref().map(|e| e.message.clone()))
            .flatten()
    })
}

/// Subscribed and listed: the source up.
async fn until_up(h: &Harness, seen: &Seen, what: &str) {
    until(what, BOUND, || h.up() == 1).await;
    assert!(seen.subscribed.load(Ordering::SeqCst) >= 1);
    assert!(stream_error(h).is_none(), "{:?}", stream_error(h));
}

/// Refused: the failure counted as `kind`, the source down with an error
/// that says what failed.
async fn until_refused(h: &Harness, kind: RequestErrorKind, what: &str) -> String {
    until(what, BOUND, || {
        h.errors(kind) >= 1 && stream_error(h).is_some()
    })
    .await;
    assert_eq!(h.up(), 0, "{what}: the source is up");
    stream_error(h).unwrap_or_default()
}

// ---------------------------------------------------------------------------
// The modes.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_subscribes_without_credentials() {
    let rest = rest().await;
    let seen = Arc::new(Seen::default());
    let server = Server {
        seen: seen.clone(),
        token: None,
    };
    let address = serve(server, None).await;
    let (task, h) = run(&rest, &address, "maestro", |_| {});
    until_up(&h, &seen, "subscribed in plaintext").await;
    let calls = seen.calls.lock().clone();
    assert_eq!(calls, vec![(SUBSCRIBE.to_string(), None)]);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls13_trusts_the_configured_ca_and_no_other() {
    let dir = tempdir("tls");
    let ca = Ca::new("maestro test CA");
    let other = Ca::new("another CA");
    let rest = rest().await;
    let seen = Arc::new(Seen::default());
    let server = Server {
        seen: seen.clone(),
        token: None,
    };
    let address = serve(server, Some(server_tls(&ca, None))).await;

    // A CA that did not sign the server's certificate: never subscribed.
    let wrong = write(&dir, "other-ca.pem", &other.pem);
    let (task, h) = run(&rest, &address, "maestro", |g| g.ca_file = Some(wrong));
    let error = until_refused(&h, RequestErrorKind::tls, "refused an unknown server").await;
    assert!(
        error.contains(&format!("connecting to {address}")),
        "the error names neither the step nor the address: {error}"
    );
    assert_eq!(seen.subscribed.load(Ordering::SeqCst), 0);
    task.abort();

    // The CA that did.
    let right = write(&dir, "ca.pem", &ca.pem);
    let (task, h) = run(&rest, &address, "maestro", |g| g.ca_file = Some(right));
    until_up(&h, &seen, "subscribed over TLS 1.3").await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_over_tls_is_required_and_sent() {
    let dir = tempdir("token");
    let ca = Ca::new("maestro test CA");
    let ca_file = write(&dir, "ca.pem", &ca.pem);
    let rest = rest().await;
    let seen = Arc::new(Seen::default());
    let server = Server {
        seen: seen.clone(),
        token: Some("sesame".to_string()),
    };
    let address = serve(server, Some(server_tls(&ca, None))).await;

    // No token: Unauthenticated, counted as a refusal, the source down
    // with the server's reason.
    let (task, h) = run(&rest, &address, "maestro", |g| {
        g.ca_file = Some(ca_file.clone())
    });
    let error = until_refused(&h, RequestErrorKind::status_4xx, "refused without a token").await;
    assert!(
        error.contains("subscribing as source cs-source") && error.contains("invalid token"),
        "the error does not say the subscription was refused, and why: {error}"
    );
    task.abort();

    // Another token: the same.
    let wrong = write(&dir, "wrong-token", "open-barley\n");
    let (task, h) = run(&rest, &address, "maestro", |g| {
        g.ca_file = Some(ca_file.clone());
        g.bearer_token_file = Some(wrong);
    });
    until_refused(
        &h,
        RequestErrorKind::status_4xx,
        "refused with another token",
    )
    .await;
    task.abort();
    assert_eq!(seen.subscribed.load(Ordering::SeqCst), 0);

    // The token (its file's trailing newline is not part of it).
    let token = write(&dir, "token", "sesame\n");
    let (task, h) = run(&rest, &address, "maestro", |g| {
        g.ca_file = Some(ca_file.clone());
        g.bearer_token_file = Some(token);
    });
    until_up(&h, &seen, "subscribed with the token").await;
    let calls = seen.calls.lock().clone();
    assert_eq!(
        calls.last(),
        Some(&(SUBSCRIBE.to_string(), Some("Bearer sesame".to_string())))
    );
    assert!(calls.iter().all(|(path, _)| path == SUBSCRIBE), "{calls:?}");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_takes_only_a_client_certificate_of_the_servers_client_ca() {
    let dir = tempdir("mtls");
    let ca = Ca::new("maestro test CA");
    let client_ca = Ca::new("maestro client CA");
    let stranger_ca = Ca::new("a stranger's CA");
    let ca_file = write(&dir, "ca.pem", &ca.pem);
    let rest = rest().await;
    let seen = Arc::new(Seen::default());
    let server = Server {
        seen: seen.clone(),
        token: None,
    };
    let address = serve(server, Some(server_tls(&ca, Some(&client_ca)))).await;
    let client = |ca: &Ca, name: &str| {
        // Maestro reads the user from the CN and the groups from O.
        let (cert, key) = ca.leaf("hcp-flow", &["hcp-flow"]);
        (
            write(&dir, &format!("{name}.crt"), &cert),
            write(&dir, &format!("{name}.key"), &key),
        )
    };

    // A certificate the server's client CA did not sign: the handshake is
    // refused, nothing is subscribed, the source is down.
    let (cert, key) = client(&stranger_ca, "stranger");
    let (task, h) = run(&rest, &address, "maestro", |g| {
        g.ca_file = Some(ca_file.clone());
        g.client_cert_file = Some(cert);
        g.client_key_file = Some(key);
    });
    // The client learns of the refusal on the subscription's first read:
    // usually the server's alert, counted as a TLS failure; sometimes only
    // the closed connection, which says nothing more (counted `other`). The
    // source retries, so some attempt hears the alert. Never an error of
    // Maestro's.
    // The server counts its refusal after sending the alert, so it may
    // come after the client's.
    until("the refusal counted as a TLS failure", BOUND, || {
        h.errors(RequestErrorKind::tls) >= 1
            && stream_error(&h).is_some()
            && seen.refused_handshakes.load(Ordering::SeqCst) >= 1
    })
    .await;
    assert_eq!(h.errors(RequestErrorKind::status_5xx), 0);
    let error = stream_error(&h).unwrap_or_default();
    assert!(
        error.contains("subscribing as source cs-source"),
        "the error does not say what failed: {error}"
    );
    assert_eq!(h.up(), 0);
    assert_eq!(seen.subscribed.load(Ordering::SeqCst), 0);
    task.abort();

    // One it signed.
    let (cert, key) = client(&client_ca, "known");
    let (task, h) = run(&rest, &address, "maestro", |g| {
        g.ca_file = Some(ca_file.clone());
        g.client_cert_file = Some(cert);
        g.client_key_file = Some(key);
    });
    until_up(&h, &seen, "subscribed with a known client certificate").await;
    task.abort();
}
