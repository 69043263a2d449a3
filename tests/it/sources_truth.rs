//! Sources that tell the truth about themselves (docs/design/09-reading-the-upstreams.md §9.8,
//! §9.9): deadlines, the cause of every failure in its `kind` and message,
//! lists that must prove they are lists, and mass deletions held back —
//! each against real sockets.

use crate::common::standin;

use crate::common::source;
use source::{Harness, harness};

use std::sync::Arc;
use std::time::{Duration, Instant};

use hcp_flow::config::{
    Auth, ClustersServiceApi, ClustersServiceConfig, HttpSourceConfig, MaestroConfig,
    RpFrontendConfig,
};
use hcp_flow::metrics::exporter::RequestErrorKind;
use hcp_flow::model::Change;
use hcp_flow::sources::clusters_service::{ClustersServiceSource, PollKind};
use hcp_flow::sources::health::cause_chain;
use hcp_flow::sources::http::{HttpClient, SourceError};
use hcp_flow::sources::maestro::{self, MaestroSource};
use hcp_flow::sources::rp_frontend::RpFrontendSource;
use serde_json::{Value, json};
use standin::{Behaviour, StandIn};
use url::Url;

impl Harness {
    /// How many `Gone` the source delivered since the last call.
    fn gone(&self) -> usize {
        self.sink
            .take()
            .iter()
            .flat_map(|b| &b.observations)
            .filter(|o| matches!(o.change, Change::Gone))
            .count()
    }
}

fn http_config(base: &Url) -> HttpSourceConfig {
    let mut cfg = HttpSourceConfig::new(base.clone());
    cfg.timeout = Duration::from_secs(1);
    cfg.connect_timeout = Duration::from_secs(1);
    cfg
}

fn ok(body: Value) -> Behaviour {
    Behaviour::Answer(200, body.to_string())
}

fn bundle(id: &str) -> Value {
    json!({
        "id": id,
        "metadata": {"labels": {"api.openshift.com/id": format!("c-{id}")}},
        "updated_at": "2026-06-10T23:00:00Z",
        "status": {"conditions": [{"type": "Applied", "status": "True"}]}
    })
}

fn bundle_list(bundles: &[Value]) -> Value {
    json!({"kind": "ResourceBundleList", "page": 1, "size": bundles.len(), "total": bundles.len(), "items": bundles})
}

fn cs_list(n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("c{i}"), "name": format!("c{i}"), "status": {"state": "ready"}}))
        .collect();
    json!({"kind": "ClusterList", "page": 1, "size": n, "total": n, "items": items})
}

/// A CS stand-in listing `n` clusters; provision shards are not assigned.
fn cs_answer(n: usize) -> impl Fn(&standin::Seen) -> Behaviour + Send + Sync + 'static {
    move |req| {
        if req.path().ends_with("/provision_shard") {
            Behaviour::Answer(404, "{}".into())
        } else {
            ok(cs_list(n))
        }
    }
}

fn cs_source(h: &Harness, base: &Url, body_limit: usize) -> ClustersServiceSource {
    let cfg = ClustersServiceConfig {
        http: http_config(base),
        api: ClustersServiceApi::AroHcpV1alpha1,
        search_scope: None,
        node_pool_rotation: hcp_flow::config::defaults::node_pool_rotation(),
    };
    let client = HttpClient::new("clusters_service", &cfg.http, h.metrics.clone())
        .unwrap()
        .with_body_limit(body_limit);
    ClustersServiceSource::with_client(cfg, h.ctx.clone(), client)
}

// ------------------------------------------------------------------ deadlines

