//! A TCP proxy the test can cut: a replica's only path to its Redis.
//!
//! Cutting it closes every connection through it and refuses new ones
//! (accepted, then dropped at once), as a network partition between one
//! replica and Redis looks from that replica; the other replicas, on
//! Redis directly, see nothing. Restoring it lets connections through
//! again. The test learns that the replica tried and failed to reconnect
//! from [`CutProxy::refused`], not from a delay it hopes is long enough.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use tokio::{
    net::{TcpListener, TcpStream},
    task::{AbortHandle, JoinHandle},
};

#[derive(Default)]
struct State {
    open: AtomicBool,
    refused: AtomicUsize,
    links: Mutex<Vec<AbortHandle>>,
}

/// A proxy on a loopback port to one target.
pub struct CutProxy {
    addr: SocketAddr,
    state: Arc<State>,
    acceptor: JoinHandle<()>,
}

impl CutProxy {
    /// A proxy to `target`, letting connections through.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy port");
        let addr = listener.local_addr().expect("proxy address");
        let state = Arc::new(State::default());
        state.open.store(true, Ordering::SeqCst);
        let shared = state.clone();
        let acceptor = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !shared.open.load(Ordering::SeqCst) {
                    shared.refused.fetch_add(1, Ordering::SeqCst);
                    drop(inbound);
                    continue;
                }
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                shared.links.lock().unwrap().push(link.abort_handle());
            }
        });
        Self {
            addr,
            state,
            acceptor,
        }
    }

    /// `redis://` URL of the proxy.
    pub fn redis_url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Closes every connection through the proxy and refuses new ones.
    pub fn cut(&self) {
        self.state.open.store(false, Ordering::SeqCst);
        for link in self.state.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.state.open.store(true, Ordering::SeqCst);
    }

    /// Connections refused while cut, so far.
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.cut();
        self.acceptor.abort();
    }
}
