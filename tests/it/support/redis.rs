//! A `redis-server` of one test alone (Debian's `redis-server` package;
//! `scripts/test` installs it): loopback, no persistence, in a temporary
//! directory, killed on drop. Never the machine's shared 6379.
//!
//! Redis cannot bind port 0 and report the port it got, so the test picks
//! a free port below the ephemeral range (`fixed_port.rs`) and lets the
//! child bind it. Another process may take the
//! port in between: the server is ready only once the Redis answering on
//! the port reports the child's own pid (`INFO server`'s `process_id`),
//! and a child that exits (its port taken) is started again on a new one.
//!
//! [`RedisServer::start_tls`] serves TLS only (`--port 0 --tls-port`), on
//! a certificate for 127.0.0.1 signed by the test's own CA.

use std::{
    path::PathBuf,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

/// How long a child has to answer before the test fails.
const START_WAIT: Duration = Duration::from_secs(10);

/// A running `redis-server` of this test.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    password: Option<String>,
    /// The TLS files of a server started with [`RedisServer::start_tls`],
    /// and whether clients must present a certificate.
    tls: Option<(TlsFiles, bool)>,
}

/// The certificate, key and CA files of a Redis serving TLS (for
/// 127.0.0.1, of the test's own CA). Files, not the test CA itself:
/// `examples/rolling_restart` builds this file without `support::tls`.
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl TlsFiles {
    /// The flags of a Redis serving on `port` with these files: TLS only
    /// (`--port 0`, so nothing answers in plaintext), reaching its master
    /// and cluster peers over TLS too, asking clients for a certificate
    /// when `auth_clients`.
    pub fn args(&self, port: u16, auth_clients: bool) -> Vec<String> {
        let path = |p: &PathBuf| p.display().to_string();
        let auth = if auth_clients { "yes" } else { "no" };
        [
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--tls-cert-file",
            &path(&self.cert),
            "--tls-key-file",
            &path(&self.key),
            "--tls-ca-cert-file",
            &path(&self.ca),
            "--tls-auth-clients",
            auth,
            "--tls-replication",
            "yes",
            "--tls-cluster",
            "yes",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// What the test's own client uses: the CA and, for a Redis that asks
    /// clients for a certificate, the server's own (its key usage allows
    /// it).
    pub fn certificates(&self, present_certificate: bool) -> redis::TlsCertificates {
        let read = |p: &PathBuf| std::fs::read(p).expect("a test TLS file");
        redis::TlsCertificates {
            client_tls: present_certificate.then(|| redis::ClientTlsConfig {
                client_cert: read(&self.cert),
                client_key: read(&self.key),
            }),
            root_cert: Some(read(&self.ca)),
        }
    }
}

/// A port below the ephemeral range (`support/fixed_port.rs`): the
/// server binds it again as it restarts, and no connection of the suite
/// can take it meanwhile.
fn free_port() -> u16 {
    crate::fixed_port::fixed_port().expect("a free loopback port")
}

impl RedisServer {
    /// A server without a password.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// A server that requires `password` (`requirepass`), if any.
    pub fn start_with(password: Option<&str>) -> Self {
        Self::start_on(password, None)
    }

    /// A server that speaks TLS only, on the certificate and key of these
    /// PEM files (for 127.0.0.1), trusting the CAs of `ca` for clients
    /// that present one (none need to).
    pub fn start_tls(cert: PathBuf, key: PathBuf, ca: PathBuf) -> Self {
        Self::start_tls_asking(cert, key, ca, false)
    }

    /// As [`RedisServer::start_tls`], but every client must present a
    /// certificate issued by the CAs of `ca` (`--tls-auth-clients yes`,
    /// Redis's default); the test's own client presents the server's.
    pub fn start_mtls(cert: PathBuf, key: PathBuf, ca: PathBuf) -> Self {
        Self::start_tls_asking(cert, key, ca, true)
    }

    fn start_tls_asking(cert: PathBuf, key: PathBuf, ca: PathBuf, require_client: bool) -> Self {
        Self::start_on(None, Some((TlsFiles { cert, key, ca }, require_client)))
    }

    fn start_on(password: Option<&str>, tls: Option<(TlsFiles, bool)>) -> Self {
        let dir = std::env::temp_dir().join(format!("idgate-test-redis-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("redis temp dir");
        let mut server = Self {
            port: free_port(),
            dir,
            child: None,
            password: password.map(str::to_owned),
            tls,
        };
        // A port taken between `free_port` and the child's bind: another.
        while !server.spawn() {
            server.port = free_port();
        }
        server
    }

    /// Starts the child on `self.port` and waits until it answers there;
    /// false if it exited first (the port was taken).
    fn spawn(&mut self) -> bool {
        let listen = match &self.tls {
            None => vec!["--port".to_owned(), self.port.to_string()],
            Some((files, require_client)) => files.args(self.port, *require_client),
        };
        let mut child = crate::child_env::command("redis-server")
            .args(listen)
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(
                self.password
                    .iter()
                    .flat_map(|p| ["--requirepass", p.as_str()]),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| spawn_failed(&e));
        if !answers_as_itself(&mut child, self.port, || self.pid_on_port()) {
            return false;
        }
        self.child = Some(child);
        true
    }

    /// The pid of the Redis answering on the port, if one does.
    fn pid_on_port(&self) -> Option<u32> {
        let client = self.open_client();
        let mut conn = client
            .get_connection_with_timeout(Duration::from_millis(500))
            .ok()?;
        let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
        process_id(&info)
    }

    /// Stops the server (its data is gone: no persistence).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again, empty, on the same port (the replicas' URL); fails
    /// the test if another process took the port meanwhile.
    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.spawn(),
            "redis-server could not take port {} again",
            self.port
        );
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://` for TLS (no password:
    /// configure it apart).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// A client of the test's own, with the password, trusting the test's
    /// CA for TLS.
    fn open_client(&self) -> redis::Client {
        let url = match &self.password {
            Some(p) => self.url().replacen("://", &format!("://:{p}@"), 1),
            None => self.url(),
        };
        match &self.tls {
            None => redis::Client::open(url),
            Some((files, require_client)) => {
                redis::Client::build_with_tls(url, files.certificates(*require_client))
            }
        }
        .expect("redis url")
    }

    /// Its password, if any.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// A connection of the test's own.
    pub async fn client(&self) -> redis::aio::MultiplexedConnection {
        self.open_client()
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis")
    }

    /// Every key, in no order (`SCAN`).
    pub async fn keys(&self) -> Vec<String> {
        let mut conn = self.client().await;
        let mut iter: redis::AsyncIter<String> =
            redis::AsyncCommands::scan(&mut conn).await.expect("scan");
        let mut keys = Vec::new();
        while let Some(k) = iter.next_item().await {
            keys.push(k.expect("key"));
        }
        keys
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Panics naming the package a missing `redis-server` comes from.
pub fn spawn_failed(e: &std::io::Error) -> ! {
    panic!(
        "cannot run redis-server ({e}): these tests need Debian's `redis-server` package (scripts/test installs it)"
    )
}

/// `process_id` of an `INFO server` answer.
pub fn process_id(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

/// Waits until the Redis answering on `port` is `child` itself
/// (`pid_on_port` reads its `process_id`): true then; false when the
/// child exits first (its port was taken meanwhile). A child that never
/// answers is killed and the test fails.
pub fn answers_as_itself(
    child: &mut Child,
    port: u16,
    pid_on_port: impl Fn() -> Option<u32>,
) -> bool {
    let deadline = Instant::now() + START_WAIT;
    loop {
        if child.try_wait().expect("redis-server status").is_some() {
            return false;
        }
        if pid_on_port() == Some(child.id()) {
            return true;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("redis-server did not answer on port {port}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