#[tokio::test]
async fn a_frozen_or_dripping_upstream_fails_as_timeout_within_the_deadline() {
    let h = harness("maestro");
    let upstream = StandIn::start(|_| Behaviour::Freeze).await;
    let cfg = MaestroConfig {
        http: http_config(&upstream.base),
        search_scope: None,
        grpc: None,
    };
    let mut m = MaestroSource::new(cfg, h.ctx.clone()).unwrap();

    // Accepts, reads the request, never answers.
    let started = Instant::now();
    assert!(!m.poll(maestro::PollKind::Full).await);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(h.errors(RequestErrorKind::timeout), 1);
    assert_eq!(h.up(), 0);

    // Headers at once, then a byte every 200 ms: no single read stalls for
    // the deadline, only the whole request exceeds it.
    let body = bundle_list(&[bundle("b1")]).to_string();
    upstream.set(move |_| Behaviour::Drip(body.clone()));
    let started = Instant::now();
    assert!(!m.poll(maestro::PollKind::Full).await);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(h.errors(RequestErrorKind::timeout), 2);
    assert_eq!(h.up(), 0);

    // It answers again: up on the next poll.
    upstream.set(|_| ok(bundle_list(&[bundle("b1")])));
    assert!(m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.up(), 1);
}

// ------------------------------------------------------------------ causes

async fn fail(client: &HttpClient, url: &str) -> SourceError {
    client
        .get_json::<Value>(Url::parse(url).unwrap())
        .await
        .unwrap_err()
}

fn client(h: &Harness, base: &Url) -> HttpClient {
    HttpClient::new("maestro", &http_config(base), h.metrics.clone()).unwrap()
}

#[tokio::test]
async fn refused_and_unresolvable_are_told_apart() {
    let h = harness("maestro");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let base = Url::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let err = fail(&client(&h, &base), base.as_str()).await;
    assert_eq!(err.kind(), RequestErrorKind::connect_refused);
    let text = cause_chain(&err);
    assert!(text.contains("connection refused"), "{text}");

    // `.invalid` never resolves (RFC 6761), and fails in the local resolver.
    let base = Url::parse("http://nonexistent.invalid:8000/").unwrap();
    let err = fail(&client(&h, &base), base.as_str()).await;
    assert_eq!(err.kind(), RequestErrorKind::dns, "{}", cause_chain(&err));
    assert!(cause_chain(&err).contains("did not resolve"));
    assert_eq!(h.errors(RequestErrorKind::connect_refused), 1);
    assert_eq!(h.errors(RequestErrorKind::dns), 1);
}

/// A TLS server whose certificate no CA bundle of the client holds
/// (tests/fixtures/tls, made once with `openssl req -x509 -newkey ec
/// -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 -addext
/// subjectAltName=IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE
/// -addext extendedKeyUsage=serverAuth`: an end-entity certificate, so the
/// only verification failure left is the issuer).
fn untrusted_tls_server() -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter("tests/fixtures/tls/self-signed.crt")
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_file("tests/fixtures/tls/self-signed.key").unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut tcp) = stream else { continue };
            let mut conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let _ = conn.complete_io(&mut tcp);
        }
    });
    port
}

#[tokio::test]
async fn an_untrusted_certificate_is_tls_with_the_verification_reason() {
    let h = harness("maestro");
    let port = untrusted_tls_server();
    let base = Url::parse(&format!("https://127.0.0.1:{port}/")).unwrap();
    let err = fail(&client(&h, &base), base.as_str()).await;
    let text = cause_chain(&err);
    assert_eq!(err.kind(), RequestErrorKind::tls, "{text}");
    assert!(text.contains("UnknownIssuer"), "{text}");
    assert_eq!(h.errors(RequestErrorKind::tls), 1);
}

