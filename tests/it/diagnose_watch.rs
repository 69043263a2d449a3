//! `hcp-flow diagnose --watch --from URL` as a user runs it: the binary,
//! asking a running exporter whose store the test moves. It redraws the
//! walk while the creation is in flight and exits, with the final
//! verdict's code, once the creation completes (docs/design/12-interfaces.md §12.4).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::store;
use hcp_flow::model::testing::{batch, obs};
use hcp_flow::model::{Hop, Phase};
use jiff::Timestamp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_redraws_until_the_creation_completes_and_exits_with_its_code() {
    let store = store::default_store();
    let start = Timestamp::now() - jiff::SignedDuration::from_secs(60);
    store.apply_at(batch(true, start, vec![]), start);
    store.apply_at(
        batch(
            false,
            start,
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(start)
                    .since(start),
                obs("c1", Hop::HostedCluster)
                    .state("Partial", Phase::Progressing)
                    .since(start),
            ],
        ),
        start,
    );
    let listener = hcp_flow::app::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(hcp_flow::server::serve(
        listener,
        store.clone(),
        std::future::pending(),
    ));

    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp-flow"))
        .args([
            "diagnose",
            "c1",
            "--from",
            &base,
            "--watch",
            "--interval",
            "200ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        })
    };
    let seen = |needle: &str| lines.lock().unwrap().iter().any(|l| l.contains(needle));
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !ok() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "never saw {what}:\n{}",
                lines.lock().unwrap().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // In progress: it draws, and draws again.
    wait("a second walk in progress", &|| seen("(walk 2,"));
    assert!(
        child.try_wait().unwrap().is_none(),
        "it stopped while in flight"
    );
    assert!(seen("in progress"), "{}", lines.lock().unwrap().join("\n"));

    // The HostedCluster becomes available: the creation completes, and the
    // watch ends with the verdict's code, 0.
    let done = Timestamp::now();
    store.apply_at(
        batch(
            false,
            done,
            vec![
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(done),
            ],
        ),
        done,
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!(
                "still watching after the creation completed:\n{}",
                lines.lock().unwrap().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        lines.lock().unwrap().join("\n")
    );
    let all = lines.lock().unwrap().join("\n");
    let last = all
        .rsplit("hcp-flow diagnose --watch")
        .next()
        .unwrap_or_default();
    assert!(last.contains("completed in"), "the last frame: {last}");
}
