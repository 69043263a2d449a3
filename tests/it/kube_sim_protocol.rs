//! The simulated API server speaks the list/watch protocol itself: checked
//! over raw HTTP, independent of any client library.

use std::time::Duration;

use hcp_flow::sim::kube::{KubeApiHandle, KubeApiServer};
use serde_json::{Value, json};

fn http() -> reqwest::Client {
    crate::common::init();
    reqwest::Client::new()
}

fn hc(ns: &str, name: &str, labels: Value) -> Value {
    json!({"kind": "HostedCluster", "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {}})
}

async fn get(url: &str) -> (u16, Value) {
    let resp = http().get(url).send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap())
}

/// Read watch lines until `n` arrived or the stream ends/times out.
async fn watch_lines(url: &str, n: usize) -> Vec<Value> {
    let mut resp = http().get(url).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while out.len() < n {
        let next = tokio::time::timeout_at(deadline, resp.chunk()).await;
        let Ok(Ok(Some(chunk))) = next else { break };
        buf.extend_from_slice(&chunk);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
    }
    out
}

async fn server_with(objects: &[Value]) -> (KubeApiHandle, String) {
    let (server, url) = KubeApiServer::start().await.unwrap();
    for o in objects {
        server.apply(o.clone()).unwrap();
    }
    (server, url)
}

const HCS: &str = "/apis/hypershift.openshift.io/v1beta1";

#[tokio::test]
async fn list_pages_with_continue_and_an_unknown_token_is_gone() {
    let objs: Vec<Value> = (0..5)
        .map(|i| hc("ns", &format!("hc{i}"), json!({})))
        .collect();
    let (_server, url) = server_with(&objs).await;
    let (code, page1) = get(&format!("{url}{HCS}/hostedclusters?limit=2")).await;
    assert_eq!(code, 200);
    assert_eq!(page1["kind"], "HostedClusterList");
    assert_eq!(page1["apiVersion"], "hypershift.openshift.io/v1beta1");
    assert_eq!(page1["items"].as_array().unwrap().len(), 2);
    let rv = page1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut token = page1["metadata"]["continue"].as_str().unwrap().to_string();
    let mut names = vec![];
    names.extend(
        page1["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].clone()),
    );
    while !token.is_empty() {
        let (_, page) = get(&format!(
            "{url}{HCS}/hostedclusters?limit=2&continue={token}"
        ))
        .await;
        assert_eq!(
            page["metadata"]["resourceVersion"].as_str().unwrap(),
            rv,
            "pages share the list's version"
        );
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].clone()),
        );
        token = page["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    }
    assert_eq!(names.len(), 5);
    let (code, status) = get(&format!("{url}{HCS}/hostedclusters?limit=2&continue=999-2")).await;
    assert_eq!(code, 410);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Expired");
    assert_eq!(status["code"], 410);
}

#[tokio::test]
async fn selectors_filter_lists() {
    let (_server, url) = server_with(&[
        hc("ns1", "a", json!({"tier": "gold", "id": "1"})),
        hc("ns1", "b", json!({"tier": "silver"})),
        hc("ns2", "c", json!({"tier": "gold"})),
    ])
    .await;
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let cases = [
        (
            format!("{HCS}/hostedclusters?labelSelector=tier%3Dgold"),
            vec!["a", "c"],
        ),
        (
            format!("{HCS}/hostedclusters?labelSelector=tier%21%3Dgold"),
            vec!["b"],
        ),
        (
            format!("{HCS}/hostedclusters?labelSelector=tier%20in%20(silver,bronze)"),
            vec!["b"],
        ),
        (
            format!("{HCS}/hostedclusters?labelSelector=tier%20notin%20(silver)"),
            vec!["a", "c"],
        ),
        (format!("{HCS}/hostedclusters?labelSelector=id"), vec!["a"]),
        (
            format!("{HCS}/hostedclusters?labelSelector=%21id"),
            vec!["b", "c"],
        ),
        (
            format!("{HCS}/hostedclusters?fieldSelector=metadata.name%3Dc"),
            vec!["c"],
        ),
        (
            format!("{HCS}/namespaces/ns1/hostedclusters"),
            vec!["a", "b"],
        ),
        (
            format!("{HCS}/hostedclusters?fieldSelector=metadata.namespace%21%3Dns1"),
            vec!["c"],
        ),
    ];
    for (path, want) in cases {
        let (code, list) = get(&format!("{url}{path}")).await;
        assert_eq!(code, 200, "{path}");
        assert_eq!(names(&list), want, "{path}");
    }
    let (code, _) = get(&format!(
        "{url}{HCS}/hostedclusters?fieldSelector=spec.x%3D1"
    ))
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn watch_resumes_from_a_version_and_translates_selector_moves() {
    let (server, url) = server_with(&[hc("ns", "a", json!({"tier": "gold"}))]).await;
    let rv = server.resource_version();
    server
        .apply(hc("ns", "b", json!({"tier": "gold"})))
        .unwrap();
    server
        .apply(hc("ns", "a", json!({"tier": "silver"})))
        .unwrap();
    server
        .apply(hc("ns", "c", json!({"tier": "silver"})))
        .unwrap();
    server.delete("HostedCluster", Some("ns"), "b");
    let lines = watch_lines(
        &format!("{url}{HCS}/hostedclusters?watch=1&resourceVersion={rv}&labelSelector=tier%3Dgold&timeoutSeconds=1"),
        10,
    )
    .await;
    let seen: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap().to_string(),
                l["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let want = [("ADDED", "b"), ("DELETED", "a"), ("DELETED", "b")];
    assert_eq!(
        seen,
        want.map(|(t, n)| (t.to_string(), n.to_string())),
        "a leaving the selector is a DELETED"
    );
}

#[tokio::test]
async fn watch_from_an_expired_version_gets_a_410_status_event() {
    let (server, url) = server_with(&[hc("ns", "a", json!({}))]).await;
    let rv = server.resource_version();
    server.compact();
    let lines = watch_lines(
        &format!("{url}{HCS}/hostedclusters?watch=true&resourceVersion={rv}"),
        2,
    )
    .await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"]["code"], 410);
    assert_eq!(lines[0]["object"]["reason"], "Expired");

    // A short history expires old versions on its own.
    server.set_history_limit(2);
    let rv = server.resource_version();
    for i in 0..4 {
        server.apply(hc("ns", &format!("n{i}"), json!({}))).unwrap();
    }
    let lines = watch_lines(
        &format!("{url}{HCS}/hostedclusters?watch=1&resourceVersion={rv}"),
        2,
    )
    .await;
    assert_eq!(lines[0]["type"], "ERROR");
}

#[tokio::test]
async fn bookmarks_and_live_events_stream() {
    let (server, url) = server_with(&[]).await;
    server.set_bookmark_interval(Duration::from_millis(50));
    let rv = server.resource_version();
    let watch_url = format!(
        "{url}/api/v1/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2"
    );
    let reader = tokio::spawn(async move { watch_lines(&watch_url, 4).await });
    tokio::time::sleep(Duration::from_millis(120)).await;
    server
        .apply(json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "cp"}, "status": {"phase": "Running"}}))
        .unwrap();
    let lines = reader.await.unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "BOOKMARK" && l["object"]["kind"] == "Pod"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "ADDED" && l["object"]["metadata"]["name"] == "p"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn discovery_and_version_answer() {
    let (_server, url) = server_with(&[]).await;
    let (_, version) = get(&format!("{url}/version")).await;
    assert_eq!(version["major"], "1");
    let (_, groups) = get(&format!("{url}/apis")).await;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"hypershift.openshift.io")
            && names.contains(&"work.open-cluster-management.io")
    );
    let (_, resources) = get(&format!("{url}{HCS}")).await;
    assert_eq!(resources["kind"], "APIResourceList");
    assert_eq!(resources["resources"].as_array().unwrap().len(), 3);
    let (_, core) = get(&format!("{url}/api/v1")).await;
    assert_eq!(core["resources"][0]["name"], "pods");
    let (code, _) = get(&format!("{url}/apis/nope/v1/things")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn a_missing_crd_is_404_and_a_forbidden_kind_403_like_a_real_server() {
    let (server, url) = server_with(&[]).await;
    assert!(server.set_installed("Agent", false));
    let (code, discovery) = get(&format!("{url}/apis/agent-install.openshift.io/v1beta1")).await;
    assert_eq!(code, 404, "the group is no longer served: {discovery}");
    let (_, groups) = get(&format!("{url}/apis")).await;
    assert!(!groups.to_string().contains("agent-install"), "{groups}");
    let (code, body) = get(&format!(
        "{url}/apis/agent-install.openshift.io/v1beta1/agents"
    ))
    .await;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")));

    assert!(server.set_forbidden("HostedCluster", true));
    let (code, body) = get(&format!(
        "{url}/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters"
    ))
    .await;
    assert_eq!(code, 403);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "Forbidden");
    assert!(
        body["message"].as_str().unwrap().contains(
            "cannot list resource \"hostedclusters\" in API group \"hypershift.openshift.io\" in the namespace \"clusters\""
        ),
        "{body}"
    );
}

