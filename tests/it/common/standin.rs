//! A raw-TCP stand-in of an upstream, for what an HTTP framework cannot
//! do on purpose: accept and never answer, send headers then drip the
//! body, answer bytes that are not JSON. It records each request's target
//! and headers (the traceparent test reads them).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use url::Url;

/// What the stand-in does with one request.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// Answer this status and body at once.
    Answer(u16, String),
    /// Keep the connection open and never answer.
    Freeze,
    /// Send the headers (with the body's full length), then the body one
    /// byte every 200 ms.
    Drip(String),
}

/// One request as the stand-in received it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Path and query.
    pub target: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

type Decide = Arc<dyn Fn(&Seen) -> Behaviour + Send + Sync>;

pub struct StandIn {
    pub base: Url,
    decide: Arc<Mutex<Decide>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl StandIn {
    pub async fn start(decide: impl Fn(&Seen) -> Behaviour + Send + Sync + 'static) -> StandIn {
        let decide: Arc<Mutex<Decide>> = Arc::new(Mutex::new(Arc::new(decide)));
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (d, s) = (decide.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (d, s) = (d.clone(), s.clone());
                tokio::spawn(serve(socket, d, s));
            }
        });
        StandIn {
            base: Url::parse(&format!("http://{addr}")).unwrap(),
            decide,
            seen,
        }
    }

    /// Change what the stand-in does from the next request on.
    pub fn set(&self, decide: impl Fn(&Seen) -> Behaviour + Send + Sync + 'static) {
        *self.decide.lock() = Arc::new(decide);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }

    /// The requests received since the last call.
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock())
    }
}

async fn serve(
    mut socket: tokio::net::TcpStream,
    decide: Arc<Mutex<Decide>>,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = head.split("\r\n");
    let target = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_string();
    let headers = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let request = Seen { target, headers };
    seen.lock().push(request.clone());
    let decide = decide.lock().clone();
    let head = |status: u16, len: usize| {
        format!(
            "HTTP/1.1 {status} Stand-in\r\nContent-Type: application/json\r\n\
             Content-Length: {len}\r\nConnection: close\r\n\r\n"
        )
    };
    match decide(&request) {
        Behaviour::Answer(status, body) => {
            let _ = socket.write_all(head(status, body.len()).as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Behaviour::Freeze => tokio::time::sleep(Duration::from_secs(3600)).await,
        Behaviour::Drip(body) => {
            let _ = socket.write_all(head(200, body.len()).as_bytes()).await;
            for byte in body.as_bytes() {
                if socket.write_all(&[*byte]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
