//! An axum listener that hands out TLS streams.
//!
//! Handshakes run in their own tasks (with a deadline), so a client that
//! connects and says nothing holds up no one else; each handshake takes
//! the TLS configuration current at that moment, so a reloaded
//! certificate is seen by the next connection.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::Current;

/// A client has this long to finish the handshake.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

pub struct TlsListener {
    addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, tls: Current) -> std::io::Result<TlsListener> {
        let addr = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let accepting = tokio::spawn(accept_loop(tcp, tls, tx));
        Ok(TlsListener {
            addr,
            ready,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        // Close the port with the server.
        self.accepting.abort();
    }
}

async fn accept_loop(
    tcp: TcpListener,
    tls: Current,
    tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: pause, as axum does.
                tracing::error!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // TCP_NODELAY: an SSE frame is a small write that must go out now.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let acceptor = TlsAcceptor::from(tls.get());
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(stream)).await {
                Ok(Ok(s)) => {
                    let _ = tx.send((s, peer)).await;
                }
                // A plain-HTTP request or an untrusting client ends here;
                // that is the client's problem, not pamd's.
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task holds a sender until it is aborted on drop.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
