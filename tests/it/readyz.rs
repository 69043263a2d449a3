//! `/readyz` over HTTP: ready only when every enabled kind of every source has
//! listed once; its JSON names what is pending, failing and disabled, and the
//! last error with its cause.

use crate::common::store;
use hcp_flow::sources::health::KindState;
use serde_json::Value;

async fn readyz(base: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base}/readyz")).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn source<'a>(body: &'a Value, name: &str) -> &'a Value {
    body["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == name)
        .unwrap()
}

#[tokio::test]
async fn readyz_waits_for_every_enabled_kind_and_says_what_is_missing() {
    crate::common::init();
    let store = store::builder().sources(&["maestro", "kube/hub"]).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(hcp_flow::server::serve(
        listener,
        store.clone(),
        std::future::pending(),
    ));
    let health = store.health();

    let (status, body) = readyz(&base).await;
    assert_eq!(status, 503);
    assert_eq!(body["ready"], false);
    assert_eq!(
        source(&body, "maestro")["pending"],
        serde_json::json!(["*"])
    );

    health.declare("kube/hub", &["HostedCluster", "NodePool", "Agent"]);
    health.listed("maestro", "resource-bundles");
    health.listed("kube/hub", "HostedCluster");
    health.failed(
        "kube/hub",
        "NodePool",
        "listing nodepools: connection refused: tcp connect error",
    );
    let (status, body) = readyz(&base).await;
    assert_eq!(status, 503, "one kind has listed, not every kind: {body}");
    let hub = source(&body, "kube/hub");
    assert_eq!(hub["pending"], serde_json::json!(["Agent", "NodePool"]));
    assert_eq!(hub["failing"], serde_json::json!(["NodePool"]));
    assert_eq!(hub["up"], false);
    assert!(
        hub["last_error"]["message"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{hub}"
    );

    // The Agent CRD is not installed: that kind stops holding readiness.
    health.disabled(
        "kube/hub",
        "Agent",
        KindState::absent,
        "agents.agent-install.openshift.io is not served",
    );
    health.listed("kube/hub", "NodePool");
    let (status, body) = readyz(&base).await;
    assert_eq!(status, 200, "{body}");
    let hub = source(&body, "kube/hub");
    assert_eq!(hub["up"], true);
    assert_eq!(hub["disabled"][0]["kind"], "Agent");
    assert_eq!(hub["disabled"][0]["state"], "absent");

    // Ready is "listed once": a later failure downs the source, not readiness.
    health.failed("maestro", "resource-bundles", "GET …: HTTP 503");
    let (status, body) = readyz(&base).await;
    assert_eq!(status, 200);
    assert_eq!(source(&body, "maestro")["up"], false);
}