#[tokio::test]
async fn status_errors_keep_a_bounded_sanitised_body_404_included() {
    let h = harness("maestro");
    let upstream = StandIn::start(|req| {
        if req.path() == "/gone" {
            Behaviour::Answer(404, "{\"reason\":\n\"no such \\\"bundle\\\"\"}".into())
        } else if req.path() == "/long" {
            Behaviour::Answer(502, "x".repeat(5000))
        } else {
            Behaviour::Answer(500, "<html>\r\n<p>upstream said \"no\"</p>\n</html>".into())
        }
    })
    .await;
    let c = client(&h, &upstream.base);

    let err = fail(&c, upstream.base.join("/broken").unwrap().as_str()).await;
    assert_eq!(err.kind(), RequestErrorKind::status_5xx);
    let text = err.to_string();
    assert!(text.contains("HTTP 500"), "{text}");
    assert!(text.contains("<p>upstream said \"no\"</p>"), "{text}");
    assert!(!text.contains('\n') && !text.contains('\r'), "{text:?}");

    let err = fail(&c, upstream.base.join("/gone").unwrap().as_str()).await;
    assert_eq!(err.kind(), RequestErrorKind::status_4xx);
    let text = err.to_string();
    assert!(text.contains("HTTP 404"), "{text}");
    assert!(text.contains(r#"no such \"bundle\""#), "{text}");
    assert!(!text.contains('\n'), "{text:?}");

    let err = fail(&c, upstream.base.join("/long").unwrap().as_str()).await;
    assert!(
        err.to_string().len() < 400,
        "bounded: {}",
        err.to_string().len()
    );
}

#[tokio::test]
async fn a_decode_error_names_the_json_path_and_shows_the_text_around_it() {
    let h = harness("maestro");
    let upstream = StandIn::start(|_| {
        ok(json!({"kind": "ResourceBundleList", "page": 1, "size": 1, "total": "many", "items": []}))
    })
    .await;
    let mut m = MaestroSource::with_client(
        MaestroConfig {
            http: http_config(&upstream.base),
            search_scope: None,
            grpc: None,
        },
        h.ctx.clone(),
        client(&h, &upstream.base),
    );
    assert!(!m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.errors(RequestErrorKind::decode), 1);

    let c = client(&h, &upstream.base);
    let err = c
        .get_json::<hcp_flow::sources::http::PagedList>(upstream.base.clone())
        .await
        .unwrap_err();
    let text = cause_chain(&err);
    assert_eq!(err.kind(), RequestErrorKind::decode);
    assert!(text.contains("at `total`"), "{text}");
    assert!(text.contains("\"many\""), "the text around it: {text}");
}

#[tokio::test]
async fn a_token_file_error_carries_the_os_reason() {
    let h = harness("maestro");
    let upstream = StandIn::start(|_| ok(bundle_list(&[]))).await;
    let mut cfg = http_config(&upstream.base);
    cfg.auth = Auth::BearerTokenFile("/nonexistent/hcp-flow/token".into());
    let c = HttpClient::new("maestro", &cfg, h.metrics.clone()).unwrap();
    let err = fail(&c, upstream.base.as_str()).await;
    assert_eq!(err.kind(), RequestErrorKind::credentials);
    let text = cause_chain(&err);
    assert!(text.contains("/nonexistent/hcp-flow/token"), "{text}");
    assert!(text.contains("No such file or directory"), "{text}");
    assert!(upstream.seen().is_empty(), "no request without credentials");
}

// ------------------------------------------------------------------ lists

/// Answers that are not a list of clusters, each a `decode` (or
/// `body_too_large`) failure that must delete nothing, however long it lasts.
fn not_lists() -> Vec<(&'static str, String)> {
    vec![
        ("an empty object", "{}".to_string()),
        (
            "an error document",
            json!({"kind": "Error", "reason": "db down"}).to_string(),
        ),
        (
            "another list kind",
            json!({"kind": "ProvisionShardList", "page": 1, "size": 0, "total": 0, "items": []})
                .to_string(),
        ),
        (
            "a total its items deny",
            json!({"kind": "ClusterList", "page": 1, "size": 0, "total": 50, "items": []})
                .to_string(),
        ),
        (
            "a size its items deny",
            json!({"kind": "ClusterList", "page": 1, "size": 3, "total": 3, "items": []})
                .to_string(),
        ),
        (
            "HTML",
            "<html><body>502 Bad Gateway</body></html>".to_string(),
        ),
        (
            "a truncated body",
            r#"{"kind":"ClusterList","page":1,"size":3,"total":3,"items":[{"id":"c0""#.to_string(),
        ),
        (
            "an oversized body",
            format!("{{\"pad\":\"{}\"}}", "x".repeat(20_000)),
        ),
    ]
}

#[tokio::test]
async fn cs_answers_that_are_not_lists_forget_no_cluster() {
    let h = harness("clusters_service");
    let upstream = StandIn::start(cs_answer(3)).await;
    let mut cs = cs_source(&h, &upstream.base, 16 * 1024);
    assert!(cs.poll(PollKind::Full).await);
    assert_eq!(h.gone(), 0);
    assert_eq!(h.up(), 1);

    for (what, body) in not_lists() {
        let answer = body.clone();
        upstream.set(move |req| {
            if req.path().ends_with("/provision_shard") {
                Behaviour::Answer(404, "{}".into())
            } else {
                Behaviour::Answer(200, answer.clone())
            }
        });
        // Minutes of polls of every kind: nothing is forgotten.
        for kind in [
            PollKind::Full,
            PollKind::Fast,
            PollKind::Slow,
            PollKind::Full,
        ] {
            assert!(!cs.poll(kind).await, "{what}: the poll must fail");
            assert_eq!(h.gone(), 0, "{what}: nothing is forgotten");
            assert_eq!(h.up(), 0, "{what}");
        }
    }
    assert!(h.errors(RequestErrorKind::decode) >= 4 * 7);
    assert_eq!(h.errors(RequestErrorKind::body_too_large), 4);

    upstream.set(cs_answer(3));
    assert!(cs.poll(PollKind::Full).await);
    assert_eq!(h.gone(), 0);
    assert_eq!(h.up(), 1);
}

#[tokio::test]
async fn maestro_empty_items_with_a_total_forget_no_bundle() {
    let h = harness("maestro");
    let bundles: Vec<Value> = (0..5).map(|i| bundle(&format!("b{i}"))).collect();
    let good = bundle_list(&bundles);
    let g = good.clone();
    let upstream = StandIn::start(move |_| ok(g.clone())).await;
    let mut m = MaestroSource::with_client(
        MaestroConfig {
            http: http_config(&upstream.base),
            search_scope: None,
            grpc: None,
        },
        h.ctx.clone(),
        client(&h, &upstream.base),
    );
    assert!(m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.gone(), 0);

    for body in [
        json!({"kind": "ResourceBundleList", "items": [], "total": 5}),
        json!({"kind": "ResourceBundleList", "page": 1, "size": 0, "total": 5}),
        json!({"kind": "ConsumerList", "page": 1, "size": 0, "total": 0, "items": []}),
    ] {
        upstream.set(move |_| ok(body.clone()));
        for kind in [maestro::PollKind::Full, maestro::PollKind::Incremental] {
            assert!(!m.poll(kind).await);
            assert_eq!(h.gone(), 0);
            assert_eq!(h.up(), 0);
        }
    }
    upstream.set(move |_| ok(good.clone()));
    assert!(m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.gone(), 0);
    assert_eq!(h.up(), 1);
}

const SUB: &str = "fdea43ea-0230-4a7d-bdee-f3aff2183b1d";

fn arm_list(n: usize) -> Value {
    let value: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "id": format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c{i}"),
                "name": format!("c{i}"),
                "properties": {"provisioningState": "Succeeded"}
            })
        })
        .collect();
    json!({ "value": value })
}

