//! The simulated upstreams' listeners send what is written at once
//! (`TCP_NODELAY`), as Go's net/http does on every connection of the real
//! ones (the RP frontend, Clusters Service, Maestro, a kube-apiserver).
//! The exporter's own server does the same for its scrapes, in its own crate.

use std::net::SocketAddr;

use axum::serve::{Listener, ListenerExt};
use tokio::net::{TcpListener, TcpStream};

/// `listener`, with `TCP_NODELAY` set on each connection it accepts.
pub(crate) fn no_delay(listener: TcpListener) -> impl Listener<Io = TcpStream, Addr = SocketAddr> {
    listener.tap_io(|stream: &mut TcpStream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY refused; serving the connection as it is");
        }
    })
}