#[tokio::test]
async fn a_frozen_server_holds_requests_and_watches_until_thawed() {
    let (server, url) = server_with(&[hc("clusters", "a", json!({}))]).await;
    server.set_bookmark_interval(Duration::from_millis(50));
    let list = format!("{url}/apis/hypershift.openshift.io/v1beta1/hostedclusters");
    let mut watch = http()
        .get(format!(
            "{list}?watch=1&allowWatchBookmarks=true&resourceVersion=1"
        ))
        .send()
        .await
        .unwrap();
    // The replayed ADDED line arrives before the freeze.
    assert!(watch.chunk().await.unwrap().is_some());
    server.freeze();
    // Drain whatever was in flight, then nothing at all, not even bookmarks.
    while let Ok(chunk) = tokio::time::timeout(Duration::from_millis(150), watch.chunk()).await {
        assert!(chunk.unwrap().is_some(), "the watch stays open");
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(400), watch.chunk())
            .await
            .is_err(),
        "a frozen watch sends nothing"
    );
    let pending = tokio::spawn({
        let list = list.clone();
        async move { get(&list).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!pending.is_finished(), "a frozen server answers nothing");
    server.unfreeze();
    let (code, body) = pending.await.unwrap();
    assert_eq!(code, 200, "{body}");
    let line = tokio::time::timeout(Duration::from_secs(2), watch.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&line).contains("BOOKMARK"));
}
