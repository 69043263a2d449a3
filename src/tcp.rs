//! Listeners whose connections send what is written at once (`TCP_NODELAY`),
//! for the exporter's HTTP server and the simulated upstreams alike.
//!
//! Go's net/http turns Nagle's algorithm off on every connection, so
//! Prometheus' own exporters and every real upstream (the RP frontend,
//! Clusters Service, Maestro, a kube-apiserver) answer that way. Left on, a
//! response's last short segment or a watch event waits for the peer's ACK,
//! which its kernel delays by up to 40 ms (docs/design/05-metrics.md §5.5).

use std::net::SocketAddr;

use axum::serve::{Listener, ListenerExt};
use tokio::net::{TcpListener, TcpStream};

/// `listener`, with `TCP_NODELAY` set on each connection it accepts. A
/// socket that refuses the option is served as it is (slower, not wrong).
pub fn no_delay(listener: TcpListener) -> impl Listener<Io = TcpStream, Addr = SocketAddr> {
    listener.tap_io(|stream: &mut TcpStream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY refused; serving the connection as it is");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a connection accepted on a loopback listener, as `wrap`
    /// makes it, has `TCP_NODELAY` set.
    async fn accepted_nodelay<L: Listener<Io = TcpStream>>(
        wrap: impl FnOnce(TcpListener) -> L,
    ) -> bool {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let at = listener.local_addr().expect("local address");
        let mut listener = wrap(listener);
        let _client = TcpStream::connect(at).await.expect("connect on loopback");
        let (stream, _) = listener.accept().await;
        stream.nodelay().expect("read TCP_NODELAY")
    }

    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        assert!(accepted_nodelay(no_delay).await);
    }

    /// The kernel's default, which the wrapper exists to change: were it on
    /// already, the test above would prove nothing.
    #[tokio::test]
    async fn a_plain_listener_keeps_nagle_on() {
        assert!(!accepted_nodelay(|listener| listener).await);
    }
}