fn rp_source(h: &Harness, base: &Url) -> RpFrontendSource {
    let cfg = RpFrontendConfig {
        http: http_config(base),
        api_version: "2024-06-10-preview".into(),
        subscriptions: vec![SUB.into()],
        resource_ids: vec![],
        node_pool_rotation: hcp_flow::config::defaults::node_pool_rotation(),
    };
    RpFrontendSource::new(cfg, h.ctx.clone()).unwrap()
}

#[tokio::test]
async fn rp_answer_without_value_forgets_no_cluster() {
    let h = harness("rp_frontend");
    let upstream = StandIn::start(|_| ok(arm_list(3))).await;
    let mut rp = rp_source(&h, &upstream.base);
    assert!(rp.poll_all().await);
    assert_eq!(h.gone(), 0);
    upstream.set(|_| ok(json!({"nextLink": null})));
    for _ in 0..3 {
        assert!(!rp.poll_all().await);
        assert_eq!(h.gone(), 0);
        assert_eq!(h.up(), 0);
    }
    assert_eq!(h.errors(RequestErrorKind::decode), 3);
}

// ------------------------------------------------------------------ mass deletions

#[tokio::test]
async fn a_mass_deletion_waits_for_a_confirming_relist() {
    let h = harness("clusters_service");
    let upstream = StandIn::start(cs_answer(12)).await;
    let mut cs = cs_source(&h, &upstream.base, 1024 * 1024);
    assert!(cs.poll(PollKind::Full).await);
    assert_eq!(h.gone(), 0);

    // One cluster deleted: ordinary, applied at once.
    upstream.set(cs_answer(11));
    assert!(cs.poll(PollKind::Full).await);
    assert_eq!(h.gone(), 1);
    assert_eq!(h.mass_deletions(), 0);

    // 9 of 11 missing: held back, counted once, the poll itself succeeds.
    upstream.set(cs_answer(2));
    assert!(cs.poll(PollKind::Full).await);
    assert_eq!(h.gone(), 0);
    assert_eq!(h.mass_deletions(), 1);
    assert_eq!(h.up(), 1);

    // The next full relist confirms it: applied.
    assert!(cs.poll(PollKind::Full).await);
    assert_eq!(h.gone(), 9);
    assert_eq!(h.mass_deletions(), 1);

    // A mass deletion the next relist does not confirm is never applied.
    upstream.set(cs_answer(12));
    assert!(cs.poll(PollKind::Full).await);
    upstream.set(cs_answer(1));
    assert!(cs.poll(PollKind::Full).await);
    upstream.set(cs_answer(12));
    assert!(cs.poll(PollKind::Full).await);
    assert_eq!(h.gone(), 0);
    assert_eq!(h.mass_deletions(), 2);
}

