//! The in-process fleet of examples/fleet_capacity and examples/fleet_cost:
//! a `redis-server` of the run's own (tests/it/support/redis.rs: a free
//! loopback port, ready once the Redis answering there reports the child's
//! own `process_id`), one sandbox, and gateway configurations on them.
//! Included by path: examples cannot share a library.

#[path = "../../tests/it/support/redis.rs"]
#[allow(dead_code)]
pub mod redis_server;

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use idgate::{
    channels::ChannelSpec,
    config::{Config, OperatorConfig, UpstreamConfig},
    sandbox::{ManualClock, Sandbox, SandboxConfig, SandboxHandle},
};

use self::redis_server::RedisServer;

/// The webhook password of every gateway of the fleet.
pub const BASIC_PASSWORD: &str = "bench-webhook-password";

/// Redis, the sandbox, and the secret files the configurations name.
pub struct Fleet {
    pub redis: RedisServer,
    pub sandbox: SandboxHandle,
    dir: PathBuf,
}

impl Fleet {
    /// Starts Redis and the sandbox (on a manual clock: nothing expires
    /// during a run).
    pub async fn start() -> Self {
        Self::start_with(SandboxConfig::default()).await
    }

    /// [`Fleet::start`] with the sandbox configured as `sandbox` says.
    pub async fn start_with(sandbox: SandboxConfig) -> Self {
        let redis = RedisServer::start();
        let sandbox = Sandbox::start(sandbox, Arc::new(ManualClock::new()))
            .await
            .expect("sandbox");
        let dir = std::env::temp_dir().join(format!("idgate-fleet-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self {
            redis,
            sandbox,
            dir,
        }
    }

    fn secret(&self, name: &str, content: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, content).expect("secret file");
        path
    }

    /// A gateway on loopback ports of its own, on the sandbox, open (the
    /// benchmark's own callers: no caller authentication); with `cluster`,
    /// a replica of the fleet on its Redis.
    pub fn config(&self, cluster: bool) -> Config {
        let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
        let mut c = Config::default();
        c.listen.grpc = loopback;
        c.listen.http = loopback;
        c.listen.admin = loopback;
        c.serving.drain_delay_secs = 0;
        c.auth = Some(idgate::auth::AuthConfig {
            mode: idgate::auth::AuthMode::None,
            jwt: None,
            allow_plaintext_tokens: false,
        });
        c.upstream = Some(UpstreamConfig {
            base_url: self.sandbox.base_url(),
            result_base_url: self.sandbox.result_base_url(),
            ..UpstreamConfig::default()
        });
        c.operators = vec![OperatorConfig {
            name: "default".into(),
            login: "sandbox".into(),
            password_env: None,
            password_file: Some(self.secret("operator-password", "sandbox")),
        }];
        c.channels = self
            .sandbox
            .channels()
            .into_iter()
            .zip(0..)
            .map(|(ch, p)| ChannelSpec::new(ch.name, ch.base_url, p))
            .collect();
        c.webhook.basic_user = Some("vendor".into());
        c.webhook.basic_password_file = Some(self.secret("webhook-password", BASIC_PASSWORD));
        if cluster {
            c.cluster.redis_url = Some(self.redis.url());
            c.cluster.secret_key_file = Some(self.secret(
                "cluster-key",
                "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
            ));
        }
        c
    }

    /// Stops the sandbox; Redis stops and the secret files go on drop.
    pub async fn shutdown(self) {
        let Self {
            redis,
            sandbox,
            dir,
        } = self;
        sandbox.shutdown().await;
        drop(redis);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
