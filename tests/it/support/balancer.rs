//! A TCP balancer on a loopback port: each new connection goes to the
//! next backend in turn (round robin per connection, as a ClusterIP
//! Service or an L4 load balancer spreads connections, never calls), and
//! is counted per backend. With one backend it is a counting proxy: the
//! test learns how many connections a client opened.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use tokio::{
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

/// A round-robin TCP balancer in front of some backends.
pub struct Balancer {
    addr: SocketAddr,
    accepted: Arc<Mutex<Vec<usize>>>,
    acceptor: JoinHandle<()>,
}

impl Balancer {
    /// A balancer on `127.0.0.1:0` in front of `backends`.
    pub async fn start(backends: Vec<SocketAddr>) -> Self {
        assert!(!backends.is_empty(), "a balancer needs a backend");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("balancer port");
        let addr = listener.local_addr().expect("balancer address");
        let accepted = Arc::new(Mutex::new(vec![0; backends.len()]));
        let counts = Arc::clone(&accepted);
        let acceptor = tokio::spawn(async move {
            let mut next = 0;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let backend = next % backends.len();
                next += 1;
                counts.lock().expect("balancer counts")[backend] += 1;
                let target = backends[backend];
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = outbound.set_nodelay(true);
                        let _ = inbound.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            addr,
            accepted,
            acceptor,
        }
    }

    /// The `http://` URL clients connect to.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far, per backend (in the order given).
    pub fn accepted(&self) -> Vec<usize> {
        self.accepted.lock().expect("balancer counts").clone()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}