#[tokio::test]
async fn rp_and_maestro_hold_mass_deletions_back_too() {
    let h = harness("rp_frontend");
    let upstream = StandIn::start(|_| ok(arm_list(10))).await;
    let mut rp = rp_source(&h, &upstream.base);
    assert!(rp.poll_all().await);
    upstream.set(|_| ok(arm_list(0)));
    assert!(rp.poll_all().await);
    assert_eq!(h.gone(), 0);
    assert_eq!(h.mass_deletions(), 1);
    assert!(rp.poll_all().await);
    assert_eq!(h.gone(), 10);

    let h = harness("maestro");
    let bundles: Vec<Value> = (0..10).map(|i| bundle(&format!("b{i}"))).collect();
    let all = bundle_list(&bundles);
    let upstream = StandIn::start(move |_| ok(all.clone())).await;
    let mut m = MaestroSource::with_client(
        MaestroConfig {
            http: http_config(&upstream.base),
            search_scope: None,
            grpc: None,
        },
        h.ctx.clone(),
        client(&h, &upstream.base),
    );
    assert!(m.poll(maestro::PollKind::Full).await);
    upstream.set(|_| ok(bundle_list(&[])));
    assert!(m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.gone(), 0);
    assert_eq!(h.mass_deletions(), 1);
    assert!(m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.gone(), 10);
}
